//! Strategy formulas: deterministic sequences with a seed, every family's
//! documented edges, the checks of their parameters, and a cap that bounds
//! every delay.

use keyed_backoff::strategy::{
    Constant, Decorrelated, EqualJitter, Exponential, FactorJitter, FullJitter, Linear, Step,
    Strategy, WaitBackoff,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

const MS: Duration = Duration::from_millis(1);

#[test]
fn seeded_sequences_are_reproducible_for_every_strategy() {
    fn twice<S: Step + Clone>(s: keyed_backoff::strategy::Strategy<S>) {
        let a: Vec<Duration> = s.iter().take(20).collect();
        let b: Vec<Duration> = s.iter().take(20).collect();
        assert_eq!(a, b, "{:?}", s.step());
        assert!(!a.is_empty());
    }
    let (base, cap) = (5 * MS, 2000 * MS);
    twice(Strategy::new(FullJitter::new(base, cap)).unwrap().seed(1));
    twice(Strategy::new(EqualJitter::new(base, cap)).unwrap().seed(1));
    twice(Strategy::new(Decorrelated::new(base, cap)).unwrap().seed(1));
    twice(
        Strategy::new(Decorrelated::new(base, cap).bounded())
            .unwrap()
            .seed(1),
    );
    twice(
        Strategy::new(FactorJitter::new(base, cap).jitter(0.5))
            .unwrap()
            .seed(1),
    );
    twice(
        Strategy::new(WaitBackoff::new(base).multiplier(2.0).jitter(0.1).steps(5))
            .unwrap()
            .seed(1),
    );
}

#[test]
fn deterministic_families() {
    let c: Vec<Duration> = Strategy::new(Constant::new(MS))
        .unwrap()
        .max_attempts(3)
        .iter()
        .collect();
    assert_eq!(c, vec![MS; 3]);
    let l: Vec<u128> = Strategy::new(Linear::new(MS, 2 * MS).max(6 * MS))
        .unwrap()
        .iter()
        .take(5)
        .map(|d| d.as_millis())
        .collect();
    assert_eq!(l, [1, 3, 5, 6, 6]);
    let e: Vec<u128> = Strategy::new(Exponential::new(5 * MS, 2.0).max(2000 * MS))
        .unwrap()
        .iter()
        .take(11)
        .map(|d| d.as_millis())
        .collect();
    assert_eq!(e, [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2000, 2000]);
    let f: Vec<u64> = Strategy::new(FactorJitter::new(
        Duration::from_secs(10),
        Duration::from_secs(300),
    ))
    .unwrap()
    .iter()
    .take(8)
    .map(|d| d.as_secs())
    .collect();
    assert_eq!(f, [10, 20, 40, 80, 160, 300, 300, 300]);
}

#[test]
fn bad_parameters_are_refused() {
    assert_eq!(
        Strategy::new(Exponential::new(MS, 0.9))
            .unwrap_err()
            .field(),
        "multiplier"
    );
    assert_eq!(
        Strategy::new(Exponential::new(MS, f64::INFINITY))
            .unwrap_err()
            .field(),
        "multiplier"
    );
    assert_eq!(
        Strategy::new(FactorJitter::new(MS, MS).jitter(f64::NAN))
            .unwrap_err()
            .field(),
        "jitter"
    );
    assert_eq!(
        Strategy::new(WaitBackoff::new(MS).jitter(-1.0))
            .unwrap_err()
            .field(),
        "jitter"
    );
}

#[test]
fn apimachinery_step_sequence() {
    // {duration 10 ms, factor 2, steps 4, cap 100 ms}: returns the current
    // value, then grows; after 4 steps (or reaching the cap) it stops growing.
    let s = Strategy::new(WaitBackoff::new(10 * MS).multiplier(2.0).steps(4)).unwrap();
    let ms: Vec<u128> = s.iter().take(7).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [10, 20, 40, 80, 160, 160, 160]);
    let capped = Strategy::new(
        WaitBackoff::new(10 * MS)
            .multiplier(3.0)
            .steps(10)
            .max(100 * MS),
    )
    .unwrap();
    let ms: Vec<u128> = capped.iter().take(6).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [10, 30, 90, 100, 100, 100]);
    // Jitter never feeds back: every value lies in [d, d·1.5) of the
    // un-jittered sequence.
    let jittered = Strategy::new(
        WaitBackoff::new(10 * MS)
            .multiplier(2.0)
            .jitter(0.5)
            .steps(4),
    )
    .unwrap()
    .seed(3);
    for (got, base) in jittered.iter().zip([10u64, 20, 40, 80, 160, 160]) {
        let base = Duration::from_millis(base);
        assert!(
            got >= base && got < base.mul_f64(1.5),
            "{got:?} vs {base:?}"
        );
    }
}

mod strategies {

    use std::time::Duration;

    use keyed_backoff::strategy::{
        Constant, Decorrelated, EqualJitter, Exponential, FactorJitter, FullJitter, Linear, Step,
        WaitBackoff,
    };
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// Every strategy family, with parameters drawn from the test's inputs
    /// (durations in ms, factors and jitters in small ranges).
    fn all(a: u64, b: u64, f: f64, j: f64) -> Vec<Box<dyn Step>> {
        let (a, b) = (MS * a as u32, MS * b as u32);
        vec![
            Box::new(Constant::new(a)),
            Box::new(Linear::new(a, b).max(b * 3)),
            Box::new(Exponential::new(a, 1.0 + f).max(b)),
            Box::new(FullJitter::new(a, b)),
            Box::new(EqualJitter::new(a, b)),
            Box::new(Decorrelated::new(a, b)),
            Box::new(Decorrelated::new(a, b).bounded()),
            Box::new(FactorJitter::new(a, b).jitter(j * 2.0)),
            Box::new(
                WaitBackoff::new(a)
                    .multiplier(f * 2.0)
                    .jitter(j)
                    .steps(6)
                    .max(b),
            ),
        ]
    }

    proptest! {
        #[test]
        fn cap_bounds_every_delay_a_strategy_produces(
            a in 0u64..100_000,
            b in 0u64..100_000,
            f in 0.0f64..2.0,
            j in 0.0f64..1.0,
            draws in proptest::collection::vec(0.0f64..1.0, 40),
        ) {
            for s in all(a, b, f, j) {
                let cap = s.max_delay();
                let mut previous = None;
                let mut it = draws.iter().cycle();
                for n in 0..40 {
                    let Some(d) = s.delay(n, previous, &mut || *it.next().unwrap()) else { break };
                    prop_assert!(d <= cap, "{s:?}: delay {n} = {d:?} above cap {cap:?}");
                    previous = Some(d);
                }
            }
        }
    }
}

#[test]
fn a_wait_backoff_that_lands_exactly_on_its_cap_keeps_stepping() {
    // apimachinery ends growth only when a step goes *above* the cap; a
    // shrinking factor shows the difference.
    let s = Strategy::new(
        WaitBackoff::new(4 * SEC)
            .multiplier(0.5)
            .steps(4)
            .max(2 * SEC),
    )
    .unwrap();
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
