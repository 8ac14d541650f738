//! The store through the core's contract, [`Gate`]: on Redis' own clock
//! every call answers as the in-process manager's does on the same
//! operations (by structure; `conformance.rs` compares them exactly on a
//! mock clock), a floor set by one client holds the key for every client
//! of the same Redis, the fallback answers the same calls while Redis is
//! unreachable, and the outage wrapper runs over the store.

use std::time::{Duration, Instant};

use common::{connect, prefix, runtime, shared};
use keyed_backoff::clock::MockClock;
use keyed_backoff::{Backoff, Gate, InBackoff, Level};
use keyed_backoff_outage::{OutageAware, OutageSettings};
use keyed_backoff_redis::{Event, OpId, RedisBackoff};
use keyed_backoff_testkit::redis_server::free_port;

mod common;

/// Unwraps the in-process manager's answer, which never fails.
fn ok<T>(r: Result<T, std::convert::Infallible>) -> T {
    let Ok(v) = r;
    v
}

/// A wait measured on a real clock: at most `full`, and less than `slack`
/// short of it (the time the calls took).
fn about(wait: Option<Duration>, full: Duration) -> bool {
    let slack = Duration::from_millis(500);
    wait.is_some_and(|w| w <= full && w + slack > full)
}

/// On Redis' own clock (`TIME`) the same sequence gives the same structure
/// as in process: which calls advance and which are refused, the levels
/// reached, and waits within the time the calls took.
#[test]
fn on_redis_time_each_call_answers_as_in_process() {
    let rt = runtime();
    rt.block_on(async {
        let (initial, max) = (Duration::from_secs(10), Duration::from_secs(300));
        let local = Backoff::<String>::builder(initial, max).build().unwrap();
        let store = RedisBackoff::builder(initial, max)
            .prefix(prefix("gate-time"))
            .build(connect(&shared().url).await)
            .unwrap();
        let k = "k".to_string();
        let level = |backoff: u64, attempts| Level {
            backoff: Duration::from_secs(backoff),
            attempts,
        };
        for (name, s, l) in [
            (
                "never failed",
                store.wait(&k).await.unwrap(),
                ok(local.wait(&k).await),
            ),
            (
                "claim",
                store.claim(&k).await.unwrap(),
                ok(local.claim(&k).await),
            ),
        ] {
            assert_eq!((s, l), (None, None), "{name}");
        }
        assert_eq!(store.level(&k).await.unwrap(), None);
        let (s, l) = (store.fail(&k).await.unwrap(), ok(local.fail(&k).await));
        assert_eq!((s, l), (Ok(level(10, 1)), Ok(level(10, 1))));
        assert_eq!(store.level(&k).await.unwrap(), Some(level(10, 1)));
        // In backoff: refused, not counted, the wait about 10 s.
        let (s, l) = (store.fail(&k).await.unwrap(), ok(local.fail(&k).await));
        for refused in [s, l] {
            assert!(
                about(refused.err().map(|w| w.remaining), initial),
                "{refused:?}"
            );
        }
        assert!(about(store.wait(&k).await.unwrap(), initial));
        // A floor past the backoff: the longer wait, the ladder unchanged.
        let floor = Duration::from_secs(40);
        store.hold(&k, floor).await.unwrap();
        ok(local.hold(&k, floor).await);
        assert!(about(store.wait(&k).await.unwrap(), floor));
        assert!(about(ok(local.wait(&k).await), floor));
        let refused = store.fail(&k).await.unwrap();
        assert!(about(refused.err().map(|w| w.remaining), floor));
        // An earlier floor never shortens it.
        store.hold(&k, Duration::from_secs(1)).await.unwrap();
        assert!(about(store.wait(&k).await.unwrap(), floor));
        assert_eq!(store.level(&k).await.unwrap(), Some(level(10, 1)));
        assert_eq!(store.get(&k).await.unwrap(), initial);
        // A success clears both.
        store.succeed(&k).await.unwrap();
        ok(local.succeed(&k).await);
        assert_eq!(store.wait(&k).await.unwrap(), None);
        assert_eq!(store.level(&k).await.unwrap(), None);
        // Resumed: no wait, and the next failure climbs from the level.
        store.resume(&k, level(40, 3)).await.unwrap();
        ok(local.resume(&k, level(40, 3)).await);
        assert_eq!(store.wait(&k).await.unwrap(), None);
        assert_eq!(store.level(&k).await.unwrap(), Some(level(40, 3)));
        // A live entry is not resumed over.
        store.resume(&k, level(10, 1)).await.unwrap();
        assert_eq!(store.level(&k).await.unwrap(), Some(level(40, 3)));
        let (s, l) = (store.fail(&k).await.unwrap(), ok(local.fail(&k).await));
        assert_eq!((s, l), (Ok(level(80, 4)), Ok(level(80, 4))));
    });
}

