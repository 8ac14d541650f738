//! [`FleetOutageAware`]: the core's outage awareness over the store, with
//! the outage's state shared by every replica through Redis.

mod batch;
mod shared;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keyed_backoff::{Advanced, ConfigError, Gate, InBackoff};
use keyed_backoff_outage::__fleet::{
    FleetAsk, FleetDetector, FleetRules, FleetRuling, parked_failure,
};
use keyed_backoff_outage::{OutageSettings, OutageStatus};
use parking_lot::Mutex;
use redis::aio::ConnectionLike;

use crate::error::StoreError;
use crate::store::RedisBackoff;
use shared::Shared;

/// Outside an outage, how long a replica trusts the phase it last read
/// before a claim or a failure reads it again.
const REFRESH: Duration = Duration::from_millis(100);

/// keyed-backoff-outage's [`OutageAware`](keyed_backoff_outage::OutageAware) over a
/// [`RedisBackoff`], with one outage for the whole fleet: the replicas on
/// one prefix share its state in Redis, so the dependency sees at most
/// [`probes`](OutageSettings::probes) attempts per step of the ladder and
/// [`release_rate`](OutageSettings::release_rate) keys a second across
/// the fleet, not per replica. Made by [`RedisBackoff::outage_aware`].
///
/// The rules are the core's, decided in each replica on a state loaded
/// from Redis for the call and written back with a compare-and-set:
///
/// - **Outside an outage** a success or a failure that continues a key's
///   ladder costs nothing more than the store's own call; it is counted by
///   this replica's detector. A failure that starts a key's ladder (a
///   *fresh* one) costs one more round trip: it reads the fleet's phase,
///   and publishes an outage when this replica's detector declares one
///   (a replica that finds one under way adopts it). A claim or a failure
///   reads the phase again when it is older than 100 ms, so a replica
///   learns of an outage another declared at its next fresh failure, or
///   within 100 ms of it.
/// - **During an outage and its release** every claim, failure and
///   success loads the state and the key's parked entry (one script call)
///   and stores what changed (one more, retried on a conflict within the
///   store's [`timeout`](crate::RedisBackoffBuilder::timeout)). Calls made
///   while one is under way are decided together when it is done, on one
///   load and one store: keys asking at once do not contend for the
///   state, only replicas do. A claim,
///   wait or failure first reads the key's own wait and level from the
///   store, together (one call): a parked key's claim or wait costs two
///   round trips, its failure three.
/// - **While Redis cannot be reached** this replica goes on alone, from
///   the last state it saw: the same outage (when it began, its ladder and
///   its seed), so parked keys stay parked; it never fails open. A replica
///   that never saw an outage detects one alone. It asks Redis again a
///   second later; when Redis answers it rejoins the fleet's state (or,
///   when Redis lost it in a restart, writes the outage it was going on
///   with). Alone, the bounds hold per replica, not per fleet. So it does
///   while Redis holds a state that is not ours at the outage's key
///   (reported once, left as it was): a foreign value never stops a key's
///   own backoff.
///
/// The replicas must use the same prefix, the same settings and the same
/// version of this crate; the seed that places the keys' slots defaults
/// to one derived from the prefix (give every replica the same
/// [`seed`](OutageSettings::seed) otherwise). The time line is Redis
/// `TIME`, or the store's [`clock`](crate::RedisBackoffBuilder::clock).
///
/// ```no_run
/// use keyed_backoff_redis::OutageSettings;
/// use keyed_backoff_redis::keyed_backoff::Gate;
/// use keyed_backoff_redis::RedisBackoff;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let gate = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(300))
///     .prefix("payments")
///     .fallback(Duration::from_secs(5))
///     .open("redis://127.0.0.1:6379/")
///     .await?
///     .outage_aware(OutageSettings::new().probes(Some(3)).release_rate(100.0))?;
/// let key = "invoice-17".to_string();
/// if gate.claim(&key).await?.is_none() {
///     // Call the dependency, then tell the gate.
///     gate.fail(&key).await?;
/// }
/// println!("outage under way: {}", gate.in_outage());
/// # Ok(())
/// # }
/// ```
pub struct FleetOutageAware<C> {
    store: RedisBackoff<C>,
    rules: FleetRules,
    shared: Shared<C>,
    detector: Mutex<FleetDetector>,
    failures: AtomicU64,
    successes: AtomicU64,
}

