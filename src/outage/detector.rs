//! The detector: when do failures across keys mean one shared outage, and
//! when is it over?
//!
//! It sees every outcome the manager is told of: a failure (marked *fresh*
//! when it started its key's ladder) or a success. Outside an outage it
//! counts them over a sliding window, in tenths of the window; an outage
//! begins at a fresh failure that brings the window to at least
//! `min_failing_keys` fresh failures while successes are at most
//! `max_success_ratio` of all outcomes. Inside an outage it counts only
//! successes in a row; `recovery_successes` of them, with no failure
//! between, end it. Each change of state starts the window afresh, so the
//! failures that declared an outage cannot declare the next one.
//!
//! Fresh failures count distinct keys without remembering any: a key's
//! ladder starts once until a success resets it (or its entry expires), so
//! a key counted twice in one window must have succeeded in between, and
//! that success is counted too.

use std::time::Duration;

use super::settings::OutageSettings;

/// Tenths: the window is counted in this many buckets.
const BUCKETS: usize = 10;

/// What the manager was told about one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The attempt failed; `fresh` when the failure started the key's
    /// ladder (it had no entry, or an expired one).
    Failure { fresh: bool },
    /// The attempt succeeded.
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

/// Outcomes counted in one bucket, or summed over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) fresh_failures: u64,
    pub(crate) failures: u64,
    pub(crate) successes: u64,
}

