//! The in-process store: a sharded concurrent map (dashmap) from keys to
//! entries, the write path (read-modify-write of one key under its shard's
//! lock) and garbage collection sweeps. It decides nothing: the rules do,
//! through the closures it is given.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry as MapEntry;

use crate::clock::ClockInstant;
use crate::entry::{Entry, Tick};
use crate::expiry::Expiry;
use crate::rules::Staleness;

/// Above this many entries per shard, a sweep judges under read locks and
/// removes key by key; at or below it, it removes in place under each
/// shard's write lock (a shard this size is scanned in tens of
/// microseconds: with the default 1024 shards, maps of up to about a
/// million entries are swept in place, about as fast as a plain
/// `HashMap::retain`).
const IN_PLACE_PER_SHARD: usize = 1024;

pub(crate) struct Store<K, S> {
    map: DashMap<K, Entry, S>,
    shards: usize,
    gc_runs: AtomicU64,
    gc_removed: AtomicU64,
    gc_panics: AtomicU64,
}

impl<K, S> Store<K, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    pub(crate) fn new(map: DashMap<K, Entry, S>, shards: usize) -> Self {
        Store {
            map,
            shards,
            gc_runs: AtomicU64::new(0),
            gc_removed: AtomicU64::new(0),
            gc_panics: AtomicU64::new(0),
        }
    }

    /// A copy of `key`'s entry, read under its shard's read lock.
    #[inline]
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<Entry>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.view(key, |_, entry| *entry)
    }

    /// The stored key and a copy of its entry.
    pub(crate) fn get_key_value<Q>(&self, key: &Q) -> Option<(K, Entry)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key).map(|r| (r.key().clone(), *r.value()))
    }

    /// One write of `key` (`decide` gets the key's entry, the clock's now
    /// read under the key's lock, and the expiry rule).
    #[inline]
    pub(crate) fn write<Q, E, I, D>(
        &self,
        key: &Q,
        expiry: &Expiry<I>,
        now: impl Fn() -> Tick,
        decide: D,
    ) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
        I: ClockInstant,
        D: FnOnce(Option<Entry>, Tick, &dyn Staleness) -> Result<Entry, E>,
    {
        // Matched here rather than through `Expiry::judged`: with `decide`
        // nested one closure deeper, the compiler stops inlining the update.
        match expiry {
            Expiry::After(window) => self.update(key, now, |old, now| decide(old, now, window)),
            Expiry::Custom { .. } => self.write_custom(key, expiry, now, decide),
        }
    }

    /// [`write`](Self::write) with a user expiry function, kept out of line
    /// so the fixed-window path stays small.
    #[inline(never)]
    fn write_custom<Q, E, I, D>(
        &self,
        key: &Q,
        expiry: &Expiry<I>,
        now: impl Fn() -> Tick,
        decide: D,
    ) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
        I: ClockInstant,
        D: FnOnce(Option<Entry>, Tick, &dyn Staleness) -> Result<Entry, E>,
    {
        expiry.enter();
        self.update(key, now, |old, now| decide(old, now, expiry))
    }

    /// Read-modify-write of one key under its shard's write lock: `decide`
    /// gets the current entry (if any) and `now()`, read under the lock so a
    /// key's last-update time never moves backwards between racing callers.
    /// `Ok` stores the new entry; `Err` leaves the map untouched.
    #[inline]
    pub(crate) fn update<Q, E>(
        &self,
        key: &Q,
        now: impl Fn() -> Tick,
        decide: impl FnOnce(Option<Entry>, Tick) -> Result<Entry, E>,
    ) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        // The common case, a key that has an entry, is one lookup and one
        // call of `decide`, inlined here; a new key goes the cold way.
        match self.map.get_mut(key) {
            Some(mut slot) => {
                let updated = decide(Some(*slot), now())?;
                *slot = updated;
                Ok(updated)
            }
            None => self.insert_or_update(key, now, decide),
        }
    }

    /// [`update`](Self::update) for a key that had no entry at the lookup.
    /// Another thread may insert between that lookup and this call; the
    /// entry API then sees it occupied, so no update is lost.
    #[cold]
    #[inline(never)]
    fn insert_or_update<Q, E>(
        &self,
        key: &Q,
        now: impl Fn() -> Tick,
        decide: impl FnOnce(Option<Entry>, Tick) -> Result<Entry, E>,
    ) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        match self.map.entry(key.to_owned().into()) {
            MapEntry::Occupied(mut slot) => {
                let updated = decide(Some(*slot.get()), now())?;
                *slot.get_mut() = updated;
                Ok(updated)
            }
            MapEntry::Vacant(slot) => {
                let updated = decide(None, now())?;
                slot.insert(updated);
                Ok(updated)
            }
        }
    }

    /// Removes `key`'s entry; whether there was one.
    pub(crate) fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.remove(key).is_some()
    }

    /// Stores `entry` for `key`, replacing any; whether one was replaced.
    pub(crate) fn insert(&self, key: K, entry: Entry) -> bool {
        self.map.insert(key, entry).is_some()
    }

    /// Removes every entry `stale` judges stale and counts one GC run.
    ///
    /// Each shard is locked on its own, so a reader or writer waits at most
    /// for one shard's share of the sweep. Small shards are swept in place
    /// under their write lock: one pass, no copies. Large ones (more than
    /// [`IN_PLACE_PER_SHARD`] entries on average) would hold that lock too
    /// long, so their stale keys are found under read locks and each is then
    /// removed under a short write lock, only if its entry is still the one
    /// that was judged (a concurrent `next` that refreshed it wins). Either
    /// way an entry is judged and removed under one lock.
    pub(crate) fn sweep(&self, stale: impl Fn(Entry) -> bool) -> usize {
        let removed = if self.map.len() <= self.shards.saturating_mul(IN_PLACE_PER_SHARD) {
            let mut removed = 0usize;
            self.map.retain(|_, entry| {
                let keep = !stale(*entry);
                removed += usize::from(!keep);
                keep
            });
            removed
        } else {
            let candidates: Vec<(K, Entry)> = self
                .map
                .iter()
                .filter(|r| stale(*r.value()))
                .map(|r| (r.key().clone(), *r.value()))
                .collect();
            candidates
                .iter()
                .filter(|(key, seen)| self.map.remove_if(key, |_, e| e == seen).is_some())
                .count()
        };
        self.gc_runs.fetch_add(1, Ordering::Relaxed);
        self.gc_removed.fetch_add(removed as u64, Ordering::Relaxed);
        removed
    }

    /// Calls `f` with every key and entry, shard by shard under read locks.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&K, Entry)) {
        for r in self.map.iter() {
            f(r.key(), *r.value());
        }
    }

    /// `(gc runs, entries removed by gc, background sweeps ended by a panic)`.
    pub(crate) fn gc_totals(&self) -> (u64, u64, u64) {
        (
            self.gc_runs.load(Ordering::Relaxed),
            self.gc_removed.load(Ordering::Relaxed),
            self.gc_panics.load(Ordering::Relaxed),
        )
    }

    /// Counts a background or amortised sweep that a panic ended.
    pub(crate) fn count_gc_panic(&self) {
        self.gc_panics.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(crate) fn shrink_to_fit(&self) {
        self.map.shrink_to_fit();
    }
}
