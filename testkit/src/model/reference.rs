//! The model itself: client-go's semantics on a `BTreeMap`, exact `i128`
//! arithmetic, one thread.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use keyed_backoff::{Settings, SnapshotEntry};

const MAX_ATTEMPTS: u32 = Settings::MAX_ATTEMPTS;

#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    backoff: i128,
    last: i128,
    attempts: u32,
}

/// The model.
pub struct Model {
    pub(super) cfg: Config,
    pub(super) now: i128,
    pub(super) entries: BTreeMap<&'static str, Entry>,
    /// Whether the expiry function panics when asked.
    pub(super) armed: bool,
    /// Writes counted towards amortised GC.
    pub(super) writes: u64,
    pub(super) gc_runs: u64,
    pub(super) gc_removed: u64,
    pub(super) gc_panics: u64,
}

impl Model {
    pub fn new(cfg: Config) -> Self {
        Model {
            cfg,
            now: 0,
            entries: BTreeMap::new(),
            armed: false,
            writes: 0,
            gc_runs: 0,
            gc_removed: 0,
            gc_panics: 0,
        }
    }

    /// The strategy's attempt limit, if any.
    pub(super) fn limit(&self) -> Option<u32> {
        match self.cfg.rule {
            RuleKind::ClientGo => None,
            RuleKind::Doubling(m) | RuleKind::Constant(m) | RuleKind::Linear(_, m) => m,
        }
    }

