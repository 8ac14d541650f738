//! Fair reconciles on a real kube-runtime `Controller` against a mocked
//! API server, under tokio's paused time: each scenario runs the plain
//! controller (first-in first-out under the same concurrency) and the one
//! whose reconciles go through `FairReconciles`, and asserts both.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::fair_admission::LimitResponse;
use keyed_backoff_kube::{FairReconciles, ObjectBackoff, ObjectBackoffBuilder, Priority};
use kube::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;
use support::{ApiServer, Failed, run_for};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);

/// A config map `name` in `namespace`, whose uid is `uid-<namespace>-<name>`.
fn cm(namespace: &str, name: &str, resource_version: u32) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.namespace = Some(namespace.to_owned());
    cm.metadata.resource_version = Some(resource_version.to_string());
    cm.metadata.uid = Some(format!("uid-{namespace}-{name}"));
    cm
}

/// `count` config maps `cm-0`, `cm-1`, ... in each of `namespaces`, listed
/// namespace by namespace as the API server lists them.
fn objects(namespaces: &[String], count: usize) -> Vec<ConfigMap> {
    let mut all = Vec::with_capacity(namespaces.len() * count);
    for ns in namespaces {
        all.extend((0..count).map(|i| cm(ns, &format!("cm-{i}"), 1)));
    }
    all
}

fn namespaces(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i:03}")).collect()
}

/// What every reconcile does: it takes `work`, fails until `fail_until`,
/// and then succeeds with a requeue at `requeue_at` (if given and still
/// ahead, for objects named `cm-*`) or none. It logs (namespace, name, start) of every run.
struct Script {
    t0: Instant,
    work: Duration,
    fail_until: Duration,
    requeue_at: Option<Duration>,
    runs: Mutex<Vec<(String, String, Duration)>>,
}

impl Script {
    fn new(work: Duration) -> Self {
        Script {
            t0: Instant::now(),
            work,
            fail_until: Duration::ZERO,
            requeue_at: None,
            runs: Mutex::new(Vec::new()),
        }
    }

    fn runs(&self) -> Vec<(String, String, Duration)> {
        self.runs.lock().unwrap().clone()
    }

    /// The start times of the runs of `namespace`/`name`.
    fn timeline(&self, namespace: &str, name: &str) -> Vec<Duration> {
        let runs = self.runs.lock().unwrap();
        let of = |(ns, n, _): &&(String, String, Duration)| ns == namespace && n == name;
        runs.iter().filter(of).map(|(_, _, at)| *at).collect()
    }
}

async fn reconcile(cm: Arc<ConfigMap>, script: Arc<Script>) -> Result<Action, Failed> {
    let name = cm.metadata.name.clone().unwrap();
    let ns = cm.metadata.namespace.clone().unwrap();
    let start = script.t0.elapsed();
    script.runs.lock().unwrap().push((ns, name.clone(), start));
    tokio::time::sleep(script.work).await;
    let now = script.t0.elapsed();
    if now < script.fail_until {
        return Err(Failed);
    }
    match script.requeue_at {
        Some(at) if name.starts_with("cm-") && now < at => Ok(Action::requeue(at - now)),
        _ => Ok(Action::await_change()),
    }
}

/// How the controller runs its reconciles.
#[derive(Clone, Copy)]
enum Mode {
    /// kube-runtime's own order, at most this many at once.
    Plain(u16),
    /// Through fair queues of this many seats (the controller unbounded).
    Fair(u32),
    /// The same, with queues of this shape.
    FairQueued(u32, LimitResponse),
}

