//! The watch: the detector, the outage under way or the release after it,
//! and the keys held, behind one lock. The manager tells it every outcome
//! and asks it about a key before answering for it; the watch decides with
//! the pure rules of its sibling modules and never touches the entries.
//!
//! Held keys are remembered by a 64-bit hash of the key (seeded), not by
//! the key: a query can hold a key it only borrows, and two keys whose
//! hashes collide would merely share their turns.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::detector::{Change, Counts, Detector, Outcome};
use super::held::{Held, Turn};
use super::ladder::Outage;
use super::release::{Release, push_bounded};
use super::settings::OutageSettings;
use crate::draws::unit_at;

/// What the manager does with a key the watch was asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict<L> {
    /// Not held: the manager's own rules decide.
    Free,
    /// Held until this time; a failure reported now is `counted` when it
    /// was the key's turn (the gate advances it, without touching the
    /// entry), and out of turn otherwise (the gate refuses it).
    Held { until: Duration, counted: bool },
    /// Let go now, after the outage: the manager's own rules decide, with
    /// the key's own level as it stood when the outage first held it.
    Released { level: L },
}

/// Why the manager asks about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// To answer a query (`remaining`, the checks).
    Query,
    /// Before writing a failure (`next`, the gate).
    Failure,
}

/// What a change of state was, for events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// An outage began, with the window's counts.
    Began(Counts),
    /// The outage ended after `lasted`, with `held` keys to let go.
    Ended { lasted: Duration, held: usize },
    /// The release is over: `released` keys were let go.
    Released { released: u64 },
}

/// Counters of the watch, for [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) in_outage: bool,
    pub(crate) held: usize,
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
    held: HashMap<u64, Held<L>>,
    /// Keys whose failure was told ahead of its write: their next written
    /// failure is the same one, not counted again.
    noted: HashSet<u64>,
    /// When the outage's latest outcomes were told (the last second's, at
    /// most the release rate of them): attempts that reached the dependency,
    /// counted against the release's first second.
    tried: VecDeque<Duration>,
    outages: u64,
    released: u64,
}

pub(crate) struct Watch<L> {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
    /// False while nothing is held: the manager's queries skip the lock.
    active: AtomicBool,
    inner: Mutex<Inner<L>>,
}

impl<L: Copy> Watch<L> {
    /// A watch for validated `settings`; `seed` draws the keys' slots.
    pub(crate) fn new(settings: OutageSettings, seed: u64) -> Self {
        Watch {
            settings,
            hasher: foldhash::quality::FixedState::with_seed(seed),
            active: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                detector: Detector::new(&settings),
                phase: Phase::Normal,
                held: HashMap::new(),
                noted: HashSet::new(),
                tried: VecDeque::new(),
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

    /// A failure of `key` the manager wrote at `at`; `fresh` when it
    /// started the key's ladder.
    pub(crate) fn failed<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        fresh: bool,
        at: Duration,
        mut events: impl FnMut(Event),
    ) {
        let hash = self.hasher.hash_one(key);
        let began = {
            let mut inner = self.inner.lock();
            if inner.noted.remove(&hash) {
                return;
            }
            self.record(&mut inner, hash, fresh, at)
        };
        // Events are told with the lock released.
        began.into_iter().for_each(&mut events);
    }

    /// A failure of `key` at `at` told before the manager writes it:
    /// recorded as [`failed`](Self::failed) would, and the key's next
    /// written failure, being the same one, is not recorded again.
    pub(crate) fn noted<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        fresh: bool,
        at: Duration,
        mut events: impl FnMut(Event),
    ) {
        let hash = self.hasher.hash_one(key);
        let began = {
            let mut inner = self.inner.lock();
            inner.noted.insert(hash);
            self.tried(&mut inner, at);
            self.record(&mut inner, hash, fresh, at)
        };
        began.into_iter().for_each(&mut events);
    }

    /// Records a failure of the key with `hash`; the event if it began an
    /// outage.
    fn record(&self, inner: &mut Inner<L>, hash: u64, fresh: bool, at: Duration) -> Option<Event> {
        let outcome = match fresh {
            true => Outcome::Fresh(hash),
            false => Outcome::Failure,
        };
        let began = inner.detector.record(outcome, at) == Some(Change::Began);
        began.then(|| {
            self.begin(inner, at);
            Event::Began(inner.detector.declared())
        })
    }

