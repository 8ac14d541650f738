//! A priority level's queues and fair queuing between them.

use std::collections::VecDeque;

use crate::Dealer;
use crate::apf::Ticket;

#[derive(Debug, Clone)]
pub(crate) struct Queues {
    pub(crate) dealer: Dealer,
    pub(crate) limit: usize,
    pub(crate) queues: Vec<Queue>,
    /// Requests waiting in all the queues, kept as they come and go so
    /// that reading it does not walk every queue.
    pub(crate) waiting: usize,
    /// The seats they will take.
    pub(crate) waiting_seats: u64,
    /// The virtual start of the last dispatch: a queue that turns busy
    /// starts here, so idle time earns no credit.
    pub(crate) vtime: f64,
    /// Estimated service time in seconds, a moving average of what
    /// completions report.
    pub(crate) estimate: f64,
    /// Requests enqueued so far: where in its hand the next flow starts
    /// looking for the least loaded queue, so that ties rotate.
    pub(crate) enqueues: usize,
    /// The queue dispatched from last: the next search starts after it, so
    /// that ties between queues go round robin.
    pub(crate) robin: usize,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    /// Waiting requests: ticket, width, and the seat-seconds of work it was
    /// estimated at when it joined.
    pub(crate) waiting: VecDeque<(Ticket, u32, f64)>,
    /// The estimated work waiting, in seat-seconds: a flow joins the queue
    /// of its hand with the least.
    pub(crate) waiting_work: f64,
    pub(crate) executing_seats: u32,
    /// Seat-seconds (virtual) this queue has been served up to.
    pub(crate) vfinish: f64,
}

impl Queue {
    /// Removes `work` from the waiting work (exactly zero once nothing
    /// waits, so rounding cannot build up).
    pub(crate) fn take_work(&mut self, work: f64) {
        self.waiting_work = if self.waiting.is_empty() {
            0.0
        } else {
            (self.waiting_work - work).max(0.0)
        };
    }
}

impl Queues {
    /// The queue a flow with `hash` joins: the one of its hand with the
    /// least estimated work waiting. The search starts at a position in the
    /// hand that moves by one with every request, so that ties rotate over
    /// the hand instead of always going to its first queue.
    pub(crate) fn choose(&mut self, hash: u64) -> usize {
        let hand = self.dealer.deal(hash);
        let size = hand.len();
        let mut cards = [0usize; crate::dealer::MAX_HAND];
        for (slot, card) in cards.iter_mut().zip(hand) {
            *slot = card;
        }
        let offset = self.enqueues % size;
        self.enqueues = self.enqueues.wrapping_add(1);
        let mut best = cards[offset];
        for k in 1..size {
            let q = cards[(offset + k) % size];
            if self.queues[q].waiting_work < self.queues[best].waiting_work {
                best = q;
            }
        }
        best
    }

    /// The busy queue whose head would finish first by fair queuing. The
    /// search starts after the queue served last, so equal finish times are
    /// served round robin.
    pub(crate) fn next_to_serve(&self) -> Option<usize> {
        let n = self.queues.len();
        let mut best: Option<(usize, f64)> = None;
        for k in 1..=n {
            let i = (self.robin + k) % n;
            let q = &self.queues[i];
            if let Some(&(_, width, _)) = q.waiting.front() {
                let finish = q.vfinish.max(self.vtime) + f64::from(width) * self.estimate;
                if best.is_none_or(|(_, f)| finish < f) {
                    best = Some((i, finish));
                }
            }
        }
        best.map(|(i, _)| i)
    }
}
