//! Uniform draws in `[0, 1)` for jitter and randomised budgets: reproducible
//! for a seed on every platform and every version of `rand`, and lock-free.
//!
//! The stream is SplitMix64 (from `rand_xoshiro`, whose output is fixed by
//! the published reference algorithm), and draw `n` of seed `s` is the
//! generator's output from state `s + n·φ`: any draw can be computed without
//! the ones before it, so concurrent callers share one atomic counter and
//! never a lock. Each 64-bit output becomes a float from its top 53 bits.

use std::sync::atomic::{AtomicU64, Ordering};

use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{Rng, SeedableRng};

/// SplitMix64's state increment (the golden ratio in 64-bit fixed point).
const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

/// Draw `n` (0-based) of the stream seeded with `seed`.
#[inline]
pub(crate) fn unit_at(seed: u64, n: u64) -> f64 {
    let mut g = SplitMix64::seed_from_u64(seed.wrapping_add(n.wrapping_mul(PHI)));
    to_unit(g.next_u64())
}

/// The top 53 bits of `x` as a float in `[0, 1)`.
#[inline]
fn to_unit(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A shared, lock-free source of uniform draws in `[0, 1)`: each call takes
/// the next draw number of the seed's stream. The keyed manager draws its
/// jitter from one; so does any store that restates its rule (the Redis
/// store draws in the client and sends the draw to its script), so a seed
/// gives the same delays in process and in Redis.
#[derive(Debug)]
pub struct UnitDraws {
    seed: u64,
    counter: AtomicU64,
}

impl UnitDraws {
    /// The stream of `seed`, from its first draw.
    pub fn new(seed: u64) -> Self {
        UnitDraws {
            seed,
            counter: AtomicU64::new(0),
        }
    }

    /// The next draw, in `[0, 1)`; safe to call from many threads at once.
    #[inline]
    pub fn next_unit(&self) -> f64 {
        unit_at(self.seed, self.counter.fetch_add(1, Ordering::Relaxed))
    }
}

/// The same stream for one owner: draws 0, 1, 2, … of a seed.
#[derive(Debug, Clone)]
pub(crate) struct SeqDraws {
    seed: u64,
    n: u64,
}

impl SeqDraws {
    pub(crate) fn new(seed: u64) -> Self {
        SeqDraws { seed, n: 0 }
    }

    #[inline]
    pub(crate) fn next_unit(&mut self) -> f64 {
        let u = unit_at(self.seed, self.n);
        self.n = self.n.wrapping_add(1);
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_n_is_the_nth_output_of_one_splitmix64_stream() {
        let mut g = SplitMix64::seed_from_u64(7);
        for n in 0..100 {
            assert_eq!(unit_at(7, n), to_unit(g.next_u64()), "draw {n}");
        }
    }

    #[test]
    fn shared_and_sequential_sources_agree_and_stay_in_range() {
        let shared = UnitDraws::new(42);
        let mut seq = SeqDraws::new(42);
        let xs: Vec<f64> = (0..10_000).map(|_| shared.next_unit()).collect();
        let ys: Vec<f64> = (0..10_000).map(|_| seq.next_unit()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|u| (0.0..1.0).contains(u)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((0.49..0.51).contains(&mean), "{mean}");
    }

    #[test]
    fn one_seed_gives_one_stream() {
        let (a, b) = (UnitDraws::new(7), UnitDraws::new(7));
        let u = a.next_unit();
        assert!((0.0..1.0).contains(&u));
        assert_eq!(u, b.next_unit());
        let draws = UnitDraws::new(1);
        assert_ne!(draws.next_unit(), draws.next_unit());
    }

    #[test]
    fn unit_conversion_spans_the_interval() {
        assert_eq!(to_unit(0), 0.0);
        assert!(to_unit(u64::MAX) < 1.0);
        assert!(to_unit(u64::MAX) > 0.999_999_999);
    }
}
