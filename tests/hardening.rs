//! Regression tests for behaviour an adversarial review found wrong, each
//! named after the behaviour it pins.

use std::time::{Duration, SystemTime};

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, Snapshot, SnapshotEntry};

const SEC: Duration = Duration::from_secs(1);

fn manager(clock: &MockClock, initial: Duration, max: Duration) -> Backoff<String, MockClock> {
    Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .build()
        .expect("valid")
}

fn snap(entries: &[(&str, Duration, u32, SystemTime)]) -> Snapshot<String> {
    Snapshot {
        entries: entries
            .iter()
            .map(|&(k, backoff, attempts, last_update)| SnapshotEntry {
                key: k.to_string(),
                backoff,
                attempts,
                last_update,
            })
            .collect(),
    }
}

#[test]
fn amortized_gc_counts_try_next_like_next() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 5 * SEC)
        .clock(clock.clone())
        .amortized_gc(10)
        .build()
        .expect("valid");
    for i in 0..9 {
        let _ = b.try_next(format!("k{i}").as_str(), clock.now());
    }
    assert_eq!(b.stats().gc_runs, 0);
    let _ = b.try_next("k9", clock.now());
    assert_eq!(b.stats().gc_runs, 1, "the 10th write sweeps, gate or not");
    // Refused gate calls are writers' calls too.
    for _ in 0..10 {
        let _ = b.try_next("k0", clock.now());
    }
    assert_eq!(b.stats().gc_runs, 2);
}

#[test]
fn restore_moves_a_future_last_update_to_now() {
    let clock = MockClock::new();
    let b = manager(&clock, 10 * SEC, 300 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let year = Duration::from_secs(365 * 86_400);
    let s = snap(&[("ahead", 20 * SEC, 2, wall + year)]);
    assert_eq!(b.restore_at(&s, wall), 1);
    // In backoff for its 20 s from now, not for a year.
    assert_eq!(b.remaining("ahead", clock.now()), Some(20 * SEC));
    clock.advance(20 * SEC);
    assert_eq!(b.remaining("ahead", clock.now()), None);
    // And collected after the expiry window, like any entry.
    clock.advance(600 * SEC);
    assert_eq!(b.gc(), 1);
}

#[test]
fn restore_of_a_far_future_wall_time_does_not_hold_a_key_for_centuries() {
    let clock = MockClock::new();
    let b = manager(&clock, 10 * SEC, 300 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 2);
    assert_eq!(b.restore_at(&snap(&[("k", 40 * SEC, 3, far)]), wall), 1);
    assert_eq!(b.remaining("k", clock.now()), Some(40 * SEC));
}

#[test]
fn restore_cuts_backoffs_above_the_new_max() {
    let clock = MockClock::new();
    let b = manager(&clock, SEC, 10 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    assert_eq!(b.restore_at(&snap(&[("k", 300 * SEC, 6, wall)]), wall), 1);
    assert_eq!(b.get("k"), 10 * SEC);
    assert_eq!(b.remaining("k", clock.now()), Some(10 * SEC));
}

#[test]
fn restore_with_duplicate_keys_applies_the_last_and_counts_entries_held() {
    let clock = MockClock::new();
    let b = manager(&clock, SEC, 10 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let fresh = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall)]);
    assert_eq!(b.restore_at(&fresh, wall), 1);
    assert_eq!(b.len(), 1);
    assert_eq!((b.get("k"), b.attempts("k")), (4 * SEC, 3));
    // The later duplicate has expired: it decides, so nothing is restored.
    let c = manager(&clock, SEC, 10 * SEC);
    let stale_last = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall - 100 * SEC)]);
    assert_eq!(c.restore_at(&stale_last, wall), 0);
    assert!(c.is_empty());
}

mod strategies {
    use std::time::Duration;

