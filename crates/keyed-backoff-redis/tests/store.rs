//! The Redis store against a real `redis-server` that this test binary
//! starts on a free loopback port (or the one `REDIS_URL` names): needs the
//! `redis-server` binary on the PATH.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff::{Backoff, InBackoff};
use keyed_backoff_redis::{Event, OpId, RedisBackoff, StoreError};
use keyed_backoff_testkit::clientgo::traces;
use keyed_backoff_testkit::redis_server::Server;

mod common;
use proptest::prelude::*;
use redis::aio::ConnectionManager;

type Store = RedisBackoff<ConnectionManager>;

/// One server for the tests that do not disturb it.
fn shared() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(Server::start)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn connect(url: &str) -> ConnectionManager {
    let client = redis::Client::open(url).expect("url");
    ConnectionManager::new(client).await.expect("connect")
}

/// A prefix no other test uses.
fn prefix(name: &str) -> String {
    format!("test-{name}-{:x}", rand::random::<u32>())
}

// ---------------------------------------------------------------------------
// client-go's traces, replayed on the store under a mock clock

#[test]
fn every_clientgo_trace_replays_on_redis() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let paths = traces();
        assert_eq!(paths.len(), 61);
        let mut checked = 0;
        for path in &paths {
            checked += common::replay(path, &conn, &prefix("trace")).await;
        }
        assert!(checked > 2_000, "only {checked} results checked");
    });
}

// ---------------------------------------------------------------------------
// The store and the in-process manager agree on random operation sequences

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Next(usize, i64),
    TryNext(usize, i64),
    Get(usize),
    Attempts(usize),
    Remaining(usize, i64),
    Since(usize, i64),
    SinceUpdate(usize, i64),
    Reset(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0usize..3;
    let offset = -3_000i64..3_000; // event offsets in ms around now
    prop_oneof![
        (0u64..40_000).prop_map(Op::Advance),
        (key.clone(), offset.clone()).prop_map(|(k, o)| Op::Next(k, o)),
        (key.clone(), offset.clone()).prop_map(|(k, o)| Op::TryNext(k, o)),
        key.clone().prop_map(Op::Get),
        key.clone().prop_map(Op::Attempts),
        (key.clone(), offset.clone()).prop_map(|(k, o)| Op::Remaining(k, o)),
        (key.clone(), offset.clone()).prop_map(|(k, o)| Op::Since(k, o)),
        (key.clone(), offset).prop_map(|(k, o)| Op::SinceUpdate(k, o)),
        key.prop_map(Op::Reset),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn the_store_agrees_with_the_in_process_manager(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = runtime();
        rt.block_on(async {
            let clock = MockClock::new();
            let (initial, max) = (Duration::from_secs(1), Duration::from_secs(8));
            let local = Backoff::<String>::builder(initial, max)
                .clock(clock.clone())
                .build()
                .unwrap();
            let store = RedisBackoff::builder(initial, max)
                .clock(clock.clone())
                .prefix(prefix("model"))
                .build(connect(&shared().url).await)
                .unwrap();
            for op in ops {
                let key = |k: usize| format!("k{k}");
                let at = |ms: i64| clock.now().offset_by_nanos(ms * 1_000_000);
                let event = |ms: i64| Event::between(at(ms), clock.now());
                match op {
                    Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
                    Op::Next(k, o) => prop_assert_eq!(
                        store.next(&key(k), event(o)).await.unwrap(),
                        local.next(&key(k), at(o))
                    ),
                    Op::TryNext(k, o) => prop_assert_eq!(
                        store.try_next(&key(k), event(o)).await.unwrap(),
                        local.try_next(&key(k), at(o))
                    ),
                    Op::Get(k) => prop_assert_eq!(store.get(&key(k)).await.unwrap(), local.get(&key(k))),
                    Op::Attempts(k) => prop_assert_eq!(
                        store.attempts(&key(k)).await.unwrap(),
                        local.attempts(&key(k))
                    ),
                    Op::Remaining(k, o) => prop_assert_eq!(
                        store.remaining(&key(k), event(o)).await.unwrap(),
                        local.remaining(&key(k), at(o))
                    ),
                    Op::Since(k, o) => prop_assert_eq!(
                        store.is_in_backoff_since(&key(k), event(o)).await.unwrap(),
                        local.is_in_backoff_since(&key(k), at(o))
                    ),
                    Op::SinceUpdate(k, o) => prop_assert_eq!(
                        store.is_in_backoff_since_update(&key(k), event(o)).await.unwrap(),
                        local.is_in_backoff_since_update(&key(k), at(o))
                    ),
                    Op::Reset(k) => prop_assert_eq!(
                        store.reset(&key(k)).await.unwrap(),
                        local.reset(&key(k))
                    ),
                }
            }
            Ok(())
        })?;
    }
}

#[test]
fn seeded_jitter_matches_the_in_process_manager() {
    let rt = runtime();
    rt.block_on(async {
        let clock = MockClock::new();
        let (initial, max) = (Duration::from_millis(100), Duration::from_secs(3_600));
        let local = Backoff::<String>::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .clock(clock.clone())
            .build()
            .unwrap();
        let store = RedisBackoff::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .clock(clock.clone())
            .prefix(prefix("jitter"))
            .build(connect(&shared().url).await)
            .unwrap();
        let mut distinct = BTreeSet::new();
        for _ in 0..12 {
            let t = clock.now();
            let got = store.next("k", Event::now()).await.unwrap();
            assert_eq!(got, local.next("k", t));
            distinct.insert(got);
        }
        assert_eq!(distinct.len(), 12, "jitter was drawn");
    });
}

// ---------------------------------------------------------------------------
// A fleet: separate connections racing on shared keys

#[test]
fn a_fleet_advances_each_key_once_per_window() {
    const REPLICAS: usize = 6;
    const KEYS: usize = 4;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let clock = MockClock::new();
        let prefix = prefix("fleet");
        let mut replicas = Vec::new();
        for _ in 0..REPLICAS {
            let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
                .clock(clock.clone())
                .prefix(prefix.clone())
                .build(connect(&shared().url).await)
                .unwrap();
            replicas.push(Arc::new(store));
        }
        for window in 0..4u32 {
            let mut tasks = Vec::new();
            for store in &replicas {
                let store = Arc::clone(store);
                tasks.push(tokio::spawn(async move {
                    let mut advanced = vec![0u32; KEYS];
                    for round in 0..20 {
                        let k = round % KEYS;
                        if store
                            .try_next(&format!("k{k}"), Event::now())
                            .await
                            .unwrap()
                            .is_ok()
                        {
                            advanced[k] += 1;
                        }
                    }
                    advanced
                }));
            }
            let mut total = vec![0u32; KEYS];
            for t in tasks {
                for (k, n) in t.await.unwrap().into_iter().enumerate() {
                    total[k] += n;
                }
            }
            assert_eq!(total, vec![1; KEYS], "window {window}: one advance per key");
            let store = &replicas[0];
            for k in 0..KEYS {
                assert_eq!(store.attempts(&format!("k{k}")).await.unwrap(), window + 1);
            }
            // Wait out the window: the backoff doubles each time.
            clock.advance(Duration::from_secs(1 << window));
        }
    });
}

