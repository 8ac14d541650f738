//! During an outage, the dependency sees a few probes instead of every
//! key's ladder.

use std::time::Duration;

use keyed_backoff::OutageSettings;

use crate::sim::{CONTROLLER_RUNTIME, Fleet, KUBELET, run_with, secs};

/// 1,000 healthy keys and a dependency down over `down`.
fn fleet(down: std::ops::Range<Duration>, period: Option<Duration>, stagger: Duration) -> Fleet {
    let end = down.end + secs(60);
    Fleet {
        keys: 1_000,
        broken_every: 0,
        down,
        period,
        stagger,
        end,
    }
}

/// Runs `fleet` with and without outage detection; returns the runs that
/// reached the dependency during the outage, off and on.
fn attempts(fleet: &Fleet, rule: (Duration, Duration, Duration)) -> (usize, usize) {
    let off = run_with(fleet, rule, None);
    let on = run_with(fleet, rule, Some(OutageSettings::default()));
    assert_eq!(off.outages, 0);
    assert_eq!(on.outages, 1, "one outage, declared once");
    (off.attempts_in(&fleet.down), on.attempts_in(&fleet.down))
}

#[test]
fn an_outage_from_the_start_reaches_the_dependency_at_least_five_times_less() {
    for (name, rule, down) in [
        ("kubelet", KUBELET, 300),
        ("controller-runtime", CONTROLLER_RUNTIME, 120),
    ] {
        let fleet = fleet(secs(0)..secs(down), None, Duration::ZERO);
        let (off, on) = attempts(&fleet, rule);
        eprintln!(
            "{name}, {down} s outage from the start: {off} runs reach the dependency without outage detection, {on} with it"
        );
        assert!(off >= 5 * on, "{name}: {off} off, {on} on");
    }
}

#[test]
fn an_outage_of_a_busy_controller_reaches_the_dependency_at_least_five_times_less() {
    // Every key's work comes every 30 s; the dependency is down from 60 s
    // to 180 s.
    for (name, rule) in [
        ("kubelet", KUBELET),
        ("controller-runtime", CONTROLLER_RUNTIME),
    ] {
        let fleet = fleet(secs(60)..secs(180), Some(secs(30)), secs(30));
        let (off, on) = attempts(&fleet, rule);
        eprintln!(
            "{name}, 120 s outage mid-run: {off} runs reach the dependency without outage detection, {on} with it"
        );
        assert!(off >= 5 * on, "{name}: {off} off, {on} on");
    }
}

#[test]
fn during_an_outage_no_key_climbs_its_own_ladder() {
    let fleet = fleet(secs(0)..secs(300), None, Duration::ZERO);
    let on = run_with(&fleet, KUBELET, Some(OutageSettings::default()));
    // The keys that failed before the outage was declared stand at their
    // first backoff; no key's own ladder went past it.
    let climbed: Vec<usize> = (0..fleet.keys).filter(|k| on.own[*k].len() > 1).collect();
    assert!(climbed.is_empty(), "keys {climbed:?} climbed");
    let failed_first = on.own.iter().filter(|own| own.len() == 1).count();
    assert_eq!(failed_first, 20, "the 20 failures that declared it");
}
