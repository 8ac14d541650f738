//! The state the layer and its services share: the `Apf`'s levels, each
//! behind a lock of its own (as Kubernetes locks each queue set on its
//! own), on tokio's clock. A request locks its own level and nothing else;
//! only the division of the seats between levels, every borrowing period,
//! locks them all, in order.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::time::Instant;

use super::{Class, Overloaded};
use crate::apf::{Completed, Events, Level, Phase, Timing};
use crate::observe::Observer;
use crate::{Admit, Apf, Dump, LevelId, LevelStats, Rejected, Ticket};

/// State shared by the layer and every service it makes.
pub(crate) struct Shared {
    /// The `Apf` the levels came from, so that a [`LevelId`] of another
    /// one is refused.
    apf: u64,
    hasher: foldhash::fast::FixedState,
    pub(crate) levels: Box<[Mutex<LevelState>]>,
    /// When the seats are divided; locked before any level.
    timing: Mutex<Timing>,
    /// The next division on the `Apf`'s clock, in nanoseconds (`u64::MAX`:
    /// never), read without a lock.
    next_division: AtomicU64,
    /// The instant of the `Apf`'s reading `base`.
    origin: Instant,
    base: Duration,
    pub(crate) observer: Observer,
}

/// The layer's time limits, copied into each service it makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) queue_wait: Duration,
    /// A fixed `Retry-After`, or `None` for each level's adaptive one.
    pub(crate) retry_after: Option<Duration>,
}

/// One level and what the layer keeps with it.
pub(crate) struct LevelState {
    pub(crate) level: Level,
    /// Its name, for refusals.
    name: Arc<str>,
    /// The number of the next ticket.
    next_seq: u64,
    /// The time on the `Apf`'s clock it was brought up to by the call that
    /// holds its lock.
    now: Duration,
    /// The requests the call in progress dispatched (kept for its buffer).
    woken: Vec<Ticket>,
}

impl Events for MutexGuard<'_, LevelState> {
    fn level(&self) -> &Level {
        &self.level
    }

    fn level_mut(&mut self) -> &mut Level {
        &mut self.level
    }
}

impl LevelState {
    /// Wakes the tasks of the requests in `woken` (their seats are theirs).
    fn wake(&mut self) {
        for ticket in self.woken.drain(..) {
            let waker = self.level.requests.get_mut(&ticket);
            if let Some(waker) = waker.and_then(|r| r.waker.take()) {
                waker.wake();
            }
        }
    }

    /// The refusal of one of its requests for `reason`: the `Retry-After`
    /// is the level's adaptive one unless the layer fixes it.
    fn overloaded(&self, limits: Limits, reason: Rejected) -> Overloaded {
        let retry_after = limits
            .retry_after
            .unwrap_or_else(|| self.level.drops.retry_after());
        Overloaded {
            reason,
            retry_after,
            level: Arc::clone(&self.name),
        }
    }
}

/// What became of a request handed to [`Shared::admit`].
pub(crate) enum Admitted {
    /// It runs now.
    Seated(Seat),
    /// It waits in its queue.
    /// It waits in its queue, and its task is woken when it is
    /// dispatched; its level next has something to do on its own then.
    Queued(Waiting, Option<Instant>),
    /// Refused.
    Refused(Overloaded),
}

/// `at` in nanoseconds, `u64::MAX` for never.
fn nanos(at: Option<Duration>) -> u64 {
    at.map_or(u64::MAX, |d| {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    })
}

impl Shared {
    /// Takes `apf` apart, its clock now starting at tokio's now.
    pub(crate) fn new(apf: Apf) -> Self {
        let observer = Observer::new(&apf);
        let Apf {
            id,
            levels,
            hasher,
            now,
            timing,
            ..
        } = apf;
        let levels = levels.into_iter().map(|level| {
            Mutex::new(LevelState {
                name: Arc::from(level.name.as_str()),
                level,
                next_seq: 0,
                now: Duration::ZERO,
                woken: Vec::new(),
            })
        });
        Shared {
            apf: id,
            hasher,
            levels: levels.collect(),
            next_division: AtomicU64::new(nanos(timing.next_division())),
            timing: Mutex::new(timing),
            origin: Instant::now(),
            base: now,
            observer,
        }
    }

    /// The `Apf`'s reading of `at`.
    fn clock(&self, at: Instant) -> Duration {
        self.base + at.saturating_duration_since(self.origin)
    }

    /// The instant of the `Apf`'s reading `at`.
    fn instant(&self, at: Duration) -> Instant {
        let after = at.saturating_sub(self.base);
        self.origin.checked_add(after).unwrap_or_else(far_future)
    }

    /// `level`'s index, if it is one of the layer's levels.
    pub(crate) fn index_of(&self, level: LevelId) -> Option<usize> {
        (level.apf == self.apf && level.index < self.levels.len()).then_some(level.index)
    }

