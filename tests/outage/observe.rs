//! What an operator sees of an outage: `tracing` events (feature
//! `tracing`) and `metrics` (feature `metrics`).

use std::time::Duration;

use keyed_backoff::OutageSettings;
use keyed_backoff::clock::{Clock, MockClock};

use crate::sim::{KUBELET, manager};

/// An outage of three keys that holds five more, ends at 10 s, and whose
/// release is over by 20 s (two 4 s steps and five keys at 200 a second).
#[cfg(any(feature = "tracing", feature = "metrics"))]
fn an_outage_and_its_release(clock: &MockClock) -> keyed_backoff::Backoff<String, MockClock> {
    let b = manager(
        clock,
        KUBELET,
        Some(OutageSettings::new().min_failing_keys(3)),
    );
    for k in 0..3 {
        b.try_next_now(&format!("failing-{k}")).unwrap();
    }
    for k in 0..5 {
        assert!(b.remaining(&format!("held-{k}"), clock.now()).is_some());
    }
    clock.advance(crate::sim::secs(10));
    b.reset("recovered-a");
    b.reset("recovered-b");
    for k in 0..5 {
        b.remaining(&format!("held-{k}"), clock.now());
    }
    clock.advance(crate::sim::secs(10));
    assert_eq!(b.remaining("held-0", clock.now()), None);
    assert_eq!(b.stats().held, 0);
    b
}

#[cfg(feature = "tracing")]
mod events {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::{Event, Level, Subscriber};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    use super::*;

    /// An event's level, message and numeric fields.
    #[derive(Debug, Clone, Default)]
    struct Seen {
        level: Option<Level>,
        message: String,
        fields: Vec<(&'static str, u64)>,
    }

    impl Visit for Seen {
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.fields.push((field.name(), value));
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.message = format!("{value:?}");
            }
        }
    }

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Seen>>>);

    impl<S: Subscriber> Layer<S> for Recorder {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            let mut seen = Seen {
                level: Some(*event.metadata().level()),
                ..Seen::default()
            };
            event.record(&mut seen);
            self.0.lock().unwrap().push(seen);
        }
    }

    #[test]
    fn an_outage_its_end_and_its_release_are_info_events() {
        let recorder = Recorder::default();
        let subscriber = tracing_subscriber::registry().with(recorder.clone());
        let _guard = tracing::subscriber::set_default(subscriber);
        an_outage_and_its_release(&MockClock::new());
        let seen = recorder.0.lock().unwrap().clone();
        let outage: Vec<&Seen> = seen
            .iter()
            .filter(|s| s.message.contains("outage"))
            .collect();
        assert_eq!(outage.len(), 3, "{seen:?}");
        assert!(outage.iter().all(|s| s.level == Some(Level::INFO)));
        let field = |s: &Seen, name| s.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        assert!(outage[0].message.starts_with("outage began"));
        assert_eq!(field(outage[0], "fresh_failures"), Some(3));
        assert_eq!(field(outage[0], "successes"), Some(0));
        assert!(outage[1].message.starts_with("outage ended"));
        assert_eq!(field(outage[1], "lasted_ms"), Some(10_000));
        assert_eq!(field(outage[1], "held"), Some(5));
        assert!(outage[2].message.starts_with("outage release over"));
        assert_eq!(field(outage[2], "released"), Some(5));
    }
}

#[cfg(feature = "metrics")]
mod metrics {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    use super::*;

    #[test]
    fn an_outage_is_counted_and_its_gauge_goes_up_and_down() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let clock = MockClock::new();
        // Two managers: one whose outage goes on, one whose outage ends.
        ::metrics::with_local_recorder(&recorder, || {
            let b = manager(
                &clock,
                KUBELET,
                Some(OutageSettings::new().min_failing_keys(3)),
            );
            for k in 0..3 {
                b.try_next_now(&format!("failing-{k}")).unwrap();
            }
        });
        ::metrics::with_local_recorder(&recorder, || an_outage_and_its_release(&clock));
        // A snapshot reads (and clears) every value: take one.
        let values: std::collections::HashMap<String, DebugValue> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
            .collect();
        let value = |name: &str| values.get(name);
        assert_eq!(
            value("keyed_backoff_outages_total"),
            Some(&DebugValue::Counter(2))
        );
        // The gauge counts the managers in an outage: the first one's goes
        // on.
        assert_eq!(
            value("keyed_backoff_outage_active"),
            Some(&DebugValue::Gauge(1.0.into()))
        );
        assert_eq!(
            value("keyed_backoff_outage_held_keys_total"),
            Some(&DebugValue::Counter(5))
        );
        assert_eq!(
            value("keyed_backoff_outage_released_keys_total"),
            Some(&DebugValue::Counter(5))
        );
        assert_eq!(
            value("keyed_backoff_outage_duration_seconds"),
            Some(&DebugValue::Histogram(vec![10.0.into()]))
        );
    }
}

#[test]
fn stats_follow_an_outage_from_start_to_release() {
    let clock = MockClock::new();
    let b = manager(
        &clock,
        KUBELET,
        Some(OutageSettings::new().min_failing_keys(3)),
    );
    for k in 0..3 {
        b.try_next_now(&format!("failing-{k}")).unwrap();
    }
    b.remaining("held", clock.now());
    let s = b.stats();
    assert_eq!((s.in_outage, s.held, s.outages), (true, 1, 1));
    clock.advance(Duration::from_secs(5));
    b.reset("a");
    b.reset("b");
    let s = b.stats();
    assert_eq!((s.in_outage, s.held, s.outages), (false, 1, 1));
}
