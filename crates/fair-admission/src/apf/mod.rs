//! Priority levels and the requests they admit: Kubernetes' API Priority
//! and Fairness as a state machine driven by the caller's clock.

mod inspect;
mod level;
mod requests;
mod time;

use std::hash::{BuildHasher, Hash};
use std::time::Duration;

#[cfg(feature = "tower")]
pub(crate) use level::Completed;
pub(crate) use level::{Level, Names, Phase, Request};
pub use level::{LevelId, LevelStats};
#[cfg(feature = "tower")]
pub(crate) use time::Events;
pub(crate) use time::Timing;

use crate::spec::Declared;
use crate::{Admission, Rejected, Ticket};
use crate::{ConfigError, LevelBorrowing, LevelLimits, WorkEstimate};

/// Numbers each built [`Apf`], so a [`LevelId`] knows whose it is.
static NEXT_APF: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Kubernetes' API Priority and Fairness for one server: priority levels
/// that share the server's seats by their shares, lend and borrow them,
/// and either refuse or queue what does not fit, with shuffle sharding of
/// flows onto queues and fair queuing between queues (Kubernetes'
/// `queueset.go`, rule for rule); exempt levels admit everything.
///
/// It is a plain state machine with no threads and no clock of its own:
/// the caller tells it the time ([`advance_to`](Self::advance_to)), and says when
/// a request arrives ([`admit`](Self::admit)), finishes
/// ([`complete`](Self::complete)) or gives up waiting
/// ([`cancel`](Self::cancel)), each at the time last given. Every call
/// returns the waiting requests it dispatched. The `tower` feature wraps it
/// in a layer.
///
/// ```
/// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
/// use std::time::Duration;
/// let queuing = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 };
/// let mut apf = Apf::builder(1).level("workload", LevelSpec::limited(1, queuing)).build()?;
/// let level = apf.level_id("workload").unwrap();
/// let Admit::Dispatched(first) = apf.admit(level, &"alice", 1).admit else { unreachable!() };
/// let Admit::Queued(second) = apf.admit(level, &"bob", 1).admit else { unreachable!() };
/// // The first finishes 100 ms later: its seat goes to the second.
/// apf.advance_to(Duration::from_millis(100));
/// assert_eq!(apf.complete(first), Some(vec![second]));
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Apf {
    pub(crate) id: u64,
    pub(crate) levels: Vec<Level>,
    next_ticket: u64,
    pub(crate) hasher: foldhash::fast::FixedState,
    /// The caller's clock, as last given to [`advance`](Apf::advance_to).
    pub(crate) now: Duration,
    /// When the seats are divided between the levels.
    pub(crate) timing: Timing,
}

impl Apf {
    /// Builds the levels a checked builder declared, and divides the seats
    /// once, as Kubernetes does when it takes a configuration.
    pub(crate) fn from_spec(b: &Declared) -> Result<Apf, ConfigError> {
        let total: u64 = b.levels.iter().map(|(_, s)| u64::from(s.shares)).sum();
        let mut levels = Vec::with_capacity(b.levels.len());
        for (name, spec) in &b.levels {
            // ceil(seats · shares / total), in integers.
            let num = u64::from(b.seats) * u64::from(spec.shares);
            let nominal = u32::try_from(num.div_ceil(total.max(1))).unwrap_or(u32::MAX);
            let limits = LevelLimits::from_percent(
                nominal,
                spec.lendable_percent,
                spec.borrowing_limit_percent,
                b.seats,
            )
            .map_err(|e| e.at_level(name))?;
            let borrowing = LevelBorrowing::new(limits, spec.limit.is_none(), Duration::ZERO);
            let level = Level::new(name, spec, nominal, b.estimate, borrowing);
            levels.push(level.map_err(|e| e.at_level(name))?);
        }
        let lends = levels.iter().any(|l| l.borrowing.limits().lendable > 0);
        let mut apf = Apf {
            id: NEXT_APF.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            levels,
            next_ticket: 0,
            hasher: foldhash::fast::FixedState::with_seed(0),
            now: Duration::ZERO,
            timing: Timing::new(b.period, lends),
        };
        if lends {
            let mut dispatched = Vec::new();
            apf.timing
                .divide(&mut apf.levels, Duration::ZERO, &mut dispatched);
            debug_assert!(dispatched.is_empty());
        }
        Ok(apf)
    }

    /// The level named `name`.
    ///
    /// ```
    /// # use fair_admission::{Apf, LevelSpec};
    /// let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// assert!(apf.level_id("l").is_some());
    /// assert!(apf.level_id("nope").is_none());
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_id(&self, name: &str) -> Option<LevelId> {
        let index = self.levels.iter().position(|l| l.name == name)?;
        Some(self.id_of(index))
    }

    pub(crate) fn id_of(&self, index: usize) -> LevelId {
        LevelId {
            apf: self.id,
            index,
        }
    }

