//! Seeing what is in backoff and why: per-entry views, counters, snapshots
//! that survive a restart, and a human-readable dump.

use std::borrow::Borrow;
use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, Hash};
use std::time::{Duration, SystemTime};

use super::Backoff;
use super::entry::Entry;
use super::policy::{self, Tick};
use crate::clock::{Clock, ClockInstant};
use crate::duration::saturating_nanos;

/// One entry as seen at one instant; from [`Backoff::entries`].
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
/// let clock = MockClock::new();
/// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300)).clock(clock.clone()).build()?;
/// b.next("pod-a", clock.now());
/// let views = b.entries();
/// assert_eq!(views[0].key, "pod-a");
/// assert_eq!(views[0].remaining, Some(Duration::from_secs(10)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EntryView<K, I> {
    /// The key.
    pub key: K,
    /// Its current backoff.
    pub backoff: Duration,
    /// `next` calls since the entry started.
    pub attempts: u32,
    /// When `next` last updated it, on the manager's clock.
    pub last_update: I,
    /// Wait left now, if in backoff.
    pub remaining: Option<Duration>,
    /// Stale: the next `next` starts over and `gc` will remove it.
    pub expired: bool,
}

/// Counters for metrics; from [`Backoff::stats`].
///
/// Export them as gauges (`entries`, `in_backoff`, `expired`) and counters
/// (`gc_runs`, `gc_removed`) from a periodic task or a scrape handler; for
/// example with the `metrics` crate:
/// `gauge!("backoff_entries").set(stats.entries as f64)`.
///
/// ```
/// use keyed_backoff::Backoff;
/// use std::time::{Duration, Instant};
/// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
/// b.next("k", Instant::now());
/// let s = b.stats();
/// assert_eq!((s.entries, s.in_backoff, s.expired, s.gc_runs), (1, 1, 0, 0));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Entries held.
    pub entries: usize,
    /// Entries whose backoff window has not ended.
    pub in_backoff: usize,
    /// Expired entries waiting for `gc`.
    pub expired: usize,
    /// `gc` calls so far.
    pub gc_runs: u64,
    /// Entries removed by `gc` so far.
    pub gc_removed: u64,
    /// Background or amortised sweeps that a panic in the expiry function
    /// ended (the sweeper carries on; a direct `gc()` call still sees the
    /// panic).
    pub gc_panics: u64,
}

/// A portable copy of a manager's entries, with last-update times as wall
/// time so they survive a process restart; from [`Backoff::snapshot`].
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

impl Stats {
    /// Counts one entry.
    fn tally(&mut self, expired: bool, in_backoff: bool) {
        self.entries += 1;
        self.expired += usize::from(expired);
        self.in_backoff += usize::from(in_backoff);
    }
}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    fn view(&self, key: &K, e: Entry, now: Tick) -> EntryView<K, C::Instant> {
        let judge = self.judge();
        EntryView {
            key: key.clone(),
            backoff: e.backoff(),
            attempts: e.attempts(),
            last_update: self.epoch.offset_by_nanos(e.last_update().0),
            remaining: policy::remaining(&judge, e, now),
            expired: policy::expired(&judge, e, now),
        }
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
        self.enter();
        self.entries_at(self.clock.now())
    }

    /// Every entry as seen at `now`.
    fn entries_at(&self, now: C::Instant) -> Vec<EntryView<K, C::Instant>> {
        let now = self.tick(now);
        let mut views = Vec::with_capacity(self.store.len());
        self.store
            .for_each(|key, e| views.push(self.view(key, e, now)));
        views
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
        self.enter();
        let now = self.now_tick();
        let (k, e) = self.store.get_key_value(key)?;
        Some(self.view(&k, e, now))
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
        self.enter();
        let now = self.now_tick();
        let judge = self.judge();
        let mut stats = self.gc_totals();
        self.store.for_each(|_, e| {
            stats.tally(
                policy::expired(&judge, e, now),
                policy::remaining(&judge, e, now).is_some(),
            );
        });
        stats
    }

    /// [`Stats`] with the GC counters filled in and nothing tallied yet.
    fn gc_totals(&self) -> Stats {
        let (gc_runs, gc_removed, gc_panics) = self.store.gc_totals();
        Stats {
            gc_runs,
            gc_removed,
            gc_panics,
            ..Stats::default()
        }
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
        self.enter();
        let now = self.now_tick();
        let mut entries = Vec::with_capacity(self.store.len());
        self.store.for_each(|key, e| {
            let age = now.since(e.last_update());
            let last_update = if age >= 0 {
                wall_now
                    .saturating_sub(Duration::from_nanos(u64::try_from(age).unwrap_or(u64::MAX)))
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
        self.enter();
        let now = self.now_tick();
        let judge = self.judge();
        let max_ns = saturating_nanos(self.rule.step().max_delay().min(super::MAX_BACKOFF));
        // The last occurrence of a key decides, as if the entries were
        // applied in order.
        let mut last: std::collections::HashMap<&K, usize> =
            std::collections::HashMap::with_capacity(snapshot.entries.len());
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
            if let Some(entry) = policy::restored(
                &judge,
                now,
                age_ns,
                saturating_nanos(s.backoff),
                max_ns,
                s.attempts,
            ) {
                self.store.insert(s.key.clone(), entry);
                restored += 1;
            }
        }
        restored
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
        self.enter();
        // One clock reading and one scan for the rows and the totals alike;
        // each key is turned into text once.
        let now = self.clock.now();
        let mut rows: Vec<(String, EntryView<K, C::Instant>)> = self
            .entries_at(now)
            .into_iter()
            .map(|v| (v.key.to_string(), v))
            .collect();
        rows.sort_by(|(ka, a), (kb, b)| b.remaining.cmp(&a.remaining).then_with(|| ka.cmp(kb)));
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(3).max(3);
        let mut totals = self.gc_totals();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<width$}  {:>10}  {:>8}  {:>12}  {:>10}  STATE",
            "KEY", "BACKOFF", "ATTEMPTS", "UPDATED", "REMAINING"
        );
        for (key, v) in &rows {
            totals.tally(v.expired, v.remaining.is_some());
            let ago = now.saturating_duration_since(v.last_update);
            let state = if v.expired {
                "expired (awaiting gc)"
            } else if v.remaining.is_some() {
                "in backoff"
            } else {
                "ready"
            };
            let _ = writeln!(
                out,
                "{key:<width$}  {:>10}  {:>8}  {:>12}  {:>10}  {state}",
                human(v.backoff),
                v.attempts,
                format!("{} ago", human(ago)),
                v.remaining.map_or_else(|| "-".to_string(), human),
            );
        }
        let s = totals;
        let _ = write!(
            out,
            "{} entries, {} in backoff, {} expired; gc: {} runs, {} removed",
            s.entries, s.in_backoff, s.expired, s.gc_runs, s.gc_removed
        );
        out
    }
}

/// `1h2m`, `5m0s`, `12.5s`, `250ms`: short and exact enough for a table.
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 3_600 {
        format!("{}h{}m", secs / 3_600, secs % 3_600 / 60)
    } else if secs >= 60 {
        format!("{}m{}s", secs / 60, secs % 60)
    } else if secs >= 1 {
        let tenths = d.subsec_millis() / 100;
        if tenths == 0 {
            format!("{secs}s")
        } else {
            format!("{secs}.{tenths}s")
        }
    } else {
        format!("{}ms", d.as_millis())
    }
}
