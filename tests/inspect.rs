//! Seeing what a manager holds: emptiness, entry views, stats and the dump.

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff_testkit as testkit;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_manager_holding_a_key_is_not_empty() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    assert!(b.is_empty());
    b.next("k", clock.now());
    assert!(!b.is_empty());
    b.reset("k");
    assert!(b.is_empty());
}

#[test]
fn entries_and_entry_show_what_is_held() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    b.next("a", clock.now());
    b.next("b", clock.now());
    b.next("b", clock.now());
    clock.advance(SEC / 2);
    let mut all = b.entries();
    all.sort_by(|x, y| x.key.cmp(&y.key));
    let shown: Vec<(String, Duration, u32, Option<Duration>)> = all
        .into_iter()
        .map(|e| (e.key, e.backoff, e.attempts, e.remaining))
        .collect();
    assert_eq!(
        shown,
        [
            ("a".to_string(), SEC, 1, Some(SEC / 2)),
            ("b".to_string(), 2 * SEC, 2, Some(SEC * 3 / 2)),
        ]
    );
    let b_entry = b.entry("b").unwrap();
    assert_eq!((b_entry.backoff, b_entry.expired), (2 * SEC, false));
    assert!(b.entry("missing").is_none());
}

#[test]
fn stats_and_dump_describe_the_state() {
    let clock = MockClock::new();
    let b = testkit::shared_manager(&clock);
    b.next("default/web-0", clock.now());
    b.next("default/web-0", clock.now());
    b.next("default/db-0", clock.now());
    clock.advance(SEC + SEC / 2);
    b.next("kube-system/dns", clock.now());
    let s = b.stats();
    // web-0: 2 s window, 1.5 s in: in backoff. db-0: 1 s window: ready.
    assert_eq!((s.entries, s.in_backoff, s.expired), (3, 2, 0));
    clock.advance(10 * SEC);
    let s = b.stats();
    assert_eq!((s.in_backoff, s.expired), (0, 2));
    let table = b.dump();
    assert!(table.lines().next().expect("header").starts_with("KEY"));
    assert!(table.contains("default/web-0"));
    assert!(table.contains("expired (awaiting gc)"));
    assert!(
        table.ends_with("3 entries, 0 in backoff, 2 expired; gc: 0 runs, 0 removed"),
        "{table}"
    );
    assert_eq!(b.gc(), 2);
    assert_eq!(b.stats().gc_removed, 2);
}
