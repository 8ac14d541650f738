//! A real kube-runtime `Controller` against a mocked API server, under
//! tokio's paused time: the exact reconcile timeline of each object.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::channel::mpsc;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{Counters, ObjectBackoff};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::time::Instant;

type Body = UnsyncBoxBody<Bytes, Infallible>;

fn configmap(name: &str, resource_version: u32) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.namespace = Some("default".to_owned());
    cm.metadata.resource_version = Some(resource_version.to_string());
    cm.metadata.uid = Some(format!("uid-{name}"));
    cm
}

/// What the mocked API server holds: the objects its list returns, and
/// watch events (`MODIFIED`) to send at given times after the start.
struct ApiServer {
    objects: Vec<ConfigMap>,
    modified_at: Vec<(Duration, String)>,
}

impl ApiServer {
    /// Answers the controller's list and watch requests until the test ends.
    async fn serve(
        self,
        mut handle: tower_test::mock::Handle<Request<kube::client::Body>, Response<Body>>,
    ) {
        let t0 = Instant::now();
        let mut events = Some(self.modified_at);
        while let Some((request, respond)) = handle.next_request().await {
            let query = request.uri().query().unwrap_or_default().to_owned();
            assert!(
                request
                    .uri()
                    .path()
                    .ends_with("/namespaces/default/configmaps"),
                "unexpected request {}",
                request.uri()
            );
            if query.contains("watch=true") {
                let (tx, rx) = mpsc::unbounded::<Result<http_body::Frame<Bytes>, Infallible>>();
                let scheduled = events.take().unwrap_or_default();
                tokio::spawn(async move {
                    for (i, (at, name)) in scheduled.into_iter().enumerate() {
                        tokio::time::sleep_until(t0 + at).await;
                        let event = serde_json::json!({
                            "type": "MODIFIED",
                            "object": configmap(&name, 100 + i as u32),
                        });
                        let mut line = serde_json::to_vec(&event).unwrap();
                        line.push(b'\n');
                        tx.unbounded_send(Ok(http_body::Frame::data(Bytes::from(line))))
                            .unwrap();
                    }
                    // The watch stays open for the rest of the test.
                    std::future::pending::<()>().await;
                    drop(tx);
                });
                respond.send_response(Response::new(StreamBody::new(rx).boxed_unsync()));
            } else {
                let list = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMapList",
                    "metadata": { "resourceVersion": "1" },
                    "items": self.objects,
                });
                let body =
                    Full::new(Bytes::from(serde_json::to_vec(&list).unwrap())).boxed_unsync();
                respond.send_response(Response::new(body));
            }
        }
    }
}

#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reconcile failed")
    }
}

impl std::error::Error for Failed {}

/// The controller's context: each object's scripted outcomes (failures
/// before success, then failures again) and the log of reconcile bodies run.
struct Ctx {
    t0: Instant,
    /// Per object: outcomes in order (`true` = success); after the list
    /// runs out, every run fails.
    script: HashMap<String, Vec<bool>>,
    runs: Mutex<Vec<(String, Duration)>>,
}

impl Ctx {
    fn new(script: &[(&str, &[bool])]) -> Arc<Self> {
        Arc::new(Self {
            t0: Instant::now(),
            script: script
                .iter()
                .map(|(n, s)| ((*n).to_owned(), s.to_vec()))
                .collect(),
            runs: Mutex::new(Vec::new()),
        })
    }

    /// The times (seconds after the start) at which `name`'s body ran.
    fn timeline(&self, name: &str) -> Vec<f64> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| at.as_secs_f64())
            .collect()
    }
}

async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Failed> {
    let name = cm.metadata.name.clone().unwrap();
    let run = {
        let mut runs = ctx.runs.lock().unwrap();
        runs.push((name.clone(), ctx.t0.elapsed()));
        runs.iter().filter(|(n, _)| *n == name).count() - 1
    };
    let succeeds = ctx
        .script
        .get(&name)
        .and_then(|s| s.get(run))
        .copied()
        .unwrap_or(false);
    if succeeds {
        Ok(Action::await_change())
    } else {
        Err(Failed)
    }
}

/// Runs a Controller over `server` with `backoff` for `horizon` of paused
/// time and returns the context with its log.
async fn run_controller(
    server: ApiServer,
    backoff: &ObjectBackoff<ConfigMap>,
    script: &[(&str, &[bool])],
    horizon: Duration,
) -> Arc<Ctx> {
    let (service, handle) = tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
    tokio::spawn(server.serve(handle));
    let client = Client::new(service, "default");
    let ctx = Ctx::new(script);
    let controller = Controller::new(
        Api::<ConfigMap>::namespaced(client, "default"),
        watcher::Config::default(),
    )
    .run(
        backoff.reconciler(reconcile),
        backoff.error_policy(),
        Arc::clone(&ctx),
    )
    .for_each(|_| async {});
    let task = tokio::spawn(controller);
    tokio::time::sleep(horizon).await;
    task.abort();
    ctx
}

