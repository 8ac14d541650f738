//! Four published backoff schemes written as [`Step`]s: Ethernet's (IEEE
//! 802.3), Hadoop's, Google Cloud's guidance and cenkalti/backoff's (Go).
//!
//! They are not part of the library: each is a formula a user writes in a
//! few lines over the public [`Step`] trait, validated by
//! [`Strategy::new`](keyed_backoff::strategy::Strategy::new) like the
//! library's own.

use std::time::Duration;

use keyed_backoff::ConfigError;
use keyed_backoff::strategy::Step;

/// Ethernet's truncated binary exponential backoff (IEEE 802.3).
///
/// After the `k`-th collision (`k = n + 1`) wait `r` slot times with `r`
/// uniform in `[0, 2^min(k, 10) − 1]`. After 16 attempts the frame is
/// dropped: the iterator yields 15 delays, then `None`.
#[derive(Debug, Clone)]
pub struct Ethernet {
    slot: Duration,
}

impl Ethernet {
    /// Backoff in units of `slot`.
    pub fn new(slot: Duration) -> Self {
        Ethernet { slot }
    }
}

impl Step for Ethernet {
    fn max_delay(&self) -> Duration {
        self.slot.saturating_mul(1023)
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let collision = n.saturating_add(1);
        if collision >= 16 {
            return None;
        }
        let slots = 1u32 << collision.min(10);
        let r = ((unit() * f64::from(slots)) as u32).min(slots - 1);
        Some(self.slot.saturating_mul(r))
    }
}

/// Hadoop's `RetryPolicies.exponentialBackoffRetry`: retry `n` (0-based)
/// waits `min(cap, sleep·2^(n+1)) · U[0.5, 1.5)`, for at most `max_retries`.
///
/// Defaults: no cap.
#[derive(Debug, Clone)]
pub struct Hadoop {
    sleep: Duration,
    max_retries: u32,
    cap: Duration,
}

impl Hadoop {
    /// Base `sleep`, at most `max_retries` retries.
    pub fn new(sleep: Duration, max_retries: u32) -> Self {
        Hadoop {
            sleep,
            max_retries,
            cap: Duration::MAX,
        }
    }

    /// Largest delay, applied before the random draw.
    pub fn max(mut self, max: Duration) -> Self {
        self.cap = max;
        self
    }
}

impl Step for Hadoop {
    fn max_delay(&self) -> Duration {
        mul_f64(self.cap, 1.5)
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        (n < self.max_retries).then(|| {
            mul_f64(
                grown(self.sleep, 2.0, n.saturating_add(1), self.cap),
                0.5 + unit(),
            )
        })
    }
}

/// Google Cloud's truncated exponential backoff: retry `n` (0-based) waits
/// `min(max_backoff, 2^n s + U[0, 1000 ms])`.
///
/// Defaults: `max_backoff` 32 s.
#[derive(Debug, Clone)]
pub struct GoogleCloud {
    max_backoff: Duration,
}

impl Default for GoogleCloud {
    fn default() -> Self {
        GoogleCloud {
            max_backoff: Duration::from_secs(32),
        }
    }
}

impl GoogleCloud {
    /// The documented scheme with a 32 s maximum.
    pub fn new() -> Self {
        Self::default()
    }

    /// Largest delay (Google suggests 32 or 64 s).
    pub fn max_backoff(mut self, d: Duration) -> Self {
        self.max_backoff = d;
        self
    }
}

impl Step for GoogleCloud {
    fn max_delay(&self) -> Duration {
        self.max_backoff
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        Some({
            let exp = grown(Duration::from_secs(1), 2.0, n, Duration::MAX);
            exp.saturating_add(between(Duration::ZERO, Duration::from_millis(1000), unit()))
                .min(self.max_backoff)
        })
    }
}

/// cenkalti/backoff's `ExponentialBackOff` (Go).
///
/// The interval starts at `initial` and is multiplied by `multiplier` after
/// each delay, up to `max_interval`; each delay is the interval randomised
/// to `interval·U[1−r, 1+r]` (the cap applies to the interval, not to the
/// randomised value). It gives up once the elapsed time plus the next delay
/// would exceed `max_elapsed`. cenkalti measures elapsed wall time; a
/// stateless step cannot, so here elapsed time is the sum of the
/// un-randomised intervals before this delay (the retry drivers also check
/// real elapsed time on their own clock).
///
/// Defaults (cenkalti's): initial 500 ms, randomization 0.5, multiplier 1.5,
/// max interval 60 s, max elapsed 15 min (`Duration::ZERO`: never stop).
#[derive(Debug, Clone)]
pub struct Cenkalti {
    initial: Duration,
    randomization: f64,
    multiplier: f64,
    max_interval: Duration,
    max_elapsed: Duration,
}

