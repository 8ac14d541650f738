//! Behaviours that a mutation of the code once changed without any other
//! test failing: each test here fails under that mutation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use keyed_backoff::budget::{AdaptiveThrottle, RetryBudget, TpsBudget};
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::retry::{GaveUp, Retry};
use keyed_backoff::strategy::{
    Cenkalti, Constant, Decorrelated, FullJitter, GoogleCloud, Step, Strategy, WaitBackoff,
};
use keyed_backoff::{Backoff, MAX_BACKOFF};

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

/// client-go's default rule as a user expiry function.
fn twice_max(event: MockInstant, last: MockInstant, max: Duration) -> bool {
    event > last && event.saturating_duration_since(last) > 2 * max
}

#[test]
fn an_expiry_function_may_use_another_manager() {
    let clock = MockClock::new();
    // Both managers have expiry functions: each refuses calls from its own.
    let other = Arc::new(
        Backoff::<String>::builder(SEC, 60 * SEC)
            .clock(clock.clone())
            .expiry(twice_max)
            .build()
            .unwrap(),
    );
    other.next("elsewhere", clock.now());
    let seen = Arc::clone(&other);
    let b = Backoff::<String>::builder(SEC, 60 * SEC)
        .clock(clock.clone())
        .expiry(move |event, last, max| {
            // Only calls into this manager itself are refused.
            assert_eq!(seen.len(), 1);
            twice_max(event, last, max)
        })
        .build()
        .unwrap();
    b.next("k", clock.now());
    assert_eq!(b.next("k", clock.now()), 2 * SEC);
    assert_eq!(b.gc(), 0);
}

/// A strategy that states no largest delay.
#[derive(Debug, Clone)]
struct OneSecond;

impl Step for OneSecond {
    fn delay(&self, _: u32, _: Option<Duration>, _: &mut dyn FnMut() -> f64) -> Option<Duration> {
        Some(SEC)
    }
}

#[test]
fn a_strategy_that_states_no_largest_delay_is_unbounded_and_needs_a_window() {
    assert_eq!(OneSecond.max_delay(), Duration::MAX);
    let s = Strategy::new(OneSecond).unwrap();
    let err = Backoff::<String>::with_strategy(s.clone())
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "expire_after");
    let b = Backoff::<String>::with_strategy(s)
        .expire_after(10 * SEC)
        .build()
        .unwrap();
    assert_eq!(b.next_now("k"), SEC);
}

#[test]
fn a_strategys_own_seed_drives_the_managers_draws() {
    let jitter = || FullJitter::new(SEC, 60 * SEC);
    let first_delays = |b: Backoff<String, MockClock>, clock: &MockClock| -> Vec<Duration> {
        (0..32)
            .map(|i| b.next(&format!("k{i}"), clock.now()))
            .collect()
    };
    let clock = MockClock::new();
    let seeded_strategy =
        Backoff::<String>::with_strategy(Strategy::new(jitter()).unwrap().seed(42))
            .clock(clock.clone())
            .build()
            .unwrap();
    let seeded_builder = Backoff::<String>::with_strategy(Strategy::new(jitter()).unwrap())
        .clock(clock.clone())
        .seed(42)
        .build()
        .unwrap();
    let other_seed = Backoff::<String>::with_strategy(Strategy::new(jitter()).unwrap().seed(43))
        .clock(clock.clone())
        .build()
        .unwrap();
    let a = first_delays(seeded_strategy, &clock);
    assert_eq!(a, first_delays(seeded_builder, &clock));
    assert_ne!(a, first_delays(other_seed, &clock));
}

#[test]
fn a_detached_gc_thread_keeps_sweeping() {
    let clock = MockClock::new();
    let b = Arc::new(mock_manager(&clock));
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

#[test]
fn decorrelated_jitter_draws_between_base_and_three_times_the_last_delay() {
    let base = Duration::from_millis(10);
    for bounded in [false, true] {
        let d = Decorrelated::new(base, 3_600 * SEC);
        let d = if bounded { d.bounded() } else { d };
        // The first delay is drawn from [base, 3 x base), under any seed.
        for seed in 0..64 {
            let first = Strategy::new(d.clone())
                .unwrap()
                .seed(seed)
                .iter()
                .next()
                .unwrap();
            assert!(base <= first && first < 3 * base, "{first:?}");
        }
        let s = Strategy::new(d).unwrap().seed(7);
        let mut previous = base;
        for delay in s.iter().take(200) {
            assert!(
                base <= delay && delay < 3 * previous,
                "{delay:?} after {previous:?}"
            );
            previous = delay;
        }
    }
}

#[test]
fn a_strategy_capped_at_the_largest_backoff_needs_no_window() {
    let build = |cap: Duration| {
        Backoff::<String>::with_strategy(Strategy::new(Constant::new(cap)).unwrap())
            .build()
            .map(drop)
            .map_err(|e| e.field())
    };
    assert_eq!(build(MAX_BACKOFF), Ok(()));
    assert_eq!(
        build(MAX_BACKOFF + Duration::from_nanos(1)),
        Err("expire_after")
    );
}

#[test]
fn a_wait_backoff_that_lands_exactly_on_its_cap_keeps_stepping() {
    // apimachinery ends growth only when a step goes *above* the cap; a
    // shrinking factor shows the difference.
    let s = Strategy::new(WaitBackoff::new(4 * SEC).factor(0.5).steps(4).cap(2 * SEC)).unwrap();
    let ms: Vec<u128> = s.iter().take(6).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [4_000, 2_000, 1_000, 500, 250, 250]);
}