/// Runs a controller over every namespace of `server` in `mode` for
/// `horizon`; the fair queues, in fair mode.
async fn run(
    server: ApiServer<ConfigMap>,
    backoff: &ObjectBackoff<ConfigMap>,
    script: &Arc<Script>,
    mode: Mode,
    horizon: Duration,
) -> Option<FairReconciles<ConfigMap>> {
    let api = Api::<ConfigMap>::all(server.cluster_wide().client());
    let controller = Controller::new(api, watcher::Config::default());
    let (policy, ctx) = (backoff.error_policy(), Arc::clone(script));
    match mode {
        Mode::Plain(concurrency) => {
            let controller = controller.with_config(Config::default().concurrency(concurrency));
            let run = controller.run(backoff.reconciler(reconcile), policy, ctx);
            run_for(run.for_each(|_| async {}), horizon).await;
            None
        }
        Mode::Fair(seats) | Mode::FairQueued(seats, _) => {
            let mut builder = FairReconciles::builder(controller.store()).seats(seats);
            if let Mode::FairQueued(_, queuing) = mode {
                builder = builder.queuing(queuing);
            }
            let fair = builder.build().unwrap();
            let controller = fair.controller(controller);
            let run = controller.run(fair.reconciler(backoff, reconcile), policy, ctx);
            run_for(run.for_each(|_| async {}), horizon).await;
            Some(fair)
        }
    }
}

/// When each object of `namespace` first ran, after `since`.
fn first_runs(script: &Script, namespace: &str, since: Duration) -> Vec<Duration> {
    let mut first: BTreeMap<String, Duration> = BTreeMap::new();
    for (ns, name, at) in script.runs() {
        if ns == namespace {
            first.entry(name).or_insert(at);
        }
    }
    first.into_values().map(|at| at - since).collect()
}

#[tokio::test(start_paused = true)]
async fn a_new_namespace_is_reconciled_within_a_second_behind_five_thousand_objects_of_another() {
    // 5,000 objects in `a` at the start, 100 ms each; 10 new objects in
    // `b` 10 s later; 8 at once.
    let b_at = 10 * SECOND;
    let server = || {
        let b = (0..10).map(|i| cm("b", &format!("cm-{i}"), 2));
        b.fold(ApiServer::new(objects(&["a".into()], 5_000)), |s, cm| {
            s.event(b_at, "ADDED", cm)
        })
    };
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let plain = Arc::new(Script::new(100 * MS));
    run(server(), &backoff, &plain, Mode::Plain(8), 70 * SECOND).await;
    let fair = Arc::new(Script::new(100 * MS));
    let gate = run(server(), &backoff, &fair, Mode::Fair(8), 15 * SECOND).await;

    let plain_b = first_runs(&plain, "b", b_at);
    let fair_b = first_runs(&fair, "b", b_at);
    let (plain_worst, fair_worst) = (plain_b.iter().max(), fair_b.iter().max());
    println!("b's first reconcile after its creation: plain {plain_worst:?}, fair {fair_worst:?}");
    assert_eq!((plain_b.len(), fair_b.len()), (10, 10));
    // kube-runtime takes the objects it holds back in its hash set's
    // order: `b`'s land among the 4,200 of `a` still waiting, and the last
    // waits for most of them (`a` drains at 80 a second).
    assert!(plain_worst.unwrap() > &(20 * SECOND), "{plain_b:?}");
    assert!(fair_b.iter().all(|d| *d <= SECOND), "{fair_b:?}");
    // Meanwhile `a` kept every seat it could use: 8 at a time, 100 ms each.
    let a_runs = first_runs(&fair, "a", Duration::ZERO).len();
    assert!(
        (1_185..=1_200).contains(&a_runs),
        "{a_runs} of a's ran by 15 s"
    );
    let stats = gate.unwrap().stats();
    assert_eq!(stats.seats_in_use, 8);
    assert_eq!(stats.granted(Priority::Changed) as usize, a_runs + 10);
}

