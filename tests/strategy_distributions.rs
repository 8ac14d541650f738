//! Strategy formulas over many draws: the means, ranges and spikes their
//! sources document.

use keyed_backoff::strategy::{Decorrelated, EqualJitter, FullJitter, Step, Strategy, WaitBackoff};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

const DRAWS: usize = 200_000;

const MS: Duration = Duration::from_millis(1);

/// `DRAWS` independent samples of delay `n` of a strategy.
fn samples_at(step: &dyn Step, n: u32, previous: Option<Duration>, seed: u64) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..DRAWS)
        .map(|_| {
            step.delay(n, previous, &mut || rng.random::<f64>())
                .expect("delay")
                .as_secs_f64()
        })
        .collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

#[test]
fn full_jitter_mean_is_half_the_envelope() {
    let s = FullJitter::new(5 * MS, 2000 * MS);
    for n in [0, 3, 6, 12] {
        let v = (5.0 * 2f64.powi(n as i32)).min(2000.0) / 1000.0;
        let xs = samples_at(&s, n, None, 11 + u64::from(n));
        let m = mean(&xs);
        assert!(
            (m / (v / 2.0) - 1.0).abs() < 0.01,
            "n={n}: mean {m} vs {}",
            v / 2.0
        );
        assert!(xs.iter().all(|&x| (0.0..v).contains(&x)));
    }
}

#[test]
fn equal_jitter_mean_is_three_quarters_of_the_envelope() {
    let s = EqualJitter::new(5 * MS, 2000 * MS);
    for n in [0, 3, 6, 12] {
        let v = (5.0 * 2f64.powi(n as i32)).min(2000.0) / 1000.0;
        let xs = samples_at(&s, n, None, 21 + u64::from(n));
        let m = mean(&xs);
        assert!(
            (m / (0.75 * v) - 1.0).abs() < 0.01,
            "n={n}: mean {m} vs {}",
            0.75 * v
        );
        assert!(xs.iter().all(|&x| x >= v / 2.0 - 1e-9 && x < v));
    }
}

/// Share of delays exactly at the cap after 30 steps, over many sequences.
fn share_at_cap(s: keyed_backoff::strategy::Strategy<Decorrelated>, cap: Duration) -> f64 {
    let runs = 100_000;
    let mut rng = SmallRng::seed_from_u64(5);
    let mut at_cap = 0;
    for _ in 0..runs {
        let mut prev = None;
        let mut d = Duration::ZERO;
        for n in 0..30 {
            d = s
                .step()
                .delay(n, prev, &mut || rng.random::<f64>())
                .unwrap();
            prev = Some(d);
        }
        at_cap += usize::from(d == cap);
    }
    at_cap as f64 / runs as f64
}

#[test]
fn decorrelated_spikes_at_the_cap_and_the_bounded_variant_does_not() {
    let (base, cap) = (5 * MS, 2000 * MS);
    let aws = share_at_cap(Strategy::new(Decorrelated::new(base, cap)).unwrap(), cap);
    assert!(
        (0.20..0.35).contains(&aws),
        "AWS decorrelated at cap: {aws}"
    );
    let bounded = share_at_cap(
        Strategy::new(Decorrelated::new(base, cap).bounded()).unwrap(),
        cap,
    );
    assert!(bounded < 0.01, "bounded at cap: {bounded}");
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
