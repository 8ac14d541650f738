//! What an operator sees of an outage: the wrapper's counters, `tracing`
//! events (feature `tracing`) and `metrics` (feature `metrics`).

use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageSettings;

use crate::sim::{KUBELET, Manager, manager, secs};

/// A manager in an outage declared by three failing keys.
fn in_an_outage(clock: &MockClock) -> Manager {
    let b = manager(
        clock,
        KUBELET,
        Some(OutageSettings::new().min_failing_keys(3)),
    );
    for k in 0..3 {
        b.fail(&format!("failing-{k}")).unwrap();
    }
    b
}

/// An outage of three keys that parks five more, ends at 10 s, and whose
/// release is over by 20 s (two 4 s steps and five keys at 200 a second).
#[cfg(any(feature = "tracing", feature = "metrics"))]
fn an_outage_and_its_release(clock: &MockClock) {
    let b = in_an_outage(clock);
    for k in 0..5 {
        assert!(b.claim(&format!("parked-{k}")).is_some());
    }
    clock.advance(secs(10));
    b.succeed("recovered-a");
    b.succeed("recovered-b");
    for k in 0..5 {
        b.claim(&format!("parked-{k}"));
    }
    clock.advance(secs(10));
    assert_eq!(b.claim("parked-0"), None);
    assert_eq!(b.parked(), 0);
}

#[test]
fn counters_follow_an_outage_from_start_to_release() {
    let clock = MockClock::new();
    let b = in_an_outage(&clock);
    // Reading a key's wait parks nothing; claiming its run parks it.
    assert!(b.wait("parked").is_some());
    assert_eq!((b.in_outage(), b.parked(), b.outages()), (true, 0, 1));
    assert!(b.claim("parked").is_some());
    assert_eq!((b.in_outage(), b.parked(), b.outages()), (true, 1, 1));
    clock.advance(secs(5));
    b.succeed("a");
    b.succeed("b");
    assert_eq!((b.in_outage(), b.parked(), b.outages()), (false, 1, 1));
}

#[cfg(feature = "tracing")]
#[test]
fn an_outage_its_end_and_its_release_are_info_events() {
    use keyed_backoff_testkit::events::Events;
    let events = Events::default();
    events.record(|| an_outage_and_its_release(&MockClock::new()));
    let seen = events.seen();
    let outage: Vec<_> = seen
        .iter()
        .filter(|s| s.message.contains("outage"))
        .collect();
    assert_eq!(outage.len(), 3, "{seen:?}");
    assert!(outage.iter().all(|s| s.level == tracing::Level::INFO));
    assert!(outage[0].message.starts_with("outage began"));
    assert_eq!(outage[0].field("fresh_failures"), Some("3"));
    assert_eq!(outage[0].field("successes"), Some("0"));
    assert!(outage[1].message.starts_with("outage ended"));
    assert_eq!(outage[1].field("lasted_ms"), Some("10000"));
    assert_eq!(outage[1].field("parked"), Some("5"));
    assert!(outage[2].message.starts_with("outage release over"));
    assert_eq!(outage[2].field("released"), Some("5"));
}

#[cfg(feature = "metrics")]
#[test]
fn an_outage_is_counted_and_its_gauge_goes_up_and_down() {
    use keyed_backoff_testkit::metrics::Metrics;
    let metrics = Metrics::new();
    let clock = MockClock::new();
    // Two wrappers: one whose outage goes on, one whose outage ends.
    let _going_on = metrics.record(|| in_an_outage(&clock));
    metrics.record(|| an_outage_and_its_release(&clock));
    let now = metrics.samples();
    assert_eq!(now.counter("keyed_backoff_outages_total", &[]), 2);
    // The gauge counts the wrappers in an outage.
    assert_eq!(now.gauge("keyed_backoff_outage_active", &[]), Some(1.0));
    assert_eq!(
        now.counter("keyed_backoff_outage_parked_keys_total", &[]),
        5
    );
    assert_eq!(
        now.counter("keyed_backoff_outage_released_keys_total", &[]),
        5
    );
    assert_eq!(
        now.histogram("keyed_backoff_outage_duration_seconds", &[]),
        [10.0]
    );
}
