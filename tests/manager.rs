//! The keyed manager: client-go's own unit tests restated (same names in
//! snake case, the same behaviour asserted), configuration refused by field,
//! no panic at any instant, concurrent updates never lost, and user expiry
//! functions that panic or call back into the manager.

use keyed_backoff::clock::{
    Clock, ClockInstant, MockClock, MockInstant, QuantaClock, StdClock, SystemClock,
};
use keyed_backoff::{Backoff, MAX_BACKOFF};
use keyed_backoff_testkit as testkit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, SystemTime};

const SEC: Duration = Duration::from_secs(1);

/// `initial·2^i` capped at `max`, the curve without jitter.
fn doubling(initial: Duration, max: Duration, i: u32) -> Duration {
    initial.saturating_mul(1 << i.min(30)).min(max)
}

#[test]
fn test_slow_backoff() {
    // Steps slower than the backoff itself still double it, because every
    // `next` lands well inside the 2·max expiry window.
    let (initial, max) = (SEC, 50 * SEC);
    for step in [SEC, 2 * SEC, 5 * SEC] {
        let clock = MockClock::new();
        let b = testkit::manager(initial, max, &clock);
        assert_eq!(b.get("_idSlow"), Duration::ZERO);
        for i in 0..10 {
            b.next("_idSlow", clock.now());
            clock.advance(step);
            assert_eq!(
                b.get("_idSlow"),
                doubling(initial, max, i),
                "step {step:?}, call {i}"
            );
        }
        b.reset("_idSlow");
        assert_eq!(b.get("_idSlow"), Duration::ZERO);
    }
}

#[test]
fn test_backoff_reset() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    let mut last_event = clock.now();
    for _ in 0..6 {
        clock.advance(SEC);
        last_event = clock.now();
        b.next("_idReset", last_event);
    }
    assert_eq!(b.get("_idReset"), 5 * SEC);
    assert!(b.is_in_backoff_since("_idReset", last_event));
    // Longer than the backoff: no longer in backoff. The stale value stays
    // visible through `get` until something touches the entry.
    clock.advance(11 * SEC);
    assert!(!b.is_in_backoff_since("_idReset", last_event));
    assert_eq!(b.get("_idReset"), 5 * SEC);
}

#[test]
fn test_backoff_high_water_mark() {
    // A gap shorter than 2·max keeps the backoff at its high-water mark.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    for _ in 0..6 {
        clock.advance(SEC);
        b.next("_idHiWaterMark", clock.now());
    }
    clock.advance(6 * SEC);
    b.next("_idHiWaterMark", clock.now());
    assert_eq!(b.get("_idHiWaterMark"), 5 * SEC);
}

#[test]
fn test_backoff_gc() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    for _ in 0..6 {
        clock.advance(SEC);
        b.next("_idGC", clock.now());
    }
    // 6 s after the last update is within 2·max = 10 s: kept.
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 0);
    assert_eq!(b.len(), 1);
    // 12 s is past it: collected.
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 1);
    assert_eq!(b.len(), 0);
}

#[test]
fn test_is_in_back_off_since_update() {
    // Each second, a caller asks whether it is still in backoff since the
    // last update and, if not, fails again (`next`). The table gives, per
    // second, the expected answer and the backoff afterwards.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 10 * SEC, &clock);
    let id = "_idIsInBackOffSinceUpdate";
    let mut expected: Vec<(u64, bool, u64)> =
        vec![(0, false, 1), (1, false, 2), (2, true, 2), (3, false, 4)];
    expected.extend((4..=6).map(|t| (t, true, 4)));
    expected.push((7, false, 8));
    expected.extend((8..=14).map(|t| (t, true, 8)));
    expected.push((15, false, 10));
    expected.extend((16..=24).map(|t| (t, true, 10)));
    expected.push((25, false, 10));
    expected.extend((26..=34).map(|t| (t, true, 10)));
    expected.push((35, false, 10));
    // 21 s idle is more than 2·max: the entry expired, so it starts over.
    expected.push((56, false, 1));
    expected.push((57, false, 2));

    let start = clock.now();
    for (t, in_backoff, backoff_after) in expected {
        clock.set(start + Duration::from_secs(t));
        let now = clock.now();
        assert_eq!(
            b.is_in_backoff_since_update(id, now),
            in_backoff,
            "at {t} s"
        );
        if !in_backoff {
            b.next(id, now);
        }
        assert_eq!(b.get(id), Duration::from_secs(backoff_after), "at {t} s");
    }
}

