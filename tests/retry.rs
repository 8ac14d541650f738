//! Retry helpers and budgets, on the mock clock with a recording sleeper:
//! nothing here waits in real time.

#[cfg(feature = "tokio")]
#[path = "paused/mod.rs"]
mod paused;

use std::cell::Cell;
use std::time::Duration;

use keyed_backoff::budget::{AdaptiveThrottle, RetryBudget, TokenBucket, TpsBudget};
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::retry::{Failure, GaveUp, Retry, Verdict};
use keyed_backoff::strategy::{Constant, Exponential, Strategy};

const MS: Duration = Duration::from_millis(1);

fn exponential() -> keyed_backoff::strategy::Strategy<Exponential> {
    Strategy::new(Exponential::new(100 * MS, 2.0).cap(1000 * MS)).unwrap()
}

/// A sleeper that advances `clock` and records each delay.
fn recorder<'a>(clock: &'a MockClock, slept: &'a mut Vec<Duration>) -> impl FnMut(Duration) + 'a {
    move |d| {
        slept.push(d);
        clock.advance(d);
    }
}

#[test]
fn exact_delay_sequence_and_attempt_count() {
    let clock = MockClock::new();
    let mut slept = Vec::new();
    let s = exponential();
    let ok = Retry::new(&s)
        .clock(clock.clone())
        .run(recorder(&clock, &mut slept), |n| {
            if n < 6 { Err(n) } else { Ok("up") }
        })
        .unwrap();
    assert_eq!(ok.attempts, 6);
    assert_eq!(slept, [100 * MS, 200 * MS, 400 * MS, 800 * MS, 1000 * MS]);
    assert_eq!(clock.now().as_nanos(), 2_500_000_000);
}

#[test]
fn max_attempts_counts_the_first_try() {
    let clock = MockClock::new();
    let mut slept = Vec::new();
    let s = exponential();
    let f = Retry::new(&s)
        .clock(clock.clone())
        .max_attempts(3)
        .run(recorder(&clock, &mut slept), |n| {
            Err::<(), _>(format!("fail {n}"))
        })
        .unwrap_err();
    assert_eq!(
        f,
        Failure {
            error: "fail 3".to_string(),
            attempts: 3,
            reason: GaveUp::MaxAttempts
        }
    );
    assert_eq!(slept, [100 * MS, 200 * MS]);
}

#[test]
fn max_elapsed_is_measured_on_the_injected_clock() {
    let clock = MockClock::new();
    let mut slept = Vec::new();
    let s = exponential();
    // Each attempt itself takes 50 ms of mock time.
    let f = Retry::new(&s)
        .clock(clock.clone())
        .max_elapsed(Duration::from_secs(1))
        .run(recorder(&clock, &mut slept), |_| {
            clock.advance(50 * MS);
            Err::<(), _>(())
        })
        .unwrap_err();
    // 50 + 100 + 50 + 200 + 50 + 400 = 850 ms; next: +50 then 800 > 1 s.
    assert_eq!(slept, [100 * MS, 200 * MS, 400 * MS]);
    assert_eq!((f.attempts, f.reason), (4, GaveUp::MaxElapsed));
}

#[test]
fn permanent_errors_stop_at_once_and_when_filters() {
    let s = exponential();
    let calls = Cell::new(0);
    let f = Retry::new(&s)
        .classify(|e: &u16| {
            if *e >= 500 {
                Verdict::Retry
            } else {
                Verdict::Stop
            }
        })
        .run(
            |_| panic!("must not sleep"),
            |_| {
                calls.set(calls.get() + 1);
                Err::<(), _>(403u16)
            },
        )
        .unwrap_err();
    assert_eq!(
        (f.attempts, f.reason, calls.get()),
        (1, GaveUp::Permanent, 1)
    );

    let mut slept = Vec::new();
    let f = Retry::new(&s)
        .when(|e: &u16| *e == 503)
        .run(
            |d| slept.push(d),
            |n| Err::<(), _>(if n < 3 { 503u16 } else { 400 }),
        )
        .unwrap_err();
    assert_eq!((f.attempts, f.reason, f.error), (3, GaveUp::Permanent, 400));
    assert_eq!(slept.len(), 2);
}

#[test]
fn retry_after_overrides_the_delay_capped_by_the_strategy() {
    let s = exponential();
    let mut slept = Vec::new();
    let ok = Retry::new(&s)
        .classify(|e: &Option<u64>| match e {
            Some(secs) => Verdict::RetryAfter(Duration::from_secs(*secs)),
            None => Verdict::Retry,
        })
        .run(
            |d| slept.push(d),
            |n| match n {
                1 => Err(Some(0)),  // "retry now"
                2 => Err(None),     // computed delay (the schedule kept advancing)
                3 => Err(Some(30)), // capped at the strategy's 1 s
                _ => Ok(n),
            },
        )
        .unwrap();
    assert_eq!(ok.attempts, 4);
    assert_eq!(slept, [Duration::ZERO, 200 * MS, 1000 * MS]);
}

#[test]
fn notify_sees_error_delay_and_attempt() {
    let s = exponential();
    let mut seen = Vec::new();
    let _ = Retry::new(&s)
        .max_attempts(4)
        .notify(|e: &&str, d, n| seen.push((*e, d, n)))
        .run(|_| {}, |_| Err::<(), _>("down"));
    assert_eq!(
        seen,
        [
            ("down", 100 * MS, 1),
            ("down", 200 * MS, 2),
            ("down", 400 * MS, 3)
        ]
    );
}

#[test]
fn an_exhausted_strategy_ends_the_loop() {
    let s = Strategy::new(Constant::new(MS)).unwrap().max_attempts(2);
    let f = Retry::new(&s)
        .run(|_| {}, |_| Err::<(), _>(()))
        .unwrap_err();
    assert_eq!((f.attempts, f.reason), (3, GaveUp::StrategyExhausted));
}

#[cfg(feature = "tokio")]
#[test]
fn async_retry_under_paused_time() {
    paused::runtime().block_on(async {
        let s = exponential();
        let started = tokio::time::Instant::now();
        let ok = Retry::new(&s)
            .max_attempts(5)
            .run_async(|n| async move { if n < 4 { Err(n) } else { Ok(n) } })
            .await
            .unwrap();
        assert_eq!(ok.attempts, 4);
        // Paused time auto-advances through the sleeps: exactly 100+200+400 ms.
        assert_eq!(started.elapsed(), 700 * MS);
        let f = Retry::new(&s)
            .max_attempts(2)
            .run_async(|_| async { Err::<(), _>("x") })
            .await
            .unwrap_err();
        assert_eq!((f.attempts, f.reason), (2, GaveUp::MaxAttempts));
    });
}

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
