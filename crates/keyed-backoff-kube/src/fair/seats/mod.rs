//! The seats and the reconciles waiting for them: one [`Apf`] with a level
//! per [`Priority`], fed from a backlog per flow, and a strict order
//! between the levels for the seats themselves.
//!
//! Kubernetes' fair queuing is fair between *queues*; a flow's burst, dealt
//! over its whole hand, would sit in front of every flow that shares one of
//! those queues. So each flow keeps its own backlog (oldest first) and has
//! at most [`Seats::PER_FLOW_QUEUED`] reconciles in the `Apf`'s queues at a
//! time; the `Apf` picks which flow goes next.
//!
//! Both levels hold twice the seats (the `Apf` is built with four
//! times the seats, in equal shares, lending nothing): a level's request
//! that the `Apf` dispatches is *ready*, and ready reconciles take the
//! gate's seats, those of [`Priority::Changed`] first.
//!
//! A waiting object is a place, at most one per object, with no reconcile
//! of its own waiting until the `Apf` dispatches it: then it is *called*
//! (through an outbox the fair queues drain after every change,
//! [`Seats::drain`]), its reconcile comes and waits ([`Seats::attach`]),
//! and a seat goes to the first ready object whose reconcile is here.
//! As each level holds twice the seats, the next reconciles are
//! called while the current ones run, and a seat that frees is taken at
//! once. Beyond those, a few waiting objects per seat are called *ahead*,
//! the oldest first: their reconciles wait here for their turn, so that a
//! turn that comes to one of them (with a single flow, every turn) is
//! taken without asking the controller.

mod inspect;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use fair_admission::{Admission, Admit, Apf, LevelId, Ticket};
use futures::channel::oneshot;
use tokio::time::Instant;

use super::stats::{FairStats, Priority};

/// What a waiting reconcile is told, once.
#[derive(Debug)]
pub(crate) enum Answer {
    /// It holds a seat: run, then hand the ticket back.
    Seat(Ticket),
    /// Its object is gone: it leaves without running.
    Gone,
    /// No room to wait: requeue after the wait given.
    Full(Duration),
}

/// What the fair queues are told to do for a waiting object whose reconcile is
/// not here.
#[derive(Debug)]
pub(crate) enum Call {
    /// Its turn has come: have its reconcile run now.
    Now,
    /// There was no room for it: have its reconcile run after this wait.
    After(Duration),
}

/// Where a waiting reconcile is.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// In its flow's backlog.
    Backlog,
    /// In one of the `Apf`'s queues.
    Queued(Ticket),
    /// Dispatched by the `Apf` (at this time), waiting for one of the
    /// gate's seats.
    Ready(Ticket, Instant),
}

struct Waiter<R> {
    /// Its reconcile, when it is here and waits for its answer.
    here: Option<oneshot::Sender<Answer>>,
    /// Whether its reconcile was asked for (its turn came, or ahead).
    called: bool,
    ident: R,
    flow: Arc<str>,
    priority: Priority,
    since: Instant,
    place: Place,
}

impl<R> Waiter<R> {
    /// Called ahead of its turn, its turn not come yet (counted in
    /// `Seats::called_ahead`).
    fn ahead(&self) -> bool {
        self.called && !matches!(self.place, Place::Ready(..))
    }
}

/// One flow at one priority: its backlog (waiter ids, oldest first) and
/// how many of its reconciles wait in the `Apf`'s queues.
#[derive(Default)]
struct Flow {
    backlog: BTreeSet<u64>,
    queued: usize,
}

/// How many may wait: per flow and per priority.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) per_flow: usize,
    pub(crate) per_priority: usize,
}

/// The fair queues' state: every reconcile waiting or holding a seat. `R`
/// identifies a waiting reconcile's object, for the question whether it
/// still exists.
pub(crate) struct Seats<R> {
    apf: Apf,
    levels: [LevelId; 2],
    seats: u32,
    running: u32,
    limits: Limits,
    /// Every waiting reconcile, by id (ids grow: the first is the oldest).
    waiters: BTreeMap<u64, Waiter<R>>,
    /// The waiting reconcile of each object, by the object.
    places: HashMap<R, u64>,
    /// Calls for objects whose reconcile is not here, since the last
    /// [`drain`](Self::drain).
    outbox: Vec<(R, Call)>,
    /// Waiters not called yet, oldest first.
    uncalled: BTreeSet<u64>,
    /// Waiters called ahead of their turn, their turn not come yet.
    called_ahead: usize,
    /// Waiters in the `Apf`'s queues, by ticket.
    queued: HashMap<Ticket, u64>,
    flows: HashMap<(Priority, Arc<str>), Flow>,
    /// Ready waiters per priority, in dispatch order (ids of waiters gone
    /// since are skipped).
    ready: [VecDeque<u64>; 2],
    waiting: [usize; 2],
    next_id: u64,
    epoch: Instant,
    pub(crate) stats: FairStats,
}

