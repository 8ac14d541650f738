//! Snapshot and restore: round trips (JSON included), entries past their
//! window dropped, future and far-future times clamped, backoffs cut to the
//! new `max`, duplicates, and restore on the wall clock.

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Snapshot, SnapshotEntry};
use keyed_backoff_testkit as testkit;
use std::time::{Duration, SystemTime};

const SEC: Duration = Duration::from_secs(1);

#[test]
fn snapshot_round_trip_keeps_backoff_attempts_and_remaining() {
    let clock = MockClock::new();
    let a = testkit::shared_manager(&clock);
    for (key, failures) in [("web-0", 1), ("web-1", 3), ("db-0", 5)] {
        for _ in 0..failures {
            a.next(key, clock.now());
        }
    }
    clock.advance(SEC / 2);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let snap = a.snapshot_at(wall);
    assert_eq!(snap.entries.len(), 3);

    // A restart 300 ms later on a fresh clock.
    let clock2 = MockClock::new();
    clock2.advance(Duration::from_secs(12_345));
    let b = testkit::shared_manager(&clock2);
    assert_eq!(b.restore_at(&snap, wall + Duration::from_millis(300)), 3);
    for key in ["web-0", "web-1", "db-0"] {
        assert_eq!(b.get(key), a.get(key), "{key}");
        assert_eq!(b.attempts(key), a.attempts(key), "{key}");
        let before = a.remaining(key, clock.now()).expect("in backoff");
        let after = b.remaining(key, clock2.now()).expect("still in backoff");
        assert_eq!(before - after, Duration::from_millis(300), "{key}");
    }
}

#[test]
fn restore_after_the_expiry_window_drops_entries() {
    let clock = MockClock::new();
    let a = testkit::shared_manager(&clock);
    a.next("web-0", clock.now());
    clock.advance(4 * SEC);
    a.next("web-1", clock.now());
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let snap = a.snapshot_at(wall);
    let b = testkit::shared_manager(&MockClock::new());
    // 2·max = 10 s. web-0 was updated 4 s before the snapshot, web-1 at it:
    // 7 s later web-0 is 11 s old (expired), web-1 7 s (kept).
    assert_eq!(b.restore_at(&snap, wall + 7 * SEC), 1);
    assert_eq!(b.get("web-0"), Duration::ZERO);
    assert_eq!(b.get("web-1"), SEC);
}

#[cfg(feature = "serde")]
#[test]
fn snapshot_survives_a_json_round_trip() {
    let clock = MockClock::new();
    let a = testkit::shared_manager(&clock);
    for i in 0..50 {
        for _ in 0..(i % 4 + 1) {
            a.next(format!("obj-{i}").as_str(), clock.now());
        }
    }
    let wall = SystemTime::now();
    let json = serde_json::to_string(&a.snapshot_at(wall)).expect("serialise");
    let back: keyed_backoff::Snapshot<String> = serde_json::from_str(&json).expect("deserialise");
    let b = testkit::shared_manager(&MockClock::new());
    assert_eq!(b.restore_at(&back, wall), 50);
    for i in 0..50 {
        let key = format!("obj-{i}");
        assert_eq!(b.get(key.as_str()), a.get(key.as_str()), "{key}");
        assert_eq!(b.attempts(key.as_str()), a.attempts(key.as_str()), "{key}");
    }
    // Restored the day after: past the 10 s window, nothing comes back.
    let c = testkit::shared_manager(&MockClock::new());
    assert_eq!(c.restore_at(&back, wall + Duration::from_secs(86_400)), 0);
    assert!(c.is_empty());
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
fn restore_moves_a_future_last_update_to_now() {
    let clock = MockClock::new();
    let b = testkit::manager(10 * SEC, 300 * SEC, &clock);
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
    let b = testkit::manager(10 * SEC, 300 * SEC, &clock);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 2);
    assert_eq!(b.restore_at(&snap(&[("k", 40 * SEC, 3, far)]), wall), 1);
    assert_eq!(b.remaining("k", clock.now()), Some(40 * SEC));
}

#[test]
fn restore_cuts_backoffs_above_the_new_max() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 10 * SEC, &clock);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    assert_eq!(b.restore_at(&snap(&[("k", 300 * SEC, 6, wall)]), wall), 1);
    assert_eq!(b.get("k"), 10 * SEC);
    assert_eq!(b.remaining("k", clock.now()), Some(10 * SEC));
}

#[test]
fn restore_with_duplicate_keys_applies_the_last_and_counts_entries_held() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 10 * SEC, &clock);
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let fresh = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall)]);
    assert_eq!(b.restore_at(&fresh, wall), 1);
    assert_eq!(b.len(), 1);
    assert_eq!((b.get("k"), b.attempts("k")), (4 * SEC, 3));
    // The later duplicate has expired: it decides, so nothing is restored.
    let c = testkit::manager(SEC, 10 * SEC, &clock);
    let stale_last = snap(&[("k", 2 * SEC, 2, wall), ("k", 4 * SEC, 3, wall - 100 * SEC)]);
    assert_eq!(c.restore_at(&stale_last, wall), 0);
    assert!(c.is_empty());
}

#[test]
fn a_snapshot_keeps_an_update_stamped_ahead_of_the_clock_ahead_of_wall_time() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    let start = clock.now();
    clock.advance(10 * SEC);
    b.next("ahead", clock.now());
    // The clock is set back 5 s and then moves 2 s (a stepped wall clock):
    // the update is 3 s ahead of it, and the snapshot says so.
    clock.set(start + 5 * SEC);
    b.next("behind", clock.now());
    clock.advance(2 * SEC);
    let wall = SystemTime::UNIX_EPOCH + 1_000 * SEC;
    let snap = b.snapshot_at(wall);
    let at = |k: &str| {
        snap.entries
            .iter()
            .find(|e| e.key == k)
            .unwrap()
            .last_update
    };
    assert_eq!(at("ahead"), wall + 3 * SEC);
    assert_eq!(at("behind"), wall - 2 * SEC);
}

#[test]
fn restore_on_the_wall_clock_brings_back_every_fresh_entry() {
    let clock = MockClock::new();
    let a = testkit::manager(SEC, 60 * SEC, &clock);
    for key in ["x", "y", "z"] {
        a.next(key, clock.now());
    }
    a.next("z", clock.now());
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    assert_eq!(b.restore(&a.snapshot()), 3);
    assert_eq!((b.get("z"), b.attempts("z"), b.len()), (2 * SEC, 2, 3));
}