#[test]
fn test_backoff_with_jitter() {
    // With a jitter factor f, each value is the doubled previous value plus
    // up to f·previous, capped at max; the first is initial plus up to
    // f·initial.
    let clock = MockClock::new();
    let (initial, max, factor) = (SEC, 5 * Duration::from_secs(60), 0.1);
    let b = Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .jitter(factor)
        .seed(2015)
        .build()
        .expect("valid");
    let mut previous = b.next("_idJitter", clock.now());
    assert!(
        previous >= initial && previous < initial.mul_f64(1.0 + factor),
        "{previous:?}"
    );
    let mut saw_jitter = previous != initial;
    for _ in 0..20 {
        clock.advance(SEC);
        let got = b.next("_idJitter", clock.now());
        let low = (previous * 2).min(max);
        let high = (previous * 2 + previous.mul_f64(factor)).min(max);
        assert!(
            got >= low && got <= high,
            "{got:?} outside [{low:?}, {high:?}]"
        );
        saw_jitter |= got != low;
        previous = got;
    }
    assert_eq!(previous, max);
    assert!(saw_jitter, "a non-zero jitter factor must move some values");
}

#[test]
fn test_alternate_backoff_gc() {
    // Default expiry: 2·max = 100 s.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 50 * SEC, &clock);
    b.next("default GC", clock.now());
    clock.advance(5 * SEC);
    assert_eq!(b.gc(), 0);
    clock.advance(101 * SEC);
    assert_eq!(b.gc(), 1);

    // A custom expiry keeps entries for 200 s, longer than 2·max.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 50 * SEC)
        .clock(clock.clone())
        .expiry(|event: MockInstant, last: MockInstant, _| {
            event.saturating_duration_since(last) >= 200 * SEC
        })
        .build()
        .expect("valid");
    b.next("GC later than 2*maxDuration", clock.now());
    clock.advance(101 * SEC);
    assert_eq!(b.gc(), 0);
    assert_eq!(b.len(), 1);
    clock.advance(501 * SEC);
    assert_eq!(b.gc(), 1);
    assert!(b.is_empty());
}

#[test]
fn test_alternate_has_expired_func() {
    // Default expiry: a 101 s gap exceeds 2·max = 100 s and starts over.
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 50 * SEC, &clock);
    b.next("default expiration", clock.now());
    clock.advance(5 * SEC);
    b.next("default expiration", clock.now());
    assert_eq!(b.get("default expiration"), 2 * SEC);
    clock.advance(101 * SEC);
    b.next("default expiration", clock.now());
    assert_eq!(b.get("default expiration"), SEC);

    // A custom expiry of 8 s, shorter than max: a 9 s gap starts over.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 50 * SEC)
        .clock(clock.clone())
        .expiry(|event: MockInstant, last: MockInstant, _| {
            event.saturating_duration_since(last) >= 8 * SEC
        })
        .build()
        .expect("valid");
    b.next("expires faster than maxDuration", clock.now());
    clock.advance(5 * SEC);
    b.next("expires faster than maxDuration", clock.now());
    assert_eq!(b.get("expires faster than maxDuration"), 2 * SEC);
    clock.advance(9 * SEC);
    b.next("expires faster than maxDuration", clock.now());
    assert_eq!(b.get("expires faster than maxDuration"), SEC);
}

