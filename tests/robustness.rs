//! Bad input is refused with a clear error; no input makes any method panic;
//! concurrent updates are never lost.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, SystemTime};

use keyed_backoff::clock::{
    Clock, ClockInstant, MockClock, MockInstant, QuantaClock, StdClock, SystemClock,
};
use keyed_backoff::{Backoff, ConfigError, MAX_BACKOFF};

const SEC: Duration = Duration::from_secs(1);

fn build_err(f: impl FnOnce() -> Result<Backoff<String>, ConfigError>) -> ConfigError {
    f().expect_err("configuration must be refused")
}

#[test]
fn bad_jitter_is_refused_naming_field_and_range() {
    for bad in [
        f64::NAN,
        -0.1,
        -f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        let err = build_err(|| {
            Backoff::<String>::builder(SEC, 60 * SEC)
                .jitter(bad)
                .build()
        });
        assert_eq!(err.field(), "jitter");
        let msg = err.to_string();
        assert!(
            msg.contains("jitter") && msg.contains("finite number >= 0"),
            "{msg}"
        );
    }
    // Zero and large finite factors are allowed, as in client-go.
    assert!(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .jitter(0.0)
            .build()
            .is_ok()
    );
    assert!(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .jitter(1e300)
            .build()
            .is_ok()
    );
}

#[test]
fn absurd_durations_are_refused() {
    let err = build_err(|| Backoff::<String>::new(Duration::MAX, SEC));
    assert_eq!(err.field(), "initial");
    let err = build_err(|| Backoff::<String>::new(SEC, Duration::MAX));
    assert_eq!(err.field(), "max");
    assert!(err.to_string().contains("about 52 days"), "{err}");
    let just_over = MAX_BACKOFF + Duration::from_nanos(1);
    assert_eq!(
        build_err(|| Backoff::<String>::new(SEC, just_over)).field(),
        "max"
    );
    assert!(Backoff::<String>::new(MAX_BACKOFF, MAX_BACKOFF).is_ok());
}

#[test]
fn bad_shard_counts_are_refused() {
    for bad in [0, 1, 3, 100, 1 << 17] {
        let err = build_err(|| {
            Backoff::<String>::builder(SEC, 60 * SEC)
                .shards(bad)
                .build()
        });
        assert_eq!(err.field(), "shards", "{bad}");
    }
}

#[test]
fn an_expiry_set_after_the_clock_builds_and_the_last_expiry_wins() {
    // A custom expiry set after the clock is accepted (the compiler refuses
    // the opposite order), and a later setting replaces an earlier one.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(|_, _, _| true)
        .expiry(|_, _, _| false)
        .build()
        .expect("expiry after clock builds");
    b.next("k", clock.now());
    clock.advance(1_000 * SEC);
    assert_eq!(b.gc(), 0, "the second expiry (never stale) decides");
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(|_, _, _| false)
        .expire_after(5 * SEC)
        .build()
        .expect("a fixed window after a custom expiry builds");
    b.next("k", clock.now());
    clock.advance(6 * SEC);
    assert_eq!(b.gc(), 1, "the fixed window replaced the closure");
    // A fixed window is clock-independent and survives a clock change.
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .expire_after(5 * SEC)
        .clock(clock.clone())
        .build()
        .expect("valid");
    b.next("k", clock.now());
    clock.advance(5 * SEC + Duration::from_nanos(1));
    assert_eq!(b.gc(), 1);
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
