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
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use super::detector::{Change, Counts, Detector, Outcome};
use super::ladder::Outage;
use super::parked::{Parked, Turn};
use super::release::{Release, push_bounded};
use super::settings::OutageSettings;
use crate::draws::unit_at;

/// What the wrapper does with a key the watch was asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ruling<L> {
    /// Not parked: the key's own backoff decides.
    Free,
    /// Parked until this time; a failure reported now is `counted` when it
    /// was the key's turn, and out of turn otherwise.
    Parked { until: Duration, counted: bool },
    /// Let go now, after the outage: the key's own backoff decides, from
    /// its level as it stood when the outage first parked it.
    Released { level: L },
}

/// Why the wrapper asks about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// A caller about to run the key (it claims the key's turn).
    Claim,
    /// A failure of the key.
    Failure,
}

/// What a change of state was, for events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// An outage began, with the counts that declared it.
    Began(Counts),
    /// The outage ended after `lasted`, with `parked` keys to let go.
    Ended { lasted: Duration, parked: usize },
    /// The release is over: `released` keys were let go.
    Released { released: u64 },
}

/// Counters of the watch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) in_outage: bool,
    pub(crate) parked: usize,
    pub(crate) outages: u64,
}

enum Phase {
    Normal,
    Outage(Outage),
    Release(Release),
}

struct Inner<L> {
    detector: Detector,
    phase: Phase,
    /// Keyed by the keys' hashes already: a fixed fast hasher is enough.
    parked: HashMap<u64, Parked<L>, foldhash::fast::FixedState>,
    /// When the outage's latest outcomes were told (the last second's, at
    /// most the release rate of them): attempts that reached the
    /// dependency, counted against the release's first second.
    reached: VecDeque<Duration>,
    outages: u64,
    released: u64,
}

