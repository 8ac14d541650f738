//! The state the layer and its services share: the `Apf` behind a lock,
//! on tokio's clock.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Overloaded;
use crate::observe::Observer;
use crate::{Apf, LevelId, Rejected, Ticket};

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
    /// The `Apf`'s reading of `at`.
    pub(crate) fn clock(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.origin)
    }

    /// The instant of the `Apf`'s reading `at`.
    pub(crate) fn instant(&self, at: Duration) -> Instant {
        self.origin.checked_add(at).unwrap_or_else(far_future)
    }

    /// When the `Apf` next has something to do on its own: seats to free
    /// after an additional latency, or the seats to divide again.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        Some(self.instant(self.apf.next_event()?))
    }

    /// The refusal of a request of `level` for `reason`: the `Retry-After`
    /// is the level's adaptive one unless the layer fixes it.
    pub(crate) fn overloaded(
        &self,
        limits: Limits,
        level: LevelId,
        reason: Rejected,
    ) -> Overloaded {
        let retry_after = limits
            .retry_after
            .or_else(|| self.apf.retry_after(level))
            .unwrap_or(Duration::from_secs(1));
        Overloaded {
            reason,
            retry_after,
        }
    }

    /// Tells the waiters of `dispatched` that their seats are theirs.
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
    /// Gives the `Apf` the time `now`, waking what it dispatched; every
    /// level's gauges are brought up to date if anything happened.
    pub(crate) fn advance(&self, state: &mut State, now: Instant) {
        let before = state.apf.next_event();
        let dispatched = state.apf.advance(state.clock(now));
        let moved = !dispatched.is_empty() || state.apf.next_event() != before;
        state.wake(dispatched);
        if moved {
            for level in state.apf.level_ids() {
                self.observer.level(&state.apf, level);
            }
        }
    }

    /// Completes the executing request `ticket` at `now`; its seats are
    /// freed now, or after its additional latency on a timer of the current
    /// runtime (if it has none with timers, at the next call that gives the
    /// time).
    pub(crate) fn release(
        self: &std::sync::Arc<Self>,
        ticket: Ticket,
        level: LevelId,
        now: Instant,
    ) {
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        let dispatched = state.apf.complete(ticket).unwrap_or_default();
        state.wake(dispatched);
        self.observer.level(&state.apf, level);
        if let Some(at) = state.apf.releases_at(ticket) {
            self.wake_at(state.instant(at));
        }
    }

    /// Makes the `Apf` advance at `at` on a timer of the current runtime
    /// (nothing if there is none with timers: the next call advances it).
    pub(crate) fn wake_at(self: &std::sync::Arc<Self>, at: Instant) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let timer = std::panic::catch_unwind(|| {
            let _entered = rt.enter();
            tokio::time::sleep_until(at)
        });
        if let Ok(sleep) = timer {
            let shared = std::sync::Arc::clone(self);
            rt.spawn(async move {
                sleep.await;
                let mut state = shared.state.lock();
                shared.advance(&mut state, Instant::now());
            });
        }
    }
}

/// An instant no wait reaches (about 30 years ahead, as tokio's own
/// "never" is).
pub(crate) fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}
