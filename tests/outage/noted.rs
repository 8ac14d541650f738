//! A failure told ahead of its `next` (`note_failure`): seen by detection
//! at once, counted once with the `next` that follows, and never moving a
//! ladder.

use keyed_backoff::OutageSettings;
use keyed_backoff::clock::{Clock, MockClock};

use crate::sim::{KUBELET, manager, secs};

#[test]
fn a_noted_failure_and_the_next_that_follows_count_once() {
    // Three keys declare an outage when successes are at most half of the
    // outcomes. Counted once, 3 failures and 4 successes are not an
    // outage; counted twice (6 failures), they would be.
    let settings = OutageSettings::default()
        .min_failing_keys(3)
        .max_success_ratio(0.5);
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(settings));
    b.note_failure("k-0");
    assert_eq!(b.try_next_now("k-0"), Ok(secs(10)));
    for k in 0..4 {
        b.reset(&format!("ok-{k}"));
    }
    for key in ["k-1", "k-2"] {
        b.note_failure(key);
        b.next(key, clock.now());
    }
    assert!(!b.stats().in_outage);
    // Without the successes, the same failures are an outage.
    let b = manager(&clock, KUBELET, Some(settings));
    for key in ["k-0", "k-1", "k-2"] {
        b.note_failure(key);
        b.next(key, clock.now());
    }
    assert!(b.stats().in_outage);
}

#[test]
fn noted_failures_declare_an_outage_before_any_key_advances() {
    // A controller that starts every key's run before its error policy
    // reports any: the noted failures alone are seen, and the keys that
    // ask afterwards are held.
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(OutageSettings::default()));
    for k in 0..19 {
        b.note_failure(&format!("k-{k}"));
    }
    assert!(!b.stats().in_outage);
    b.note_failure("k-19");
    assert!(b.stats().in_outage);
    assert!(b.is_empty(), "no ladder moved");
    assert!(b.remaining("k-500", clock.now()).is_some());
}

#[test]
fn a_noted_failure_leaves_the_ladder_as_it_is_without_detection() {
    let clock = MockClock::new();
    let on = manager(&clock, KUBELET, Some(OutageSettings::default()));
    let off = manager(&clock, KUBELET, None);
    let mut ladders = (Vec::new(), Vec::new());
    for _ in 0..6 {
        for (b, ladder) in [(&on, &mut ladders.0), (&off, &mut ladders.1)] {
            b.note_failure("k");
            assert!(b.try_next_now("k").is_ok());
            // Early: noted while in its own backoff, and refused.
            b.note_failure("k");
            assert!(b.try_next_now("k").is_err());
            ladder.push((b.get("k"), b.attempts("k")));
        }
        clock.advance(on.get("k"));
    }
    assert_eq!(ladders.0, ladders.1);
    assert_eq!(ladders.0.last(), Some(&(secs(300), 6)));
    assert_eq!(on.stats().outages, 0);
    // Without detection it does nothing at all.
    off.note_failure("other");
    assert_eq!((off.len(), off.attempts("other")), (1, 0));
}
