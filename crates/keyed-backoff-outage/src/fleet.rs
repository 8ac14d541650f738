//! The outage's state kept outside the process, for a fleet that shares
//! one outage (the Redis crate's fleet-wide outage awareness): the same
//! decisions as the in-process watch ([`State`]'s), made on a state loaded
//! for one call and written back as text.
//!
//! A call loads the shared state and the one parked key it is about,
//! [`FleetRules::step`] decides, and the caller writes back what changed
//! (with a compare-and-set of its own). Where the in-process watch begins
//! or settles an outage on its whole map of parked keys, the fleet's
//! state counts a generation instead: a parked key written in an older
//! generation counts as absent, so no call has to visit every key.
//!
//! What each replica keeps to itself: the detector's outcomes outside an
//! outage ([`FleetDetector`]); a declaration is then published with
//! [`FleetAsk::Begin`], and adopted by a replica that finds an outage
//! already under way.
//!
//! Not API: the Redis crate's hook, with no semver promise.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::detector::{Change, Counts, Detector, Outcome};
use crate::ladder::Outage;
use crate::parked::Parked;
use crate::release::Release;
use crate::settings::OutageSettings;
use crate::state::{Asked, Event, Home, Phase, Ruling, State};
use crate::text::{FORMAT, Words, decode_entry, encode, encode_entry};
use keyed_backoff::Advanced;
use keyed_backoff::ConfigError;

/// The answer to a parked key's failure, for the fleet's wrapper as for
/// the in-process one.
pub use crate::parked::parked_failure;

/// The rules of one fleet's outage: its settings and the seed that hashes
/// its keys (every replica must use the same, so that they name a parked
/// key alike and draw the same slots).
#[derive(Debug, Clone)]
pub struct FleetRules {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
}

/// What a call tells the shared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetAsk {
    /// A caller about to run the key (it claims the key's turn).
    Claim,
    /// A failure of the key.
    Failure,
    /// A success of the key.
    Success,
    /// The wait the key would be told, changing nothing.
    Peek,
    /// This replica's detector declared an outage: one begins unless one
    /// is already under way (then it is adopted).
    Begin(Declared),
}

/// The counts with which a replica's detector declared an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declared(Counts);

/// What the key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetRuling {
    /// Not parked: the key's own backoff decides.
    Free,
    /// Parked for a while more.
    Parked {
        /// How long more.
        wait: Duration,
        /// For a failure: it was the key's turn, and it is counted.
        counted: bool,
    },
    /// Let go now.
    Released {
        /// Its own level before the outage.
        level: Option<Advanced>,
    },
}

/// What becomes of the key's parked entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryChange {
    /// Unchanged.
    Keep,
    /// Written anew.
    Put(String),
    /// Removed.
    Remove,
}

/// One decision and what it changed.
#[derive(Debug, Clone)]
pub struct FleetStep {
    /// What the key may do.
    pub ruling: FleetRuling,
    /// The new state, when it changed.
    pub state: Option<String>,
    /// The key's parked entry.
    pub entry: EntryChange,
    /// Whether the generation changed: every parked entry is stale now.
    pub cleared: bool,
    /// What the state is now.
    pub view: FleetView,
    event: Option<Event>,
}

impl FleetStep {
    /// The decision alone, without what it changed.
    pub fn decision(&self) -> FleetDecision {
        FleetDecision {
            ruling: self.ruling,
            view: self.view,
            event: self.event,
        }
    }

    /// Tells operators of the change of state it made, if any (the core's
    /// `tracing` events and `metrics` counters for outages).
    pub fn report(&self) {
        if let Some(event) = self.event {
            crate::observe::outage(event);
        }
    }
}

/// A state, read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetView {
    /// An outage or its release is under way.
    pub active: bool,
    /// An outage is under way.
    pub in_outage: bool,
    /// Keys parked.
    pub parked: u64,
    /// Outages declared so far.
    pub outages: u64,
    /// The generation of the parked entries.
    pub generation: u64,
}

/// A replica's own detector: the outcomes outside an outage.
#[derive(Debug, Clone)]
pub struct FleetDetector {
    detector: Detector,
    settings: OutageSettings,
}

impl FleetDetector {
    /// A fresh failure of the key with `hash` at `at` (on the replica's own
    /// line), after `failures` failures (this one not counted) and
    /// `successes` successes: the counts that declare an outage, if it does.
    /// A declaration starts the count afresh, as the in-process detector's
    /// does; the fleet's state holds the outage.
    pub fn fresh(
        &mut self,
        hash: u64,
        at: Duration,
        failures: u64,
        successes: u64,
    ) -> Option<Declared> {
        self.detector.totals(failures, successes);
        let began = self.detector.record(Outcome::Fresh(hash), at) == Some(Change::Began);
        began.then(|| {
            let declared = self.detector.declared();
            self.detector = Detector::new(&self.settings);
            Declared(declared)
        })
    }
}

