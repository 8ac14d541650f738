//! [`OutageStore`]: where a fleet keeps the outage it shares, and the
//! values it keeps there ([`SharedOutage`], [`ParkedKey`]).

use std::collections::HashMap;
use std::future::Future;
use std::hash::BuildHasher;
use std::time::Duration;

use keyed_backoff::Level;

/// Where replicas keep the outage they share: one value, the
/// [`SharedOutage`], and one [`ParkedKey`] per parked key, each read and
/// written whole. Implement it to share an outage through any store; the
/// Redis crate implements it over Redis. The rules are not the store's:
/// [`OutageAware`](crate::OutageAware) decides on what [`load`](Self::load)
/// returns and asks [`store`](Self::store) to write what changed.
///
/// What a store must do:
///
/// - **Compare and set.** [`store`](Self::store) writes only when the
///   state's version is still the one loaded, and writes the state and the
///   parked keys together (all or nothing); every write moves the version.
///   A conflict is `Ok(false)`: the wrapper loads again and decides again.
/// - **One time line.** [`Loaded::now`] is the fleet's time, the same
///   line for every replica (a server's clock, not each replica's own).
/// - **Errors are not fatal.** Whatever the store answers with an error,
///   the replica goes on alone, on the last state it saw, for a second,
///   then asks again; keys keep their own backoff throughout. A value
///   that cannot be read as ours (another program's, another version's)
///   should be an error for which [`is_foreign`](Self::is_foreign) is
///   true: it is reported once, as an error, and left as it is.
///
/// ```
/// use keyed_backoff_outage::{Loaded, OutageStore, ParkedKey, SharedOutage, Stored};
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use std::time::{Duration, Instant};
///
/// /// One process's store: a test, or replicas that are tasks.
/// struct Memory {
///     epoch: Instant,
///     kept: Mutex<(u64, Option<SharedOutage>, HashMap<u64, ParkedKey>)>,
/// }
///
/// impl OutageStore for Memory {
///     type Error = std::io::Error;
///
///     async fn load(&self, parked: &[u64]) -> Result<Loaded, Self::Error> {
///         let kept = self.kept.lock().unwrap();
///         Ok(Loaded {
///             version: kept.0,
///             state: kept.1.clone(),
///             parked: parked.iter().map(|hash| kept.2.get(hash).cloned()).collect(),
///             now: self.epoch.elapsed(),
///         })
///     }
///
///     async fn store(&self, write: Stored<'_>) -> Result<bool, Self::Error> {
///         let mut kept = self.kept.lock().unwrap();
///         if kept.0 != write.version {
///             return Ok(false);
///         }
///         write.apply(&mut kept.2);
///         kept.0 += 1;
///         kept.1 = Some(write.state.clone());
///         Ok(true)
///     }
///
///     fn timeout(&self) -> Duration {
///         Duration::from_secs(1)
///     }
/// }
/// ```
pub trait OutageStore: Send + Sync {
    /// What a load or a store fails with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The state, its version, and the parked keys whose hashes are
    /// `parked` (each `None` when absent), in the order asked.
    fn load(&self, parked: &[u64]) -> impl Future<Output = Result<Loaded, Self::Error>> + Send;

    /// Writes `write` if the state's version is still
    /// [`write.version`](Stored::version): `Ok(true)` when written,
    /// `Ok(false)` when another replica wrote first.
    fn store(&self, write: Stored<'_>) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// How long a call may go on loading and storing again after
    /// conflicts before it decides alone.
    fn timeout(&self) -> Duration;

    /// Whether `error` says the value kept is not ours (reported once, as
    /// an error, and never overwritten), rather than that the store could
    /// not answer. False unless the store says so.
    fn is_foreign(&self, error: &Self::Error) -> bool {
        let _ = error;
        false
    }

    /// Where the outage of the domain `name` (a dependency failures name)
    /// is kept, beside this one: a store of the same kind on keys of its
    /// own, the same for every replica. `None` (the default): this store
    /// keeps no domains, and a domain's failures count in the outage of
    /// everything alone.
    fn domain(&self, name: &str) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = name;
        None
    }

    /// The seed that places keys' slots when the settings give none; every
    /// replica must use the same (the Redis store derives one from its
    /// prefix). `None`: the settings must give one.
    fn seed(&self) -> Option<u64> {
        None
    }
}

