//! What a priority level is declared as: its shares and what it does with
//! a request it has no seat for, its lending and borrowing.

use std::time::Duration;

/// What a checked [`ApfBuilder`](crate::ApfBuilder) declared, as
/// [`Apf`](crate::Apf) is built from it.
pub(crate) struct Declared {
    pub(crate) seats: u32,
    pub(crate) levels: Vec<(String, LevelSpec)>,
    pub(crate) estimate: Duration,
    pub(crate) period: Duration,
}

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
