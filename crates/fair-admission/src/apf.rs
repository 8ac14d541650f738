//! Priority levels, their seats, and the tickets of the requests they admit.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::Hand;
use crate::builder::{ApfBuilder, BORROWING_PERIOD, MAX_CHARGED_SERVICE, MAX_SEATS_PER_REQUEST};
use crate::drops::Drops;
use crate::queue_set::Queues;
use crate::reallocate::{Integrator, allocate};

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
    pub(crate) apf: u64,
    pub(crate) index: usize,
}

/// Numbers each built [`Apf`], so a [`LevelId`] knows whose it is.
pub(crate) static NEXT_APF: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The weight of the past in the smoothed seat demand (per period).
const SMOOTHING: f64 = 0.977;

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
pub struct Ticket(pub(crate) u64);

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
    pub(crate) id: u64,
    pub(crate) levels: Vec<Level>,
    pub(crate) tickets: HashMap<Ticket, Place>,
    pub(crate) next_ticket: u64,
    pub(crate) hasher: foldhash::fast::FixedState,
    /// The caller's clock, as last given to [`advance`](Apf::advance).
    pub(crate) now: Duration,
    /// When limits were last reallocated.
    pub(crate) adjusted_at: Duration,
    /// How often limits are reallocated.
    pub(crate) period: Duration,
    /// Whether any level may lend seats (if none may, every level keeps its
    /// nominal limit and reallocation is skipped).
    pub(crate) lends: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    /// The level's current concurrency limit: its nominal seats until the
    /// first reallocation, then what borrowing gives it.
    pub(crate) seats: u32,
    /// Seats from the level's shares.
    pub(crate) nominal: u32,
    /// The seats it may lend: its limit never falls below `nominal − lendable`.
    pub(crate) lendable: u32,
    /// The most seats it may borrow: its limit never rises above
    /// `nominal + borrowing`.
    pub(crate) borrowing: u32,
    pub(crate) in_use: u32,
    pub(crate) dispatched: u64,
    pub(crate) rejected: u64,
    /// Seat demand (in use plus waiting) over the current period.
    pub(crate) demand: Integrator,
    /// Demand smoothed over periods, as Kubernetes smooths it.
    pub(crate) smoothed: f64,
    /// Recent refusals and the `Retry-After` they call for.
    pub(crate) drops: Drops,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Exempt,
    Reject,
    Queue(Queues),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Place {
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
            period: BORROWING_PERIOD,
            orphan_lending: false,
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
    #[cfg(feature = "tower")]
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
        let second = self.now.as_secs();
        let l = &mut self.levels[index];
        let width = width.clamp(1, l.nominal.clamp(1, MAX_SEATS_PER_REQUEST));
        match &mut l.kind {
            Kind::Reject if !fits(l.seats, l.in_use, width) => {
                l.rejected += 1;
                l.drops.record(second);
                Admit::Rejected(Rejected::NoSeat)
            }
            // Exempt, or a rejecting level with room: it runs at once.
            Kind::Exempt | Kind::Reject => {
                l.in_use = l.in_use.saturating_add(width);
                l.dispatched += 1;
                self.tickets
                    .insert(ticket, executing(index, None, width, 0.0));
                self.sample(index);
                Admit::Dispatched(ticket)
            }
            Kind::Queue(qs) => {
                let queue = qs.choose(hash);
                let q = &mut qs.queues[queue];
                // Kubernetes refuses only when the queue is full *and* every
                // seat is taken: with a seat free the request may still
                // run at once.
                if q.waiting.len() >= qs.limit && l.in_use >= l.seats {
                    l.rejected += 1;
                    l.drops.record(second);
                    return Admit::Rejected(Rejected::QueueFull);
                }
                if q.waiting.is_empty() {
                    q.vfinish = q.vfinish.max(qs.vtime);
                }
                let work = f64::from(width) * qs.estimate;
                q.waiting.push_back((ticket, width, work));
                q.waiting_work += work;
                qs.waiting += 1;
                qs.waiting_seats += u64::from(width);
                self.tickets.insert(
                    ticket,
                    Place::Waiting {
                        level: index,
                        queue,
                    },
                );
                // Only the new request can be dispatched: before it came,
                // the queue that would be served next did not fit.
                let dispatched = self.dispatch(index);
                self.sample(index);
                if dispatched.contains(&ticket) {
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
        let dispatched = self.dispatch(level);
        self.sample(level);
        Some(dispatched)
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
        let second = self.now.as_secs();
        let l = &mut self.levels[level];
        l.rejected += 1;
        l.drops.record(second);
        if let Kind::Queue(qs) = &mut l.kind {
            let q = &mut qs.queues[queue];
            if let Some(at) = q.waiting.iter().position(|&(t, ..)| t == ticket) {
                let (_, width, work) = q.waiting.remove(at).expect("found above");
                q.take_work(work);
                qs.waiting -= 1;
                qs.waiting_seats -= u64::from(width);
            }
        }
        let dispatched = self.dispatch(level);
        self.sample(level);
        Some(dispatched)
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

    /// Tells the `Apf` the time, on any monotonic clock of the caller's
    /// (the layer uses the time since it was made). Time drives two things
    /// Kubernetes does with it:
    ///
    /// - **Borrowing.** Each level's seat demand (seats in use plus seats
    ///   waiting) is averaged over time; once every
    ///   [`borrowing_period`](ApfBuilder::borrowing_period) the server's
    ///   seats are divided again, levels with idle seats lending them (down
    ///   to their nominal seats less their lendable seats) to busy levels
    ///   (up to their nominal seats plus their borrowing limit), in
    ///   proportion to each level's smoothed demand. Requests that fit under
    ///   the new limits are dispatched and returned.
    /// - **`Retry-After`.** Refusals are counted per second for
    ///   [`retry_after`](Self::retry_after).
    ///
    /// A time earlier than one already given is ignored. Without any call
    /// every level keeps its nominal seats and advises a 1 s retry.
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LimitResponse};
    /// use std::time::Duration;
    /// let queue = LimitResponse::Queue { queues: 8, queue_length_limit: 50, hand_size: 2 };
    /// let mut apf = Apf::builder(4)
    ///     .level("busy", 1, queue)
    ///     .level("idle", 1, queue)
    ///     .lending(100, None) // "idle" may lend all its seats
    ///     .build()?;
    /// let busy = apf.level_id("busy").unwrap();
    /// for i in 0..4 {
    ///     apf.admit(busy, &i, 1); // 2 run, 2 wait
    /// }
    /// // After a period of "busy" wanting 4 seats and "idle" none:
    /// let dispatched = apf.advance(Duration::from_secs(10));
    /// assert_eq!(dispatched.len(), 2);
    /// assert_eq!(apf.level_stats(busy).unwrap().seats, 4);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn advance(&mut self, now: Duration) -> Vec<Ticket> {
        if now <= self.now {
            return Vec::new();
        }
        self.now = now;
        if !self.lends || now.saturating_sub(self.adjusted_at) < self.period {
            return Vec::new();
        }
        self.adjusted_at = now;
        self.reallocate()
    }

    /// When seats are next reallocated (on the clock of
    /// [`advance`](Self::advance)), or `None` if no level lends.
    #[cfg(feature = "tower")]
    pub(crate) fn next_reallocation(&self) -> Option<Duration> {
        self.lends
            .then(|| self.adjusted_at.saturating_add(self.period))
    }

    /// When seats were last reallocated (zero: never).
    #[cfg(feature = "tower")]
    pub(crate) fn last_reallocation(&self) -> Duration {
        self.adjusted_at
    }

    /// The `Retry-After` `level` advises now, or `None` if the level
    /// belongs to another `Apf`. It starts at 1 s and follows Kubernetes'
    /// rule, evaluated whenever a refusal falls in a new second (by the
    /// clock [`advance`](Self::advance) is given): it doubles (up to
    /// [`MAX_RETRY_AFTER`], 32 s) when the level refused at least three times
    /// the current value in requests over the last current-value seconds,
    /// at most once per current-value seconds; it drops by one second when
    /// the level refused fewer requests than the current value in seconds.
    ///
    /// ```
    /// use fair_admission::{Apf, LimitResponse};
    /// use std::time::Duration;
    /// let mut apf = Apf::builder(1).level("l", 1, LimitResponse::Reject).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// apf.admit(l, &"runs", 1);
    /// for _ in 0..3 {
    ///     apf.admit(l, &"refused", 1); // three refusals in second 0
    /// }
    /// apf.advance(Duration::from_secs(1));
    /// apf.admit(l, &"refused", 1); // the first refusal of second 1
    /// assert_eq!(apf.retry_after(l), Some(Duration::from_secs(2)));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn retry_after(&self, level: LevelId) -> Option<Duration> {
        let l = &self.levels[self.index_of(level)?];
        Some(Duration::from_secs(l.drops.retry_after))
    }

    /// Records `level`'s seat demand as it is now.
    fn sample(&mut self, level: usize) {
        if self.lends {
            let now = self.now;
            let l = &mut self.levels[level];
            let demand = l.seat_demand();
            l.demand.set(now, demand);
        }
    }

    /// Divides the seats again from the demand seen since the last time,
    /// and dispatches what fits under the new limits.
    fn reallocate(&mut self) -> Vec<Ticket> {
        let now = self.now;
        let mut bounds = Vec::with_capacity(self.levels.len());
        let mut required = 0.0;
        for l in self
            .levels
            .iter_mut()
            .filter(|l| !matches!(l.kind, Kind::Exempt))
        {
            let (average, deviation) = l.demand.take(now);
            let envelope = average + deviation;
            l.smoothed = envelope.max(SMOOTHING * l.smoothed + (1.0 - SMOOTHING) * envelope);
            let lower = f64::from(l.nominal.saturating_sub(l.lendable));
            let upper = f64::from(l.nominal.saturating_add(l.borrowing));
            bounds.push((lower, upper, l.smoothed.clamp(lower, upper)));
            required += f64::from(l.nominal);
        }
        let shares = allocate(required, &bounds);
        let mut out = Vec::new();
        let limited = self
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| !matches!(l.kind, Kind::Exempt))
            .map(|(i, l)| (i, l.nominal))
            .collect::<Vec<_>>();
        for (&(i, nominal), share) in limited.iter().zip(&shares) {
            // A level keeps at least one seat; without an allocation (no
            // level wants anything) it keeps its nominal seats.
            let seats = share.map_or(f64::from(nominal), |s| s.round().max(1.0));
            self.levels[i].seats = seats as u32;
        }
        for (i, _) in limited {
            out.extend(self.dispatch(i));
            self.sample(i);
        }
        out
    }

    /// Dispatches from `level`'s queues while the next request by fair
    /// queuing fits in the free seats.
    fn dispatch(&mut self, level: usize) -> Vec<Ticket> {
        let mut out = Vec::new();
        let l = &mut self.levels[level];
        let Kind::Queue(qs) = &mut l.kind else {
            return out;
        };
        while let Some(i) = qs.next_to_serve() {
            let q = &mut qs.queues[i];
            let &(ticket, width, work) = q.waiting.front().expect("a busy queue");
            if !(fits(l.seats, l.in_use, width) || l.in_use == 0) {
                // Nothing narrower may overtake it: the head of the queue
                // that fair queuing serves next waits for its seats. (A
                // request wider than a limit that borrowing has shrunk runs
                // alone, when nothing else does.)
                break;
            }
            q.waiting.pop_front();
            q.take_work(work);
            qs.waiting -= 1;
            qs.waiting_seats -= u64::from(width);
            q.executing_seats += width;
            let start = q.vfinish.max(qs.vtime);
            let charged = f64::from(width) * qs.estimate;
            qs.vtime = start;
            q.vfinish = start + charged;
            qs.robin = i;
            l.in_use = l.in_use.saturating_add(width);
            l.dispatched += 1;
            self.tickets
                .insert(ticket, executing(level, Some(i), width, charged));
            out.push(ticket);
        }
        out
    }
}

