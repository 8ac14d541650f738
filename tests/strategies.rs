//! Strategy formulas: deterministic sequences with a seed, distributions over
//! many draws, and the keyed manager driven by a strategy and its gate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::strategy::{
    Cenkalti, Constant, Decorrelated, EqualJitter, Ethernet, Exponential, FactorJitter, FullJitter,
    GoogleCloud, Hadoop, Linear, Step, Strategy, WaitBackoff,
};
use keyed_backoff::{Backoff, InBackoff};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

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
        Strategy::new(FactorJitter::new(base, cap).factor(0.5))
            .unwrap()
            .seed(1),
    );
    twice(
        Strategy::new(WaitBackoff::new(base).factor(2.0).jitter(0.1).steps(5))
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
        "factor"
    );
    assert_eq!(
        Strategy::new(Exponential::new(MS, f64::INFINITY))
            .unwrap_err()
            .field(),
        "factor"
    );
    assert_eq!(
        Strategy::new(FactorJitter::new(MS, MS).factor(f64::NAN))
            .unwrap_err()
            .field(),
        "factor"
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
    let s = Strategy::new(WaitBackoff::new(10 * MS).factor(2.0).steps(4)).unwrap();
    let ms: Vec<u128> = s.iter().take(7).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [10, 20, 40, 80, 160, 160, 160]);
    let capped = Strategy::new(
        WaitBackoff::new(10 * MS)
            .factor(3.0)
            .steps(10)
            .cap(100 * MS),
    )
    .unwrap();
    let ms: Vec<u128> = capped.iter().take(6).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [10, 30, 90, 100, 100, 100]);
    // Jitter never feeds back: every value lies in [d, d·1.5) of the
    // un-jittered sequence.
    let jittered = Strategy::new(WaitBackoff::new(10 * MS).factor(2.0).jitter(0.5).steps(4))
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

#[test]
fn hadoop_and_google_ranges() {
    let h = Hadoop::new(100 * MS, 4).cap(Duration::from_secs(1));
    for n in 0..4 {
        let v = (100.0 * 2f64.powi(n as i32 + 1)).min(1000.0) / 1000.0;
        let xs = samples_at(&h, n, None, 3);
        assert!(
            xs.iter().all(|&x| x >= 0.5 * v - 1e-9 && x < 1.5 * v),
            "n={n}"
        );
        assert!((mean(&xs) / v - 1.0).abs() < 0.01);
    }
    assert_eq!(h.delay(4, None, &mut || 0.5), None);
    let g = GoogleCloud::new();
    for n in 0..8 {
        let xs = samples_at(&g, n, None, 4);
        let lo = 2f64.powi(n as i32).min(32.0);
        assert!(
            xs.iter().all(|&x| x >= lo && x <= (lo + 1.0).min(32.0)),
            "n={n}"
        );
    }
}

#[test]
fn keyed_manager_with_a_strategy() {
    let clock = MockClock::new();
    let exponential = Exponential::new(Duration::from_secs(1), 3.0).cap(Duration::from_secs(20));
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
