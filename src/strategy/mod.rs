//! Delay formulas, as validated strategies that make fresh iterators of
//! [`Duration`].
//!
//! Every strategy implements [`Step`]: given `n`, the number of delays
//! already produced (0 for the first), the previous delay and a source of
//! uniform draws in `[0, 1)`, it returns the next delay or `None` to give up.
//! The same `Step` drives [`Strategy::iter`] (an iterator, for retry loops) and the
//! keyed manager ([`Backoff::with_strategy`](crate::Backoff::with_strategy)).
//!
//! Each strategy type holds only its formula: construct it with its required
//! values and chain setters (every default is written in the setter's doc).
//! [`Strategy::new`] validates it into a [`Strategy`], which adds a seed and
//! an attempt limit and makes iterators.
//!
//! | strategy | delay `n` (0-based), `v = min(cap, base·2^n)` | source |
//! |---|---|---|
//! | [`Constant`] | `d` | — |
//! | [`Linear`] | `min(cap, initial + n·step)` | — |
//! | [`Exponential`] | `min(cap, base·multiplier^n)` | — |
//! | [`FullJitter`] | `U(0, v)` | AWS, "Exponential Backoff and Jitter" (2015) |
//! | [`EqualJitter`] | `v/2 + U(0, v/2)` | same |
//! | [`Decorrelated`] | `min(cap, U(base, 3·prev))`, `prev₀ = base` | same |
//! | [`Decorrelated::bounded`] | `U(base, min(cap, 3·prev))` | this crate |
//! | [`FactorJitter`] | `initial + U·j·initial`, then `min(cap, 2·prev + U·j·prev)` (`j`: jitter) | client-go `flowcontrol.Backoff` |
//! | [`WaitBackoff`] | apimachinery `wait.Backoff.Step` | k8s apimachinery |
//!
//! Any other formula is a [`Step`] of your own: the workspace's
//! `published_schemes` example writes Ethernet's, Hadoop's, Google Cloud's
//! and cenkalti/backoff's schemes that way.
//!
//! ```
//! use keyed_backoff::strategy::{Exponential, Strategy};
//! use std::time::Duration;
//!
//! let exponential = Exponential::new(Duration::from_millis(100), 2.0).max(Duration::from_secs(1));
//! let s = Strategy::new(exponential)?.max_attempts(6);
//! let ms: Vec<u128> = s.iter().map(|d| d.as_millis()).collect();
//! assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
//! # Ok::<(), keyed_backoff::ConfigError>(())
//! ```

mod apimachinery;
mod basic;
mod jitter;

use std::fmt::Debug;
use std::time::Duration;

pub use apimachinery::WaitBackoff;
pub use basic::{Constant, Exponential, Linear};
pub use jitter::{Decorrelated, EqualJitter, FactorJitter, FullJitter};

use crate::ConfigError;
use crate::draws::SeqDraws;

/// One step of a delay formula.
///
/// `n` is the number of delays already produced (0 for the first),
/// `previous` the last delay produced (`None` before the first), and `unit`
/// yields independent uniform draws in `[0, 1)`. Returns the next delay, or
/// `None` to give up.
///
/// ```
/// use keyed_backoff::strategy::{Constant, Step};
/// use std::time::Duration;
/// let c = Constant::new(Duration::from_secs(1));
/// assert_eq!(c.delay(0, None, &mut || 0.5), Some(Duration::from_secs(1)));
/// ```
pub trait Step: Debug + Send + Sync + 'static {
    /// The delay after `n` delays, the last of which was `previous`.
    ///
    /// ```
    /// use keyed_backoff::strategy::{Linear, Step};
    /// use std::time::Duration;
    /// let l = Linear::new(Duration::from_secs(1), Duration::from_secs(2));
    /// assert_eq!(l.delay(2, None, &mut || 0.0), Some(Duration::from_secs(5)));
    /// ```
    fn delay(
        &self,
        n: u32,
        previous: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration>;

    /// Checks every parameter; [`Strategy::new`] calls it. Default: nothing to
    /// check (for strategies whose parameters are all durations and counts).
    ///
    /// ```
    /// use keyed_backoff::strategy::{Exponential, Step};
    /// use std::time::Duration;
    /// assert!(Exponential::new(Duration::from_secs(1), f64::NAN).validate().is_err());
    /// ```
    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    /// The largest delay this strategy can produce; a retry loop caps a
    /// server's `retry_after` at it, and the keyed manager's default expiry
    /// is twice it. Default [`Duration::MAX`] (unbounded).
    ///
    /// ```
    /// use keyed_backoff::strategy::{FullJitter, Step};
    /// use std::time::Duration;
    /// assert_eq!(FullJitter::new(Duration::from_millis(5), Duration::from_secs(2)).max_delay(), Duration::from_secs(2));
    /// ```
    fn max_delay(&self) -> Duration {
        Duration::MAX
    }
}

