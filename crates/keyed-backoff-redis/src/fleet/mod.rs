//! [`RedisOutageStore`]: the outage a fleet shares, kept in Redis, for
//! keyed-backoff-outage's one wrapper ([`RedisOutageAware`]).

use std::fmt;
use std::sync::LazyLock;

use keyed_backoff::ConfigError;
use keyed_backoff::clock::{Clock, MockInstant};
use keyed_backoff_outage::{Loaded, OutageAware, OutageSettings, OutageStore, Shared, Stored};
use redis::Script;
use redis::aio::ConnectionLike;
use std::time::Duration;

use crate::error::StoreError;
use crate::protocol::TimeSource;
use crate::store::RedisBackoff;
use crate::transport::Transport;

/// The script that loads and stores the state.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../outage.lua")));

/// How long the state and the parked keys live in Redis unwritten: a day.
const KEPT_MS: u64 = 86_400_000;

/// keyed-backoff-outage's [`OutageAware`] over a [`RedisBackoff`], with
/// one outage for the whole fleet: the replicas on one prefix share its
/// state through a [`RedisOutageStore`] (see
/// [`Shared`](keyed_backoff_outage::Shared) for the rules of sharing). Made
/// by [`RedisBackoff::outage_aware`].
pub type RedisOutageAware<C> =
    OutageAware<RedisBackoff<C>, Shared<RedisOutageStore<C>, StoreClock>>;

/// The clock a [`RedisBackoff`] runs on, as a [`Clock`]: its builder's
/// [`clock`](crate::RedisBackoffBuilder::clock), or real time. A
/// [`RedisOutageAware`] times its replica's own line on it (how often it
/// reads the fleet's phase, how long it goes on alone), so that a test
/// that drives the store's clock drives both.
#[derive(Clone)]
pub struct StoreClock {
    time: TimeSource,
    epoch: std::time::Instant,
}

impl Clock for StoreClock {
    type Instant = MockInstant;

    fn now(&self) -> MockInstant {
        MockInstant::from_nanos(match &self.time {
            TimeSource::Caller(now) => now(),
            TimeSource::Redis => i64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(i64::MAX),
        })
    }
}

impl fmt::Debug for StoreClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.time {
            TimeSource::Caller(_) => "the builder's clock",
            TimeSource::Redis => "real time",
        };
        f.debug_tuple("StoreClock").field(&kind).finish()
    }
}

/// Where a fleet keeps the outage it shares, in Redis: the state
/// ([`SharedOutage`](keyed_backoff_outage::SharedOutage), as JSON behind a version) at `{prefix:outage}:state`
/// and the parked keys (each a [`ParkedKey`](keyed_backoff_outage::ParkedKey) as JSON) in the hash
/// `{prefix:outage}:parked`, under one hash tag (one Redis Cluster slot).
/// A load is one script call (the state, the parked keys asked about and
/// Redis `TIME`); a store is one more, a compare-and-set on the version.
/// Both live a day unwritten.
///
/// A value at the state's key that is not ours (another program's, junk,
/// a list) is a [`StoreError::Corrupt`] naming that key, which the wrapper
/// reports once and leaves as it is, going on alone. A parked key's value
/// that cannot be read counts as absent: that key is not parked, and its
/// own backoff decides.
///
/// The time line is Redis `TIME`, or the store's
/// [`clock`](crate::RedisBackoffBuilder::clock). The seed that places the
/// keys' slots defaults to one derived from the prefix: replicas on one
/// prefix agree without configuration.
pub struct RedisOutageStore<C> {
    transport: Transport<C>,
    time: TimeSource,
    /// The hash tag every key of the outage is under.
    tag: String,
    keys: [String; 2],
    seed: u64,
}

impl<C> RedisBackoff<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// This store with outage awareness shared by every replica on its
    /// prefix (see [`RedisOutageAware`]). Fails with the first of
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
    ) -> Result<RedisOutageAware<C>, ConfigError> {
        let store = self.outage_store();
        let clock = StoreClock {
            time: self.time.clone(),
            epoch: std::time::Instant::now(),
        };
        OutageAware::shared_with_clock(self, settings, store, clock)
    }

    /// Where this store's replicas keep the outage they share (what
    /// [`outage_aware`](Self::outage_aware) uses), for a wrapper built by
    /// hand.
    pub fn outage_store(&self) -> RedisOutageStore<C> {
        let tag = format!("{{{}:outage}}", self.prefix);
        RedisOutageStore {
            transport: self.transport.clone(),
            time: self.time.clone(),
            keys: keys(&tag),
            tag,
            seed: fnv1a(self.prefix.as_bytes()),
        }
    }
}