    /// Level `index`, locked and brought up to `now`: the seats divided if
    /// that is due (which locks every level for the time it takes), then
    /// the seats its requests held for an additional latency freed.
    pub(crate) fn lock(&self, index: usize, now: Instant) -> MutexGuard<'_, LevelState> {
        let t = self.clock(now);
        let t_nanos = nanos(Some(t));
        if t_nanos >= self.next_division.load(Ordering::Acquire) {
            self.divide(t);
        }
        let mut state = self.levels[index].lock();
        state.now = t;
        // Releases due after a division still to come wait for it.
        let bound = t_nanos.min(self.next_division.load(Ordering::Acquire));
        let mut moved = false;
        while let Some((at, _)) = state.level.next_release() {
            if nanos(Some(at)) > bound {
                break;
            }
            let LevelState { level, woken, .. } = &mut *state;
            level.release_lingering(woken);
            moved = true;
        }
        if moved {
            state.wake();
            self.observer.level(index, &state.level);
        }
        state
    }

    /// Everything due up to `t`, the divisions of the seats included, on
    /// every level in order.
    fn divide(&self, t: Duration) {
        let mut timing = self.timing.lock();
        if timing.next_division().is_none_or(|at| at > t) {
            return; // Done by another call meanwhile.
        }
        let mut levels: Vec<_> = self.levels.iter().map(|l| l.lock()).collect();
        let mut woken = Vec::new();
        timing.run_until(&mut levels, t, &mut woken);
        self.next_division
            .store(nanos(timing.next_division()), Ordering::Release);
        for ticket in woken {
            let state = &mut levels[ticket.level];
            state.woken.push(ticket);
            state.wake();
        }
        for (index, state) in levels.iter().enumerate() {
            self.observer.level(index, &state.level);
        }
    }

    /// When level `index` next has something to do on its own: seats to
    /// free after an additional latency, or the seats to divide again.
    pub(crate) fn next_event(&self, state: &LevelState) -> Option<Instant> {
        let release = state.level.next_release().map(|(at, _)| at);
        let division = match self.next_division.load(Ordering::Acquire) {
            u64::MAX => None,
            n => Some(Duration::from_nanos(n)),
        };
        let next = match (release, division) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Some(self.instant(next?))
    }

    /// Admits a request of `class` arriving at `arrived`: it runs, waits in
    /// its queue, or is refused. The flow's names move into the request,
    /// for the dump.
    pub(crate) fn admit(
        self: Arc<Self>,
        class: Class,
        limits: Limits,
        waker: &std::task::Waker,
        arrived: Instant,
    ) -> Admitted {
        let Some(index) = self.index_of(class.level) else {
            let why = Rejected::UnknownLevel;
            self.observer
                .rejected(usize::MAX, &class.schema, &class.flow, why);
            let retry_after = limits.retry_after.unwrap_or(Duration::from_secs(1));
            return Admitted::Refused(Overloaded {
                reason: why,
                retry_after,
                level: Arc::from(""),
            });
        };
        let hash = self.hasher.hash_one(class.flow_key());
        let mut state = self.lock(index, arrived);
        let ticket = Ticket {
            seq: state.next_seq,
            level: index,
            slot: 0,
        };
        state.next_seq += 1;
        let now = state.now;
        let LevelState { level, woken, .. } = &mut *state;
        // The names move into the request if it is admitted.
        let mut names = (class.schema, class.flow);
        let admit = level.admit(ticket, (hash, &mut names), class.work, now, woken);
        state.wake();
        self.observer.level(index, &state.level);
        match admit {
            Admit::Rejected(why) => {
                self.observer.rejected(index, &names.0, &names.1, why);
                Admitted::Refused(state.overloaded(limits, why))
            }
            Admit::Dispatched(ticket) => {
                drop(state);
                self.observer.waited(index, arrived, arrived, true);
                Admitted::Seated(Seat {
                    shared: self,
                    ticket,
                })
            }
            Admit::Queued(ticket) => {
                if let Some(r) = state.level.requests.get_mut(&ticket) {
                    r.waker = Some(waker.clone());
                }
                let next = self.next_event(&state);
                drop(state);
                Admitted::Queued(Waiting::new(self, ticket, arrived, limits), next)
            }
        }
    }

    /// Whether the waiting request `ticket` was dispatched; if not, `waker`
    /// is woken when it is. Also when level `index` next has something
    /// to do on its own.
    pub(crate) fn poll_dispatched(
        &self,
        ticket: Ticket,
        waker: &std::task::Waker,
        now: Instant,
    ) -> (bool, Option<Instant>) {
        let mut state = self.lock(ticket.level, now);
        let next = self.next_event(&state);
        match state.level.requests.get_mut(&ticket) {
            Some(r) if r.phase == Phase::Waiting => {
                if !r.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    r.waker = Some(waker.clone());
                }
                (false, next)
            }
            _ => (true, next),
        }
    }

    /// The waiting request `ticket` stops waiting at `now` (its wait ran
    /// out, or no timer can bound it): `Ok` with its seat if it was
    /// dispatched meanwhile, or its refusal for `why`.
    pub(crate) fn give_up(
        self: &Arc<Self>,
        ticket: Ticket,
        arrived: Instant,
        now: Instant,
        limits: Limits,
        why: Rejected,
    ) -> Result<Seat, Overloaded> {
        let index = ticket.level;
        let mut state = self.lock(index, now);
        let t = state.now;
        let Some(request) = state.level.cancel(ticket, t) else {
            // Dispatched at the moment the wait ran out: the seat is ours.
            drop(state);
            self.observer.waited(index, arrived, now, true);
            return Ok(self.seat(ticket));
        };
        self.observer.level(index, &state.level);
        self.observer.waited(index, arrived, now, false);
        self.observer
            .rejected(index, &request.schema, &request.flow, why);
        Err(state.overloaded(limits, why))
    }

    /// A waiting request went away at `now`: its place is given up, or, if
    /// it was dispatched as it went away, its seat released (it ran for no
    /// time).
    pub(crate) fn abandon(self: &Arc<Self>, ticket: Ticket, now: Instant) {
        let index = ticket.level;
        let mut state = self.lock(index, now);
        let t = state.now;
        if state.level.cancel(ticket, t).is_none() {
            drop(state);
            self.release(ticket, now);
            return;
        }
        self.observer.level(index, &state.level);
    }

    fn seat(self: &Arc<Self>, ticket: Ticket) -> Seat {
        Seat {
            shared: Arc::clone(self),
            ticket,
        }
    }

    /// Completes the executing request `ticket` at `now`; its seats are
    /// freed now, or after its additional latency on a timer of the current
    /// runtime (if it has none with timers, at the next call that gives the
    /// time).
    pub(crate) fn release(self: &Arc<Self>, ticket: Ticket, now: Instant) {
        let index = ticket.level;
        let mut state = self.lock(index, now);
        let LevelState {
            level, woken, now, ..
        } = &mut *state;
        let completed = level.complete(ticket, *now, woken);
        state.wake();
        self.observer.level(index, &state.level);
        drop(state);
        if let Some(Completed::Lingering(at)) = completed {
            self.wake_at(index, self.instant(at));
        }
    }

    /// Brings level `index` up to date at `at` on a timer of the current
    /// runtime (nothing if there is none with timers: the next call does).
    fn wake_at(self: &Arc<Self>, index: usize, at: Instant) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let timer = std::panic::catch_unwind(|| {
            let _entered = rt.enter();
            tokio::time::sleep_until(at)
        });
        if let Ok(sleep) = timer {
            let shared = Arc::clone(self);
            rt.spawn(async move {
                sleep.await;
                drop(shared.lock(index, Instant::now()));
            });
        }
    }

    /// The counts of `level`, or `None` if it belongs to another `Apf`.
    pub(crate) fn level_stats(&self, level: LevelId) -> Option<LevelStats> {
        let index = self.index_of(level)?;
        Some(self.lock(index, Instant::now()).level.stats())
    }

    /// Every level, queue and request now, each level as it is when its
    /// turn comes.
    pub(crate) fn dump(&self) -> Dump {
        let now = Instant::now();
        let levels = (0..self.levels.len()).map(|i| self.lock(i, now).level.dump());
        Dump {
            levels: levels.collect(),
        }
    }
}

