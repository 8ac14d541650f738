//! The detector: when do failures across keys mean one shared outage, and
//! when is it over?
//!
//! It sees every outcome the manager is told of: a failure, *fresh* when it
//! started its key's ladder (the key had no entry, or an expired one), or a
//! success. Outside an outage it looks back from each fresh failure just
//! far enough to find the latest fresh failures of `min_failing_keys`
//! distinct keys: if they all fall within the window, and the successes
//! since the first of them are at most `max_success_ratio` of all the
//! outcomes since then, an outage begins. Inside an outage it counts only
//! successes in a row: `recovery_successes` of them, with no failure
//! between, end it. Each change of state starts the count afresh, so the
//! failures that declared an outage cannot declare the next one.
//!
//! Looking back only to the latest fresh failures makes detection as quick
//! as the failures come: a busy controller whose keys all start failing is
//! seen after twenty of them, however many successes came just before.
//! Keys are told apart by a 64-bit hash: a key whose entry keeps expiring
//! between its failures (a short expiry window) starts its ladder again and
//! again, but counts once.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use foldhash::fast::FixedState;

use crate::settings::OutageSettings;

/// What the manager was told about one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A failure that started the ladder of the key with this hash.
    Fresh(u64),
    /// Any other failure.
    Failure,
    /// A success.
    Success,
}

/// A change of state the outcome caused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// An outage began with this outcome.
    Began,
    /// The outage ended with this outcome.
    Ended,
}

/// The outcomes that declared an outage: from the first of the latest
/// fresh failures to the one that declared it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) fresh_failures: u64,
    pub(crate) failures: u64,
    pub(crate) successes: u64,
    pub(crate) over: Duration,
}

/// One fresh failure: its key, its number, when, and the totals just
/// before it.
#[derive(Debug, Clone, Copy)]
struct Mark {
    key: u64,
    number: u64,
    at: Duration,
    failures: u64,
    successes: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Detector {
    /// Fresh failures, oldest first; a mark is current while it is its
    /// key's latest (`latest[key] == number`), and the others are dropped
    /// as they reach the front or when they pile up.
    marks: VecDeque<Mark>,
    /// How many of the marks are not current: while none is, the front
    /// needs no look-up.
    stale: usize,
    /// The number of each counted key's latest fresh failure.
    /// Keyed by the keys' hashes already: a fixed fast hasher is enough.
    latest: HashMap<u64, u64, FixedState>,
    fresh: u64,
    failures: u64,
    successes: u64,
    /// The counts that declared the outage under way.
    declared: Counts,
    in_outage: bool,
    streak: u32,
    window: Duration,
    min_failing_keys: usize,
    max_success_ratio: f64,
    recovery_successes: u32,
}

impl Detector {
    /// A detector for validated `settings`, seeing nothing yet.
    pub(crate) fn new(settings: &OutageSettings) -> Self {
        Detector {
            marks: VecDeque::new(),
            stale: 0,
            latest: HashMap::default(),
            fresh: 0,
            failures: 0,
            successes: 0,
            declared: Counts::default(),
            in_outage: false,
            streak: 0,
            window: settings.detection_window,
            min_failing_keys: settings.min_failing_keys as usize,
            max_success_ratio: settings.max_success_ratio,
            recovery_successes: settings.recovery_successes,
        }
    }

    /// Whether an outage is declared.
    #[cfg(test)]
    pub(crate) fn in_outage(&self) -> bool {
        self.in_outage
    }

    /// While an outage is declared, the successes in a row seen so far;
    /// `None` outside one. With [`resumed`](Self::resumed), the part of
    /// the detector a fleet shares (the outcomes before an outage are
    /// each replica's own).
    pub(crate) fn streak(&self) -> Option<u32> {
        self.in_outage.then_some(self.streak)
    }

