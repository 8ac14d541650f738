//! Per-key floors (`hold_until`): a key held until an instant does not run
//! before it, through every check a caller makes; a later floor extends, an
//! earlier one never shortens, `reset` clears it; and the backoff grows
//! exactly as client-go's does, floor or not.

use keyed_backoff::InBackoff;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff_testkit as testkit;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_held_key_does_not_run_before_the_floor_through_any_check() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    let t0 = clock.now();
    // A key with no entry at all is held too.
    b.hold_until("host", t0 + 30 * SEC);
    assert_eq!(
        b.try_next("host", t0),
        Err(InBackoff {
            remaining: 30 * SEC
        })
    );
    assert_eq!(b.remaining("host", t0), Some(30 * SEC));
    assert_eq!(b.remaining_since("host", t0), Some(30 * SEC));
    assert!(b.is_in_backoff_since("host", t0));
    assert!(b.is_in_backoff_since_update("host", t0));
    assert_eq!(
        b.try_next_now("host"),
        Err(InBackoff {
            remaining: 30 * SEC
        })
    );
    // A refusal changes nothing: no entry was made.
    assert_eq!(
        (b.get("host"), b.attempts("host"), b.len()),
        (Duration::ZERO, 0, 0)
    );

    clock.advance(30 * SEC - Duration::from_nanos(1));
    assert_eq!(
        b.remaining("host", clock.now()),
        Some(Duration::from_nanos(1))
    );
    assert!(b.is_in_backoff_since_update("host", clock.now()));
    clock.advance(Duration::from_nanos(1));
    assert_eq!(b.remaining("host", clock.now()), None);
    assert!(!b.is_in_backoff_since("host", clock.now()));
    assert!(!b.is_in_backoff_since_update("host", clock.now()));
    assert_eq!(
        b.try_next("host", clock.now()),
        Ok(SEC),
        "client-go's first step"
    );
}

#[test]
fn the_longer_of_the_backoff_and_the_floor_is_the_wait() {
    let clock = MockClock::new();
    let b = testkit::manager(10 * SEC, 300 * SEC, &clock);
    let t0 = clock.now();
    assert_eq!(b.try_next("k", t0), Ok(10 * SEC));
    b.hold_until("k", t0 + 4 * SEC); // shorter than the backoff
    assert_eq!(b.remaining("k", t0), Some(10 * SEC));
    assert_eq!(
        b.try_next("k", t0 + 4 * SEC),
        Err(InBackoff { remaining: 6 * SEC })
    );
    b.hold_until("k", t0 + 25 * SEC); // longer
    assert_eq!(
        b.try_next("k", t0 + 10 * SEC),
        Err(InBackoff {
            remaining: 15 * SEC
        })
    );
    assert_eq!(b.remaining("k", t0 + 10 * SEC), Some(15 * SEC));
}

#[test]
fn a_later_floor_extends_an_earlier_one_never_shortens_and_reset_clears() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    let t0 = clock.now();
    b.hold_until("k", t0 + 10 * SEC);
    b.hold_until("k", t0 + 20 * SEC);
    assert_eq!(b.remaining("k", t0), Some(20 * SEC));
    b.hold_until("k", t0 + 5 * SEC);
    assert_eq!(b.remaining("k", t0), Some(20 * SEC), "never shortened");
    // Other keys are not held.
    assert_eq!(b.remaining("other", t0), None);
    assert_eq!(b.try_next("other", t0), Ok(SEC));

    b.next("k", t0);
    assert!(b.reset("k"));
    assert_eq!(b.remaining("k", t0), None, "reset clears the floor");
    assert_eq!(b.try_next("k", t0), Ok(SEC));
    // A floor on a key with no entry is cleared by reset too.
    b.hold_until("fresh", t0 + 9 * SEC);
    assert!(!b.reset("fresh"), "there was no entry");
    assert_eq!(b.remaining("fresh", t0), None);
}

#[test]
fn floors_leave_the_backoff_growing_exactly_as_client_gos() {
    let clock = MockClock::new();
    let held = testkit::manager(SEC, 60 * SEC, &clock);
    let plain = testkit::manager(SEC, 60 * SEC, &clock);
    for round in 0..8u32 {
        let now = clock.now();
        // Floors of every length, some past the backoff, some inside it.
        held.hold_until("k", now + SEC * (round % 3));
        assert_eq!(held.next("k", now), plain.next("k", now), "round {round}");
        assert_eq!(held.get("k"), plain.get("k"));
        assert_eq!(held.attempts("k"), plain.attempts("k"));
        clock.advance(SEC);
    }
    // The gate advances the same ladder once the floor has passed.
    let now = clock.now();
    held.hold_until("k", now + 500 * SEC);
    let wait = held.remaining("k", now).expect("held");
    clock.advance(wait);
    let (a, b) = (held.try_next_now("k"), plain.next("k", clock.now()));
    assert_eq!(a, Ok(b));
}

#[test]
fn gc_forgets_passed_floors_and_keeps_the_others() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 5 * SEC, &clock);
    let t0 = clock.now();
    b.hold_until("soon", t0 + SEC);
    b.hold_until("late", t0 + 100 * SEC);
    clock.advance(2 * SEC);
    assert_eq!(b.gc(), 0, "gc counts entries, and there are none");
    assert_eq!(b.remaining("soon", clock.now()), None);
    assert_eq!(b.remaining("late", clock.now()), Some(98 * SEC));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn until_ready_waits_out_the_floor_on_tokios_clock() {
    use keyed_backoff::Backoff;
    use keyed_backoff::clock::TokioClock;
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(TokioClock)
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    b.hold_until("host", start + 2 * SEC);
    b.until_ready("host").await;
    assert_eq!(start.elapsed(), 2 * SEC);
    b.hold_until("host", tokio::time::Instant::now() + 3 * SEC);
    assert_eq!(b.until_ready_then_next("host").await, SEC);
    assert_eq!(start.elapsed(), 5 * SEC);
}
