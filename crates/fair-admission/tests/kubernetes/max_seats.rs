//! Port of `Test_GetMaxSeats` (`pkg/util/flowcontrol/max_seats_test.go:34`).
//!
//! Kubernetes configures a server of `n` seats with one queuing level of
//! 10,000 shares next to its mandatory levels (exempt, 0 shares; catch-all,
//! 5 shares), so the level's nominal seats are `ceil(n × 10000 / 10005)`,
//! which is `n` here, and reads back the per-level cap its controller
//! stored. That figure is uncapped (15 and 30 for the two largest cases);
//! the estimators cap it at their own maximum, 10 for a mutating request,
//! which the second half checks.

use fair_admission::{RequestInfo, WorkEstimator};

/// (server seats, hand size, Kubernetes' expected max seats).
const CASES: [(u32, u32, u32); 9] = [
    (5, 6, 1),
    (10, 6, 1),
    (15, 6, 2),
    (20, 6, 3),
    (35, 6, 5),
    (100, 6, 15),
    (200, 6, 30),
    (10, 1, 2),
    (100, 20, 5),
];

/// A level's nominal seats as Kubernetes' controller derives them.
fn nominal(server: u32, shares: u32, share_sum: u32) -> u32 {
    (f64::from(server) * f64::from(shares) / f64::from(share_sum)).ceil() as u32
}

#[test]
fn test_get_max_seats() {
    let got: Vec<u32> = CASES
        .iter()
        .map(|&(server, hand, _)| {
            let nominal = nominal(server, 10_000, 10_005);
            assert_eq!(nominal, server);
            WorkEstimator::level_max_seats(nominal, hand).unwrap()
        })
        .collect();
    let expected: Vec<u32> = CASES.iter().map(|c| c.2).collect();
    assert_eq!(got, expected);
}

/// What a request may actually take on those levels: the level's cap,
/// capped again by the estimator (a write with 1,000 watchers wants 100).
#[test]
fn the_estimators_cap_the_level_figure() {
    let write = RequestInfo {
        verb: "update",
        resource: "configmaps",
        ..RequestInfo::default()
    };
    let estimator = WorkEstimator::default();
    let held: Vec<u32> = CASES
        .iter()
        .map(|&(server, hand, _)| {
            let cap = WorkEstimator::level_max_seats(server, hand).unwrap();
            estimator.mutating(&write, Some(cap), 1_000).max_seats()
        })
        .collect();
    assert_eq!(held, [1, 1, 2, 3, 5, 10, 10, 2, 5]);
}

#[test]
fn a_hand_of_zero_is_refused() {
    let err = WorkEstimator::level_max_seats(10, 0).unwrap_err();
    assert_eq!(err.field(), "hand_size");
}