    use keyed_backoff::budget::{RetryBudget, TokenBucket};
    use keyed_backoff::strategy::{
        Cenkalti, Constant, Decorrelated, EqualJitter, Ethernet, Exponential, FactorJitter,
        FullJitter, GoogleCloud, Hadoop, Linear, Step, WaitBackoff,
    };
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// Every strategy family, with parameters drawn from the test's inputs
    /// (durations in ms, factors and jitters in small ranges).
    fn all(a: u64, b: u64, f: f64, j: f64) -> Vec<Box<dyn Step>> {
        let (a, b) = (MS * a as u32, MS * b as u32);
        vec![
            Box::new(Constant::new(a)),
            Box::new(Linear::new(a, b).cap(b * 3)),
            Box::new(Exponential::new(a, 1.0 + f).cap(b)),
            Box::new(FullJitter::new(a, b)),
            Box::new(EqualJitter::new(a, b)),
            Box::new(Decorrelated::new(a, b)),
            Box::new(Decorrelated::new(a, b).bounded()),
            Box::new(FactorJitter::new(a, b).factor(j * 2.0)),
            Box::new(
                WaitBackoff::new(a)
                    .factor(f * 2.0)
                    .jitter(j)
                    .steps(6)
                    .cap(b),
            ),
            Box::new(Ethernet::new(a)),
            Box::new(Hadoop::new(a, 8).cap(b)),
            Box::new(GoogleCloud::new().max_backoff(b)),
            Box::new(
                Cenkalti::new()
                    .initial(a)
                    .max_interval(b)
                    .randomization(j)
                    .multiplier(1.0 + f),
            ),
        ]
    }

    proptest! {
        #[test]
        fn cap_bounds_every_delay_a_strategy_produces(
            a in 0u64..100_000,
            b in 0u64..100_000,
            f in 0.0f64..2.0,
            j in 0.0f64..1.0,
            draws in proptest::collection::vec(0.0f64..1.0, 40),
        ) {
            for s in all(a, b, f, j) {
                let cap = s.max_delay();
                let mut previous = None;
                let mut it = draws.iter().cycle();
                for n in 0..40 {
                    let Some(d) = s.delay(n, previous, &mut || *it.next().unwrap()) else { break };
                    prop_assert!(d <= cap, "{s:?}: delay {n} = {d:?} above cap {cap:?}");
                    previous = Some(d);
                }
            }
        }
    }

    #[test]
    fn cenkalti_at_duration_max_saturates_instead_of_panicking() {
        let c = Cenkalti::new()
            .initial(Duration::MAX)
            .max_interval(Duration::MAX)
            .max_elapsed(Duration::MAX);
        for n in 0..5 {
            let _ = c.delay(n, None, &mut || 0.5);
        }
    }

    #[test]
    fn cenkalti_with_a_constant_interval_stops_at_max_elapsed_like_the_sum() {
        // With multiplier 1 the interval never changes and the elapsed sum
        // is one multiplication; it must stop exactly where summing would.
        let c = Cenkalti::new()
            .multiplier(1.0)
            .randomization(0.0)
            .initial(Duration::from_secs(1))
            .max_elapsed(Duration::from_secs(10));
        let given = (0..20)
            .take_while(|&n| c.delay(n, None, &mut || 0.0).is_some())
            .count();
        assert_eq!(given, 10);
    }

    #[test]
    fn token_bucket_with_a_huge_ratio_refills_to_max_without_overflow() {
        let b = TokenBucket::new(10.0, 1e16).expect("gRPC accepts any positive ratio");
        for _ in 0..10 {
            b.on_outcome(false);
        }
        assert!(!b.try_retry());
        b.on_outcome(true);
        assert_eq!(b.tokens(), 10.0);
        assert!(b.try_retry());
    }
}

#[test]
fn a_strategy_whose_limit_the_manager_cannot_count_is_refused() {
    use keyed_backoff::strategy::{Constant, Strategy};
    let with = |s| {
        Backoff::<String>::with_strategy(s)
            .build()
            .map(drop)
            .map_err(|e| e.field())
    };
    let five_thousand = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(5_000);
    assert_eq!(with(five_thousand), Err("strategy"));
    let none = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(0);
    assert_eq!(with(none), Err("strategy"));
    let at_limit = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(4_095);
    assert_eq!(with(at_limit), Ok(()));
    let unlimited = Strategy::new(Constant::new(5 * SEC)).unwrap();
    assert_eq!(with(unlimited), Ok(()));
}

