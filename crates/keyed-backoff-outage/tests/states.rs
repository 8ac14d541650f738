//! The one wrapper over each place an outage's state can live: in this
//! process, and a store written here as a user would write one (in
//! memory, and able to fail), shared by three replicas. The same scenario
//! (`keyed_backoff_testkit::outage`) runs over both here and over Redis in
//! the Redis crate's suite.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::{Backoff, Gate};
use keyed_backoff_outage::{
    Loaded, OutageAware, OutageSettings, OutageStore, ParkedKey, Shared, SharedOutage, Stored,
};
use keyed_backoff_testkit::outage::{PROBES, lifecycle, settings};
use parking_lot::Mutex;

type Inner = Backoff<String, MockClock>;

fn backoff(clock: &MockClock) -> Inner {
    Backoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// What the store keeps: the version, the state, the parked keys.
#[derive(Default)]
struct Kept {
    version: u64,
    state: Option<SharedOutage>,
    parked: HashMap<u64, ParkedKey>,
}

/// An outage store in memory, shared by replicas that hold a clone, on
/// the fleet's clock; `failing` makes every call fail.
#[derive(Clone)]
struct Memory {
    kept: Arc<Mutex<Kept>>,
    clock: MockClock,
    epoch: MockInstant,
    failing: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
}

impl Memory {
    fn new(clock: &MockClock) -> Self {
        Memory {
            kept: Arc::default(),
            clock: clock.clone(),
            epoch: clock.now(),
            failing: Arc::default(),
            calls: Arc::default(),
        }
    }

    fn check(&self) -> Result<(), std::io::Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        match self.failing.load(Ordering::Relaxed) {
            true => Err(std::io::Error::other("the memory store is failing")),
            false => Ok(()),
        }
    }
}

impl OutageStore for Memory {
    type Error = std::io::Error;

    async fn load(&self, parked: &[u64]) -> Result<Loaded, Self::Error> {
        self.check()?;
        let kept = self.kept.lock();
        Ok(Loaded {
            version: kept.version,
            state: kept.state.clone(),
            parked: parked.iter().map(|h| kept.parked.get(h).cloned()).collect(),
            now: self.clock.now().saturating_duration_since(self.epoch),
        })
    }

    async fn store(&self, write: Stored<'_>) -> Result<bool, Self::Error> {
        self.check()?;
        let mut kept = self.kept.lock();
        if kept.version != write.version {
            return Ok(false);
        }
        write.apply(&mut kept.parked);
        kept.version += 1;
        kept.state = Some(write.state.clone());
        Ok(true)
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(1)
    }
}

type Replica = OutageAware<Inner, Shared<Memory, MockClock>>;

fn replicas(clock: &MockClock, store: &Memory, n: usize) -> Vec<Replica> {
    (0..n)
        .map(|_| {
            let (inner, store) = (backoff(clock), store.clone());
            OutageAware::shared_with_clock(inner, settings(), store, clock.clone()).unwrap()
        })
        .collect()
}

#[tokio::test]
async fn the_scenario_in_process() {
    let clock = MockClock::new();
    let gate = OutageAware::with_clock(backoff(&clock), settings(), clock.clone()).unwrap();
    lifecycle("in process", &clock, &[gate]).await;
}

#[tokio::test]
async fn the_scenario_on_a_store_written_in_a_test_shared_by_three_replicas() {
    let clock = MockClock::new();
    let store = Memory::new(&clock);
    let fleet = replicas(&clock, &store, 3);
    lifecycle("a memory store, 3 replicas", &clock, &fleet).await;
    // The fleet shared one state: it was written, and read by all.
    assert!(store.kept.lock().version > 10);
}

