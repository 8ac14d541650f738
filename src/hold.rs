//! Per-key floors: a key may not run before an instant (a server's
//! `Retry-After`), whatever its backoff says. Kept apart from the entries,
//! so a floor never changes how a backoff grows, and a manager that sets
//! none pays one atomic load per check.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry as MapEntry;

use crate::entry::Tick;

/// Shards of the floors' map: floors are few (keys a server asked to wait).
const SHARDS: usize = 64;

pub(crate) struct Holds<K, S> {
    map: DashMap<K, Tick, S>,
    /// How many floors are held, so that a manager with none skips the map.
    live: AtomicUsize,
}

impl<K, S> Holds<K, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    pub(crate) fn new(hasher: S, shards: usize) -> Self {
        Holds {
            map: DashMap::with_hasher_and_shard_amount(hasher, shards.min(SHARDS)),
            live: AtomicUsize::new(0),
        }
    }

    /// Holds `key` until `until`, or later if it is already held longer.
    pub(crate) fn extend<Q>(&self, key: &Q, until: Tick)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        if let Some(mut held) = self.map.get_mut(key) {
            *held = (*held).max(until);
            return;
        }
        match self.map.entry(key.to_owned().into()) {
            MapEntry::Occupied(mut held) => {
                let later = (*held.get()).max(until);
                *held.get_mut() = later;
            }
            MapEntry::Vacant(slot) => {
                slot.insert(until);
                self.live.fetch_add(1, Ordering::Release);
            }
        }
    }

    /// The instant `key` is held until, if any.
    #[inline]
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<Tick>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.map.view(key, |_, until| *until)
    }

    /// Releases `key`.
    pub(crate) fn clear<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.live.load(Ordering::Acquire) != 0 && self.map.remove(key).is_some() {
            self.live.fetch_sub(1, Ordering::Release);
        }
    }

    /// Forgets every floor that has passed at `now`; how many.
    pub(crate) fn sweep(&self, now: Tick) -> usize {
        if self.live.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut removed = 0usize;
        self.map.retain(|_, until| {
            let keep = *until > now;
            removed += usize::from(!keep);
            keep
        });
        self.live.fetch_sub(removed, Ordering::Release);
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds() -> Holds<String, std::collections::hash_map::RandomState> {
        Holds::new(Default::default(), 8)
    }

    #[test]
    fn a_floor_only_moves_later() {
        let h = holds();
        assert_eq!(h.get("k"), None);
        h.extend("k", Tick(10));
        h.extend("k", Tick(5));
        assert_eq!(h.get("k"), Some(Tick(10)));
        h.extend("k", Tick(20));
        assert_eq!(h.get("k"), Some(Tick(20)));
    }

    #[test]
    fn cleared_and_passed_floors_are_forgotten() {
        let h = holds();
        h.extend("a", Tick(10));
        h.extend("b", Tick(30));
        h.clear("a");
        assert_eq!((h.get("a"), h.live.load(Ordering::Acquire)), (None, 1));
        assert_eq!(h.sweep(Tick(29)), 0);
        assert_eq!(h.sweep(Tick(30)), 1);
        assert_eq!((h.get("b"), h.live.load(Ordering::Acquire)), (None, 0));
        h.clear("b"); // nothing held: no count below zero
        assert_eq!(h.live.load(Ordering::Acquire), 0);
    }
}