    /// A success of `key` at `at`: it is no longer held, and it may end
    /// the outage.
    pub(crate) fn succeeded<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        mut events: impl FnMut(Event),
    ) {
        let ended = {
            let mut inner = self.inner.lock();
            let inner = &mut *inner;
            let hash = self.hasher.hash_one(key);
            inner.noted.remove(&hash);
            if self.active() {
                inner.held.remove(&hash);
            }
            self.tried(inner, at);
            match (inner.detector.record(Outcome::Success, at), &inner.phase) {
                (Some(Change::Ended), Phase::Outage(outage)) => {
                    let (lasted, held) = (at.saturating_sub(outage.began()), inner.held.len());
                    let rate = self.settings.release_rate;
                    let tried = std::mem::take(&mut inner.tried);
                    let release = Release::new(at, rate, held, outage.max_step(), tried);
                    inner.phase = Phase::Release(release);
                    Some(Event::Ended { lasted, held })
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
            held: inner.held.len(),
            outages: inner.outages,
        }
    }

    /// What `key` may do at `at`, `asked` before answering a query or
    /// before writing a failure. During an outage the key is held (`level`
    /// gives its own level the first time); during the release it takes
    /// its time to go. For a failure, `Free` means the manager writes it
    /// and then calls [`failed`](Self::failed).
    pub(crate) fn verdict<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        asked: Asked,
        level: impl FnOnce() -> L,
        mut events: impl FnMut(Event),
    ) -> Verdict<L> {
        if !self.active() {
            return Verdict::Free;
        }
        let (verdict, event) = self.decide(key, at, asked == Asked::Failure, level);
        event.into_iter().for_each(&mut events);
        verdict
    }

    /// [`verdict`](Self::verdict), and the event it causes.
    fn decide<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        failure: bool,
        level: impl FnOnce() -> L,
    ) -> (Verdict<L>, Option<Event>) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        let hash = self.hasher.hash_one(key);
        if failure && matches!(inner.phase, Phase::Outage(_)) && !inner.noted.remove(&hash) {
            // Any failure seen during an outage breaks a run of successes.
            inner.detector.record(Outcome::Failure, at);
            self.tried(inner, at);
        }
        let verdict = match &mut inner.phase {
            Phase::Normal => Verdict::Free,
            Phase::Outage(outage) => {
                let held = inner.held.entry(hash).or_insert_with(|| Held::new(level()));
                let draw = |step: u64| unit_at(hash, step);
                let turn = match failure {
                    true => outage.failed(held, at, draw),
                    false => match outage.turn(held, at, draw) {
                        Turn::Go => return (Verdict::Free, None),
                        Turn::Wait(until) => Err(until),
                    },
                };
                let (Ok(until) | Err(until)) = turn;
                Verdict::Held {
                    until,
                    counted: turn.is_ok(),
                }
            }
            Phase::Release(release) => {
                if release.over(at) {
                    let released = inner.released;
                    self.settle(inner);
                    return (Verdict::Free, Some(Event::Released { released }));
                }
                let Some(held) = inner.held.get_mut(&hash) else {
                    return (Verdict::Free, None);
                };
                inner.released += u64::from(held.release_at.is_none());
                match release.turn(held, at) {
                    Turn::Go => Verdict::Released { level: held.level },
                    Turn::Wait(until) => Verdict::Held {
                        until,
                        counted: false,
                    },
                }
            }
        };
        (verdict, None)
    }

    /// An outcome told at `at`: during an outage, an attempt that reached
    /// the dependency, kept while it is within a second of the latest.
    fn tried(&self, inner: &mut Inner<L>, at: Duration) {
        if !matches!(inner.phase, Phase::Outage(_)) {
            return;
        }
        let most = (self.settings.release_rate.floor() as usize).max(1);
        push_bounded(&mut inner.tried, at, most);
        while inner
            .tried
            .front()
            .is_some_and(|t| t.saturating_add(Duration::from_secs(1)) <= at)
        {
            inner.tried.pop_front();
        }
    }

    /// An outage begins at `at`. Keys still waiting to be let go from an
    /// earlier one keep the level they had then; the others are forgotten.
    fn begin(&self, inner: &mut Inner<L>, at: Duration) {
        inner
            .held
            .retain(|_, h| h.release_at.is_none_or(|go| go > at));
        for h in inner.held.values_mut() {
            *h = Held::new(h.level);
        }
        inner.phase = Phase::Outage(Outage::new(at, &self.settings));
        inner.tried.clear();
        inner.outages += 1;
        self.active.store(true, Ordering::Relaxed);
    }

    /// The release is over: nothing is held any more.
    fn settle(&self, inner: &mut Inner<L>) {
        inner.phase = Phase::Normal;
        inner.held = HashMap::new();
        inner.released = 0;
        self.active.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
