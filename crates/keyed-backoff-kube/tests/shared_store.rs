//! Real `Controller`s on the Redis store (a redis-server of the suite's
//! own): an object's backoff outlives its controller, and while Redis is
//! down the local fallback answers, bounded by the ladder.
//!
//! The controllers run on tokio's paused time. Every call to Redis is made
//! on a blocking thread ([`Blocking`]): tokio does not move a paused clock
//! while a `spawn_blocking` task runs, so a round trip takes no paused
//! time and the store's timeouts do not fire early. The stores read that
//! paused clock from one epoch, as the replicas of a fleet read one Redis
//! `TIME`; the last test keeps Redis `TIME`, on a runtime with real time.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::OutageSettings;
use keyed_backoff_kube::keyed_backoff::{Gate, InBackoff, Level};
use keyed_backoff_kube::{ObjectBackoff, TokioClock};
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{RedisBackoff, RedisBackoffBuilder, StoreError};
use keyed_backoff_testkit::redis_server::Server;
use kube::runtime::controller::Action;
use support::{ApiServer, Ctx, configmap, run_controller};

type Store = RedisBackoff<ConnectionManager>;

/// The Redis store, each call made on a blocking thread of the test's
/// runtime (its clock, its I/O), so that paused time stands still while
/// Redis answers.
struct Blocking(Arc<Store>);

impl Blocking {
    async fn call<T, F>(&self, call: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Store>) -> BoxFuture<'static, Result<T, StoreError>> + Send + 'static,
    {
        let store = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || futures::executor::block_on(call(store)))
            .await
            .expect("the store's call panicked")
    }
}

impl Gate<String> for Blocking {
    type Error = StoreError;

    async fn wait(&self, key: &String) -> Result<Option<Duration>, StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.wait(&key).await }.boxed())
            .await
    }

    async fn fail(&self, key: &String) -> Result<Result<Level, InBackoff>, StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.fail(&key).await }.boxed())
            .await
    }

    async fn succeed(&self, key: &String) -> Result<(), StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.succeed(&key).await }.boxed())
            .await
    }

    async fn hold(&self, key: &String, wait: Duration) -> Result<(), StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.hold(&key, wait).await }.boxed())
            .await
    }

    async fn level(&self, key: &String) -> Result<Option<Level>, StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.level(&key).await }.boxed())
            .await
    }

    async fn resume(&self, key: &String, level: Level) -> Result<(), StoreError> {
        let key = key.clone();
        self.call(move |s| async move { s.resume(&key, level).await }.boxed())
            .await
    }
}

const INITIAL: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(16);

/// The settings every replica of the suite's fleet shares: 1 s doubling
/// to 16 s, under a prefix of the test's own, on the paused clock from
/// this instant.
fn fleet(test: &str) -> RedisBackoffBuilder {
    RedisBackoff::builder(INITIAL, MAX)
        .prefix(format!("kube-{test}-{}", std::process::id()))
        .clock(TokioClock)
}

/// One replica's store client, on a connection of its own.
async fn replica(fleet: &RedisBackoffBuilder, server: &Server) -> Store {
    fleet.clone().open(&server.url).await.expect("a Redis URL")
}

/// A controller's backoff over `store`, with the same ladder in process as
/// the fallback.
fn backoff_over<G: Gate<String> + 'static>(store: G) -> ObjectBackoff<ConfigMap> {
    ObjectBackoff::builder(INITIAL, MAX)
        .shared(store)
        .build()
        .unwrap()
}

fn level(backoff_s: u64, attempts: u32) -> Option<Level> {
    Some(Level {
        backoff: Duration::from_secs(backoff_s),
        attempts,
    })
}

