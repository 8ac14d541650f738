//! [`Shared`]: an outage a fleet shares through an [`OutageStore`].
//!
//! Each question loads the state and the key's parked entry, decides by
//! the rules (`fleet`), and stores what changed with a compare-and-set
//! (loaded and decided again on a conflict, within the store's timeout).
//! The questions this replica's callers ask while one is under way are
//! decided together, on one load, and stored in one compare-and-set
//! ([`batch`]): every key asking at once costs a few round trips, and the
//! replicas contend for the state, not their keys.
//!
//! While the store fails (it cannot be reached, or it holds a value that
//! is not ours, reported once) the replica goes on alone, on its copy of
//! the last state it saw, and asks again a second later: a store's
//! failure never stops a key's own backoff.

mod batch;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use keyed_backoff::clock::{Clock, StdClock};
use keyed_backoff::{ConfigError, Level};
use parking_lot::Mutex;

use crate::fleet::{Batch, Call, ReplicaDetector, Rules, View};
use crate::holder::Line;
use crate::holder::sealed::Questions;
use crate::nanos::saturating_nanos as nanos;
use crate::observe;
use crate::one::One;
use crate::outages::Outages;
use crate::settings::OutageSettings;
use crate::state::{Asked, Event, Ruling};
use crate::store::{Loaded, OutageStore, ParkedKey, SharedOutage, Stored};
use crate::watch::Tally;
use batch::{Batches, Told};

/// Outside an outage, how long a replica trusts the phase it last read
/// before a claim or a failure reads it again.
const REFRESH: Duration = Duration::from_millis(100);

/// After the store failed, how long this replica goes on alone before it
/// asks the store again.
const ALONE_FOR: Duration = Duration::from_secs(1);

/// An outage shared by the replicas of a fleet through the store `T`: the
/// [`OutageState`](crate::OutageState) of
/// [`OutageAware::shared`](crate::OutageAware::shared). Every replica on
/// one store sees one outage: the dependency sees at most
/// [`probes`](OutageSettings::probes) attempts per step of the ladder and
/// [`release_rate`](OutageSettings::release_rate) keys a second across the
/// fleet, not per replica.
///
/// - **Outside an outage** a success or a failure that continues a key's
///   ladder costs the store nothing; it is counted by this replica's
///   detector. A failure that starts a key's ladder (a *fresh* one) loads
///   the fleet's phase, and publishes an outage when this replica's
///   detector declares one (a replica that finds one under way adopts it).
///   A claim or a failure loads the phase again when it is older than
///   100 ms, so a replica learns of an outage another declared at its
///   next fresh failure, or within 100 ms of it.
/// - **During an outage and its release** every claim, failure and
///   success loads the state and the key's parked entry and stores what
///   changed. Questions asked while one is under way are decided together
///   when it is done, on one load and one store.
/// - **While the store fails** this replica goes on alone, from the last
///   state it saw: the same outage (when it began, its ladder, its seed),
///   so parked keys stay parked; it never fails open. It asks the store
///   again a second later (on its clock `C`); when the store answers it
///   rejoins the fleet's state (or, when the store lost it, writes the
///   outage it was going on with). Alone, the bounds hold per replica, not
///   per fleet. A value the store holds that is not ours is reported once
///   (an ERROR event and a metric) and left as it is.
///
/// Every replica must use the same settings and the same seed
/// ([`OutageSettings::seed`], or the store's own).
///
/// - **Domains.** Each domain a failure names has an outage of its own,
///   shared the same way through the store's
///   [`domain`](OutageStore::domain) (a store that keeps none counts a
///   domain's failures in the outage of everything alone). A replica
///   remembers the domain of the keys named on it; a key claimed on
///   another replica than the one that named it is ruled by the outage
///   of everything alone until it is named there.
pub struct Shared<T, C: Clock = StdClock> {
    outages: Outages<Fleet<T, C>>,
}

/// One outage a fleet shares (of everything, or of the domain `name`),
/// through the store `T`.
pub struct Fleet<T, C: Clock> {
    store: T,
    rules: Rules,
    name: Option<Box<str>>,
    line: Arc<Line<C>>,
    seen: Mutex<Seen>,
    /// The questions asked while one is under way.
    batches: Batches<Ask, Ruling<Option<Level>>>,
    /// Whether the store was found holding a value not ours (reported
    /// once, until one of ours is read again).
    foreign: AtomicBool,
    detector: Mutex<ReplicaDetector>,
    failures: AtomicU64,
    successes: AtomicU64,
}

