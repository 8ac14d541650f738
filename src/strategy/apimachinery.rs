//! Kubernetes apimachinery's `wait.Backoff`.

use std::time::Duration;

use super::{Step, mul_f64};
use crate::ConfigError;
use crate::error::finite_at_least;

/// apimachinery's `wait.Backoff` {Duration, Factor, Jitter, Steps, Cap} with
/// its `Step` semantics. Its `Factor`, the growth per step, is
/// [`multiplier`](Self::multiplier) here.
///
/// Each step returns the *current* duration (jittered to
/// `d + U[0,1)·jitter·d` when `jitter > 0`), then grows the current duration
/// by `multiplier`; reaching `cap` sets it to `cap` and zeroes the remaining
/// steps. Once `steps` reaches zero the duration stops growing and every
/// further step returns it (jittered). Jitter never feeds back into growth.
/// It never gives up: callers bound the attempts themselves.
///
/// Defaults: multiplier 1, jitter 0, steps 1, no cap (`Duration::ZERO` means no
/// cap, as in Go).
///
/// ```
/// use keyed_backoff::strategy::{WaitBackoff, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(WaitBackoff::new(Duration::from_millis(10)).multiplier(5.0).steps(4))?;
/// let ms: Vec<u128> = s.iter().take(6).map(|d| d.as_millis()).collect();
/// assert_eq!(ms, [10, 50, 250, 1250, 6250, 6250]);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct WaitBackoff {
    duration: Duration,
    multiplier: f64,
    jitter: f64,
    steps: u32,
    cap: Duration,
}

impl WaitBackoff {
    /// Starts at `duration`.
    pub fn new(duration: Duration) -> Self {
        WaitBackoff {
            duration,
            multiplier: 1.0,
            jitter: 0.0,
            steps: 1,
            cap: Duration::ZERO,
        }
    }

    /// Growth per step, apimachinery's `Factor` (0 means no growth).
    pub fn multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// Each returned value is `d + U[0,1)·jitter·d`.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Steps during which the duration grows.
    pub fn steps(mut self, steps: u32) -> Self {
        self.steps = steps;
        self
    }

    /// Largest grown duration (apimachinery's `Cap`); reaching it ends
    /// growth (`Duration::ZERO`: none).
    pub fn max(mut self, max: Duration) -> Self {
        self.cap = max;
        self
    }

    /// The un-jittered duration and remaining steps after `n` calls to Step.
    fn state_after(&self, n: u32) -> (Duration, u32) {
        let (mut d, mut steps) = (self.duration, self.steps);
        for _ in 0..n {
            if steps < 1 {
                break; // no further change
            }
            steps -= 1;
            if self.multiplier != 0.0 {
                // Go: time.Duration(float64(d) * Factor), truncated to ns.
                let next = Duration::from_nanos((d.as_nanos() as f64 * self.multiplier) as u64);
                if next == d {
                    break; // a fixed point: no later step changes it either
                }
                d = next;
                if !self.cap.is_zero() && d > self.cap {
                    d = self.cap;
                    steps = 0;
                }
            }
        }
        (d, steps)
    }
}

impl Step for WaitBackoff {
    fn max_delay(&self) -> Duration {
        if self.cap.is_zero() {
            Duration::MAX
        } else {
            // The first duration is returned as given, even above the cap.
            let largest = self.cap.max(self.duration);
            largest.saturating_add(mul_f64(largest, self.jitter))
        }
    }
    fn delay(
        &self,
        n: u32,
        _: Option<Duration>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Option<Duration> {
        let (d, _) = self.state_after(n);
        Some(if self.jitter > 0.0 {
            d.saturating_add(mul_f64(d, unit() * self.jitter))
        } else {
            d
        })
    }
    fn validate(&self) -> Result<(), ConfigError> {
        finite_at_least("multiplier", self.multiplier, 0.0)?;
        finite_at_least("jitter", self.jitter, 0.0).map(drop)
    }
}
