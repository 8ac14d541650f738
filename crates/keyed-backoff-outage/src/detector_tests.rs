//! The detector's tests: its cases, and its decisions against the rule
//! read directly off every outcome.

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

/// The rule read directly off every outcome since the last change of
/// state: walking back from a fresh failure to the latest fresh
/// failures of `min_failing_keys` distinct keys.
struct Rule {
    settings: OutageSettings,
    seen: Vec<(Outcome, Duration)>,
    streak: Option<u32>,
}

impl Rule {
    fn record(&mut self, outcome: Outcome, at: Duration) -> Option<(Change, Counts)> {
        if let Some(streak) = &mut self.streak {
            *streak = if outcome == OK { *streak + 1 } else { 0 };
            if *streak < self.settings.recovery_successes {
                return None;
            }
            (self.streak, self.seen) = (None, Vec::new());
            return Some((Change::Ended, Counts::default()));
        }
        self.seen.push((outcome, at));
        let Outcome::Fresh(_) = outcome else {
            return None;
        };
        let mut keys = std::collections::HashSet::new();
        let n = self.settings.min_failing_keys as usize;
        let first = (0..self.seen.len()).rev().find(
            |&i| matches!(self.seen[i].0, Outcome::Fresh(k) if keys.insert(k) && keys.len() == n),
        )?;
        let since = &self.seen[first..];
        let successes = since.iter().filter(|(o, _)| *o == OK).count() as u64;
        let counts = Counts {
            fresh_failures: n as u64,
            failures: since.len() as u64 - successes,
            successes,
            over: at.saturating_sub(self.seen[first].1),
        };
        let ratio = self.settings.max_success_ratio;
        let outcomes = (counts.failures + successes) as f64;
        if counts.over > self.settings.detection_window || successes as f64 > ratio * outcomes {
            return None;
        }
        (self.streak, self.seen) = (Some(0), Vec::new());
        Some((Change::Began, counts))
    }
}

#[test]
fn decides_as_the_rule_over_every_outcome_does() {
    let mut draw = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |below: u64| {
        draw ^= draw << 13;
        draw ^= draw >> 7;
        draw ^= draw << 17;
        draw % below
    };
    let mut changes = 0;
    for _ in 0..60 {
        let settings = OutageSettings::new()
            .detection_window(Duration::from_millis(100 + 100 * next(20)))
            .min_failing_keys(2 + next(6) as u32)
            .max_success_ratio([0.0, 0.1, 0.3, 0.6][next(4) as usize])
            .recovery_successes(1 + next(3) as u32);
        let mut d = Detector::new(&settings);
        let mut rule = Rule {
            settings,
            seen: Vec::new(),
            streak: None,
        };
        // Few keys, so that keys fail freshly again while counted.
        let (keys, mut at) = (2 + next(12), Duration::ZERO);
        for _ in 0..2_000 {
            at += Duration::from_millis(next(60));
            let outcome = match next(10) {
                0..=3 => Outcome::Fresh(next(keys).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                4..=6 => AGAIN,
                _ => OK,
            };
            let expected = rule.record(outcome, at);
            assert_eq!(d.record(outcome, at), expected.map(|(c, _)| c));
            if let Some((change, counts)) = expected {
                changes += 1;
                if change == Change::Began {
                    assert_eq!(d.declared(), counts);
                }
            }
        }
    }
    assert!(changes > 100, "{changes} changes: too few to compare");
}

#[test]
fn marks_of_keys_failing_again_behind_a_current_one_are_dropped_in_bulk() {
    // Key 0 fails freshly once and stays current at the front; keys 1 to 3
    // fail freshly again and again behind it. Their earlier marks are
    // stale, counted as such, and dropped all at once when the marks pass
    // twice the keys plus 16.
    let mut d = detector();
    let mut most = 0;
    for n in 0..200u64 {
        let key = if n == 0 { 0 } else { 1 + n % 3 };
        assert_eq!(d.record(Outcome::Fresh(key), secs(n as f64 * 0.01)), None);
        let stale = d
            .marks
            .iter()
            .filter(|m| d.latest.get(&m.key) != Some(&m.number))
            .count();
        assert_eq!(d.stale, stale, "after {n}");
        most = most.max(d.marks.len());
    }
    assert_eq!(d.latest.len(), 4);
    assert_eq!(most, 2 * 4 + 16, "the most marks kept at once");
    // Key 0 fails freshly again: its first mark goes stale, and the stale
    // marks at the front go with it, uncounted.
    assert_eq!(d.record(Outcome::Fresh(0), secs(3.0)), None);
    let current = |m: &Mark| d.latest.get(&m.key) == Some(&m.number);
    let stale = d.marks.iter().filter(|m| !current(m)).count();
    assert_eq!(d.stale, stale);
    assert!(d.marks.front().is_some_and(current));
}
