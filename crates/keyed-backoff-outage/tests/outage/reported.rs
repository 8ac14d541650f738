//! A failure reported as soon as its run returns, before the controller
//! does anything else ([`Gate::fail`](keyed_backoff::Gate::fail) at once):
//! seen by detection at once, counted once however often it is reported,
//! and moving the key's ladder as the bare backoff would.

use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;

use crate::sim::{KUBELET, manager, secs};

#[test]
fn a_failure_is_counted_once_however_often_it_is_reported() {
    // Three keys declare an outage when successes are at most half of the
    // outcomes. Counted once, 3 failures and 4 successes are not an
    // outage; with the refused reports counted too (5 and 4), they would be.
    let settings = OutageSettings::default()
        .min_failing_keys(3)
        .max_success_ratio(0.5);
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(settings));
    assert_eq!(b.fail("k-0"), Ok(secs(10)));
    // Reported again while the key is in its backoff: refused, not counted.
    assert!(b.fail("k-0").is_err());
    for k in 0..4 {
        b.succeed(&format!("ok-{k}"));
    }
    for key in ["k-1", "k-2"] {
        assert_eq!(b.fail(key), Ok(secs(10)));
        assert!(b.fail(key).is_err());
    }
    assert!(!b.in_outage());
    // Without the successes, the same failures are an outage, declared by
    // the third key's.
    let b = manager(&clock, KUBELET, Some(settings));
    for key in ["k-0", "k-1", "k-2"] {
        assert!(!b.in_outage());
        assert_eq!(b.fail(key), Ok(secs(10)));
        assert!(b.fail(key).is_err());
    }
    assert!(b.in_outage());
}

#[test]
fn failures_reported_at_once_declare_an_outage_before_any_other_key_runs() {
    // A controller that starts every key's run and reports each failure as
    // soon as it returns: the twentieth declares the outage, and a key that
    // asks to run afterwards is parked.
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(OutageSettings::default()));
    for k in 0..19 {
        b.fail(&format!("k-{k}")).unwrap();
    }
    assert!(!b.in_outage());
    b.fail("k-19").unwrap();
    assert!(b.in_outage());
    // Each failed key stands at its first backoff.
    assert_eq!(b.backoff().len(), 20);
    assert!((0..20).all(|k| b.backoff().attempts(&format!("k-{k}")) == 1));
    assert_eq!(b.parked(), 0);
    assert!(b.claim("k-500").is_some());
    assert_eq!(b.parked(), 1);
}

#[test]
fn a_failure_reported_at_once_moves_the_ladder_as_the_bare_backoff_does() {
    let clock = MockClock::new();
    let on = manager(&clock, KUBELET, Some(OutageSettings::default()));
    let off = manager(&clock, KUBELET, None);
    let mut ladders = (Vec::new(), Vec::new());
    for _ in 0..6 {
        for (b, ladder) in [(&on, &mut ladders.0), (&off, &mut ladders.1)] {
            assert!(b.fail("k").is_ok());
            // Early: reported again while in its own backoff, and refused.
            assert!(b.fail("k").is_err());
            let k = b.backoff();
            ladder.push((k.get("k"), k.attempts("k")));
        }
        clock.advance(on.backoff().get("k"));
    }
    assert_eq!(ladders.0, ladders.1);
    assert_eq!(ladders.0.last(), Some(&(secs(300), 6)));
    assert_eq!(on.outages(), 0);
}

#[test]
fn a_failure_refused_by_a_floor_leaves_the_next_real_failure_counted() {
    // Three keys newly failing within the (30 s) detection window declare
    // an outage.
    let settings = OutageSettings::default().min_failing_keys(3);
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(settings));
    // The server asked 'k' to wait 60 s: its failure now is refused by the
    // floor, and its ladder does not start.
    b.hold("k", secs(60));
    assert_eq!(b.fail("k").map_err(|e| e.remaining), Err(secs(60)));
    assert_eq!(b.backoff().attempts("k"), 0);
    // Past the floor, and past the window since, two keys newly fail and
    // then 'k' does: three keys within the window.
    clock.advance(secs(60));
    for key in ["a", "b"] {
        assert_eq!(b.fail(key), Ok(secs(10)));
    }
    assert!(!b.in_outage());
    assert_eq!(b.fail("k"), Ok(secs(10)));
    assert!(b.in_outage(), "k's failure was not counted");
}