/// A floor set through one client, each on a connection of its own,
/// refuses the key on the other for the floor's length, and no other key.
#[test]
fn a_floor_set_by_one_client_holds_the_key_for_every_client() {
    let rt = runtime();
    rt.block_on(async {
        let prefix = prefix("gate-fleet");
        let replica = |prefix: String| async move {
            RedisBackoff::builder(Duration::from_millis(100), Duration::from_secs(60))
                .prefix(prefix)
                .build(connect(&shared().url).await)
                .unwrap()
        };
        let (a, b) = (replica(prefix.clone()).await, replica(prefix).await);
        let (host, other) = ("held".to_string(), "other".to_string());
        let floor = Duration::from_millis(800);
        let set = Instant::now();
        a.hold(&host, floor).await.unwrap();
        // The other key is not held anywhere.
        assert_eq!(b.wait(&other).await.unwrap(), None);
        assert!(b.fail(&other).await.unwrap().is_ok());
        // On B: refused for the floor's length, counted never.
        let deadline = set + Duration::from_secs(10);
        let advanced = loop {
            match b.fail(&host).await.unwrap() {
                Err(InBackoff { remaining }) => {
                    assert!(remaining <= floor, "{remaining:?}");
                    // Set after `set`, asked before now: at least the rest
                    // of the floor (Redis' clock and ours within 5 ms).
                    let replied = set.elapsed();
                    assert!(remaining + replied + Duration::from_millis(5) >= floor);
                }
                Ok(level) => break level,
            }
            assert!(Instant::now() < deadline, "the floor never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(
            set.elapsed() >= floor - Duration::from_millis(50),
            "ran after {:?}",
            set.elapsed()
        );
        // The ladder starts as if there had been no floor.
        assert_eq!(
            advanced,
            Level {
                backoff: Duration::from_millis(100),
                attempts: 1
            }
        );
        assert_eq!(a.level(&host).await.unwrap(), Some(advanced));
    });
}

/// While Redis is unreachable the fallback answers the contract's calls
/// as the in-process manager does.
#[test]
fn the_fallback_answers_the_gate_while_redis_is_unreachable() {
    let rt = runtime();
    rt.block_on(async {
        let store = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
            .prefix(prefix("gate-fallback"))
            .fallback(Duration::from_secs(60))
            .open(&format!("redis://127.0.0.1:{}/", free_port()))
            .await
            .unwrap();
        let k = "k".to_string();
        let first = Level {
            backoff: Duration::from_secs(10),
            attempts: 1,
        };
        assert_eq!(store.fail(&k).await.unwrap(), Ok(first));
        assert!(store.fail(&k).await.unwrap().is_err());
        assert_eq!(store.level(&k).await.unwrap(), Some(first));
        store.hold(&k, Duration::from_secs(30)).await.unwrap();
        assert!(about(
            store.wait(&k).await.unwrap(),
            Duration::from_secs(30)
        ));
        store.succeed(&k).await.unwrap();
        assert_eq!(store.wait(&k).await.unwrap(), None);
        store.resume(&k, first).await.unwrap();
        assert_eq!(store.level(&k).await.unwrap(), Some(first));
        assert!(store.stats().fallback_answers >= 9);
    });
}

/// The outage wrapper runs over the store: keys newly failing together
/// on Redis are an outage.
#[test]
fn outage_awareness_wraps_the_store() {
    let rt = runtime();
    rt.block_on(async {
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix("gate-outage"))
            .build(connect(&shared().url).await)
            .unwrap();
        let gate = OutageAware::new(store, OutageSettings::new().min_failing_keys(3)).unwrap();
        for key in ["a", "b", "c"] {
            assert!(gate.fail(&key.to_string()).await.unwrap().is_ok());
        }
        assert!(gate.in_outage());
        assert!(gate.wait(&"d".to_string()).await.unwrap().is_some());
        // Each key's level is the store's.
        let level = gate.inner().level(&"a".to_string()).await.unwrap();
        assert_eq!(level.map(|l| l.attempts), Some(1));
    });
}

/// A floor keeps its place through the store's other writes: a refusal
/// remembered under an operation id on a key held with no ladder, and the
/// stale ladder's removal (the floor stays until it ends).
#[test]
fn a_floor_survives_records_and_the_stale_ladders_removal() {
    let rt = runtime();
    rt.block_on(async {
        let clock = MockClock::new();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(4))
            .clock(clock.clone())
            .prefix(prefix("gate-writes"))
            .build(connect(&shared().url).await)
            .unwrap();
        let k = "k".to_string();
        store.hold(&k, Duration::from_secs(5)).await.unwrap();
        let id = OpId::new();
        let refused = Err(InBackoff {
            remaining: Duration::from_secs(5),
        });
        assert_eq!(
            store.try_next_with(&k, Event::now(), id).await.unwrap(),
            refused
        );
        clock.advance(Duration::from_secs(1));
        // The retry gets its first answer; the floor is still there.
        assert_eq!(
            store.try_next_with(&k, Event::now(), id).await.unwrap(),
            refused
        );
        assert_eq!(store.wait(&k).await.unwrap(), Some(Duration::from_secs(4)));
        clock.advance(Duration::from_secs(4));
        assert_eq!(
            store
                .try_next_with(&k, Event::now(), OpId::new())
                .await
                .unwrap(),
            Ok(Duration::from_secs(1))
        );
        // A ladder gone stale under a floor: the ladder goes, the floor stays.
        store.hold(&k, Duration::from_secs(60)).await.unwrap();
        clock.advance(Duration::from_secs(9)); // past the 8 s expiry window
        assert!(store.gc_key(&k).await.unwrap());
        assert_eq!(store.get(&k).await.unwrap(), Duration::ZERO);
        assert_eq!(store.wait(&k).await.unwrap(), Some(Duration::from_secs(51)));
        assert!(!store.reset(&k).await.unwrap(), "no ladder was left");
        assert_eq!(store.wait(&k).await.unwrap(), None);
    });
}
