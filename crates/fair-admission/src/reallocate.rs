//! Dividing the server's seats between levels that lend and borrow them.

use std::time::Duration;

/// Splits `required` seats between levels given as (lower bound, upper
/// bound, target): each gets `clamp(f · target, lower, upper)` for the one
/// fair fraction `f` at which the shares add up to `required`, as
/// Kubernetes divides its server's seats. `None` for every level if no
/// fraction reaches `required` (no level has a target above its lower
/// bound).
pub(crate) fn allocate(required: f64, levels: &[(f64, f64, f64)]) -> Vec<Option<f64>> {
    let total = |f: f64| -> f64 {
        levels
            .iter()
            .map(|&(lower, upper, target)| (f * target).clamp(lower, upper))
            .sum()
    };
    let reachable: f64 = levels
        .iter()
        .map(|&(lower, upper, target)| if target > 0.0 { upper } else { lower })
        .sum();
    if reachable < required {
        return vec![None; levels.len()];
    }
    // The total grows with f: find a fraction at or above the answer, then
    // halve the interval until it is exact to far below a seat.
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    while total(high) < required && high < 1e18 {
        low = high;
        high *= 2.0;
    }
    for _ in 0..100 {
        let mid = (low + high) / 2.0;
        if total(mid) < required {
            low = mid;
        } else {
            high = mid;
        }
    }
    levels
        .iter()
        .map(|&(lower, upper, target)| Some((high * target).clamp(lower, upper)))
        .collect()
}

/// A time-weighted record of one value: its average and standard
/// deviation since the last [`take`](Integrator::take).
#[derive(Debug, Clone, Default)]
pub(crate) struct Integrator {
    pub(crate) value: f64,
    pub(crate) since: Duration,
    /// ∫ value dt, ∫ value² dt and ∫ dt, in seconds.
    pub(crate) sum: f64,
    pub(crate) sum_of_squares: f64,
    pub(crate) span: f64,
}

impl Integrator {
    /// The value changes to `value` at `now`.
    pub(crate) fn set(&mut self, now: Duration, value: f64) {
        self.accrue(now);
        self.value = value;
    }

    fn accrue(&mut self, now: Duration) {
        let dt = now.saturating_sub(self.since).as_secs_f64();
        self.sum += self.value * dt;
        self.sum_of_squares += self.value * self.value * dt;
        self.span += dt;
        self.since = self.since.max(now);
    }

    /// The average and standard deviation up to `now`, starting afresh.
    pub(crate) fn take(&mut self, now: Duration) -> (f64, f64) {
        self.accrue(now);
        let result = if self.span > 0.0 {
            let average = self.sum / self.span;
            let variance = self.sum_of_squares / self.span - average * average;
            (average, variance.max(0.0).sqrt())
        } else {
            (self.value, 0.0)
        };
        (self.sum, self.sum_of_squares, self.span) = (0.0, 0.0, 0.0);
        result
    }
}
