//! client-go's update rule: how `next` moves an entry's backoff.
//!
//! A fresh (or expired) entry gets `initial + jitter(initial)`, uncapped; an
//! existing one gets `min(2·previous + jitter(previous), max)`. The jitter is
//! `U[0,1) · factor · previous`, drawn from the *previous* backoff and added
//! *before* the cap. All arithmetic is on `u64` nanoseconds and saturates.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// A lock-free, reproducible source of `U[0,1)` draws.
///
/// Draw `n` comes from a generator seeded with `(seed, n)`, so a seeded
/// manager driven from one thread gives the same jitter every run, and
/// concurrent callers never wait on a lock for randomness.
#[derive(Debug)]
pub(crate) struct UnitDraws {
    seed: u64,
    counter: AtomicU64,
}

impl UnitDraws {
    pub(crate) fn new(seed: u64) -> Self {
        UnitDraws {
            seed,
            counter: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(crate) fn next_unit(&self) -> f64 {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // Spread consecutive draw numbers over the seed space before seeding.
        let stream = self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        SmallRng::seed_from_u64(stream).random::<f64>()
    }
}

#[derive(Debug)]
pub(crate) struct ClientGoRule {
    initial_ns: u64,
    max_ns: u64,
    factor: f64,
    draws: UnitDraws,
}

impl ClientGoRule {
    pub(crate) fn new(initial_ns: u64, max_ns: u64, factor: f64, seed: u64) -> Self {
        ClientGoRule {
            initial_ns,
            max_ns,
            factor,
            draws: UnitDraws::new(seed),
        }
    }

    #[inline]
    fn jitter(&self, delay_ns: u64) -> u64 {
        if self.factor == 0.0 {
            return 0;
        }
        // `as` truncates toward zero like Go's conversion, and saturates
        // where Go's would be undefined.
        (self.draws.next_unit() * self.factor * delay_ns as f64) as u64
    }

    /// The backoff of a new or re-initialised entry.
    #[inline]
    pub(crate) fn first(&self) -> u64 {
        self.initial_ns.saturating_add(self.jitter(self.initial_ns))
    }

    /// The backoff after `previous`.
    #[inline]
    pub(crate) fn following(&self, previous_ns: u64) -> u64 {
        previous_ns
            .saturating_mul(2)
            .saturating_add(self.jitter(previous_ns))
            .min(self.max_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_caps_without_jitter() {
        let r = ClientGoRule::new(10, 35, 0.0, 1);
        assert_eq!(r.first(), 10);
        assert_eq!(r.following(10), 20);
        assert_eq!(r.following(20), 35);
        assert_eq!(r.following(u64::MAX), 35);
    }

    #[test]
    fn jitter_is_drawn_from_previous_and_added_before_cap() {
        let r = ClientGoRule::new(1_000, u64::MAX, 0.5, 7);
        for _ in 0..1_000 {
            let v = r.following(1_000);
            assert!((2_000..2_500).contains(&v), "{v}");
            let f = r.first();
            assert!((1_000..1_500).contains(&f), "{f}");
        }
        let capped = ClientGoRule::new(1_000, 2_100, 0.5, 7);
        assert!((0..1_000).all(|_| capped.following(1_000) <= 2_100));
    }

    #[test]
    fn same_seed_same_draws() {
        let a = UnitDraws::new(42);
        let b = UnitDraws::new(42);
        let xs: Vec<f64> = (0..100).map(|_| a.next_unit()).collect();
        let ys: Vec<f64> = (0..100).map(|_| b.next_unit()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = xs.iter().sum::<f64>() / 100.0;
        assert!((0.3..0.7).contains(&mean), "{mean}");
    }
}