    /// A detector for validated `settings` that has seen nothing outside
    /// an outage, and is in one with `streak` successes in a row when
    /// `streak` is given.
    pub(crate) fn resumed(settings: &OutageSettings, streak: Option<u32>) -> Self {
        let mut detector = Detector::new(settings);
        detector.in_outage = streak.is_some();
        detector.streak = streak.unwrap_or(0);
        detector
    }

    /// Takes the totals of failures and successes told so far from outside
    /// (the watch counts them without a lock): the counts of the marks to
    /// come are taken from them.
    pub(crate) fn totals(&mut self, failures: u64, successes: u64) {
        self.failures = failures;
        self.successes = successes;
    }

    /// The outcomes that declared the latest outage.
    pub(crate) fn declared(&self) -> Counts {
        self.declared
    }

    /// Records `outcome` at `at` (time on any fixed line) and reports the
    /// change of state it causes, if any.
    pub(crate) fn record(&mut self, outcome: Outcome, at: Duration) -> Option<Change> {
        if self.in_outage {
            return self.record_in_outage(outcome);
        }
        let key = match outcome {
            Outcome::Success => {
                self.successes += 1;
                return None;
            }
            Outcome::Failure => {
                self.failures += 1;
                return None;
            }
            Outcome::Fresh(key) => key,
        };
        self.mark(key, at);
        self.failures += 1;
        if self.latest.len() < self.min_failing_keys {
            return None;
        }
        let first = *self.marks.front()?;
        let over = at.saturating_sub(first.at);
        if over > self.window {
            return None;
        }
        let counts = Counts {
            fresh_failures: self.latest.len() as u64,
            failures: self.failures - first.failures,
            successes: self.successes - first.successes,
            over,
        };
        let outcomes = (counts.failures + counts.successes) as f64;
        let declared = counts.successes as f64 <= self.max_success_ratio * outcomes;
        declared.then(|| {
            self.declared = counts;
            self.in_outage = true;
            self.restart();
            Change::Began
        })
    }

    /// Notes a fresh failure of `key`, keeping the latest fresh failures of
    /// at most `min_failing_keys` distinct keys, the oldest current one at
    /// the front.
    fn mark(&mut self, key: u64, at: Duration) {
        let number = self.fresh;
        self.fresh += 1;
        let known = self.latest.insert(key, number).is_some();
        self.marks.push_back(Mark {
            key,
            number,
            at,
            failures: self.failures,
            successes: self.successes,
        });
        if known {
            // The key's earlier mark is no longer current.
            self.stale += 1;
        } else if self.latest.len() > self.min_failing_keys
            && let Some(oldest) = self.marks.pop_front()
        {
            // The front is current (kept so below): its key goes.
            self.latest.remove(&oldest.key);
        }
        if self.stale == 0 {
            return;
        }
        // Marks of keys that failed freshly again are not current: drop
        // them at the front, and all of them once they are half the marks.
        while self
            .marks
            .front()
            .is_some_and(|m| self.latest.get(&m.key) != Some(&m.number))
        {
            self.marks.pop_front();
            self.stale -= 1;
        }
        if self.marks.len() > 2 * self.latest.len() + 16 {
            let latest = &self.latest;
            self.marks.retain(|m| latest.get(&m.key) == Some(&m.number));
            self.stale = 0;
        }
    }

    fn record_in_outage(&mut self, outcome: Outcome) -> Option<Change> {
        if outcome != Outcome::Success {
            self.streak = 0;
            return None;
        }
        self.streak = self.streak.saturating_add(1);
        (self.streak >= self.recovery_successes).then(|| {
            self.in_outage = false;
            self.restart();
            Change::Ended
        })
    }

    /// Forgets every outcome seen so far.
    fn restart(&mut self) {
        self.marks.clear();
        self.stale = 0;
        self.latest.clear();
        self.failures = 0;
        self.successes = 0;
        self.streak = 0;
    }
}

#[cfg(test)]
#[path = "detector_tests.rs"]
mod tests;
