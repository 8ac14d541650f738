//! A priority level: its identity, its queue set and refusal history, and
//! the counts an operator reads.

use std::collections::BTreeSet;
use std::time::Duration;

use super::requests::Requests;
use crate::queue_set::{Dispatch, Mode, QueueSet, Start};
use crate::{
    Admit, ConfigError, Dealer, DroppedRequests, LevelBorrowing, LevelSpec, LimitResponse,
};
use crate::{Name, Ticket, WorkEstimate};

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

/// One level of an [`Apf`](crate::Apf): its queue set, its requests and
/// its share of the seats. Everything a request does touches its own level
/// alone, so that the layer can lock each level on its own.
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub(crate) name: String,
    pub(crate) nominal: u32,
    pub(crate) queues: QueueSet,
    pub(crate) drops: DroppedRequests,
    /// Its limits and seat demand, for the division of the seats.
    pub(crate) borrowing: LevelBorrowing,
    /// Its requests, by ticket.
    pub(crate) requests: Requests,
    /// Its requests holding seats for their additional latency, by
    /// release time.
    pub(crate) lingering: BTreeSet<(Duration, Ticket)>,
}

impl Level {
    /// The level `name` as `spec` declares it, with `nominal` seats.
    pub(crate) fn new(
        name: &str,
        spec: &LevelSpec,
        nominal: u32,
        estimate: Duration,
        borrowing: LevelBorrowing,
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
            borrowing,
            requests: Requests::default(),
            lingering: BTreeSet::new(),
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

    /// A request `ticket` (its slot is filled in here) of the flow hashed
    /// `flow_hash` arrives at `now`
    /// (see [`Apf::admit_hashed`](crate::Apf::admit_hashed)); the other
    /// requests it dispatched go to `out`. The flow's `names` move into the
    /// request if it is admitted.
    pub(crate) fn admit(
        &mut self,
        ticket: Ticket,
        (flow_hash, names): (u64, &mut Names),
        mut work: WorkEstimate,
        now: Duration,
        out: &mut Vec<Ticket>,
    ) -> Admit {
        // The ticket's slot is the one the request will be filed in.
        let ticket = Ticket {
            slot: self.requests.next_slot(),
            ..ticket
        };
        work.initial_seats = work.initial_seats.max(1);
        self.queues.sync(now);
        let (queue, mut own) = match self.queues.start(ticket, flow_hash, work) {
            Err(why) => {
                self.drops.record(now);
                return Admit::Rejected(why);
            }
            Ok(Start::Executing) => (None, None),
            Ok(Start::Enqueued(queue)) => (Some(queue), None),
            Ok(Start::Dispatched(d)) => (Some(d.queue), Some(d)),
        };
        let mut request = Request {
            queue,
            work,
            phase: if queue.is_some() {
                Phase::Waiting
            } else {
                Phase::Executing
            },
            arrived: now,
            started: now,
            schema: std::mem::take(&mut names.0),
            flow: std::mem::take(&mut names.1),
            #[cfg(feature = "tower")]
            waker: None,
        };
        // The new request is dispatched here, before it is filed, if fair
        // queuing picks it.
        let requests = &mut self.requests;
        self.queues.dispatch(|d| {
            if d.ticket == ticket {
                own = Some(d);
            } else {
                if let Some(r) = requests.get_mut(&d.ticket) {
                    r.dispatched(d, now);
                }
                out.push(d.ticket);
            }
        });
        self.note_demand(now);
        if let Some(d) = own {
            request.dispatched(d, now);
        }
        self.requests.insert(ticket, request);
        if own.is_some() || queue.is_none() {
            Admit::Dispatched(ticket)
        } else {
            Admit::Queued(ticket)
        }
    }

    /// The request `ticket` finished running at `now` (see
    /// [`Apf::complete`](crate::Apf::complete)); what it dispatched goes to
    /// `out`. `None` if it was not executing.
    pub(crate) fn complete(
        &mut self,
        ticket: Ticket,
        now: Duration,
        out: &mut Vec<Ticket>,
    ) -> Option<Completed> {
        let r = self.requests.get_mut(&ticket)?;
        if r.phase != Phase::Executing {
            return None;
        }
        let queue = r.queue;
        let ran = now.saturating_sub(r.started);
        let linger = r.work.additional_latency;
        self.queues.sync(now);
        self.queues.finish(queue, r.work.initial_seats, ran);
        let completed = if linger.is_zero() {
            self.queues.release(queue, r.max_seats());
            self.requests.discard(&ticket);
            Completed::Released
        } else {
            r.phase = Phase::Lingering;
            let at = now.saturating_add(linger);
            self.lingering.insert((at, ticket));
            Completed::Lingering(at)
        };
        self.dispatch(now, out);
        Some(completed)
    }

    /// The waiting request `ticket` gives up at `now` (see
    /// [`Apf::cancel`](crate::Apf::cancel)): the request, if it was
    /// waiting.
    pub(crate) fn cancel(&mut self, ticket: Ticket, now: Duration) -> Option<Request> {
        let r = self.requests.get(&ticket)?;
        let (Phase::Waiting, Some(queue)) = (r.phase, r.queue) else {
            return None;
        };
        self.queues.sync(now);
        if !self.queues.cancel(queue, ticket) {
            return None;
        }
        self.drops.record(now);
        let r = self.requests.remove(&ticket);
        self.note_demand(now);
        r
    }

    /// When its first lingering request frees its seats, and which it is.
    pub(crate) fn next_release(&self) -> Option<(Duration, Ticket)> {
        self.lingering.first().copied()
    }

    /// Frees the seats of the request whose additional latency ends first,
    /// at that time, and dispatches what then fits into `out`.
    pub(crate) fn release_lingering(&mut self, out: &mut Vec<Ticket>) {
        let Some((at, ticket)) = self.lingering.pop_first() else {
            return;
        };
        let Some(r) = self.requests.remove(&ticket) else {
            return;
        };
        self.queues.sync(at);
        self.queues.release(r.queue, r.max_seats());
        self.dispatch(at, out);
    }

    /// Dispatches what fits at `at`, marks it executing, and records the
    /// seat demand; every ticket dispatched goes to `out`.
    pub(crate) fn dispatch(&mut self, at: Duration, out: &mut Vec<Ticket>) {
        let requests = &mut self.requests;
        self.queues.dispatch(|d| {
            if let Some(r) = requests.get_mut(&d.ticket) {
                r.dispatched(d, at);
            }
            out.push(d.ticket);
        });
        self.note_demand(at);
    }

    /// Records the seat demand at `at`, for the division of the seats.
    pub(crate) fn note_demand(&mut self, at: Duration) {
        let demand = self.queues.seat_demand();
        self.borrowing.set_demand(at, demand);
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
    /// Its queue (none on exempt and rejecting levels).
    pub(crate) queue: Option<usize>,
    pub(crate) work: WorkEstimate,
    pub(crate) phase: Phase,
    pub(crate) arrived: Duration,
    pub(crate) started: Duration,
    /// Flow schema, for the dump (empty if not named).
    pub(crate) schema: Name,
    /// Flow distinguisher, for the dump (empty if not named).
    pub(crate) flow: Name,
    /// The layer's task waiting for its dispatch.
    #[cfg(feature = "tower")]
    pub(crate) waker: Option<std::task::Waker>,
}

/// A flow's schema and distinguisher, for the dump.
pub(crate) type Names = (Name, Name);

/// What became of a request that finished running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Completed {
    /// Its seats are free.
    Released,
    /// It holds its seats until then, for its additional latency.
    Lingering(Duration),
}

impl Request {
    /// It leaves its queue to execute at `at`, as `d` says.
    fn dispatched(&mut self, d: Dispatch, at: Duration) {
        self.phase = Phase::Executing;
        self.queue = Some(d.queue);
        self.started = at;
        self.work = d.work;
    }

    /// The most seats it holds.
    pub(crate) fn max_seats(&self) -> u64 {
        u64::from(self.work.initial_seats.max(self.work.final_seats))
    }
}
