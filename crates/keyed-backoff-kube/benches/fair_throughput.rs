//! Reconciles a second through fair queues against the plain controller,
//! with one namespace (where fairness has nothing to share out, so all it
//! can add is cost).
//!
//! Each round runs a real kube-runtime `Controller` over a mocked API server
//! that lists `OBJECTS` config maps of one namespace, until every object has
//! been reconciled once; a reconcile yields once (an API call that answers
//! at once) and succeeds. The plain controller runs at most `SEATS` at once
//! (kube-runtime's `concurrency`); the fair one takes them through
//! `FairReconciles` with `SEATS` seats. A round times the reconciles alone,
//! from the first one's start to the last one's end (the list is left out).
//! Rounds alternate plain and fair on one runtime, so both see the same
//! machine; the report is each mode's median and the ratio of the medians.
//!
//! Run: `cargo bench -p keyed-backoff-kube --features fair --bench fair_throughput`
//! (`ROUNDS`, `OBJECTS`, `SEATS` and `WORKERS` from the environment,
//! defaults 15, 5,000, 8 and 2).

#[path = "../tests/support/api_server.rs"]
#[allow(dead_code)]
mod api_server;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{FairReconciles, ObjectBackoff};
use kube::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;

use api_server::ApiServer;

/// What the rounds measure: when the first reconcile started, when the
/// latest ended, and how many ran.
#[derive(Default)]
struct Clock {
    first: Mutex<Option<Instant>>,
    last: Mutex<Option<Instant>>,
    runs: AtomicUsize,
    /// How long a reconcile takes (zero: it yields once).
    work: Duration,
    /// How many runs end the round, and the signal that they have.
    target: usize,
    done: tokio::sync::Notify,
}

#[derive(Debug)]
struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never fails")
    }
}

impl std::error::Error for Never {}

async fn reconcile(_: Arc<ConfigMap>, clock: Arc<Clock>) -> Result<Action, Never> {
    clock.first.lock().unwrap().get_or_insert_with(Instant::now);
    match clock.work {
        Duration::ZERO => tokio::task::yield_now().await,
        work => tokio::time::sleep(work).await,
    }
    *clock.last.lock().unwrap() = Some(Instant::now());
    if clock.runs.fetch_add(1, Ordering::Relaxed) + 1 == clock.target {
        clock.done.notify_one();
    }
    Ok(Action::await_change())
}

fn objects(count: usize) -> Vec<ConfigMap> {
    (0..count)
        .map(|i| {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(format!("cm-{i}"));
            cm.metadata.namespace = Some("default".into());
            cm.metadata.resource_version = Some("1".into());
            cm.metadata.uid = Some(format!("uid-{i}"));
            cm
        })
        .collect()
}

/// One round: the seconds the reconciles of `count` objects took.
async fn round(fair: bool, list: &[ConfigMap], seats: u16) -> f64 {
    let client = ApiServer::new(list.to_vec()).client();
    let api = Api::<ConfigMap>::default_namespaced(client);
    let controller = Controller::new(api, watcher::Config::default());
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let count = list.len();
    let clock = Arc::new(Clock {
        work: Duration::from_micros(env("WORK_US", 0) as u64),
        target: count,
        ..Clock::default()
    });
    let (policy, ctx) = (backoff.error_policy(), Arc::clone(&clock));
    // The controller runs until every object has run once (a reconcile
    // refused a place in a full queue is requeued, and counts when it
    // runs).
    let run = if fair {
        let gate = FairReconciles::builder(controller.store())
            .seats(u32::from(seats))
            .build()
            .expect("fair reconciles");
        let controller = gate.controller(controller);
        let run = controller.run(gate.reconciler(&backoff, reconcile), policy, ctx);
        run.for_each(|_| async {}).boxed()
    } else {
        let controller = controller.with_config(Config::default().concurrency(seats));
        let run = controller.run(backoff.reconciler(reconcile), policy, ctx);
        run.for_each(|_| async {}).boxed()
    };
    tokio::select! {
        () = run => panic!("the controller stopped"),
        () = clock.done.notified() => {}
    }
    assert_eq!(
        clock.runs.load(Ordering::Relaxed),
        count,
        "every object once"
    );
    let first = clock.first.lock().unwrap().expect("a first run");
    let last = clock.last.lock().unwrap().expect("a last run");
    last.duration_since(first).as_secs_f64()
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then one short round of each checks that the bench still runs.
    let benching = std::env::args().any(|a| a == "--bench");
    let (rounds, count) = if benching {
        (env("ROUNDS", 15), env("OBJECTS", 5_000))
    } else {
        (1, 200)
    };
    let seats = u16::try_from(env("SEATS", 8)).expect("SEATS: at most 65535");
    // `WORKERS=0`: tokio's current-thread runtime (the least noise);
    // otherwise a multi-thread runtime with that many workers.
    let runtime = match env("WORKERS", 2) {
        0 => tokio::runtime::Builder::new_current_thread(),
        workers => {
            let mut multi = tokio::runtime::Builder::new_multi_thread();
            multi.worker_threads(workers);
            multi
        }
    }
    .enable_all()
    .build()
    .expect("a tokio runtime");
    let list = objects(count);
    let (mut plain, mut fair) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // One round of each first, to warm the allocator and the caches.
        round(false, &list, seats).await;
        round(true, &list, seats).await;
        for _ in 0..rounds {
            plain.push(count as f64 / round(false, &list, seats).await);
            fair.push(count as f64 / round(true, &list, seats).await);
        }
    });
    let (plain, fair) = (median(plain), median(fair));
    println!(
        "one namespace, {count} objects, {seats} at once, {rounds} rounds each, interleaved: \
         plain {plain:.0}/s, fair {fair:.0}/s (medians), fair / plain = {:.3}",
        fair / plain
    );
}