mod closures {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock, mpsc};
    use std::time::{Duration, Instant};

    use keyed_backoff::Backoff;
    use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};

    const SEC: Duration = Duration::from_secs(1);

    type Shared = Arc<OnceLock<Arc<Backoff<String, MockClock>>>>;

    /// Runs `f` on a thread and waits for it with a real-time deadline, so a
    /// deadlock fails the test instead of hanging the suite.
    fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("finished: no deadlock")
    }

    fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn an_expiry_that_calls_its_own_manager_panics_instead_of_deadlocking() {
        let outcome = within_deadline(|| {
            let clock = MockClock::new();
            let me: Shared = Arc::default();
            let inner = Arc::clone(&me);
            let b = Arc::new(
                Backoff::<String>::builder(SEC, 60 * SEC)
                    .clock(clock.clone())
                    .expiry(move |_: MockInstant, _: MockInstant, _| {
                        if let Some(b) = inner.get() {
                            let _ = b.get("k"); // same key, same shard
                        }
                        false
                    })
                    .build()
                    .expect("valid"),
            );
            let _ = me.set(Arc::clone(&b));
            b.next("k", clock.now());
            let second =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.next("k", clock.now())));
            let gc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.gc()));
            // The manager is still usable from outside the function.
            (second.map_err(panic_text), gc.map_err(panic_text), b.len())
        });
        let (second, gc, len) = outcome;
        let message = second.expect_err("re-entry refused");
        assert!(message.contains("expiry function called back"), "{message}");
        assert!(gc.is_err());
        assert_eq!(len, 1);
    }

    #[test]
    fn a_panicking_expiry_in_amortised_gc_does_not_fail_an_unrelated_next() {
        let clock = MockClock::new();
        let panicked = AtomicBool::new(false);
        let b = Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .amortized_gc(2)
            .expiry(move |event: MockInstant, _: MockInstant, _| {
                // Panics once, on the first judgement after the jump.
                let late = event.as_nanos() >= 1_000_000_000_000;
                assert!(!late || panicked.swap(true, Ordering::SeqCst), "boom");
                false
            })
            .build()
            .expect("valid");
        b.next("old", clock.now());
        clock.advance(2_000 * SEC);
        // The 2nd write sweeps; the sweep judges "old" and the function
        // panics. "fresh" has no entry, so its own update never calls it.
        let fresh = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.next("fresh", clock.now())
        }));
        assert_eq!(
            fresh.ok(),
            Some(SEC),
            "the caller's update took effect and it sees Ok"
        );
        let stats = b.stats();
        assert_eq!((stats.gc_panics, stats.entries), (1, 2));
    }

    #[test]
    fn a_panicking_expiry_does_not_end_the_gc_thread() {
        let clock = MockClock::new();
        let panicking = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&panicking);
        let b = Arc::new(
            Backoff::<String>::builder(SEC, 5 * SEC)
                .clock(clock.clone())
                .expiry(move |event: MockInstant, last: MockInstant, _| {
                    // Only the GC thread's sweeps panic, while the flag is up.
                    let on_gc_thread = std::thread::current().name() == Some("keyed-backoff-gc");
                    assert!(!(on_gc_thread && flag.load(Ordering::SeqCst)), "boom");
                    event.saturating_duration_since(last) > 10 * SEC
                })
                .build()
                .expect("valid"),
        );
        b.next("k", clock.now());
        clock.advance(11 * SEC);
        let _gc = b.spawn_gc(Duration::from_millis(1)).expect("spawn");
        // Real time passes for the thread: poll with a deadline.
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.stats().gc_panics < 2 {
            assert!(Instant::now() < deadline, "the thread never ran");
            std::thread::yield_now();
        }
        panicking.store(false, Ordering::SeqCst);
        while !b.is_empty() {
            assert!(Instant::now() < deadline, "the thread died with the panic");
            std::thread::yield_now();
        }
    }
}