/// This replica's copy: the last state it saw, and the keys it parked
/// while alone.
struct Seen {
    state: Option<SharedOutage>,
    view: View,
    /// When the state was last read (on the replica's own line).
    checked: Option<Duration>,
    /// The fleet's time minus the replica's own, in nanoseconds.
    offset: i128,
    /// Until when (on the replica's own line) the store is not asked.
    alone_until: Option<Duration>,
    /// Keys parked while alone.
    entries: HashMap<u64, ParkedKey>,
}

/// One question a caller asks.
#[derive(Clone, Copy)]
struct Ask {
    hash: u64,
    call: Call,
    level: Option<Level>,
    /// When the caller stops loading again after conflicts (own line).
    deadline: Duration,
}

/// Why a load could not be decided on.
enum Fault<E> {
    Store(E),
    NotOurs(String),
}

impl<T: OutageStore, C: Clock> Shared<T, C> {
    /// For validated `settings`, through `store`, timed on `clock`. Fails
    /// when neither the settings nor the store give a seed.
    pub(crate) fn new(store: T, settings: OutageSettings, clock: C) -> Result<Self, ConfigError> {
        let Some(seed) = settings.seed.or_else(|| store.seed()) else {
            return Err(ConfigError::new(
                "outage.seed",
                "a seed every replica shares (this store derives none)",
                "none",
            ));
        };
        let line = Arc::new(Line::new(clock));
        let everything = Fleet::new(store, settings, seed, line, None);
        Ok(Shared {
            outages: Outages::new(everything, settings.max_domains, seed),
        })
    }

    /// The store it shares the outage through.
    pub fn store(&self) -> &T {
        &self.outages.everything().store
    }

    /// Whether this replica is going on alone now: the store failed (it
    /// could not be reached, or holds a value that is not ours) less than
    /// a second ago.
    pub fn alone(&self) -> bool {
        self.outages.everything().alone()
    }
}

impl<T: OutageStore, C: Clock> Questions for Shared<T, C> {
    type One = Fleet<T, C>;

    fn outages(&self) -> &Outages<Fleet<T, C>> {
        &self.outages
    }
}

impl<T: OutageStore, C: Clock> Fleet<T, C> {
    fn new(
        store: T,
        settings: OutageSettings,
        seed: u64,
        line: Arc<Line<C>>,
        name: Option<Box<str>>,
    ) -> Self {
        let rules = Rules::new(settings, seed);
        Fleet {
            detector: Mutex::new(rules.detector()),
            rules,
            store,
            name,
            line,
            seen: Mutex::new(Seen {
                state: None,
                view: View::default(),
                checked: None,
                offset: 0,
                alone_until: None,
                entries: HashMap::new(),
            }),
            batches: Batches::new(),
            foreign: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            successes: AtomicU64::new(0),
        }
    }

    /// Whether this replica is going on alone now.
    fn alone(&self) -> bool {
        let now = self.local_now();
        self.seen
            .lock()
            .alone_until
            .is_some_and(|until| now < until)
    }

    /// Now on this replica's own line.
    fn local_now(&self) -> Duration {
        self.line.now()
    }

    fn tell(&self, event: Event) {
        observe::outage(self.name.as_deref(), event);
    }

    /// Loads the state again (no key asked about), unless alone; the view
    /// it holds now.
    async fn check(&self) -> View {
        if !self.alone() {
            match self.load_read(&[]).await {
                Ok((loaded, batch, _)) => {
                    self.saw(Some(batch.state()), batch.view(), &loaded);
                    return batch.view();
                }
                Err(fault) => self.go_alone(&fault),
            }
        }
        let now = self.local_now();
        let mut seen = self.seen.lock();
        seen.checked = Some(now);
        seen.view
    }

    /// Decides `call` for the key with `hash` on the fleet's state (alone,
    /// on this replica's copy, while the store fails), stores what changed
    /// and tells operators of a change of state. Asked while another is
    /// under way, it is decided in the next batch. A parked key's `until`
    /// is its wait from now.
    async fn ask(&self, hash: u64, call: Call, level: Option<Level>) -> Ruling<Option<Level>> {
        let deadline = self.local_now().saturating_add(self.store.timeout());
        let asked = Ask {
            hash,
            call,
            level,
            deadline,
        };
        loop {
            let (answer, leader) = self.batches.join(asked);
            if let Some(mut leader) = leader {
                while let Some(batch) = leader.next() {
                    let (asks, answers): (Vec<Ask>, Vec<_>) = batch.into_iter().unzip();
                    let rulings = self.decide(&asks).await;
                    for (tx, ruling) in answers.into_iter().zip(rulings) {
                        let _ = tx.send(Told::Answer(ruling));
                    }
                }
            }
            match answer.await {
                Ok(Told::Answer(ruling)) => return ruling,
                // The leader is gone: ask again (and lead if nobody does).
                Ok(Told::Lead) | Err(_) => continue,
            }
        }
    }