    /// This `Apf`'s levels, in the builder's order.
    pub fn level_ids(&self) -> impl Iterator<Item = LevelId> + '_ {
        (0..self.levels.len()).map(|index| self.id_of(index))
    }

    /// The name `level` was built with, or `None` if it belongs to another
    /// `Apf`.
    pub fn level_name(&self, level: LevelId) -> Option<&str> {
        Some(self.levels[self.index_of(level)?].name.as_str())
    }

    /// `level`'s index here, if it is one of this `Apf`'s levels.
    pub(crate) fn index_of(&self, level: LevelId) -> Option<usize> {
        (level.apf == self.id && level.index < self.levels.len()).then_some(level.index)
    }

    /// The hash [`admit`](Self::admit) takes a flow to (fixed: the same flow
    /// always gets the same hand).
    pub fn flow_hash<F: Hash + ?Sized>(&self, flow: &F) -> u64 {
        self.hasher.hash_one(flow)
    }

    /// A request of flow `flow` arrives at `level` with `work` (a width in
    /// seats converts into one): see [`admit_hashed`](Self::admit_hashed),
    /// with the flow hashed by [`flow_hash`](Self::flow_hash).
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse, Rejected};
    /// let mut apf = Apf::builder(2).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// assert!(matches!(apf.admit(level, &"alice", 2).admit, Admit::Dispatched(_)));
    /// assert_eq!(apf.admit(level, &"bob", 1).admit, Admit::Rejected(Rejected::NoSeat));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn admit<F: Hash + ?Sized>(
        &mut self,
        level: LevelId,
        flow: &F,
        work: impl Into<WorkEstimate>,
    ) -> Admission {
        let hash = self.flow_hash(flow);
        self.admit_hashed(level, hash, work)
    }

    /// A request of the flow whose hash is `flow_hash` (Kubernetes hashes
    /// the flow schema's name and the distinguisher) arrives at `level`
    /// with `work`, at the time last given to [`advance_to`](Self::advance_to).
    /// Any width is taken (at least 1 seat); a request wider than its
    /// level's limit runs alone, once nothing else executes. A `level` from
    /// another `Apf` is refused with [`Rejected::UnknownLevel`].
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LevelSpec};
    /// let mut apf = Apf::builder(4).level("system", LevelSpec::exempt()).build()?;
    /// let system = apf.level_id("system").unwrap();
    /// let admission = apf.admit_hashed(system, 0x5eed, 1);
    /// assert!(matches!(admission.admit, Admit::Dispatched(_)));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn admit_hashed(
        &mut self,
        level: LevelId,
        flow_hash: u64,
        work: impl Into<WorkEstimate>,
    ) -> Admission {
        let Some(index) = self.index_of(level) else {
            return Admission::rejected(Rejected::UnknownLevel);
        };
        let ticket = Ticket {
            seq: self.next_ticket,
            level: index,
            slot: 0,
        };
        self.next_ticket += 1;
        let mut dispatched = Vec::new();
        let flow = (flow_hash, &mut Names::default());
        let admit = self.levels[index].admit(ticket, flow, work.into(), self.now, &mut dispatched);
        Admission { admit, dispatched }
    }

    /// Names `ticket`'s flow for [`dump`](Self::dump): the flow schema that
    /// classified it and its flow distinguisher, as Kubernetes lists them.
    pub fn name_flow(&mut self, ticket: Ticket, schema: &str, distinguisher: &str) {
        let level = self.levels.get_mut(ticket.level);
        if let Some(r) = level.and_then(|l| l.requests.get_mut(&ticket)) {
            r.schema = schema.into();
            r.flow = distinguisher.into();
        }
    }

    /// The request `ticket` finished running, at the time last given to
    /// [`advance_to`](Self::advance_to): its queue is charged the time it really
    /// ran instead of the estimate, and its seats are freed now, or when
    /// its additional latency has passed (a later [`advance_to`](Self::advance_to)
    /// frees them). Returns the waiting requests dispatched, in order, or
    /// `None` if `ticket` is not executing (unknown, waiting, or done).
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
    /// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// let Admit::Dispatched(t) = apf.admit(level, &"f", 1).admit else { unreachable!() };
    /// assert_eq!(apf.complete(t), Some(vec![]));
    /// assert_eq!(apf.complete(t), None);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn complete(&mut self, ticket: Ticket) -> Option<Vec<Ticket>> {
        let mut dispatched = Vec::new();
        let level = self.levels.get_mut(ticket.level)?;
        level.complete(ticket, self.now, &mut dispatched)?;
        Some(dispatched)
    }

    /// The waiting request `ticket` gives up (its caller timed out or went
    /// away): it leaves its queue and counts as refused. Returns `false` if
    /// it was not waiting (then, if it was dispatched, complete it).
    /// Nothing is dispatched: a request leaving its queue frees no seat.
    ///
    /// ```
    /// use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
    /// let queuing = LimitResponse::Queue { queues: 4, queue_length_limit: 10, hand_size: 2 };
    /// let mut apf = Apf::builder(1).level("l", LevelSpec::limited(1, queuing)).build()?;
    /// let level = apf.level_id("l").unwrap();
    /// let Admit::Dispatched(running) = apf.admit(level, &"a", 1).admit else { unreachable!() };
    /// let Admit::Queued(waiting) = apf.admit(level, &"b", 1).admit else { unreachable!() };
    /// assert!(apf.cancel(waiting));
    /// assert!(!apf.cancel(running));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn cancel(&mut self, ticket: Ticket) -> bool {
        let now = self.now;
        self.levels
            .get_mut(ticket.level)
            .and_then(|l| l.cancel(ticket, now))
            .is_some()
    }
}

impl From<u32> for WorkEstimate {
    /// A request `seats` seats wide that leaves nothing behind.
    fn from(seats: u32) -> Self {
        WorkEstimate::seats(seats)
    }
}