/// Every operation at the extremes of the mock clock, including time going
/// backwards between calls.
#[test]
fn extreme_instants_never_panic_on_mock_clock() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(MAX_BACKOFF, MAX_BACKOFF)
        .clock(clock.clone())
        .jitter(1e300)
        .build()
        .expect("valid");
    let extremes = [
        MockInstant::from_nanos(i64::MIN),
        MockInstant::from_nanos(-1),
        MockInstant::ZERO,
        MockInstant::ZERO + Duration::MAX,
        MockInstant::from_nanos(i64::MAX),
    ];
    for now in extremes {
        clock.set(now);
        for event in extremes {
            let got = b.next("k", event);
            assert!(got <= MAX_BACKOFF);
            let _ = b.get("k");
            let _ = b.is_in_backoff_since("k", event);
            let _ = b.is_in_backoff_since_update("k", event);
            let _ = b.gc();
        }
    }
    assert!(b.len() <= 1);
}

#[test]
fn events_a_year_before_the_clock_start_follow_clientgo() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .build()
        .expect("valid");
    let year = Duration::from_secs(365 * 24 * 3600);
    let long_ago = clock.now() - year;
    b.next("k", clock.now());
    // An event before the last update is in backoff since the update ...
    assert!(b.is_in_backoff_since_update("k", long_ago));
    // ... and a year since the event is far longer than the backoff.
    assert!(!b.is_in_backoff_since("k", long_ago));
    // Not expired: event − lastUpdate is negative.
    assert_eq!(b.next("k", long_ago), 2 * SEC);
}

fn exercise_real_clock<C: Clock + Clone>(clock: C)
where
    C::Instant: ClockInstant,
{
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .build()
        .expect("valid");
    let now = clock.now();
    for event in [
        now.saturating_sub(Duration::MAX),
        now,
        now.saturating_add(Duration::MAX),
    ] {
        b.next("k", event);
        let _ = b.is_in_backoff_since("k", event);
        let _ = b.is_in_backoff_since_update("k", event);
        b.gc();
    }
    // A far-future event is in backoff since (now − event < 0) unless
    // expired; here it is expired (event − lastUpdate > 2·max).
    assert!(!b.is_in_backoff_since("k", now.saturating_add(Duration::MAX)));
    assert!(b.is_in_backoff_since("k", clock.now().saturating_add(SEC)));
}

#[test]
fn real_clocks_never_panic_at_the_extremes() {
    exercise_real_clock(StdClock);
    exercise_real_clock(QuantaClock);
    exercise_real_clock(SystemClock);
    let _ = SystemTime::UNIX_EPOCH.saturating_sub(Duration::MAX);
}

/// N threads × M `next` calls on one key, with no expiry in between, must
/// leave exactly the backoff of N·M doublings.
#[test]
fn concurrent_next_on_one_key_never_loses_an_update() {
    const THREADS: usize = 4;
    const CALLS: usize = 12;
    for round in 0..100 {
        let clock = MockClock::new();
        let b = Arc::new(
            Backoff::<String>::builder(Duration::from_nanos(1), MAX_BACKOFF)
                .clock(clock.clone())
                .build()
                .expect("valid"),
        );
        let start = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (b, start, clock) = (Arc::clone(&b), Arc::clone(&start), clock.clone());
                thread::spawn(move || {
                    start.wait();
                    for _ in 0..CALLS {
                        b.next("shared", clock.now());
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("worker");
        }
        let doublings = (THREADS * CALLS - 1) as u32;
        assert_eq!(
            b.get("shared"),
            Duration::from_nanos(1 << doublings),
            "round {round}"
        );
    }
}

#[test]
fn a_panicking_expiry_reaches_the_caller_and_the_map_stays_usable() {
    let clock = MockClock::new();
    let b = Arc::new(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .expiry(|event: MockInstant, _last, _max| {
                assert!(event.as_nanos() >= 0, "refusing an event before the start");
                false
            })
            .build()
            .expect("valid"),
    );
    b.next("k", clock.now());
    let before = clock.now() - SEC;
    for op in 0..4 {
        let result = catch_unwind(AssertUnwindSafe(|| match op {
            0 => {
                b.next("k", before);
            }
            1 => {
                b.is_in_backoff_since("k", before);
            }
            2 => {
                b.is_in_backoff_since_update("k", before);
            }
            _ => {
                clock.set(before);
                b.gc();
            }
        }));
        assert!(result.is_err(), "op {op} should have panicked");
    }
    clock.set(MockInstant::ZERO + SEC);
    // No lock is left held: another thread can still write and read.
    let b2 = Arc::clone(&b);
    let t = clock.now();
    thread::spawn(move || b2.next("k", t))
        .join()
        .expect("no deadlock");
    assert_eq!(b.get("k"), 2 * SEC);
    assert_eq!(b.gc(), 0);
}

#[test]
fn backoff_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Backoff<String>>();
    check::<Backoff<String, MockClock>>();
    check::<Backoff<u64, QuantaClock>>();
}

mod closures {
    use super::SEC;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock, mpsc};
    use std::time::{Duration, Instant};

    use keyed_backoff::Backoff;
    use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};

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