// ---------------------------------------------------------------------------
// Faults

fn fast_manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(200)))
        .set_response_timeout(Some(Duration::from_millis(500)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(100))
}

fn store_on(conn: ConnectionManager, name: &str) -> Store {
    RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix(prefix(name))
        .timeout(Duration::from_millis(300))
        .build(conn)
        .unwrap()
}

/// Polls `op` until it succeeds, failing after a deadline.
async fn until_ok<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => assert!(Instant::now() < deadline, "never recovered: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_restart_loses_entries_and_the_store_recovers() {
    let mut server = Server::start();
    if !server.owned() {
        return; // REDIS_URL: not ours to restart
    }
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let conn = ConnectionManager::new_with_config(client, fast_manager_config())
            .await
            .unwrap();
        let store = store_on(conn, "restart");
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
        server.restart();
        // Some calls fail while the connection is re-established; each
        // fails with an error, never a made-up answer.
        let got = until_ok(|| store.next("k", Event::now())).await;
        // Without persistence the entry is gone: the ladder starts over.
        assert_eq!(got, Duration::from_secs(1));
    });
}

#[test]
fn a_paused_server_times_out_and_then_answers_again() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&server.url).await, "pause");
        store.next("k", Event::now()).await.unwrap();
        server.pause();
        let started = Instant::now();
        let err = store.next("k", Event::now()).await.unwrap_err();
        let took = started.elapsed();
        server.resume();
        assert!(matches!(err, StoreError::TimedOut { .. }), "{err}");
        assert!(err.outcome_unknown());
        assert!(took < Duration::from_secs(2), "took {took:?}");
        // The stalled script ran once the server woke, or not at all: either
        // way the store answers again and the key moved at most once more.
        let attempts = until_ok(|| store.attempts("k")).await;
        assert!((1..=2).contains(&attempts), "{attempts}");
    });
}

