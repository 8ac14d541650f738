//! No panic at any instant on any clock, concurrent updates never lost,
//! and a manager that is `Send + Sync`.

use keyed_backoff::clock::{
    Clock, ClockInstant, MockClock, MockInstant, QuantaClock, StdClock, SystemClock,
};
use keyed_backoff::{Backoff, Settings};

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, SystemTime};

const MAX_BACKOFF: Duration = Settings::MAX_BACKOFF;

const SEC: Duration = Duration::from_secs(1);

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
fn backoff_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Backoff<String>>();
    check::<Backoff<String, MockClock>>();
    check::<Backoff<u64, QuantaClock>>();
}