impl Default for Cenkalti {
    fn default() -> Self {
        Cenkalti {
            initial: Duration::from_millis(500),
            randomization: 0.5,
            multiplier: 1.5,
            max_interval: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(15 * 60),
        }
    }
}

impl Cenkalti {
    /// cenkalti's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// First interval.
    pub fn initial(mut self, d: Duration) -> Self {
        self.initial = d;
        self
    }

    /// Randomization factor `r`, in `[0, 1]`.
    pub fn randomization(mut self, r: f64) -> Self {
        self.randomization = r;
        self
    }

    /// Interval multiplier, `>= 1`.
    pub fn multiplier(mut self, m: f64) -> Self {
        self.multiplier = m;
        self
    }

    /// Cap on the interval.
    pub fn max_interval(mut self, d: Duration) -> Self {
        self.max_interval = d;
        self
    }

    /// Stop once this much time would be spent waiting; `Duration::ZERO`
    /// never stops.
    pub fn max_elapsed(mut self, d: Duration) -> Self {
        self.max_elapsed = d;
        self
    }

    /// The interval after `interval`: multiplied, or `max_interval` once
    /// the product would pass it.
    fn grow(&self, interval: Duration) -> Duration {
        if interval.as_secs_f64() >= self.max_interval.as_secs_f64() / self.multiplier {
            self.max_interval
        } else {
            Duration::from_nanos((interval.as_nanos() as f64 * self.multiplier) as u64)
        }
    }

    /// The un-randomised interval of delay `n` (0-based) and the sum of the
    /// `n` intervals before it, saturating. Once the interval stops changing
    /// (at `max_interval`, or with a multiplier of 1) the rest of the sum is
    /// one multiplication, so the cost is bounded by the growth steps, not
    /// by `n`.
    fn interval_and_elapsed(&self, n: u32) -> (Duration, Duration) {
        let (mut interval, mut elapsed) = (self.initial, Duration::ZERO);
        for k in 0..n {
            let next = self.grow(interval);
            if next == interval {
                return (
                    interval,
                    elapsed.saturating_add(interval.saturating_mul(n - k)),
                );
            }
            elapsed = elapsed.saturating_add(interval);
            interval = next;
        }
        (interval, elapsed)
    }
}

impl Step for Cenkalti {
    fn max_delay(&self) -> Duration {
        // The first interval may exceed max_interval; draws reach 1 ns past
        // the randomised upper bound.
        mul_f64(
            self.initial.max(self.max_interval),
            1.0 + self.randomization,
        )
        .saturating_add(Duration::from_nanos(1))
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let (interval, elapsed) = self.interval_and_elapsed(n);
        let r = self.randomization;
        let delay = if r == 0.0 {
            interval
        } else {
            let i = interval.as_nanos() as f64;
            let (lo, hi) = (i - r * i, i + r * i);
            // cenkalti draws from [lo, hi + 1 ns).
            Duration::from_nanos((lo + unit() * (hi - lo + 1.0)) as u64)
        };
        if !self.max_elapsed.is_zero() && elapsed.saturating_add(delay) > self.max_elapsed {
            return None;
        }
        Some(delay)
    }
    fn validate(&self) -> Result<(), ConfigError> {
        let r = finite_at_least("randomization", self.randomization, 0.0)?;
        if r > 1.0 {
            return Err(ConfigError::new(
                "randomization",
                "a finite number in [0, 1]",
                r,
            ));
        }
        finite_at_least("multiplier", self.multiplier, 1.0).map(drop)
    }
}

/// `d · k`, saturating; `k` must be finite and non-negative.
fn mul_f64(d: Duration, k: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * k).unwrap_or(Duration::MAX)
}

/// `min(cap, base · multiplier^n)`, saturating.
fn grown(base: Duration, multiplier: f64, n: u32, cap: Duration) -> Duration {
    let exp = i32::try_from(n).unwrap_or(i32::MAX);
    mul_f64(base, multiplier.powi(exp)).min(cap)
}

/// A uniform draw in `[lo, hi)` (or `lo` when `hi <= lo`).
fn between(lo: Duration, hi: Duration, u: f64) -> Duration {
    if hi <= lo {
        lo
    } else {
        lo + mul_f64(hi - lo, u)
    }
}

/// `value` if it is finite and at least `min`; otherwise the error naming
/// `field`, the range and the value.
fn finite_at_least(field: &'static str, value: f64, min: f64) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= min {
        Ok(value)
    } else {
        let allowed = format!("a finite number >= {min}");
        Err(ConfigError::new(field, allowed, value))
    }
}
