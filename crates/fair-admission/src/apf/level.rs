//! A priority level: its identity, its queue set and refusal history, and
//! the counts an operator reads.

use std::time::Duration;

use crate::queue_set::{Mode, QueueSet};
use crate::{ConfigError, Dealer, DroppedRequests, LevelSpec, LimitResponse, WorkEstimate};

/// Identifies a priority level of an [`Apf`](crate::Apf), in the order the
/// builder added them.
///
/// ```
/// use fair_admission::{Apf, LevelSpec, LimitResponse};
/// let apf = Apf::builder(10).level("global", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// assert_eq!(apf.level_id("global").map(|l| l.index()), Some(0));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelId {
    /// The [`Apf`](crate::Apf) it belongs to (clones of an `Apf` share it).
    pub(crate) apf: u64,
    pub(crate) index: usize,
}

impl LevelId {
    /// The level's position in the builder's order.
    ///
    /// ```
    /// # use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let apf = Apf::builder(10)
    ///     .level("system", LevelSpec::exempt())
    ///     .level("rest", LevelSpec::limited(1, LimitResponse::Reject))
    ///     .build()?;
    /// assert_eq!(apf.level_id("rest").unwrap().index(), 1);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn index(self) -> usize {
        self.index
    }
}

/// A priority level's counts, from [`Apf::level_stats`](crate::Apf::level_stats).
///
/// ```
/// use fair_admission::{Apf, LevelSpec, LimitResponse};
/// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// let s = apf.level_stats(apf.level_id("l").unwrap()).unwrap();
/// assert_eq!((s.seats, s.seats_in_use, s.waiting), (10, 0, 0));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LevelStats {
    /// The level's current concurrency limit in seats: its nominal seats,
    /// moved by borrowing. An exempt level admits beyond it.
    pub seats: u32,
    /// Its nominal seats, from its shares.
    pub nominal_seats: u32,
    /// Seats held by its requests, until their additional latency ends.
    pub seats_in_use: u64,
    /// Seats its waiting requests will hold: with `seats_in_use`, its seat
    /// demand.
    pub seats_waiting: u64,
    /// Requests waiting in queues.
    pub waiting: usize,
    /// Requests executing (not counting those only holding seats for their
    /// additional latency).
    pub executing: usize,
    /// Requests dispatched so far.
    pub dispatched: u64,
    /// Requests refused so far, including waits cancelled.
    pub rejected: u64,
    /// Waits cancelled so far (given up or timed out).
    pub cancelled: u64,
    /// Times the level's fair-queuing progress meter was wound back to
    /// stay within its fixed-point range (Kubernetes'
    /// `apiserver_flowcontrol_epoch_advance_total`).
    pub epoch_advances: u64,
}

/// One level of an [`Apf`](crate::Apf).
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub(crate) name: String,
    pub(crate) nominal: u32,
    pub(crate) queues: QueueSet,
    pub(crate) drops: DroppedRequests,
}

impl Level {
    /// The level `name` as `spec` declares it, with `nominal` seats.
    pub(crate) fn new(
        name: &str,
        spec: &LevelSpec,
        nominal: u32,
        estimate: Duration,
    ) -> Result<Self, ConfigError> {
        let (mode, queues) = match spec.limit {
            None => (Mode::Exempt, 0),
            Some(LimitResponse::Reject) => (Mode::Reject, 0),
            Some(LimitResponse::Queue {
                queues,
                queue_length_limit,
                hand_size,
            }) => {
                let dealer = Dealer::new(queues, hand_size).map_err(|e| {
                    if e.field() == "deck_size" {
                        ConfigError::new("queues", e.allowed().to_owned(), queues)
                    } else {
                        e
                    }
                })?;
                let mode = Mode::Queue {
                    dealer,
                    queue_length_limit,
                };
                (mode, queues)
            }
        };
        Ok(Level {
            name: name.to_owned(),
            nominal,
            queues: QueueSet::new(mode, queues, nominal, estimate),
            drops: DroppedRequests::new(),
        })
    }

    pub(crate) fn stats(&self) -> LevelStats {
        let q = &self.queues;
        LevelStats {
            seats: q.limit,
            nominal_seats: self.nominal,
            seats_in_use: q.seats_in_use,
            seats_waiting: q.seats_waiting,
            waiting: q.waiting,
            executing: q.executing,
            dispatched: q.dispatched,
            rejected: q.rejected,
            cancelled: q.cancelled,
            epoch_advances: q.epochs,
        }
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Waiting,
    Executing,
    /// Done, but holding its seats for its additional latency.
    Lingering,
}

/// One request the `Apf` knows of, by its ticket.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) level: usize,
    /// Its queue (none on exempt and rejecting levels).
    pub(crate) queue: Option<usize>,
    pub(crate) work: WorkEstimate,
    pub(crate) phase: Phase,
    pub(crate) arrived: Duration,
    pub(crate) started: Duration,
    /// How long it executed, once it completed.
    pub(crate) ran: Duration,
    /// Flow schema and distinguisher, for the dump.
    pub(crate) names: Option<Box<(String, String)>>,
}

impl Request {
    /// The most seats it holds.
    pub(crate) fn max_seats(&self) -> u64 {
        u64::from(self.work.initial_seats.max(self.work.final_seats))
    }
}
