//! One priority level's queue set: Kubernetes' fair queuing for server
//! requests (`queueset.go`), rule for rule.
//!
//! - **Virtual time.** A progress meter `R` counts the seat-seconds each
//!   busy queue has been allotted: it advances with real time at
//!   `min(seats asked for, limit) / busy queues` per second, where a queue is
//!   busy while a request of it waits or executes.
//! - **Queues start** at the current `R` when a request arrives to a queue
//!   with nothing waiting or executing; otherwise they keep their place.
//! - **Selection.** The next request is the head of the queue whose
//!   `next dispatch R + head's work` is least, searching round robin from
//!   the queue after the one served last (so ties rotate). If that head does
//!   not fit, nothing is dispatched.
//! - **Charging.** Dispatch adds the request's estimated work (initial seats
//!   × the estimated service time, plus final seats × additional latency) to
//!   its queue's next dispatch R; completion corrects the initial part to
//!   the time it really ran.
//! - **Anti-windup.** A queue's next dispatch R never falls below the
//!   arrival R of its oldest waiting request.
//! - **Widths.** Any width is taken; a request wider than the limit runs
//!   alone, once nothing else executes.

mod hands;
mod queue;
mod seat_seconds;

use std::time::Duration;

pub(crate) use queue::{Queue, Waiter};
pub(crate) use seat_seconds::SeatSeconds;

use crate::{Dealer, Rejected, Ticket, WorkEstimate};

/// How a level meets a request it has no seat for.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// Never limited (Kubernetes' exempt level).
    Exempt,
    /// Refused at once.
    Reject,
    /// Queued: shuffle sharding over the queues, then fair queuing.
    Queue {
        dealer: Dealer,
        queue_length_limit: usize,
    },
}

/// A request that left its queue to execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dispatch {
    pub(crate) ticket: Ticket,
    pub(crate) queue: usize,
    /// Its work, final seats lowered to the limit if they exceeded it (the
    /// additional latency stretched to keep the final work).
    pub(crate) work: WorkEstimate,
}

/// Where a new request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Executing at once, in no queue (exempt and rejecting levels).
    Executing,
    /// Waiting in this queue (possibly dispatched by the next
    /// [`QueueSet::dispatch`]).
    Enqueued(usize),
    /// Nothing else waited and it fit: enqueued and dispatched at once,
    /// exactly as [`QueueSet::dispatch`] would have.
    Dispatched(Dispatch),
}

/// A level's counts and queues (Kubernetes' `queueSet`).
#[derive(Debug, Clone)]
pub(crate) struct QueueSet {
    pub(crate) mode: Mode,
    pub(crate) queues: Vec<Queue>,
    /// The concurrency limit, in seats.
    pub(crate) limit: u32,
    /// Estimated service time of a request's initial phase.
    estimate: Duration,
    /// The estimated work of one seat: one seat for `estimate`.
    unit_work: SeatSeconds,
    /// The progress meter.
    pub(crate) r: SeatSeconds,
    /// When `r` was last brought up to date.
    synced_at: Duration,
    /// The queue dispatched from last.
    robin: usize,
    /// The hands dealt last.
    hands: hands::Hands,
    /// One bit per queue, set while the queue has a request waiting: the
    /// dispatch search visits only these, in the same round-robin order.
    occupied: Vec<u64>,
    /// Each queue's next dispatch R plus the work of its head, valid while
    /// a request waits in it: what the dispatch search compares, side by
    /// side in memory.
    finish: Vec<SeatSeconds>,
    /// Where the search of the next hand starts: the number of requests
    /// ever enqueued, modulo the hand size (kept as it counts, instead of
    /// divided).
    offset: usize,
    /// Each queue's work waiting (its sum's total work), side by side in
    /// memory: what shuffle sharding compares.
    queued_work: Vec<SeatSeconds>,
    pub(crate) waiting: usize,
    pub(crate) seats_waiting: u64,
    pub(crate) executing: usize,
    pub(crate) seats_in_use: u64,
    /// Queues with a request waiting or executing.
    active_queues: usize,
    pub(crate) dispatched: u64,
    pub(crate) rejected: u64,
    pub(crate) cancelled: u64,
    /// Times `r` was wound back.
    pub(crate) epochs: u64,
}

