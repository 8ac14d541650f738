//! During an outage, the dependency sees a few probes instead of every
//! key's ladder.

use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;

use crate::sim::{CONTROLLER_RUNTIME, Fleet, KUBELET, manager, run_with, secs};

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
        skips: true,
    }
}

/// Runs `fleet` with and without outage detection and checks that the runs
/// reaching the dependency during the outage fall at least fivefold.
fn falls_fivefold(what: &str, fleet: &Fleet, rule: (Duration, Duration, Duration)) {
    let off = run_with(fleet, rule, None);
    let on = run_with(fleet, rule, Some(OutageSettings::default()));
    assert_eq!(off.outages, 0);
    assert_eq!(on.outages, 1, "one outage, declared once");
    let (off, on) = (off.attempts_in(&fleet.down), on.attempts_in(&fleet.down));
    eprintln!("{what}: {off} runs reach the dependency without outage detection, {on} with it");
    assert!(off >= 5 * on, "{what}: {off} off, {on} on");
}

#[test]
fn an_outage_from_the_start_reaches_the_dependency_at_least_five_times_less() {
    let start = |down| fleet(secs(0)..secs(down), None, Duration::ZERO);
    falls_fivefold("kubelet, 300 s from the start", &start(300), KUBELET);
    falls_fivefold(
        "controller-runtime, 120 s from the start",
        &start(120),
        CONTROLLER_RUNTIME,
    );
}

#[test]
fn an_outage_of_a_busy_controller_reaches_the_dependency_at_least_five_times_less() {
    // Every key's work comes every 30 s; the dependency is down from 60 s
    // to 180 s.
    let busy = fleet(secs(60)..secs(180), Some(secs(30)), secs(30));
    falls_fivefold("kubelet, 120 s mid-run", &busy, KUBELET);
    falls_fivefold(
        "controller-runtime, 120 s mid-run",
        &busy,
        CONTROLLER_RUNTIME,
    );
}

#[test]
fn a_floor_longer_than_the_outage_wait_still_holds() {
    let clock = MockClock::new();
    let b = manager(
        &clock,
        KUBELET,
        Some(OutageSettings::new().min_failing_keys(3)),
    );
    for k in 0..3 {
        b.fail(&format!("failing-{k}")).unwrap();
    }
    assert!(b.in_outage());
    // The server asked for 60 s; the outage's ladder steps are at most 4 s.
    b.hold("asked-to-wait", secs(60));
    assert_eq!(b.claim("asked-to-wait"), Some(secs(60)));
    // At the end of the ladder's first step the key's slot has come and a
    // probe's turn is free, yet the floor refuses it.
    clock.advance(Duration::from_millis(999));
    let refused = b.fail("asked-to-wait").unwrap_err();
    assert_eq!(refused.remaining, secs(60) - Duration::from_millis(999));
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

/// The wrapper adds no rule to a level: it reads the level of the backoff
/// under it, and a level put back reaches that backoff.
#[test]
fn a_level_read_or_put_back_through_the_wrapper_is_the_backoffs() {
    use keyed_backoff::{Gate, Level};
    use keyed_backoff_testkit::ready;
    let clock = MockClock::new();
    let crate::sim::Manager::Aware(gate) = manager(&clock, KUBELET, Some(OutageSettings::new()))
    else {
        unreachable!("made with outage settings")
    };
    let key = "k".to_string();
    let level = Level {
        backoff: secs(40),
        attempts: 3,
    };
    assert_eq!(ready(gate.level(&key)), Ok(None));
    ready(gate.resume(&key, level)).unwrap();
    assert_eq!(ready(Gate::level(gate.inner(), &key)), Ok(Some(level)));
    assert_eq!(ready(gate.level(&key)), Ok(Some(level)));
}
