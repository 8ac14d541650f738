//! One queue of a level: its waiting requests first in, first out, the sums
//! Kubernetes keeps over them, and its place on the virtual clock.

use std::collections::VecDeque;

use super::SeatSeconds;
use crate::{Ticket, WorkEstimate};

/// A waiting request, as its queue keeps it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Waiter {
    pub(crate) ticket: Ticket,
    pub(crate) work: WorkEstimate,
    /// Initial seats × the estimated service time, plus final seats × the
    /// additional latency.
    pub(crate) total_work: SeatSeconds,
    /// The final seats × additional latency part of it.
    pub(crate) final_work: SeatSeconds,
    /// The progress meter's reading when it arrived.
    pub(crate) arrival_r: SeatSeconds,
}

impl Waiter {
    /// The most seats it holds at once.
    pub(crate) fn max_seats(&self) -> u64 {
        u64::from(self.work.initial_seats.max(self.work.final_seats))
    }
}

/// Sums over a queue's waiting requests (Kubernetes' `queueSum`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QueueSum {
    pub(crate) initial_seats: u64,
    pub(crate) max_seats: u64,
    pub(crate) total_work: SeatSeconds,
}

/// One queue.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    pub(crate) waiting: VecDeque<Waiter>,
    pub(crate) sum: QueueSum,
    /// The virtual time at which its next request is dispatched
    /// (Kubernetes' `nextDispatchR`).
    pub(crate) next_dispatch_r: SeatSeconds,
    /// Requests of this queue in their initial (executing) phase.
    pub(crate) executing: usize,
    /// Seats held by its requests, through their final phase.
    pub(crate) seats_in_use: u64,
}

impl Queue {
    /// Whether anything waits or executes here (the queue counts towards
    /// the division of virtual time).
    pub(crate) fn is_active(&self) -> bool {
        !self.waiting.is_empty() || self.executing > 0
    }

    pub(crate) fn push(&mut self, waiter: Waiter) {
        self.sum.initial_seats += u64::from(waiter.work.initial_seats);
        self.sum.max_seats += waiter.max_seats();
        self.sum.total_work = self.sum.total_work.plus(waiter.total_work);
        self.waiting.push_back(waiter);
    }

    /// Takes the request at `at` out of the queue.
    pub(crate) fn remove(&mut self, at: usize) -> Option<Waiter> {
        let waiter = if at == 0 {
            self.waiting.pop_front()?
        } else {
            self.waiting.remove(at)?
        };
        self.sum.initial_seats -= u64::from(waiter.work.initial_seats);
        self.sum.max_seats -= waiter.max_seats();
        self.sum.total_work = self.sum.total_work.minus(waiter.total_work);
        Some(waiter)
    }

    /// The anti-windup bound: the next dispatch may not precede, in virtual
    /// time, the arrival of the oldest request waiting.
    pub(crate) fn bound_next_dispatch(&mut self) {
        if let Some(oldest) = self.waiting.front() {
            self.next_dispatch_r = self.next_dispatch_r.max(oldest.arrival_r);
        }
    }
}
