//! The outage's state and the decisions made on it, wherever it lives.
//!
//! [`State`] holds what one outage shares between all keys (the detector
//! once an outage is declared, the phase, the attempts that reached the
//! dependency lately, the counters); a [`Home`] holds the parked keys. The
//! in-process watch keeps both behind its lock, the parked keys in a map;
//! a fleet keeps them in a shared store and loads, for one call, the state
//! and the one key the call is about (`fleet`). Both decide with the
//! methods here, which apply the pure rules of the sibling modules.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::detector::{Change, Counts, Detector, Outcome};
use crate::ladder::Outage;
use crate::nanos::unit_at;
use crate::parked::{Parked, Turn};
use crate::release::{Release, push_bounded};
use crate::settings::OutageSettings;

/// What the wrapper does with a key the watch was asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ruling<L> {
    /// Not parked: the key's own backoff decides.
    Free,
    /// Parked until this time; a failure reported now is `counted` when it
    /// was the key's turn, and out of turn otherwise.
    Parked { until: Duration, counted: bool },
    /// Let go now, after the outage: the key's own backoff decides, from
    /// its level as it stood when the outage first parked it.
    Released { level: L },
}

impl<L> Ruling<L> {
    /// The ruling made at `at`, with a parked key's `until` made its wait
    /// from then (what the wrapper tells its caller).
    pub(crate) fn waits_from(self, at: Duration) -> Self {
        match self {
            Ruling::Parked { until, counted } => Ruling::Parked {
                until: until.saturating_sub(at),
                counted,
            },
            other => other,
        }
    }
}

/// Why the wrapper asks about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
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

/// Normal, an outage under way, or the release after it.
#[derive(Debug, Clone)]
pub(crate) enum Phase {
    Normal,
    Outage(Outage),
    Release(Release),
}

/// Where the parked keys live, by the hashes of their keys.
pub(crate) trait Home<L> {
    /// The key parked, at `level` if it was not yet.
    fn park(&mut self, hash: u64, level: L) -> &mut Parked<L>;
    /// The key, if parked.
    fn find(&mut self, hash: u64) -> Option<&mut Parked<L>>;
    /// The key, if parked, changing nothing.
    fn get(&self, hash: u64) -> Option<&Parked<L>>;
    /// The key is no longer parked.
    fn unpark(&mut self, hash: u64);
    /// How many keys are parked.
    fn count(&self) -> usize;
    /// An outage begins at `at`: keys still waiting to be let go from an
    /// earlier one may keep their level, the others are forgotten.
    fn begin(&mut self, at: Duration);
    /// Nothing is parked any more.
    fn clear(&mut self);
}

/// The in-process home: every parked key in one map, keyed by the keys'
/// hashes already (a fixed fast hasher is enough).
pub(crate) type Map<L> = HashMap<u64, Parked<L>, foldhash::fast::FixedState>;

impl<L: Copy> Home<L> for Map<L> {
    fn park(&mut self, hash: u64, level: L) -> &mut Parked<L> {
        self.entry(hash).or_insert_with(|| Parked::new(level))
    }

    fn find(&mut self, hash: u64) -> Option<&mut Parked<L>> {
        self.get_mut(&hash)
    }

    fn get(&self, hash: u64) -> Option<&Parked<L>> {
        HashMap::get(self, &hash)
    }

    fn unpark(&mut self, hash: u64) {
        self.remove(&hash);
    }

    fn count(&self) -> usize {
        self.len()
    }

    fn begin(&mut self, at: Duration) {
        self.retain(|_, p| p.release_at.is_none_or(|go| go > at));
        for p in self.values_mut() {
            *p = Parked::new(p.level);
        }
    }

    fn clear(&mut self) {
        *self = HashMap::default();
    }
}

/// What the keys share: the detector, the phase, the outage's latest
/// attempts, and the counters.
#[derive(Debug, Clone)]
pub(crate) struct State {
    pub(crate) detector: Detector,
    pub(crate) phase: Phase,
    /// When the outage's latest outcomes were told (the last second's, at
    /// most the release rate of them): attempts that reached the
    /// dependency, counted against the release's first second.
    pub(crate) reached: VecDeque<Duration>,
    pub(crate) outages: u64,
    pub(crate) released: u64,
}

impl State {
    /// Nothing seen yet, for validated `settings`.
    pub(crate) fn new(settings: &OutageSettings) -> Self {
        State {
            detector: Detector::new(settings),
            phase: Phase::Normal,
            reached: VecDeque::new(),
            outages: 0,
            released: 0,
        }
    }

    /// Whether an outage or a release is under way.
    pub(crate) fn active(&self) -> bool {
        !matches!(self.phase, Phase::Normal)
    }

    /// Whether an outage is under way.
    pub(crate) fn in_outage(&self) -> bool {
        matches!(self.phase, Phase::Outage(_))
    }

