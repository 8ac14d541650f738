//! Background GC, amortised GC, snapshot/restore and observability.

#[cfg(feature = "tokio")]
#[path = "paused/mod.rs"]
mod paused;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};

const SEC: Duration = Duration::from_secs(1);

fn mock_manager(clock: &MockClock) -> Arc<Backoff<String, MockClock>> {
    Arc::new(
        Backoff::<String>::builder(SEC, 5 * SEC)
            .clock(clock.clone())
            .shards(8)
            .build()
            .expect("valid"),
    )
}

/// Spins (yielding) until `cond` holds; a real background thread is being
/// waited for here, not time. Fails after two seconds.
fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached");
        std::thread::yield_now();
    }
}

#[test]
fn gc_thread_collects_and_stops_with_its_handle() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    b.next("stale", clock.now());
    clock.advance(11 * SEC);
    let handle = b.spawn_gc(Duration::from_millis(1)).expect("spawn");
    eventually(|| b.is_empty());
    assert_eq!(
        Arc::weak_count(&b),
        1,
        "the thread holds one weak reference"
    );
    handle.stop();
    // Joined: its weak reference is gone, and no more GC runs happen.
    assert_eq!(Arc::weak_count(&b), 0);
    let runs = b.stats().gc_runs;
    std::thread::yield_now();
    assert_eq!(b.stats().gc_runs, runs);
}

#[test]
fn gc_thread_ends_when_the_manager_is_dropped() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    let weak = Arc::downgrade(&b);
    let handle = b.spawn_gc(Duration::from_millis(1)).expect("spawn");
    drop(b);
    assert!(weak.upgrade().is_none());
    handle.stop(); // returns: the thread saw the manager gone or the stop flag
}

#[test]
fn amortized_gc_keeps_memory_bounded_without_a_task() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(SEC, 5 * SEC)
        .clock(clock.clone())
        .amortized_gc(100)
        .build()
        .expect("valid");
    for i in 0..100_000 {
        b.next(format!("k{i}").as_str(), clock.now());
        if i % 1_000 == 0 {
            clock.advance(SEC);
        }
        // Entries live 10 s (2·max) and 1,000 keys arrive per second; a
        // sweep every 100 calls keeps at most ~11 s of keys plus 100.
        assert!(b.len() <= 11_100, "{} at {i}", b.len());
    }
    assert!(b.stats().gc_runs >= 999);
}

#[cfg(feature = "tokio")]
#[test]
fn gc_task_runs_on_interval_and_stops_when_dropped() {
    paused::runtime().block_on(async {
        let b = holding_a_stale_key();
        let task = b.spawn_gc_task(Duration::from_secs(30)).expect("spawn");
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert!(swept(&b).await);
        assert!(b.stats().gc_runs >= 1);
        drop(task);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            Arc::weak_count(&b),
            0,
            "the aborted task released its reference"
        );
    });
}

/// A manager whose one entry has passed its 10 s window.
#[cfg(feature = "tokio")]
fn holding_a_stale_key() -> Arc<Backoff<String, MockClock>> {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    b.next("stale", clock.now());
    clock.advance(11 * SEC);
    b
}

/// Whether the manager empties within 1,000 turns of the runtime (a GC
/// task's sweep runs on the blocking pool and reports back).
#[cfg(feature = "tokio")]
async fn swept(b: &Backoff<String, MockClock>) -> bool {
    for _ in 0..1_000 {
        if b.is_empty() {
            return true;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    b.is_empty()
}

#[cfg(feature = "tokio")]
#[test]
fn a_detached_gc_task_keeps_sweeping() {
    paused::runtime().block_on(async {
        let b = holding_a_stale_key();
        b.spawn_gc_task(Duration::from_secs(30))
            .expect("spawn")
            .detach();
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert!(swept(&b).await, "the detached task never swept");
    });
}

#[test]
fn snapshot_round_trip_keeps_backoff_attempts_and_remaining() {
    let clock = MockClock::new();
    let a = mock_manager(&clock);
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
    let b = mock_manager(&clock2);
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
    let a = mock_manager(&clock);
    a.next("web-0", clock.now());
    clock.advance(4 * SEC);
    a.next("web-1", clock.now());
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let snap = a.snapshot_at(wall);
    let b = mock_manager(&MockClock::new());
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
    let a = mock_manager(&clock);
    for i in 0..50 {
        for _ in 0..(i % 4 + 1) {
            a.next(format!("obj-{i}").as_str(), clock.now());
        }
    }
    let wall = SystemTime::now();
    let json = serde_json::to_string(&a.snapshot_at(wall)).expect("serialise");
    let back: keyed_backoff::Snapshot<String> = serde_json::from_str(&json).expect("deserialise");
    let b = mock_manager(&MockClock::new());
    assert_eq!(b.restore_at(&back, wall), 50);
    for i in 0..50 {
        let key = format!("obj-{i}");
        assert_eq!(b.get(key.as_str()), a.get(key.as_str()), "{key}");
        assert_eq!(b.attempts(key.as_str()), a.attempts(key.as_str()), "{key}");
    }
    // Restored the day after: past the 10 s window, nothing comes back.
    let c = mock_manager(&MockClock::new());
    assert_eq!(c.restore_at(&back, wall + Duration::from_secs(86_400)), 0);
    assert!(c.is_empty());
}

#[test]
fn stats_and_dump_describe_the_state() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
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