/// What a [`OutageStore::load`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The state's version: 0 when there is none, moved by every write.
    pub version: u64,
    /// The state, if any.
    pub state: Option<SharedOutage>,
    /// The parked keys asked about, in the order asked.
    pub parked: Vec<Option<ParkedKey>>,
    /// The fleet's time now.
    pub now: Duration,
}

/// What a replica asks an [`OutageStore`] to write, all or nothing.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    /// The version loaded: written only if it is still the state's.
    pub version: u64,
    /// The new state.
    pub state: &'a SharedOutage,
    /// Parked keys written (`Some`) or removed (`None`), by hash.
    pub parked: &'a [(u64, Option<ParkedKey>)],
    /// Every parked key stored before is stale: remove them all before
    /// writing [`parked`](Self::parked).
    pub cleared: bool,
}

impl Stored<'_> {
    /// Applies the parked keys' changes to `parked`, a map a store keeps
    /// in memory: every key removed first when
    /// [`cleared`](Self::cleared), then each written or removed.
    pub fn apply<S: BuildHasher>(&self, parked: &mut HashMap<u64, ParkedKey, S>) {
        apply(self.cleared, self.parked, parked);
    }
}

/// `changes` to the parked keys applied to `parked`, after clearing it
/// when `cleared`.
pub(crate) fn apply<S: BuildHasher>(
    cleared: bool,
    changes: &[(u64, Option<ParkedKey>)],
    parked: &mut HashMap<u64, ParkedKey, S>,
) {
    if cleared {
        parked.clear();
    }
    for (hash, entry) in changes {
        match entry {
            Some(entry) => _ = parked.insert(*hash, entry.clone()),
            None => _ = parked.remove(hash),
        }
    }
}

/// The outage a fleet shares, as a value a store keeps: the phase (normal,
/// an outage with its ladder, or the release after it), the recent
/// attempts and the counters. Versioned by [`format`](Self::format): a
/// replica reads only the format it writes. With the `serde` feature it is
/// `Serialize` and `Deserialize` (times as nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SharedOutage {
    /// The format of this value: [`SharedOutage::FORMAT`] for this version.
    pub format: u32,
    /// Bumped when an outage begins or its release ends: a parked key of
    /// another generation counts as absent.
    pub generation: u64,
    /// Outages declared so far.
    pub outages: u64,
    /// Keys let go in the release under way.
    pub released: u64,
    /// Keys parked now.
    pub parked: u64,
    /// During an outage, the successes in a row seen so far (enough of
    /// them end it).
    pub successes_in_a_row: Option<u32>,
    /// Normal, an outage, or its release.
    pub phase: SharedPhase,
    /// When the latest attempts reached the dependency during the outage
    /// (the last second's), on the fleet's time line.
    #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_list"))]
    pub reached: Vec<Duration>,
}

impl SharedOutage {
    /// The format this version reads and writes.
    pub const FORMAT: u32 = 2;
}

/// The phase of a [`SharedOutage`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum SharedPhase {
    /// No outage.
    Normal,
    /// An outage under way.
    Outage {
        /// When it began, on the fleet's time line.
        #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_one"))]
        began: Duration,
        /// The ladder's step of the latest probe claimed.
        probe_step: u64,
        /// The probes claimed in that step.
        probes_claimed: u32,
    },
    /// The release after an outage.
    Release {
        /// The next free time to let a key go.
        #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_one"))]
        next: Duration,
        /// The time between two keys let go.
        #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_one"))]
        gap: Duration,
        /// The most keys let go in a second.
        per_second: u64,
        /// When the release is over.
        #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_one"))]
        until: Duration,
        /// The latest keys let go (or attempts counted against the first
        /// second), at most `per_second` of them.
        #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_list"))]
        latest: Vec<Duration>,
    },
}

/// One parked key as a store keeps it, by the hash of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ParkedKey {
    /// The [`SharedOutage::generation`] it was parked in.
    pub generation: u64,
    /// Its own level when the outage first parked it, given back when it
    /// is let go.
    pub level: Option<Level>,
    /// The step of the ladder in which its failure was counted.
    pub counted_in: Option<u64>,
    /// The step in which it claimed a turn to probe.
    pub probe_in: Option<u64>,
    /// When it is let go after the outage, once it has asked.
    #[cfg_attr(feature = "serde", serde(with = "crate::nanos::serde_option"))]
    pub release_at: Option<Duration>,
}