#[test]
fn an_operation_id_makes_a_retry_safe() {
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&shared().url).await, "opid");
        let id = OpId::new();
        let first = store.next_with("k", Event::now(), id).await.unwrap();
        let again = store.next_with("k", Event::now(), id).await.unwrap();
        assert_eq!(
            (first, again),
            (Duration::from_secs(1), Duration::from_secs(1))
        );
        assert_eq!(store.attempts("k").await.unwrap(), 1);
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
    });
}

#[test]
fn script_flush_is_survived() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "flush");
        store.next("k", Event::now()).await.unwrap();
        let mut c = conn;
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
    });
}

#[test]
fn a_wrong_typed_key_is_reported_and_left_alone() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "wrongtype");
        let mut c = conn;
        let _: () = redis::cmd("SET")
            .arg(store.redis_key("k"))
            .arg("someone else's")
            .query_async(&mut c)
            .await
            .unwrap();
        for result in [
            store.next("k", Event::now()).await.map(drop),
            store.try_next("k", Event::now()).await.map(drop),
            store.get("k").await.map(drop),
        ] {
            match result {
                Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "k"),
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
        let kept: String = redis::cmd("GET")
            .arg(store.redis_key("k"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(kept, "someone else's");
    });
}

#[test]
fn redis_down_at_start_is_an_error_not_a_hang() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let url = server.url.clone();
    server.stop();
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        // Connecting eagerly fails at once…
        assert!(
            ConnectionManager::new_with_config(client.clone(), fast_manager_config())
                .await
                .is_err()
        );
        // …and a lazy connection makes every operation fail within its timeout.
        let conn = ConnectionManager::new_lazy_with_config(client, fast_manager_config()).unwrap();
        let store = store_on(conn, "down");
        let started = Instant::now();
        let err = store.next("k", Event::now()).await.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Unavailable { .. } | StoreError::TimedOut { .. }
            ),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    });
}

#[test]
fn entries_expire_in_redis_after_the_window_plus_max() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
            .expire_after(Duration::from_secs(600))
            .prefix(prefix("ttl"))
            .build(conn.clone())
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        let mut c = conn;
        let ttl: i64 = redis::cmd("PTTL")
            .arg(store.redis_key("k"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!((899_000..=900_000).contains(&ttl), "{ttl}");
    });
}

#[test]
fn redis_time_mode_measures_ages_on_the_servers_clock() {
    let rt = runtime();
    rt.block_on(async {
        let store = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
            .prefix(prefix("time"))
            .build(connect(&shared().url).await)
            .unwrap();
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(10)
        );
        // An event 11 s ago is already past the 10 s window; one 9 s ago is not.
        assert!(
            !store
                .is_in_backoff_since("k", Event::ago(Duration::from_secs(11)))
                .await
                .unwrap()
        );
        assert!(
            store
                .is_in_backoff_since("k", Event::ago(Duration::from_secs(9)))
                .await
                .unwrap()
        );
        let left = store
            .remaining("k", Event::now())
            .await
            .unwrap()
            .expect("in backoff");
        assert!(
            left > Duration::from_secs(9) && left <= Duration::from_secs(10),
            "{left:?}"
        );
        assert!(matches!(
            store.try_next("k", Event::now()).await.unwrap(),
            Err(InBackoff { .. })
        ));
        assert_eq!(
            store
                .try_next("k", Event::ahead(Duration::from_secs(10)))
                .await
                .unwrap(),
            Ok(Duration::from_secs(20))
        );
    });
}