    /// A fresh failure of the key with `hash` at `at` (the detector holds
    /// the totals before it): the detector may declare an outage.
    pub(crate) fn fresh<L: Copy>(
        &mut self,
        settings: &OutageSettings,
        home: &mut impl Home<L>,
        hash: u64,
        at: Duration,
    ) -> Option<Event> {
        let began = self.detector.record(Outcome::Fresh(hash), at) == Some(Change::Began);
        began.then(|| {
            self.begin(settings, home, at);
            Event::Began(self.detector.declared())
        })
    }

    /// A success of the key with `hash` at `at`, while an outage or its
    /// release is under way: it is no longer parked, and it may end the
    /// outage.
    pub(crate) fn succeeded<L: Copy>(
        &mut self,
        settings: &OutageSettings,
        home: &mut impl Home<L>,
        hash: u64,
        at: Duration,
    ) -> Option<Event> {
        home.unpark(hash);
        self.reached(settings, at);
        match (self.detector.record(Outcome::Success, at), &self.phase) {
            (Some(Change::Ended), Phase::Outage(outage)) => {
                let (lasted, parked) = (at.saturating_sub(outage.began()), home.count());
                let rate = settings.release_rate;
                let reached = std::mem::take(&mut self.reached);
                let release = Release::new(at, rate, parked, outage.max_step(), reached);
                self.phase = Phase::Release(release);
                Some(Event::Ended { lasted, parked })
            }
            _ => None,
        }
    }

    /// The wait the key with `hash` would be told at `at` if it asked to
    /// run, changing nothing. `None` when it could go.
    pub(crate) fn peek<L: Copy>(
        &self,
        home: &impl Home<L>,
        hash: u64,
        at: Duration,
        level: L,
    ) -> Option<Duration> {
        let found = home.get(hash);
        let mut parked = found.cloned().unwrap_or_else(|| Parked::new(level));
        let turn = match &self.phase {
            Phase::Normal => Turn::Go,
            Phase::Outage(outage) => outage.clone().turn(&mut parked, at, |s| unit_at(hash, s)),
            Phase::Release(release) if release.over(at) => Turn::Go,
            Phase::Release(_) if found.is_none() => Turn::Go,
            Phase::Release(release) => release.clone().turn(&mut parked, at),
        };
        match turn {
            Turn::Go => None,
            Turn::Wait(until) => Some(until.saturating_sub(at)),
        }
    }

    /// What the key with `hash` may do at `at`, `asked` by a caller about
    /// to run it or for a failure, and the event it causes. During an
    /// outage the key is parked (`level` gives its own level the first
    /// time); during the release it takes its time to go.
    pub(crate) fn decide<L: Copy>(
        &mut self,
        settings: &OutageSettings,
        home: &mut impl Home<L>,
        hash: u64,
        at: Duration,
        asked: Asked,
        level: L,
    ) -> (Ruling<L>, Option<Event>) {
        let failure = asked == Asked::Failure;
        if failure && matches!(self.phase, Phase::Outage(_)) {
            // Any failure seen during an outage breaks a run of successes.
            self.detector.record(Outcome::Failure, at);
            self.reached(settings, at);
        }
        let ruling = match &mut self.phase {
            Phase::Normal => Ruling::Free,
            Phase::Outage(outage) => {
                let parked = home.park(hash, level);
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
                    let released = self.released;
                    self.settle(home);
                    return (Ruling::Free, Some(Event::Released { released }));
                }
                let Some(parked) = home.find(hash) else {
                    return (Ruling::Free, None);
                };
                self.released += u64::from(parked.release_at.is_none());
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
    fn reached(&mut self, settings: &OutageSettings, at: Duration) {
        if !matches!(self.phase, Phase::Outage(_)) {
            return;
        }
        let most = (settings.release_rate.floor() as usize).max(1);
        push_bounded(&mut self.reached, at, most);
        while self
            .reached
            .front()
            .is_some_and(|t| t.saturating_add(Duration::from_secs(1)) <= at)
        {
            self.reached.pop_front();
        }
    }

    /// An outage begins at `at`. Keys still waiting to be let go from an
    /// earlier one keep the level they had then (where the home keeps
    /// them); the others are forgotten.
    pub(crate) fn begin<L>(
        &mut self,
        settings: &OutageSettings,
        home: &mut impl Home<L>,
        at: Duration,
    ) {
        home.begin(at);
        self.phase = Phase::Outage(Outage::new(at, settings));
        self.reached.clear();
        self.outages += 1;
    }

    /// The release is over: nothing is parked any more.
    fn settle<L>(&mut self, home: &mut impl Home<L>) {
        self.phase = Phase::Normal;
        home.clear();
        self.released = 0;
    }
}