impl<C> RedisBackoff<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// This store with outage awareness shared by every replica on its
    /// prefix (see [`FleetOutageAware`]). Fails with the first of
    /// `settings` out of range. Nothing is sent to Redis until the first
    /// call.
    ///
    /// ```
    /// use keyed_backoff_redis::OutageSettings;
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .prefix("payments")
    ///     .open("redis://127.0.0.1:6379/") // connects on first use
    ///     .await?;
    /// let err = store.outage_aware(OutageSettings::new().release_rate(0.0)).unwrap_err();
    /// assert_eq!(err.field(), "outage.release_rate");
    /// # Ok(())
    /// # }
    /// ```
    pub fn outage_aware(
        self,
        settings: OutageSettings,
    ) -> Result<FleetOutageAware<C>, ConfigError> {
        let rules = FleetRules::new(settings, fnv1a(self.prefix.as_bytes()))?;
        let shared = Shared::new(self.transport.clone(), self.time.clone(), &self.prefix);
        Ok(FleetOutageAware {
            detector: Mutex::new(rules.detector()),
            rules,
            shared,
            store: self,
            failures: AtomicU64::new(0),
            successes: AtomicU64::new(0),
        })
    }
}

impl<C> FleetOutageAware<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// The store under it.
    pub fn inner(&self) -> &RedisBackoff<C> {
        &self.store
    }

    /// Whether an outage was under way in the state this replica last
    /// saw (no round trip): a replica reads the state at every call during
    /// an outage, and outside one at every fresh failure and at least
    /// every 100 ms of claims and failures.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{FleetOutageAware, redis::aio::ConnectionManager};
    /// # fn f(gate: &FleetOutageAware<ConnectionManager>) {
    /// if gate.in_outage() {
    ///     eprintln!("outage: {} keys parked across the fleet", gate.parked());
    /// }
    /// if gate.alone() {
    ///     eprintln!("Redis unreachable: this replica holds its keys alone");
    /// }
    /// # }
    /// ```
    pub fn in_outage(&self) -> bool {
        self.shared.seen.lock().view.in_outage
    }

    /// Keys the fleet had parked in the state this replica last saw.
    pub fn parked(&self) -> u64 {
        self.shared.seen.lock().view.parked
    }

    /// Outages declared in the fleet, as this replica last saw them.
    pub fn outages(&self) -> u64 {
        self.shared.seen.lock().view.outages
    }

    /// Whether this replica is going on alone now: Redis is unreachable,
    /// or holds an outage state that is not ours.
    pub fn alone(&self) -> bool {
        self.shared.alone()
    }

    /// The Redis keys of the outage's state and of its parked keys, under
    /// one hash tag (one Redis Cluster slot).
    ///
    /// ```
    /// use keyed_backoff_redis::OutageSettings;
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let gate = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .prefix("payments")
    ///     .open("redis://127.0.0.1:6379/")
    ///     .await?
    ///     .outage_aware(OutageSettings::new())?;
    /// assert_eq!(gate.redis_keys(), ["{payments:outage}:state", "{payments:outage}:parked"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_keys(&self) -> [&str; 2] {
        let [state, parked] = self.shared.keys();
        [state, parked]
    }

    /// Whether an outage or its release is under way, as last read (read
    /// again when older than [`REFRESH`]).
    async fn active(&self) -> Result<bool, StoreError> {
        let (active, recent) = {
            let seen = self.shared.seen.lock();
            let now = self.shared.local_now();
            let recent = seen
                .checked
                .is_some_and(|c| now.saturating_sub(c) < REFRESH);
            (seen.view.active, recent)
        };
        if active || recent {
            return Ok(active);
        }
        Ok(self.shared.check(&self.rules).await?.active)
    }

    /// The fleet's ruling on `key`, whose own level is `level`.
    async fn rule(
        &self,
        key: &str,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> Result<FleetRuling, StoreError> {
        let hash = self.rules.hash(key);
        let step = self.shared.step(&self.rules, hash, ask, level).await?;
        Ok(step.ruling)
    }

    /// A fresh failure of `key`, counted: this replica's detector may
    /// declare an outage, which is published; otherwise the fleet's phase
    /// is read again.
    async fn fresh(&self, key: &str) -> Result<(), StoreError> {
        let hash = self.rules.hash(key);
        let failures = self.failures.load(Ordering::Relaxed).saturating_sub(1);
        let successes = self.successes.load(Ordering::Relaxed);
        let at = self.shared.local_now();
        let declared = self.detector.lock().fresh(hash, at, failures, successes);
        match declared {
            Some(declared) => {
                let ask = FleetAsk::Begin(declared);
                self.shared.step(&self.rules, hash, ask, None).await?;
            }
            None => _ = self.shared.check(&self.rules).await?,
        }
        Ok(())
    }

    /// `wait` and `claim`: the key's own wait first, then the fleet's. The
    /// key's wait and level are read in one round trip (the level is used
    /// only during an outage).
    async fn ask(&self, key: &str, ask: FleetAsk) -> Result<Option<Duration>, StoreError> {
        let (level, own) = self.store.standing(key).await?;
        if own.is_some() || !self.active().await? {
            return Ok(own);
        }
        Ok(match self.rule(key, ask, level).await? {
            FleetRuling::Parked { wait, .. } => Some(wait),
            FleetRuling::Free | FleetRuling::Released { .. } => None,
        })
    }
}