fn one_to_sixteen(skip: bool) -> ObjectBackoff<ConfigMap> {
    ObjectBackoff::builder(Duration::from_secs(1), Duration::from_secs(16))
        .skip_while_in_backoff(skip)
        .build()
        .unwrap()
}

fn gaps(timeline: &[f64]) -> Vec<f64> {
    timeline.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn an_object_that_always_fails_backs_off_doubling_to_the_cap() {
    let backoff = one_to_sixteen(false);
    let server = ApiServer {
        objects: vec![configmap("broken", 1)],
        modified_at: vec![],
    };
    let ctx = run_controller(server, &backoff, &[], Duration::from_secs(60)).await;
    let timeline = ctx.timeline("broken");
    assert_eq!(timeline, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!(gaps(&timeline), [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]);
    let broken = configmap("broken", 1);
    assert_eq!(backoff.attempts(&broken), 7);
    let mut only_failures = Counters::default();
    only_failures.failures = 7;
    assert_eq!(backoff.counters(), only_failures);
}

#[tokio::test(start_paused = true)]
async fn an_object_that_recovers_is_reset_and_starts_over_at_the_initial_delay() {
    let backoff = one_to_sixteen(false);
    // Fails three times, succeeds, then (after a watch event at 20 s) fails
    // again: the new failures start at 1 s, not where the old ones stopped.
    let server = ApiServer {
        objects: vec![configmap("flaky", 1), configmap("broken", 1)],
        modified_at: vec![(Duration::from_secs(20), "flaky".to_owned())],
    };
    let script: &[(&str, &[bool])] = &[("flaky", &[false, false, false, true])];
    let ctx = run_controller(server, &backoff, script, Duration::from_secs(40)).await;
    let flaky = ctx.timeline("flaky");
    assert_eq!(flaky, [0.0, 1.0, 3.0, 7.0, 20.0, 21.0, 23.0, 27.0, 35.0]);
    assert_eq!(gaps(&flaky[..4]), [1.0, 2.0, 4.0]);
    assert_eq!(gaps(&flaky[4..]), [1.0, 2.0, 4.0, 8.0]);
    // The other object is not affected by the first one's reset.
    assert_eq!(ctx.timeline("broken"), [0.0, 1.0, 3.0, 7.0, 15.0, 31.0]);
    let c = backoff.counters();
    assert_eq!((c.successes, c.refusals), (1, 0));
    assert_eq!(backoff.attempts(&configmap("flaky", 1)), 5);
}

/// An object that always fails gets a watch event at 2 s: it failed at 1 s
/// and is due again at 3 s. Returns its reconcile timeline and the counters.
async fn touched_during_backoff(skip: bool) -> (Vec<f64>, Counters, u32) {
    let backoff = one_to_sixteen(skip);
    let server = ApiServer {
        objects: vec![configmap("touched", 1)],
        modified_at: vec![(Duration::from_secs(2), "touched".to_owned())],
    };
    let ctx = run_controller(server, &backoff, &[], Duration::from_secs(60)).await;
    let attempts = backoff.attempts(&configmap("touched", 1));
    (ctx.timeline("touched"), backoff.counters(), attempts)
}

#[tokio::test(start_paused = true)]
async fn a_watch_event_during_backoff_runs_early_but_is_not_counted_as_a_failure() {
    let (timeline, c, attempts) = touched_during_backoff(false).await;
    assert_eq!(timeline, [0.0, 1.0, 2.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!((c.failures, c.refusals, c.skips), (7, 1, 0));
    assert_eq!(attempts, 7);
}

#[tokio::test(start_paused = true)]
async fn with_skipping_a_watch_event_during_backoff_does_not_run_the_body() {
    let (timeline, c, attempts) = touched_during_backoff(true).await;
    assert_eq!(timeline, [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 47.0]);
    assert_eq!((c.failures, c.refusals, c.skips), (7, 0, 1));
    assert_eq!(attempts, 7);
}

#[tokio::test(start_paused = true)]
async fn forgotten_objects_are_collected_on_tokio_time() {
    let backoff = one_to_sixteen(false);
    let _gc = backoff.spawn_gc(Duration::from_secs(10)).unwrap();
    let cm = configmap("gone", 1);
    backoff.on_error(&cm);
    assert_eq!(backoff.manager().len(), 1);
    // Forgotten once 32 s (twice the cap) pass without a failure.
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(backoff.manager().len(), 1);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(backoff.manager().len(), 0);
}
