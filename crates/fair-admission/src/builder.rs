//! The builder of an [`Apf`]: its seats, levels and settings, checked once.

use std::collections::HashMap;
use std::time::Duration;

use crate::apf::{Apf, Kind, Level, NEXT_APF};
use crate::drops::Drops;
use crate::queue_set::{Queue, Queues};
use crate::reallocate::Integrator;
use crate::{ConfigError, Dealer};

/// What a priority level does with a request it has no free seat for.
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
    /// `queues` (shuffle sharding), the request joins the least loaded of
    /// them, and is rejected if that queue already holds
    /// `queue_length_limit` requests. Queues are served by fair queuing.
    Queue {
        /// Number of queues.
        queues: usize,
        /// Requests a queue may hold waiting.
        queue_length_limit: usize,
        /// Queues dealt to each flow.
        hand_size: usize,
    },
    /// Reject it at once.
    Reject,
}

/// The most queues a level may have: Kubernetes' limit. Each dispatch
/// looks at every queue of its level, so even this many is slow.
///
/// ```
/// use fair_admission::{Apf, LimitResponse, MAX_QUEUES};
/// let err = Apf::builder(10)
///     .level("l", 1, LimitResponse::Queue { queues: MAX_QUEUES + 1, queue_length_limit: 50, hand_size: 1 })
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "queues");
/// ```
pub const MAX_QUEUES: usize = 10_000_000;

/// The most seats one request occupies, whatever width it asks for:
/// Kubernetes' default for the seats a work estimate may reach.
///
/// ```
/// use fair_admission::{Admit, Apf, LimitResponse, MAX_SEATS_PER_REQUEST};
/// let mut apf = Apf::builder(100).level("l", 1, LimitResponse::Reject).build()?;
/// let level = apf.level_id("l").unwrap();
/// apf.admit(level, &"wide", 1_000);
/// assert_eq!(apf.level_stats(level).unwrap().seats_in_use, MAX_SEATS_PER_REQUEST);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub const MAX_SEATS_PER_REQUEST: u32 = 10;

/// The longest estimated service time accepted: the API server's request
/// timeout, 60 s.
///
/// ```
/// use fair_admission::{Apf, MAX_ESTIMATED_SERVICE};
/// use std::time::Duration;
/// let err = Apf::builder(10).exempt("e").estimated_service(Duration::MAX).build().unwrap_err();
/// assert_eq!(err.field(), "estimated_service");
/// assert!(Apf::builder(10).exempt("e").estimated_service(MAX_ESTIMATED_SERVICE).build().is_ok());
/// ```
pub const MAX_ESTIMATED_SERVICE: Duration = Duration::from_secs(60);

/// The most service time one completion is charged: an hour. A request
/// reported as running longer (or `Duration::MAX`) is charged this much, so
/// one report cannot push its queue out of turn for ages.
///
/// ```
/// assert_eq!(fair_admission::MAX_CHARGED_SERVICE.as_secs(), 3_600);
/// ```
pub const MAX_CHARGED_SERVICE: Duration = Duration::from_secs(3_600);

/// How often seats are reallocated between levels that lend and borrow
/// them, by default: every 10 s, as Kubernetes does.
///
/// ```
/// assert_eq!(fair_admission::BORROWING_PERIOD.as_secs(), 10);
/// ```
pub const BORROWING_PERIOD: Duration = Duration::from_secs(10);

/// The longest reallocation period accepted: an hour.
///
/// ```
/// use fair_admission::{Apf, MAX_BORROWING_PERIOD};
/// use std::time::Duration;
/// let err = Apf::builder(10).exempt("e").borrowing_period(Duration::ZERO).build().unwrap_err();
/// assert_eq!(err.field(), "borrowing_period");
/// assert!(Apf::builder(10).exempt("e").borrowing_period(MAX_BORROWING_PERIOD).build().is_ok());
/// ```
pub const MAX_BORROWING_PERIOD: Duration = Duration::from_secs(3_600);

