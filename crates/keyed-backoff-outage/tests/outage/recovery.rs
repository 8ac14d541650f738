//! After an outage: every parked key goes again within seconds, at a bounded
//! rate, and a key broken on its own climbs on from where it stood.

use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;

use crate::sim::{CONTROLLER_RUNTIME, Fleet, KUBELET, Manager, manager, run_with, secs};

#[test]
fn every_parked_key_goes_within_15_s_of_recovery_at_the_release_rate() {
    for (name, rule, down, rate) in [
        ("kubelet", KUBELET, 300, 200.0),
        ("kubelet", KUBELET, 600, 200.0),
        ("controller-runtime", CONTROLLER_RUNTIME, 120, 200.0),
        ("controller-runtime", CONTROLLER_RUNTIME, 120, 100.0),
    ] {
        let fleet = Fleet {
            keys: 1_000,
            broken_every: 0,
            down: secs(0)..secs(down),
            period: None,
            stagger: Duration::ZERO,
            end: secs(down + 1_200),
            skips: true,
        };
        let up = fleet.down.end;
        let off = run_with(&fleet, rule, None);
        let settings = OutageSettings::default().release_rate(rate);
        let on = run_with(&fleet, rule, Some(settings));
        let last = |firsts: Vec<Option<Duration>>| {
            firsts
                .into_iter()
                .map(|t| t.expect("every key succeeds") - up)
                .max()
                .unwrap()
        };
        let (last_off, last_on) = (
            last(off.first_successes(fleet.keys, up)),
            last(on.first_successes(fleet.keys, up)),
        );
        let ended = on.ended.expect("the outage ended");
        // Every run from the dependency's return counts: the probes that
        // found it back and ended the outage, then the release.
        let busiest_off = off.busiest_second(|t| t >= up);
        let busiest_on = on.busiest_second(|t| t >= up);
        eprintln!(
            "{name}, {down} s outage, release at {rate}/s: last first success {last_off:?} after recovery without outage detection, {last_on:?} with it (ended {:?} after recovery); busiest second {busiest_off} without, {busiest_on} with",
            ended - up
        );
        assert!(last_on <= secs(15), "{name} {down} s: {last_on:?}");
        assert!(
            busiest_on as f64 <= rate,
            "{name} {down} s: {busiest_on} in a second"
        );
    }
}

#[test]
fn a_key_broken_on_its_own_climbs_on_from_its_level_before_the_outage() {
    // Key 0 fails on its own throughout; the 999 others' work comes every
    // 30 s. The 10-minute outage is longer than the key's reset window
    // (600 s): left alone, its entry would expire and start over.
    let fleet = |down| Fleet {
        keys: 1_000,
        broken_every: 1_000,
        down,
        period: Some(secs(30)),
        stagger: secs(30),
        end: secs(3_000),
        skips: true,
    };
    let calm = run_with(
        &fleet(secs(0)..secs(0)),
        KUBELET,
        Some(OutageSettings::default()),
    );
    let outage = fleet(secs(45)..secs(645));
    let stormy = run_with(&outage, KUBELET, Some(OutageSettings::default()));
    assert_eq!((calm.outages, stormy.outages), (0, 1));
    let (calm, stormy) = (&calm.own[0], &stormy.own[0]);
    // Before the outage: 10, 20, 40 s; after it, on from 80 s, as if it had
    // not happened.
    let n = stormy.len().min(calm.len());
    assert!(n >= 8, "{stormy:?}");
    assert_eq!(stormy[..n], calm[..n]);
    assert_eq!(stormy.last(), Some(&secs(300)));
}

#[test]
fn callers_that_run_every_requeue_recover_within_15_s_but_are_not_kept_back() {
    // A controller that never asks before running (an error policy alone):
    // a parked key's only wait is the one its failure is answered with, its
    // slot in the next step, so every key reaches the dependency once a
    // step, more often than its own ladder would (docs/outage.md).
    let fleet = Fleet {
        keys: 1_000,
        broken_every: 0,
        down: secs(0)..secs(120),
        period: None,
        stagger: Duration::ZERO,
        end: secs(600),
        skips: false,
    };
    let up = fleet.down.end;
    let off = run_with(&fleet, CONTROLLER_RUNTIME, None);
    let on = run_with(&fleet, CONTROLLER_RUNTIME, Some(OutageSettings::default()));
    let last = on
        .first_successes(fleet.keys, up)
        .into_iter()
        .map(|t| t.expect("every key succeeds") - up)
        .max()
        .unwrap();
    let (off_runs, on_runs) = (off.attempts_in(&fleet.down), on.attempts_in(&fleet.down));
    eprintln!(
        "controller-runtime, 120 s, runs not skipped: {off_runs} runs reach the dependency without outage detection, {on_runs} with it; last first success {last:?} after recovery"
    );
    assert!(last <= secs(15), "{last:?}");
}

/// A manager on `clock` whose outage (declared by three keys) parked
/// `parked` keys, `parked-0` on, and ended 10 s later: its release begins.
fn released(clock: &MockClock, settings: OutageSettings, parked: usize) -> Manager {
    let b = manager(clock, KUBELET, Some(settings.min_failing_keys(3)));
    for k in 0..3 {
        b.fail(&format!("failing-{k}")).unwrap();
    }
    for k in 0..parked {
        assert!(b.claim(&format!("parked-{k}")).is_some());
    }
    clock.advance(secs(10));
    b.succeed("recovered-a");
    b.succeed("recovered-b");
    assert!(!b.in_outage());
    b
}

#[test]
fn during_the_release_a_parked_key_waits_its_turn_and_others_may_go() {
    let clock = MockClock::new();
    let b = released(&clock, OutageSettings::new().release_rate(1.0), 4);
    // One key a second: each key that asks is given the next turn, and
    // reading a wait takes none.
    let turns: Vec<_> = (0..3)
        .map(|k| b.claim(&format!("parked-{k}")).unwrap_or_default())
        .collect();
    assert!(turns[0] < turns[1] && turns[1] < turns[2], "{turns:?}");
    let (second, third) = (turns[1], turns[2]);
    assert_eq!(b.wait("parked-2"), Some(third));
    // A key never parked may go at once, as may one whose turn has come.
    assert_eq!(b.wait("never-parked"), None);
    clock.advance(second);
    assert_eq!(b.wait("parked-1"), None);
    assert!(b.wait("parked-2").is_some());
    // Once the release is over, every key may go, even one that never
    // asked for its turn.
    clock.advance(secs(60));
    assert_eq!(b.wait("parked-3"), None);
    assert_eq!(b.wait("parked-2"), None);
}

#[test]
fn keys_that_ask_late_in_the_release_still_go_at_its_rate() {
    let clock = MockClock::new();
    let settings = OutageSettings::new()
        .ladder(secs(1), secs(4))
        .release_rate(10.0);
    let b = released(&clock, settings, 20);
    // Nobody asks for 3 s: longer than the 20 turns take at 10 a second,
    // within two of the ladder's longest steps (4 s), the time a parked key
    // may take to ask. Then all ask at once: one goes, the rest take turns.
    clock.advance(secs(3));
    let gone = (0..20)
        .filter(|k| b.claim(&format!("parked-{k}")).is_none())
        .count();
    assert_eq!(gone, 1);
}
