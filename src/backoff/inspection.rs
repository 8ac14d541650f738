//! What an operator reads of a manager: its entries and counters, its
//! settings, a dump, and snapshots across restarts.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::time::{Duration, SystemTime};

use super::Backoff;
use crate::clock::Clock;
use crate::duration::saturating_nanos;
use crate::entry::{Entry, MAX_BACKOFF};
use crate::inspect::{self, EntryView, Stats};
use crate::snapshot::{self, Snapshot};
use crate::strategy::Step;

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// How many times `next` advanced the key's entry since it was created
    /// or re-initialised (saturating at [`MAX_ATTEMPTS`](crate::Settings::MAX_ATTEMPTS)); 0 for a missing key.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert_eq!(b.attempts("k"), 0);
    /// b.next("k", Instant::now());
    /// b.next("k", Instant::now());
    /// assert_eq!(b.attempts("k"), 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn attempts<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.expiry.enter();
        self.store.get(key).map_or(0, Entry::attempts)
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
        self.expiry.enter();
        self.store.shrink_to_fit();
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
        self.expiry.enter();
        self.store.len()
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
        self.expiry.enter();
        self.store.is_empty()
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

    /// The strategy that moves each entry: client-go's
    /// [`FactorJitter`](crate::strategy::FactorJitter) for a manager from
    /// [`builder`](Self::builder), the one given to
    /// [`with_strategy`](Self::with_strategy).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(2))?;
    /// assert_eq!(b.strategy().delay(0, None, &mut || 0.0), Some(Duration::from_secs(1)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn strategy(&self) -> &dyn Step {
        self.growth.step()
    }

    /// client-go's `max` (for a strategy, its largest delay): the unit of
    /// the default expiry, `2·max`, and the `max` given to a custom expiry.
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

    /// Every entry as seen now (one clock read; shards are read one at a
    /// time, so concurrent updates may or may not be included).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u32>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next(&7, Instant::now());
    /// assert_eq!(b.entries().len(), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn entries(&self) -> Vec<EntryView<K, C::Instant>> {
        self.expiry.enter();
        inspect::entries(&self.store, self.now_tick(), self.epoch, &self.expiry)
    }

    /// One key's entry as seen now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert!(b.entry("k").is_none());
    /// b.next("k", Instant::now());
    /// assert_eq!(b.entry("k").unwrap().attempts, 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn entry<Q>(&self, key: &Q) -> Option<EntryView<K, C::Instant>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.expiry.enter();
        let now = self.now_tick();
        let (k, e) = self.store.get_key_value(key)?;
        Some(inspect::view(&k, e, now, self.epoch, &self.expiry))
    }

    /// Counters: entries, in backoff now, expired awaiting GC, GC runs and
    /// removals. Scans every entry (under read locks, shard by shard).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.gc();
    /// assert_eq!(b.stats().gc_runs, 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.expiry.enter();
        inspect::stats(&self.store, self.now_tick(), &self.expiry)
    }

    /// A copy of every entry with wall-clock last-update times, taking
    /// [`SystemTime::now`] as the wall time of the clock's now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next("k", Instant::now());
    /// assert_eq!(b.snapshot().entries.len(), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot<K> {
        self.snapshot_at(SystemTime::now())
    }

    /// Like [`snapshot`](Self::snapshot), taking `wall_now` as the wall time
    /// of the clock's now (for tests and simulations).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::{Duration, SystemTime};
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).clock(clock.clone()).build()?;
    /// b.next("k", clock.now());
    /// clock.advance(Duration::from_secs(5));
    /// let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    /// let snap = b.snapshot_at(wall);
    /// assert_eq!(snap.entries[0].last_update, wall - Duration::from_secs(5));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn snapshot_at(&self, wall_now: SystemTime) -> Snapshot<K> {
        self.expiry.enter();
        snapshot::take(&self.store, self.now_tick(), wall_now)
    }

    /// Rebuilds entries from a snapshot, mapping each wall-clock last update
    /// onto this manager's clock with [`SystemTime::now`] as the wall time of
    /// the clock's now. Entries already expired by then are dropped;
    /// existing entries for the same keys are replaced. A last update in the
    /// future (a snapshot written by a node whose wall clock runs ahead)
    /// counts as now, and a backoff above this manager's `max` is cut to it,
    /// so a snapshot never holds a key longer than this manager would. When
    /// a key appears more than once, its last occurrence decides. Returns
    /// how many keys were restored (all held afterwards).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let a = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// a.next("k", Instant::now());
    /// a.next("k", Instant::now());
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.restore(&a.snapshot());
    /// assert_eq!((b.get("k"), b.attempts("k")), (Duration::from_secs(2), 2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn restore(&self, snapshot: &Snapshot<K>) -> usize {
        self.restore_at(snapshot, SystemTime::now())
    }

    /// Like [`restore`](Self::restore), taking `wall_now` as the wall time
    /// of the clock's now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::MockClock;
    /// use std::time::{Duration, SystemTime};
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).clock(MockClock::new()).build()?;
    /// let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    /// let snap = keyed_backoff::Snapshot {
    ///     entries: vec![keyed_backoff::SnapshotEntry { key: "k".to_string(), backoff: Duration::from_secs(8), attempts: 4, last_update: t0 }],
    /// };
    /// assert_eq!(b.restore_at(&snap, t0 + Duration::from_secs(121)), 0); // past 2·max: dropped
    /// assert_eq!(b.restore_at(&snap, t0 + Duration::from_secs(3)), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn restore_at(&self, snapshot: &Snapshot<K>, wall_now: SystemTime) -> usize {
        self.expiry.enter();
        let max_ns = saturating_nanos(self.growth.step().max_delay().min(MAX_BACKOFF));
        let now = self.now_tick();
        snapshot::restore(&self.store, snapshot, &self.expiry, now, wall_now, max_ns)
    }
}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone + fmt::Display,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// A table of every entry, longest remaining wait first, as an operator
    /// would print it from a debug endpoint.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300)).clock(clock.clone()).build()?;
    /// b.next("default/web-0", clock.now());
    /// let table = b.dump();
    /// assert!(table.contains("default/web-0"));
    /// assert!(table.contains("in backoff"));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn dump(&self) -> String {
        self.expiry.enter();
        // One clock reading for the rows and the totals alike.
        let now = self.clock.now();
        let views = inspect::entries(&self.store, self.tick(now), self.epoch, &self.expiry);
        inspect::dump(&self.store, views, now)
    }
}

impl<K, C: Clock, S> fmt::Debug for Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("rule", &self.growth.step())
            .field("expiry", &self.expiry)
            .field("entries", &self.store.len())
            .finish_non_exhaustive()
    }
}