impl Counts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Failure { fresh } => {
                self.failures += 1;
                self.fresh_failures += u64::from(fresh);
            }
            Outcome::Success => self.successes += 1,
        }
    }

    fn plus(self, other: Counts) -> Counts {
        Counts {
            fresh_failures: self.fresh_failures + other.fresh_failures,
            failures: self.failures + other.failures,
            successes: self.successes + other.successes,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Detector {
    /// Nanoseconds per bucket (a tenth of the window, at least 1).
    bucket_ns: u64,
    /// `slots[i]` holds bucket number `ids[i]`; a bucket's number is its
    /// start time divided by `bucket_ns`.
    slots: [Counts; BUCKETS],
    ids: [u64; BUCKETS],
    /// The newest bucket number seen.
    newest: u64,
    in_outage: bool,
    streak: u32,
    min_failing_keys: u64,
    max_success_ratio: f64,
    recovery_successes: u32,
}

impl Detector {
    /// A detector for validated `settings`, seeing nothing yet.
    pub(crate) fn new(settings: &OutageSettings) -> Self {
        let window_ns = u64::try_from(settings.window.as_nanos()).unwrap_or(u64::MAX);
        Detector {
            bucket_ns: (window_ns / BUCKETS as u64).max(1),
            slots: [Counts::default(); BUCKETS],
            ids: [u64::MAX; BUCKETS],
            newest: 0,
            in_outage: false,
            streak: 0,
            min_failing_keys: u64::from(settings.min_failing_keys),
            max_success_ratio: settings.max_success_ratio,
            recovery_successes: settings.recovery_successes,
        }
    }

    /// Whether an outage is declared.
    pub(crate) fn in_outage(&self) -> bool {
        self.in_outage
    }

    /// Records `outcome` at `at` (time on any fixed line) and reports the
    /// change of state it causes, if any.
    pub(crate) fn record(&mut self, outcome: Outcome, at: Duration) -> Option<Change> {
        if self.in_outage {
            return self.record_in_outage(outcome);
        }
        self.count(outcome, at);
        let Outcome::Failure { fresh: true } = outcome else {
            return None;
        };
        let c = self.counts();
        let outcomes = (c.failures + c.successes) as f64;
        let declared = c.fresh_failures >= self.min_failing_keys
            && c.successes as f64 <= self.max_success_ratio * outcomes;
        declared.then(|| {
            self.in_outage = true;
            self.streak = 0;
            Change::Began
        })
    }

    fn record_in_outage(&mut self, outcome: Outcome) -> Option<Change> {
        match outcome {
            Outcome::Failure { .. } => {
                self.streak = 0;
                None
            }
            Outcome::Success => {
                self.streak = self.streak.saturating_add(1);
                (self.streak >= self.recovery_successes).then(|| {
                    self.in_outage = false;
                    self.streak = 0;
                    self.slots = [Counts::default(); BUCKETS];
                    self.ids = [u64::MAX; BUCKETS];
                    Change::Ended
                })
            }
        }
    }

    /// The outcomes counted in the window ending at the newest bucket.
    pub(crate) fn counts(&self) -> Counts {
        self.slots
            .iter()
            .zip(self.ids)
            .filter(|&(_, id)| self.live(id))
            .fold(Counts::default(), |sum, (c, _)| sum.plus(*c))
    }

    /// Whether bucket `id` lies within the window of the newest bucket.
    fn live(&self, id: u64) -> bool {
        id != u64::MAX && id <= self.newest && self.newest - id < BUCKETS as u64
    }

    /// Adds `outcome` to its bucket. An outcome older than the window is
    /// dropped; one older than the newest but within the window goes to
    /// its own bucket.
    fn count(&mut self, outcome: Outcome, at: Duration) {
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        let id = (ns / self.bucket_ns).min(u64::MAX - 1);
        self.newest = self.newest.max(id);
        if !self.live(id) {
            return;
        }
        let slot = (id % BUCKETS as u64) as usize;
        if self.ids[slot] != id {
            self.ids[slot] = id;
            self.slots[slot] = Counts::default();
        }
        self.slots[slot].add(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: Outcome = Outcome::Failure { fresh: true };
    const AGAIN: Outcome = Outcome::Failure { fresh: false };
    const OK: Outcome = Outcome::Success;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Window 10 s, 5 keys, at most 20 % successes, 2 in a row to end.
    fn detector() -> Detector {
        Detector::new(
            &OutageSettings::new()
                .window(Duration::from_secs(10))
                .min_failing_keys(5)
                .max_success_ratio(0.2)
                .recovery_successes(2),
        )
    }

    #[test]
    fn begins_at_the_fresh_failure_that_reaches_the_threshold() {
        let mut d = detector();
        for k in 0..4 {
            assert_eq!(d.record(FRESH, secs(k as f64)), None);
        }
        assert_eq!(d.record(FRESH, secs(4.0)), Some(Change::Began));
        assert!(d.in_outage());
    }

    #[test]
    fn failures_of_keys_already_failing_never_begin_one() {
        // Four broken keys retrying forever: 400 failures, four fresh.
        let mut d = detector();
        for k in 0..4 {
            d.record(FRESH, secs(0.0 + k as f64 * 0.1));
        }
        for n in 0..400 {
            assert_eq!(d.record(AGAIN, secs(1.0 + n as f64 * 0.01)), None);
        }
        assert!(!d.in_outage());
    }

    #[test]
    fn enough_successes_keep_it_from_beginning() {
        // 5 fresh failures among 1 success: 1/6 <= 0.2, an outage.
        let mut d = detector();
        d.record(OK, secs(0.0));
        let changes: Vec<_> = (0..5).map(|_| d.record(FRESH, secs(1.0))).collect();
        assert_eq!(changes.last(), Some(&Some(Change::Began)));
        // Among 2 successes, 5 and 6 fresh failures (2/7, 2/8) are none.
        let mut d = detector();
        d.record(OK, secs(0.0));
        d.record(OK, secs(0.0));
        for _ in 0..6 {
            assert_eq!(d.record(FRESH, secs(1.0)), None);
        }
        // 2/9 is still above; 2/10 is an outage.
        assert_eq!(d.record(FRESH, secs(1.0)), None);
        assert_eq!(d.record(FRESH, secs(1.0)), Some(Change::Began));
    }

    #[test]
    fn outcomes_older_than_the_window_are_forgotten() {
        let mut d = detector();
        for _ in 0..4 {
            d.record(FRESH, secs(0.5));
        }
        // Bucket 0 ([0, 1 s)) leaves the window when bucket 10 begins.
        assert_eq!(d.record(FRESH, secs(9.99)), Some(Change::Began));
        let mut d = detector();
        for _ in 0..4 {
            d.record(FRESH, secs(0.5));
        }
        assert_eq!(d.record(FRESH, secs(10.0)), None);
        assert_eq!(d.counts().fresh_failures, 1);
        // An outcome dated before the window is dropped; one within it is
        // counted in its own bucket.
        d.record(FRESH, secs(0.2));
        assert_eq!(d.counts().fresh_failures, 1);
        d.record(FRESH, secs(5.0));
        assert_eq!(d.counts().fresh_failures, 2);
    }

    #[test]
    fn ends_after_successes_in_a_row() {
        let mut d = detector();
        for _ in 0..5 {
            d.record(FRESH, secs(0.0));
        }
        assert!(d.in_outage());
        assert_eq!(d.record(OK, secs(1.0)), None);
        // A failure between them starts the count over.
        assert_eq!(d.record(AGAIN, secs(1.0)), None);
        assert_eq!(d.record(OK, secs(2.0)), None);
        assert_eq!(d.record(OK, secs(2.0)), Some(Change::Ended));
        assert!(!d.in_outage());
        // The window starts afresh: the five failures that declared the
        // outage do not count toward the next one.
        assert_eq!(d.counts(), Counts::default());
        for _ in 0..4 {
            assert_eq!(d.record(FRESH, secs(3.0)), None);
        }
        assert_eq!(d.record(FRESH, secs(3.0)), Some(Change::Began));
    }

    #[test]
    fn a_zero_ratio_needs_no_success_at_all() {
        let mut d = Detector::new(
            &OutageSettings::new()
                .min_failing_keys(2)
                .max_success_ratio(0.0),
        );
        d.record(OK, secs(0.0));
        assert_eq!(d.record(FRESH, secs(0.0)), None);
        assert_eq!(d.record(FRESH, secs(0.0)), None);
        assert!(!d.in_outage());
    }

    #[test]
    fn extreme_times_saturate() {
        let mut d = detector();
        for _ in 0..5 {
            d.record(FRESH, Duration::MAX);
        }
        assert!(d.in_outage());
    }
}