#[test]
fn bad_settings_are_refused_with_the_field() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let b = || RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60));
        let field = |r: Result<Store, keyed_backoff::ConfigError>| r.unwrap_err().field();
        assert_eq!(field(b().jitter(f64::NAN).build(conn.clone())), "jitter");
        assert_eq!(field(b().prefix("").build(conn.clone())), "prefix");
        assert_eq!(
            field(b().timeout(Duration::ZERO).build(conn.clone())),
            "timeout"
        );
        assert_eq!(
            field(
                b().expire_after(Duration::from_secs(100 * 86_400))
                    .build(conn.clone())
            ),
            "expire_after"
        );
        for replicas in [0, 101] {
            assert_eq!(
                field(
                    b().wait_for_replicas(replicas, Duration::from_millis(10))
                        .build(conn.clone())
                ),
                "wait_for_replicas.replicas"
            );
        }
        // The wait must end before the operation's own timeout (250 ms).
        for wait in [Duration::ZERO, Duration::from_millis(250), Duration::MAX] {
            let err = b()
                .wait_for_replicas(1, wait)
                .build(conn.clone())
                .unwrap_err();
            assert_eq!(err.field(), "wait_for_replicas.timeout");
            assert!(err.to_string().contains("250ms"), "{err}");
        }
        assert!(
            b().wait_for_replicas(100, Duration::from_millis(249))
                .build(conn.clone())
                .is_ok()
        );
        let big = RedisBackoff::builder(Duration::from_secs(1), Duration::MAX);
        assert_eq!(field(big.build(conn)), "max");
    });
}

#[test]
fn the_opt_in_fallback_answers_while_redis_is_down_then_hands_back() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix("fallback"))
            .timeout(Duration::from_millis(200))
            .fallback(Duration::from_millis(300))
            .build(connect(&server.url).await)
            .unwrap();
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(store.fallback_answers(), 0);
        server.pause();
        // Redis does not answer: the local manager does, with a real backoff
        // (never zero), and keeps answering while the breaker is open.
        let first = store.next("k", Event::now()).await.unwrap();
        assert_eq!(
            first,
            Duration::from_secs(1),
            "the local ladder starts afresh"
        );
        let started = Instant::now();
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "no wait on Redis while open"
        );
        assert_eq!(store.fallback_answers(), 2);
        server.resume();
        // Once the breaker closes, Redis answers again: its entry moved at
        // most once while paused (the timed-out script may have run).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let before = store.fallback_answers();
            let attempts = store.attempts("k").await.unwrap();
            if store.fallback_answers() == before {
                assert!((1..=2).contains(&attempts), "{attempts}");
                break;
            }
            assert!(Instant::now() < deadline, "Redis never took over again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn the_fallback_draws_its_jitter_from_the_stores_seed() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let (initial, max) = (Duration::from_secs(1), Duration::from_secs(60));
        let store = RedisBackoff::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .prefix(prefix("fallback-seed"))
            .timeout(Duration::from_millis(200))
            .fallback(Duration::from_secs(60))
            .build(connect(&server.url).await)
            .unwrap();
        server.pause();
        let mut answered = Vec::new();
        for _ in 0..6 {
            answered.push(store.next("k", Event::now()).await.unwrap());
        }
        server.resume();
        assert_eq!(store.fallback_answers(), 6);
        // The same settings in process: the same seed gives the same ladder.
        let local = Backoff::<String>::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .build()
            .unwrap();
        let now = std::time::Instant::now();
        let expected: Vec<Duration> = (0..6).map(|_| local.next("k", now)).collect();
        assert_eq!(answered, expected);
    });
}

#[test]
fn without_a_fallback_a_failure_is_an_error() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&server.url).await, "closed");
        store.next("k", Event::now()).await.unwrap();
        server.pause();
        let got = store.get("k").await;
        server.resume();
        assert!(matches!(got, Err(StoreError::TimedOut { .. })), "{got:?}");
        assert_eq!(store.fallback_answers(), 0);
    });
}

// ---------------------------------------------------------------------------
// Malformed and foreign entries: a typed error, never a zero backoff, and
// the key left byte for byte as it was

/// The key's exact serialized value and its time to live.
async fn snapshot_of(conn: &mut ConnectionManager, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query_async(conn).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap();
    (dump, ttl)
}

