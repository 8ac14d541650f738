//! The outage's state in Redis, and this replica's copy of it: each step
//! loads the state and the key's parked entry (one script call), decides
//! by the core's rules, and stores what changed with a compare-and-set on
//! the state's version (one script call; loaded again on a conflict, within
//! the operation's timeout). The steps this replica's callers ask for
//! while one is under way are decided together, on one load, and stored
//! in one compare-and-set ([`batch`](super::batch)): every key asking at
//! once costs a few round trips, and the replicas contend for the state,
//! not their keys.
//!
//! While Redis cannot be reached the replica goes on alone, on its copy of
//! the last state it saw; so it does while the state Redis holds is not
//! ours (reported once, left untouched): a foreign value never stops a
//! key's own backoff.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff::Advanced;
use keyed_backoff_outage::__fleet::{
    EntryChange, FleetAsk, FleetDecision, FleetRules, FleetStep, FleetView, FleetWrite,
};
use parking_lot::Mutex;
use redis::Script;
use redis::aio::ConnectionLike;

use super::batch::{Batches, Told};
use crate::error::StoreError;
use crate::observe;
use crate::protocol::TimeSource;
use crate::transport::Transport;

/// The script that loads and stores the state.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../outage.lua")));

/// How long the state and the parked keys live in Redis unwritten: a day.
const KEPT_MS: u64 = 86_400_000;

/// After Redis could not be reached, how long this replica goes on alone
/// before it asks Redis again (on its own monotonic clock).
const ALONE_FOR: Duration = Duration::from_secs(1);

/// What one load found.
struct Loaded {
    version: u64,
    state: Option<String>,
    /// The parked entries of the keys asked about, in order.
    entries: Vec<Option<String>>,
    /// Redis `TIME`, in nanoseconds since the Unix epoch.
    redis_now: u64,
}

/// This replica's copy: the last state it saw, and the keys it parked
/// while alone.
pub(crate) struct Seen {
    pub(crate) state: Option<String>,
    pub(crate) view: FleetView,
    /// When the state was last read (on the replica's own line).
    pub(crate) checked: Option<Duration>,
    /// The fleet's time minus the replica's own, in nanoseconds.
    offset: i128,
    /// Until when (real time) Redis is not asked again.
    alone_until: Option<Instant>,
    /// Keys parked while alone.
    entries: HashMap<u64, String>,
}

/// The outage's state: where it lives in Redis, and this replica's copy.
pub(crate) struct Shared<C> {
    transport: Transport<C>,
    time: TimeSource,
    epoch: Instant,
    keys: [String; 2],
    pub(crate) seen: Mutex<Seen>,
    /// The steps asked for while one is under way.
    batches: Batches<Ask, Answer>,
    /// Whether the state Redis holds was found not ours (reported once,
    /// until a state of ours is read again).
    foreign: AtomicBool,
}

/// A step's answer to its caller.
type Answer = Result<FleetDecision, StoreError>;

/// One step a caller asks for.
#[derive(Clone, Copy)]
struct Ask {
    hash: u64,
    ask: FleetAsk,
    level: Option<Advanced>,
    /// When the caller's operation times out.
    deadline: Instant,
}

