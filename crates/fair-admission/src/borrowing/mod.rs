//! Borrowing between priority levels, as Kubernetes' APF controller does
//! it: each level's limits from its configuration, its seat demand over
//! each adjustment period, and the periodic division of the server's seats
//! by [`allocate_concurrency`].
//!
//! Every [`BORROWING_PERIOD`](LevelBorrowing::BORROWING_PERIOD) the level
//! code calls [`adjust_limits`] over all its levels; between adjustments it
//! reports each change of a level's seat demand (seats in use plus seats
//! waiting) with [`LevelBorrowing::set_demand`], and dispatches under
//! [`LevelBorrowing::current_limit`].

mod allocation;
mod demand;

use std::time::Duration;

pub use allocation::{Allocation, AllocationClass, AllocationError, allocate_concurrency};
pub use demand::{DemandIntegrator, IntegratorResults, SeatDemandStats};

use crate::ConfigError;

/// A level's configured limits, in seats: its nominal seats, how many of
/// them it may lend, and how many it may borrow.
///
/// ```
/// use fair_admission::LevelLimits;
/// // 12 nominal seats, half lendable, no borrowing limit on a 24-seat server.
/// let l = LevelLimits::from_percent(12, 50, None, 24)?;
/// assert_eq!((l.min(), l.max(), l.initial()), (6, 36, 9));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelLimits {
    /// The nominal seats: the level's share of the server.
    pub nominal: u32,
    /// Seats it may lend: its limit never falls below `nominal − lendable`.
    pub lendable: u32,
    /// Seats it may borrow: its limit never rises above `nominal + borrowing`.
    pub borrowing: u32,
}

impl LevelLimits {
    /// Limits in seats. Refused: `lendable` above `nominal`.
    ///
    /// ```
    /// use fair_admission::LevelLimits;
    /// assert_eq!(LevelLimits::new(10, 11, 0).unwrap_err().field(), "lendable");
    /// ```
    pub fn new(nominal: u32, lendable: u32, borrowing: u32) -> Result<Self, ConfigError> {
        if lendable > nominal {
            let allowed = format!("at most the nominal seats, {nominal}");
            return Err(ConfigError::new("lendable", allowed, lendable));
        }
        Ok(LevelLimits {
            nominal,
            lendable,
            borrowing,
        })
    }

    /// Limits from Kubernetes' percentages: lendable seats are
    /// `round(nominal × lendable_percent / 100)`, borrowable ones
    /// `round(nominal × borrowing_limit_percent / 100)`, or the server's
    /// seats when there is no borrowing limit. Refused: a
    /// `lendable_percent` above 100.
    ///
    /// ```
    /// use fair_admission::LevelLimits;
    /// let l = LevelLimits::from_percent(245, 90, Some(10), 600)?;
    /// assert_eq!((l.lendable, l.borrowing), (221, 25));
    /// assert_eq!(LevelLimits::from_percent(5, 101, None, 5).unwrap_err().field(), "lendable_percent");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn from_percent(
        nominal: u32,
        lendable_percent: u32,
        borrowing_limit_percent: Option<u32>,
        server_seats: u32,
    ) -> Result<Self, ConfigError> {
        if lendable_percent > 100 {
            let field = "lendable_percent";
            return Err(ConfigError::new(
                field,
                "between 0 and 100",
                lendable_percent,
            ));
        }
        let share = |percent: u32| {
            let seats = (f64::from(nominal) * f64::from(percent) / 100.0).round();
            seats as u32 // `as` saturates
        };
        let borrowing = borrowing_limit_percent.map_or(server_seats, share);
        LevelLimits::new(nominal, share(lendable_percent), borrowing)
    }

    /// The lowest limit: `nominal − lendable`.
    pub fn min(&self) -> u32 {
        self.nominal.saturating_sub(self.lendable)
    }

    /// The highest limit: `nominal + borrowing`.
    pub fn max(&self) -> u32 {
        self.nominal.saturating_add(self.borrowing)
    }

    /// The limit a new level starts with: `nominal − lendable / 2`
    /// (integer halving).
    pub fn initial(&self) -> u32 {
        self.nominal.saturating_sub(self.lendable / 2)
    }
}

/// One level's borrowing state: its limits, its seat demand since the last
/// adjustment, its demand statistics and its current limit.
///
/// An exempt level's limit is `max(min, high watermark)` after each
/// adjustment (its demand counts against what the others share); a limited
/// level's is its share of [`adjust_limits`]'s allocation.
///
/// ```
/// use fair_admission::{adjust_limits, LevelBorrowing, LevelLimits};
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// let half = LevelLimits::from_percent(12, 50, None, 24)?;
/// let mut levels = [LevelBorrowing::new(half, false, s(0)), LevelBorrowing::new(half, false, s(0))];
/// assert_eq!(levels[0].current_limit(), 9);
/// levels[0].set_demand(s(0), 40.0); // far more than its 12 seats
/// levels[1].set_demand(s(0), 12.0); // exactly its 12 seats
/// adjust_limits(s(10), &mut levels);
/// // Neither level gives up seats it is using: 12 / 12.
/// assert_eq!((levels[0].current_limit(), levels[1].current_limit()), (12, 12));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LevelBorrowing {
    limits: LevelLimits,
    exempt: bool,
    demand: DemandIntegrator,
    stats: SeatDemandStats,
    current: u32,
}

impl LevelBorrowing {
    /// How often Kubernetes adjusts the limits: every 10 s.
    pub const BORROWING_PERIOD: Duration = Duration::from_secs(10);