impl<R: Clone + Eq + Hash> Seats<R> {
    /// Waiters called ahead of their turn, per seat.
    pub(crate) const AHEAD_PER_SEAT: usize = 8;

    /// A called object whose reconcile has not come within this long
    /// loses its turn.
    pub(crate) const HOLD: Duration = Duration::from_secs(5);

    /// At most this many reconciles of one flow wait in the `Apf`'s queues.
    pub(crate) const PER_FLOW_QUEUED: usize = 4;

    /// `seats` seats over `apf`, whose two levels (changed, resync) each
    /// hold twice `seats`.
    pub(crate) fn new(apf: Apf, levels: [LevelId; 2], seats: u32, limits: Limits) -> Self {
        Seats {
            apf,
            levels,
            seats,
            running: 0,
            limits,
            waiters: BTreeMap::new(),
            places: HashMap::new(),
            outbox: Vec::new(),
            uncalled: BTreeSet::new(),
            called_ahead: 0,
            queued: HashMap::new(),
            flows: HashMap::new(),
            ready: [VecDeque::new(), VecDeque::new()],
            waiting: [0, 0],
            next_id: 0,
            epoch: Instant::now(),
            stats: FairStats {
                seats,
                ..FairStats::default()
            },
        }
    }

    /// Sets the `Apf`'s clock to now.
    fn tick(&mut self) {
        let dispatched = self.apf.advance_to(self.epoch.elapsed());
        self.settle(dispatched);
    }

    /// The place of `ident`, if it waits: its id, its priority and
    /// whether its reconcile was asked for.
    pub(crate) fn place(&self, ident: &R) -> Option<(u64, Priority, bool)> {
        let id = *self.places.get(ident)?;
        let w = self.waiters.get(&id)?;
        Some((id, w.priority, w.called))
    }

    /// The calls since the last drain, oldest first.
    pub(crate) fn drain(&mut self) -> Vec<(R, Call)> {
        std::mem::take(&mut self.outbox)
    }

    /// The reconcile of waiter `id` is here: it is told its answer on
    /// `here` (at once, if a seat is free).
    pub(crate) fn attach(
        &mut self,
        id: u64,
        here: oneshot::Sender<Answer>,
        alive: impl Fn(&R) -> bool,
    ) {
        if let Some(w) = self.waiters.get_mut(&id) {
            w.here = Some(here);
        }
        self.pump(alive);
    }

