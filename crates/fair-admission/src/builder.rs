//! The builder of an [`Apf`]: its seats and its levels, each declared
//! whole, checked once at [`build`](ApfBuilder::build).

use std::time::Duration;

use crate::apf::Apf;
use crate::spec::Declared;
use crate::{ConfigError, LevelBorrowing, LevelSpec, LimitResponse};

impl Apf {
    /// A builder for a server with `seats` seats in all (its concurrency
    /// limit), shared by the levels it is given.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let queuing = |queues| LimitResponse::Queue { queues, queue_length_limit: 50, hand_size: 6 };
    /// let apf = Apf::builder(600)
    ///     .level("exempt", LevelSpec::exempt())
    ///     .level("leader-election", LevelSpec::limited(10, queuing(16)))
    ///     .level("workload-low", LevelSpec::limited(30, queuing(128)))
    ///     .level("catch-all", LevelSpec::limited(5, LimitResponse::Reject))
    ///     .build()?;
    /// // Seats are split by shares, rounded up: 600 · 30 / 45.
    /// assert_eq!(apf.level_stats(apf.level_id("workload-low").unwrap()).unwrap().seats, 400);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn builder(seats: u32) -> ApfBuilder {
        ApfBuilder::new(seats)
    }
}

/// Builds an [`Apf`]; from [`Apf::builder`]. Defaults: service estimated
/// at 3 ms before a request completes ([`estimated_service`](Self::estimated_service)),
/// seats divided again every 10 s ([`borrowing_period`](Self::borrowing_period)),
/// as Kubernetes does.
///
/// ```
/// use fair_admission::{Apf, LevelSpec, LimitResponse};
/// let err = Apf::builder(10)
///     .level("l", LevelSpec::limited(1, LimitResponse::Queue { queues: 8, queue_length_limit: 50, hand_size: 9 }))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "hand_size");
/// ```
#[derive(Debug, Clone)]
pub struct ApfBuilder {
    pub(crate) seats: u32,
    pub(crate) levels: Vec<(String, LevelSpec)>,
    pub(crate) estimate: Duration,
    pub(crate) period: Duration,
}

impl ApfBuilder {
    /// The longest estimated service time accepted: the API server's
    /// request timeout, 60 s.
    ///
    /// ```
    /// use fair_admission::{Apf, ApfBuilder, LevelSpec};
    /// use std::time::Duration;
    /// let b = Apf::builder(10).level("e", LevelSpec::exempt());
    /// assert_eq!(b.clone().estimated_service(Duration::MAX).build().unwrap_err().field(), "estimated_service");
    /// assert!(b.estimated_service(ApfBuilder::MAX_ESTIMATED_SERVICE).build().is_ok());
    /// ```
    pub const MAX_ESTIMATED_SERVICE: Duration = Duration::from_secs(60);

    /// The longest period between divisions of the seats accepted: an hour.
    ///
    /// ```
    /// use fair_admission::{Apf, ApfBuilder, LevelSpec};
    /// use std::time::Duration;
    /// let b = Apf::builder(10).level("e", LevelSpec::exempt());
    /// assert_eq!(b.clone().borrowing_period(Duration::ZERO).build().unwrap_err().field(), "borrowing_period");
    /// assert!(b.borrowing_period(ApfBuilder::MAX_BORROWING_PERIOD).build().is_ok());
    /// ```
    pub const MAX_BORROWING_PERIOD: Duration = Duration::from_secs(3_600);

    pub(crate) fn new(seats: u32) -> Self {
        ApfBuilder {
            seats,
            levels: Vec::new(),
            estimate: Duration::from_millis(3),
            period: LevelBorrowing::BORROWING_PERIOD,
        }
    }

