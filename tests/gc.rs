//! Garbage collection: the background thread and tokio task (which stop
//! when their guard drops, or keep sweeping when detached), amortised GC,
//! and what a sweep counts.

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff_testkit as testkit;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SEC: Duration = Duration::from_secs(1);

/// Spins (yielding) until `cond` holds; a real background thread is being
/// waited for here, not time. Fails after 10 s (it takes milliseconds, on
/// a busy machine too).
fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached");
        std::thread::yield_now();
    }
}

#[test]
fn gc_thread_collects_and_stops_with_its_handle() {
    let clock = MockClock::new();
    let b = testkit::shared_manager(&clock);
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
    let b = testkit::shared_manager(&clock);
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
#[tokio::test(start_paused = true)]
async fn gc_task_runs_on_interval_and_stops_when_dropped() {
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
}

/// A manager whose one entry has passed its 10 s window.
#[cfg(feature = "tokio")]
fn holding_a_stale_key() -> Arc<Backoff<String, MockClock>> {
    let clock = MockClock::new();
    let b = testkit::shared_manager(&clock);
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
#[tokio::test(start_paused = true)]
async fn a_detached_gc_task_keeps_sweeping() {
    let b = holding_a_stale_key();
    b.spawn_gc_task(Duration::from_secs(30))
        .expect("spawn")
        .detach();
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert!(swept(&b).await, "the detached task never swept");
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
fn the_gc_thread_sleeps_its_interval_and_wakes_at_once_to_stop() {
    let clock = MockClock::new();
    let b = Arc::new(testkit::manager(SEC, 60 * SEC, &clock));
    let guard = b.spawn_gc(3_600 * SEC).unwrap();
    // A thread that does not wait sweeps again and again at once; one that
    // waits never sweeps within the hour. Watch it for up to 100 ms.
    let watch = Instant::now();
    while b.stats().gc_runs == 0 && watch.elapsed() < Duration::from_millis(100) {
        std::thread::yield_now();
    }
    let runs = b.stats().gc_runs;
    if runs != 0 {
        // Do not join a thread that may never look at its stop flag again.
        guard.detach();
        panic!("the GC thread swept {runs} times without waiting its interval");
    }
    let asked = Instant::now();
    guard.stop();
    assert!(asked.elapsed() < 10 * SEC, "stop waited for the interval");
}

#[test]
fn a_detached_gc_thread_keeps_sweeping() {
    let clock = MockClock::new();
    let b = Arc::new(testkit::manager(SEC, 60 * SEC, &clock));
    b.next("k", clock.now());
    clock.advance(121 * SEC); // past 2 x max
    b.spawn_gc(Duration::from_millis(1)).unwrap().detach();
    // The thread is real: poll for its sweep, with a deadline.
    let deadline = Instant::now() + 10 * SEC;
    while !b.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(b.is_empty(), "the detached thread never swept");
    assert!(b.stats().gc_runs >= 1);
}
