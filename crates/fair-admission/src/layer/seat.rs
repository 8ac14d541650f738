//! Seats held by a running request, and a queued request's place: both
//! give back what they hold when dropped.

use std::sync::Arc;

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
        if !state.apf.cancel(self.ticket) {
            // Dispatched as it went away: it ran for no time.
            let dispatched = state.apf.complete(self.ticket).unwrap_or_default();
            state.wake(dispatched);
        }
        self.shared.observer.level(&state.apf, self.level);
    }
}

/// Seats held by a running request, released when it finishes, fails, or
/// is dropped (and, for its work's additional latency, after that).
pub(crate) struct Seat {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ticket: Ticket,
    pub(crate) level: LevelId,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.shared.release(self.ticket, self.level, Instant::now());
    }
}
