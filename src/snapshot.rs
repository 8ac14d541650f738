//! Snapshot and restore: a manager's entries with wall-clock times, so
//! backoff state survives a process restart.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::time::{Duration, SystemTime};

use crate::clock::ClockInstant;
use crate::duration::saturating_nanos;
use crate::entry::Tick;
use crate::rules::{self, Staleness};
use crate::store::Store;

/// A portable copy of a manager's entries, with last-update times as wall
/// time so they survive a process restart; from [`Backoff::snapshot`](crate::Backoff::snapshot).
/// Serialisable with the `serde` feature.
///
/// ```
/// use keyed_backoff::{Backoff, Snapshot};
/// use std::time::{Duration, Instant};
/// let b = Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?;
/// b.next("pod-a", Instant::now());
/// let snap: Snapshot<String> = b.snapshot();
/// let restored = Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?;
/// assert_eq!(restored.restore(&snap), 1);
/// assert_eq!(restored.get("pod-a"), Duration::from_secs(10));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot<K> {
    /// The entries.
    pub entries: Vec<SnapshotEntry<K>>,
}

/// One entry of a [`Snapshot`].
///
/// ```
/// use keyed_backoff::SnapshotEntry;
/// use std::time::{Duration, SystemTime};
/// let e = SnapshotEntry { key: "k", backoff: Duration::from_secs(20), attempts: 2, last_update: SystemTime::now() };
/// assert_eq!(e.attempts, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SnapshotEntry<K> {
    /// The key.
    pub key: K,
    /// Its backoff.
    pub backoff: Duration,
    /// `next` calls since the entry started.
    pub attempts: u32,
    /// Its last update, as wall-clock time.
    pub last_update: SystemTime,
}

/// Every entry of `store`, with last updates as wall time, `wall_now`
/// being the wall time of `now`.
pub(crate) fn take<K, S>(store: &Store<K, S>, now: Tick, wall_now: SystemTime) -> Snapshot<K>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    let mut entries = Vec::with_capacity(store.len());
    store.for_each(|key, e| {
        let age = now.since(e.last_update());
        let last_update = if age >= 0 {
            wall_now.saturating_sub(Duration::from_nanos(u64::try_from(age).unwrap_or(u64::MAX)))
        } else {
            wall_now.saturating_add(Duration::from_nanos(
                u64::try_from(-age).unwrap_or(u64::MAX),
            ))
        };
        entries.push(SnapshotEntry {
            key: key.clone(),
            backoff: e.backoff(),
            attempts: e.attempts(),
            last_update,
        });
    });
    Snapshot { entries }
}

/// Puts `snapshot`'s entries into `store`, `wall_now` being the wall time
/// of `now`: entries stale by then are dropped, backoffs above `max_ns`
/// cut to it, and the last occurrence of a key decides. How many keys were
/// restored.
pub(crate) fn restore<K, S>(
    store: &Store<K, S>,
    snapshot: &Snapshot<K>,
    stale: &dyn Staleness,
    now: Tick,
    wall_now: SystemTime,
    max_ns: u64,
) -> usize
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    // The last occurrence of a key decides, as if the entries were applied
    // in order.
    let mut last: HashMap<&K, usize> = HashMap::with_capacity(snapshot.entries.len());
    for (i, s) in snapshot.entries.iter().enumerate() {
        last.insert(&s.key, i);
    }
    let mut restored = 0;
    for (i, s) in snapshot.entries.iter().enumerate() {
        if last.get(&s.key) != Some(&i) {
            continue;
        }
        let age_ns: i128 = match wall_now.duration_since(s.last_update) {
            Ok(age) => i128::from(saturating_nanos(age)),
            Err(ahead) => -i128::from(saturating_nanos(ahead.duration())),
        };
        if let Some(entry) = rules::restored(
            stale,
            now,
            age_ns,
            saturating_nanos(s.backoff),
            max_ns,
            s.attempts,
        ) {
            store.insert(s.key.clone(), entry);
            restored += 1;
        }
    }
    restored
}