/// A controller fails an object four times and is dropped; a new one,
/// with a fresh backoff and its own connection to the same Redis, finds
/// the object's backoff there: its first run waits out what is left of it,
/// and the success that follows resets the object for both.
#[tokio::test(start_paused = true)]
async fn a_new_controller_waits_out_the_backoff_the_last_one_left() {
    let server = Server::start();
    let fleet = fleet("restart");
    let cm = configmap("a", 1);

    let store = Arc::new(replica(&fleet, &server).await);
    let redis_key = store.redis_key("ConfigMap/default/a@uid-a");
    let exists = || server.command::<i64>(&["EXISTS", &redis_key]).unwrap() == 1;
    let first = backoff_over(Blocking(store));
    let ctx = Ctx::new(&[], &[]);
    let ctx = run_controller(
        ApiServer::new(vec![cm.clone()]),
        &first,
        ctx,
        Duration::from_secs(10),
    )
    .await;
    // Failures at 0, 1, 3 and 7 s: the fourth holds it until 15 s.
    assert_eq!(ctx.timeline("a"), [0.0, 1.0, 3.0, 7.0]);
    assert_eq!(first.level(&cm).await, level(8, 4));
    let c = first.stats();
    assert_eq!((c.failures, c.skips, c.fallback_answers), (4, 0, 0));
    assert!(exists(), "{redis_key} in Redis");

    // At 10 s a new controller starts, knowing nothing in process.
    let second = backoff_over(Blocking(Arc::new(replica(&fleet, &server).await)));
    assert!(second.manager().is_empty());
    assert_eq!(second.level(&cm).await, level(8, 4));
    let ctx = Ctx::new(&[("a", &[true])], &[]);
    let ctx = run_controller(
        ApiServer::new(vec![cm.clone()]),
        &second,
        ctx,
        Duration::from_secs(10),
    )
    .await;
    // Its first run (the initial list, at 10 s) is skipped with the 5 s
    // left; the body runs at 15 s and succeeds.
    assert_eq!(ctx.timeline("a"), [5.0]);
    let c = second.stats();
    assert_eq!(
        (c.skips, c.failures, c.successes, c.fallback_answers),
        (1, 0, 1, 0)
    );
    // Reset for both, in Redis.
    assert_eq!(second.level(&cm).await, None);
    assert_eq!(first.level(&cm).await, None);
    assert!(!exists());
}

/// With Redis stopped, every decision falls back to the in-process ladder:
/// no object is retried at once, the waits climb to the cap and no
/// further, and each answer (each run's question, each failure) is
/// counted.
#[tokio::test(start_paused = true)]
async fn with_redis_down_the_fallback_answers_on_the_same_ladder() {
    let mut server = Server::start();
    if !server.owned() {
        return; // REDIS_URL's server is not the test's to stop
    }
    let fleet = fleet("down");
    let backoff = backoff_over(Blocking(Arc::new(replica(&fleet, &server).await)));
    server.stop();
    let objects = vec![configmap("a", 1), configmap("b", 1)];
    let ctx = run_controller(
        ApiServer::new(objects),
        &backoff,
        Ctx::new(&[], &[]),
        Duration::from_secs(40),
    )
    .await;
    let ladder = [1, 2, 4, 8, 16, 16].map(|s| Action::requeue(Duration::from_secs(s)));
    for name in ["a", "b"] {
        assert_eq!(
            ctx.timeline(name),
            [0.0, 1.0, 3.0, 7.0, 15.0, 31.0],
            "{name}"
        );
        let requeues = ctx.requeues.lock().unwrap();
        let answered: Vec<Action> = requeues
            .iter()
            .filter(|(n, ..)| n == name)
            .map(|(_, _, action, _)| action.clone())
            .collect();
        assert_eq!(answered, ladder, "{name}");
    }
    let c = backoff.stats();
    assert_eq!((c.failures, c.refusals, c.skips), (12, 0, 0));
    // Twelve runs: each one's question and its failure.
    assert_eq!(c.fallback_answers, 24);
    #[cfg(feature = "prometheus-client")]
    {
        let mut registry = prometheus_client::registry::Registry::default();
        backoff.register(&mut registry, "configmaps");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let sample = "keyed_backoff_fallback_answers_total{controller=\"configmaps\"} 24";
        assert!(text.lines().any(|l| l == sample), "{text}");
    }
}

/// A hand-written error policy's `on_error` cannot wait for Redis: the
/// fallback answers at once, and the store is told in the background.
#[tokio::test(start_paused = true)]
async fn on_error_answers_at_once_and_the_store_hears_of_it() {
    let server = Server::start();
    let fleet = fleet("on-error");
    let backoff = backoff_over(Blocking(Arc::new(replica(&fleet, &server).await)));
    let cm = configmap("a", 1);
    assert_eq!(backoff.on_error(&cm), Action::requeue(INITIAL));
    // Answered locally, not because the store failed: Redis is healthy.
    let c = backoff.stats();
    assert_eq!((c.fallback_answers, c.local_answers), (0, 1));
    // The store's call runs on: poll the store, with a deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while backoff.level(&cm).await.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never heard"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(backoff.level(&cm).await, level(1, 1));
    let c = backoff.stats();
    assert_eq!((c.fallback_answers, c.local_answers), (0, 1));
}

