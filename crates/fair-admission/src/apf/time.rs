//! What time does to an [`Apf`]: seats held for an additional latency are
//! freed when it ends, and the server's seats are divided again between
//! the levels every borrowing period.

use std::time::Duration;

use super::{Apf, Level};
use crate::Ticket;
use crate::adjust_limits;

impl Apf {
    /// Sets the `Apf`'s clock to `now`: a reading of any monotonic clock of
    /// the caller's (the layer uses the time since it was made), not a step
    /// to add. Two calls with the same `now` move nothing; a time earlier
    /// than one already given is ignored. Everything due up to `now`
    /// happens at the time it was due, in order:
    ///
    /// - **Additional latency.** Seats held after a request completed are
    ///   freed when its additional latency ends.
    /// - **Borrowing.** Every [`borrowing_period`](crate::ApfBuilder::borrowing_period),
    ///   if any level lends, the server's seats are divided again between
    ///   the levels as Kubernetes does: each level is held between its
    ///   nominal seats less what it lends and its nominal seats plus what it
    ///   may borrow, and no lower than the demand it had (up to its nominal
    ///   seats); the rest goes by its smoothed seat demand.
    ///
    /// Returns the waiting requests these dispatched, in order.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// use std::time::Duration;
    /// let queuing = LimitResponse::Queue { queues: 8, queue_length_limit: 50, hand_size: 2 };
    /// let mut apf = Apf::builder(4)
    ///     .level("a", LevelSpec::limited(1, queuing))
    ///     .level("b", LevelSpec::limited(1, queuing).lendable_percent(100))
    ///     .build()?;
    /// let (a, b) = (apf.level_id("a").unwrap(), apf.level_id("b").unwrap());
    /// // Nobody asked for anything yet: "b" lends all its 2 seats to "a".
    /// assert_eq!(apf.level_stats(a).unwrap().seats, 4);
    /// for i in 0..4 {
    ///     let _ = apf.admit(b, &i, 1); // all four wait
    /// }
    /// assert_eq!(apf.level_stats(b).unwrap().waiting, 4);
    /// // After a period of "b" wanting 4 seats and "a" none, "b" has its
    /// // nominal 2 back, and two of its requests run.
    /// let dispatched = apf.advance_to(Duration::from_secs(10));
    /// assert_eq!(dispatched.len(), 2);
    /// assert_eq!(apf.level_stats(b).unwrap().seats, 2);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn advance_to(&mut self, now: Duration) -> Vec<Ticket> {
        let mut out = Vec::new();
        if now <= self.now {
            return out;
        }
        self.timing.run_until(&mut self.levels, now, &mut out);
        self.now = now;
        out
    }

    /// The former name of [`advance_to`](Self::advance_to), which it
    /// calls: `now` is the time to set, not a step.
    #[doc(hidden)]
    pub fn advance(&mut self, now: Duration) -> Vec<Ticket> {
        self.advance_to(now)
    }

    /// The time it is, as last given to [`advance_to`](Self::advance_to).
    pub fn now(&self) -> Duration {
        self.now
    }

    /// When [`advance_to`](Self::advance_to) next has something to do (seats to
    /// free, or the seats to divide), if ever.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec, LimitResponse};
    /// let apf = Apf::builder(4).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// assert_eq!(apf.next_event(), None); // nothing lingers, nothing lends
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn next_event(&self) -> Option<Duration> {
        self.timing.next_event(&self.levels)
    }
}

/// A level, or a lock guarding one: what the events of time reach.
pub(crate) trait Events {
    /// The level.
    fn level(&self) -> &Level;
    /// The level, to change.
    fn level_mut(&mut self) -> &mut Level;
}

impl Events for Level {
    fn level(&self) -> &Level {
        self
    }

    fn level_mut(&mut self) -> &mut Level {
        self
    }
}

/// When the seats are divided between the levels: every period after the
/// last division, if any level lends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// When the seats were last divided.
    pub(crate) adjusted_at: Duration,
    period: Duration,
    /// Whether any level lends (if none does, every level keeps its
    /// nominal seats and the division is skipped).
    lends: bool,
}

