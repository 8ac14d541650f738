//! The schemes' documented sequences, ranges and edges, and a cap that
//! bounds every delay they produce.

use std::collections::BTreeSet;
use std::time::Duration;

use keyed_backoff::strategy::{Step, Strategy};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::schemes::{Cenkalti, Ethernet, GoogleCloud, Hadoop};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// `draws` independent samples of delay `n` of a scheme, in seconds.
fn samples_at(step: &dyn Step, n: u32, seed: u64, draws: usize) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..draws)
        .map(|_| {
            let d = step.delay(n, None, &mut || rng.random::<f64>());
            d.expect("delay").as_secs_f64()
        })
        .collect()
}

#[test]
fn seeded_sequences_are_reproducible() {
    fn twice<S: Step + Clone>(s: Strategy<S>) {
        let a: Vec<Duration> = s.iter().take(20).collect();
        let b: Vec<Duration> = s.iter().take(20).collect();
        assert_eq!(a, b, "{:?}", s.step());
        assert!(!a.is_empty());
    }
    let base = 5 * MS;
    twice(Strategy::new(Ethernet::new(base)).unwrap().seed(1));
    twice(Strategy::new(Hadoop::new(base, 10)).unwrap().seed(1));
    twice(Strategy::new(GoogleCloud::new()).unwrap().seed(1));
    twice(Strategy::new(Cenkalti::new()).unwrap().seed(1));
}

#[test]
fn ethernet_gives_up_after_16_attempts_and_truncates_at_10() {
    let slot = Duration::from_micros(51);
    let s = Strategy::new(Ethernet::new(slot)).unwrap().seed(8);
    assert_eq!(s.iter().count(), 15, "16 attempts: 15 waits, then give up");
    for (n, max_r) in [(0u32, 1u32), (1, 3), (9, 1023), (12, 1023)] {
        let rs: Vec<u32> = samples_at(&Ethernet::new(slot), n, u64::from(n), 50_000)
            .into_iter()
            .map(|secs| (secs / slot.as_secs_f64()).round() as u32)
            .collect();
        assert_eq!(*rs.iter().max().unwrap(), max_r, "collision {}", n + 1);
        assert_eq!(*rs.iter().min().unwrap(), 0);
    }
}

#[test]
fn hadoop_and_google_cloud_ranges() {
    let h = Hadoop::new(100 * MS, 4).max(SEC);
    for n in 0..4 {
        let v = (100.0 * 2f64.powi(n as i32 + 1)).min(1000.0) / 1000.0;
        let xs = samples_at(&h, n, 3, 200_000);
        assert!(
            xs.iter().all(|&x| x >= 0.5 * v - 1e-9 && x < 1.5 * v),
            "n={n}"
        );
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean / v - 1.0).abs() < 0.01, "n={n}: mean {mean} vs {v}");
    }
    assert_eq!(h.delay(4, None, &mut || 0.5), None, "4 retries at most");
    let g = GoogleCloud::new();
    for n in 0..8 {
        let lo = 2f64.powi(n as i32).min(32.0);
        let xs = samples_at(&g, n, 4, 20_000);
        assert!(
            xs.iter().all(|&x| x >= lo && x <= (lo + 1.0).min(32.0)),
            "n={n}"
        );
    }
    assert_eq!(
        GoogleCloud::new().max_backoff(64 * SEC).max_delay(),
        64 * SEC
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
    let at = |n: u32, u: f64| s.delay(n, None, &mut || u).unwrap().as_secs_f64();
    // The documented table rounds each interval before multiplying, so
    // compare within 0.1 %.
    let close = |got: f64, doc: f64| (got / doc - 1.0).abs() < 0.001;
    for (n, (interval, lo, hi)) in (0u32..).zip(documented) {
        assert!(close(at(n, 0.0), lo), "request {}: low", n + 1);
        assert!(
            close(at(n, 1.0 - f64::EPSILON), hi),
            "request {}: high",
            n + 1
        );
        assert!(close(at(n, 0.5), interval), "request {}: interval", n + 1);
    }
    // 15 minutes of waiting exhausts the default max elapsed; without it,
    // the interval is capped at 60 s and the randomised value may pass it.
    assert_eq!(s.delay(30, None, &mut || 1.0 - f64::EPSILON), None);
    let unlimited = Cenkalti::new().max_elapsed(Duration::ZERO);
    let high = unlimited
        .delay(30, None, &mut || 1.0 - f64::EPSILON)
        .unwrap();
    assert!(high > 60 * SEC && high <= 90 * SEC, "{high:?}");
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
    // With multiplier 1 the sum is one multiplication; it stops exactly
    // where summing would.
    let constant = Cenkalti::new()
        .multiplier(1.0)
        .randomization(0.0)
        .initial(SEC)
        .max_elapsed(10 * SEC);
    let given = (0..20)
        .take_while(|&n| constant.delay(n, None, &mut || 0.0).is_some())
        .count();
    assert_eq!(given, 10);
}

#[test]
fn cenkalti_draws_up_to_one_nanosecond_past_the_randomised_interval() {
    // Interval 2 ns, randomization 0.5: [1, 3] ns, both ends included.
    let mut seen = BTreeSet::new();
    for seed in 0..200 {
        let c = Cenkalti::new().initial(Duration::from_nanos(2));
        let first = Strategy::new(c).unwrap().seed(seed).iter().next().unwrap();
        seen.insert(first.as_nanos());
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
    // max_delay: max(initial, max_interval) · (1 + r) + 1 ns.
    let c = Cenkalti::new().max_interval(10 * SEC).randomization(0.0);
    assert_eq!(c.max_delay(), 10 * SEC + Duration::from_nanos(1));
}

#[test]
fn bad_parameters_are_refused_by_name() {
    let field = |c: Cenkalti| Strategy::new(c).map(drop).map_err(|e| e.field());
    assert_eq!(field(Cenkalti::new().multiplier(0.5)), Err("multiplier"));
    assert_eq!(
        field(Cenkalti::new().randomization(f64::NAN)),
        Err("randomization")
    );
    assert_eq!(field(Cenkalti::new().randomization(1.0)), Ok(()));
    let over = Cenkalti::new().randomization(1.0 + f64::EPSILON);
    assert_eq!(field(over), Err("randomization"));
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

proptest! {
    #[test]
    fn the_cap_bounds_every_delay(
        a in 0u32..100_000,
        b in 0u32..100_000,
        f in 0.0f64..2.0,
        j in 0.0f64..1.0,
        draws in proptest::collection::vec(0.0f64..1.0, 40),
    ) {
        let (a, b) = (MS * a, MS * b);
        let schemes: [Box<dyn Step>; 4] = [
            Box::new(Ethernet::new(a)),
            Box::new(Hadoop::new(a, 8).max(b)),
            Box::new(GoogleCloud::new().max_backoff(b)),
            Box::new(Cenkalti::new().initial(a).max_interval(b).randomization(j).multiplier(1.0 + f)),
        ];
        for s in schemes {
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
