//! The watch: the detector, the outage under way or the release after it,
//! and the parked keys. The wrapper tells it every outcome and asks it
//! about a key before answering for it; the watch decides with the pure
//! rules of its sibling modules and never touches a key's own state.
//!
//! Outside an outage the common outcomes cost no lock and share no cache
//! line between threads: a success or a failure that continues a key's
//! ladder adds one to a counter that only the calling thread writes (for
//! the first sixteen threads alive at once; any further ones share one,
//! added to atomically), and the time is not even read. Only a fresh failure (one that started a key's
//! ladder) takes the lock, to be remembered by the detector, and only
//! while an outage or its release is under way does every call take it.
//!
//! Parked keys are remembered by a 64-bit hash of the key (seeded), not by
//! the key: two keys whose hashes collide would merely share their turns.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use crate::settings::OutageSettings;
pub(crate) use crate::state::{Asked, Event, Ruling};
use crate::state::{Home, Map, State};

/// Counters of the watch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub in_outage: bool,
    pub parked: usize,
    pub outages: u64,
}

struct Inner<L> {
    state: State,
    parked: Map<L>,
}

pub(crate) struct Watch<L> {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
    /// False while nothing is parked: the common calls skip the lock.
    active: AtomicBool,
    /// Counts this watch while it is active, with the other watches that
    /// share it (a process's domains).
    actives: Option<Arc<AtomicUsize>>,
    /// Every failure and success told outside the lock: the detector
    /// reads their totals when a fresh failure comes.
    told: Box<[Told; OWNED + 1]>,
    inner: Locked<L>,
}

/// The lock and what it guards, on cache lines of their own: a fresh
/// failure written under the lock on one core does not take the lines
/// that every call reads (`active`, `told`) away from the others.
#[repr(align(128))]
struct Locked<L>(Mutex<Inner<L>>);

