//! Behaviours that a mutation of the code once changed without any other
//! test failing: each test here fails under that mutation.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use keyed_backoff::Backoff;
use keyed_backoff::budget::{AdaptiveThrottle, RetryBudget, TpsBudget};
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::retry::{GaveUp, Retry};
use keyed_backoff::strategy::{Constant, Strategy};

const SEC: Duration = Duration::from_secs(1);

fn mock_manager(clock: &MockClock) -> Backoff<String, MockClock> {
    Backoff::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[test]
fn a_manager_holding_a_key_is_not_empty() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    assert!(b.is_empty());
    b.next("k", clock.now());
    assert!(!b.is_empty());
    b.reset("k");
    assert!(b.is_empty());
}

#[test]
fn a_snapshot_keeps_an_update_stamped_ahead_of_the_clock_ahead_of_wall_time() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
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
fn the_gc_thread_sleeps_its_interval_and_wakes_at_once_to_stop() {
    let clock = MockClock::new();
    let b = Arc::new(mock_manager(&clock));
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
fn a_sliding_window_forgets_its_counts_slot_by_slot() {
    // The throttle's window is 120 s in 10 slots of 12 s.
    let clock = MockClock::new();
    let t = AdaptiveThrottle::new(2.0).unwrap().clock(clock.clone());
    for _ in 0..100 {
        t.record(false); // batch A at 0 s: 100 requests, none accepted
    }
    clock.advance(60 * SEC);
    for _ in 0..100 {
        t.record(true); // batch B at 60 s: 100 requests, all accepted
    }
    // Both batches: (200 − 2·100) / 201 = 0.
    assert_eq!(t.rejection_probability(), 0.0);
    // Part of a slot later, nothing has left.
    clock.advance(5 * SEC);
    assert_eq!(t.rejection_probability(), 0.0);
    // At 121 s batch A has left, batch B has not: (100 − 200) / 101 → 0.
    // Record 100 failures at 121 s: (200 − 200) / 201 = 0 with B, and
    // (100 − 0) / 101 without it.
    clock.advance(56 * SEC);
    for _ in 0..100 {
        t.record(false);
    }
    assert_eq!(t.rejection_probability(), 0.0, "batch B left too early");
    // At 181 s batch B has left too.
    clock.advance(60 * SEC);
    let p = t.rejection_probability();
    assert!((p - 100.0 / 101.0).abs() < 1e-12, "{p}");
}

#[test]
fn the_adaptive_throttle_as_a_retry_budget_hears_outcomes_and_refuses_retries() {
    let clock = MockClock::new();
    let t = AdaptiveThrottle::new(1.0)
        .unwrap()
        .clock(clock.clone())
        .seed(3);
    let s = Strategy::new(Constant::new(Duration::ZERO)).unwrap();
    // Through `Retry`, 50 calls that always fail: the throttle learns of
    // every attempt and soon refuses retries.
    let mut attempts = 0;
    let mut refused = 0;
    for _ in 0..50 {
        let f = Retry::new(&s)
            .budget(&t)
            .max_attempts(4)
            .run(|_| {}, |_| Err::<(), _>(()))
            .unwrap_err();
        attempts += f.attempts;
        refused += u32::from(f.reason == GaveUp::Budget);
    }
    assert!(
        t.rejection_probability() > 0.9,
        "{}",
        t.rejection_probability()
    );
    assert!(refused >= 45, "{refused} of 50 calls stopped by the budget");
    // Some retries ran while the throttle had little history, far fewer
    // than the 150 that no budget would allow.
    assert!((51..100).contains(&attempts), "{attempts} attempts");
    assert!(!(0..100).all(|_| t.try_retry()));
}

#[test]
fn each_retry_loop_deposits_its_request_in_a_tps_budget() {
    let clock = MockClock::new();
    // No floor: only requests earn retries, one per request at 100 %.
    let tps = TpsBudget::new(10 * SEC, 0, 1.0)
        .unwrap()
        .clock(clock.clone());
    let s = Strategy::new(Constant::new(Duration::ZERO)).unwrap();
    let f = Retry::new(&s)
        .budget(&tps)
        .max_attempts(3)
        .run(|_| {}, |_| Err::<(), _>(()))
        .unwrap_err();
    // The loop's own request paid for one retry; the second was refused.
    assert_eq!((f.attempts, f.reason), (2, GaveUp::Budget));
}
