//! Deterministic families: constant, linear, exponential.

use std::time::Duration;

use super::{Step, grown};
use crate::ConfigError;
use crate::error::finite_at_least;

/// The same delay every time: `d`.
///
/// ```
/// use keyed_backoff::strategy::{Constant, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Constant::new(Duration::from_secs(2)))?.max_attempts(3);
/// assert_eq!(s.iter().collect::<Vec<_>>(), vec![Duration::from_secs(2); 3]);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Constant {
    delay: Duration,
}

impl Constant {
    /// A constant delay `d`.
    pub fn new(d: Duration) -> Self {
        Constant { delay: d }
    }
}

impl Step for Constant {
    fn max_delay(&self) -> Duration {
        self.delay
    }
    fn delay(&self, _: u32, _: Option<Duration>, _: &mut dyn FnMut() -> f64) -> Option<Duration> {
        Some(self.delay)
    }
}

/// Grows by a fixed step: `min(cap, initial + n·step)`.
///
/// Defaults: no cap.
///
/// ```
/// use keyed_backoff::strategy::{Linear, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Linear::new(Duration::from_secs(1), Duration::from_secs(1)).max(Duration::from_secs(3)))?;
/// let secs: Vec<u64> = s.iter().take(5).map(|d| d.as_secs()).collect();
/// assert_eq!(secs, [1, 2, 3, 3, 3]);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Linear {
    initial: Duration,
    step: Duration,
    cap: Duration,
}

impl Linear {
    /// Starts at `initial`, adds `step` each time.
    pub fn new(initial: Duration, step: Duration) -> Self {
        Linear {
            initial,
            step,
            cap: Duration::MAX,
        }
    }

    /// Largest delay.
    pub fn max(mut self, max: Duration) -> Self {
        self.cap = max;
        self
    }
}

impl Step for Linear {
    fn max_delay(&self) -> Duration {
        self.cap
    }
    fn delay(&self, n: u32, _: Option<Duration>, _: &mut dyn FnMut() -> f64) -> Option<Duration> {
        Some({
            self.initial
                .saturating_add(self.step.saturating_mul(n))
                .min(self.cap)
        })
    }
}

/// Multiplies by a constant: `min(cap, base·multiplier^n)`.
///
/// Defaults: no cap. `multiplier` must be finite and `>= 1`.
///
/// ```
/// use keyed_backoff::strategy::{Exponential, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Exponential::new(Duration::from_millis(5), 2.0).max(Duration::from_millis(2000)))?;
/// let ms: Vec<u128> = s.iter().take(4).map(|d| d.as_millis()).collect();
/// assert_eq!(ms, [5, 10, 20, 40]);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Exponential {
    base: Duration,
    multiplier: f64,
    cap: Duration,
}

impl Exponential {
    /// Starts at `base`, multiplies by `multiplier` each time.
    pub fn new(base: Duration, multiplier: f64) -> Self {
        Exponential {
            base,
            multiplier,
            cap: Duration::MAX,
        }
    }

    /// Largest delay.
    pub fn max(mut self, max: Duration) -> Self {
        self.cap = max;
        self
    }
}

impl Step for Exponential {
    fn max_delay(&self) -> Duration {
        self.cap
    }
    fn delay(&self, n: u32, _: Option<Duration>, _: &mut dyn FnMut() -> f64) -> Option<Duration> {
        Some(grown(self.base, self.multiplier, n, self.cap))
    }
    fn validate(&self) -> Result<(), ConfigError> {
        finite_at_least("multiplier", self.multiplier, 1.0).map(drop)
    }
}
