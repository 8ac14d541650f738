//! Strategy formulas: deterministic sequences with a seed, every family's
//! documented edges, the checks of their parameters, and a cap that bounds
//! every delay.

use keyed_backoff::strategy::{
    Cenkalti, Constant, Decorrelated, EqualJitter, Ethernet, Exponential, FactorJitter, FullJitter,
    GoogleCloud, Hadoop, Linear, Step, Strategy, WaitBackoff,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
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
    twice(Strategy::new(Ethernet::new(base)).unwrap().seed(1));
    twice(Strategy::new(Hadoop::new(base, 10)).unwrap().seed(1));
    twice(Strategy::new(GoogleCloud::new()).unwrap().seed(1));
    twice(Strategy::new(Cenkalti::new()).unwrap().seed(1));
}

#[test]
fn deterministic_families() {
    let c: Vec<Duration> = Strategy::new(Constant::new(MS))
        .unwrap()
        .max_attempts(3)
        .iter()
        .collect();
    assert_eq!(c, vec![MS; 3]);
    let l: Vec<u128> = Strategy::new(Linear::new(MS, 2 * MS).cap(6 * MS))
        .unwrap()
        .iter()
        .take(5)
        .map(|d| d.as_millis())
        .collect();
    assert_eq!(l, [1, 3, 5, 6, 6]);
    let e: Vec<u128> = Strategy::new(Exponential::new(5 * MS, 2.0).cap(2000 * MS))
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
    assert_eq!(
        Strategy::new(Cenkalti::new().multiplier(0.5))
            .unwrap_err()
            .field(),
        "multiplier"
    );
    assert_eq!(
        Strategy::new(Cenkalti::new().randomization(f64::NAN))
            .unwrap_err()
            .field(),
        "randomization"
    );
}

#[test]
fn cenkalti_documented_intervals_and_ranges() {
    // cenkalti/backoff's documented table (default settings): the interval
    // and the range of the randomised value for requests 1 to 9.
    let documented = [
        (0.5, 0.25, 0.75),
        (0.75, 0.375, 1.125),
        (1.125, 0.562, 1.687),
        (1.687, 0.8435, 2.53),
        (2.53, 1.265, 3.795),
        (3.795, 1.897, 5.692),
        (5.692, 2.846, 8.538),
        (8.538, 4.269, 12.807),
        (12.807, 6.403, 19.210),
    ];
    let s = Cenkalti::new();
    for (n, (interval, lo, hi)) in documented.into_iter().enumerate() {
        let n = n as u32;
        let at_zero = s.delay(n, None, &mut || 0.0).unwrap().as_secs_f64();
        let at_one = s
            .delay(n, None, &mut || 1.0 - f64::EPSILON)
            .unwrap()
            .as_secs_f64();
        let middle = s.delay(n, None, &mut || 0.5).unwrap().as_secs_f64();
        // The documented table rounds each interval before multiplying, so
        // compare within 0.1 %.
        let close = |got: f64, doc: f64| (got / doc - 1.0).abs() < 0.001;
        assert!(
            close(at_zero, lo),
            "request {}: low {at_zero} vs {lo}",
            n + 1
        );
        assert!(
            close(at_one, hi),
            "request {}: high {at_one} vs {hi}",
            n + 1
        );
        assert!(
            close(middle, interval),
            "request {}: interval {middle} vs {interval}",
            n + 1
        );
    }
    // The interval is capped at 60 s; the randomised value may exceed it.
    let late = s.delay(30, None, &mut || 1.0 - f64::EPSILON);
    assert_eq!(
        late, None,
        "15 minutes of waiting exhausts the default max elapsed"
    );
    let unlimited = Cenkalti::new().max_elapsed(Duration::ZERO);
    let high = unlimited
        .delay(30, None, &mut || 1.0 - f64::EPSILON)
        .unwrap();
    assert!(
        high > Duration::from_secs(60) && high <= Duration::from_secs(90),
        "{high:?}"
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
            .cap(100 * MS),
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

#[test]
fn ethernet_gives_up_after_16_attempts_and_truncates_at_10() {
    let slot = Duration::from_micros(51);
    let s = Strategy::new(Ethernet::new(slot)).unwrap().seed(8);
    assert_eq!(s.iter().count(), 15, "16 attempts: 15 waits, then give up");
    for (n, max_r) in [(0u32, 1u32), (1, 3), (9, 1023), (12, 1023)] {
        let mut rng = SmallRng::seed_from_u64(u64::from(n));
        let rs: Vec<u32> = (0..50_000)
            .map(|_| {
                let d = Ethernet::new(slot)
                    .delay(n, None, &mut || rng.random::<f64>())
                    .unwrap();
                (d.as_nanos() / slot.as_nanos()) as u32
            })
            .collect();
        assert_eq!(*rs.iter().max().unwrap(), max_r, "collision {}", n + 1);
        assert_eq!(*rs.iter().min().unwrap(), 0);
    }
}

mod strategies {

    use std::time::Duration;

    use keyed_backoff::strategy::{
        Cenkalti, Constant, Decorrelated, EqualJitter, Ethernet, Exponential, FactorJitter,
        FullJitter, GoogleCloud, Hadoop, Linear, Step, WaitBackoff,
    };
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// Every strategy family, with parameters drawn from the test's inputs
    /// (durations in ms, factors and jitters in small ranges).
    fn all(a: u64, b: u64, f: f64, j: f64) -> Vec<Box<dyn Step>> {
        let (a, b) = (MS * a as u32, MS * b as u32);
        vec![
            Box::new(Constant::new(a)),
            Box::new(Linear::new(a, b).cap(b * 3)),
            Box::new(Exponential::new(a, 1.0 + f).cap(b)),
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
                    .cap(b),
            ),
            Box::new(Ethernet::new(a)),
            Box::new(Hadoop::new(a, 8).cap(b)),
            Box::new(GoogleCloud::new().max_backoff(b)),
            Box::new(
                Cenkalti::new()
                    .initial(a)
                    .max_interval(b)
                    .randomization(j)
                    .multiplier(1.0 + f),
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

    #[test]
    fn cenkalti_at_duration_max_saturates_instead_of_panicking() {
        let c = Cenkalti::new()
            .initial(Duration::MAX)
            .max_interval(Duration::MAX)
            .max_elapsed(Duration::MAX);
        for n in 0..5 {
            let _ = c.delay(n, None, &mut || 0.5);
        }
    }

    #[test]
    fn cenkalti_with_a_constant_interval_stops_at_max_elapsed_like_the_sum() {
        // With multiplier 1 the interval never changes and the elapsed sum
        // is one multiplication; it must stop exactly where summing would.
        let c = Cenkalti::new()
            .multiplier(1.0)
            .randomization(0.0)
            .initial(Duration::from_secs(1))
            .max_elapsed(Duration::from_secs(10));
        let given = (0..20)
            .take_while(|&n| c.delay(n, None, &mut || 0.0).is_some())
            .count();
        assert_eq!(given, 10);
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
            .cap(2 * SEC),
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