    /// Decides a batch of `asks` in order on one load of the state and
    /// their entries, and stores what changed in one compare-and-set
    /// (loaded and decided again on a conflict; a question whose deadline
    /// has passed meanwhile is decided alone).
    async fn decide(&self, asks: &[Ask]) -> Vec<Ruling<Option<Level>>> {
        let mut out: Vec<Option<Ruling<Option<Level>>>> = vec![None; asks.len()];
        let mut open: Vec<usize> = (0..asks.len()).collect();
        while !open.is_empty() && !self.alone() {
            let hashes: Vec<u64> = open.iter().map(|&i| asks[i].hash).collect();
            let (loaded, mut batch, adopted) = match self.load_read(&hashes).await {
                Ok(found) => found,
                Err(fault) => {
                    self.go_alone(&fault);
                    break;
                }
            };
            let (mut decided, mut events) = (Vec::with_capacity(open.len()), Vec::new());
            for &i in &open {
                let (a, at) = (&asks[i], loaded.now);
                let (ruling, event) = self.rules.decide(&mut batch, a.hash, at, a.call, a.level);
                decided.push((i, ruling.waits_from(at)));
                events.extend(event);
            }
            let written = batch.written();
            // A change always writes a state (a parked key is counted in
            // it); so does a state adopted from this replica's copy.
            let changed = written.state.is_some() || !written.parked.is_empty() || adopted;
            let state = written.state.unwrap_or_else(|| batch.state());
            if changed {
                let stored = Stored {
                    version: loaded.version,
                    state: &state,
                    parked: &written.parked,
                    cleared: written.cleared,
                };
                match self.store.store(stored).await {
                    Ok(true) => {}
                    Ok(false) => {
                        // Another replica wrote first: decided again, on
                        // what it wrote, for the callers still within their
                        // time (the others are decided alone).
                        let now = self.local_now();
                        open.retain(|&i| now < asks[i].deadline);
                        continue;
                    }
                    Err(e) => {
                        self.go_alone(&Fault::Store(e));
                        break;
                    }
                }
            }
            self.saw(Some(state), batch.view(), &loaded);
            events.into_iter().for_each(|e| self.tell(e));
            decided
                .into_iter()
                .for_each(|(i, ruling)| out[i] = Some(ruling));
            open.clear();
        }
        // Alone, already or from now, and the late: decided on this
        // replica's copy. The period alone starts when the store failed,
        // never again at a call made while alone (calls more often than the
        // period would keep a busy replica from ever asking again).
        asks.iter()
            .zip(out)
            .map(|(a, ruling)| ruling.unwrap_or_else(|| self.alone_step(a)))
            .collect()
    }

    /// One question decided on this replica's copy.
    fn alone_step(&self, a: &Ask) -> Ruling<Option<Level>> {
        let now = self.local_now();
        let mut seen = self.seen.lock();
        let at = shift(now, seen.offset);
        let entry = seen.entries.get(&a.hash);
        let mut batch = self.rules.batch(seen.state.as_ref(), [(a.hash, entry)]);
        if batch.is_err() {
            // The copy is only ever a state read back: never reached.
            batch = self.rules.batch(None, [(a.hash, None)]);
        }
        let Ok(mut batch) = batch else {
            return Ruling::Free;
        };
        let (ruling, event) = self.rules.decide(&mut batch, a.hash, at, a.call, a.level);
        let written = batch.written();
        written.apply(&mut seen.entries);
        if let Some(state) = written.state {
            seen.state = Some(state);
        }
        seen.view = batch.view();
        drop(seen);
        event.into_iter().for_each(|e| self.tell(e));
        ruling.waits_from(at)
    }

    /// Loads the state and the parked keys with `hashes`, and reads them:
    /// a batch on the state to decide on (the store's or, when the store
    /// has none after losing it, the outage this replica was going on
    /// with, then `adopted`).
    async fn load_read(&self, hashes: &[u64]) -> Result<(Loaded, Batch, bool), Fault<T::Error>> {
        let loaded = self.store.load(hashes).await.map_err(Fault::Store)?;
        if loaded.parked.len() != hashes.len() {
            let (got, asked) = (loaded.parked.len(), hashes.len());
            return Err(Fault::NotOurs(format!(
                "{got} parked keys answered for {asked} asked"
            )));
        }
        let kept = match &loaded.state {
            Some(_) => None,
            None => {
                let seen = self.seen.lock();
                seen.view.active.then(|| seen.state.clone()).flatten()
            }
        };
        let state = loaded.state.as_ref().or(kept.as_ref());
        let entries = hashes
            .iter()
            .copied()
            .zip(loaded.parked.iter().map(Option::as_ref));
        let batch = self.rules.batch(state, entries).map_err(Fault::NotOurs)?;
        if self.foreign.swap(false, Ordering::Relaxed) {
            observe::state_ours_again();
        }
        Ok((loaded, batch, kept.is_some()))
    }

