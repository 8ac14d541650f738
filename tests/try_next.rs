//! `try_next`: one advance per backoff window however often a
//! key is retried, the wait left and the attempts it reports, and a
//! controller's error policy on tokio's paused time.

#[cfg(feature = "tokio")]
use keyed_backoff::clock::TokioClock;
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, InBackoff};
use keyed_backoff_testkit as testkit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

/// Two threads race `try_next` on one key while the clock stands still: in
/// each backoff window exactly one call advances.
#[test]
fn the_gate_advances_exactly_once_per_window() {
    let clock = MockClock::new();
    let b = Arc::new(
        Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(1_000))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    for window in 1..=8u32 {
        let advanced = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (b, clock, advanced, refused, start) = (
                    Arc::clone(&b),
                    clock.clone(),
                    Arc::clone(&advanced),
                    Arc::clone(&refused),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..2_000 {
                        match b.try_next("obj", clock.now()) {
                            Ok(_) => advanced.fetch_add(1, Ordering::Relaxed),
                            Err(InBackoff { remaining }) => {
                                assert!(remaining > Duration::ZERO);
                                refused.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(advanced.load(Ordering::Relaxed), 1, "window {window}");
        assert_eq!(refused.load(Ordering::Relaxed), 3_999);
        assert_eq!(b.attempts("obj"), window);
        // Move to the end of the current window.
        clock.advance(b.get("obj"));
    }
}

#[test]
fn remaining_and_attempts_follow_the_entry() {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(b.remaining("k", clock.now()), None);
    b.next("k", clock.now());
    let t = clock.now();
    assert_eq!(b.remaining("k", t), Some(Duration::from_secs(10)));
    assert_eq!(
        b.remaining("k", t - Duration::from_secs(5)),
        Some(Duration::from_secs(15))
    );
    assert_eq!(b.remaining("k", t + Duration::from_secs(10)), None);
    for probe in [0u64, 5, 9, 10, 11, 700] {
        let at = t + Duration::from_secs(probe);
        assert_eq!(
            b.remaining("k", at).is_some(),
            b.is_in_backoff_since_update("k", at),
            "{probe}"
        );
    }
}

#[test]
fn the_gate_on_the_clocks_now_refuses_inside_the_window() {
    let clock = MockClock::new();
    let b = testkit::manager(SEC, 60 * SEC, &clock);
    assert_eq!(b.try_next_now("k"), Ok(SEC));
    clock.advance(SEC / 4);
    let refused = b.try_next_now("k").unwrap_err();
    assert_eq!(refused.remaining, SEC * 3 / 4);
}

#[cfg(feature = "tokio")]
/// Reconciles `key` until it has run `runs` times; `fails(n)` says whether
/// the n-th reconcile (1-based) fails. Errors requeue at the gate's delay, a
/// success resets the key. Returns the virtual times of each reconcile.
async fn reconcile_loop(
    b: &Backoff<String, TokioClock>,
    key: &str,
    runs: usize,
    fails: impl Fn(usize) -> bool,
) -> Vec<Duration> {
    let start = tokio::time::Instant::now();
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

#[cfg(feature = "tokio")]
/// Initial 1 s, max 16 s, on tokio's clock.
fn tokio_manager() -> Backoff<String, TokioClock> {
    Backoff::<String>::builder(SEC, 16 * SEC)
        .clock(TokioClock)
        .build()
        .expect("valid")
}

#[cfg(feature = "tokio")]
fn gaps(at: &[Duration]) -> Vec<u64> {
    at.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect()
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_always_failing_object_backs_off_1_2_4_8_16_16_seconds_in_paused_time() {
    let b = tokio_manager();
    let at = reconcile_loop(&b, "default/broken", 7, |_| true).await;
    assert_eq!(gaps(&at), [1, 2, 4, 8, 16, 16]);
    assert_eq!(b.attempts("default/broken"), 7);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_recovering_object_backs_off_1_2_4_then_starts_over() {
    let b = tokio_manager();
    // Fails three times, succeeds, then fails twice more.
    let at = reconcile_loop(&b, "default/flaky", 7, |n| n != 4).await;
    assert_eq!(gaps(&at), [1, 2, 4, 60, 1, 2]);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_early_requeue_waits_out_the_window_without_counting() {
    let b = tokio_manager();
    assert_eq!(b.try_next_now("obj"), Ok(SEC));
    assert_eq!(b.try_next_now("obj"), Err(InBackoff { remaining: SEC }));
    tokio::time::advance(SEC / 2).await;
    // A watch event half-way through: refused with the rest, not counted.
    assert_eq!(b.try_next_now("obj"), Err(InBackoff { remaining: SEC / 2 }));
    assert_eq!(b.attempts("obj"), 1);
    tokio::time::advance(SEC / 2).await;
    assert_eq!(b.try_next_now("obj"), Ok(2 * SEC));
}

mod remaining_since {
    use super::*;
    use proptest::prelude::*;

    /// A manager's history: settings, then `next` calls at offsets (ns)
    /// from the start, then an event at an offset.
    fn history() -> impl Strategy<Value = (u64, u64, Option<u64>, Vec<u64>, u64)> {
        let ns = prop_oneof![0u64..50, 50u64..5_000, 1_000_000_000u64..400_000_000_000];
        (
            1u64..2_000,
            1u64..20_000,
            prop::option::of(1u64..50_000),
            prop::collection::vec(ns.clone(), 0..6),
            ns,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// At every instant probed (random ones and each side of the
        /// boundaries), `remaining_since` is `Some` exactly when
        /// `is_in_backoff_since` holds, equals `get − (now − event)`, and
        /// the window ends exactly where it says.
        #[test]
        fn agrees_with_is_in_backoff_since_at_every_instant(
            (initial, max, window, updates, event) in history(),
            probes in prop::collection::vec(0u64..60_000, 1..40),
        ) {
            let clock = MockClock::new();
            let t0 = clock.now();
            let at = |ns: u64| t0 + Duration::from_nanos(ns);
            let mut builder = Backoff::<String>::builder(
                Duration::from_nanos(initial),
                Duration::from_nanos(initial.max(max)),
            )
            .clock(clock.clone());
            if let Some(w) = window {
                builder = builder.expire_after(Duration::from_nanos(w));
            }
            let b = builder.build().unwrap();
            let mut updates = updates;
            updates.sort_unstable();
            for u in &updates {
                clock.set(at(*u));
                b.next("k", at(*u));
            }
            let last = updates.last().copied().unwrap_or(0);
            let event_at = at(event);
            let backoff = b.get("k").as_nanos() as u64;
            let mut instants: Vec<u64> = probes.iter().map(|p| last + p).collect();
            let edge = event.saturating_add(backoff);
            instants.extend([edge.saturating_sub(1), edge, edge + 1, event, last]);
            instants.sort_unstable();
            for t in instants.into_iter().filter(|t| *t >= last) {
                clock.set(at(t));
                let left = b.remaining_since("k", event_at);
                prop_assert_eq!(left.is_some(), b.is_in_backoff_since("k", event_at), "t = {}", t);
                if let Some(left) = left {
                    let expected = i128::from(backoff) - (i128::from(t) - i128::from(event));
                    prop_assert_eq!(left.as_nanos() as i128, expected, "t = {}", t);
                }
            }
        }
    }
}

#[cfg(feature = "tokio")]
mod waiting {
    use super::*;
    use tokio::time::Instant;

    fn tokio_manager() -> Arc<Backoff<String, TokioClock>> {
        Arc::new(
            Backoff::<String>::builder(SEC, Duration::from_secs(60))
                .clock(TokioClock)
                .build()
                .unwrap(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn until_ready_follows_a_key_advanced_while_it_sleeps() {
        let b = tokio_manager();
        b.next_now("k"); // 1 s
        let start = Instant::now();
        let other = Arc::clone(&b);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            other.next_now("k"); // 2 s from 0.5 s: ends at 2.5 s
        });
        b.until_ready("k").await;
        assert_eq!(start.elapsed(), Duration::from_millis(2_500));
        assert_eq!(
            b.remaining_since("k", Instant::now()),
            Some(Duration::from_secs(2))
        );
        assert_eq!(b.remaining("k", Instant::now()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn racing_waiters_pass_one_per_window() {
        let b = tokio_manager();
        let start = Instant::now();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let b = Arc::clone(&b);
                tokio::spawn(async move {
                    let backoff = b.until_ready_then_next("k").await;
                    (start.elapsed(), backoff)
                })
            })
            .collect();
        let mut passed = Vec::new();
        for t in tasks {
            passed.push(t.await.unwrap());
        }
        passed.sort();
        // One at once, then one at the end of each window: 1, 2, 4 s.
        let secs = |s: u64| Duration::from_secs(s);
        assert_eq!(
            passed,
            [
                (secs(0), secs(1)),
                (secs(1), secs(2)),
                (secs(3), secs(4)),
                (secs(7), secs(8))
            ]
        );
        assert_eq!(b.attempts("k"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_changes_nothing() {
        let b = tokio_manager();
        b.next_now("k");
        let waiting =
            tokio::time::timeout(Duration::from_millis(300), b.until_ready_then_next("k")).await;
        assert!(waiting.is_err(), "still in backoff at 0.3 s");
        assert_eq!(b.attempts("k"), 1);
        assert_eq!(b.until_ready_then_next("k").await, Duration::from_secs(2));
        assert_eq!(b.attempts("k"), 2);
    }
}