/// A validated strategy: a [`Step`] formula with the two settings every
/// formula shares, a seed for its random draws and an attempt limit. Makes
/// fresh iterators of delays, and is itself a [`Step`] (the limit applied),
/// so it can drive the keyed manager.
///
/// ```
/// use keyed_backoff::strategy::{Constant, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Constant::new(Duration::from_millis(5)))?.max_attempts(2);
/// assert_eq!(s.iter().count(), 2);
/// assert_eq!(s.iter().count(), 2); // each iterator starts afresh
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Strategy<S> {
    step: S,
    seed: Option<u64>,
    max_attempts: Option<u32>,
}

impl<S: Step + Clone> Strategy<S> {
    /// Validates `step` (see [`Step::validate`]). Defaults: draws seeded
    /// randomly per iterator, no attempt limit beyond the formula's own.
    ///
    /// ```
    /// use keyed_backoff::strategy::{Exponential, Strategy};
    /// use std::time::Duration;
    /// let err = Strategy::new(Exponential::new(Duration::from_secs(1), 0.5)).unwrap_err();
    /// assert_eq!(err.field(), "multiplier");
    /// ```
    pub fn new(step: S) -> Result<Self, ConfigError> {
        step.validate()?;
        Ok(Strategy {
            step,
            seed: None,
            max_attempts: None,
        })
    }

    /// Seed for the random draws, for reproducible sequences: every
    /// iterator then gives the same delays.
    ///
    /// ```
    /// use keyed_backoff::strategy::{FullJitter, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(FullJitter::new(Duration::from_millis(5), Duration::from_secs(1)))?.seed(9);
    /// assert_eq!(s.iter().take(5).collect::<Vec<_>>(), s.iter().take(5).collect::<Vec<_>>());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Give up after this many delays (without it, only when the formula
    /// itself gives up; most never do).
    ///
    /// ```
    /// use keyed_backoff::strategy::{Linear, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Linear::new(Duration::from_secs(1), Duration::from_secs(1)))?.max_attempts(3);
    /// assert_eq!(s.iter().count(), 3);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// A fresh iterator of delays; `None` means give up. Each iterator
    /// draws from the strategy's seed (a random one without it).
    ///
    /// ```
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::from_secs(1)))?;
    /// assert_eq!(s.iter().take(3).count(), 3);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = Duration> + Clone + Debug + Send + Sync + use<S> {
        let rng = SeqDraws::new(self.seed.unwrap_or_else(rand::random));
        Delays {
            strategy: self.clone(),
            n: 0,
            previous: None,
            rng,
        }
    }

    /// The formula itself.
    pub fn step(&self) -> &S {
        &self.step
    }

    /// The seed set with [`seed`](Self::seed), if any.
    pub(crate) fn seed_value(&self) -> Option<u64> {
        self.seed
    }
}

impl<S: Step + Clone> Step for Strategy<S> {
    fn delay(
        &self,
        n: u32,
        previous: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        if within(n, self.max_attempts) {
            self.step.delay(n, previous, unit)
        } else {
            None
        }
    }
    fn validate(&self) -> Result<(), ConfigError> {
        self.step.validate()
    }
    fn max_delay(&self) -> Duration {
        self.step.max_delay()
    }
}

/// The delays of one strategy, in order.
#[derive(Debug, Clone)]
struct Delays<S> {
    strategy: Strategy<S>,
    n: u32,
    previous: Option<Duration>,
    rng: SeqDraws,
}

impl<S: Step + Clone> Iterator for Delays<S> {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let rng = &mut self.rng;
        let d = self
            .strategy
            .delay(self.n, self.previous, &mut || rng.next_unit())?;
        self.n = self.n.saturating_add(1);
        self.previous = Some(d);
        Some(d)
    }
}

/// `d · k`, saturating; `k` must be finite and non-negative.
#[inline]
pub(crate) fn mul_f64(d: Duration, k: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * k).unwrap_or(Duration::MAX)
}

/// `min(cap, base · multiplier^n)`, saturating.
#[inline]
pub(crate) fn grown(base: Duration, multiplier: f64, n: u32, cap: Duration) -> Duration {
    let exp = i32::try_from(n).unwrap_or(i32::MAX);
    mul_f64(base, multiplier.powi(exp)).min(cap)
}

/// Whether delay number `n` (0-based) is allowed under `max_attempts`.
#[inline]
pub(crate) fn within(n: u32, max_attempts: Option<u32>) -> bool {
    max_attempts.is_none_or(|m| n < m)
}

/// A uniform draw in `[lo, hi)` (or `lo` when `hi <= lo`).
#[inline]
pub(crate) fn between(lo: Duration, hi: Duration, u: f64) -> Duration {
    if hi <= lo {
        lo
    } else {
        lo + mul_f64(hi - lo, u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_saturate() {
        assert_eq!(mul_f64(Duration::MAX, 2.0), Duration::MAX);
        assert_eq!(
            grown(
                Duration::from_secs(1),
                2.0,
                u32::MAX,
                Duration::from_secs(9)
            ),
            Duration::from_secs(9)
        );
        assert_eq!(
            between(Duration::from_secs(3), Duration::from_secs(1), 0.9),
            Duration::from_secs(3)
        );
    }
}
