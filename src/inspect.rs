//! Seeing what is in backoff and why: per-entry views, counters and a
//! human-readable dump.

use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::clock::ClockInstant;
use crate::entry::{Entry, Tick};
use crate::rules::{self, Staleness};
use crate::store::Store;

/// One entry as seen at one instant; from [`Backoff::entries`](crate::Backoff::entries).
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

/// Counters for metrics; from [`Backoff::stats`](crate::Backoff::stats).
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

impl Stats {
    /// Counts one entry.
    fn tally(&mut self, expired: bool, in_backoff: bool) {
        self.entries += 1;
        self.expired += usize::from(expired);
        self.in_backoff += usize::from(in_backoff);
    }

    /// The GC counters of `store`, nothing tallied yet.
    fn gc_totals<K: Hash + Eq + Clone, S: BuildHasher + Clone>(store: &Store<K, S>) -> Stats {
        let (gc_runs, gc_removed, gc_panics) = store.gc_totals();
        Stats {
            gc_runs,
            gc_removed,
            gc_panics,
            ..Stats::default()
        }
    }
}

/// `key`'s entry `e` as seen at `now`.
pub(crate) fn view<K: Clone, I: ClockInstant>(
    key: &K,
    e: Entry,
    now: Tick,
    epoch: I,
    stale: &dyn Staleness,
) -> EntryView<K, I> {
    EntryView {
        key: key.clone(),
        backoff: e.backoff(),
        attempts: e.attempts(),
        last_update: e.last_update().instant(epoch),
        remaining: rules::remaining(stale, e, now),
        expired: rules::expired(stale, e, now),
    }
}

/// Every entry of `store` as seen at `now`.
pub(crate) fn entries<K, S, I>(
    store: &Store<K, S>,
    now: Tick,
    epoch: I,
    stale: &dyn Staleness,
) -> Vec<EntryView<K, I>>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
    I: ClockInstant,
{
    let mut views = Vec::with_capacity(store.len());
    store.for_each(|key, e| views.push(view(key, e, now, epoch, stale)));
    views
}

/// The counters of `store` at `now`.
pub(crate) fn stats<K, S>(store: &Store<K, S>, now: Tick, stale: &dyn Staleness) -> Stats
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    let mut stats = Stats::gc_totals(store);
    store.for_each(|_, e| {
        stats.tally(
            rules::expired(stale, e, now),
            rules::remaining(stale, e, now).is_some(),
        );
    });
    stats
}

/// A table of `views` seen at `now`, longest remaining wait first, with
/// the GC counters of `store`.
pub(crate) fn dump<K, S, I>(store: &Store<K, S>, views: Vec<EntryView<K, I>>, now: I) -> String
where
    K: Hash + Eq + Clone + fmt::Display,
    S: BuildHasher + Clone,
    I: ClockInstant,
{
    // Each key is turned into text once.
    let mut rows: Vec<(String, EntryView<K, I>)> =
        views.into_iter().map(|v| (v.key.to_string(), v)).collect();
    rows.sort_by(|(ka, a), (kb, b)| b.remaining.cmp(&a.remaining).then_with(|| ka.cmp(kb)));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(3).max(3);
    let mut totals = Stats::gc_totals(store);
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
