//! The widget example's operator (a custom resource, its reconcile and a
//! hand-written error policy beside the reconcile wrapper), run by a real
//! `Controller` against a mocked API server under tokio's paused time.

#[path = "../examples/widget/operator.rs"]
mod operator;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use http::{Method, StatusCode};
use keyed_backoff_kube::ObjectBackoff;
use kube::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use operator::{Ctx, Widget, WidgetSpec, error_policy, reconcile};
use support::{ApiServer, run_for};
use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

fn widget(name: &str, replicas: i32, resource_version: u32) -> Widget {
    let mut w = Widget::new(name, WidgetSpec { replicas });
    w.metadata.namespace = Some("default".into());
    w.metadata.uid = Some(format!("uid-{name}"));
    w.metadata.resource_version = Some(resource_version.to_string());
    w
}

/// The status patches the API server saw, per widget: (seconds after the
/// start, the status it answered).
type Patches = Arc<Mutex<HashMap<String, Vec<(f64, u16)>>>>;

/// An API server whose status patches for `flaky` fail `flaky_failures`
/// times (500) before they succeed; every other patch succeeds.
fn server(objects: Vec<Widget>, flaky_failures: usize, patches: &Patches) -> ApiServer<Widget> {
    let t0 = Instant::now();
    let patches = Arc::clone(patches);
    ApiServer::new(objects).answering(move |method, path| {
        assert_eq!(method, Method::PATCH, "{path}");
        let name = path
            .strip_suffix("/status")
            .and_then(|p| p.rsplit('/').next())
            .unwrap_or_else(|| panic!("not a status patch: {path}"))
            .to_owned();
        let mut patches = patches.lock().unwrap();
        let seen = patches.entry(name.clone()).or_default();
        let status = if name == "flaky" && seen.len() < flaky_failures {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        };
        seen.push((t0.elapsed().as_secs_f64(), status.as_u16()));
        let body = if status.is_success() {
            serde_json::to_value(widget(&name, 1, 2)).unwrap()
        } else {
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "InternalError", "code": 500,
                "message": "etcdserver: request timed out",
            })
        };
        (status, body)
    })
}

#[tokio::test(start_paused = true)]
async fn api_failures_back_off_per_widget_and_an_invalid_spec_waits_for_its_fix() {
    let patches = Patches::default();
    let objects = vec![
        widget("ready", 2, 1),
        widget("flaky", 3, 1),
        widget("invalid", -1, 1),
    ];
    // The invalid widget is fixed at 20 s.
    let client = server(objects, 3, &patches)
        .event(20 * SECOND, "MODIFIED", widget("invalid", 1, 50))
        .client();
    let backoff = ObjectBackoff::<Widget>::builder(SECOND, 16 * SECOND)
        .build()
        .unwrap();
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        backoff: backoff.clone(),
    });
    let controller = Controller::new(
        Api::<Widget>::namespaced(client, "default"),
        watcher::Config::default(),
    )
    .run(backoff.reconciler(reconcile), error_policy, ctx)
    .for_each(|_| async {});
    run_for(controller, 40 * SECOND).await;

    let patches = patches.lock().unwrap().clone();
    assert_eq!(patches["ready"], [(0.0, 200)]);
    // Failed status writes back off 1 s, 2 s, 4 s; the fourth succeeds.
    assert_eq!(
        patches["flaky"],
        [(0.0, 500), (1.0, 500), (3.0, 500), (7.0, 200)]
    );
    // The invalid spec never reaches the API and is not retried: its one
    // write is the run the fix triggered.
    assert_eq!(patches["invalid"], [(20.0, 200)]);
    let stats = backoff.stats();
    // Four failures recorded (flaky's three, and the invalid spec's, whose
    // backoff the policy then forgot); three successes.
    assert_eq!((stats.failures, stats.successes), (4, 3));
    assert_eq!(stats.refusals, 0);
    assert_eq!(backoff.attempts(&widget("flaky", 3, 1)), 0);
    assert_eq!(backoff.attempts(&widget("invalid", -1, 1)), 0);
}