impl<L> std::ops::Deref for Locked<L> {
    type Target = Mutex<Inner<L>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// How many threads alive at once count in a counter of their own, which
/// no other thread writes: an add is a plain load and store, with no
/// atomic read-modify-write and no cache line shared between threads.
/// Any further thread counts in one shared counter (the last), atomically.
const OWNED: usize = 16;

/// The failures and successes told by one thread (or, in the last
/// counter, by the threads beyond [`OWNED`]), on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
struct Told {
    failures: AtomicU64,
    successes: AtomicU64,
}

impl Told {
    /// Adds one to `count`: a plain load and store by its only writer, or
    /// an atomic add on the `shared` counter.
    #[inline]
    fn add(count: &AtomicU64, shared: bool) {
        match shared {
            false => count.store(count.load(Ordering::Relaxed) + 1, Ordering::Relaxed),
            true => _ = count.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// The counter the calling thread writes, in every watch: its own while
/// it lives, or the shared one ([`OWNED`]).
///
/// The number is cached in a constant-initialised thread local without a
/// destructor, read with a plain load; only a thread's first call reaches
/// its [`Owner`] (a thread local with a destructor, which gives the number
/// back when the thread ends).
#[inline]
fn own_counter() -> usize {
    let own = OWN.get();
    if own != UNKNOWN {
        return own;
    }
    first_counter()
}

/// A thread's counter before its first call.
const UNKNOWN: usize = usize::MAX;

thread_local! {
    /// The calling thread's counter, once known.
    static OWN: Cell<usize> = const { Cell::new(UNKNOWN) };
    /// The calling thread's number, given back when it ends.
    static OWNER: Owner = Owner::take();
}

/// A thread's first call: it takes a number and caches its counter. A
/// thread already ending (its [`Owner`] gone) counts in the shared one.
#[cold]
#[inline(never)]
fn first_counter() -> usize {
    let own = OWNER.try_with(|owner| owner.0.min(OWNED)).unwrap_or(OWNED);
    OWN.set(own);
    own
}

/// A thread's number, the lowest free one: while the thread lives it owns
/// the counter of that number in every watch (if below [`OWNED`]), and it
/// gives the number back when it ends. Numbers pass under a lock, so a
/// counter's next owner reads what the last one wrote.
struct Owner(usize);

static FREE: Mutex<BinaryHeap<Reverse<usize>>> = parking_lot::const_mutex(BinaryHeap::new());
static TAKEN: AtomicUsize = AtomicUsize::new(0);

impl Owner {
    fn take() -> Owner {
        let lowest = FREE.lock().pop().map(|Reverse(n)| n);
        Owner(lowest.unwrap_or_else(|| TAKEN.fetch_add(1, Ordering::Relaxed)))
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Calls made later while the thread ends (from other thread
        // locals' destructors) count in the shared counter, atomically:
        // the number may be another thread's by then.
        OWN.set(OWNED);
        FREE.lock().push(Reverse(self.0));
    }
}

/// A time on the outage's line, or how to read it: a caller that has it
/// passes it, the wrapper passes the read, made only when needed.
pub(crate) trait At {
    fn at(self) -> Duration;
}

impl At for Duration {
    #[inline]
    fn at(self) -> Duration {
        self
    }
}

impl<F: FnOnce() -> Duration> At for F {
    #[inline]
    fn at(self) -> Duration {
        self()
    }
}

impl<L: Copy> Watch<L> {
    /// A watch for validated `settings`; `seed` draws the keys' slots.
    pub(crate) fn new(settings: OutageSettings, seed: u64) -> Self {
        Self::counted(settings, seed, None)
    }

    /// [`new`](Self::new), counted in `actives` while active.
    pub(crate) fn counted(
        settings: OutageSettings,
        seed: u64,
        actives: Option<Arc<AtomicUsize>>,
    ) -> Self {
        Watch {
            settings,
            hasher: foldhash::quality::FixedState::with_seed(seed),
            active: AtomicBool::new(false),
            actives,
            told: Box::default(),
            inner: Locked(Mutex::new(Inner {
                state: State::new(&settings),
                parked: HashMap::default(),
            })),
        }
    }

    /// Marks the watch active or not, counted in `actives` (under the
    /// lock: changes come one at a time).
    fn set_active(&self, active: bool) {
        let was = self.active.swap(active, Ordering::Relaxed);
        if let Some(actives) = self.actives.as_ref().filter(|_| was != active) {
            match active {
                true => _ = actives.fetch_add(1, Ordering::Relaxed),
                false => _ = actives.fetch_sub(1, Ordering::Relaxed),
            }
        }
    }

    /// The settings it was made with.
    pub(crate) fn settings(&self) -> OutageSettings {
        self.settings
    }

    /// Whether an outage or a release is under way (a relaxed read: a
    /// caller that races a change sees it at its next call).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// A failure of `key` that its own backoff counted at `at`; `fresh`
    /// when it started the key's ladder. Lock-free unless fresh, and `at`
    /// is read only then.
    #[inline]
    pub(crate) fn failed<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        fresh: bool,
        at: impl At,
        events: impl FnMut(Event),
    ) {
        let own = own_counter();
        Told::add(&self.told[own].failures, own == OWNED);
        if fresh {
            self.record_fresh(self.hasher.hash_one(key), at.at(), events);
        }
    }

    /// The failures and successes told so far, over every thread. Read
    /// under the lock, so that each reading is at least the one before
    /// (every counter only grows, and so does the number of threads that
    /// ever took one: the counters of numbers never taken are zero and not
    /// read).
    fn totals(&self, _locked: &mut Inner<L>) -> (u64, u64) {
        let taken = TAKEN.load(Ordering::Relaxed).min(OWNED);
        let shared = std::iter::once(&self.told[OWNED]);
        self.told[..taken]
            .iter()
            .chain(shared)
            .fold((0, 0), |(f, s), told| {
                let failures = told.failures.load(Ordering::Relaxed);
                (f + failures, s + told.successes.load(Ordering::Relaxed))
            })
    }

    /// A fresh failure of the key with `hash`, already counted: remembered
    /// by the detector, which may declare an outage.
    #[inline(never)]
    fn record_fresh(&self, hash: u64, at: Duration, mut events: impl FnMut(Event)) {
        let began = {
            let mut inner = self.inner.lock();
            let inner = &mut *inner;
            let (failures, successes) = self.totals(inner);
            // The detector counts this failure itself: the totals before it.
            let state = &mut inner.state;
            state.detector.totals(failures.saturating_sub(1), successes);
            let began = state.fresh(&self.settings, &mut inner.parked, hash, at);
            if began.is_some() {
                self.set_active(true);
            }
            began
        };
        // Events are told with the lock released.
        began.into_iter().for_each(&mut events);
    }

    /// A success of `key` at `at`: it is no longer parked, and it may end
    /// the outage. Lock-free while no outage or release is under way, and
    /// `at` is read only then.
    #[inline]
    pub(crate) fn succeeded<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: impl At,
        mut events: impl FnMut(Event),
    ) {
        let own = own_counter();
        Told::add(&self.told[own].successes, own == OWNED);
        if !self.active() {
            return;
        }
        let at = at.at();
        let ended = {
            let mut inner = self.inner.lock();
            let inner = &mut *inner;
            let hash = self.hasher.hash_one(key);
            inner
                .state
                .succeeded(&self.settings, &mut inner.parked, hash, at)
        };
        ended.into_iter().for_each(&mut events);
    }

    /// The watch's counters now.
    pub(crate) fn tally(&self) -> Tally {
        let inner = self.inner.lock();
        Tally {
            in_outage: inner.state.in_outage(),
            parked: inner.parked.count(),
            outages: inner.state.outages,
        }
    }

    /// The wait `key` would be told at `at` if it asked to run, changing
    /// nothing: no key is parked, no probe's turn and no release slot is
    /// taken. `None` when it could go.
    pub(crate) fn peek<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        level: L,
    ) -> Option<Duration> {
        if !self.active() {
            return None;
        }
        let inner = self.inner.lock();
        let hash = self.hasher.hash_one(key);
        inner.state.peek(&inner.parked, hash, at, level)
    }

    /// What `key` may do at `at`, `asked` by a caller about to run it or
    /// for a failure. During an outage the key is parked (`level` gives
    /// its own level the first time); during the release it takes its
    /// time to go. For a failure, `Free` means the key's own backoff
    /// counts it and the wrapper then calls [`failed`](Self::failed).
    pub(crate) fn ruling<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        asked: Asked,
        level: L,
        mut events: impl FnMut(Event),
    ) -> Ruling<L> {
        if !self.active() {
            return Ruling::Free;
        }
        let (ruling, event) = self.decide(self.inner.lock(), key, at, asked, level);
        event.into_iter().for_each(&mut events);
        ruling
    }

    /// [`rule`](Self::rule) under the lock, and the event it causes.
    fn decide<Q: Hash + ?Sized>(
        &self,
        mut inner: MutexGuard<'_, Inner<L>>,
        key: &Q,
        at: Duration,
        asked: Asked,
        level: L,
    ) -> (Ruling<L>, Option<Event>) {
        let inner = &mut *inner;
        let hash = self.hasher.hash_one(key);
        let decided = inner
            .state
            .decide(&self.settings, &mut inner.parked, hash, at, asked, level);
        if !inner.state.active() {
            self.set_active(false);
        }
        decided
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
