//! The keyed manager driven by a strategy instead of client-go's strategy: its
//! sequences, seeds, attempt limits and expiry windows.

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::strategy::{Constant, Exponential, FullJitter, Step, Strategy};
use keyed_backoff::{Backoff, Settings};

use std::time::Duration;

const MAX_BACKOFF: Duration = Settings::MAX_BACKOFF;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn keyed_manager_with_a_strategy() {
    let clock = MockClock::new();
    let exponential = Exponential::new(Duration::from_secs(1), 3.0).max(Duration::from_secs(20));
    let b = Backoff::<String>::with_strategy(
        Strategy::new(exponential.clone()).unwrap().max_attempts(4),
    )
    .clock(clock.clone())
    .expire_after(Duration::from_secs(200))
    .build()
    .unwrap();
    let secs: Vec<u64> = (0..6).map(|_| b.next("k", clock.now()).as_secs()).collect();
    // After its 4 delays the strategy gives up; the entry keeps its last value.
    assert_eq!(secs, [1, 3, 9, 20, 20, 20]);
    assert_eq!(b.attempts("k"), 6);
    // Expiry still follows 2·max and starts the strategy over.
    clock.advance(Duration::from_secs(201));
    assert_eq!(b.next("k", clock.now()), Duration::from_secs(1));
    assert_eq!(b.attempts("k"), 1);
    // Without a window, the default expiry is twice the strategy's largest delay.
    let b = Backoff::<String>::with_strategy(Strategy::new(exponential).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(b.max(), Duration::from_secs(20));
    // A strategy without a bound needs a window.
    let unbounded = Strategy::new(Exponential::new(Duration::from_secs(1), 2.0)).unwrap();
    let err = Backoff::<String>::with_strategy(unbounded.clone())
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "expire_after");
    assert!(
        Backoff::<String>::with_strategy(unbounded)
            .expire_after(Duration::from_secs(60))
            .build()
            .is_ok()
    );
}

#[test]
fn a_strategy_whose_limit_the_manager_cannot_count_is_refused() {
    use keyed_backoff::strategy::{Constant, Strategy};
    let with = |s| {
        Backoff::<String>::with_strategy(s)
            .build()
            .map(drop)
            .map_err(|e| e.field())
    };
    let five_thousand = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(5_000);
    assert_eq!(with(five_thousand), Err("strategy"));
    let none = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(0);
    assert_eq!(with(none), Err("strategy"));
    let at_limit = Strategy::new(Constant::new(5 * SEC))
        .unwrap()
        .max_attempts(4_095);
    assert_eq!(with(at_limit), Ok(()));
    let unlimited = Strategy::new(Constant::new(5 * SEC)).unwrap();
    assert_eq!(with(unlimited), Ok(()));
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