pub(crate) struct Watch<L> {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
    /// False while nothing is parked: the common calls skip the lock.
    active: AtomicBool,
    /// Every failure and success told outside the lock: the detector
    /// reads their totals when a fresh failure comes.
    told: Box<[Told; OWNED + 1]>,
    inner: Mutex<Inner<L>>,
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
        Watch {
            settings,
            hasher: foldhash::quality::FixedState::with_seed(seed),
            active: AtomicBool::new(false),
            told: Box::default(),
            inner: Mutex::new(Inner {
                detector: Detector::new(&settings),
                phase: Phase::Normal,
                parked: HashMap::default(),
                reached: VecDeque::new(),
                outages: 0,
                released: 0,
            }),
        }
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
            inner.detector.totals(failures.saturating_sub(1), successes);
            let began = inner.detector.record(Outcome::Fresh(hash), at) == Some(Change::Began);
            began.then(|| {
                self.begin(inner, at);
                Event::Began(inner.detector.declared())
            })
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
            inner.parked.remove(&self.hasher.hash_one(key));
            self.reached(inner, at);
            match (inner.detector.record(Outcome::Success, at), &inner.phase) {
                (Some(Change::Ended), Phase::Outage(outage)) => {
                    let (lasted, parked) = (at.saturating_sub(outage.began()), inner.parked.len());
                    let rate = self.settings.release_rate;
                    let reached = std::mem::take(&mut inner.reached);
                    let release = Release::new(at, rate, parked, outage.max_step(), reached);
                    inner.phase = Phase::Release(release);
                    Some(Event::Ended { lasted, parked })
                }
                _ => None,
            }
        };
        ended.into_iter().for_each(&mut events);
    }

    /// The watch's counters now.
    pub(crate) fn tally(&self) -> Tally {
        let inner = self.inner.lock();
        Tally {
            in_outage: matches!(inner.phase, Phase::Outage(_)),
            parked: inner.parked.len(),
            outages: inner.outages,
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
        let mut parked = inner
            .parked
            .get(&hash)
            .cloned()
            .unwrap_or_else(|| Parked::new(level));
        let turn = match &inner.phase {
            Phase::Normal => Turn::Go,
            Phase::Outage(outage) => outage.clone().turn(&mut parked, at, |s| unit_at(hash, s)),
            Phase::Release(release) if release.over(at) => Turn::Go,
            Phase::Release(_) if !inner.parked.contains_key(&hash) => Turn::Go,
            Phase::Release(release) => release.clone().turn(&mut parked, at),
        };
        match turn {
            Turn::Go => None,
            Turn::Wait(until) => Some(until.saturating_sub(at)),
        }
    }

    /// What `key` may do at `at`, `asked` by a caller about to run it or
    /// for a failure. During an outage the key is parked (`level` gives
    /// its own level the first time); during the release it takes its
    /// time to go. For a failure, `Free` means the key's own backoff
    /// counts it and the wrapper then calls [`failed`](Self::failed).
    pub(crate) fn rule<Q: Hash + ?Sized>(
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
        let failure = asked == Asked::Failure;
        if failure && matches!(inner.phase, Phase::Outage(_)) {
            // Any failure seen during an outage breaks a run of successes.
            inner.detector.record(Outcome::Failure, at);
            self.reached(inner, at);
        }
        let ruling = match &mut inner.phase {
            Phase::Normal => Ruling::Free,
            Phase::Outage(outage) => {
                let parked = inner
                    .parked
                    .entry(hash)
                    .or_insert_with(|| Parked::new(level));
                let draw = |step: u64| unit_at(hash, step);
                let turn = match failure {
                    true => outage.failed(parked, at, draw),
                    false => match outage.turn(parked, at, draw) {
                        Turn::Go => return (Ruling::Free, None),
                        Turn::Wait(until) => Err(until),
                    },
                };
                let (Ok(until) | Err(until)) = turn;
                Ruling::Parked {
                    until,
                    counted: turn.is_ok(),
                }
            }
            Phase::Release(release) => {
                if release.over(at) {
                    let released = inner.released;
                    self.settle(inner);
                    return (Ruling::Free, Some(Event::Released { released }));
                }
                let Some(parked) = inner.parked.get_mut(&hash) else {
                    return (Ruling::Free, None);
                };
                inner.released += u64::from(parked.release_at.is_none());
                match release.turn(parked, at) {
                    Turn::Go => Ruling::Released {
                        level: parked.level,
                    },
                    Turn::Wait(until) => Ruling::Parked {
                        until,
                        counted: false,
                    },
                }
            }
        };
        (ruling, None)
    }

    /// An outcome told at `at`: during an outage, an attempt that reached
    /// the dependency, kept while it is within a second of the latest.
    fn reached(&self, inner: &mut Inner<L>, at: Duration) {
        if !matches!(inner.phase, Phase::Outage(_)) {
            return;
        }
        let most = (self.settings.release_rate.floor() as usize).max(1);
        push_bounded(&mut inner.reached, at, most);
        while inner
            .reached
            .front()
            .is_some_and(|t| t.saturating_add(Duration::from_secs(1)) <= at)
        {
            inner.reached.pop_front();
        }
    }

    /// An outage begins at `at`. Keys still waiting to be let go from an
    /// earlier one keep the level they had then; the others are forgotten.
    fn begin(&self, inner: &mut Inner<L>, at: Duration) {
        inner
            .parked
            .retain(|_, p| p.release_at.is_none_or(|go| go > at));
        for p in inner.parked.values_mut() {
            *p = Parked::new(p.level);
        }
        inner.phase = Phase::Outage(Outage::new(at, &self.settings));
        inner.reached.clear();
        inner.outages += 1;
        self.active.store(true, Ordering::Relaxed);
    }

    /// The release is over: nothing is parked any more.
    fn settle(&self, inner: &mut Inner<L>) {
        inner.phase = Phase::Normal;
        inner.parked = HashMap::default();
        inner.released = 0;
        self.active.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
