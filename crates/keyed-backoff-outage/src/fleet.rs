//! The rules of an outage a fleet shares, decided on a state loaded from
//! its [`OutageStore`](crate::OutageStore): the same decisions as the
//! in-process watch ([`State`]'s), made on a [`SharedOutage`] loaded for
//! one batch of calls and the parked keys they are about, and written back
//! as values.
//!
//! Where the in-process watch begins or settles an outage on its whole map
//! of parked keys, the shared state counts a generation instead: a parked
//! key written in an older generation counts as absent, so no call has to
//! visit every key.
//!
//! What each replica keeps to itself: the detector's outcomes outside an
//! outage ([`ReplicaDetector`]); a declaration is then published with
//! [`Call::Begin`], and adopted by a replica that finds an outage already
//! under way.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::detector::{Change, Counts, Detector, Outcome};
use crate::ladder::Outage;
use crate::parked::Parked;
use crate::release::Release;
use crate::settings::OutageSettings;
use crate::state::{Asked, Event, Home, Phase, Ruling, State};
use crate::store::{ParkedKey, SharedOutage, SharedPhase};
use keyed_backoff::Level;

/// The rules of one fleet's outage: its settings and the seed that hashes
/// its keys (every replica must use the same, so that they name a parked
/// key alike and draw the same slots).
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
}

/// What a call tells the shared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// A caller about to run the key, or a failure of the key.
    Rule(Asked),
    /// A success of the key.
    Success,
    /// The wait the key would be told, changing nothing.
    Peek,
    /// This replica's detector declared an outage with these counts: one
    /// begins unless one is already under way (then it is adopted).
    Begin(Counts),
}

/// A state, read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// An outage or its release is under way.
    pub(crate) active: bool,
    /// An outage is under way.
    pub(crate) in_outage: bool,
    /// Keys parked.
    pub(crate) parked: u64,
    /// Outages declared so far.
    pub(crate) outages: u64,
}

/// A replica's own detector: the outcomes outside an outage.
#[derive(Debug, Clone)]
pub(crate) struct ReplicaDetector {
    detector: Detector,
    settings: OutageSettings,
}

impl ReplicaDetector {
    /// A fresh failure of the key with `hash` at `at` (on the replica's own
    /// line), after `failures` failures (this one not counted) and
    /// `successes` successes: the counts that declare an outage, if it does.
    /// A declaration starts the count afresh, as the in-process detector's
    /// does; the fleet's state holds the outage.
    pub(crate) fn fresh(
        &mut self,
        hash: u64,
        at: Duration,
        failures: u64,
        successes: u64,
    ) -> Option<Counts> {
        self.detector.totals(failures, successes);
        let began = self.detector.record(Outcome::Fresh(hash), at) == Some(Change::Began);
        began.then(|| {
            let declared = self.detector.declared();
            self.detector = Detector::new(&self.settings);
            declared
        })
    }
}

/// The parked keys a batch loaded, by hash, with the count of every parked
/// key and the generation from the state.
#[derive(Debug, Clone, Default)]
struct Many {
    entries: HashMap<u64, Parked<Option<Level>>>,
    count: u64,
    generation: u64,
}

impl Home<Option<Level>> for Many {
    fn park(&mut self, hash: u64, level: Option<Level>) -> &mut Parked<Option<Level>> {
        let count = &mut self.count;
        self.entries.entry(hash).or_insert_with(|| {
            *count = count.saturating_add(1);
            Parked::new(level)
        })
    }

    fn find(&mut self, hash: u64) -> Option<&mut Parked<Option<Level>>> {
        self.entries.get_mut(&hash)
    }

    fn get(&self, hash: u64) -> Option<&Parked<Option<Level>>> {
        self.entries.get(&hash)
    }

    fn unpark(&mut self, hash: u64) {
        if self.entries.remove(&hash).is_some() {
            self.count = self.count.saturating_sub(1);
        }
    }

    fn count(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }

    fn begin(&mut self, _: Duration) {
        self.clear();
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.count = 0;
        self.generation = self.generation.wrapping_add(1);
    }
}

