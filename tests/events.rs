//! The `tracing` events of the core: GC sweeps, and panics of the expiry
//! function that a sweeper contained.

#![cfg(feature = "tracing")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

#[derive(Debug, Clone, Default)]
struct Seen {
    level: Option<Level>,
    message: String,
    removed: Option<u64>,
}

impl Visit for Seen {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "removed" {
            self.removed = Some(value);
        }
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
fn a_sweep_and_a_contained_expiry_panic_are_events() {
    let recorder = Recorder::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
        .clock(clock.clone())
        .build()
        .unwrap();
    b.next("a", clock.now());
    b.next("b", clock.now());
    clock.advance(Duration::from_secs(11));
    assert_eq!(b.gc(), 2);

    // An expiry function that panics, judged only by the amortised GC's
    // sweep on the second write ("fresh" has no entry to judge).
    let panicking = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
        .clock(clock.clone())
        .expiry(|_, _, _| panic!("expiry bug"))
        .amortized_gc(2)
        .build()
        .unwrap();
    panicking.next("old", clock.now());
    assert_eq!(panicking.next("fresh", clock.now()), Duration::from_secs(1));

    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(seen[0].level, Some(Level::DEBUG));
    assert_eq!(seen[0].message, "gc sweep");
    assert_eq!(seen[0].removed, Some(2));
    let panics: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.level == Some(Level::ERROR))
        .collect();
    assert_eq!(panics.len(), 1, "{seen:?}");
    assert!(panics[0].message.contains("expiry function panicked"));
}
