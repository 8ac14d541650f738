//! Randomised families: AWS's full, equal and decorrelated jitter, and
//! client-go's jitter (`FactorJitter`).

use std::time::Duration;

use super::{Step, between, grown, mul_f64};
use crate::ConfigError;
use crate::duration::saturating_nanos;
use crate::error::finite_at_least;

/// AWS "full jitter": `U(0, v)` with `v = min(cap, base·2^n)`.
///
/// The mean of delay `n` is `v/2`.
///
/// ```
/// use keyed_backoff::strategy::{FullJitter, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(FullJitter::new(Duration::from_millis(5), Duration::from_secs(2)))?.seed(1);
/// assert!(s.iter().take(20).all(|d| d < Duration::from_secs(2)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FullJitter(Envelope);

/// AWS "equal jitter": `v/2 + U(0, v/2)` with `v = min(cap, base·2^n)`.
///
/// The mean of delay `n` is `3v/4`.
///
/// ```
/// use keyed_backoff::strategy::{EqualJitter, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(EqualJitter::new(Duration::from_millis(8), Duration::from_secs(2)))?.seed(1);
/// let first = s.iter().next().unwrap();
/// assert!(first >= Duration::from_millis(4) && first < Duration::from_millis(8));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct EqualJitter(Envelope);

/// The exponential envelope `min(cap, base·2^n)` both AWS jitters draw under.
#[derive(Debug, Clone)]
struct Envelope {
    base: Duration,
    cap: Duration,
}

impl Envelope {
    fn at(&self, n: u32) -> Duration {
        grown(self.base, 2.0, n, self.cap)
    }
}

impl FullJitter {
    /// Full jitter under the envelope `min(cap, base·2^n)`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        FullJitter(Envelope { base, cap })
    }
}

impl EqualJitter {
    /// Equal jitter under the envelope `min(cap, base·2^n)`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        EqualJitter(Envelope { base, cap })
    }
}

impl Step for FullJitter {
    fn max_delay(&self) -> Duration {
        self.0.cap
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        Some(mul_f64(self.0.at(n), unit()))
    }
}

impl Step for EqualJitter {
    fn max_delay(&self) -> Duration {
        self.0.cap
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let v = self.0.at(n);
        let half = v / 2;
        Some(half + mul_f64(v - half, unit()))
    }
}

/// AWS "decorrelated jitter": `sleep = min(cap, U(base, 3·sleep))`, with
/// `sleep` starting at `base`.
///
/// Exactly as published, the cap is applied after the draw, so in steady
/// state about 27 % of delays sit exactly at `cap` (every draw above it is
/// clipped). [`Decorrelated::bounded`] draws `U(base, min(cap, 3·sleep))`
/// instead and has no such spike.
///
/// Defaults: AWS's form (not bounded).
///
/// ```
/// use keyed_backoff::strategy::{Decorrelated, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Decorrelated::new(Duration::from_millis(5), Duration::from_secs(2)))?.seed(4);
/// assert!(s.iter().take(50).all(|d| d >= Duration::from_millis(5) && d <= Duration::from_secs(2)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Decorrelated {
    base: Duration,
    cap: Duration,
    bounded: bool,
}

impl Decorrelated {
    /// AWS's decorrelated jitter between `base` and `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Decorrelated {
            base,
            cap,
            bounded: false,
        }
    }

    /// The bounded variant: `U(base, min(cap, 3·sleep))`, so the cap bounds
    /// the draw instead of clipping it.
    ///
    /// ```
    /// use keyed_backoff::strategy::{Decorrelated, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Decorrelated::new(Duration::from_millis(5), Duration::from_secs(2)).bounded())?.seed(1);
    /// assert!(s.iter().take(100).all(|d| d <= Duration::from_secs(2)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn bounded(mut self) -> Self {
        self.bounded = true;
        self
    }
}

impl Step for Decorrelated {
    fn max_delay(&self) -> Duration {
        self.cap
    }
    fn delay(
        &self,
        _: u32,
        previous: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let upper = previous.unwrap_or(self.base).saturating_mul(3);
        Some(if self.bounded {
            between(self.base, upper.min(self.cap), unit()).min(self.cap)
        } else {
            between(self.base, upper, unit()).min(self.cap)
        })
    }
}

/// client-go's `flowcontrol.Backoff` rule as a strategy: the first delay is
/// `initial + U[0,1)·jitter·initial` (uncapped, as in client-go), each next
/// one `min(cap, 2·previous + U[0,1)·jitter·previous)`: the jitter is drawn
/// from the previous delay and added before the cap. Integer nanoseconds,
/// truncated like Go's conversion, saturating.
///
/// This is the keyed manager's default rule.
///
/// Defaults: `jitter` 0 (none). `jitter` must be finite and `>= 0`.
///
/// ```
/// use keyed_backoff::strategy::{FactorJitter, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(FactorJitter::new(Duration::from_secs(10), Duration::from_secs(300)))?;
/// let secs: Vec<u64> = s.iter().take(7).map(|d| d.as_secs()).collect();
/// assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300]);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FactorJitter {
    initial_ns: u64,
    cap_ns: u64,
    jitter: f64,
}

impl FactorJitter {
    /// client-go's curve from `initial` doubling to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        FactorJitter {
            initial_ns: saturating_nanos(initial),
            cap_ns: saturating_nanos(max),
            jitter: 0.0,
        }
    }

    /// client-go's `maxJitterFactor`: each delay adds up to `jitter` times
    /// the delay it is drawn from.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// The jitter drawn from `delay_ns`, in nanoseconds.
    #[inline]
    fn jitter_ns(&self, delay_ns: u64, unit: &mut dyn FnMut() -> f64) -> u64 {
        if self.jitter == 0.0 {
            return 0;
        }
        // `as` truncates toward zero like Go's conversion and saturates.
        (unit() * self.jitter * delay_ns as f64) as u64
    }

    /// The first delay, in nanoseconds.
    #[inline]
    pub(crate) fn first_ns(&self, unit: &mut dyn FnMut() -> f64) -> u64 {
        self.initial_ns
            .saturating_add(self.jitter_ns(self.initial_ns, unit))
    }

    /// The delay after `previous_ns`, in nanoseconds.
    #[inline]
    pub(crate) fn following_ns(&self, previous_ns: u64, unit: &mut dyn FnMut() -> f64) -> u64 {
        previous_ns
            .saturating_mul(2)
            .saturating_add(self.jitter_ns(previous_ns, unit))
            .min(self.cap_ns)
    }
}

impl Step for FactorJitter {
    fn max_delay(&self) -> Duration {
        // The first delay is `initial` plus its jitter, uncapped.
        let first_max = self
            .initial_ns
            .saturating_add((self.jitter * self.initial_ns as f64) as u64);
        Duration::from_nanos(self.cap_ns.max(first_max))
    }
    fn delay(
        &self,
        _: u32,
        previous: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let ns = match previous {
            None => self.first_ns(unit),
            Some(p) => self.following_ns(saturating_nanos(p), unit),
        };
        Some(Duration::from_nanos(ns))
    }
    fn validate(&self) -> Result<(), ConfigError> {
        finite_at_least("jitter", self.jitter, 0.0).map(drop)
    }
}
