//! A mocked API server and a scripted reconcile, for running a real
//! kube-runtime `Controller` under tokio's paused time.

#![allow(dead_code)]

mod api_server;

pub use api_server::ApiServer;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{ObjectBackoff, ReconcileError};
use kube::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use tokio::time::Instant;

/// A config map in `default` whose uid is `uid-<name>`.
pub fn configmap(name: &str, resource_version: u32) -> ConfigMap {
    with_uid(name, resource_version, &format!("uid-{name}"))
}

/// A config map in `default` with the given uid.
pub fn with_uid(name: &str, resource_version: u32, uid: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.namespace = Some("default".to_owned());
    cm.metadata.resource_version = Some(resource_version.to_string());
    cm.metadata.uid = Some(uid.to_owned());
    cm
}

impl ApiServer<ConfigMap> {
    /// Adds a `MODIFIED` event for `name` at `at`.
    pub fn modified(mut self, at: Duration, name: &str) -> Self {
        let version = 100 + self.events.len() as u32;
        self.events.push((at, "MODIFIED", configmap(name, version)));
        self
    }
}

#[derive(Debug)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("reconcile failed")
    }
}

impl std::error::Error for Failed {}

/// The controller's context: each object's scripted outcomes and the log
/// of reconcile bodies run.
pub struct Ctx {
    pub t0: Instant,
    /// Per object: outcomes in order (`true` = success); after the list
    /// runs out, every run fails.
    script: HashMap<String, Vec<bool>>,
    /// Objects whose every run panics.
    panicking: HashSet<String>,
    runs: Mutex<Vec<(String, Duration)>>,
    counts: Mutex<HashMap<String, usize>>,
    /// What the error policy answered, per object: (time, action, attempts
    /// after the call).
    pub requeues: Mutex<Vec<(String, Duration, Action, u32)>>,
}

impl Ctx {
    pub fn new(script: &[(&str, &[bool])], panicking: &[&str]) -> Arc<Self> {
        Arc::new(Self {
            t0: Instant::now(),
            script: script
                .iter()
                .map(|(n, s)| ((*n).to_owned(), s.to_vec()))
                .collect(),
            panicking: panicking.iter().map(|n| (*n).to_owned()).collect(),
            runs: Mutex::new(Vec::new()),
            counts: Mutex::new(HashMap::new()),
            requeues: Mutex::new(Vec::new()),
        })
    }

    /// The times (seconds after the start) at which `name`'s body ran.
    pub fn timeline(&self, name: &str) -> Vec<f64> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, at)| at.as_secs_f64())
            .collect()
    }

    /// Every run: (object, time).
    pub fn runs(&self) -> Vec<(String, Duration)> {
        self.runs.lock().unwrap().clone()
    }
}

pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Failed> {
    let name = cm.metadata.name.clone().unwrap();
    ctx.runs
        .lock()
        .unwrap()
        .push((name.clone(), ctx.t0.elapsed()));
    let run = {
        let mut counts = ctx.counts.lock().unwrap();
        let n = counts.entry(name.clone()).or_default();
        *n += 1;
        *n - 1
    };
    if ctx.panicking.contains(&name) {
        panic!("scripted panic for {name}");
    }
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
/// time and returns the context with its log. The error policy returns
/// the requeue the wrapper decided, logged.
pub async fn run_controller(
    server: ApiServer<ConfigMap>,
    backoff: &ObjectBackoff<ConfigMap>,
    ctx: Arc<Ctx>,
    horizon: Duration,
) -> Arc<Ctx> {
    let client = server.client();
    let policy = {
        let backoff = backoff.clone();
        move |cm: Arc<ConfigMap>, error: &ReconcileError<Failed>, ctx: Arc<Ctx>| {
            let action = error.requeue().unwrap_or_else(|| backoff.on_error(&cm));
            let name = cm.metadata.name.clone().unwrap();
            let attempts = backoff.attempts(&cm);
            ctx.requeues
                .lock()
                .unwrap()
                .push((name, ctx.t0.elapsed(), action.clone(), attempts));
            action
        }
    };
    let controller = Controller::new(
        Api::<ConfigMap>::namespaced(client, "default"),
        watcher::Config::default(),
    )
    .run(backoff.reconciler(reconcile), policy, Arc::clone(&ctx))
    .for_each(|_| async {});
    run_for(controller, horizon).await;
    ctx
}

/// Runs `controller` (a `Controller`'s stream, driven) for `horizon` of
/// paused time, and fails if it stopped before.
pub async fn run_for(controller: impl Future<Output = ()> + Send + 'static, horizon: Duration) {
    let task = tokio::spawn(controller);
    tokio::time::sleep(horizon).await;
    assert!(
        !task.is_finished(),
        "the controller stopped before the horizon"
    );
    task.abort();
}

/// A backoff of 1 s doubling to 16 s.
pub fn one_to_sixteen(skip: bool) -> ObjectBackoff<ConfigMap> {
    ObjectBackoff::builder(Duration::from_secs(1), Duration::from_secs(16))
        .skip_while_in_backoff(skip)
        .build()
        .unwrap()
}

pub fn gaps(timeline: &[f64]) -> Vec<f64> {
    timeline.windows(2).map(|w| w[1] - w[0]).collect()
}