/// A formula whose validity is switched from outside, to see who asks.
#[derive(Debug, Clone)]
struct Switched(Arc<AtomicBool>);

impl Step for Switched {
    fn delay(&self, _: u32, _: Option<Duration>, _: &mut dyn FnMut() -> f64) -> Option<Duration> {
        Some(SEC)
    }
    fn validate(&self) -> Result<(), keyed_backoff::ConfigError> {
        if self.0.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(keyed_backoff::ConfigError::new("switched", "on", "off"))
        }
    }
}

#[test]
fn a_strategy_reports_its_formulas_verdict() {
    let valid = Arc::new(AtomicBool::new(true));
    let s = Strategy::new(Switched(Arc::clone(&valid))).unwrap();
    assert!(Step::validate(&s).is_ok());
    valid.store(false, Ordering::Relaxed);
    assert_eq!(Step::validate(&s).unwrap_err().field(), "switched");
}

#[test]
fn a_jittered_wait_backoff_spreads_its_delays_above_the_duration() {
    let firsts: Vec<Duration> = (0..32)
        .map(|seed| {
            let s = Strategy::new(WaitBackoff::new(SEC).jitter(0.5)).unwrap();
            s.seed(seed).iter().next().unwrap()
        })
        .collect();
    assert!(
        firsts.iter().all(|d| (SEC..SEC * 3 / 2).contains(d)),
        "{firsts:?}"
    );
    assert!(
        firsts.iter().filter(|d| **d > SEC).count() >= 30,
        "{firsts:?}"
    );
}

#[test]
fn cenkalti_sums_the_capped_intervals_it_has_waited() {
    // Intervals 1, 2, 4, 4, ... s; the seventh delay would bring the
    // waiting to 23 s, past the 20 s allowed.
    let c = Cenkalti::new()
        .initial(SEC)
        .multiplier(2.0)
        .max_interval(4 * SEC)
        .randomization(0.0)
        .max_elapsed(20 * SEC);
    let secs: Vec<u64> = Strategy::new(c)
        .unwrap()
        .iter()
        .map(|d| d.as_secs())
        .collect();
    assert_eq!(secs, [1, 2, 4, 4, 4, 4]);
}

#[test]
fn cenkalti_draws_up_to_one_nanosecond_past_the_randomised_interval() {
    // Interval 2 ns, randomization 0.5: [1, 3] ns, both ends included.
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let c = Cenkalti::new().initial(Duration::from_nanos(2));
        let first = Strategy::new(c).unwrap().seed(seed).iter().next().unwrap();
        seen.insert(first.as_nanos());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
}

#[test]
fn cenkalti_accepts_randomization_up_to_one() {
    let with = |r: f64| {
        Strategy::new(Cenkalti::new().randomization(r))
            .map(drop)
            .map_err(|e| e.field())
    };
    assert_eq!(with(1.0), Ok(()));
    assert_eq!(with(1.0 + f64::EPSILON), Err("randomization"));
}

#[test]
fn the_largest_delay_setters_are_kept() {
    assert_eq!(
        GoogleCloud::new().max_backoff(64 * SEC).max_delay(),
        64 * SEC
    );
    // max_delay of Cenkalti: max(initial, max_interval) · (1 + r) + 1 ns.
    let c = Cenkalti::new().max_interval(10 * SEC).randomization(0.0);
    assert_eq!(c.max_delay(), 10 * SEC + Duration::from_nanos(1));
}

#[test]
fn the_gate_on_the_clocks_now_refuses_inside_the_window() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    assert_eq!(b.try_next_now("k"), Ok(SEC));
    clock.advance(SEC / 4);
    let refused = b.try_next_now("k").unwrap_err();
    assert_eq!(refused.remaining, SEC * 3 / 4);
}

#[test]
fn entries_and_entry_show_what_is_held() {
    let clock = MockClock::new();
    let b = mock_manager(&clock);
    b.next("a", clock.now());
    b.next("b", clock.now());
    b.next("b", clock.now());
    clock.advance(SEC / 2);
    let mut all = b.entries();
    all.sort_by(|x, y| x.key.cmp(&y.key));
    let shown: Vec<(String, Duration, u32, Option<Duration>)> = all
        .into_iter()
        .map(|e| (e.key, e.backoff, e.attempts, e.remaining))
        .collect();
    assert_eq!(
        shown,
        [
            ("a".to_string(), SEC, 1, Some(SEC / 2)),
            ("b".to_string(), 2 * SEC, 2, Some(SEC * 3 / 2)),
        ]
    );
    let b_entry = b.entry("b").unwrap();
    assert_eq!((b_entry.backoff, b_entry.expired), (2 * SEC, false));
    assert!(b.entry("missing").is_none());
}

#[test]
fn restore_on_the_wall_clock_brings_back_every_fresh_entry() {
    let clock = MockClock::new();
    let a = mock_manager(&clock);
    for key in ["x", "y", "z"] {
        a.next(key, clock.now());
    }
    a.next("z", clock.now());
    let b = mock_manager(&clock);
    assert_eq!(b.restore(&a.snapshot()), 3);
    assert_eq!((b.get("z"), b.attempts("z"), b.len()), (2 * SEC, 2, 3));
}
