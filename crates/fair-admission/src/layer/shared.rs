//! The state the layer and its services share: the `Apf` behind a lock,
//! and the admission of one request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::seat::{Seat, Waiting};
use super::{Class, Overloaded};
use crate::observe::Observer;
use crate::{Admit, Apf, LevelId, Rejected, Ticket};

/// State shared by the layer and every service it makes.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) observer: Observer,
}

/// The layer's time limits, copied into each service it makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) queue_wait: Duration,
    /// A fixed `Retry-After`, or `None` for each level's adaptive one.
    pub(crate) retry_after: Option<Duration>,
}

pub(crate) struct State {
    pub(crate) apf: Apf,
    /// Queued requests, woken when dispatched.
    pub(crate) waiters: HashMap<Ticket, oneshot::Sender<()>>,
    /// The start of the `Apf`'s clock.
    pub(crate) origin: Instant,
}

impl State {
    /// Gives the `Apf` the time `now` (read by the caller, which needs it
    /// anyway), waking what a reallocation of seats dispatched. Returns
    /// whether seats were reallocated (then every level's limit may have
    /// moved).
    pub(crate) fn advance(&mut self, now: Instant) -> bool {
        let before = self.apf.last_reallocation();
        let dispatched = self.apf.advance(now.saturating_duration_since(self.origin));
        self.wake(dispatched);
        self.apf.last_reallocation() != before
    }

    /// When seats are next reallocated, if any level lends.
    fn next_reallocation(&self) -> Option<Instant> {
        let at = self.apf.next_reallocation()?;
        Some(self.origin.checked_add(at).unwrap_or_else(far_future))
    }

    /// The refusal of a request of `level` for `reason`: the `Retry-After`
    /// is the level's adaptive one unless the layer fixes it.
    fn overloaded(&self, limits: Limits, level: LevelId, reason: Rejected) -> Overloaded {
        let retry_after = limits
            .retry_after
            .or_else(|| self.apf.retry_after(level))
            .unwrap_or(Duration::from_secs(1));
        Overloaded {
            reason,
            retry_after,
        }
    }

    pub(crate) fn wake(&mut self, dispatched: Vec<Ticket>) {
        for ticket in dispatched {
            if let Some(tx) = self.waiters.remove(&ticket) {
                // A waiter that went away completes its own ticket (see
                // `Waiting::drop`), so a failed send needs nothing here.
                let _ = tx.send(());
            }
        }
    }
}

impl Shared {
    /// Admits a request, waiting in its queue up to `limits.queue_wait`.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        class: Class,
        limits: Limits,
    ) -> Result<Seat, Overloaded> {
        let arrived = Instant::now();
        let level = class.level;
        let (ticket, rx) = {
            let mut state = self.state.lock();
            self.advance(&mut state, arrived);
            let admitted = state.apf.admit(class.level, &class.flow_key(), class.width);
            self.observer.level(&state.apf, level);
            match admitted {
                Admit::Dispatched(ticket) => {
                    self.observer.waited(level, arrived, arrived, true);
                    return Ok(self.seat(ticket, &class, arrived));
                }
                Admit::Rejected(reason) => {
                    self.observer.rejected(&class, reason);
                    return Err(state.overloaded(limits, level, reason));
                }
                Admit::Queued(ticket) => {
                    let (tx, rx) = oneshot::channel();
                    state.waiters.insert(ticket, tx);
                    (ticket, rx)
                }
            }
        };
        let mut waiting = Waiting {
            shared: Arc::clone(self),
            ticket,
            level,
            armed: true,
        };
        // The wait ends when the request is dispatched or its time is up;
        // meanwhile it wakes at each reallocation of seats between levels,
        // so that borrowed seats reach a level whose requests are all
        // waiting, however quiet the server is otherwise.
        let deadline = arrived
            .checked_add(limits.queue_wait)
            .unwrap_or_else(far_future);
        let mut rx = rx;
        let dispatched = loop {
            let wake_at = match self.state.lock().next_reallocation() {
                Some(at) => at.min(deadline),
                None => deadline,
            };
            // A runtime built without `enable_time` panics when a timer is
            // made; refuse the request instead (dropping `waiting` gives
            // its place up).
            let rx = &mut rx;
            let Ok(timed) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                tokio::time::timeout_at(wake_at, rx)
            })) else {
                drop(waiting);
                self.observer.rejected(&class, Rejected::NoTimer);
                let state = self.state.lock();
                return Err(state.overloaded(limits, level, Rejected::NoTimer));
            };
            match timed.await {
                Ok(woken) => break woken.is_ok(),
                Err(_) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    let mut state = self.state.lock();
                    self.advance(&mut state, now);
                }
            }
        };
        waiting.armed = false;
        let now = Instant::now();
        if dispatched {
            self.observer.waited(level, arrived, now, true);
            return Ok(self.seat(ticket, &class, now));
        }
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        match state.apf.cancel(ticket) {
            Some(dispatched) => {
                state.waiters.remove(&ticket);
                state.wake(dispatched);
                self.observer.level(&state.apf, level);
                self.observer.waited(level, arrived, now, false);
                self.observer.rejected(&class, Rejected::TimedOut);
                Err(state.overloaded(limits, level, Rejected::TimedOut))
            }
            // Dispatched at the moment the wait ran out: the seat is ours.
            None => Ok(self.seat(ticket, &class, now)),
        }
    }

    /// Gives the `Apf` the time; after a reallocation of seats, every
    /// level's gauges are brought up to date.
    pub(crate) fn advance(&self, state: &mut State, now: Instant) {
        if state.advance(now) {
            for level in state.apf.level_ids() {
                self.observer.level(&state.apf, level);
            }
        }
    }

    pub(crate) fn seat(self: &Arc<Self>, ticket: Ticket, class: &Class, started: Instant) -> Seat {
        Seat {
            shared: Arc::clone(self),
            ticket,
            level: class.level,
            started,
            linger: class.additional_latency,
        }
    }

    /// Frees a finished request's seats at `now`, charging it the time it
    /// held them.
    pub(crate) fn release(&self, ticket: Ticket, level: LevelId, held: Duration, now: Instant) {
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        let dispatched = state.apf.complete(ticket, held).unwrap_or_default();
        state.wake(dispatched);
        self.observer.level(&state.apf, level);
    }
}

/// An instant no wait reaches (about 30 years ahead, as tokio's own
/// "never" is).
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}