/// Decisions for the keys one batch loaded, made in order on the shared
/// state as the decisions before left it, and written back once
/// ([`written`](Self::written)).
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    shared: State,
    home: Many,
    /// The state as loaded.
    loaded: Option<SharedOutage>,
    /// The keys' entries as loaded (absent when of another generation).
    before: HashMap<u64, Option<Parked<Option<Level>>>>,
    /// The generation as loaded.
    generation: u64,
    /// Whether a decision other than a peek was made.
    asked: bool,
}

/// What a batch writes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    /// The new state, when it changed.
    pub(crate) state: Option<SharedOutage>,
    /// The parked keys that changed: written, or removed (`None`).
    pub(crate) parked: Vec<(u64, Option<ParkedKey>)>,
    /// Whether the generation changed: every parked key stored before is
    /// stale now.
    pub(crate) cleared: bool,
}

impl Written {
    /// Applies the parked keys' changes to `parked` (a copy kept in
    /// memory).
    pub(crate) fn apply(&self, parked: &mut HashMap<u64, ParkedKey>) {
        crate::store::apply(self.cleared, &self.parked, parked);
    }
}

impl Batch {
    /// What the state is now.
    pub(crate) fn view(&self) -> View {
        view(&self.shared, &self.home)
    }

    /// The state now, as a value.
    pub(crate) fn state(&self) -> SharedOutage {
        encode(&self.shared, self.home.generation, self.home.count)
    }

    /// What the decisions so far changed, to write back.
    pub(crate) fn written(&self) -> Written {
        let cleared = self.home.generation != self.generation;
        let state = self.state();
        let changed = self.asked && self.loaded.as_ref() != Some(&state);
        let mut parked = Vec::new();
        if self.asked {
            let keys = self.before.keys().chain(self.home.entries.keys());
            let mut keys: Vec<u64> = keys.copied().collect();
            keys.sort_unstable();
            keys.dedup();
            for hash in keys {
                let now = self.home.entries.get(&hash);
                let before = self.before.get(&hash).and_then(Option::as_ref);
                if now == before && !cleared {
                    continue;
                }
                let entry = now.map(|p| encode_entry(p, self.home.generation));
                parked.push((hash, entry));
            }
        }
        Written {
            state: changed.then_some(state),
            parked,
            cleared,
        }
    }
}

impl Rules {
    /// The settings they were made with.
    pub(crate) fn settings(&self) -> OutageSettings {
        self.settings
    }

    /// The rules for validated `settings`, hashing keys with `seed`.
    pub(crate) fn new(settings: OutageSettings, seed: u64) -> Self {
        Rules {
            hasher: foldhash::quality::FixedState::with_seed(seed),
            settings,
        }
    }

    /// A key's hash: the name of its parked entry, and its draws.
    pub(crate) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// A replica's own detector, that has seen nothing.
    pub(crate) fn detector(&self) -> ReplicaDetector {
        ReplicaDetector {
            detector: Detector::new(&self.settings),
            settings: self.settings,
        }
    }

    /// A batch on the shared `state` (none yet when `None`) and the parked
    /// `entries` of the keys it will decide for, by hash, as loaded. An
    /// error says why the state cannot be ours.
    pub(crate) fn batch<'a>(
        &self,
        state: Option<&SharedOutage>,
        entries: impl IntoIterator<Item = (u64, Option<&'a ParkedKey>)>,
    ) -> Result<Batch, String> {
        let (shared, mut home) = self.load(state)?;
        let mut before = HashMap::new();
        for (hash, entry) in entries {
            let entry = entry
                .filter(|e| e.generation == home.generation)
                .map(decode_entry);
            if let Some(parked) = &entry {
                home.entries.insert(hash, parked.clone());
            }
            before.insert(hash, entry);
        }
        Ok(Batch {
            generation: home.generation,
            shared,
            home,
            loaded: state.cloned(),
            before,
            asked: false,
        })
    }