#[tokio::test(start_paused = true)]
async fn a_changed_object_is_reconciled_before_ten_thousand_objects_queued_by_a_resync() {
    // 10,000 objects reconcile at the start and ask to be requeued at
    // 100 s, all at once; 8 others (in a namespace of their own) change at
    // 100.5 s. 10 ms each, 8 at once: the resync takes 12.5 s.
    let edited_at = 100 * SECOND + 500 * MS;
    let edited = |v| (0..8).map(move |i| cm("e", &format!("edited-{i}"), v));
    let server = || {
        let listed = [objects(&namespaces("r", 10), 1_000), edited(1).collect()].concat();
        let changes = edited(2).map(|cm| (edited_at, "MODIFIED", cm));
        let mut server = ApiServer::new(listed);
        server.events.extend(changes);
        server
    };
    let script = || {
        let mut s = Script::new(10 * MS);
        s.requeue_at = Some(100 * SECOND);
        Arc::new(s)
    };
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let plain = script();
    run(server(), &backoff, &plain, Mode::Plain(8), 115 * SECOND).await;
    let fair = script();
    let gate = run(server(), &backoff, &fair, Mode::Fair(8), 102 * SECOND).await;

    // For each change: how long after it it ran (the horizon if it has
    // not), and behind how many resyncs.
    let changes = |s: &Script, horizon: Duration| {
        let runs = s.runs();
        let resync = |r: &&(String, String, Duration)| r.0 != "e" && r.2 >= 100 * SECOND;
        (0..8)
            .map(|i| {
                let at = s.timeline("e", &format!("edited-{i}")).get(1).copied();
                let at = at.unwrap_or(horizon);
                let behind = runs.iter().filter(resync).filter(|r| r.2 < at).count();
                (at - edited_at, behind)
            })
            .collect::<Vec<_>>()
    };
    let (plain_changes, fair_changes) =
        (changes(&plain, 115 * SECOND), changes(&fair, 102 * SECOND));
    println!("each change: (ran after it, behind resyncs): plain {plain_changes:?}");
    println!("each change: (ran after it, behind resyncs): fair {fair_changes:?}");
    // kube-runtime takes what it holds back in its hash set's order: on
    // average a change waits behind thousands of resyncs.
    let plain_mean = plain_changes.iter().map(|c| c.1).sum::<usize>() / 8;
    assert!(plain_mean >= 2_000, "{plain_changes:?}");
    // Fair: each takes the next seat that frees (one reconcile, 10 ms),
    // behind only the resyncs that ran before the change (400 in 0.5 s).
    assert!(
        fair_changes.iter().all(|c| c.0 <= 10 * MS && c.1 <= 408),
        "{fair_changes:?}"
    );
    assert!(gate.unwrap().stats().waiting(Priority::Resync) > 8_000);
}