/// Builds an [`Apf`]; from [`Apf::builder`].
///
/// ```
/// use fair_admission::{Apf, LimitResponse};
/// let err = Apf::builder(10)
///     .level("l", 1, LimitResponse::Queue { queues: 8, queue_length_limit: 50, hand_size: 9 })
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "hand_size");
/// ```
#[derive(Debug, Clone)]
pub struct ApfBuilder {
    pub(crate) seats: u32,
    pub(crate) levels: Vec<LevelSpec>,
    pub(crate) estimate: Duration,
    pub(crate) period: Duration,
    /// `lending` was called before any level was added.
    pub(crate) orphan_lending: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct LevelSpec {
    pub(crate) name: String,
    pub(crate) shares: u32,
    /// `None` for an exempt level.
    pub(crate) limit: Option<LimitResponse>,
    pub(crate) lendable_percent: u32,
    pub(crate) borrowing_limit_percent: Option<u32>,
}

impl ApfBuilder {
    /// A priority level with `shares` nominal concurrency shares: its seats
    /// are `ceil(seats · shares / total shares)` (exempt levels hold no
    /// shares), as Kubernetes computes them.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(10)
    ///     .level("a", 1, LimitResponse::Reject)
    ///     .level("b", 2, LimitResponse::Reject)
    ///     .build()?;
    /// assert_eq!(apf.level_stats(apf.level_id("a").unwrap()).unwrap().seats, 4);
    /// assert_eq!(apf.level_stats(apf.level_id("b").unwrap()).unwrap().seats, 7);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level(mut self, name: &str, shares: u32, limit: LimitResponse) -> Self {
        self.levels.push(LevelSpec {
            name: name.to_owned(),
            shares,
            limit: Some(limit),
            lendable_percent: 0,
            borrowing_limit_percent: None,
        });
        self
    }