/// The contract, as [`OutageAware`](keyed_backoff_outage::OutageAware) keeps it:
/// a key's own wait (its backoff or its floor) always comes first; during
/// an outage a key is parked on the fleet's ladder; after it, it is let
/// go at the fleet's rate, back at its own level ([`Gate::resume`]).
impl<C> Gate<String> for FleetOutageAware<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    type Error = StoreError;

    async fn wait(&self, key: &String) -> Result<Option<Duration>, StoreError> {
        self.ask(key, FleetAsk::Peek).await
    }

    /// The store's claim is its wait: one call answers both.
    async fn claim(&self, key: &String) -> Result<Option<Duration>, StoreError> {
        self.ask(key, FleetAsk::Claim).await
    }

    async fn fail(&self, key: &String) -> Result<Result<Advanced, InBackoff>, StoreError> {
        if self.active().await? {
            // The key's own wait is the store's to say: read with its level,
            // before the fleet's step (which does not touch the key's entry).
            let (level, own) = self.store.standing(key).await?;
            match self.rule(key, FleetAsk::Failure, level).await? {
                FleetRuling::Parked { wait, counted } => {
                    return Ok(parked_failure(own, wait, counted, level));
                }
                FleetRuling::Released { level: Some(level) } => {
                    self.store.resume(key, level).await?
                }
                FleetRuling::Released { level: None } | FleetRuling::Free => {}
            }
        }
        let outcome = self.store.fail(key).await?;
        if let Ok(level) = outcome {
            self.failures.fetch_add(1, Ordering::Relaxed);
            if level.attempts == 1 {
                self.fresh(key).await?;
            }
        }
        Ok(outcome)
    }

    async fn succeed(&self, key: &String) -> Result<(), StoreError> {
        self.store.succeed(key).await?;
        self.successes.fetch_add(1, Ordering::Relaxed);
        let active = self.shared.seen.lock().view.active;
        if active {
            let hash = self.rules.hash(key);
            self.shared
                .step(&self.rules, hash, FleetAsk::Success, None)
                .await?;
        }
        Ok(())
    }

    async fn hold(&self, key: &String, wait: Duration) -> Result<(), StoreError> {
        self.store.hold(key, wait).await
    }

    async fn level(&self, key: &String) -> Result<Option<Advanced>, StoreError> {
        self.store.level(key).await
    }

    async fn resume(&self, key: &String, level: Advanced) -> Result<(), StoreError> {
        self.store.resume(key, level).await
    }
}

/// The fleet's figures, as this replica last saw them.
impl<C> OutageStatus for FleetOutageAware<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    fn in_outage(&self) -> bool {
        FleetOutageAware::in_outage(self)
    }

    fn parked(&self) -> usize {
        usize::try_from(FleetOutageAware::parked(self)).unwrap_or(usize::MAX)
    }

    fn outages(&self) -> u64 {
        FleetOutageAware::outages(self)
    }
}

impl<C> fmt::Debug for FleetOutageAware<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let view = self.shared.seen.lock().view;
        f.debug_struct("FleetOutageAware")
            .field("store", &self.store)
            .field("in_outage", &view.in_outage)
            .field("parked", &view.parked)
            .finish_non_exhaustive()
    }
}

/// FNV-1a of `bytes`: the default seed of a prefix, the same on every
/// platform and in every version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
