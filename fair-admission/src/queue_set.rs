//! Priority levels, their seats, and fair queuing between flows.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::{Dealer, Hand};
use crate::ConfigError;

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

/// Identifies a priority level of an [`Apf`], in the order the builder
/// added them.
///
/// ```
/// use fair_admission::{Apf, LimitResponse};
/// let apf = Apf::builder(10).level("global", 1, LimitResponse::Reject).build()?;
/// assert_eq!(apf.level_id("global").map(|l| l.index()), Some(0));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelId {
    /// The [`Apf`] it belongs to (clones of an `Apf` share it).
    apf: u64,
    index: usize,
}

/// Numbers each built [`Apf`], so a [`LevelId`] knows whose it is.
static NEXT_APF: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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

impl LevelId {
    /// The level's position in the builder's order.
    ///
    /// ```
    /// # use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(10).exempt("system").level("rest", 1, LimitResponse::Reject).build()?;
    /// assert_eq!(apf.level_id("rest").unwrap().index(), 1);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn index(self) -> usize {
        self.index
    }
}

/// One admitted request, from [`Apf::admit`]: hand it back to
/// [`Apf::complete`] when it finishes or to [`Apf::cancel`] if it stops
/// waiting.
///
/// ```
/// use fair_admission::{Admit, Apf, LimitResponse};
/// let mut apf = Apf::builder(1).level("l", 1, LimitResponse::Reject).build()?;
/// let level = apf.level_id("l").unwrap();
/// let Admit::Dispatched(ticket) = apf.admit(level, &"flow", 1) else { unreachable!() };
/// # let _ = ticket;
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(u64);

/// What became of a request handed to [`Apf::admit`].
///
/// ```
/// use fair_admission::{Admit, Apf, LimitResponse, Rejected};
/// let mut apf = Apf::builder(1).level("l", 1, LimitResponse::Reject).build()?;
/// let level = apf.level_id("l").unwrap();
/// assert!(matches!(apf.admit(level, &"a", 1), Admit::Dispatched(_)));
/// assert_eq!(apf.admit(level, &"b", 1), Admit::Rejected(Rejected::NoSeat));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admit {
    /// It holds its seats now and may run.
    Dispatched(Ticket),
    /// It waits in a queue; a later [`Apf::complete`] or [`Apf::cancel`]
    /// lists it when it is dispatched.
    Queued(Ticket),
    /// Refused: answer 429 and let the client back off.
    Rejected(Rejected),
}

/// Why a request was refused.
///
/// ```
/// use fair_admission::Rejected;
/// assert_eq!(Rejected::QueueFull.to_string(), "the queue chosen for the flow is full");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The least loaded queue of the flow's hand was full.
    QueueFull,
    /// A [`LimitResponse::Reject`] level had no free seat.
    NoSeat,
    /// The request waited longer than its caller allowed and was cancelled.
    TimedOut,
    /// The [`LevelId`] does not belong to this [`Apf`] (it came from
    /// another one): nothing was admitted or counted.
    UnknownLevel,
    /// The request would have to wait, but the tokio runtime has no time
    /// driver to bound the wait (build it with `enable_time`).
    NoTimer,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rejected::QueueFull => "the queue chosen for the flow is full",
            Rejected::NoSeat => "the priority level has no free seat",
            Rejected::TimedOut => "the request waited in its queue too long",
            Rejected::UnknownLevel => "the priority level belongs to another Apf",
            Rejected::NoTimer => "the runtime has no timer to bound the wait (enable_time)",
        })
    }
}

impl std::error::Error for Rejected {}

/// A priority level's counts, from [`Apf::level_stats`].
///
/// ```
/// use fair_admission::{Apf, LimitResponse};
/// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
/// let s = apf.level_stats(apf.level_id("l").unwrap()).unwrap();
/// assert_eq!((s.seats, s.seats_in_use, s.waiting), (10, 0, 0));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LevelStats {
    /// The level's concurrency limit in seats (0 for an exempt level: it has
    /// no limit).
    pub seats: u32,
    /// Seats held by executing requests.
    pub seats_in_use: u32,
    /// Requests waiting in queues.
    pub waiting: usize,
    /// Requests dispatched so far.
    pub dispatched: u64,
    /// Requests rejected so far (including cancelled waits).
    pub rejected: u64,
}

