//! Retry budgets: gRPC's token bucket, the TPS budget and its sliding
//! window, the SRE book's adaptive throttling, and a budget stopping a
//! retry storm.

use keyed_backoff::budget::{AdaptiveThrottle, RetryBudget, TokenBucket, TpsBudget};
use keyed_backoff::clock::MockClock;
use keyed_backoff::retry::{GaveUp, Retry};
use keyed_backoff::strategy::{Constant, Strategy};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn token_bucket_thresholds() {
    // gRPC: max 10, ratio 0.1. Retries allowed while tokens > 5.
    let b = TokenBucket::new(10.0, 0.1).unwrap();
    assert!(b.try_retry());
    for _ in 0..4 {
        b.on_outcome(false);
    }
    assert_eq!(b.tokens(), 6.0);
    assert!(b.try_retry());
    b.on_outcome(false);
    assert_eq!(b.tokens(), 5.0);
    assert!(!b.try_retry(), "exactly max/2 is not enough");
    b.on_outcome(true);
    assert_eq!(b.tokens(), 5.1);
    assert!(b.try_retry());
    for _ in 0..100 {
        b.on_outcome(false);
    }
    assert_eq!(b.tokens(), 0.0, "never below zero");
    for _ in 0..1_000 {
        b.on_outcome(true);
    }
    assert_eq!(b.tokens(), 10.0, "never above max");
}

#[test]
fn tps_budget_honours_fractional_percentages() {
    for (percent, requests, expected) in [
        (0.005, 10_000, 50),
        (0.005, 1_000, 5),
        (0.15, 1_000, 150),
        (0.1, 999, 99),
    ] {
        let b = TpsBudget::new(Duration::from_secs(10), 0, percent)
            .unwrap()
            .clock(MockClock::new());
        for _ in 0..requests {
            b.on_request();
        }
        let allowed = (0..100_000).take_while(|_| b.try_retry()).count();
        assert_eq!(allowed, expected, "{percent} of {requests}");
    }
}

#[test]
fn tps_budget_window_slides_and_reserve_stays() {
    let clock = MockClock::new();
    let b = TpsBudget::new(Duration::from_secs(10), 1, 0.5)
        .unwrap()
        .clock(clock.clone());
    for _ in 0..100 {
        b.on_request();
    }
    assert_eq!(b.balance(), 60.0); // 10 reserve + 50 deposited
    clock.advance(Duration::from_secs(11)); // the deposits expire
    assert_eq!(b.balance(), 10.0);
    let allowed = (0..100).take_while(|_| b.try_retry()).count();
    assert_eq!(allowed, 10, "min_per_sec · ttl");
}

#[test]
fn adaptive_throttling_matches_the_formula_within_one_percent() {
    let clock = MockClock::new();
    let t = AdaptiveThrottle::new(2.0)
        .unwrap()
        .clock(clock.clone())
        .seed(11);
    // 1,000 requests, 200 accepted: p = (1000 − 400) / 1001.
    for i in 0..1_000 {
        t.record(i % 5 == 0);
    }
    let p = (1_000.0 - 2.0 * 200.0) / 1_001.0;
    assert!((t.rejection_probability() - p).abs() < 1e-12);
    let draws = 100_000;
    let rejected = (0..draws).filter(|_| t.should_reject()).count();
    let rate = rejected as f64 / draws as f64;
    assert!((rate / p - 1.0).abs() < 0.01, "rate {rate} vs {p}");
    // Old counts leave the 2-minute window.
    clock.advance(Duration::from_secs(121));
    assert_eq!(t.rejection_probability(), 0.0);
}

#[test]
fn budget_stops_a_retry_storm() {
    let bucket = TokenBucket::new(10.0, 0.1).unwrap();
    let s = Strategy::new(Constant::new(Duration::ZERO)).unwrap();
    // Every call fails: the bucket drains to max/2 and then refuses.
    let mut total_attempts = 0;
    for _ in 0..10 {
        let f = Retry::new(&s)
            .budget(&bucket)
            .max_attempts(3)
            .run(|_| {}, |_| Err::<(), _>(()))
            .unwrap_err();
        total_attempts += f.attempts;
    }
    // Each failure takes a token; a retry needs more than 5 left after it.
    // Call 1: 10→9 retry, →8 retry, →7 attempt limit. Call 2: →6 retry,
    // →5 refused. Calls 3–10: one attempt each, refused. 10 + 3 retries.
    assert_eq!(total_attempts, 10 + 3);
    assert!(!bucket.try_retry());
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
fn token_bucket_with_a_huge_ratio_refills_to_max_without_overflow() {
    let b = TokenBucket::new(10.0, 1e16).expect("gRPC accepts any positive ratio");
    for _ in 0..10 {
        b.on_outcome(false);
    }
    assert!(!b.try_retry());
    b.on_outcome(true);
    assert_eq!(b.tokens(), 10.0);
    assert!(b.try_retry());
}