#[tokio::test]
async fn a_store_that_fails_during_an_outage_leaves_every_key_parked_and_the_fleet_rejoins() {
    let clock = MockClock::new();
    let store = Memory::new(&clock);
    let fleet = replicas(&clock, &store, 3);
    let key = |k: usize| format!("key-{k}");
    // Three keys newly fail on the first replica: an outage for the fleet.
    for k in 0..3 {
        assert!(fleet[0].fail(&key(k)).await.unwrap().is_ok());
    }
    assert!(fleet[0].in_outage());
    clock.advance(Duration::from_millis(200));
    // Every replica parks the keys it is asked about (it reads the fleet's
    // phase); at most the step's probes go, across the fleet.
    let mut went = 0;
    for (r, gate) in fleet.iter().enumerate() {
        for k in 0..10 {
            went += usize::from(gate.claim(&key(10 + 10 * r + k)).await.unwrap().is_none());
        }
        assert!(gate.in_outage(), "replica {r} did not see the outage");
    }
    assert!(
        went <= PROBES,
        "{went} keys went in the outage's first step"
    );
    // The store fails: each replica goes on alone, on the outage it saw
    // (the bounds now hold per replica).
    store.failing.store(true, Ordering::Relaxed);
    clock.advance(Duration::from_secs(1));
    for (r, gate) in fleet.iter().enumerate() {
        let mut went = 0;
        for k in 0..10 {
            went += usize::from(gate.claim(&key(100 + 10 * r + k)).await.unwrap().is_none());
        }
        assert!(went <= PROBES, "replica {r} let {went} keys go alone");
        assert!(gate.alone() && gate.in_outage(), "replica {r}");
    }
    // While alone it does not ask the store again, however often asked.
    let calls = store.calls.load(Ordering::Relaxed);
    for gate in &fleet {
        gate.claim(&key(40)).await.unwrap();
    }
    assert_eq!(store.calls.load(Ordering::Relaxed), calls);
    // The store is back; a second later each replica asks it again, and
    // rejoins the one outage (not a second one).
    store.failing.store(false, Ordering::Relaxed);
    clock.advance(Duration::from_millis(1_100));
    for (r, gate) in fleet.iter().enumerate() {
        gate.claim(&key(50 + r)).await.unwrap();
        assert!(!gate.alone(), "replica {r} did not rejoin");
        assert_eq!((gate.in_outage(), gate.outages()), (true, 1), "replica {r}");
    }
}

#[test]
fn a_fleet_needs_a_seed_every_replica_shares() {
    let clock = MockClock::new();
    let store = Memory::new(&clock);
    let no_seed = OutageSettings::new();
    let Err(err) = OutageAware::shared(backoff(&clock), no_seed, store) else {
        panic!("a fleet without a seed");
    };
    assert_eq!(err.field(), "outage.seed");
}

/// A replica that declares the fleet's outage reports it once it is
/// stored; a replica that adopts it, and a store that fails, report no
/// second outage (a failing store is a warning).
#[cfg(feature = "tracing")]
#[tokio::test]
async fn the_replica_that_declares_the_fleet_s_outage_reports_it() {
    use keyed_backoff_testkit::events::Events;
    let clock = MockClock::new();
    let store = Memory::new(&clock);
    let fleet = replicas(&clock, &store, 2);
    let events = Events::default();
    let _guard = events.set_default();
    for k in 0..3 {
        let _ = fleet[0].fail(&format!("a{k}")).await.unwrap();
        let _ = fleet[1].fail(&format!("b{k}")).await.unwrap();
    }
    store.failing.store(true, Ordering::Relaxed);
    clock.advance(Duration::from_millis(200));
    fleet[1].claim(&"c".to_string()).await.unwrap();
    let seen = events.seen();
    let began: Vec<_> = seen
        .iter()
        .filter(|e| e.message.starts_with("outage began"))
        .collect();
    assert_eq!(began.len(), 1, "{seen:?}");
    assert_eq!(began[0].field("fresh_failures"), Some("3"));
    assert!(fleet.iter().all(|g| g.outages() == 1));
    let warned = seen
        .iter()
        .filter(|e| e.message.contains("goes on alone for a second"));
    assert_eq!(warned.count(), 1, "{seen:?}");
}