/// Kubernetes' API Priority and Fairness for one server: priority levels
/// that share the server's seats by their shares, each either rejecting or
/// queuing what does not fit, with shuffle sharding of flows onto queues
/// and fair queuing between queues, plus exempt levels that bypass it all.
///
/// It is a plain state machine with no clock and no threads: the caller
/// says when a request arrives ([`admit`](Self::admit)), finishes
/// ([`complete`](Self::complete), with how long it ran) or gives up waiting
/// ([`cancel`](Self::cancel)), and learns which waiting requests were
/// dispatched. The `tower` feature wraps it in a layer.
///
/// Fair queuing: each queue keeps a virtual finish time, the seat-seconds
/// it has been served since it last became busy; the next request is
/// always taken from the queue whose head would finish first, charged its
/// width times an estimate of the service time and corrected by the real
/// time when it completes. Under overload every busy queue therefore gets
/// an equal share of seat-seconds, and a queue that asks for less than its
/// share gets all it asks for (max-min fairness). Within a queue, requests
/// are first in, first out.
///
/// ```
/// use fair_admission::{Admit, Apf, LimitResponse};
/// use std::time::Duration;
/// let mut apf = Apf::builder(1)
///     .level("workload", 1, LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 })
///     .build()?;
/// let level = apf.level_id("workload").unwrap();
/// let Admit::Dispatched(first) = apf.admit(level, &"alice", 1) else { unreachable!() };
/// let Admit::Queued(second) = apf.admit(level, &"bob", 1) else { unreachable!() };
/// // The first finishes after 100 ms: its seat goes to the second.
/// assert_eq!(apf.complete(first, Duration::from_millis(100)), Some(vec![second]));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Apf {
    id: u64,
    levels: Vec<Level>,
    tickets: HashMap<Ticket, Place>,
    next_ticket: u64,
    hasher: foldhash::fast::FixedState,
}

#[derive(Debug, Clone)]
struct Level {
    name: String,
    kind: Kind,
    seats: u32,
    in_use: u32,
    dispatched: u64,
    rejected: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Exempt,
    Reject,
    Queue(Queues),
}

#[derive(Debug, Clone)]
struct Queues {
    dealer: Dealer,
    limit: usize,
    queues: Vec<Queue>,
    /// Requests waiting in all the queues, kept as they come and go so
    /// that reading it does not walk every queue.
    waiting: usize,
    /// The virtual start of the last dispatch: a queue that turns busy
    /// starts here, so idle time earns no credit.
    vtime: f64,
    /// Estimated service time in seconds, a moving average of what
    /// completions report.
    estimate: f64,
}

#[derive(Debug, Clone, Default)]
struct Queue {
    waiting: VecDeque<(Ticket, u32)>,
    waiting_seats: u32,
    executing_seats: u32,
    /// Seat-seconds (virtual) this queue has been served up to.
    vfinish: f64,
}

#[derive(Debug, Clone, Copy)]
enum Place {
    Waiting {
        level: usize,
        queue: usize,
    },
    Executing {
        level: usize,
        queue: Option<usize>,
        width: u32,
        charged: f64,
    },
}