/// kube's `Action` has no getter: its wait, read from its `Debug` text.
fn requeue_after(action: &Action) -> Duration {
    let text = format!("{action:?}");
    let inner = text
        .split("Some(")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("no requeue in {text}"));
    let (number, scale) = [("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .iter()
        .find_map(|(unit, scale)| inner.strip_suffix(unit).map(|n| (n, *scale)))
        .unwrap_or_else(|| panic!("no unit in {inner}"));
    Duration::from_secs_f64(number.parse::<f64>().expect("a number") * scale)
}

/// The store's timeout in the suites on real time: long enough that Redis
/// answers every call on a busy machine, so that nothing is decided in its
/// place.
const REAL_TIME_TIMEOUT: Duration = Duration::from_secs(10);

/// On Redis' own clock (`TIME`, the default) and real time: a failure
/// recorded through one controller's backoff makes a run through a new
/// one, on its own connection, skip for the wait left.
#[tokio::test]
async fn on_redis_time_a_new_backoff_skips_for_the_wait_left() {
    let server = Server::start();
    let (initial, max) = (Duration::from_secs(10), Duration::from_secs(300));
    let prefix = format!("kube-redis-time-{}", std::process::id());
    let backoff = || async {
        let store = RedisBackoff::builder(initial, max)
            .prefix(prefix.clone())
            .timeout(REAL_TIME_TIMEOUT)
            .open(&server.url)
            .await
            .unwrap();
        ObjectBackoff::<ConfigMap>::builder(initial, max)
            .shared(store)
            .build()
            .unwrap()
    };
    let (first, second) = (backoff().await, backoff().await);
    let cm = Arc::new(configmap("a", 1));
    let mut failing = first.reconciler(|_, _: Arc<()>| async { Err::<Action, _>(support::Failed) });
    let failed = std::time::Instant::now();
    let err = failing(cm.clone(), Arc::new(())).await.unwrap_err();
    assert_eq!(err.requeue(), Some(Action::requeue(initial)));

    let mut never = second.reconciler(|_, _: Arc<()>| async {
        panic!("the body ran during the backoff");
        #[allow(unreachable_code)]
        Ok::<Action, support::Failed>(Action::await_change())
    });
    let wait = requeue_after(&never(cm.clone(), Arc::new(())).await.unwrap());
    // What is left of the failure's 10 s when the second backoff asked: at
    // least 10 s less the time since just before the failure, however slow
    // the machine (Redis' clock and ours within 5 ms).
    let since = failed.elapsed();
    assert!(
        wait <= initial && wait + since + Duration::from_millis(5) >= initial,
        "{wait:?} left {since:?} after the failure"
    );
    assert_eq!(second.level(&cm).await, level(10, 1));
    let c = second.stats();
    assert_eq!((c.skips, c.fallback_answers), (1, 0));
}

/// One outage for the fleet: each controller's backoff over the Redis
/// store's fleet-wide outage awareness. Three objects failing through one
/// replica declare it; a failing object on the other replica is then
/// parked on the fleet's ladder instead of climbing its own (without the
/// shared outage, its one fresh failure would start its ladder).
#[tokio::test]
async fn two_replicas_share_one_outage() {
    let server = Server::start();
    let (initial, max) = (Duration::from_secs(10), Duration::from_secs(300));
    let prefix = format!("kube-fleet-outage-{}", std::process::id());
    let replica = || async {
        let store = RedisBackoff::builder(initial, max)
            .prefix(prefix.clone())
            .timeout(REAL_TIME_TIMEOUT)
            .open(&server.url)
            .await
            .unwrap();
        let gate = Arc::new(
            store
                .outage_aware(OutageSettings::default().min_failing_keys(3))
                .unwrap(),
        );
        let backoff = ObjectBackoff::<ConfigMap>::builder(initial, max)
            .shared_outage_aware(Arc::clone(&gate))
            .build()
            .unwrap();
        (gate, backoff)
    };
    let ((one_gate, one), (two_gate, two)) = (replica().await, replica().await);
    let mut failing = one.reconciler(|_, _: Arc<()>| async { Err::<Action, _>(support::Failed) });
    for name in ["a", "b", "c"] {
        failing(Arc::new(configmap(name, 1)), Arc::new(()))
            .await
            .unwrap_err();
    }
    assert!(one_gate.in_outage());
    // The controller's own figures are the fleet's.
    let c = one.stats();
    assert!(c.in_outage, "{c:?}");
    assert_eq!(c.outages, 1);

    let d = Arc::new(configmap("d", 1));
    let mut failing = two.reconciler(|_, _: Arc<()>| async { Err::<Action, _>(support::Failed) });
    // Parked whether or not its turn came: a wait, never its own ladder.
    match failing(d.clone(), Arc::new(())).await {
        Ok(action) => assert!(requeue_after(&action) > Duration::ZERO),
        Err(err) => assert!(err.requeue().is_some()),
    }
    assert!(two_gate.in_outage(), "the second replica saw no outage");
    assert_eq!(two.level(&d).await, None, "d climbed a ladder of its own");
    let c = two.stats();
    assert!(c.in_outage && c.outages == 1 && c.parked >= 1, "{c:?}");
    // Redis answered every call: nothing was decided in its place.
    assert_eq!((c.fallback_answers, one.stats().fallback_answers), (0, 0));
}
