//! Seats held by a running request, and a queued request's place: both
//! give back what they hold when dropped.

use std::sync::Arc;

use tokio::time::Instant;

use super::shared::{Limits, Shared, far_future};
use crate::Ticket;

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