#[tokio::test(start_paused = true)]
async fn an_object_deleted_while_it_waits_leaves_its_queue_without_running() {
    // 50 objects of 1 s each, 2 at once; `victim` joins their namespace
    // at 3 s, behind 44 of them, and is deleted at 5 s.
    let victim = cm("a", "victim", 2);
    let server = ApiServer::new(objects(&["a".into()], 50))
        .event(3 * SECOND, "ADDED", victim.clone())
        .event(5 * SECOND, "DELETED", victim);
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let script = Arc::new(Script::new(SECOND));
    let gate = run(server, &backoff, &script, Mode::Fair(2), 6500 * MS).await;
    let stats = gate.unwrap().stats();
    assert_eq!(stats.dropped_deleted, 1);
    // 50 less the 14 started by 6 s; the victim is gone.
    assert_eq!(stats.waiting(Priority::Changed), 50 - 14);
    assert!(script.timeline("a", "victim").is_empty());
    assert_eq!(backoff.stats().successes, 12);
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_that_finds_its_queues_full_is_requeued_and_runs_later() {
    // One seat; a flow may hold 2 × 2 waiting: of 20 objects, most find
    // no room at first, and every one runs once in the end.
    let server = ApiServer::new(objects(&["a".into()], 20));
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let script = Arc::new(Script::new(100 * MS));
    let small = LimitResponse::Queue {
        queues: 4,
        queue_length_limit: 2,
        hand_size: 2,
    };
    let mode = Mode::FairQueued(1, small);
    let gate = run(server, &backoff, &script, mode, 120 * SECOND).await;
    let stats = gate.unwrap().stats();
    assert!(stats.requeued_full >= 15, "{stats:?}");
    let mut ran: Vec<_> = script.runs().into_iter().map(|r| r.1).collect();
    ran.sort();
    ran.dedup();
    assert_eq!((ran.len(), script.runs().len()), (20, 20));
    assert_eq!(backoff.stats().successes, 20);
}

#[tokio::test(start_paused = true)]
async fn an_object_in_backoff_takes_no_seat_when_an_event_wakes_it() {
    // `broken` always fails: 10 s of backoff after its first run; a change
    // at 2 s wakes it early, and its run is skipped without a seat.
    let server = ApiServer::new(vec![cm("a", "broken", 1)]).event(
        2 * SECOND,
        "MODIFIED",
        cm("a", "broken", 2),
    );
    let backoff = ObjectBackoffBuilder::kubelet()
        .skip_while_in_backoff(true)
        .build()
        .unwrap();
    let mut script = Script::new(MS);
    script.fail_until = Duration::MAX;
    let script = Arc::new(script);
    let gate = run(server, &backoff, &script, Mode::Fair(1), 5 * SECOND).await;
    let stats = gate.unwrap().stats();
    assert_eq!(stats.granted, [1, 0]);
    assert_eq!(backoff.stats().skips, 1);
    assert_eq!(script.timeline("a", "broken"), [Duration::ZERO]);
}

/// Runs per 10 s window from the start until `until`: for each window,
/// the runs of each of `namespaces`.
fn window_counts(script: &Script, namespaces: &[String], until: Duration) -> Vec<Vec<usize>> {
    let windows = (until.as_secs() / 10) as usize;
    let index: BTreeMap<&str, usize> = namespaces
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut counts = vec![vec![0usize; namespaces.len()]; windows];
    for (ns, _, at) in script.runs() {
        if let Some(window) = counts.get_mut((at.as_secs() / 10) as usize) {
            window[index[ns.as_str()]] += 1;
        }
    }
    counts
}

/// The fewest and the most runs of a namespace in each window.
fn spreads(counts: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let spread = |c: &Vec<usize>| (*c.iter().min().unwrap(), *c.iter().max().unwrap());
    counts.iter().map(spread).collect()
}

#[tokio::test(start_paused = true)]
async fn a_hundred_busy_namespaces_share_the_seats_while_all_fail() {
    // 100 namespaces of 100 objects; every reconcile takes 100 ms and fails
    // for the first 60 s; 8 seats: 80 reconciles a second. For the first
    // 120 s every namespace has first reconciles waiting, so each one's
    // fair share of a 10 s window is 8 runs.
    let names = namespaces("n", 100);
    let server = || ApiServer::new(objects(&names, 100)).cluster_wide();
    let script = || {
        let mut s = Script::new(100 * MS);
        s.fail_until = 60 * SECOND;
        Arc::new(s)
    };
    let horizon = 120 * SECOND;
    let plain = script();
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    run(server(), &backoff, &plain, Mode::Plain(8), horizon).await;
    let fair = script();
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    run(server(), &backoff, &fair, Mode::Fair(8), horizon).await;

    let (plain, fair) = (
        window_counts(&plain, &names, horizon),
        window_counts(&fair, &names, horizon),
    );
    let (plain_spreads, fair_spreads) = (spreads(&plain), spreads(&fair));
    println!("(fewest, most) runs of a namespace per 10 s: plain {plain_spreads:?}");
    println!("(fewest, most) runs of a namespace per 10 s: fair {fair_spreads:?}");
    // Fair queuing shares the seats between queues, and shuffle sharding
    // deals 100 namespaces over 64 queues: a namespace's share of a window
    // varies around the fair 8 (4 to 12 runs measured, the order of the
    // controller's own queue varying from run to run), and over the 120 s
    // stays within a fifth of it.
    assert!(
        fair_spreads
            .iter()
            .all(|&(few, most)| few >= 3 && most <= 13),
        "{fair_spreads:?}"
    );
    let totals: Vec<usize> = (0..names.len())
        .map(|n| fair.iter().map(|w| w[n]).sum())
        .collect();
    assert!(totals.iter().all(|t| (77..=115).contains(t)), "{totals:?}");
    // The plain controller takes the objects in its own order: some
    // namespaces get two or three times their share, some almost none.
    let widest = |s: &[(usize, usize)]| s.iter().map(|(few, most)| most - few).max();
    assert!(widest(&plain_spreads) > widest(&fair_spreads));
}

#[tokio::test(start_paused = true)]
async fn the_controller_holds_no_reconcile_that_waits_for_a_seat() {
    // 5,000 objects of one namespace, 100 ms each, 8 seats: the objects
    // wait in the fair queues, and the controller runs at most the reconciles
    // that have or are about to have a seat.
    let server = ApiServer::new(objects(&["a".into()], 5_000)).cluster_wide();
    let api = Api::<ConfigMap>::all(server.client());
    let controller = Controller::new(api, watcher::Config::default());
    let fair = FairReconciles::builder(controller.store()).build().unwrap();
    let controller = fair.controller(controller);
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let script = Arc::new(Script::new(100 * MS));
    // Every reconcile future the controller holds, counted while it lives,
    // and sampled every 100 ms once the list has been taken in (the first
    // second, when every listed object arrives at once, left out).
    let alive = Arc::new(AtomicUsize::new(0));
    let mut inner = fair.reconciler(&backoff, reconcile);
    let counted = {
        let alive = Arc::clone(&alive);
        move |obj, ctx| {
            let held = Held::new(&alive);
            let run = inner(obj, ctx);
            async move {
                let _held = held;
                run.await
            }
        }
    };
    let sampled = {
        let alive = Arc::clone(&alive);
        tokio::spawn(async move {
            tokio::time::sleep(SECOND).await;
            let mut most = 0;
            for _ in 0..190 {
                most = most.max(alive.load(Ordering::Relaxed));
                tokio::time::sleep(100 * MS).await;
            }
            most
        })
    };
    let run = controller.run(counted, backoff.error_policy(), Arc::clone(&script));
    run_for(run.for_each(|_| async {}), 20 * SECOND).await;
    let ran = script.runs().len();
    // 8 at a time for 20 s, 100 ms each.
    assert!((1_590..=1_600).contains(&ran), "{ran} ran");
    // The 8 running, the 8 whose turn came next and the 64 called ahead
    // (8 a seat), of the 3,400 waiting.
    let most = sampled.await.unwrap();
    println!("the controller held at most {most} reconciles at once");
    assert!(most <= 80, "the controller held {most} reconciles at once");
    assert_eq!(fair.stats().unclaimed, 0);
}

#[tokio::test(start_paused = true)]
async fn a_controller_not_wired_to_the_fair_queues_still_runs_every_object() {
    // The same fair queues without `fair.controller(..)`: a waiting reconcile
    // asks again every second, and runs when it finds its turn has come.
    let server = ApiServer::new(objects(&["a".into()], 40)).cluster_wide();
    let api = Api::<ConfigMap>::all(server.client());
    let controller = Controller::new(api, watcher::Config::default());
    let fair = FairReconciles::builder(controller.store())
        .seats(2)
        .build()
        .unwrap();
    let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    let script = Arc::new(Script::new(100 * MS));
    let run = controller.run(
        fair.reconciler(&backoff, reconcile),
        backoff.error_policy(),
        Arc::clone(&script),
    );
    run_for(run.for_each(|_| async {}), 60 * SECOND).await;
    assert_eq!(backoff.stats().successes, 40);
    assert_eq!(script.runs().len(), 40, "each object once");
}

/// Counts a live reconcile future.
struct Held(Arc<AtomicUsize>);

impl Held {
    fn new(alive: &Arc<AtomicUsize>) -> Self {
        alive.fetch_add(1, Ordering::Relaxed);
        Held(Arc::clone(alive))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
