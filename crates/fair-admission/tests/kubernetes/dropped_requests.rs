//! Ports of `TestDroppedRequestsTracker` and
//! `TestDroppedRequestsTrackerPLIndependent`
//! (`pkg/util/flowcontrol/dropped_requests_tracker_test.go:28` and `:77`).
//!
//! Kubernetes keys one tracker by priority level name; here each level owns
//! a [`DroppedRequests`], so the second port gives each level its own.

use std::time::Duration;

use fair_admission::DroppedRequests;

/// The virtual clock's start: like Kubernetes' `time.Now()`, mid-second.
const START: Duration = Duration::from_millis(1_700_000_000_250);

#[test]
fn test_dropped_requests_tracker() {
    // (seconds elapsed, requests refused in that second, Retry-After after).
    let steps = [
        (0, 5, 1),
        (1, 11, 2),
        // No second raise right after one, despite many refusals.
        (2, 1, 2),
        (3, 11, 4),
        (4, 1, 4),
        (7, 1, 8),
        (11, 1, 8),
        (15, 1, 7),
        (17, 1, 6),
        (21, 14, 5),
        (22, 1, 10),
    ];
    let mut drops = DroppedRequests::new();
    let mut got = Vec::new();
    for (elapsed, refused, _) in steps {
        let now = START + Duration::from_secs(elapsed);
        for _ in 0..refused {
            drops.record(now);
        }
        got.push(drops.retry_after().as_secs());
    }
    let expected: Vec<u64> = steps.iter().map(|s| s.2).collect();
    assert_eq!(got, expected);
    assert_eq!(expected, [1, 2, 2, 4, 4, 8, 8, 7, 6, 5, 10]);
}

#[test]
fn test_dropped_requests_tracker_pl_independent() {
    let mut now = START;
    let mut levels: Vec<DroppedRequests> = (0..10).map(|_| DroppedRequests::new()).collect();
    // One refusal per level, then one more a second later: no raise.
    levels.iter_mut().for_each(|l| l.record(now));
    now += Duration::from_secs(1);
    for l in &mut levels {
        l.record(now);
        assert_eq!(l.retry_after(), Duration::from_secs(1));
    }
    // Five more on level 0 only: the next second raises level 0 alone.
    (0..5).for_each(|_| levels[0].record(now));
    now += Duration::from_secs(1);
    for (i, l) in levels.iter_mut().enumerate() {
        l.record(now);
        let expected = if i == 0 { 2 } else { 1 };
        assert_eq!(l.retry_after(), Duration::from_secs(expected), "pl-{i}");
    }
    // A level that never refused advises 1 s.
    assert_eq!(DroppedRequests::new().retry_after(), Duration::from_secs(1));
}

/// The value never passes 32 s, and falls back by a second per quiet
/// refusal second.
#[test]
fn retry_after_is_capped_and_recovers() {
    let mut drops = DroppedRequests::new();
    for second in 0..200 {
        for _ in 0..100 {
            drops.record(START + Duration::from_secs(second));
        }
    }
    assert_eq!(drops.retry_after(), DroppedRequests::MAX_RETRY_AFTER);
    // One refusal every 40 s: each new second sees fewer than 32 before it.
    for k in 1..=3 {
        drops.record(START + Duration::from_secs(200 + 40 * k));
    }
    assert_eq!(drops.retry_after(), Duration::from_secs(29));
}
