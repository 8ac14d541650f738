//! Regression tests for behaviour an adversarial review found wrong, each
//! named after the behaviour it pins.

use std::time::{Duration, SystemTime};

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, Snapshot, SnapshotEntry};

const SEC: Duration = Duration::from_secs(1);

fn manager(clock: &MockClock, initial: Duration, max: Duration) -> Backoff<String, MockClock> {
    Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .build()
        .expect("valid")
}

fn snap(entries: &[(&str, Duration, u32, SystemTime)]) -> Snapshot<String> {
    Snapshot {
        entries: entries
            .iter()
            .map(|&(k, backoff, attempts, last_update)| SnapshotEntry {
                key: k.to_string(),
                backoff,
                attempts,
                last_update,
            })
            .collect(),
    }
}

#[test]
fn amortized_gc_counts_try_next_like_next() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 5 * SEC)
        .clock(clock.clone())
        .amortized_gc(10)
        .build()
        .expect("valid");
    for i in 0..9 {
        let _ = b.try_next(format!("k{i}").as_str(), clock.now());
    }
    assert_eq!(b.stats().gc_runs, 0);
    let _ = b.try_next("k9", clock.now());
    assert_eq!(b.stats().gc_runs, 1, "the 10th write sweeps, gate or not");
    // Refused gate calls are writers' calls too.
    for _ in 0..10 {
        let _ = b.try_next("k0", clock.now());
    }
    assert_eq!(b.stats().gc_runs, 2);
}

#[test]
fn restore_moves_a_future_last_update_to_now() {
    let clock = MockClock::new();
    let b = manager(&clock, 10 * SEC, 300 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let year = Duration::from_secs(365 * 86_400);
    let s = snap(&[("ahead", 20 * SEC, 2, wall + year)]);
    assert_eq!(b.restore_at(&s, wall), 1);
    // In backoff for its 20 s from now, not for a year.
    assert_eq!(b.remaining("ahead", clock.now()), Some(20 * SEC));
    clock.advance(20 * SEC);
    assert_eq!(b.remaining("ahead", clock.now()), None);
    // And collected after the expiry window, like any entry.
    clock.advance(600 * SEC);
    assert_eq!(b.gc(), 1);
}

#[test]
fn restore_of_a_far_future_wall_time_does_not_hold_a_key_for_centuries() {
    let clock = MockClock::new();
    let b = manager(&clock, 10 * SEC, 300 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 2);
    assert_eq!(b.restore_at(&snap(&[("k", 40 * SEC, 3, far)]), wall), 1);
    assert_eq!(b.remaining("k", clock.now()), Some(40 * SEC));
}

#[test]
fn restore_cuts_backoffs_above_the_new_max() {
    let clock = MockClock::new();
    let b = manager(&clock, SEC, 10 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    assert_eq!(b.restore_at(&snap(&[("k", 300 * SEC, 6, wall)]), wall), 1);
    assert_eq!(b.get("k"), 10 * SEC);
    assert_eq!(b.remaining("k", clock.now()), Some(10 * SEC));
}

#[test]
fn restore_with_duplicate_keys_applies_the_last_and_counts_entries_held() {
    let clock = MockClock::new();
    let b = manager(&clock, SEC, 10 * SEC);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let fresh = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall)]);
    assert_eq!(b.restore_at(&fresh, wall), 1);
    assert_eq!(b.len(), 1);
    assert_eq!((b.get("k"), b.attempts("k")), (4 * SEC, 3));
    // The later duplicate has expired: it decides, so nothing is restored.
    let c = manager(&clock, SEC, 10 * SEC);
    let stale_last = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall - 100 * SEC)]);
    assert_eq!(c.restore_at(&stale_last, wall), 0);
    assert!(c.is_empty());
}