impl Apf {
    /// A builder for a server with `seats` seats in all (its concurrency
    /// limit), shared by the levels it is given.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(600)
    ///     .exempt("exempt")
    ///     .level("leader-election", 10, LimitResponse::Queue { queues: 16, queue_length_limit: 50, hand_size: 4 })
    ///     .level("workload-low", 30, LimitResponse::Queue { queues: 128, queue_length_limit: 50, hand_size: 6 })
    ///     .level("catch-all", 5, LimitResponse::Reject)
    ///     .build()?;
    /// // Seats are split by shares, rounded up: 600 · 30 / 45.
    /// assert_eq!(apf.level_stats(apf.level_id("workload-low").unwrap()).unwrap().seats, 400);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn builder(seats: u32) -> ApfBuilder {
        ApfBuilder {
            seats,
            levels: Vec::new(),
            estimate: Duration::from_millis(100),
        }
    }

    /// The level named `name`.
    ///
    /// ```
    /// # use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// assert!(apf.level_id("l").is_some());
    /// assert!(apf.level_id("nope").is_none());
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_id(&self, name: &str) -> Option<LevelId> {
        self.levels
            .iter()
            .position(|l| l.name == name)
            .map(|index| LevelId {
                apf: self.id,
                index,
            })
    }

    /// This `Apf`'s levels, in the builder's order.
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    pub(crate) fn level_ids(&self) -> impl Iterator<Item = LevelId> + '_ {
        (0..self.levels.len()).map(|index| LevelId {
            apf: self.id,
            index,
        })
    }

    /// The name `level` was built with, or `None` if it belongs to another
    /// `Apf`.
    ///
    /// ```
    /// # use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(10).exempt("system").build()?;
    /// let level = apf.level_id("system").unwrap();
    /// assert_eq!(apf.level_name(level), Some("system"));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_name(&self, level: LevelId) -> Option<&str> {
        Some(self.levels[self.index_of(level)?].name.as_str())
    }

    /// `level`'s index here, if it is one of this `Apf`'s levels.
    fn index_of(&self, level: LevelId) -> Option<usize> {
        (level.apf == self.id && level.index < self.levels.len()).then_some(level.index)
    }

    /// A request of flow `flow` needing `width` seats arrives at `level`.
    /// The width is taken as at least 1 and at most
    /// [`MAX_SEATS_PER_REQUEST`] (Kubernetes' cap, so that one wide request
    /// cannot drain a level while it waits for its seats) and the level's
    /// seats (a wider request could never run). The flow is hashed deterministically,
    /// so the same flow always gets the same hand. A `level` from another
    /// `Apf` is refused with [`Rejected::UnknownLevel`].
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LimitResponse};
    /// let mut apf = Apf::builder(4).exempt("system").build()?;
    /// let system = apf.level_id("system").unwrap();
    /// // Exempt: never queued, never rejected.
    /// for _ in 0..10 {
    ///     assert!(matches!(apf.admit(system, &"kubelet", 1), Admit::Dispatched(_)));
    /// }
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn admit<F: Hash + ?Sized>(&mut self, level: LevelId, flow: &F, width: u32) -> Admit {
        let Some(index) = self.index_of(level) else {
            return Admit::Rejected(Rejected::UnknownLevel);
        };
        let hash = self.hasher.hash_one(flow);
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        let l = &mut self.levels[index];
        let width = width.clamp(1, l.seats.clamp(1, MAX_SEATS_PER_REQUEST));
        match &mut l.kind {
            Kind::Reject if l.seats - l.in_use < width => {
                l.rejected += 1;
                Admit::Rejected(Rejected::NoSeat)
            }
            // Exempt, or a rejecting level with room: it runs at once.
            Kind::Exempt | Kind::Reject => {
                l.in_use = l.in_use.saturating_add(width);
                l.dispatched += 1;
                self.tickets
                    .insert(ticket, executing(index, None, width, 0.0));
                Admit::Dispatched(ticket)
            }
            Kind::Queue(qs) => {
                // The least loaded queue of the hand, the first on ties.
                let queue = qs
                    .dealer
                    .deal(hash)
                    .min_by_key(|&q| qs.queues[q].waiting_seats + qs.queues[q].executing_seats)
                    .expect("a hand has at least one queue");
                let q = &mut qs.queues[queue];
                if q.waiting.len() >= qs.limit {
                    l.rejected += 1;
                    return Admit::Rejected(Rejected::QueueFull);
                }
                if q.waiting.is_empty() {
                    q.vfinish = q.vfinish.max(qs.vtime);
                }
                q.waiting.push_back((ticket, width));
                q.waiting_seats += width;
                qs.waiting += 1;
                self.tickets.insert(
                    ticket,
                    Place::Waiting {
                        level: index,
                        queue,
                    },
                );
                // Only the new request can be dispatched: before it came,
                // the queue that would be served next did not fit.
                if self.dispatch(index).contains(&ticket) {
                    Admit::Dispatched(ticket)
                } else {
                    Admit::Queued(ticket)
                }
            }
        }
    }

    /// The request `ticket` finished after running for `service`: its seats
    /// are freed, its queue is charged what it really used, and waiting
    /// requests are dispatched into the free seats. Returns them, in
    /// dispatch order, or `None` if `ticket` is not executing (unknown,
    /// still waiting, or already completed).
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LimitResponse};
    /// use std::time::Duration;
    /// let mut apf = Apf::builder(1).level("l", 1, LimitResponse::Reject).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// let Admit::Dispatched(t) = apf.admit(level, &"f", 1) else { unreachable!() };
    /// assert_eq!(apf.complete(t, Duration::from_millis(5)), Some(vec![]));
    /// assert_eq!(apf.complete(t, Duration::from_millis(5)), None);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn complete(&mut self, ticket: Ticket, service: Duration) -> Option<Vec<Ticket>> {
        let Some(&Place::Executing {
            level,
            queue,
            width,
            charged,
        }) = self.tickets.get(&ticket)
        else {
            return None;
        };
        self.tickets.remove(&ticket);
        let l = &mut self.levels[level];
        l.in_use = l.in_use.saturating_sub(width);
        if let (Kind::Queue(qs), Some(queue)) = (&mut l.kind, queue) {
            let secs = service.min(MAX_CHARGED_SERVICE).as_secs_f64();
            let q = &mut qs.queues[queue];
            q.executing_seats -= width;
            q.vfinish += f64::from(width) * secs - charged;
            qs.estimate += (secs - qs.estimate) / 16.0;
        }
        Some(self.dispatch(level))
    }

    /// The waiting request `ticket` gives up (its caller timed out or went
    /// away): it leaves its queue and counts as rejected. Returns the
    /// requests dispatched because it left, or `None` if it was not waiting
    /// (then, if it was dispatched, it must be completed instead).
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LimitResponse};
    /// let mut apf = Apf::builder(1)
    ///     .level("l", 1, LimitResponse::Queue { queues: 4, queue_length_limit: 10, hand_size: 2 })
    ///     .build()?;
    /// let level = apf.level_id("l").unwrap();
    /// let Admit::Dispatched(running) = apf.admit(level, &"a", 1) else { unreachable!() };
    /// let Admit::Queued(waiting) = apf.admit(level, &"b", 1) else { unreachable!() };
    /// assert_eq!(apf.cancel(waiting), Some(vec![]));
    /// assert_eq!(apf.cancel(running), None);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn cancel(&mut self, ticket: Ticket) -> Option<Vec<Ticket>> {
        let Some(&Place::Waiting { level, queue }) = self.tickets.get(&ticket) else {
            return None;
        };
        self.tickets.remove(&ticket);
        let l = &mut self.levels[level];
        l.rejected += 1;
        if let Kind::Queue(qs) = &mut l.kind {
            let q = &mut qs.queues[queue];
            if let Some(at) = q.waiting.iter().position(|&(t, _)| t == ticket) {
                let (_, width) = q.waiting.remove(at).expect("found above");
                q.waiting_seats -= width;
                qs.waiting -= 1;
            }
        }
        Some(self.dispatch(level))
    }

    /// The queues `flow` is dealt at `level`, or `None` if the level does
    /// not queue (or belongs to another `Apf`).
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// let apf = Apf::builder(10)
    ///     .level("l", 1, LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 })
    ///     .build()?;
    /// let hand: Vec<usize> = apf.hand(apf.level_id("l").unwrap(), &"alice").unwrap().collect();
    /// assert_eq!(hand.len(), 8);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn hand<F: Hash + ?Sized>(&self, level: LevelId, flow: &F) -> Option<Hand> {
        match &self.levels[self.index_of(level)?].kind {
            Kind::Queue(qs) => Some(qs.dealer.deal(self.hasher.hash_one(flow))),
            _ => None,
        }
    }

    /// The counts of `level`, or `None` if it belongs to another `Apf`.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// let mut apf = Apf::builder(2).level("l", 1, LimitResponse::Reject).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// apf.admit(level, &"f", 2);
    /// apf.admit(level, &"f", 1);
    /// let s = apf.level_stats(level).unwrap();
    /// assert_eq!((s.seats_in_use, s.dispatched, s.rejected), (2, 1, 1));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_stats(&self, level: LevelId) -> Option<LevelStats> {
        let l = &self.levels[self.index_of(level)?];
        let waiting = match &l.kind {
            Kind::Queue(qs) => qs.waiting,
            _ => 0,
        };
        Some(LevelStats {
            seats: l.seats,
            seats_in_use: l.in_use,
            waiting,
            dispatched: l.dispatched,
            rejected: l.rejected,
        })
    }

    /// Dispatches from `level`'s queues while the next request by fair
    /// queuing fits in the free seats.
    fn dispatch(&mut self, level: usize) -> Vec<Ticket> {
        let mut out = Vec::new();
        let l = &mut self.levels[level];
        let Kind::Queue(qs) = &mut l.kind else {
            return out;
        };
        loop {
            // The busy queue whose head would finish first (the first on ties).
            let mut best: Option<(usize, f64)> = None;
            for (i, q) in qs.queues.iter().enumerate() {
                if let Some(&(_, width)) = q.waiting.front() {
                    let finish = q.vfinish.max(qs.vtime) + f64::from(width) * qs.estimate;
                    if best.is_none_or(|(_, f)| finish < f) {
                        best = Some((i, finish));
                    }
                }
            }
            let Some((i, _)) = best else { break };
            let q = &mut qs.queues[i];
            let &(ticket, width) = q.waiting.front().expect("a busy queue");
            if l.seats - l.in_use < width {
                break;
            }
            q.waiting.pop_front();
            q.waiting_seats -= width;
            qs.waiting -= 1;
            q.executing_seats += width;
            let start = q.vfinish.max(qs.vtime);
            let charged = f64::from(width) * qs.estimate;
            qs.vtime = start;
            q.vfinish = start + charged;
            l.in_use += width;
            l.dispatched += 1;
            self.tickets
                .insert(ticket, executing(level, Some(i), width, charged));
            out.push(ticket);
        }
        out
    }
}