impl Timing {
    /// Divisions of the seats one [`run_until`](Self::run_until) makes one
    /// by one before it takes the rest as one.
    const MAX_DIVISIONS_AT_ONCE: u32 = 1_000;

    pub(crate) fn new(period: Duration, lends: bool) -> Self {
        Timing {
            adjusted_at: Duration::ZERO,
            period,
            lends,
        }
    }

    /// When the seats are next divided between levels, if any lends.
    pub(crate) fn next_division(&self) -> Option<Duration> {
        // At the end of time, never again.
        self.adjusted_at
            .checked_add(self.period)
            .filter(|_| self.lends)
    }

    /// When anything is next due: seats to free, or the seats to divide.
    pub(crate) fn next_event<L: Events>(&self, levels: &[L]) -> Option<Duration> {
        let linger = levels
            .iter()
            .filter_map(|l| l.level().next_release())
            .map(|(at, _)| at)
            .min();
        match (linger, self.next_division()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Everything due up to `now`, each at the time it was due, in order
    /// (see [`Apf::advance_to`]); what it dispatched goes to `out`.
    pub(crate) fn run_until<L: Events>(
        &mut self,
        levels: &mut [L],
        now: Duration,
        out: &mut Vec<Ticket>,
    ) {
        let mut divisions = 0u32;
        loop {
            // The lingering request released first: by time, then ticket.
            let linger = levels
                .iter()
                .enumerate()
                .filter_map(|(i, l)| Some((l.level().next_release()?, i)))
                .min();
            match (linger, self.next_division()) {
                (Some(((at, _), i)), d) if at <= now && d.is_none_or(|d| at <= d) => {
                    levels[i].level_mut().release_lingering(out);
                }
                (_, Some(mut at)) if at <= now => {
                    // Every period due is divided at its time, as
                    // Kubernetes' timer would; after a thousand in one
                    // call (a clock that jumped far ahead), the rest are
                    // taken as one, at the last period due.
                    divisions += 1;
                    if divisions > Self::MAX_DIVISIONS_AT_ONCE {
                        let period = self.period.as_nanos();
                        let skip = (now - at).as_nanos() / period * period;
                        at = at.saturating_add(nanos(skip));
                        self.release_until(levels, at, out);
                    }
                    self.divide(levels, at, out);
                }
                _ => break,
            }
        }
    }

    /// Frees, in order, the seats of every request whose additional
    /// latency ends by `at`.
    fn release_until<L: Events>(&self, levels: &mut [L], at: Duration, out: &mut Vec<Ticket>) {
        loop {
            let first = levels
                .iter()
                .enumerate()
                .filter_map(|(i, l)| Some((l.level().next_release()?, i)))
                .min();
            match first {
                Some(((l, _), i)) if l <= at => levels[i].level_mut().release_lingering(out),
                _ => break,
            }
        }
    }

    /// Divides the seats between the levels at `at` from their demand
    /// since the last time, and dispatches what fits under the new limits.
    pub(crate) fn divide<L: Events>(
        &mut self,
        levels: &mut [L],
        at: Duration,
        out: &mut Vec<Ticket>,
    ) {
        self.adjusted_at = at;
        for l in levels.iter_mut() {
            l.level_mut().queues.sync(at);
        }
        let mut borrowing: Vec<_> = levels.iter().map(|l| l.level().borrowing.clone()).collect();
        // A failed division keeps the limits as they were, as Kubernetes
        // does; nothing else is to be done about it here.
        let _ = adjust_limits(at, &mut borrowing);
        for (l, b) in levels.iter_mut().zip(borrowing) {
            let level = l.level_mut();
            level.queues.set_limit(b.current_limit());
            level.borrowing = b;
            level.dispatch(at, out);
        }
    }
}

/// `n` nanoseconds, saturating at [`Duration::MAX`].
fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (n % 1_000_000_000) as u32)
}