    /// An exempt level: its requests are always dispatched at once and hold
    /// none of the server's seats (Kubernetes' `exempt` level, for the
    /// system's own traffic).
    ///
    /// ```
    /// # use fair_admission::Apf;
    /// let apf = Apf::builder(10).exempt("exempt").build()?;
    /// assert_eq!(apf.level_stats(apf.level_id("exempt").unwrap()).unwrap().seats, 0);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn exempt(mut self, name: &str) -> Self {
        self.levels.push(LevelSpec {
            name: name.to_owned(),
            shares: 0,
            limit: None,
            lendable_percent: 0,
            borrowing_limit_percent: None,
        });
        self
    }

    /// Lets the level added last lend and borrow seats (Kubernetes'
    /// `lendablePercent` and `borrowingLimitPercent`): its limit may fall to
    /// its nominal seats less `lendable_percent` % of them when other levels
    /// need seats it does not, and rise by up to `borrowing_limit_percent` %
    /// of them (`None`: by up to the server's seats) when it needs more than
    /// others. Both round to the nearest seat. Levels lend nothing unless
    /// told to; `build` accepts 0 to 100 for `lendable_percent` and refuses
    /// lending on an exempt level or before any level. Limits move at the
    /// reallocations that [`Apf::advance`] makes.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(100)
    ///     .level("workload-low", 100, LimitResponse::Reject)
    ///     .lending(90, None)
    ///     .build()?;
    /// # let _ = apf;
    /// let err = Apf::builder(100).level("l", 1, LimitResponse::Reject).lending(101, None).build();
    /// assert_eq!(err.unwrap_err().field(), "lendable_percent");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn lending(mut self, lendable_percent: u32, borrowing_limit_percent: Option<u32>) -> Self {
        match self.levels.last_mut() {
            Some(level) => {
                level.lendable_percent = lendable_percent;
                level.borrowing_limit_percent = borrowing_limit_percent;
            }
            None => self.orphan_lending = true,
        }
        self
    }

    /// How often seats are reallocated between levels (default
    /// [`BORROWING_PERIOD`], 10 s); `build` accepts more than zero and at
    /// most [`MAX_BORROWING_PERIOD`].
    ///
    /// ```
    /// # use fair_admission::{Apf, LimitResponse};
    /// use std::time::Duration;
    /// let apf = Apf::builder(10)
    ///     .borrowing_period(Duration::from_secs(5))
    ///     .level("l", 1, LimitResponse::Reject)
    ///     .build()?;
    /// # let _ = apf;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn borrowing_period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    /// The service time to charge a request before it completes and its
    /// real time is known; later estimates follow the completions. Default
    /// 100 ms; `build` accepts more than zero and at most
    /// [`MAX_ESTIMATED_SERVICE`] (60 s). Only the order of dispatch in the
    /// short run depends on it.
    ///
    /// ```
    /// # use fair_admission::{Apf, LimitResponse};
    /// use std::time::Duration;
    /// let apf = Apf::builder(10)
    ///     .estimated_service(Duration::from_secs(1))
    ///     .level("l", 1, LimitResponse::Reject)
    ///     .build()?;
    /// # let _ = apf;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn estimated_service(mut self, estimate: Duration) -> Self {
        self.estimate = estimate;
        self
    }

    /// Checks the configuration: at least one seat and one level, unique
    /// names, positive shares, positive queue lengths, and queue and hand
    /// sizes that [`Dealer::new`] accepts. Errors name the field.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// assert_eq!(Apf::builder(0).exempt("e").build().unwrap_err().field(), "seats");
    /// assert_eq!(Apf::builder(1).build().unwrap_err().field(), "levels");
    /// let dup = Apf::builder(1).exempt("e").exempt("e").build().unwrap_err();
    /// assert_eq!(dup.field(), "name");
    /// let zero = Apf::builder(1).level("l", 0, LimitResponse::Reject).build().unwrap_err();
    /// assert_eq!(zero.field(), "shares");
    /// ```
    pub fn build(self) -> Result<Apf, ConfigError> {
        if self.seats == 0 {
            return Err(ConfigError::new("seats", "at least 1", self.seats));
        }
        if self.levels.is_empty() {
            return Err(ConfigError::new("levels", "at least one level", "none"));
        }
        if self.estimate.is_zero() || self.estimate > MAX_ESTIMATED_SERVICE {
            return Err(ConfigError::new(
                "estimated_service",
                format!("greater than zero and at most {MAX_ESTIMATED_SERVICE:?}"),
                format!("{:?}", self.estimate),
            ));
        }
        if self.orphan_lending {
            return Err(ConfigError::new(
                "lending",
                "called after the level it applies to",
                "before any level",
            ));
        }
        if self.period.is_zero() || self.period > MAX_BORROWING_PERIOD {
            return Err(ConfigError::new(
                "borrowing_period",
                format!("greater than zero and at most {MAX_BORROWING_PERIOD:?}"),
                format!("{:?}", self.period),
            ));
        }
        let estimate = self.estimate.as_secs_f64();
        let total_shares: u64 = self.levels.iter().map(|l| u64::from(l.shares)).sum();
        let mut levels = Vec::with_capacity(self.levels.len());
        for (i, spec) in self.levels.iter().enumerate() {
            let LevelSpec {
                name,
                shares,
                limit,
                lendable_percent,
                borrowing_limit_percent,
            } = spec;
            if self.levels[..i].iter().any(|l| &l.name == name) {
                return Err(ConfigError::new("name", "unique among the levels", name));
            }
            if *lendable_percent > 100 {
                return Err(ConfigError::new(
                    "lendable_percent",
                    "between 0 and 100",
                    lendable_percent,
                ));
            }
            let kind = match *limit {
                None if *lendable_percent > 0 || borrowing_limit_percent.is_some() => {
                    return Err(ConfigError::new(
                        "lending",
                        "unset on an exempt level (it holds no seats)",
                        name,
                    ));
                }
                None => Kind::Exempt,
                Some(_) if *shares == 0 => {
                    return Err(ConfigError::new("shares", "at least 1", shares));
                }
                Some(LimitResponse::Reject) => Kind::Reject,
                Some(LimitResponse::Queue {
                    queues,
                    queue_length_limit,
                    hand_size,
                }) => {
                    if queue_length_limit == 0 {
                        return Err(ConfigError::new("queue_length_limit", "at least 1", 0));
                    }
                    if queues > MAX_QUEUES {
                        return Err(ConfigError::new(
                            "queues",
                            format!("between 1 and {MAX_QUEUES}"),
                            queues,
                        ));
                    }
                    Kind::Queue(Queues {
                        dealer: Dealer::new(queues, hand_size).map_err(|e| {
                            if e.field() == "deck_size" {
                                ConfigError::new("queues", e.allowed().to_owned(), queues)
                            } else {
                                e
                            }
                        })?,
                        limit: queue_length_limit,
                        queues: vec![Queue::default(); queues],
                        waiting: 0,
                        waiting_seats: 0,
                        vtime: 0.0,
                        estimate,
                        enqueues: 0,
                        robin: queues.saturating_sub(1),
                    })
                }
            };
            let seats = if matches!(kind, Kind::Exempt) {
                0
            } else {
                // ceil(seats · shares / total), in integers.
                let num = u64::from(self.seats) * u64::from(*shares);
                u32::try_from(num.div_ceil(total_shares)).unwrap_or(u32::MAX)
            };
            // Kubernetes rounds the lendable and borrowing seats to the
            // nearest; no borrowing limit means up to the server's seats.
            let percent_of = |p: u32| {
                let seats = u64::from(seats)
                    .saturating_mul(u64::from(p))
                    .saturating_add(50)
                    / 100;
                u32::try_from(seats).unwrap_or(u32::MAX)
            };
            levels.push(Level {
                name: name.clone(),
                kind,
                seats,
                nominal: seats,
                lendable: percent_of(*lendable_percent),
                borrowing: borrowing_limit_percent.map_or(self.seats, percent_of),
                in_use: 0,
                dispatched: 0,
                rejected: 0,
                demand: Integrator::default(),
                smoothed: 0.0,
                drops: Drops::default(),
            });
        }
        let lends = levels.iter().any(|l| l.lendable > 0);
        Ok(Apf {
            id: NEXT_APF.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            levels,
            tickets: HashMap::new(),
            next_ticket: 0,
            hasher: foldhash::fast::FixedState::with_seed(0),
            now: Duration::ZERO,
            adjusted_at: Duration::ZERO,
            period: self.period,
            lends,
        })
    }
}