fn executing(level: usize, queue: Option<usize>, width: u32, charged: f64) -> Place {
    Place::Executing {
        level,
        queue,
        width,
        charged,
    }
}

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
    seats: u32,
    levels: Vec<(String, u32, Option<LimitResponse>)>,
    estimate: Duration,
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
        self.levels.push((name.to_owned(), shares, Some(limit)));
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
        self.levels.push((name.to_owned(), 0, None));
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
        let estimate = self.estimate.as_secs_f64();
        let total_shares: u64 = self.levels.iter().map(|&(_, s, _)| u64::from(s)).sum();
        let mut levels = Vec::with_capacity(self.levels.len());
        for (i, (name, shares, limit)) in self.levels.iter().enumerate() {
            if self.levels[..i].iter().any(|(n, _, _)| n == name) {
                return Err(ConfigError::new("name", "unique among the levels", name));
            }
            let kind = match *limit {
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
                        vtime: 0.0,
                        estimate,
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
            levels.push(Level {
                name: name.clone(),
                kind,
                seats,
                in_use: 0,
                dispatched: 0,
                rejected: 0,
            });
        }
        Ok(Apf {
            id: NEXT_APF.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            levels,
            tickets: HashMap::new(),
            next_ticket: 0,
            hasher: foldhash::fast::FixedState::with_seed(0),
        })
    }
}
