//! The builder of an [`Apf`]: its seats and its levels, each declared
//! whole, checked once at [`build`](ApfBuilder::build).

use std::time::Duration;

use crate::apf::Apf;
use crate::{ConfigError, LevelBorrowing};

/// What a limited priority level does with a request it has no free seat
/// for.
///
/// ```
/// use fair_admission::LimitResponse;
/// // Kubernetes' defaults for a queuing level: 64 queues of 50, hands of 8.
/// let queue = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 };
/// assert_ne!(queue, LimitResponse::Reject);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitResponse {
    /// Queue it: the flow is dealt a hand of `hand_size` of the level's
    /// `queues` (shuffle sharding), the request joins the queue of the hand
    /// with the least work waiting, and is refused if that queue already
    /// holds `queue_length_limit` requests while every seat is taken.
    /// Queues are served by fair queuing.
    Queue {
        /// Number of queues.
        queues: usize,
        /// Requests a queue may hold waiting.
        queue_length_limit: usize,
        /// Queues dealt to each flow.
        hand_size: usize,
    },
    /// Refuse it at once.
    Reject,
}

/// One priority level, declared whole: its nominal shares of the server's
/// seats, what it does when they are taken, and what it lends and borrows
/// (Kubernetes' `PriorityLevelConfigurationSpec`).
///
/// A level's nominal seats are `ceil(server seats × shares / Σ shares)`.
/// By default it lends nothing and may borrow up to the server's seats
/// (which, while nothing lends, it never can). An exempt level admits
/// everything at once; its shares (default 0) and lendable percentage only
/// count in the division of seats between levels.
///
/// ```
/// use fair_admission::{Apf, LevelSpec, LimitResponse};
/// let queuing = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 6 };
/// let apf = Apf::builder(600)
///     .level("exempt", LevelSpec::exempt())
///     .level("workload-low", LevelSpec::limited(100, queuing).lendable_percent(90))
///     .level("catch-all", LevelSpec::limited(5, LimitResponse::Reject))
///     .build()?;
/// let low = apf.level_stats(apf.level_id("workload-low").unwrap()).unwrap();
/// assert_eq!(low.nominal_seats, 572); // ceil(600 × 100 / 105)
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelSpec {
    pub(crate) shares: u32,
    /// `None` for an exempt level.
    pub(crate) limit: Option<LimitResponse>,
    pub(crate) lendable_percent: u32,
    pub(crate) borrowing_limit_percent: Option<u32>,
}

impl LevelSpec {
    /// The most queues a level may have: Kubernetes' limit. Each dispatch
    /// looks at every queue of its level, so even this many is slow.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let too_many = LimitResponse::Queue { queues: LevelSpec::MAX_QUEUES + 1, queue_length_limit: 50, hand_size: 1 };
    /// let err = Apf::builder(10).level("l", LevelSpec::limited(1, too_many)).build().unwrap_err();
    /// assert_eq!(err.field(), "queues");
    /// ```
    pub const MAX_QUEUES: usize = 10_000_000;

    /// A limited level with `shares` nominal concurrency shares (at least
    /// 1) that meets overload with `response`.
    ///
    /// ```
    /// use fair_admission::{LevelSpec, LimitResponse};
    /// let catch_all = LevelSpec::limited(5, LimitResponse::Reject);
    /// # let _ = catch_all;
    /// ```
    pub fn limited(shares: u32, response: LimitResponse) -> Self {
        LevelSpec {
            shares,
            limit: Some(response),
            lendable_percent: 0,
            borrowing_limit_percent: None,
        }
    }

    /// An exempt level: its requests are dispatched at once, whatever is
    /// in use (Kubernetes' `exempt` level, for the system's own traffic).
    /// It has no shares until given some.
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LevelSpec};
    /// let mut apf = Apf::builder(4).level("system", LevelSpec::exempt()).build()?;
    /// let system = apf.level_id("system").unwrap();
    /// for _ in 0..10 {
    ///     assert!(matches!(apf.admit(system, &"kubelet", 1).admit, Admit::Dispatched(_)));
    /// }
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn exempt() -> Self {
        LevelSpec {
            shares: 0,
            limit: None,
            lendable_percent: 0,
            borrowing_limit_percent: None,
        }
    }

    /// The level's nominal concurrency shares.
    pub fn shares(mut self, shares: u32) -> Self {
        self.shares = shares;
        self
    }

    /// The percentage of its nominal seats the level may lend to others
    /// (0 to 100, rounded to the nearest seat).
    pub fn lendable_percent(mut self, percent: u32) -> Self {
        self.lendable_percent = percent;
        self
    }

    /// The most it may borrow, as a percentage of its nominal seats
    /// (rounded to the nearest seat); without it, up to the server's seats.
    /// Not for an exempt level, which never borrows.
    pub fn borrowing_limit_percent(mut self, percent: u32) -> Self {
        self.borrowing_limit_percent = Some(percent);
        self
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
    /// accepts, lending of 0 to 100 %. Errors name the field.
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
            check_level(spec)?;
        }
        Apf::from_builder(self)
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
        Some(LimitResponse::Queue { queues, .. }) if queues > LevelSpec::MAX_QUEUES => {
            Err(ConfigError::new(
                "queues",
                format!("between 1 and {}", LevelSpec::MAX_QUEUES),
                queues,
            ))
        }
        _ => Ok(()),
    }
}