/// Every operation on `key` (an entry someone damaged) answers `Corrupt`,
/// and nothing is written: not the entry, not its time to live.
async fn every_operation_refuses(
    store: &Store,
    conn: &mut ConnectionManager,
    key: &str,
    case: &str,
) {
    let redis_key = store.redis_key(key);
    let before = snapshot_of(conn, &redis_key).await;
    let id = OpId::new();
    let results = [
        ("next", store.next(key, Event::now()).await.map(drop)),
        (
            "next_with",
            store.next_with(key, Event::now(), id).await.map(drop),
        ),
        (
            "try_next",
            store.try_next(key, Event::now()).await.map(drop),
        ),
        (
            "try_next_with",
            store.try_next_with(key, Event::now(), id).await.map(drop),
        ),
        ("get", store.get(key).await.map(drop)),
        ("attempts", store.attempts(key).await.map(drop)),
        (
            "remaining",
            store.remaining(key, Event::now()).await.map(drop),
        ),
        (
            "since",
            store.is_in_backoff_since(key, Event::now()).await.map(drop),
        ),
        (
            "since_update",
            store
                .is_in_backoff_since_update(key, Event::now())
                .await
                .map(drop),
        ),
        ("reset", store.reset(key).await.map(drop)),
        ("collect", store.collect(key).await.map(drop)),
    ];
    for (op, result) in results {
        match result {
            Err(StoreError::Corrupt { key: k, detail }) => {
                assert_eq!(k, key, "{case}: {op}");
                assert!(!detail.is_empty(), "{case}: {op}");
            }
            other => panic!("{case}: {op} gave {other:?}, not Corrupt"),
        }
    }
    let after = snapshot_of(conn, &redis_key).await;
    assert_eq!(before.0, after.0, "{case}: the entry was rewritten");
    assert!(
        after.1 <= before.1 && after.1 > before.1 - 60_000,
        "{case}: TTL {before:?} -> {after:?}"
    );
}

/// For each case, `write(redis_key, case)` damages a fresh entry; then
/// every operation on it must refuse it and leave it as it was.
fn every_damaged_entry_refuses<T>(
    name: &str,
    cases: &[(&str, T)],
    write: impl Fn(&str, &T) -> redis::Pipeline,
) {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), name);
        let mut c = conn;
        for (i, (case, damage)) in cases.iter().enumerate() {
            let key = format!("case-{i}");
            let _: () = write(&store.redis_key(&key), damage)
                .query_async(&mut c)
                .await
                .unwrap();
            every_operation_refuses(&store, &mut c, &key, case).await;
        }
    });
}

#[test]
fn malformed_entries_are_corrupt_and_never_rewritten() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "non-numeric backoff",
            &[("b", "abc"), ("t", "1"), ("a", "1")],
        ),
        ("empty backoff", &[("b", ""), ("t", "1"), ("a", "1")]),
        ("negative backoff", &[("b", "-5"), ("t", "1"), ("a", "1")]),
        ("NaN backoff", &[("b", "nan"), ("t", "1"), ("a", "1")]),
        ("infinite backoff", &[("b", "inf"), ("t", "1"), ("a", "1")]),
        (
            "exponent backoff",
            &[("b", "1e300"), ("t", "1"), ("a", "1")],
        ),
        ("hex backoff", &[("b", "0x10"), ("t", "1"), ("a", "1")]),
        (
            "huge backoff",
            &[("b", "99999999999999999999"), ("t", "1"), ("a", "1")],
        ),
        (
            "fractional backoff",
            &[("b", "1.5"), ("t", "1"), ("a", "1")],
        ),
        ("missing backoff", &[("t", "1"), ("a", "1")]),
        (
            "non-numeric time",
            &[("b", "1000"), ("t", "soon"), ("a", "1")],
        ),
        ("missing time", &[("b", "1000"), ("a", "1")]),
        (
            "time far in the future",
            &[("b", "1000"), ("t", "99999999999999999999"), ("a", "1")],
        ),
        (
            "negative attempts",
            &[("b", "1000"), ("t", "1"), ("a", "-1")],
        ),
        (
            "too many attempts",
            &[("b", "1000"), ("t", "1"), ("a", "99999")],
        ),
        ("missing attempts", &[("b", "1000"), ("t", "1")]),
        (
            "malformed recent ids",
            &[("b", "1000"), ("t", "1"), ("a", "1"), ("r", "x,y")],
        ),
    ];
    every_damaged_entry_refuses("malformed", cases, |key, fields| {
        let mut write = redis::pipe();
        let hset = write.cmd("HSET").arg(key);
        for (f, v) in *fields {
            hset.arg(*f).arg(*v);
        }
        write.cmd("PEXPIRE").arg(key).arg(3_600_000);
        write
    });
}

