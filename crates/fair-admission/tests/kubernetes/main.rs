//! Kubernetes' own API Priority and Fairness tests (`k8s.io/apiserver`,
//! `pkg/util/flowcontrol`), ported onto this crate's public API. Each test
//! names the Go test it ports and where it is; each runs on a virtual
//! clock. Where a port deliberately differs, it says so and why.

mod borrowing;
mod conc_alloc;
mod dropped_requests;
mod max_seats;
mod queueset;
mod scenario;
mod shuffle_sharding;
mod width;

/// A small seeded generator (SplitMix64) for the randomized tests: Go's
/// `math/rand` stream is not reproduced, only its distributions.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A uniformly random `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, as Go's `Float64`.
    pub fn float64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[0, n)`, as Go's `Intn` (`n` > 0).
    pub fn intn(&mut self, n: usize) -> usize {
        (self.float64() * n as f64) as usize
    }
}
