//! Retry loops on the mock clock with a recording sleeper (nothing here
//! waits in real time), and the async loop on tokio's paused time.

use keyed_backoff::budget::TpsBudget;
#[cfg(feature = "tokio")]
use keyed_backoff::clock::TokioClock;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::retry::{GaveUp, Retry, Verdict};
use keyed_backoff::strategy::{Constant, Exponential, Strategy};
use std::cell::Cell;
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

const MS: Duration = Duration::from_millis(1);

fn exponential() -> keyed_backoff::strategy::Strategy<Exponential> {
    Strategy::new(Exponential::new(100 * MS, 2.0).max(1000 * MS)).unwrap()
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
            if n < 6 { Err(n) } else { Ok(n) }
        })
        .unwrap();
    assert_eq!(ok, 6);
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
        (f.error.as_str(), f.attempts, f.reason),
        ("fail 3", 3, GaveUp::MaxAttempts)
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
    assert_eq!(ok, 4);
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
#[tokio::test(start_paused = true)]
async fn async_retry_under_paused_time() {
    let s = exponential();
    let started = tokio::time::Instant::now();
    let ok = Retry::new(&s)
        .max_attempts(5)
        .run_async(|n| async move { if n < 4 { Err(n) } else { Ok(n) } })
        .await
        .unwrap();
    assert_eq!(ok, 4);
    // Paused time auto-advances through the sleeps: exactly 100+200+400 ms.
    assert_eq!(started.elapsed(), 700 * MS);
    let f = Retry::new(&s)
        .max_attempts(2)
        .run_async(|_| async { Err::<(), _>("x") })
        .await
        .unwrap_err();
    assert_eq!((f.attempts, f.reason), (2, GaveUp::MaxAttempts));
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

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn run_async_with_the_tokio_clock_stops_at_max_elapsed_in_paused_time() {
    let s = Strategy::new(Constant::new(5 * SEC)).expect("valid");
    let start = tokio::time::Instant::now();
    let failure = Retry::new(&s)
        .clock(TokioClock)
        .max_elapsed(10 * SEC)
        .run_async(|_| async { Err::<(), _>("down") })
        .await
        .unwrap_err();
    // Attempts at 0, 5 and 10 s; a fourth would start past 10 s.
    assert_eq!((failure.attempts, failure.reason), (3, GaveUp::MaxElapsed));
    assert_eq!(start.elapsed(), 10 * SEC);
}

/// A retry loop owns its strategy's delays and, given an `Arc`, its budget:
/// it moves into a spawned task as is, and the budget it shares with the
/// spawner bounds its retries.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_retry_with_a_shared_budget_moves_into_a_spawned_task() {
    use keyed_backoff::budget::TokenBucket;
    use keyed_backoff::retry::{GaveUp, Retry};
    use keyed_backoff::strategy::{Constant, Strategy};
    use std::sync::Arc;
    use std::time::Duration;

    let budget = Arc::new(TokenBucket::new(6.0, 0.1).unwrap()); // retries while tokens > 3
    // Built in a scope the strategy does not outlive.
    let retry: Retry<'static, &str> = {
        let strategy = Strategy::new(Constant::new(Duration::from_secs(1))).unwrap();
        Retry::new(&strategy).budget(Arc::clone(&budget))
    };
    let task = tokio::spawn(retry.run_async(|_| async { Err::<(), _>("down") }));
    let failed = task.await.unwrap().unwrap_err();
    // Three failures take the bucket from 6 to 3: the third is not retried.
    assert_eq!((failed.attempts, failed.reason), (3, GaveUp::Budget));
    assert_eq!(budget.tokens(), 3.0);
}
