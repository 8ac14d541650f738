//! Seats held by a running request, and a queued request's place.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::shared::Shared;
use crate::{LevelId, Ticket};

/// A queued request's place; if its future is dropped while it waits, the
/// place is given up (or, if it was just dispatched, the seat is released).
pub(crate) struct Waiting {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ticket: Ticket,
    pub(crate) level: LevelId,
    pub(crate) armed: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.shared.state.lock();
        self.shared.advance(&mut state, Instant::now());
        state.waiters.remove(&self.ticket);
        let dispatched = match state.apf.cancel(self.ticket) {
            Some(dispatched) => dispatched,
            None => state
                .apf
                .complete(self.ticket, Duration::ZERO)
                .unwrap_or_default(),
        };
        state.wake(dispatched);
        self.shared.observer.level(&state.apf, self.level);
    }
}

/// Seats held by a running request, released (with the time it ran) when
/// it finishes, fails, or is dropped.
pub(crate) struct Seat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ticket: Ticket,
    pub(crate) level: LevelId,
    pub(crate) started: Instant,
    /// How long the seats stay held once the request is done.
    pub(crate) linger: Duration,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let (ticket, level) = (self.ticket, self.level);
        let now = Instant::now();
        let held = now
            .saturating_duration_since(self.started)
            .saturating_add(self.linger);
        if !self.linger.is_zero() {
            // Held on for the work the request left behind, on a timer of
            // the runtime it ran on. Without a runtime with timers, the
            // seats are freed now rather than never.
            let timer = tokio::runtime::Handle::try_current().ok().and_then(|rt| {
                let linger = self.linger;
                std::panic::catch_unwind(|| {
                    let _entered = rt.enter();
                    (rt.clone(), tokio::time::sleep(linger))
                })
                .ok()
            });
            if let Some((rt, sleep)) = timer {
                let shared = Arc::clone(&self.shared);
                rt.spawn(async move {
                    sleep.await;
                    shared.release(ticket, level, held, Instant::now());
                });
                return;
            }
        }
        self.shared.release(ticket, level, held, now);
    }
}
