//! The tokio clock under paused time: a controller-style error policy backs
//! off in virtual time, and a retry loop's `max_elapsed` follows it.
#![cfg(feature = "tokio")]

use std::time::Duration;

use keyed_backoff::clock::TokioClock;
use keyed_backoff::retry::{GaveUp, Retry};
use keyed_backoff::strategy::{Constant, Strategy};
use keyed_backoff::{Backoff, InBackoff};
use tokio::time::Instant;

const SEC: Duration = Duration::from_secs(1);

#[path = "paused/mod.rs"]
mod paused;

/// Reconciles `key` until it has run `runs` times; `fails(n)` says whether
/// the n-th reconcile (1-based) fails. Errors requeue at the gate's delay, a
/// success resets the key. Returns the virtual times of each reconcile.
async fn reconcile_loop(
    b: &Backoff<String, TokioClock>,
    key: &str,
    runs: usize,
    fails: impl Fn(usize) -> bool,
) -> Vec<Duration> {
    let start = Instant::now();
    let mut at = Vec::new();
    for n in 1..=runs {
        at.push(start.elapsed());
        if fails(n) {
            let delay = match b.try_next_now(key) {
                Ok(d) => d,
                Err(InBackoff { remaining }) => remaining,
            };
            tokio::time::sleep(delay).await;
        } else {
            b.reset(key);
            // The next change arrives a minute later.
            tokio::time::sleep(60 * SEC).await;
        }
    }
    at
}

/// Initial 1 s, max 16 s, on tokio's clock.
fn manager() -> Backoff<String, TokioClock> {
    Backoff::<String>::builder(SEC, 16 * SEC)
        .clock(TokioClock)
        .build()
        .expect("valid")
}

fn gaps(at: &[Duration]) -> Vec<u64> {
    at.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect()
}

#[test]
fn an_always_failing_object_backs_off_1_2_4_8_16_16_seconds_in_paused_time() {
    paused::runtime().block_on(async {
        let b = manager();
        let at = reconcile_loop(&b, "default/broken", 7, |_| true).await;
        assert_eq!(gaps(&at), [1, 2, 4, 8, 16, 16]);
        assert_eq!(b.attempts("default/broken"), 7);
    });
}

#[test]
fn a_recovering_object_backs_off_1_2_4_then_starts_over() {
    paused::runtime().block_on(async {
        let b = manager();
        // Fails three times, succeeds, then fails twice more.
        let at = reconcile_loop(&b, "default/flaky", 7, |n| n != 4).await;
        assert_eq!(gaps(&at), [1, 2, 4, 60, 1, 2]);
    });
}

#[test]
fn an_early_requeue_waits_out_the_window_without_counting() {
    paused::runtime().block_on(async {
        let b = manager();
        assert_eq!(b.try_next_now("obj"), Ok(SEC));
        assert_eq!(b.try_next_now("obj"), Err(InBackoff { remaining: SEC }));
        tokio::time::advance(SEC / 2).await;
        // A watch event half-way through: refused with the rest, not counted.
        assert_eq!(b.try_next_now("obj"), Err(InBackoff { remaining: SEC / 2 }));
        assert_eq!(b.attempts("obj"), 1);
        tokio::time::advance(SEC / 2).await;
        assert_eq!(b.try_next_now("obj"), Ok(2 * SEC));
    });
}

#[test]
fn run_async_with_the_tokio_clock_stops_at_max_elapsed_in_paused_time() {
    paused::runtime().block_on(async {
        let s = Strategy::new(Constant::new(5 * SEC)).expect("valid");
        let start = Instant::now();
        let failure = Retry::new(&s)
            .clock(TokioClock)
            .max_elapsed(10 * SEC)
            .run_async(|_| async { Err::<(), _>("down") })
            .await
            .unwrap_err();
        // Attempts at 0, 5 and 10 s; a fourth would start past 10 s.
        assert_eq!((failure.attempts, failure.reason), (3, GaveUp::MaxElapsed));
        assert_eq!(start.elapsed(), 10 * SEC);
    });
}
