//! The store behaves as client-go's `Backoff` and as the in-process
//! manager: client-go's traces replay on it, random programs (the core's
//! contract, floors included) give the same answers, a seed gives the same
//! jitter, a fleet advances a key once per window, on the caller's clock or
//! on Redis's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, prefix, runtime, shared};
use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff::{Backoff, Gate, InBackoff, Level};
use keyed_backoff_redis::{Event, RedisBackoff};
use keyed_backoff_testkit::clientgo::traces;
use proptest::prelude::*;

mod common;

/// The in-process manager's answer, which never fails.
fn ok<T>(answer: Result<T, std::convert::Infallible>) -> T {
    let Ok(v) = answer;
    v
}

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
    // The core's contract, on the store's now.
    Wait(usize),
    Claim(usize),
    Fail(usize),
    Succeed(usize),
    Hold(usize, u64),
    Level(usize),
    Resume(usize, u64, u32),
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
        key.clone().prop_map(Op::Reset),
        key.clone().prop_map(Op::Wait),
        key.clone().prop_map(Op::Claim),
        key.clone().prop_map(Op::Fail),
        key.clone().prop_map(Op::Succeed),
        (key.clone(), 0u64..20_000).prop_map(|(k, ms)| Op::Hold(k, ms)),
        key.clone().prop_map(Op::Level),
        (key, 0u64..20_000, 0u32..6).prop_map(|(k, ms, a)| Op::Resume(k, ms, a)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Every operation, the contract's included (floors and resumed
    /// levels), answers exactly as the in-process manager's on a shared
    /// mock clock.
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
                    Op::Wait(k) => prop_assert_eq!(
                        store.wait(&key(k)).await.unwrap(),
                        ok(local.wait(&key(k)).await)
                    ),
                    Op::Claim(k) => prop_assert_eq!(
                        store.claim(&key(k)).await.unwrap(),
                        ok(local.claim(&key(k)).await)
                    ),
                    Op::Fail(k) => prop_assert_eq!(
                        store.fail(&key(k)).await.unwrap(),
                        ok(local.fail(&key(k)).await)
                    ),
                    Op::Succeed(k) => {
                        store.succeed(&key(k)).await.unwrap();
                        ok(local.succeed(&key(k)).await);
                    }
                    Op::Hold(k, ms) => {
                        store.hold(&key(k), Duration::from_millis(ms)).await.unwrap();
                        ok(local.hold(&key(k), Duration::from_millis(ms)).await);
                    }
                    Op::Level(k) => prop_assert_eq!(
                        store.level(&key(k)).await.unwrap(),
                        ok(local.level(&key(k)).await)
                    ),
                    Op::Resume(k, ms, attempts) => {
                        let level = Level { backoff: Duration::from_millis(ms), attempts };
                        store.resume(&key(k), level).await.unwrap();
                        ok(local.resume(&key(k), level).await);
                    }
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

#[test]
fn reads_between_advances_take_no_jitter_draw() {
    // Only an advance draws: the seeded sequence of delays is the same
    // with every read, reset and gc of other calls in between.
    let rt = runtime();
    rt.block_on(async {
        let clock = MockClock::new();
        let (initial, max) = (Duration::from_millis(100), Duration::from_secs(3_600));
        let local = Backoff::<String>::builder(initial, max)
            .jitter(0.5)
            .seed(11)
            .clock(clock.clone())
            .build()
            .unwrap();
        let store = RedisBackoff::builder(initial, max)
            .jitter(0.5)
            .seed(11)
            .clock(clock.clone())
            .prefix(prefix("reads"))
            .build(connect(&shared().url).await)
            .unwrap();
        for _ in 0..6 {
            let t = clock.now();
            store.get("k").await.unwrap();
            store.is_in_backoff_since("k", Event::now()).await.unwrap();
            store
                .is_in_backoff_since_update("k", Event::now())
                .await
                .unwrap();
            store.reset("other").await.unwrap();
            store.gc_key("other").await.unwrap();
            assert_eq!(
                store.next("k", Event::now()).await.unwrap(),
                local.next("k", t)
            );
        }
    });
}

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

#[test]
fn redis_time_mode_measures_ages_on_the_servers_clock() {
    let rt = runtime();
    rt.block_on(async {
        let store = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
            .prefix(prefix("time"))
            .build(connect(&shared().url).await)
            .unwrap();
        let advanced = Instant::now();
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
        // What is left of the 10 s: no less than 10 s less the time since
        // just before the advance, however slow the machine (Redis' clock
        // and ours within 5 ms).
        let since = advanced.elapsed();
        assert!(
            left <= Duration::from_secs(10)
                && left + since + Duration::from_millis(5) >= Duration::from_secs(10),
            "{left:?} left {since:?} after the advance"
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