    /// `ident`, in `flow` at `priority`, starts waiting, its reconcile not
    /// here (it may be called at once): its id, or the wait before it
    /// tries again if there is no room.
    pub(crate) fn enqueue(
        &mut self,
        ident: R,
        flow: Arc<str>,
        priority: Priority,
        alive: impl Fn(&R) -> bool,
    ) -> Result<u64, Duration> {
        self.tick();
        let p = priority as usize;
        let backlog = self
            .flows
            .get(&(priority, Arc::clone(&flow)))
            .map_or(0, |f| f.backlog.len() + f.queued);
        if self.waiting[p] >= self.limits.per_priority || backlog >= self.limits.per_flow {
            self.stats.requeued_full += 1;
            return Err(self.retry_after(priority));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.places.insert(ident.clone(), id);
        let waiter = Waiter {
            here: None,
            called: false,
            ident,
            flow: Arc::clone(&flow),
            priority,
            since: Instant::now(),
            place: Place::Backlog,
        };
        self.waiters.insert(id, waiter);
        self.uncalled.insert(id);
        self.waiting[p] += 1;
        let key = (priority, flow);
        self.flows
            .entry(key.clone())
            .or_default()
            .backlog
            .insert(id);
        self.feed(key);
        self.pump(alive);
        Ok(id)
    }

    /// The wait before a reconcile refused for want of room tries again:
    /// the level's `Retry-After` (1 s, doubling while it keeps refusing).
    fn retry_after(&self, priority: Priority) -> Duration {
        let level = self.levels[priority as usize];
        self.apf
            .retry_after(level)
            .unwrap_or(Duration::from_secs(1))
    }

    /// Moves `key`'s oldest waiters into the `Apf`'s queues, up to
    /// [`PER_FLOW_QUEUED`](Self::PER_FLOW_QUEUED), and settles whatever
    /// that dispatched.
    fn feed(&mut self, key: (Priority, Arc<str>)) {
        let mut flows = vec![key];
        while let Some(key) = flows.pop() {
            let (priority, ref flow_name) = key;
            let level = self.levels[priority as usize];
            loop {
                let id = match self.flows.get_mut(&key) {
                    Some(flow) if flow.queued < Self::PER_FLOW_QUEUED => {
                        match flow.backlog.pop_first() {
                            Some(id) => id,
                            None => break,
                        }
                    }
                    _ => break,
                };
                let Admission {
                    admit, dispatched, ..
                } = self.apf.admit(level, &**flow_name, 1);
                match admit {
                    Admit::Dispatched(ticket) => self.make_ready(id, ticket),
                    Admit::Queued(ticket) => {
                        if let Some(flow) = self.flows.get_mut(&key) {
                            flow.queued += 1;
                        }
                        self.queued.insert(ticket, id);
                        if let Some(w) = self.waiters.get_mut(&id) {
                            w.place = Place::Queued(ticket);
                        }
                    }
                    _ => {
                        let wait = self.retry_after(priority);
                        self.stats.requeued_full += 1;
                        self.answer(id, Answer::Full(wait));
                    }
                }
                flows.extend(self.on_dispatched(dispatched));
            }
            self.forget_flow_if_idle(&key);
        }
    }

    /// Marks the tickets the `Apf` dispatched ready; the flows that then
    /// have room in its queues.
    fn on_dispatched(&mut self, dispatched: Vec<Ticket>) -> Vec<(Priority, Arc<str>)> {
        let mut flows = Vec::new();
        for ticket in dispatched {
            let Some(id) = self.queued.remove(&ticket) else {
                continue;
            };
            let Some(w) = self.waiters.get(&id) else {
                continue;
            };
            let key = (w.priority, Arc::clone(&w.flow));
            if let Some(flow) = self.flows.get_mut(&key) {
                flow.queued -= 1;
            }
            self.make_ready(id, ticket);
            flows.push(key);
        }
        flows
    }

    /// Settles tickets the `Apf` dispatched outside [`feed`](Self::feed).
    fn settle(&mut self, dispatched: Vec<Ticket>) {
        for key in self.on_dispatched(dispatched) {
            self.feed(key);
        }
    }

    fn make_ready(&mut self, id: u64, ticket: Ticket) {
        self.uncalled.remove(&id);
        if let Some(w) = self.waiters.get_mut(&id) {
            if w.ahead() {
                self.called_ahead -= 1;
            }
            w.place = Place::Ready(ticket, Instant::now());
            self.ready[w.priority as usize].push_back(id);
            if !w.called && w.here.is_none() {
                self.outbox.push((w.ident.clone(), Call::Now));
            }
            w.called = true;
        }
    }

    /// Calls the oldest waiters in the queues ahead of their turn, up to
    /// [`AHEAD_PER_SEAT`](Self::AHEAD_PER_SEAT) per seat.
    fn call_ahead(&mut self) {
        while self.called_ahead < Self::AHEAD_PER_SEAT * self.seats as usize {
            let Some(id) = self.uncalled.pop_first() else {
                break;
            };
            let Some(w) = self.waiters.get_mut(&id) else {
                continue;
            };
            w.called = true;
            self.called_ahead += 1;
            if w.here.is_none() {
                self.outbox.push((w.ident.clone(), Call::Now));
            }
        }
    }

    fn forget_flow_if_idle(&mut self, key: &(Priority, Arc<str>)) {
        if self
            .flows
            .get(key)
            .is_some_and(|f| f.backlog.is_empty() && f.queued == 0)
        {
            self.flows.remove(key);
        }
    }

    /// Removes waiter `id` and tells it `answer`: on its reconcile's
    /// channel if that is here, or as a call to have it run later if
    /// there was no room. A seat's ticket is not completed here.
    fn answer(&mut self, id: u64, answer: Answer) {
        let Some(w) = self.waiters.remove(&id) else {
            return;
        };
        self.waiting[w.priority as usize] -= 1;
        if self.places.get(&w.ident) == Some(&id) {
            self.places.remove(&w.ident);
        }
        self.uncalled.remove(&id);
        if w.ahead() {
            self.called_ahead -= 1;
        }
        match (w.here, answer) {
            (Some(here), answer) => drop(here.send(answer)),
            (None, Answer::Full(wait)) => self.outbox.push((w.ident, Call::After(wait))),
            (None, _) => {}
        }
    }

    /// Gives free seats to ready waiters whose reconcile is here, changed
    /// ones first, in dispatch order; a waiter whose object is no longer
    /// `alive` is told so and takes none.
    fn pump(&mut self, alive: impl Fn(&R) -> bool) {
        while self.running < self.seats {
            let Some(id) = self.next_here() else { break };
            let w = &self.waiters[&id];
            let Place::Ready(ticket, _) = w.place else {
                continue;
            };
            let (priority, gone) = (w.priority, !alive(&w.ident));
            let waited = w.since.elapsed();
            if gone {
                self.stats.dropped_deleted += 1;
                self.answer(id, Answer::Gone);
                self.release(ticket);
            } else {
                self.answer(id, Answer::Seat(ticket));
                self.running += 1;
                self.stats.granted[priority as usize] += 1;
                super::observe::granted(priority, waited);
            }
        }
        self.call_ahead();
        self.stats.seats_in_use = self.running;
        self.stats.waiting = self.waiting;
        super::observe::state(&self.stats, self.longest_wait());
    }

    /// The first ready waiter whose reconcile is here, taken from its
    /// ready queue (changed first); waiters gone since are dropped from
    /// the queues on the way.
    fn next_here(&mut self) -> Option<u64> {
        for ready in &mut self.ready {
            ready.retain(|id| self.waiters.contains_key(id));
            let here = |id: &u64| self.waiters[id].here.is_some();
            if let Some(at) = ready.iter().position(here) {
                return ready.remove(at);
            }
        }
        None
    }

    /// Hands an `Apf` seat back (its reconcile ran, or never will).
    pub(crate) fn release(&mut self, ticket: Ticket) {
        if let Some(dispatched) = self.apf.complete(ticket) {
            self.settle(dispatched);
        }
    }

    /// The reconcile holding `ticket` finished: its seat goes to the next.
    pub(crate) fn finish(&mut self, ticket: Ticket, alive: impl Fn(&R) -> bool) {
        self.tick();
        self.running = self.running.saturating_sub(1);
        self.release(ticket);
        self.pump(alive);
    }

    /// Waiter `id` stops waiting (it waits again at another priority, or
    /// its object is gone): it leaves its backlog or queue, or hands back
    /// the `Apf` seat it was dispatched.
    pub(crate) fn cancel(&mut self, id: u64, alive: impl Fn(&R) -> bool) {
        self.tick();
        self.leave(id);
        self.pump(alive);
    }

    fn leave(&mut self, id: u64) {
        let Some(w) = self.waiters.get(&id) else {
            return;
        };
        let (place, key) = (w.place, (w.priority, Arc::clone(&w.flow)));
        self.answer(id, Answer::Gone);
        match place {
            Place::Backlog => {
                if let Some(flow) = self.flows.get_mut(&key) {
                    flow.backlog.remove(&id);
                }
                self.forget_flow_if_idle(&key);
            }
            Place::Queued(ticket) => {
                self.apf.cancel(ticket);
                self.queued.remove(&ticket);
                if let Some(flow) = self.flows.get_mut(&key) {
                    flow.queued -= 1;
                }
                self.feed(key);
            }
            Place::Ready(ticket, _) => self.release(ticket),
        }
    }

    /// Every waiter whose object is no longer `alive` leaves, told so.
    pub(crate) fn sweep(&mut self, alive: impl Fn(&R) -> bool) {
        self.tick();
        let gone: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| !alive(&w.ident))
            .map(|(id, _)| *id)
            .collect();
        self.stats.dropped_deleted += gone.len() as u64;
        // Called, but its reconcile has not come for its seat: the place
        // goes to the next (the object asks again later, and waits anew).
        let unclaimed: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| {
                w.here.is_none()
                    && alive(&w.ident)
                    && matches!(w.place, Place::Ready(_, at) if at.elapsed() >= Self::HOLD)
            })
            .map(|(id, _)| *id)
            .collect();
        self.stats.unclaimed += unclaimed.len() as u64;
        for id in gone.into_iter().chain(unclaimed) {
            self.leave(id);
        }
        self.pump(alive);
    }
}