    /// The field the builder must refuse, if the config is invalid: a
    /// strategy that gives no delay, or gives up beyond the attempts an
    /// entry counts.
    pub fn invalid(&self) -> Option<&'static str> {
        match (self.limit(), self.cfg.expiry) {
            (Some(0), _) => Some("strategy"),
            (Some(m), _) if m > MAX_ATTEMPTS => Some("strategy"),
            // A window that forgets every entry at once.
            (_, ExpiryKind::Fixed(0)) => Some("expire_after"),
            _ => None,
        }
    }

    /// The largest delay the rule gives.
    pub(super) fn max_delay(&self) -> i128 {
        let (initial, max) = (i128::from(self.cfg.initial), i128::from(self.cfg.max));
        match self.cfg.rule {
            RuleKind::ClientGo | RuleKind::Linear(..) => max,
            // The first delay is `initial`, uncapped.
            RuleKind::Doubling(_) => max.max(initial),
            RuleKind::Constant(_) => initial,
        }
    }

    pub(super) fn window(&self) -> i128 {
        match self.cfg.expiry {
            ExpiryKind::TwiceMax => 2 * self.max_delay(),
            ExpiryKind::Fixed(w) | ExpiryKind::Closure(w) => i128::from(w),
        }
    }

    /// Whether asking for expiry panics now.
    pub(super) fn panics(&self) -> bool {
        self.armed && matches!(self.cfg.expiry, ExpiryKind::Closure(_))
    }

    /// Delay number `n` (0-based) after `previous`; `None` once the rule
    /// gives up.
    pub(super) fn delay(&self, n: u32, previous: i128) -> Option<i128> {
        if self.limit().is_some_and(|m| n >= m) {
            return None;
        }
        let (initial, max) = (i128::from(self.cfg.initial), i128::from(self.cfg.max));
        Some(match (self.cfg.rule, n) {
            (RuleKind::ClientGo | RuleKind::Doubling(_), 0) => initial,
            (RuleKind::ClientGo | RuleKind::Doubling(_), _) => (2 * previous).min(max),
            (RuleKind::Constant(_), _) => initial,
            (RuleKind::Linear(step, _), n) => (initial + i128::from(n) * i128::from(step)).min(max),
        })
    }

    /// Counts a write; sweeps (containing a panic) on every n-th.
    pub(super) fn after_write(&mut self) {
        let Some(every) = self.cfg.amortized else {
            return;
        };
        self.writes += 1;
        if self.writes.is_multiple_of(u64::from(every)) {
            if self.panics() && !self.entries.is_empty() {
                self.gc_panics += 1;
            } else {
                self.gc();
            }
        }
    }

    pub fn stats(&self) -> keyed_backoff::Stats {
        let mut s = keyed_backoff::Stats::default();
        s.entries = self.entries.len();
        s.gc_runs = self.gc_runs;
        s.gc_removed = self.gc_removed;
        s.gc_panics = self.gc_panics;
        for (key, e) in &self.entries {
            s.expired += usize::from(self.expired(self.now, e.last));
            s.in_backoff += usize::from(self.remaining(key, self.now).is_some());
        }
        s
    }

    /// The snapshot the crate must give, with `wall` as the wall time of now.
    pub fn snapshot(&self, wall: SystemTime) -> Vec<SnapshotEntry<String>> {
        self.entries
            .iter()
            .map(|(k, e)| SnapshotEntry {
                key: (*k).to_string(),
                backoff: Duration::from_nanos(u64::try_from(e.backoff).expect("fits")),
                attempts: e.attempts.min(MAX_ATTEMPTS),
                last_update: wall - nanos(self.now - e.last),
            })
            .collect()
    }

    /// A restore of this model's snapshot into a fresh manager whose wall
    /// clock reads `skew` ns more: last updates move by `skew`, one in the
    /// future counts as now, a stale one is dropped. Returns how many are held.
    pub fn round_trip(&mut self, skew: i64) -> usize {
        let now = self.now;
        let entries = std::mem::take(&mut self.entries);
        self.entries = entries
            .into_iter()
            .filter_map(|(k, e)| {
                let last = now - (now - e.last + i128::from(skew)).max(0);
                (!self.expired(now, last)).then_some((
                    k,
                    Entry {
                        last,
                        attempts: e.attempts.min(MAX_ATTEMPTS),
                        ..e
                    },
                ))
            })
            .collect();
        (self.writes, self.gc_runs, self.gc_removed, self.gc_panics) = (0, 0, 0, 0);
        self.entries.len()
    }

    pub(super) fn expired(&self, event: i128, last: i128) -> bool {
        event - last > self.window()
    }

    pub fn next(&mut self, key: &'static str, event: i128) -> i128 {
        let entry = match self.entries.get(key) {
            Some(e) if !self.expired(event, e.last) => Entry {
                backoff: self
                    .delay(e.attempts.min(MAX_ATTEMPTS), e.backoff)
                    .unwrap_or(e.backoff),
                last: self.now,
                attempts: e.attempts + 1,
            },
            _ => Entry {
                backoff: self.delay(0, 0).expect("a valid rule gives a first delay"),
                last: self.now,
                attempts: 1,
            },
        };
        self.entries.insert(key, entry);
        entry.backoff
    }

    pub fn get(&self, key: &str) -> i128 {
        self.entries.get(key).map_or(0, |e| e.backoff)
    }

    pub fn in_since(&self, key: &str, event: i128) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| !self.expired(event, e.last) && self.now - event < e.backoff)
    }

    pub fn in_since_update(&self, key: &str, event: i128) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| !self.expired(event, e.last) && event - e.last < e.backoff)
    }

    pub fn remaining(&self, key: &str, at: i128) -> Option<i128> {
        let e = self.entries.get(key)?;
        let left = e.last + e.backoff - at;
        (!self.expired(at, e.last) && left > 0).then_some(left)
    }

    pub fn try_next(&mut self, key: &'static str, at: i128) -> Result<i128, i128> {
        match self.remaining(key, at) {
            Some(left) => Err(left),
            None => Ok(self.next(key, at)),
        }
    }

    pub fn attempts(&self, key: &str) -> u32 {
        self.entries
            .get(key)
            .map_or(0, |e| e.attempts.min(MAX_ATTEMPTS))
    }

    pub fn reset(&mut self, key: &str) -> bool {
        self.entries.remove(key).is_some()
    }

    pub fn gc(&mut self) -> usize {
        let before = self.entries.len();
        let (now, window) = (self.now, self.window());
        self.entries.retain(|_, e| now - e.last <= window);
        let removed = before - self.entries.len();
        self.gc_runs += 1;
        self.gc_removed += removed as u64;
        removed
    }

    pub(super) fn resolve(&self, key: &str, event: Event) -> i128 {
        let (last, backoff) = self
            .entries
            .get(key)
            .map_or((self.now, 0), |e| (e.last, e.backoff));
        match event {
            Event::Now => self.now,
            Event::Ago(d) => self.now - i128::from(d),
            Event::Ahead(d) => self.now + i128::from(d),
            Event::BackoffEdge(d) => last + backoff + i128::from(d),
            Event::ExpiryEdge(d) => last + self.window() + i128::from(d),
        }
    }

    pub(super) fn step(&self, step: Step) -> i128 {
        match step {
            Step::Nanos(n) => i128::from(n),
            Step::Initial => i128::from(self.cfg.initial),
            Step::Max => i128::from(self.cfg.max),
            Step::Window(d) => (self.window() + i128::from(d)).max(0),
        }
    }
}