    /// Notes the state seen in the store; a replica that was alone
    /// rejoins.
    fn saw(&self, state: Option<SharedOutage>, view: View, loaded: &Loaded) {
        let local = self.local_now();
        let mut seen = self.seen.lock();
        seen.state = state;
        seen.view = view;
        seen.checked = Some(local);
        seen.offset = i128::from(nanos(loaded.now)) - i128::from(nanos(local));
        seen.alone_until = None;
        seen.entries.clear();
    }

    /// The store failed: reported (a foreign value once), and this
    /// replica goes on alone for a while.
    fn go_alone(&self, fault: &Fault<T::Error>) {
        match fault {
            Fault::Store(e) if !self.store.is_foreign(e) => observe::store_failed(e),
            Fault::Store(e) => self.foreign_found(e),
            Fault::NotOurs(detail) => self.foreign_found(detail),
        }
        let until = self.local_now().saturating_add(ALONE_FOR);
        self.seen.lock().alone_until = Some(until);
    }

    fn foreign_found(&self, what: &dyn fmt::Display) {
        if !self.foreign.swap(true, Ordering::Relaxed) {
            observe::foreign_state(what);
        }
    }
}

/// The questions of one outage, answered through the store.
impl<T: OutageStore, C: Clock> One for Fleet<T, C> {
    const AT_ONCE: bool = false;

    fn seen_active(&self) -> bool {
        self.seen.lock().view.active
    }

    async fn active(&self) -> bool {
        let now = self.local_now();
        let (active, recent) = {
            let seen = self.seen.lock();
            let recent = seen
                .checked
                .is_some_and(|c| now.saturating_sub(c) < REFRESH);
            (seen.view.active, recent)
        };
        if active || recent {
            return active;
        }
        self.check().await.active
    }

    async fn peek<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Option<Level>,
    ) -> Option<Duration> {
        match self.ask(self.rules.hash(key), Call::Peek, level).await {
            Ruling::Parked { until, .. } => Some(until),
            Ruling::Free | Ruling::Released { .. } => None,
        }
    }

    fn ruling<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        asked: Asked,
        level: Option<Level>,
    ) -> impl Future<Output = Ruling<Option<Level>>> + Send {
        self.ask(self.rules.hash(key), Call::Rule(asked), level)
    }

    async fn failed<Q: Hash + Sync + ?Sized>(&self, key: &Q, level: Level) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed);
        if level.attempts != 1 {
            return;
        }
        let hash = self.rules.hash(key);
        let successes = self.successes.load(Ordering::Relaxed);
        let at = self.local_now();
        let declared = self.detector.lock().fresh(hash, at, failures, successes);
        match declared {
            Some(counts) => _ = self.ask(hash, Call::Begin(counts), None).await,
            None => _ = self.check().await,
        }
    }

    async fn succeeded<Q: Hash + Sync + ?Sized>(&self, key: &Q) {
        self.successes.fetch_add(1, Ordering::Relaxed);
        let active = self.seen.lock().view.active;
        if active {
            self.ask(self.rules.hash(key), Call::Success, None).await;
        }
    }

    fn tally(&self) -> Tally {
        let view = self.seen.lock().view;
        Tally {
            in_outage: view.in_outage,
            parked: usize::try_from(view.parked).unwrap_or(usize::MAX),
            outages: view.outages,
        }
    }

    /// The domain's outage through the store's own for it, sharing this
    /// one's time line.
    fn domain(&self, name: &str, seed: u64, _: &Arc<AtomicUsize>) -> Option<Self> {
        let store = self.store.domain(name)?;
        let line = Arc::clone(&self.line);
        let settings = self.rules.settings();
        Some(Fleet::new(store, settings, seed, line, Some(name.into())))
    }
}

impl<T: fmt::Debug, C: Clock> fmt::Debug for Shared<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let everything = self.outages.everything();
        let view = everything.seen.lock().view;
        f.debug_struct("Shared")
            .field("store", &everything.store)
            .field("in_outage", &view.in_outage)
            .field("parked", &view.parked)
            .finish_non_exhaustive()
    }
}

/// `d` moved by `offset` nanoseconds, saturating at zero and the longest.
fn shift(d: Duration, offset: i128) -> Duration {
    let shifted = i128::from(nanos(d)).saturating_add(offset);
    Duration::from_nanos(u64::try_from(shifted.max(0)).unwrap_or(u64::MAX))
}
