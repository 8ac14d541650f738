//! The keyed backoff manager: client-go's `flowcontrol.Backoff` on a
//! concurrent map.
//!
//! See [`Backoff`] for the operations and `docs/semantics.md` for every
//! behaviour side by side with client-go.

mod background;
mod builder;
mod entry;
mod expiry;
mod gate;
mod observe;
mod rule;

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry as MapEntry;

use background::Amortized;
pub use background::GcGuard;
#[cfg(feature = "tokio")]
pub use background::GcTaskGuard;
pub use builder::{BackoffBuilder, ClockFixed, ClockOpen, DEFAULT_SHARDS};
pub use entry::{MAX_ATTEMPTS, MAX_BACKOFF};
pub use gate::InBackoff;
pub use observe::{EntryView, Snapshot, SnapshotEntry, Stats};

use crate::clock::{Clock, ClockInstant, DefaultClock};
use entry::Entry;
use expiry::{Expiry, ExpiryCheck};
use rule::Rule;

/// The hasher used when none is chosen: foldhash's fast hasher, seeded
/// randomly per manager so keys from untrusted input cannot be crafted to
/// collide.
///
/// ```
/// use keyed_backoff::DefaultHashBuilder;
/// use std::hash::BuildHasher;
/// let a = DefaultHashBuilder::default();
/// let _ = a.hash_one("pod-1");
/// ```
pub type DefaultHashBuilder = foldhash::fast::RandomState;

/// A per-key exponential backoff with exactly the semantics of Kubernetes
/// client-go's `util/flowcontrol` `Backoff`.
///
/// Each key (a container, `podUID_image`, a URL host…) has an entry holding
/// its current backoff and the clock time of its last [`next`](Self::next).
/// `next` starts an entry at `initial` and doubles it up to `max`; an entry
/// untouched for longer than the expiry window (by default `2·max`) counts as
/// stale: `next` starts it over, the checks report "not in backoff", and
/// [`gc`](Self::gc) removes it.
///
/// `Backoff` is `Send + Sync` and every method takes `&self`; share it in an
/// `Arc`. Methods take the key's borrowed form (`&str` for
/// `Backoff<String>`) and allocate an owned key only when inserting.
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let backoff = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(clock.clone())
///     .build()?;
///
/// assert_eq!(backoff.next("pod-a", clock.now()), Duration::from_secs(10));
/// assert_eq!(backoff.next("pod-a", clock.now()), Duration::from_secs(20));
/// assert!(backoff.is_in_backoff_since("pod-a", clock.now()));
/// clock.advance(Duration::from_secs(20));
/// assert!(!backoff.is_in_backoff_since("pod-a", clock.now() - Duration::from_secs(20)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
pub struct Backoff<K, C: Clock = DefaultClock, S = DefaultHashBuilder> {
    map: DashMap<K, Entry, S>,
    clock: C,
    epoch: C::Instant,
    initial: Duration,
    max: Duration,
    jitter: f64,
    rule: Rule,
    expiry: Expiry<C::Instant>,
    amortized: Option<Amortized>,
    counters: GcCounters,
}

/// Totals reported by [`Backoff::stats`].
#[derive(Debug, Default)]
struct GcCounters {
    gc_runs: AtomicU64,
    gc_removed: AtomicU64,
}