#[test]
fn a_manager_holding_a_key_is_not_empty() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    assert!(b.is_empty());
    b.next("k", clock.now());
    assert!(!b.is_empty());
    b.reset("k");
    assert!(b.is_empty());
}

/// client-go's default rule as a user expiry function.
fn twice_max(event: MockInstant, last: MockInstant, max: Duration) -> bool {
    event > last && event.saturating_duration_since(last) > 2 * max
}

#[test]
fn an_expiry_function_may_use_another_manager() {
    let clock = MockClock::new();
    // Both managers have expiry functions: each refuses calls from its own.
    let other = Arc::new(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .expiry(twice_max)
            .build()
            .unwrap(),
    );
    other.next("elsewhere", clock.now());
    let seen = Arc::clone(&other);
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(move |event, last, max| {
            // Only calls into this manager itself are refused.
            assert_eq!(seen.len(), 1);
            twice_max(event, last, max)
        })
        .build()
        .unwrap();
    b.next("k", clock.now());
    assert_eq!(b.next("k", clock.now()), 2 * SEC);
    assert_eq!(b.gc(), 0);
}

#[test]
fn entries_and_entry_show_what_is_held() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    b.next("a", clock.now());
    b.next("b", clock.now());
    b.next("b", clock.now());
    clock.advance(SEC / 2);
    let mut all = b.entries();
    all.sort_by(|x, y| x.key.cmp(&y.key));
    let shown: Vec<(String, Duration, u32, Option<Duration>)> = all
        .into_iter()
        .map(|e| (e.key, e.backoff, e.attempts, e.remaining))
        .collect();
    assert_eq!(
        shown,
        [
            ("a".to_string(), SEC, 1, Some(SEC / 2)),
            ("b".to_string(), 2 * SEC, 2, Some(SEC * 3 / 2)),
        ]
    );
    let b_entry = b.entry("b").unwrap();
    assert_eq!((b_entry.backoff, b_entry.expired), (2 * SEC, false));
    assert!(b.entry("missing").is_none());
}

#[test]
fn stats_and_dump_describe_the_state() {
    let clock = MockClock::new();
    let b = testkit::shared_manager(&clock);
    b.next("default/web-0", clock.now());
    b.next("default/web-0", clock.now());
    b.next("default/db-0", clock.now());
    clock.advance(SEC + SEC / 2);
    b.next("kube-system/dns", clock.now());
    let s = b.stats();
    // web-0: 2 s window, 1.5 s in: in backoff. db-0: 1 s window: ready.
    assert_eq!((s.entries, s.in_backoff, s.expired), (3, 2, 0));
    clock.advance(10 * SEC);
    let s = b.stats();
    assert_eq!((s.in_backoff, s.expired), (0, 2));
    let table = b.dump();
    assert!(table.lines().next().expect("header").starts_with("KEY"));
    assert!(table.contains("default/web-0"));
    assert!(table.contains("expired (awaiting gc)"));
    assert!(
        table.ends_with("3 entries, 0 in backoff, 2 expired; gc: 0 runs, 0 removed"),
        "{table}"
    );
    assert_eq!(b.gc(), 2);
    assert_eq!(b.stats().gc_removed, 2);
}
