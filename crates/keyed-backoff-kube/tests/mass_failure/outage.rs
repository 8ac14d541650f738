//! A dependency outage measured on a real `Controller`: every object's
//! reconcile calls one dependency that is down from the start for a given
//! time, then up. The backoff under test is any builder, so the same run
//! measures a preset as it is and with any option switched on.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::ObjectBackoffBuilder;
use kube::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use tokio::time::Instant;

use crate::support::{ApiServer, Failed, configmap};

/// The dependency every reconcile calls: down until `down_for` has passed
/// since `t0`, then up. It logs every call that reaches it.
struct Dependency {
    t0: Instant,
    down_for: Duration,
    /// (object index, time since `t0`) of every call, in order.
    calls: Mutex<Vec<(usize, Duration)>>,
}

impl Dependency {
    fn call(&self, object: usize) -> Result<(), Failed> {
        let at = self.t0.elapsed();
        self.calls.lock().unwrap().push((object, at));
        if at < self.down_for {
            Err(Failed)
        } else {
            Ok(())
        }
    }
}

async fn reconcile(cm: Arc<ConfigMap>, dependency: Arc<Dependency>) -> Result<Action, Failed> {
    let name = cm.metadata.name.as_deref().unwrap();
    let object = name.strip_prefix("cm-").unwrap().parse().unwrap();
    dependency.call(object)?;
    Ok(Action::await_change())
}

/// What an outage cost, as the dependency saw it. Times after recovery
/// count from the instant the dependency came back.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Calls that reached the dependency while it was down.
    pub during: usize,
    /// The most of those in one second (seconds counted from the start).
    pub during_busiest_second: usize,
    /// When the last object to recover first succeeded.
    pub last_first_success: Duration,
    /// The most calls in one second after recovery (seconds counted from
    /// recovery).
    pub after_busiest_second: usize,
}

impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) | {:.1} s | {}",
            self.during,
            self.during_busiest_second,
            self.last_first_success.as_secs_f64(),
            self.after_busiest_second
        )
    }
}

/// Runs `objects` objects through a `Controller` with the backoff
/// `builder` builds, the dependency down for `down_for` from the start,
/// until every object has succeeded once (or `down_for` plus 2000 s of
/// paused time, and then fails). With `fair_seats`, the reconciles go
/// through fair queues with that many seats (feature `fair`).
pub async fn measure(
    builder: ObjectBackoffBuilder<ConfigMap>,
    objects: usize,
    down_for: Duration,
    fair_seats: Option<u32>,
) -> Measured {
    let backoff = builder.build().unwrap();
    let client = ApiServer::new(
        (0..objects)
            .map(|i| configmap(&format!("cm-{i}"), 1))
            .collect(),
    )
    .client();
    let dependency = Arc::new(Dependency {
        t0: Instant::now(),
        down_for,
        calls: Mutex::new(Vec::new()),
    });
    let controller = Controller::new(
        Api::<ConfigMap>::namespaced(client, "default"),
        watcher::Config::default(),
    );
    let (policy, context) = (backoff.error_policy(), Arc::clone(&dependency));
    let task = match fair_seats {
        #[cfg(feature = "fair")]
        Some(seats) => {
            let fair = keyed_backoff_kube::FairReconciles::builder(controller.store())
                .seats(seats)
                .build()
                .unwrap();
            let controller = fair.controller(controller);
            let run = controller.run(fair.reconciler(&backoff, reconcile), policy, context);
            tokio::spawn(run.for_each(|_| async {}))
        }
        _ => {
            let run = controller.run(backoff.reconciler(reconcile), policy, context);
            tokio::spawn(run.for_each(|_| async {}))
        }
    };
    let deadline = down_for + Duration::from_secs(2000);
    while backoff.stats().successes < objects as u64 {
        assert!(
            dependency.t0.elapsed() < deadline,
            "{} of {objects} objects recovered by {deadline:?}",
            backoff.stats().successes
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(!task.is_finished(), "the controller stopped");
    task.abort();
    let calls = dependency.calls.lock().unwrap().clone();
    summarise(&calls, objects, down_for)
}

fn summarise(calls: &[(usize, Duration)], objects: usize, down_for: Duration) -> Measured {
    let mut first_success: HashMap<usize, Duration> = HashMap::new();
    let mut during = HashMap::<u64, usize>::new();
    let mut after = HashMap::<u64, usize>::new();
    for &(object, at) in calls {
        if at < down_for {
            *during.entry(at.as_secs()).or_default() += 1;
        } else {
            first_success.entry(object).or_insert(at);
            *after.entry((at - down_for).as_secs()).or_default() += 1;
        }
    }
    assert_eq!(first_success.len(), objects, "every object succeeded");
    let last = first_success.values().max().copied().unwrap_or(down_for);
    Measured {
        during: during.values().sum(),
        during_busiest_second: during.values().max().copied().unwrap_or(0),
        last_first_success: last - down_for,
        after_busiest_second: after.values().max().copied().unwrap_or(0),
    }
}