impl<C> Shared<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    pub(crate) fn new(transport: Transport<C>, time: TimeSource, prefix: &str) -> Self {
        let tag = format!("{{{prefix}:outage}}");
        Shared {
            transport,
            time,
            epoch: Instant::now(),
            keys: [format!("{tag}:state"), format!("{tag}:parked")],
            seen: Mutex::new(Seen {
                state: None,
                view: FleetView::default(),
                checked: None,
                offset: 0,
                alone_until: None,
                entries: HashMap::new(),
            }),
            batches: Batches::new(),
            foreign: AtomicBool::new(false),
        }
    }

    /// The Redis keys of the state and of the parked keys.
    pub(crate) fn keys(&self) -> &[String; 2] {
        &self.keys
    }

    /// Now on this replica's own line: the caller's clock, or the time
    /// since the state was made.
    pub(crate) fn local_now(&self) -> Duration {
        match &self.time {
            TimeSource::Caller(now) => Duration::from_nanos(u64::try_from(now()).unwrap_or(0)),
            TimeSource::Redis => self.epoch.elapsed(),
        }
    }

    /// Whether this replica is going on alone now.
    pub(crate) fn alone(&self) -> bool {
        self.seen
            .lock()
            .alone_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Reads the state again (no key asked about), unless alone; the view
    /// it holds now.
    pub(crate) async fn check(&self, rules: &FleetRules) -> Result<FleetView, StoreError> {
        if !self.alone() {
            match self.load_read(rules, &[]).await {
                Ok((loaded, state, view)) => {
                    self.saw(state, view, &loaded);
                    return Ok(view);
                }
                Err(e) if self.alone_after(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let mut seen = self.seen.lock();
        seen.checked = Some(self.local_now());
        Ok(seen.view)
    }

    /// Decides `ask` for the key with `hash` on the fleet's state (alone on
    /// this replica's copy while Redis cannot be reached, or holds a state
    /// that is not ours), stores what changed and tells operators of a
    /// change of state. Asked while another step is under way, it is
    /// decided in the next batch.
    pub(crate) async fn step(
        &self,
        rules: &FleetRules,
        hash: u64,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> Result<FleetDecision, StoreError> {
        let deadline = Instant::now() + self.transport.timeout();
        let asked = Ask {
            hash,
            ask,
            level,
            deadline,
        };
        loop {
            let (answer, leader) = self.batches.join(asked);
            if let Some(mut leader) = leader {
                while let Some(batch) = leader.next() {
                    let (asks, answers): (Vec<Ask>, Vec<_>) = batch.into_iter().unzip();
                    let steps = self.decide(rules, &asks).await;
                    for (tx, step) in answers.into_iter().zip(steps) {
                        let _ = tx.send(Told::Answer(step));
                    }
                }
            }
            match answer.await {
                Ok(Told::Answer(step)) => return step,
                // The leader is gone: ask again (and lead if nobody does).
                Ok(Told::Lead) | Err(_) => continue,
            }
        }
    }

    /// Decides a batch of `asks` in order on one load of the state and
    /// their entries, and stores what changed in one compare-and-set
    /// (loaded and decided again on a conflict; a step whose caller's
    /// timeout has passed meanwhile fails with `TimedOut`).
    async fn decide(&self, rules: &FleetRules, asks: &[Ask]) -> Vec<Answer> {
        let mut out: Vec<Option<Answer>> = vec![None; asks.len()];
        let mut open: Vec<usize> = (0..asks.len()).collect();
        while !open.is_empty() && !self.alone() {
            let fields: Vec<String> = open.iter().map(|&i| field(asks[i].hash)).collect();
            let failed = match self.load_read(rules, &fields).await {
                Ok((loaded, state, _)) => {
                    let at = self.fleet_now(&loaded);
                    let entries = open.iter().map(|&i| asks[i].hash);
                    let entries = entries.zip(loaded.entries.iter().map(Option::as_deref));
                    let mut batch = match rules.batch(state.as_deref(), entries) {
                        Ok(batch) => batch,
                        Err(d) => {
                            // Read by load_read already: cannot happen.
                            let e = self.corrupt(d);
                            open.iter().for_each(|&i| out[i] = Some(Err(e.clone())));
                            break;
                        }
                    };
                    for &i in &open {
                        let a = &asks[i];
                        let decided = rules.decide(&mut batch, a.hash, at, a.ask, a.level);
                        out[i] = Some(decided.map_err(|d| self.corrupt(d)));
                    }
                    let written = batch.written();
                    // A change always writes a state (a parked key is
                    // counted in it); no state anywhere, nothing to write.
                    let changed = written.state.is_some() || !written.entries.is_empty();
                    let text = written.state.clone().or(state.clone());
                    match text.filter(|_| changed || state != loaded.state) {
                        None => {
                            self.saw(state, batch.view(), &loaded);
                            open.clear();
                            None
                        }
                        Some(text) => match self.store(&loaded, &text, &written).await {
                            Ok(true) => {
                                self.saw(Some(text), batch.view(), &loaded);
                                for &i in &open {
                                    if let Some(Ok(decision)) = &out[i] {
                                        decision.report();
                                    }
                                }
                                open.clear();
                                None
                            }
                            Ok(false) => {
                                // Another replica wrote first: decided again,
                                // on what it wrote, for the callers still
                                // within their time.
                                let now = Instant::now();
                                open.retain(|&i| {
                                    let late = now >= asks[i].deadline;
                                    out[i] = late.then(|| Err(self.transport.timed_out()));
                                    !late
                                });
                                None
                            }
                            Err(e) => Some(e),
                        },
                    }
                }
                Err(e) => Some(e),
            };
            match failed {
                None => {}
                Some(e) if self.alone_after(&e) => break,
                Some(e) => {
                    open.iter().for_each(|&i| out[i] = Some(Err(e.clone())));
                    open.clear();
                }
            }
        }
        // Alone, already or from now: the period alone starts when Redis
        // failed to answer, never again at a call made while alone (calls
        // more often than the period would keep a busy replica from ever
        // asking Redis again).
        for i in open {
            let a = &asks[i];
            let step = self.step_alone(rules, a.hash, a.ask, a.level);
            out[i] = Some(Ok(step.decision()));
        }
        out.into_iter()
            .map(|answer| answer.expect("every step decided"))
            .collect()
    }

    /// Whether the replica goes on alone after `e`: Redis could not be
    /// reached, or holds an outage state that is not ours (reported once).
    fn alone_after(&self, e: &StoreError) -> bool {
        match e {
            e if e.is_unreachable() => {}
            StoreError::Corrupt { .. } => {
                if !self.foreign.swap(true, Ordering::Relaxed) {
                    observe::foreign_outage_state(e);
                }
            }
            _ => return false,
        }
        self.go_alone();
        true
    }

    /// The step on this replica's copy.
    fn step_alone(
        &self,
        rules: &FleetRules,
        hash: u64,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> FleetStep {
        let mut seen = self.seen.lock();
        let at = shift(self.local_now(), seen.offset);
        let entry = seen.entries.get(&hash).map(String::as_str);
        let step = match rules.step(seen.state.as_deref(), entry, hash, at, ask, level) {
            Ok(step) => step,
            // The copy was read when it was loaded: it cannot be damaged.
            Err(_) => unreachable!("a state this replica read back"),
        };
        if step.cleared {
            seen.entries.clear();
        }
        match &step.entry {
            EntryChange::Keep => {}
            EntryChange::Put(text) => _ = seen.entries.insert(hash, text.clone()),
            EntryChange::Remove => _ = seen.entries.remove(&hash),
        }
        if let Some(state) = &step.state {
            seen.state = Some(state.clone());
        }
        seen.view = step.view;
        step.report();
        step
    }

    /// The state to decide on: Redis's, or (when Redis has none, after a
    /// restart that lost it) the outage this replica was going on with.
    fn adopted(&self, loaded: &Loaded) -> Option<String> {
        match &loaded.state {
            Some(state) => Some(state.clone()),
            None => {
                let seen = self.seen.lock();
                seen.view.active.then(|| seen.state.clone()).flatten()
            }
        }
    }

    /// Notes the state seen in Redis; a replica that was alone rejoins.
    fn saw(&self, state: Option<String>, view: FleetView, loaded: &Loaded) {
        let local = self.local_now();
        let mut seen = self.seen.lock();
        seen.state = state;
        seen.view = view;
        seen.checked = Some(local);
        seen.offset = i128::from(nanos(self.fleet_now(loaded))) - i128::from(nanos(local));
        seen.alone_until = None;
        seen.entries.clear();
    }

    fn go_alone(&self) {
        self.seen.lock().alone_until = Some(Instant::now() + ALONE_FOR);
    }

    /// Now on the fleet's line: the caller's clock, or Redis `TIME`.
    fn fleet_now(&self, loaded: &Loaded) -> Duration {
        match &self.time {
            TimeSource::Caller(_) => self.local_now(),
            TimeSource::Redis => Duration::from_nanos(loaded.redis_now),
        }
    }

    /// Loads the state and the entries at `fields`, and reads the state:
    /// the state to decide on ([`adopted`](Self::adopted)) and its view.
    /// A state that is not ours is [`StoreError::Corrupt`].
    async fn load_read(
        &self,
        rules: &FleetRules,
        fields: &[String],
    ) -> Result<(Loaded, Option<String>, FleetView), StoreError> {
        let loaded = self.load(fields).await?;
        let state = self.adopted(&loaded);
        let view = rules.view(state.as_deref()).map_err(|d| self.corrupt(d))?;
        if self.foreign.swap(false, Ordering::Relaxed) {
            observe::outage_state_ours_again();
        }
        Ok((loaded, state, view))
    }

    async fn load(&self, fields: &[String]) -> Result<Loaded, StoreError> {
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation.key(&self.keys[1]).arg("load").arg(fields);
        type Reply = (i64, Option<String>, Vec<Option<String>>, u64, u64);
        let (version, state, entries, secs, micros): Reply =
            self.transport.invoke(&self.keys[0], &invocation).await?;
        let Ok(version) = u64::try_from(version) else {
            let found = state.unwrap_or_default();
            return Err(self.corrupt(format!("the outage state is not ours: {found:?}")));
        };
        if entries.len() != fields.len() {
            return Err(self.corrupt(format!(
                "{} parked entries answered for {} asked",
                entries.len(),
                fields.len()
            )));
        }
        Ok(Loaded {
            version,
            state,
            entries,
            redis_now: secs
                .saturating_mul(1_000_000_000)
                .saturating_add(micros.saturating_mul(1_000)),
        })
    }

    /// Writes `state` and the batch's entries unless the version moved
    /// since `loaded`; whether it did.
    async fn store(
        &self,
        loaded: &Loaded,
        state: &str,
        written: &FleetWrite,
    ) -> Result<bool, StoreError> {
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation
            .key(&self.keys[1])
            .arg("store")
            .arg(loaded.version)
            .arg(state)
            .arg(if written.cleared { "1" } else { "0" })
            .arg(KEPT_MS);
        for (hash, change) in &written.entries {
            let text = match change {
                EntryChange::Put(text) => text.as_str(),
                EntryChange::Remove | EntryChange::Keep => "-",
            };
            invocation.arg(field(*hash)).arg(text);
        }
        let written: u8 = self.transport.invoke(&self.keys[0], &invocation).await?;
        Ok(written == 1)
    }

    fn corrupt(&self, detail: String) -> StoreError {
        StoreError::Corrupt {
            key: self.keys[0].clone(),
            detail,
            source: None,
        }
    }
}

/// The field of the key with `hash` in the parked keys' hash.
fn field(hash: u64) -> String {
    format!("{hash:016x}")
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` moved by `offset` nanoseconds, saturating at zero and the longest.
fn shift(d: Duration, offset: i128) -> Duration {
    let shifted = i128::from(nanos(d)).saturating_add(offset);
    Duration::from_nanos(u64::try_from(shifted.max(0)).unwrap_or(u64::MAX))
}