    /// Adds the priority level `name`, as `spec` declares it. Levels are
    /// numbered in the order they are added.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let apf = Apf::builder(10)
    ///     .level("a", LevelSpec::limited(1, LimitResponse::Reject))
    ///     .level("b", LevelSpec::limited(2, LimitResponse::Reject))
    ///     .build()?;
    /// assert_eq!(apf.level_stats(apf.level_id("a").unwrap()).unwrap().seats, 4);
    /// assert_eq!(apf.level_stats(apf.level_id("b").unwrap()).unwrap().seats, 7);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level(mut self, name: &str, spec: LevelSpec) -> Self {
        self.levels.push((name.to_owned(), spec));
        self
    }

    /// How often the seats are divided again between levels that lend and
    /// borrow them; more than zero and at most [`Self::MAX_BORROWING_PERIOD`].
    pub fn borrowing_period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// The service time a request is charged when it is dispatched, until
    /// it completes and its real time is known; more than zero and at most
    /// [`Self::MAX_ESTIMATED_SERVICE`].
    pub fn estimated_service(mut self, estimate: Duration) -> Self {
        self.estimate = estimate;
        self
    }

    /// Checks the configuration: at least one seat and one level, unique
    /// names, limited levels with at least one share and queue lengths of
    /// at least one, queue and hand sizes that [`Dealer::new`](crate::Dealer::new)
    /// accepts, lending of 0 to 100 %. Errors name the field, and the level
    /// of a level's field.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let e = LevelSpec::exempt();
    /// assert_eq!(Apf::builder(0).level("e", e).build().unwrap_err().field(), "seats");
    /// assert_eq!(Apf::builder(1).build().unwrap_err().field(), "levels");
    /// assert_eq!(Apf::builder(1).level("e", e).level("e", e).build().unwrap_err().field(), "name");
    /// let none = LevelSpec::limited(0, LimitResponse::Reject);
    /// assert_eq!(Apf::builder(1).level("l", none).build().unwrap_err().field(), "shares");
    /// let lends = LevelSpec::limited(1, LimitResponse::Reject).lendable_percent(101);
    /// assert_eq!(Apf::builder(1).level("l", lends).build().unwrap_err().field(), "lendable_percent");
    /// ```
    pub fn build(self) -> Result<Apf, ConfigError> {
        if self.seats == 0 {
            return Err(ConfigError::new("seats", "at least 1", self.seats));
        }
        if self.levels.is_empty() {
            return Err(ConfigError::new("levels", "at least one level", "none"));
        }
        check_duration(
            "estimated_service",
            self.estimate,
            Self::MAX_ESTIMATED_SERVICE,
        )?;
        check_duration("borrowing_period", self.period, Self::MAX_BORROWING_PERIOD)?;
        for (i, (name, spec)) in self.levels.iter().enumerate() {
            if self.levels[..i].iter().any(|(n, _)| n == name) {
                return Err(ConfigError::new("name", "unique among the levels", name));
            }
            check_level(spec).map_err(|e| e.at_level(name))?;
        }
        Apf::from_spec(&Declared {
            seats: self.seats,
            levels: self.levels,
            estimate: self.estimate,
            period: self.period,
        })
    }
}

/// Refuses a zero duration or one above `max`.
fn check_duration(field: &'static str, d: Duration, max: Duration) -> Result<(), ConfigError> {
    if d.is_zero() || d > max {
        let allowed = format!("greater than zero and at most {max:?}");
        return Err(ConfigError::new(field, allowed, format!("{d:?}")));
    }
    Ok(())
}

/// The checks of one level that need nothing but its spec.
fn check_level(spec: &LevelSpec) -> Result<(), ConfigError> {
    match spec.limit {
        None if spec.borrowing_limit_percent.is_some() => Err(ConfigError::new(
            "borrowing_limit_percent",
            "unset on an exempt level (it never borrows)",
            spec.borrowing_limit_percent.unwrap_or_default(),
        )),
        Some(_) if spec.shares == 0 => Err(ConfigError::new("shares", "at least 1", 0)),
        Some(LimitResponse::Queue {
            queue_length_limit: 0,
            ..
        }) => Err(ConfigError::new("queue_length_limit", "at least 1", 0)),
        Some(LimitResponse::Queue { queues, .. })
            if queues == 0 || queues > LevelSpec::MAX_QUEUES =>
        {
            Err(ConfigError::new(
                "queues",
                format!("between 1 and {}", LevelSpec::MAX_QUEUES),
                queues,
            ))
        }
        _ => Ok(()),
    }
}
