//! The `tracing` events of the core: GC sweeps, and panics of the expiry
//! function that a sweeper contained.

use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff_testkit::events::Events;
use tracing::Level;

#[test]
fn a_sweep_and_a_contained_expiry_panic_are_events() {
    let events = Events::default();
    let clock = MockClock::new();
    events.record(|| {
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
    });

    let seen = events.seen();
    assert_eq!(seen[0].level, Level::DEBUG);
    assert_eq!(seen[0].message, "gc sweep");
    assert_eq!(seen[0].field("removed"), Some("2"));
    assert_eq!(seen[0].field("entries"), Some("0"));
    assert_eq!(seen[0].target, "keyed_backoff");
    let panics: Vec<_> = seen.iter().filter(|s| s.level == Level::ERROR).collect();
    assert_eq!(panics.len(), 1, "{seen:?}");
    assert!(panics[0].message.contains("expiry function panicked"));
}
