//! The outage's state in Redis, and this replica's copy of it: each step
//! loads the state and the key's parked entry (one script call), decides
//! by the core's rules, and stores what changed with a compare-and-set on
//! the state's version (one script call; loaded again on a conflict, within
//! the operation's timeout). While Redis cannot be reached the replica
//! goes on alone, on its copy of the last state it saw.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use keyed_backoff::__private::{EntryChange, FleetAsk, FleetRules, FleetStep, FleetView};
use keyed_backoff::Advanced;
use parking_lot::Mutex;
use redis::Script;
use redis::aio::ConnectionLike;

use crate::error::StoreError;
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
    entry: Option<String>,
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
            match self.load(None).await {
                Ok(loaded) => {
                    let state = self.adopted(&loaded);
                    let view = rules.view(state.as_deref()).map_err(|d| self.corrupt(d))?;
                    self.saw(state, view, &loaded);
                    return Ok(view);
                }
                Err(e) if unreachable(&e) => self.go_alone(),
                Err(e) => return Err(e),
            }
        }
        let mut seen = self.seen.lock();
        seen.checked = Some(self.local_now());
        Ok(seen.view)
    }

    /// Decides `ask` for the key with `hash` on the fleet's state (alone on
    /// this replica's copy while Redis cannot be reached), stores what
    /// changed and tells operators of a change of state.
    pub(crate) async fn step(
        &self,
        rules: &FleetRules,
        hash: u64,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> Result<FleetStep, StoreError> {
        let field = format!("{hash:016x}");
        let deadline = Instant::now() + self.transport.timeout();
        while !self.alone() {
            let loaded = match self.load(Some(&field)).await {
                Ok(loaded) => loaded,
                Err(e) if unreachable(&e) => {
                    self.go_alone();
                    break;
                }
                Err(e) => return Err(e),
            };
            let at = self.fleet_now(&loaded);
            let state = self.adopted(&loaded);
            let step = rules
                .step(
                    state.as_deref(),
                    loaded.entry.as_deref(),
                    hash,
                    at,
                    ask,
                    level,
                )
                .map_err(|d| self.corrupt(d))?;
            if step.state.is_none() && step.entry == EntryChange::Keep && state == loaded.state {
                self.saw(state, step.view, &loaded);
                return Ok(step);
            }
            // A change always writes a state (a parked key is counted in it).
            let Some(written) = step.state.clone().or(state) else {
                return Ok(step);
            };
            match self.store(&loaded, &written, &field, &step).await {
                Ok(true) => {
                    self.saw(Some(written), step.view, &loaded);
                    step.report();
                    return Ok(step);
                }
                Ok(false) if Instant::now() < deadline => continue,
                Ok(false) => {
                    return Err(self.transport.timed_out());
                }
                Err(e) if unreachable(&e) => {
                    self.go_alone();
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        // Alone, already or from now: the period alone starts when Redis
        // failed to answer, never again at a call made while alone (calls
        // more often than the period would keep a busy replica from ever
        // asking Redis again).
        Ok(self.step_alone(rules, hash, ask, level))
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

    async fn load(&self, field: Option<&str>) -> Result<Loaded, StoreError> {
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation
            .key(&self.keys[1])
            .arg("load")
            .arg(field.unwrap_or(""));
        type Reply = (i64, Option<String>, Option<String>, u64, u64);
        let (version, state, entry, secs, micros): Reply =
            self.transport.invoke(&self.keys[0], &invocation).await?;
        let Ok(version) = u64::try_from(version) else {
            let found = state.unwrap_or_default();
            return Err(self.corrupt(format!("the outage state is not ours: {found:?}")));
        };
        Ok(Loaded {
            version,
            state,
            entry,
            redis_now: secs
                .saturating_mul(1_000_000_000)
                .saturating_add(micros.saturating_mul(1_000)),
        })
    }

    /// Writes `state` and the key's entry unless the version moved since
    /// `loaded`; whether it did.
    async fn store(
        &self,
        loaded: &Loaded,
        state: &str,
        field: &str,
        step: &FleetStep,
    ) -> Result<bool, StoreError> {
        let entry = match &step.entry {
            EntryChange::Keep => "",
            EntryChange::Remove => "-",
            EntryChange::Put(text) => text.as_str(),
        };
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation
            .key(&self.keys[1])
            .arg("store")
            .arg(loaded.version)
            .arg(state)
            .arg(field)
            .arg(entry)
            .arg(if step.cleared { "1" } else { "0" })
            .arg(KEPT_MS);
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

/// Whether `e` says Redis could not be reached or did not answer.
fn unreachable(e: &StoreError) -> bool {
    e.is_unreachable()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `d` moved by `offset` nanoseconds, saturating at zero and the longest.
fn shift(d: Duration, offset: i128) -> Duration {
    let shifted = i128::from(nanos(d)).saturating_add(offset);
    Duration::from_nanos(u64::try_from(shifted.max(0)).unwrap_or(u64::MAX))
}