/// Entries are strings, "backoff,last update,attempts[;records]": the same
/// damage written in that form is refused the same way.
#[test]
fn malformed_string_entries_are_corrupt_and_never_rewritten() {
    let cases: &[(&str, &str)] = &[
        ("empty value", ""),
        ("one field", "1000"),
        ("two fields", "1000,1"),
        ("non-numeric backoff", "abc,1,1"),
        ("empty backoff", ",1,1"),
        ("negative backoff", "-5,1,1"),
        ("NaN backoff", "nan,1,1"),
        ("infinite backoff", "inf,1,1"),
        ("exponent backoff", "1e300,1,1"),
        ("huge backoff", "99999999999999999999,1,1"),
        ("fractional backoff", "1.5,1,1"),
        ("non-numeric time", "1000,soon,1"),
        ("time far in the future", "1000,99999999999999999999,1"),
        ("negative attempts", "1000,1,-1"),
        ("too many attempts", "1000,1,99999"),
        ("a fourth field", "1000,1,1,7"),
        ("trailing garbage", "1000,1,1x"),
        ("malformed record", "1000,1,1;x,y"),
        ("empty record", "1000,1,1;"),
        ("a record without attempts", "1000,1,1;5,1,1000"),
        ("five records", "1000,1,1;1,0,5;2,0,5;3,0,5;4,0,5;5,0,5"),
        (
            "a record with a huge backoff",
            "1000,1,1;5,1,99999999999999999999,1",
        ),
        (
            "a record with a huge wait",
            "1000,1,1;5,0,99999999999999999999",
        ),
        ("a record with too many attempts", "1000,1,1;5,1,1000,99999"),
        (
            "a record with a huge id",
            "1000,1,1;999999999999999999999999,0,5",
        ),
    ];
    every_damaged_entry_refuses("malformed-string", cases, |key, value| {
        let mut write = redis::pipe();
        write
            .cmd("SET")
            .arg(key)
            .arg(*value)
            .arg("PX")
            .arg(3_600_000);
        write
    });
}

/// An entry an earlier version wrote as a hash is read, advanced from
/// where it was, and rewritten as a string.
#[test]
fn an_entry_of_the_earlier_hash_layout_is_read_and_rewritten() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "legacy");
        let mut c = conn;
        let key = store.redis_key("k");
        let now_us: (String, String) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
        let now_us = format!("{}{:0>6}", now_us.0, now_us.1);
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg(&["b", "2000000000", "t", now_us.as_str(), "a", "2", "o", "77"])
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(store.attempts("k").await.unwrap(), 2);
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(4)
        );
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(kind, "string");
        assert_eq!(store.attempts("k").await.unwrap(), 3);
    });
}

#[test]
fn foreign_keys_of_every_type_are_corrupt_and_left_alone() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "foreign");
        let mut c = conn;
        let writes: [(&str, redis::Cmd); 4] = [
            (
                "string",
                redis::cmd("SET").arg(store.redis_key("s")).arg("x").clone(),
            ),
            (
                "list",
                redis::cmd("RPUSH")
                    .arg(store.redis_key("l"))
                    .arg("x")
                    .clone(),
            ),
            (
                "set",
                redis::cmd("SADD")
                    .arg(store.redis_key("e"))
                    .arg("x")
                    .clone(),
            ),
            (
                "zset",
                redis::cmd("ZADD")
                    .arg(store.redis_key("z"))
                    .arg(1)
                    .arg("x")
                    .clone(),
            ),
        ];
        for ((case, cmd), key) in writes.into_iter().zip(["s", "l", "e", "z"]) {
            let _: () = cmd.query_async(&mut c).await.unwrap();
            every_operation_refuses(&store, &mut c, key, case).await;
        }
    });
}

#[test]
fn a_retried_operation_id_counts_once_whatever_ran_in_between() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let a = store_on(conn.clone(), "retry-interleaved");
        let b = a.clone();
        let id = OpId::new();
        // Replica A advances (and, say, never hears the answer); replica B
        // advances too; A retries with its id: its first answer, no third
        // advance.
        let first = a.next_with("k", Event::now(), id).await.unwrap();
        let other = b.next("k", Event::now()).await.unwrap();
        let retried = a.next_with("k", Event::now(), id).await.unwrap();
        assert_eq!(
            (first, other, retried),
            (
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(1)
            )
        );
        assert_eq!(a.attempts("k").await.unwrap(), 2);

        // The gate's refusal is remembered too.
        let gate_id = OpId::new();
        let refused = a.try_next_with("k", Event::now(), gate_id).await.unwrap();
        assert!(refused.is_err(), "{refused:?}");
        let again = a.try_next_with("k", Event::now(), gate_id).await.unwrap();
        assert_eq!(again, refused);
        assert_eq!(a.attempts("k").await.unwrap(), 2);
    });
}