impl<K: Hash + Eq + Clone> Backoff<K> {
    /// A manager with client-go's rule, no jitter, the default expiry
    /// (`2·max`) and the [`DefaultClock`].
    ///
    /// Fails if `initial` or `max` exceeds [`MAX_BACKOFF`]. `initial > max`
    /// is allowed, as in client-go: the first backoff is `initial`, uncapped.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert_eq!(b.next("host-a", Instant::now()), Duration::from_secs(1));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Result<Self, crate::ConfigError> {
        Self::builder(initial, max).build()
    }

    /// A builder starting from `initial` and `max`; see [`BackoffBuilder`]
    /// for jitter, clock, expiry, seed and hasher.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .jitter(0.1)
    ///     .seed(7)
    ///     .build()?;
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn builder(initial: Duration, max: Duration) -> BackoffBuilder<K> {
        BackoffBuilder::new(initial, max)
    }
}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// client-go's `Next`: moves `key`'s backoff to its next value and
    /// returns it.
    ///
    /// If the key has no entry, or its entry has expired as of `event_time`,
    /// the entry starts over at `initial` (plus jitter). Otherwise the
    /// backoff doubles (plus jitter drawn from the previous value) and is
    /// capped at `max`. The entry's last-update time becomes the clock's now,
    /// not `event_time`.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(3))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let secs: Vec<u64> = (0..4).map(|_| b.next("k", clock.now()).as_secs()).collect();
    /// assert_eq!(secs, [1, 2, 3, 3]);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn next<Q>(&self, key: &Q, event_time: C::Instant) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let event_tick = self.tick(event_time);
        let updated: Result<Entry, std::convert::Infallible> = self.update(key, |old, now_tick| {
            Ok(self.advanced(old, event_time, event_tick, now_tick))
        });
        if let Some(amortized) = &self.amortized {
            amortized.tick(|| {
                self.gc();
            });
        }
        match updated {
            Ok(entry) => entry.backoff(),
        }
    }

    /// client-go's `Get`: the key's current backoff, or zero if it has no
    /// entry.
    ///
    /// An expired entry still reports its last value until `next`, `reset`
    /// or `gc` touches it.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(2), Duration::from_secs(60))?;
    /// assert_eq!(b.get("missing"), Duration::ZERO);
    /// b.next("k", Instant::now());
    /// assert_eq!(b.get("k"), Duration::from_secs(2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entry_of(key).map_or(Duration::ZERO, Entry::backoff)
    }

    /// client-go's `IsInBackOffSince`: whether less than the key's backoff
    /// has passed between `event_time` and the clock's now.
    ///
    /// False for a missing or expired key (expiry is judged on `event_time`
    /// against the last update). An `event_time` in the future is in
    /// backoff. This is the check the kubelet makes with a container's finish
    /// time.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let finished = clock.now();
    /// b.next("c", finished);
    /// clock.advance(Duration::from_secs(9));
    /// assert!(b.is_in_backoff_since("c", finished));
    /// clock.advance(Duration::from_secs(1));
    /// assert!(!b.is_in_backoff_since("c", finished));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn is_in_backoff_since<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(entry) = self.entry_of(key) else {
            return false;
        };
        let event_tick = self.tick(event_time);
        if self.expired(event_time, event_tick, entry) {
            return false;
        }
        let since_event = i128::from(self.tick(self.clock.now())) - i128::from(event_tick);
        since_event < i128::from(entry.backoff_ns())
    }

    /// client-go's `IsInBackOffSinceUpdate`: whether `event_time` falls
    /// less than the key's backoff after its last update.
    ///
    /// False for a missing or expired key. An `event_time` before the last
    /// update is always in backoff, even with a zero backoff.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("c", clock.now());
    /// let t = clock.now();
    /// assert!(b.is_in_backoff_since_update("c", t + Duration::from_secs(9)));
    /// assert!(!b.is_in_backoff_since_update("c", t + Duration::from_secs(10)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn is_in_backoff_since_update<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let Some(entry) = self.entry_of(key) else {
            return false;
        };
        let event_tick = self.tick(event_time);
        if self.expired(event_time, event_tick, entry) {
            return false;
        }
        let since_update = i128::from(event_tick) - i128::from(entry.last_update());
        since_update < i128::from(entry.backoff_ns())
    }

    /// client-go's `Reset` and `DeleteEntry` (the same operation there):
    /// removes the key's entry. Returns whether there was one.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next("k", Instant::now());
    /// assert!(b.reset("k"));
    /// assert!(!b.reset("k"));
    /// assert_eq!(b.get("k"), Duration::ZERO);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn reset<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.remove(key).is_some()
    }

    /// client-go's `GC`: removes every entry that has expired as of the
    /// clock's now. Returns how many were removed.
    ///
    /// Each entry is judged and removed under its shard's lock, so an entry
    /// that a concurrent `next` has just refreshed is never removed.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("k", clock.now());
    /// clock.advance(Duration::from_secs(10)); // exactly 2·max: kept
    /// assert_eq!(b.gc(), 0);
    /// clock.advance(Duration::from_nanos(1));
    /// assert_eq!(b.gc(), 1);
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn gc(&self) -> usize {
        let now = self.clock.now();
        let now_tick = self.tick(now);
        let mut removed = 0;
        self.map.retain(|_, entry| {
            let keep = !self.expired(now, now_tick, *entry);
            removed += usize::from(!keep);
            keep
        });
        self.counters.gc_runs.fetch_add(1, Ordering::Relaxed);
        self.counters
            .gc_removed
            .fetch_add(removed as u64, Ordering::Relaxed);
        removed
    }

    /// Releases table memory left over after entries were removed (for
    /// example by a large [`gc`](Self::gc)). Locks one shard at a time.
    ///
    /// `gc` never shrinks by itself, so its cost stays predictable; call
    /// this after a collection that removed a large share of the entries.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// for k in 0..1_000 { b.next(&k, Instant::now()); }
    /// for k in 0..1_000 { b.reset(&k); }
    /// b.shrink_to_fit();
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn shrink_to_fit(&self) {
        self.map.shrink_to_fit();
    }

    /// The number of entries held, expired ones included.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next(&1, Instant::now());
    /// b.next(&2, Instant::now());
    /// assert_eq!(b.len(), 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no entries are held.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The clock this manager reads.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(2))
    ///     .clock(MockClock::new())
    ///     .build()?;
    /// b.clock().advance(Duration::from_secs(1));
    /// assert_eq!(b.clock().now().as_nanos(), 1_000_000_000);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The configured initial backoff.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(2))?;
    /// assert_eq!(b.initial(), Duration::from_secs(1));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The configured maximum backoff (also the unit of the default expiry,
    /// `2·max`).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(2))?;
    /// assert_eq!(b.max(), Duration::from_secs(2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max(&self) -> Duration {
        self.max
    }

    #[inline]
    fn tick(&self, t: C::Instant) -> i64 {
        t.nanos_since(self.epoch)
    }

    #[inline]
    fn entry_of<Q>(&self, key: &Q) -> Option<Entry>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.view(key, |_, entry| *entry)
    }

    #[inline]
    fn expired(&self, event: C::Instant, event_tick: i64, entry: Entry) -> bool {
        self.expiry.has_expired(&ExpiryCheck {
            event,
            event_tick,
            last_tick: entry.last_update(),
            epoch: self.epoch,
            max: self.max,
        })
    }

    /// The entry after a `next` at `event`, updated at `now_tick`.
    #[inline]
    fn advanced(
        &self,
        old: Option<Entry>,
        event: C::Instant,
        event_tick: i64,
        now_tick: i64,
    ) -> Entry {
        match old {
            Some(e) if !self.expired(event, event_tick, e) => Entry::new(
                now_tick,
                self.rule.following(e.backoff_ns(), e.attempts()),
                e.attempts().saturating_add(1),
            ),
            _ => Entry::new(now_tick, self.rule.first(), 1),
        }
    }

    /// Read-modify-write of one key under its shard's write lock: `decide`
    /// gets the current entry (if any) and the clock's now, read under the
    /// lock so a key's last-update time never moves backwards between racing
    /// callers. `Ok` stores the new entry; `Err` leaves the map untouched.
    #[inline]
    fn update<Q, E>(
        &self,
        key: &Q,
        decide: impl Fn(Option<Entry>, i64) -> Result<Entry, E>,
    ) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        if let Some(mut slot) = self.map.get_mut(key) {
            let updated = decide(Some(*slot), self.tick(self.clock.now()))?;
            *slot = updated;
            return Ok(updated);
        }
        // Another thread may insert between the lookup above and this call;
        // the entry API then sees it occupied, so no update is lost.
        match self.map.entry(key.to_owned().into()) {
            MapEntry::Occupied(mut slot) => {
                let updated = decide(Some(*slot.get()), self.tick(self.clock.now()))?;
                *slot.get_mut() = updated;
                Ok(updated)
            }
            MapEntry::Vacant(slot) => {
                let updated = decide(None, self.tick(self.clock.now()))?;
                slot.insert(updated);
                Ok(updated)
            }
        }
    }
}

impl<K, C: Clock, S> fmt::Debug for Backoff<K, C, S>
where
    K: Hash + Eq,
    S: BuildHasher + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("initial", &self.initial)
            .field("max", &self.max)
            .field("jitter", &self.jitter)
            .field("expiry", &self.expiry)
            .field("entries", &self.map.len())
            .finish_non_exhaustive()
    }
}
