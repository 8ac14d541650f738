//! A level's seat demand over time: its time-weighted statistics and the
//! smoothed figure borrowing works from.

use std::time::Duration;

/// Time-weighted statistics of a value that changes at known instants (a
/// level's seat demand: seats in use plus seats waiting), from the last
/// [`reset`](Self::reset) to the latest call: Kubernetes' integrator.
///
/// Times are offsets on the caller's clock (any origin, never going back;
/// an earlier time counts as the latest one). It starts at 0.
///
/// ```
/// use fair_admission::DemandIntegrator;
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// let mut demand = DemandIntegrator::new(s(0));
/// demand.set(s(0), 4.0);
/// demand.set(s(5), 8.0);
/// let r = demand.reset(s(10)); // 4 for 5 s, then 8 for 5 s
/// assert_eq!((r.average, r.deviation, r.min, r.max), (6.0, 2.0, 0.0, 8.0));
/// assert_eq!(r.duration, s(10));
/// // After a reset the extremes restart at the value held.
/// assert_eq!(demand.reset(s(20)).min, 8.0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DemandIntegrator {
    last: Duration,
    value: f64,
    elapsed: Duration,
    /// ∫ value dt and ∫ value² dt, in seconds.
    integral: f64,
    integral_of_squares: f64,
    min: f64,
    max: f64,
}

/// What a [`DemandIntegrator`] saw since its last reset.
///
/// ```
/// use fair_admission::DemandIntegrator;
/// use std::time::Duration;
/// let mut demand = DemandIntegrator::new(Duration::ZERO);
/// demand.set(Duration::ZERO, 3.0);
/// let r = demand.results(Duration::from_secs(2));
/// assert_eq!((r.average, r.deviation), (3.0, 0.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct IntegratorResults {
    /// The time covered.
    pub duration: Duration,
    /// The time-weighted average (the value held, when no time passed).
    pub average: f64,
    /// The time-weighted standard deviation (0 when no time passed).
    pub deviation: f64,
    /// The smallest value held.
    pub min: f64,
    /// The largest value held.
    pub max: f64,
}

impl DemandIntegrator {
    /// An integrator holding 0 from `now`.
    ///
    /// ```
    /// use fair_admission::DemandIntegrator;
    /// use std::time::Duration;
    /// let mut demand = DemandIntegrator::new(Duration::from_secs(7));
    /// assert_eq!(demand.results(Duration::from_secs(7)).duration, Duration::ZERO);
    /// ```
    pub fn new(now: Duration) -> Self {
        DemandIntegrator {
            last: now,
            value: 0.0,
            elapsed: Duration::ZERO,
            integral: 0.0,
            integral_of_squares: 0.0,
            min: 0.0,
            max: 0.0,
        }
    }

    /// The value becomes `value` at `now`.
    pub fn set(&mut self, now: Duration, value: f64) {
        self.accrue(now);
        self.value = value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// The value changes by `delta` at `now`.
    ///
    /// ```
    /// use fair_admission::DemandIntegrator;
    /// use std::time::Duration;
    /// let mut demand = DemandIntegrator::new(Duration::ZERO);
    /// demand.add(Duration::ZERO, 2.0);
    /// demand.add(Duration::from_secs(1), -2.0);
    /// assert_eq!(demand.results(Duration::from_secs(2)).average, 1.0);
    /// ```
    pub fn add(&mut self, now: Duration, delta: f64) {
        self.set(now, self.value + delta);
    }

    /// The value held now.
    pub fn value(&self) -> f64 {
        self.value
    }

    /// The statistics from the last reset to `now`.
    pub fn results(&mut self, now: Duration) -> IntegratorResults {
        self.accrue(now);
        let seconds = self.elapsed.as_secs_f64();
        let (average, deviation) = if seconds > 0.0 {
            let average = self.integral / seconds;
            let variance = self.integral_of_squares / seconds - average * average;
            // A variance below zero is rounding: the value never moved.
            (average, variance.max(0.0).sqrt())
        } else {
            (self.value, 0.0)
        };
        IntegratorResults {
            duration: self.elapsed,
            average,
            deviation,
            min: self.min,
            max: self.max,
        }
    }

    /// The statistics from the last reset to `now`, then starts afresh
    /// from `now` with the value held as both extremes.
    pub fn reset(&mut self, now: Duration) -> IntegratorResults {
        let results = self.results(now);
        self.elapsed = Duration::ZERO;
        self.integral = 0.0;
        self.integral_of_squares = 0.0;
        self.min = self.value;
        self.max = self.value;
        results
    }

    fn accrue(&mut self, now: Duration) {
        let dt = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let seconds = dt.as_secs_f64();
        self.elapsed = self.elapsed.saturating_add(dt);
        self.integral += self.value * seconds;
        self.integral_of_squares += self.value * self.value * seconds;
    }
}

/// A level's seat demand as borrowing sees it, updated once per adjustment
/// period from that period's [`IntegratorResults`].
///
/// The smoothed demand follows Kubernetes: with `envelope = average +
/// deviation`, it becomes `max(envelope, A × smoothed + (1 − A) ×
/// envelope)` with `A` = [`SMOOTHING`](Self::SMOOTHING), so it jumps up at
/// once and decays with a half-life of about five minutes of 10 s periods.
///
/// ```
/// use fair_admission::{DemandIntegrator, SeatDemandStats};
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// let mut demand = DemandIntegrator::new(s(0));
/// let mut stats = SeatDemandStats::default();
/// demand.set(s(0), 40.0);
/// stats.update(&demand.reset(s(10)));
/// assert_eq!((stats.high_watermark, stats.smoothed), (40, 40.0));
/// demand.set(s(10), 0.0);
/// stats.update(&demand.reset(s(20)));
/// // The envelope fell to 0; the smoothed demand only decays.
/// assert!((stats.smoothed - 40.0 * SeatDemandStats::SMOOTHING).abs() < 1e-9);
/// assert_eq!(stats.high_watermark, 40); // it held 40 at the period's start
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SeatDemandStats {
    /// The last period's time-weighted average.
    pub average: f64,
    /// The last period's time-weighted standard deviation.
    pub deviation: f64,
    /// The last period's largest demand, rounded to whole seats.
    pub high_watermark: u32,
    /// The smoothed demand: the target borrowing aims at.
    pub smoothed: f64,
}

impl SeatDemandStats {
    /// How much of the smoothed demand carries over to the next period
    /// (Kubernetes' figure): a half-life of 30 periods.
    pub const SMOOTHING: f64 = 0.977;

    /// Takes in one period's results. The high watermark always follows the
    /// period's maximum; the rest changes only if time passed.
    pub fn update(&mut self, period: &IntegratorResults) {
        // `as` saturates: a negative or NaN maximum is 0 seats.
        self.high_watermark = period.max.round() as u32;
        if period.duration.is_zero() {
            return;
        }
        self.average = period.average;
        self.deviation = if period.deviation.is_nan() {
            0.0
        } else {
            period.deviation
        };
        let envelope = self.average + self.deviation;
        let decayed = Self::SMOOTHING * self.smoothed + (1.0 - Self::SMOOTHING) * envelope;
        self.smoothed = envelope.max(decayed);
    }
}