/// An instant no wait reaches (about 30 years ahead, as tokio's own
/// "never" is).
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

// The guards a request holds: each gives back what it holds when dropped.

/// A queued request's place; if it is dropped while the request waits, the
/// place is given up (or, if it was just dispatched, the seat is released).
pub(crate) struct Waiting {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ticket: Ticket,
    pub(crate) arrived: Instant,
    /// When its wait runs out.
    pub(crate) deadline: Instant,
    pub(crate) limits: Limits,
    /// Whether dropping it gives its place up (not once it has its seat or
    /// its refusal).
    pub(crate) armed: bool,
}

impl Waiting {
    pub(crate) fn new(
        shared: Arc<Shared>,
        ticket: Ticket,
        arrived: Instant,
        limits: Limits,
    ) -> Self {
        let deadline = arrived
            .checked_add(limits.queue_wait)
            .unwrap_or_else(far_future);
        Waiting {
            shared,
            ticket,
            arrived,
            deadline,
            limits,
            armed: true,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.armed {
            self.shared.abandon(self.ticket, Instant::now());
        }
    }
}

/// Seats held by a running request, released when it finishes, fails, or
/// is dropped (and, for its work's additional latency, after that).
pub(crate) struct Seat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ticket: Ticket,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.shared.release(self.ticket, Instant::now());
    }
}