/// Whether `width` more seats fit under a limit of `seats` with `in_use`
/// taken.
pub(crate) fn fits(seats: u32, in_use: u32, width: u32) -> bool {
    seats.saturating_sub(in_use) >= width
}

impl Level {
    /// Seats in use plus seats waiting: what the level would use if it could.
    fn seat_demand(&self) -> f64 {
        let waiting = match &self.kind {
            Kind::Queue(qs) => qs.waiting_seats,
            _ => 0,
        };
        f64::from(self.in_use) + waiting as f64
    }
}

pub(crate) fn executing(level: usize, queue: Option<usize>, width: u32, charged: f64) -> Place {
    Place::Executing {
        level,
        queue,
        width,
        charged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LimitResponse;

    fn queuing(queues: usize, hand_size: usize, queue_length_limit: usize) -> LimitResponse {
        LimitResponse::Queue {
            queues,
            queue_length_limit,
            hand_size,
        }
    }

    /// The queue `ticket` waits or runs in.
    fn queue_of(apf: &Apf, ticket: Ticket) -> usize {
        match apf.tickets[&ticket] {
            Place::Waiting { queue, .. } => queue,
            Place::Executing { queue, .. } => queue.expect("a queued level"),
        }
    }

    fn ticket(admit: Admit) -> Ticket {
        match admit {
            Admit::Dispatched(t) | Admit::Queued(t) => t,
            Admit::Rejected(why) => panic!("rejected: {why}"),
        }
    }

    /// A flow whose hand at `level` starts with `first`.
    fn flow_starting_at(apf: &Apf, level: LevelId, first: usize) -> String {
        (0..)
            .map(|i| format!("flow-{i}"))
            .find(|f| apf.hand(level, f.as_str()).unwrap().next() == Some(first))
            .unwrap()
    }

    #[test]
    fn a_full_queue_refuses_only_when_every_seat_is_taken() {
        let mut apf = Apf::builder(4)
            .level("l", 1, queuing(1, 1, 1))
            .build()
            .unwrap();
        let l = apf.level_id("l").unwrap();
        assert!(matches!(apf.admit(l, "a", 1), Admit::Dispatched(_)));
        // Four seats wide: it waits for the three free seats plus one.
        assert!(matches!(apf.admit(l, "b", 4), Admit::Queued(_)));
        // The queue is full, but a seat is free: Kubernetes enqueues.
        assert!(matches!(apf.admit(l, "c", 1), Admit::Queued(_)));
        assert_eq!(apf.level_stats(l).unwrap().waiting, 2);
        // With every seat taken, a full queue refuses.
        let mut apf = Apf::builder(1)
            .level("l", 1, queuing(1, 1, 1))
            .build()
            .unwrap();
        let l = apf.level_id("l").unwrap();
        ticket(apf.admit(l, "a", 1));
        ticket(apf.admit(l, "b", 1));
        assert_eq!(apf.admit(l, "c", 1), Admit::Rejected(Rejected::QueueFull));
    }

    /// On a level of `seats` seats with 2 queues, both in every hand, one
    /// flow sends three requests, the first `first_width` seats wide and the
    /// others 1: the position in the flow's hand of each one's queue.
    fn three_requests(seats: u32, first_width: u32) -> [usize; 3] {
        let mut apf = Apf::builder(seats)
            .level("l", 1, queuing(2, 2, 50))
            .build()
            .unwrap();
        let l = apf.level_id("l").unwrap();
        let hand: Vec<usize> = apf.hand(l, "f").unwrap().collect();
        [first_width, 1, 1].map(|width| {
            let t = ticket(apf.admit(l, "f", width));
            hand.iter().position(|&q| q == queue_of(&apf, t)).unwrap()
        })
    }

    #[test]
    fn a_flow_joins_the_queue_with_the_least_waiting_work_and_ties_rotate() {
        // All three run at once, so no work ever waits: the search starts
        // one card further along the hand with each request, and ties go
        // round the hand. Seats executing do not count: the third joins the
        // queue running 10 seats rather than the one running 1.
        assert_eq!(three_requests(100, 10), [0, 1, 0]);
        // The first takes every seat; the second waits in the other queue.
        // The third joins the first's queue: it runs 4 seats but has no
        // work waiting, and the other has one request waiting.
        assert_eq!(three_requests(4, 4), [0, 1, 0]);
    }

    #[test]
    fn equal_finish_times_are_served_round_robin() {
        let mut apf = Apf::builder(1)
            .level("l", 1, queuing(3, 1, 50))
            .build()
            .unwrap();
        let l = apf.level_id("l").unwrap();
        let [zero, one, two] = [0, 1, 2].map(|q| flow_starting_at(&apf, l, q));
        let running = ticket(apf.admit(l, one.as_str(), 1));
        let b = ticket(apf.admit(l, zero.as_str(), 1));
        let c = ticket(apf.admit(l, two.as_str(), 1));
        // Both waiting queues would finish at the same virtual time; the
        // search starts after queue 1, served last, so queue 2 goes first.
        let est = Duration::from_millis(100);
        assert_eq!(apf.complete(running, est), Some(vec![c]));
        assert_eq!(apf.complete(c, est), Some(vec![b]));
    }

    #[test]
    fn seats_are_divided_in_proportion_to_demand_within_the_bounds() {
        // Kubernetes' example shape: one level wants 20 seats (10 to 30),
        // one wants none but may not go below 5 (5 to 30); 20 seats in all.
        let shares = allocate(20.0, &[(10.0, 30.0, 20.0), (5.0, 30.0, 5.0)]);
        let seats: Vec<f64> = shares.iter().map(|s| s.unwrap().round()).collect();
        assert_eq!(seats, [15.0, 5.0]);
        // Equal demand: equal seats.
        let shares = allocate(20.0, &[(10.0, 30.0, 20.0), (5.0, 30.0, 20.0)]);
        let seats: Vec<f64> = shares.iter().map(|s| s.unwrap().round()).collect();
        assert_eq!(seats, [10.0, 10.0]);
        // Upper bounds bind: the rest goes to the other level.
        let shares = allocate(20.0, &[(0.0, 12.0, 100.0), (0.0, 30.0, 1.0)]);
        let seats: Vec<f64> = shares.iter().map(|s| s.unwrap().round()).collect();
        assert_eq!(seats, [12.0, 8.0]);
        // Nobody wants anything above a lower bound of zero: no answer.
        assert_eq!(allocate(20.0, &[(0.0, 30.0, 0.0)]), [None]);
    }

    #[test]
    fn demand_is_averaged_over_time_with_its_deviation() {
        let mut d = Integrator::default();
        d.set(Duration::ZERO, 10.0);
        d.set(Duration::from_secs(5), 30.0);
        let (average, deviation) = d.take(Duration::from_secs(10));
        assert_eq!((average, deviation), (20.0, 10.0));
        // Afresh: constant 30 since.
        assert_eq!(d.take(Duration::from_secs(20)), (30.0, 0.0));
    }

    #[test]
    fn retry_after_doubles_under_refusals_up_to_32_and_falls_by_one_when_they_stop() {
        let mut drops = Drops::default();
        let mut seen = Vec::new();
        // 100 refusals a second for 40 s.
        for second in 0..40 {
            for _ in 0..100 {
                drops.record(second);
            }
            seen.push(drops.retry_after);
        }
        // Raised at most once per current value: 1 → 2 at 1 s, → 4 at 3 s,
        // → 8 at 7 s, → 16 at 15 s, → 32 at 31 s, and no further.
        let raised: Vec<(usize, u64)> = seen
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1] != w[0])
            .map(|(i, w)| (i + 1, w[1]))
            .collect();
        assert_eq!(raised, [(1, 2), (3, 4), (7, 8), (15, 16), (31, 32)]);
        // Then one refusal every other second. Until 32 s after the last
        // raise the overload's seconds still count (at 64 s they call for
        // another raise, held at the cap); from then on fewer refusals than
        // the current value fall in its window, and it drops by one at each
        // refusal.
        for second in (40..200).step_by(2) {
            drops.record(second);
            let expected = if second <= 64 {
                32
            } else {
                32u64.saturating_sub((second - 64) / 2).max(1)
            };
            assert_eq!(drops.retry_after, expected, "at {second} s");
        }
        // While refusals keep filling its window, it holds.
        let mut steady = Drops::default();
        for second in 0..100 {
            steady.record(second);
            assert_eq!(steady.retry_after, 1);
        }
    }
}
