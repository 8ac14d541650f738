//! What counts as an outage, and what does not.

use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;

use crate::sim::{CONTROLLER_RUNTIME, Fleet, KUBELET, manager, run_with, secs};

#[test]
fn ten_percent_failing_on_their_own_never_declare_an_outage() {
    // One key in ten is broken; the others succeed, and then either come
    // back every 30 s or are not run again (a quiet controller where only
    // the broken keys keep running).
    for (rule, period) in [
        (KUBELET, Some(secs(30))),
        (KUBELET, None),
        (CONTROLLER_RUNTIME, None),
    ] {
        let fleet = Fleet {
            keys: 1_000,
            broken_every: 10,
            down: secs(0)..secs(0),
            period,
            stagger: secs(10),
            end: secs(3_600),
            skips: true,
        };
        let off = run_with(&fleet, rule, None);
        let on = run_with(&fleet, rule, Some(OutageSettings::default()));
        assert_eq!(on.outages, 0);
        // Every broken key's ladder, every gate decision and every run
        // are the ones without outage detection.
        assert!(off.own[0].len() >= 10, "{:?}", off.own[0]);
        assert_eq!(on.own, off.own);
        assert_eq!(on.gate, off.gate);
        assert_eq!(on.attempts, off.attempts);
    }
}

#[test]
fn keys_newly_breaking_together_while_nothing_succeeds_are_taken_for_an_outage() {
    // The mistake the rule can make: 20 objects broken by one bad rollout
    // in a quiet controller look like an outage. Their own levels are
    // kept, and the first successes end it.
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(OutageSettings::default()));
    for k in 0..19 {
        assert_eq!(b.fail(&format!("bad-{k}")), Ok(secs(10)));
        clock.advance(Duration::from_millis(500));
    }
    assert!(!b.in_outage());
    b.fail("bad-19").unwrap();
    assert!(b.in_outage());
    // A broken key asking later waits on the outage ladder (its slots are at
    // most 4 s apart) rather than its own 20 s step.
    clock.advance(secs(10));
    let wait = b.claim("bad-0");
    assert!(wait.is_some_and(|w| w <= secs(8)), "{wait:?}");
    assert_eq!(b.backoff().get("bad-0"), secs(10));
    // Two successes in a row of any key end it.
    b.succeed("healthy-a");
    b.succeed("healthy-b");
    assert!(!b.in_outage());
}

#[test]
fn twenty_keys_failing_in_a_stream_of_successes_are_not_an_outage() {
    let clock = MockClock::new();
    let b = manager(&clock, KUBELET, Some(OutageSettings::default()));
    // 1 failure in 5: successes are 80 % of outcomes, above the 10 % that
    // still looks like an outage.
    for k in 0..500 {
        let key = format!("k-{k}");
        if k % 5 == 0 {
            b.fail(&key).unwrap();
        } else {
            b.succeed(&key);
        }
        clock.advance(Duration::from_millis(50));
    }
    assert_eq!(b.outages(), 0);
}