/// The parked keys a fleet's call loads: those it asks about, by hash,
/// with the count of every parked key and the generation from the state.
#[derive(Debug, Clone, Default)]
struct Many {
    entries: HashMap<u64, Parked<Option<Advanced>>>,
    count: u64,
    generation: u64,
}

impl Home<Option<Advanced>> for Many {
    fn park(&mut self, hash: u64, level: Option<Advanced>) -> &mut Parked<Option<Advanced>> {
        let count = &mut self.count;
        self.entries.entry(hash).or_insert_with(|| {
            *count = count.saturating_add(1);
            Parked::new(level)
        })
    }

    fn find(&mut self, hash: u64) -> Option<&mut Parked<Option<Advanced>>> {
        self.entries.get_mut(&hash)
    }

    fn get(&self, hash: u64) -> Option<&Parked<Option<Advanced>>> {
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

/// Decisions for the keys one call loaded, made in order on the shared
/// state as the decisions before left it, and written back once
/// ([`written`](Self::written)): a replica decides for every key its
/// callers asked about meanwhile on one load of the state.
#[derive(Debug, Clone)]
pub struct FleetBatch {
    shared: State,
    home: Many,
    /// The state's text as loaded.
    loaded: Option<String>,
    /// The keys' entries as loaded (absent when of another generation).
    before: HashMap<u64, Option<Parked<Option<Advanced>>>>,
    /// Keys whose entry could not be read, and why.
    damaged: HashMap<u64, String>,
    /// The generation as loaded.
    generation: u64,
    /// Whether a decision other than a peek was made.
    asked: bool,
}

/// What a batch writes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetWrite {
    /// The new state, when it changed.
    pub state: Option<String>,
    /// The parked entries that changed.
    pub entries: Vec<(u64, EntryChange)>,
    /// Whether the generation changed: every parked entry stored before
    /// is stale now.
    pub cleared: bool,
}

/// One decision of a batch.
#[derive(Debug, Clone, Copy)]
pub struct FleetDecision {
    /// What the key may do.
    pub ruling: FleetRuling,
    /// What the state is after it.
    pub view: FleetView,
    event: Option<Event>,
}

impl FleetDecision {
    /// Tells operators of the change of state it made, if any (the
    /// `tracing` events and `metrics` counters for outages).
    pub fn report(&self) {
        if let Some(event) = self.event {
            crate::observe::outage(event);
        }
    }
}

impl FleetBatch {
    /// What the state is now.
    pub fn view(&self) -> FleetView {
        view(&self.shared, &self.home)
    }

    /// What the decisions so far changed, to write back.
    pub fn written(&self) -> FleetWrite {
        let cleared = self.home.generation != self.generation;
        let text = encode(&self.shared, self.home.generation, self.home.count);
        let changed = self.asked && self.loaded.as_deref() != Some(text.as_str());
        let mut entries = Vec::new();
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
                let change = match now {
                    None => EntryChange::Remove,
                    Some(parked) => EntryChange::Put(encode_entry(parked, self.home.generation)),
                };
                entries.push((hash, change));
            }
        }
        FleetWrite {
            state: changed.then_some(text),
            entries,
            cleared,
        }
    }
}

impl FleetRules {
    /// The rules for `settings` (the first out of range is the error),
    /// hashing keys with their seed, or `seed` when they have none.
    pub fn new(settings: OutageSettings, seed: u64) -> Result<Self, ConfigError> {
        let settings = settings.validate()?;
        Ok(FleetRules {
            hasher: foldhash::quality::FixedState::with_seed(settings.seed.unwrap_or(seed)),
            settings,
        })
    }

    /// The settings, validated.
    pub fn settings(&self) -> &OutageSettings {
        &self.settings
    }

    /// A key's hash: the name of its parked entry, and its draws.
    pub fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    /// A replica's own detector, that has seen nothing.
    pub fn detector(&self) -> FleetDetector {
        FleetDetector {
            detector: Detector::new(&self.settings),
            settings: self.settings,
        }
    }

    /// The state `state` (none yet when `None`), read.
    pub fn view(&self, state: Option<&str>) -> Result<FleetView, String> {
        let (state, one) = self.load(state)?;
        Ok(view(&state, &one))
    }