#[test]
fn prefixes_and_keys_never_share_an_entry() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let base = prefix("escape");
        let build = |p: String| {
            RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
                .prefix(p)
                .build(conn.clone())
                .unwrap()
        };
        let short = build(base.clone());
        let long = build(format!("{base}:b"));
        assert_ne!(short.redis_key("b:c"), long.redis_key("c"));
        short.next("b:c", Event::now()).await.unwrap();
        assert_eq!(long.attempts("c").await.unwrap(), 0);
        assert_eq!(short.attempts("b:c").await.unwrap(), 1);
        // A key with the escape character itself stays distinct too.
        assert_ne!(short.redis_key("b%3Ac"), short.redis_key("b:c"));
    });
}

// ---------------------------------------------------------------------------
// The near cache

/// EVALSHA and EVAL calls the server has run so far.
async fn script_calls(conn: &mut ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A storm of gates on keys in backoff over several windows, with and
/// without the near cache: the same grants and refusals, and with the cache
/// at least ten times fewer scripts sent to Redis.
#[test]
fn the_near_cache_answers_a_storm_of_refusals_locally_with_the_same_grants() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let mut conn = connect(&server.url).await;
        let mut outcomes = Vec::new();
        let mut calls = Vec::new();
        for cached in [false, true] {
            let clock = MockClock::new();
            let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(8))
                .prefix(prefix("near"))
                .clock(clock.clone())
                .near_cache(cached)
                .build(conn.clone())
                .unwrap();
            let before = script_calls(&mut conn).await;
            let mut seen = Vec::new();
            // 5 keys, 200 gates each per 250 ms step, for 6 s.
            for _step in 0..24 {
                for k in 0..5 {
                    for _ in 0..200 {
                        let answer = store
                            .try_next(&format!("k{k}"), Event::now())
                            .await
                            .unwrap();
                        seen.push(answer.map_err(|w| w.remaining));
                    }
                }
                clock.advance(Duration::from_millis(250));
            }
            calls.push(script_calls(&mut conn).await - before);
            eprintln!("near cache {cached}: {} scripts", calls.last().unwrap());
            if cached {
                assert_eq!(store.near_cache_hits() + calls[1], 24 * 5 * 200);
            }
            outcomes.push(seen);
        }
        assert_eq!(outcomes[0], outcomes[1], "the cache changed an answer");
        let grants = outcomes[0].iter().filter(|a| a.is_ok()).count();
        assert!(grants >= 5 * 3, "{grants} grants");
        assert!(
            calls[0] >= 10 * calls[1],
            "scripts: {} without the cache, {} with",
            calls[0],
            calls[1]
        );

        // A reset through the store is seen at once.
        let clock = MockClock::new();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(8))
            .prefix(prefix("near-reset"))
            .clock(clock)
            .near_cache(true)
            .build(conn.clone())
            .unwrap();
        assert!(store.try_next("k", Event::now()).await.unwrap().is_ok());
        assert!(store.try_next("k", Event::now()).await.unwrap().is_err());
        store.reset("k").await.unwrap();
        assert!(store.try_next("k", Event::now()).await.unwrap().is_ok());
    });
}

#[test]
fn with_the_fail_fast_setup_a_dead_server_is_unavailable_not_timed_out() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let url = server.url.clone();
    let rt = runtime();
    rt.block_on(async {
        let timeout = Duration::from_millis(300);
        let client = redis::Client::open(url.as_str()).unwrap();
        let conn =
            ConnectionManager::new_with_config(client, keyed_backoff_redis::fail_fast(timeout))
                .await
                .unwrap();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix("failfast"))
            .timeout(timeout)
            .build(conn)
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        server.stop();
        // Each operation fails within its timeout, as "did not run".
        for _ in 0..3 {
            let started = Instant::now();
            let err = store.next("k", Event::now()).await.unwrap_err();
            assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
            assert!(!err.outcome_unknown());
            assert!(
                started.elapsed() <= timeout + Duration::from_millis(200),
                "{:?}",
                started.elapsed()
            );
        }
    });
}
