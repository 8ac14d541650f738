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

use foldhash::fast::FixedState;
use std::time::Duration;

use super::settings::OutageSettings;

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
        let first = *self.marks.front()?;
        let counts = Counts {
            fresh_failures: self.latest.len() as u64,
            failures: self.failures - first.failures,
            successes: self.successes - first.successes,
            over: at.saturating_sub(first.at),
        };
        let outcomes = (counts.failures + counts.successes) as f64;
        let declared = self.latest.len() == self.min_failing_keys
            && counts.over <= self.window
            && counts.successes as f64 <= self.max_success_ratio * outcomes;
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
        self.latest.insert(key, number);
        self.marks.push_back(Mark {
            key,
            number,
            at,
            failures: self.failures,
            successes: self.successes,
        });
        if self.latest.len() > self.min_failing_keys
            && let Some(oldest) = self.marks.pop_front()
        {
            self.latest.remove(&oldest.key);
        }
        // Marks of keys that failed freshly again are not current: drop
        // them at the front, and all of them once they are half the marks.
        while self
            .marks
            .front()
            .is_some_and(|m| self.latest.get(&m.key) != Some(&m.number))
        {
            self.marks.pop_front();
        }
        if self.marks.len() > 2 * self.latest.len() + 16 {
            let latest = &self.latest;
            self.marks.retain(|m| latest.get(&m.key) == Some(&m.number));
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
        self.latest.clear();
        self.failures = 0;
        self.successes = 0;
        self.streak = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGAIN: Outcome = Outcome::Failure;
    const OK: Outcome = Outcome::Success;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Window 10 s, 5 keys, at most 20 % successes, 2 in a row to end.
    fn detector() -> Detector {
        Detector::new(
            &OutageSettings::new()
                .detection_window(Duration::from_secs(10))
                .min_failing_keys(5)
                .max_success_ratio(0.2)
                .recovery_successes(2),
        )
    }

    /// Fresh failures of keys `keys` at `at`; the change of the last.
    fn fresh(d: &mut Detector, keys: std::ops::Range<u64>, at: f64) -> Option<Change> {
        keys.map(|k| d.record(Outcome::Fresh(k), secs(at)))
            .last()
            .flatten()
    }

    #[test]
    fn begins_at_the_fresh_failure_that_reaches_the_threshold() {
        let mut d = detector();
        for k in 0..4 {
            assert_eq!(d.record(Outcome::Fresh(k), secs(k as f64)), None);
        }
        assert_eq!(d.record(Outcome::Fresh(4), secs(4.0)), Some(Change::Began));
        assert!(d.in_outage());
        let c = d.declared();
        assert_eq!((c.fresh_failures, c.failures, c.successes), (5, 5, 0));
        assert_eq!(c.over, secs(4.0));
    }

    #[test]
    fn a_key_that_starts_over_again_and_again_counts_once() {
        // Four keys whose entries keep expiring between their failures:
        // 400 fresh failures, four keys.
        let mut d = detector();
        for n in 0..400 {
            assert_eq!(d.record(Outcome::Fresh(n % 4), secs(n as f64 * 0.01)), None);
        }
        assert!(!d.in_outage());
        // The marks of their earlier failures are not kept.
        assert!(d.marks.len() <= 2 * 4 + 16, "{} marks", d.marks.len());
        // A fifth key makes five.
        assert_eq!(d.record(Outcome::Fresh(9), secs(4.0)), Some(Change::Began));
        assert_eq!(d.declared().fresh_failures, 5);
    }

    #[test]
    fn failures_of_keys_already_failing_never_begin_one() {
        // Four broken keys retrying forever: 400 failures, four fresh.
        let mut d = detector();
        fresh(&mut d, 0..4, 0.0);
        for n in 0..400 {
            assert_eq!(d.record(AGAIN, secs(1.0 + n as f64 * 0.01)), None);
        }
        assert!(!d.in_outage());
    }

    #[test]
    fn successes_since_the_first_counted_failure_hold_it_off() {
        // 5 fresh failures among 1 success: 1/6 <= 0.2, an outage.
        let mut d = detector();
        fresh(&mut d, 0..1, 0.0);
        d.record(OK, secs(0.0));
        assert_eq!(fresh(&mut d, 1..5, 1.0), Some(Change::Began));
        // Among 2 successes, 5 fresh failures (2/7) are none; a sixth looks
        // back to the second, after the successes: an outage.
        let mut d = detector();
        fresh(&mut d, 0..1, 0.0);
        d.record(OK, secs(0.0));
        d.record(OK, secs(0.0));
        assert_eq!(fresh(&mut d, 1..5, 1.0), None);
        assert_eq!(fresh(&mut d, 5..6, 1.0), Some(Change::Began));
        // Retries count as outcomes: with three, 2/10 is an outage.
        let mut d = detector();
        fresh(&mut d, 0..1, 0.0);
        d.record(OK, secs(0.0));
        d.record(OK, secs(0.0));
        for _ in 0..3 {
            assert_eq!(
                d.record(AGAIN, secs(0.5)),
                None,
                "only fresh failures declare"
            );
        }
        assert_eq!(fresh(&mut d, 1..5, 1.0), Some(Change::Began));
        let c = d.declared();
        assert_eq!((c.fresh_failures, c.failures, c.successes), (5, 8, 2));
    }

    #[test]
    fn successes_before_the_latest_fresh_failures_do_not_count() {
        // A busy controller: 1,000 successes, then every key fails.
        let mut d = detector();
        for _ in 0..1_000 {
            d.record(OK, secs(0.0));
        }
        assert_eq!(fresh(&mut d, 0..5, 1.0), Some(Change::Began));
    }

    #[test]
    fn the_counted_failures_must_fall_within_the_window() {
        // Five fresh failures over 10 s: an outage; over 10.5 s: none.
        let mut d = detector();
        for k in 0..5 {
            d.record(Outcome::Fresh(k), secs(k as f64 * 2.5));
        }
        assert!(d.in_outage());
        let mut d = detector();
        for k in 0..5 {
            assert_eq!(d.record(Outcome::Fresh(k), secs(k as f64 * 2.625)), None);
        }
        // The next one looks back to the second: 9.875 s, within.
        assert_eq!(d.record(Outcome::Fresh(5), secs(12.5)), Some(Change::Began));
    }

    #[test]
    fn ends_after_successes_in_a_row() {
        let mut d = detector();
        fresh(&mut d, 0..5, 0.0);
        assert!(d.in_outage());
        assert_eq!(d.record(OK, secs(1.0)), None);
        // A failure between them starts the count over.
        assert_eq!(d.record(AGAIN, secs(1.0)), None);
        assert_eq!(d.record(OK, secs(2.0)), None);
        assert_eq!(d.record(OK, secs(2.0)), Some(Change::Ended));
        assert!(!d.in_outage());
        // The count starts afresh: the five failures that declared the
        // outage do not count toward the next one.
        assert_eq!(fresh(&mut d, 0..4, 3.0), None);
        assert_eq!(fresh(&mut d, 4..5, 3.0), Some(Change::Began));
    }

    #[test]
    fn a_zero_ratio_needs_no_success_at_all() {
        let mut d = Detector::new(
            &OutageSettings::new()
                .min_failing_keys(2)
                .max_success_ratio(0.0),
        );
        fresh(&mut d, 0..1, 0.0);
        d.record(OK, secs(0.0));
        assert_eq!(fresh(&mut d, 1..2, 0.0), None);
        assert_eq!(fresh(&mut d, 2..3, 0.0), Some(Change::Began));
    }

    #[test]
    fn times_out_of_order_and_at_the_ends_saturate() {
        let mut d = detector();
        for (k, t) in [Duration::MAX, Duration::ZERO, Duration::MAX, Duration::ZERO]
            .into_iter()
            .enumerate()
        {
            assert_eq!(d.record(Outcome::Fresh(k as u64), t), None);
        }
        // Looking back from 0 to a failure at the end of time: no time.
        assert_eq!(
            d.record(Outcome::Fresh(9), Duration::ZERO),
            Some(Change::Began)
        );
    }
}