    /// Decides `ask` for the key with `hash` at `at` (on the fleet's time
    /// line), on the shared `state` and the key's parked `entry` as
    /// loaded; `level` is the key's own level now. An error names what
    /// could not be read. A batch of one: see [`batch`](Self::batch).
    pub fn step(
        &self,
        state: Option<&str>,
        entry: Option<&str>,
        hash: u64,
        at: Duration,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> Result<FleetStep, String> {
        let mut batch = self.batch(state, [(hash, entry)])?;
        let decision = self.decide(&mut batch, hash, at, ask, level)?;
        let written = batch.written();
        let entry = written
            .entries
            .into_iter()
            .find(|(h, _)| *h == hash)
            .map_or(EntryChange::Keep, |(_, change)| change);
        Ok(FleetStep {
            ruling: decision.ruling,
            state: written.state,
            entry,
            cleared: written.cleared,
            view: decision.view,
            event: decision.event,
        })
    }

    /// A batch on the shared `state` (none yet when `None`) and the
    /// parked `entries` of the keys it will decide for, by hash, as
    /// loaded. An error names what could not be read in the state; an
    /// entry that cannot be read is an error of its key's decision alone.
    pub fn batch<'a>(
        &self,
        state: Option<&str>,
        entries: impl IntoIterator<Item = (u64, Option<&'a str>)>,
    ) -> Result<FleetBatch, String> {
        let (shared, mut home) = self.load(state)?;
        let (mut before, mut damaged) = (HashMap::new(), HashMap::new());
        for (hash, text) in entries {
            let entry = match text.map(decode_entry) {
                None => None,
                Some(Some((generation, parked))) => {
                    (generation == home.generation).then_some(parked)
                }
                Some(None) => {
                    let text = text.unwrap_or_default();
                    damaged.insert(
                        hash,
                        format!("a parked key of format {FORMAT}, not {text:?}"),
                    );
                    continue;
                }
            };
            if let Some(parked) = &entry {
                home.entries.insert(hash, parked.clone());
            }
            before.insert(hash, entry);
        }
        Ok(FleetBatch {
            generation: home.generation,
            shared,
            home,
            loaded: state.map(str::to_owned),
            before,
            damaged,
            asked: false,
        })
    }

    /// Decides `ask` for the key with `hash` (one of the batch's keys) at
    /// `at` on the fleet's time line, on the state as the batch's decisions
    /// so far left it; `level` is the key's own level now. An error says
    /// why the key's parked entry could not be read.
    pub fn decide(
        &self,
        batch: &mut FleetBatch,
        hash: u64,
        at: Duration,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> Result<FleetDecision, String> {
        if let Some(damage) = batch.damaged.get(&hash) {
            return Err(damage.clone());
        }
        let settings = &self.settings;
        let (shared, home) = (&mut batch.shared, &mut batch.home);
        batch.asked |= ask != FleetAsk::Peek;
        let mut event = None;
        let ruling = match ask {
            FleetAsk::Claim | FleetAsk::Failure => {
                let asked = match ask {
                    FleetAsk::Claim => Asked::Claim,
                    _ => Asked::Failure,
                };
                let (ruling, e) = shared.decide(settings, home, hash, at, asked, level);
                event = e;
                match ruling {
                    Ruling::Free => FleetRuling::Free,
                    Ruling::Parked { until, counted } => FleetRuling::Parked {
                        wait: until.saturating_sub(at),
                        counted,
                    },
                    Ruling::Released { level } => FleetRuling::Released { level },
                }
            }
            FleetAsk::Success => {
                if shared.active() {
                    event = shared.succeeded(settings, home, hash, at);
                }
                FleetRuling::Free
            }
            FleetAsk::Peek => match shared.peek(&*home, hash, at, level) {
                Some(wait) => FleetRuling::Parked {
                    wait,
                    counted: false,
                },
                None => FleetRuling::Free,
            },
            FleetAsk::Begin(Declared(counts)) => {
                if !shared.in_outage() {
                    shared.detector = Detector::resumed(settings, Some(0));
                    shared.begin(settings, home, at);
                    event = Some(Event::Began(counts));
                }
                FleetRuling::Free
            }
        };
        Ok(FleetDecision {
            ruling,
            view: batch.view(),
            event,
        })
    }

    /// The state, read, with no parked key loaded yet.
    fn load(&self, state: Option<&str>) -> Result<(State, Many), String> {
        let settings = &self.settings;
        let Some(text) = state else {
            return Ok((State::new(settings), Many::default()));
        };
        let bad = || format!("an outage state of format {FORMAT}, not {text:?}");
        let mut words = Words(text.split(' '));
        if words.0.next() != Some(FORMAT) {
            return Err(bad());
        }
        let decoded = (|| {
            let [generation, outages, released, count] = words.numbers()?;
            let streak = words.maybe()?.map(|s| u32::try_from(s).unwrap_or(u32::MAX));
            let phase = match words.0.next()? {
                "N" => Phase::Normal,
                "O" => Phase::Outage(Outage::restore(settings, words.numbers()?)),
                "R" => Phase::Release(Release::restore(&words.list()?)?),
                _ => return None,
            };
            let reached = words
                .list()?
                .into_iter()
                .map(Duration::from_nanos)
                .collect();
            let shared = State {
                detector: Detector::resumed(settings, streak),
                phase,
                reached,
                outages,
                released,
            };
            let home = Many {
                entries: HashMap::new(),
                count,
                generation,
            };
            words.0.next().is_none().then_some((shared, home))
        })();
        decoded.ok_or_else(bad)
    }
}

fn view(shared: &State, one: &Many) -> FleetView {
    FleetView {
        active: shared.active(),
        in_outage: shared.in_outage(),
        parked: one.count,
        outages: shared.outages,
        generation: one.generation,
    }
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
mod tests;