    /// Decides `call` for the key with `hash` (one of the batch's keys) at
    /// `at` on the fleet's time line, on the state as the batch's decisions
    /// so far left it; `level` is the key's own level now. A peek parks
    /// nobody: its `Parked` is the wait it would be told.
    pub(crate) fn decide(
        &self,
        batch: &mut Batch,
        hash: u64,
        at: Duration,
        call: Call,
        level: Option<Level>,
    ) -> (Ruling<Option<Level>>, Option<Event>) {
        let settings = &self.settings;
        let (shared, home) = (&mut batch.shared, &mut batch.home);
        batch.asked |= call != Call::Peek;
        match call {
            Call::Rule(asked) => shared.decide(settings, home, hash, at, asked, level),
            Call::Success => {
                let event = shared
                    .active()
                    .then(|| shared.succeeded(settings, home, hash, at));
                (Ruling::Free, event.flatten())
            }
            Call::Peek => match shared.peek(&*home, hash, at, level) {
                Some(wait) => {
                    let until = at.saturating_add(wait);
                    let counted = false;
                    (Ruling::Parked { until, counted }, None)
                }
                None => (Ruling::Free, None),
            },
            Call::Begin(counts) => {
                if shared.in_outage() {
                    return (Ruling::Free, None);
                }
                shared.detector = Detector::resumed(settings, Some(0));
                shared.begin(settings, home, at);
                (Ruling::Free, Some(Event::Began(counts)))
            }
        }
    }

    /// The state, read, with no parked key loaded yet.
    fn load(&self, state: Option<&SharedOutage>) -> Result<(State, Many), String> {
        let settings = &self.settings;
        let Some(state) = state else {
            return Ok((State::new(settings), Many::default()));
        };
        if state.format != SharedOutage::FORMAT {
            return Err(format!(
                "an outage state of format {}, not {}",
                SharedOutage::FORMAT,
                state.format
            ));
        }
        let phase = match &state.phase {
            SharedPhase::Normal => Phase::Normal,
            SharedPhase::Outage {
                began,
                probe_step,
                probes_claimed,
            } => Phase::Outage(Outage::restore(
                settings,
                *began,
                *probe_step,
                *probes_claimed,
            )),
            SharedPhase::Release {
                next,
                gap,
                per_second,
                until,
                latest,
            } => Phase::Release(
                Release::restore(*next, *gap, *per_second, *until, latest).ok_or_else(|| {
                    format!(
                        "a release letting {per_second} keys go a second, {gap:?} apart, \
                         with {} latest",
                        latest.len()
                    )
                })?,
            ),
        };
        let shared = State {
            detector: Detector::resumed(settings, state.successes_in_a_row),
            phase,
            reached: state.reached.iter().copied().collect::<VecDeque<_>>(),
            outages: state.outages,
            released: state.released,
        };
        let home = Many {
            entries: HashMap::new(),
            count: state.parked,
            generation: state.generation,
        };
        Ok((shared, home))
    }
}

/// The state as a value.
fn encode(shared: &State, generation: u64, count: u64) -> SharedOutage {
    let phase = match &shared.phase {
        Phase::Normal => SharedPhase::Normal,
        Phase::Outage(outage) => outage.shared(),
        Phase::Release(release) => release.shared(),
    };
    SharedOutage {
        format: SharedOutage::FORMAT,
        generation,
        outages: shared.outages,
        released: shared.released,
        parked: count,
        successes_in_a_row: shared.detector.streak(),
        phase,
        reached: shared.reached.iter().copied().collect(),
    }
}

fn encode_entry(parked: &Parked<Option<Level>>, generation: u64) -> ParkedKey {
    ParkedKey {
        generation,
        level: parked.level,
        counted_in: parked.counted_in,
        probe_in: parked.probe_in,
        release_at: parked.release_at,
    }
}

fn decode_entry(entry: &ParkedKey) -> Parked<Option<Level>> {
    Parked {
        level: entry.level,
        counted_in: entry.counted_in,
        probe_in: entry.probe_in,
        release_at: entry.release_at,
    }
}

fn view(shared: &State, home: &Many) -> View {
    View {
        active: shared.active(),
        in_outage: shared.in_outage(),
        parked: home.count,
        outages: shared.outages,
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