    /// A level with `limits`, exempt or not, created at `now`; its limit
    /// starts at [`LevelLimits::initial`].
    pub fn new(limits: LevelLimits, exempt: bool, now: Duration) -> Self {
        LevelBorrowing {
            limits,
            exempt,
            demand: DemandIntegrator::new(now),
            stats: SeatDemandStats::default(),
            current: limits.initial(),
        }
    }

    /// The level's seat demand (seats in use plus seats of waiting
    /// requests) becomes `seats` at `now`.
    pub fn set_demand(&mut self, now: Duration, seats: f64) {
        self.demand.set(now, seats);
    }

    /// The limit to dispatch under until the next adjustment.
    pub fn current_limit(&self) -> u32 {
        self.current
    }

    /// The configured limits.
    pub fn limits(&self) -> LevelLimits {
        self.limits
    }

    /// Whether the level is exempt.
    pub fn is_exempt(&self) -> bool {
        self.exempt
    }

    /// The demand statistics of the last adjustment.
    pub fn stats(&self) -> SeatDemandStats {
        self.stats
    }

    /// The lowest limit the last adjustment allowed:
    /// `max(min, min(nominal, high watermark))` for a limited level,
    /// `max(min, high watermark)` for an exempt one.
    pub fn lower_bound(&self) -> u32 {
        let hwm = self.stats.high_watermark;
        if self.exempt {
            self.limits.min().max(hwm)
        } else {
            self.limits.min().max(self.limits.nominal.min(hwm))
        }
    }

    /// The target of the last adjustment: `max(lower bound, smoothed
    /// demand)`.
    pub fn target(&self) -> f64 {
        f64::from(self.lower_bound()).max(self.stats.smoothed)
    }
}

/// What one [`adjust_limits`] did.
///
/// ```
/// use fair_admission::{adjust_limits, LevelBorrowing, LevelLimits};
/// use std::time::Duration;
/// let idle = LevelLimits::new(10, 10, 10)?;
/// let mut levels = [LevelBorrowing::new(idle, false, Duration::ZERO)];
/// let adjustment = adjust_limits(Duration::from_secs(10), &mut levels);
/// assert!(adjustment.error.is_none());
/// assert_eq!(levels[0].current_limit(), 10);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Adjustment {
    /// The fair fraction of the allocation (0 when the limited levels'
    /// lower bounds took every seat).
    pub fair_fraction: f64,
    /// Why the allocation failed, if it did: the limited levels then kept
    /// their previous limits.
    pub error: Option<AllocationError>,
}

/// Adjusts every level's limit from its demand since the last adjustment,
/// as Kubernetes' APF controller does every 10 s (and once when it is
/// configured).
///
/// Each level's demand statistics are updated at `now`. Exempt levels take
/// `max(min, high watermark)` off the server's seats (the sum of all
/// nominal seats). Then for the limited levels:
///
/// - if what is left is at most the sum of their minimum limits, each gets
///   its minimum;
/// - if it is at most the sum of their lower bounds, each gets its minimum
///   plus the same fraction of the gap to its lower bound (rounded);
/// - otherwise the sum of all nominal seats is divided by
///   [`allocate_concurrency`] (lower bound, target, maximum limit per
///   level) and each level's share is rounded; if that fails, every
///   limited level keeps its limit.
///
/// With no limited level and seats to share, nothing changes (Kubernetes
/// logs this as impossible).
pub fn adjust_limits(now: Duration, levels: &mut [LevelBorrowing]) -> Adjustment {
    let nominal_sum: i64 = levels.iter().map(|l| i64::from(l.limits.nominal)).sum();
    let mut remaining = nominal_sum;
    let (mut min_sum, mut lower_sum) = (0i64, 0i64);
    let mut classes = Vec::with_capacity(levels.len());
    for level in levels.iter_mut() {
        let period = level.demand.reset(now);
        level.stats.update(&period);
        let lower = level.lower_bound();
        if level.exempt {
            remaining -= i64::from(lower);
            continue;
        }
        classes.push(AllocationClass {
            target: level.target(),
            lower_bound: f64::from(lower),
            upper_bound: f64::from(level.limits.max()),
        });
        min_sum += i64::from(level.limits.min());
        lower_sum += i64::from(lower);
    }
    let unchanged = Adjustment {
        fair_fraction: 0.0,
        error: None,
    };
    if classes.is_empty() && nominal_sum > 0 {
        return unchanged;
    }
    let limited = levels.iter_mut().filter(|l| !l.exempt);
    if remaining <= min_sum {
        limited.for_each(|l| l.current = l.limits.min());
        set_exempt_limits(levels);
        return unchanged;
    }
    if remaining <= lower_sum {
        let fraction = (remaining - min_sum) as f64 / (lower_sum - min_sum) as f64;
        for l in limited {
            let gap = f64::from(l.lower_bound() - l.limits.min());
            l.current = l
                .limits
                .min()
                .saturating_add((gap * fraction).round() as u32);
        }
        set_exempt_limits(levels);
        return unchanged;
    }
    let required = u32::try_from(nominal_sum).unwrap_or(u32::MAX);
    let adjustment = match allocate_concurrency(required, &classes) {
        Ok(allocation) => {
            for (l, seats) in limited.zip(&allocation.seats) {
                l.current = seats.round() as u32;
            }
            Adjustment {
                fair_fraction: allocation.fair_fraction,
                error: None,
            }
        }
        Err(error) => Adjustment {
            fair_fraction: 0.0,
            error: Some(error),
        },
    };
    set_exempt_limits(levels);
    adjustment
}

fn set_exempt_limits(levels: &mut [LevelBorrowing]) {
    for l in levels.iter_mut().filter(|l| l.exempt) {
        l.current = l.lower_bound();
    }
}

#[cfg(test)]
mod tests;