impl QueueSet {
    pub(crate) fn new(mode: Mode, queues: usize, limit: u32, estimate: Duration) -> Self {
        let hands = hands::Hands::new(match &mode {
            Mode::Queue { dealer, .. } => Some(dealer),
            _ => None,
        });
        QueueSet {
            mode,
            queues: vec![Queue::default(); queues],
            limit,
            estimate,
            unit_work: SeatSeconds::times(1.0, estimate),
            r: SeatSeconds(0),
            synced_at: Duration::ZERO,
            robin: 0,
            hands,
            occupied: vec![0; queues.div_ceil(64)],
            finish: vec![SeatSeconds(0); queues],
            offset: 0,
            queued_work: vec![SeatSeconds(0); queues],
            waiting: 0,
            seats_waiting: 0,
            executing: 0,
            seats_in_use: 0,
            active_queues: 0,
            dispatched: 0,
            rejected: 0,
            cancelled: 0,
            epochs: 0,
        }
    }

    /// Seats in use plus seats waiting: the level's seat demand.
    pub(crate) fn seat_demand(&self) -> f64 {
        (self.seats_in_use + self.seats_waiting) as f64
    }

    /// Advances the progress meter to `now`, assuming the state has not
    /// changed since it was last advanced. Call before any change.
    pub(crate) fn sync(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.synced_at);
        self.synced_at = self.synced_at.max(now);
        if self.active_queues == 0 || elapsed.is_zero() {
            return;
        }
        let asked = (self.seats_in_use + self.seats_waiting) as f64;
        let rate = asked.min(f64::from(self.limit)) / self.active_queues as f64;
        // One step never crosses more than a quarter of the meter's range,
        // so that winding back keeps every reading in order (a clock that
        // jumps years ahead moves it that far and no further).
        let step = SeatSeconds::times(rate, elapsed).min(SeatSeconds(SeatSeconds::EPOCH.0 / 2));
        self.r = self.r.plus(step);
        if self.r >= SeatSeconds::HIGH {
            self.wind_back();
        }
    }

    /// Subtracts [`SeatSeconds::EPOCH`] from `r` and every reading taken
    /// from it; an idle queue restarts at zero.
    fn wind_back(&mut self) {
        let epoch = SeatSeconds::EPOCH;
        self.r = self.r.minus(epoch);
        for q in &mut self.queues {
            if !q.is_active() {
                q.next_dispatch_r = SeatSeconds(0);
                continue;
            }
            q.next_dispatch_r = SeatSeconds(q.next_dispatch_r.0.saturating_sub(epoch.0));
            for w in &mut q.waiting {
                w.arrival_r = SeatSeconds(w.arrival_r.0.saturating_sub(epoch.0));
            }
        }
        for q in 0..self.queues.len() {
            self.refresh(q);
        }
        self.epochs += 1;
    }

    /// Sets the concurrency limit (after [`sync`](Self::sync)).
    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// Whether a request of `seats` seats may start now.
    fn fits(&self, seats: u64) -> bool {
        match self.mode {
            Mode::Exempt => true,
            // Too wide for the limit: it runs alone.
            _ if seats > u64::from(self.limit) => self.executing == 0,
            _ => self.seats_in_use + seats <= u64::from(self.limit),
        }
    }

    /// A request arrives (after [`sync`](Self::sync)): it executes at once,
    /// is enqueued, or is refused.
    pub(crate) fn start(
        &mut self,
        ticket: Ticket,
        hash: u64,
        work: WorkEstimate,
    ) -> Result<Start, Rejected> {
        let seats = u64::from(work.initial_seats.max(work.final_seats));
        let (dealer, queue_length_limit) = match &self.mode {
            Mode::Queue {
                dealer,
                queue_length_limit,
            } => (*dealer, *queue_length_limit),
            Mode::Exempt | Mode::Reject => {
                if !self.fits(seats) {
                    self.rejected += 1;
                    return Err(Rejected::NoSeat);
                }
                self.executing += 1;
                self.seats_in_use += seats;
                self.dispatched += 1;
                return Ok(Start::Executing);
            }
        };
        let queue = if self.waiting == 0 {
            // Nothing waits: every queue's work waiting is zero, so the
            // search keeps the card it starts from.
            let offset = self.next_offset(dealer.hand_size());
            self.hands.card(&dealer, hash, offset)
        } else {
            let mut cards = [0u32; crate::dealer::MAX_HAND];
            let hand = self.hands.deal(&dealer, hash, &mut cards);
            self.shuffle_shard(hand)
        };
        if self.seats_in_use >= u64::from(self.limit)
            && self.queues[queue].waiting.len() >= queue_length_limit
        {
            self.rejected += 1;
            return Err(Rejected::QueueFull);
        }
        // Most requests are one seat wide and leave nothing behind: their
        // work is known without the arithmetic (which gives the same).
        let final_work = if work.final_seats == 0 || work.additional_latency.is_zero() {
            SeatSeconds(0)
        } else {
            SeatSeconds::times(f64::from(work.final_seats), work.additional_latency)
        };
        let initial_work = if work.initial_seats == 1 {
            self.unit_work
        } else {
            SeatSeconds::times(f64::from(work.initial_seats), self.estimate)
        };
        let waiter = Waiter {
            ticket,
            work,
            total_work: initial_work.plus(final_work),
            final_work,
            arrival_r: self.r,
        };
        let r = self.r;
        let alone =
            self.waiting == 0 && self.seats_in_use < u64::from(self.limit) && self.fits(seats);
        let q = &mut self.queues[queue];
        if !q.is_active() {
            q.next_dispatch_r = r;
            self.active_queues += 1;
        }
        if alone {
            // Fair queuing would pick it, the one request waiting: its
            // queue's place is bounded by its arrival, and it runs.
            let q = &mut self.queues[queue];
            q.next_dispatch_r = q.next_dispatch_r.max(r);
            return Ok(Start::Dispatched(self.execute(queue, waiter)));
        }
        q.push(waiter);
        q.bound_next_dispatch();
        self.refresh(queue);
        self.occupied[queue / 64] |= 1 << (queue % 64);
        self.waiting += 1;
        self.seats_waiting += seats;
        Ok(Start::Enqueued(queue))
    }

    /// The queue of the flow's hand with the least work waiting; the search
    /// starts one card further along the hand with every request.
    fn shuffle_shard(&mut self, hand: &[u32]) -> usize {
        let offset = self.next_offset(hand.len());
        let (mut best, mut least) = (hand[offset] as usize, SeatSeconds::MAX);
        let (after, before) = hand.split_at(offset);
        for &q in before.iter().chain(after) {
            let q = q as usize;
            let work = self.queued_work[q];
            if work < least {
                (best, least) = (q, work);
            }
        }
        best
    }

    /// Where the search of the next hand of `size` cards starts: the count
    /// of requests enqueued so far modulo the hand size (which never
    /// changes), counted instead of divided.
    fn next_offset(&mut self, size: usize) -> usize {
        let offset = self.offset.min(size - 1);
        self.offset = if offset + 1 == size { 0 } else { offset + 1 };
        offset
    }

    /// Dispatches as many waiting requests as fit, by fair queuing, handing
    /// each to `each` in order.
    pub(crate) fn dispatch(&mut self, mut each: impl FnMut(Dispatch)) {
        while self.waiting > 0 && self.seats_in_use < u64::from(self.limit) {
            match self.dispatch_one() {
                Some(d) => each(d),
                None => break,
            }
        }
    }

    fn dispatch_one(&mut self) -> Option<Dispatch> {
        let n = self.queues.len();
        // Round robin from the queue after the one served last: the
        // queues above it, then those up to it. Only queues with a request
        // waiting can win, so the others are skipped.
        let start = (self.robin + 1) % n.max(1);
        let mut min = None;
        scan(&self.occupied, &self.finish, start, n, &mut min);
        scan(&self.occupied, &self.finish, 0, start, &mut min);
        let (index, _) = min?;
        let head = self.queues[index].waiting.front()?;
        if !self.fits(head.max_seats()) {
            return None;
        }
        let q = &mut self.queues[index];
        let waiter = q.remove(0)?;
        if q.waiting.is_empty() {
            self.occupied[index / 64] &= !(1 << (index % 64));
        }
        self.waiting -= 1;
        self.seats_waiting -= waiter.max_seats();
        Some(self.execute(index, waiter))
    }

    /// Brings queue `q`'s entries in [`finish`](Self::finish) and
    /// [`queued_work`](Self::queued_work) up to date (after every change to
    /// its waiting requests).
    fn refresh(&mut self, q: usize) {
        let queue = &self.queues[q];
        self.queued_work[q] = queue.sum.total_work;
        if let Some(head) = queue.waiting.front() {
            self.finish[q] = queue.next_dispatch_r.plus(head.total_work);
        }
    }

    /// `waiter`, out of its queue `index`, starts executing.
    fn execute(&mut self, index: usize, mut waiter: Waiter) -> Dispatch {
        let limit = self.limit;
        // Final seats beyond the limit are lowered to it, the additional
        // latency stretched to keep the same final work.
        if waiter.work.final_seats > limit {
            waiter.work.final_seats = limit;
            waiter.work.additional_latency = waiter.final_work.per_seat(f64::from(limit));
        }
        self.robin = index;
        let held = waiter.max_seats();
        let q = &mut self.queues[index];
        q.executing += 1;
        q.seats_in_use += held;
        q.next_dispatch_r = q.next_dispatch_r.plus(waiter.total_work);
        q.bound_next_dispatch();
        self.refresh(index);
        self.executing += 1;
        self.seats_in_use += held;
        self.dispatched += 1;
        Dispatch {
            ticket: waiter.ticket,
            queue: index,
            work: waiter.work,
        }
    }

    /// A request's initial phase ended after running for `ran` (after
    /// [`sync`](Self::sync)): its queue's charge is corrected from the
    /// estimate to the real time. Its seats are released by
    /// [`release`](Self::release), now or after its additional latency.
    pub(crate) fn finish(&mut self, queue: Option<usize>, initial_seats: u32, ran: Duration) {
        self.executing -= 1;
        let Some(q) = queue.and_then(|i| self.queues.get_mut(i)) else {
            return;
        };
        q.executing -= 1;
        let estimate = seat_seconds::nanos(self.estimate);
        let correction = SeatSeconds::of(
            f64::from(initial_seats),
            estimate - seat_seconds::nanos(ran),
        );
        q.next_dispatch_r = q.next_dispatch_r.minus(correction);
        q.bound_next_dispatch();
        if !q.is_active() {
            self.active_queues -= 1;
        }
        if let Some(i) = queue {
            self.refresh(i);
        }
    }

    /// Frees `seats` held by a request of `queue` (after
    /// [`sync`](Self::sync)).
    pub(crate) fn release(&mut self, queue: Option<usize>, seats: u64) {
        self.seats_in_use -= seats;
        if let Some(q) = queue.and_then(|i| self.queues.get_mut(i)) {
            q.seats_in_use -= seats;
        }
    }

    /// A waiting request gives up (after [`sync`](Self::sync)); `false` if
    /// it is not in `queue`.
    pub(crate) fn cancel(&mut self, queue: usize, ticket: Ticket) -> bool {
        let Some(q) = self.queues.get_mut(queue) else {
            return false;
        };
        let Some(at) = q.waiting.iter().position(|w| w.ticket == ticket) else {
            return false;
        };
        let waiter = q.remove(at).expect("found above");
        q.bound_next_dispatch();
        if q.waiting.is_empty() {
            self.occupied[queue / 64] &= !(1 << (queue % 64));
        }
        if !q.is_active() {
            self.active_queues -= 1;
        }
        self.refresh(queue);
        self.waiting -= 1;
        self.seats_waiting -= waiter.max_seats();
        self.rejected += 1;
        self.cancelled += 1;
        true
    }
}

/// The queue of least `finish` among those with a request waiting
/// (`occupied`) whose index is in `lo..hi`, visited in order, against the
/// least so far in `min`: a tie keeps the queue visited first.
fn scan(
    occupied: &[u64],
    finish: &[SeatSeconds],
    lo: usize,
    hi: usize,
    min: &mut Option<(usize, SeatSeconds)>,
) {
    let words = occupied.iter().enumerate();
    for (w, &word) in words.take(hi.div_ceil(64)).skip(lo / 64) {
        let mut bits = word;
        if w == lo / 64 {
            bits &= u64::MAX << (lo % 64);
        }
        if w == hi / 64 {
            bits &= (1u64 << (hi % 64)) - 1;
        }
        while bits != 0 {
            let index = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let f = finish[index];
            if min.is_none_or(|(_, least)| f < least) {
                *min = Some((index, f));
            }
        }
    }
}