impl<C> RedisOutageStore<C> {
    /// The Redis keys of the outage's state and of its parked keys, under
    /// one hash tag (one Redis Cluster slot).
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .prefix("payments")
    ///     .open("redis://127.0.0.1:6379/")
    ///     .await?;
    /// let outage = store.outage_store();
    /// assert_eq!(outage.redis_keys(), ["{payments:outage}:state", "{payments:outage}:parked"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_keys(&self) -> [&str; 2] {
        [&self.keys[0], &self.keys[1]]
    }

    fn corrupt(&self, detail: String) -> StoreError {
        StoreError::Corrupt {
            key: self.keys[0].clone(),
            detail,
            source: None,
        }
    }
}

impl<C> OutageStore for RedisOutageStore<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    type Error = StoreError;

    async fn load(&self, parked: &[u64]) -> Result<Loaded, StoreError> {
        let fields: Vec<String> = parked.iter().map(|h| field(*h)).collect();
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation.key(&self.keys[1]).arg("load").arg(&fields);
        type Reply = (i64, Option<String>, Vec<Option<String>>, u64, u64);
        let (version, state, entries, secs, micros): Reply =
            self.transport.invoke(&self.keys[0], &invocation).await?;
        let Ok(version) = u64::try_from(version) else {
            let found = state.unwrap_or_default();
            return Err(self.corrupt(format!("the outage state is not ours: {found:?}")));
        };
        let state = match state {
            None => None,
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                self.corrupt(format!(
                    "an outage state this version cannot read ({e}): {text:?}"
                ))
            })?),
        };
        let parked = entries
            .iter()
            .map(|e| e.as_deref().and_then(|t| serde_json::from_str(t).ok()))
            .collect();
        let now = match &self.time {
            TimeSource::Caller(now) => Duration::from_nanos(u64::try_from(now()).unwrap_or(0)),
            TimeSource::Redis => {
                Duration::from_secs(secs).saturating_add(Duration::from_micros(micros))
            }
        };
        Ok(Loaded {
            version,
            state,
            parked,
            now,
        })
    }

    async fn store(&self, write: Stored<'_>) -> Result<bool, StoreError> {
        // The shared state's types cannot fail to serialize.
        let state = serde_json::to_string(write.state).unwrap_or_default();
        let mut invocation = SCRIPT.key(&self.keys[0]);
        invocation
            .key(&self.keys[1])
            .arg("store")
            .arg(write.version)
            .arg(state)
            .arg(if write.cleared { "1" } else { "0" })
            .arg(KEPT_MS);
        for (hash, entry) in write.parked {
            let text = match entry {
                Some(entry) => serde_json::to_string(entry).unwrap_or_default(),
                None => "-".to_string(),
            };
            invocation.arg(field(*hash)).arg(text);
        }
        let written: u8 = self.transport.invoke(&self.keys[0], &invocation).await?;
        Ok(written == 1)
    }

    fn timeout(&self) -> Duration {
        self.transport.timeout()
    }

    fn is_foreign(&self, error: &StoreError) -> bool {
        matches!(error, StoreError::Corrupt { .. })
    }

    /// The outage of the domain `name`: its state at
    /// `{prefix:outage}:domain:{name}:state` and its parked keys at
    /// `{prefix:outage}:domain:{name}:parked`, under the same hash tag as
    /// the outage of everything (one Redis Cluster slot).
    fn domain(&self, name: &str) -> Option<Self> {
        Some(RedisOutageStore {
            transport: self.transport.clone(),
            time: self.time.clone(),
            keys: keys(&format!("{}:domain:{name}", self.tag)),
            tag: self.tag.clone(),
            seed: self.seed,
        })
    }

    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

impl<C> fmt::Debug for RedisOutageStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOutageStore")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// The Redis keys of an outage's state and of its parked keys, under
/// `base`.
fn keys(base: &str) -> [String; 2] {
    [format!("{base}:state"), format!("{base}:parked")]
}

/// The field of the key with `hash` in the parked keys' hash.
fn field(hash: u64) -> String {
    format!("{hash:016x}")
}

/// FNV-1a of `bytes`: the default seed of a prefix, the same on every
/// platform and in every version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
