//! Each branch of the periodic adjustment, with limits worked by hand from
//! Kubernetes' rule.

use std::time::Duration;

use super::*;

const S: Duration = Duration::from_secs(1);

/// Levels of 12 nominal seats lending half of them, with no borrowing
/// limit on a 24-seat server, holding `demands` for one period; exempt
/// levels (nominal seats, demand) come first.
fn adjusted(exempt: &[(u32, f64)], demands: &[f64]) -> (Vec<u32>, Adjustment) {
    let half = LevelLimits::from_percent(12, 50, None, 24).unwrap();
    let mut levels: Vec<LevelBorrowing> = exempt
        .iter()
        .map(|&(nominal, demand)| {
            let mut l = LevelBorrowing::new(
                LevelLimits::new(nominal, 0, 0).unwrap(),
                true,
                Duration::ZERO,
            );
            l.set_demand(Duration::ZERO, demand);
            l
        })
        .collect();
    for &demand in demands {
        let mut l = LevelBorrowing::new(half, false, Duration::ZERO);
        l.set_demand(Duration::ZERO, demand);
        levels.push(l);
    }
    let adjustment = adjust_limits(10 * S, &mut levels);
    (
        levels.iter().map(LevelBorrowing::current_limit).collect(),
        adjustment,
    )
}

#[test]
fn a_busy_level_keeps_its_nominal_seats_when_the_other_uses_its_own() {
    let (limits, adjustment) = adjusted(&[], &[40.0, 12.0]);
    assert_eq!(limits, [12, 12]);
    assert_eq!(adjustment.error, None);
}

#[test]
fn an_idle_level_lends_down_to_its_minimum() {
    // Lower bounds 12 and 6, targets 40 and 6: the fair fraction 0.45
    // gives the busy level 18 and holds the idle one at its 6.
    let (limits, adjustment) = adjusted(&[], &[40.0, 0.0]);
    assert_eq!(limits, [18, 6]);
    assert!((adjustment.fair_fraction - 0.45).abs() < 1e-12);
}

#[test]
fn exempt_demand_counts_against_the_seats_shared() {
    // 24 − 10 = 14 seats for lower bounds summing to 18 over minimums of
    // 12: each level gets its minimum plus a third of its gap.
    let (limits, _) = adjusted(&[(0, 10.0)], &[40.0, 0.0]);
    assert_eq!(limits, [10, 8, 6]);
    // 24 − 20 = 4, below the minimums: every level gets its minimum.
    let (limits, _) = adjusted(&[(0, 20.0)], &[40.0, 0.0]);
    assert_eq!(limits, [20, 6, 6]);
}

#[test]
fn a_failed_allocation_keeps_the_previous_limits() {
    // An exempt level's 10 nominal seats count in the 34 to divide, but
    // the limited levels may hold at most 12 + 12: no allocation exists.
    let no_borrowing = LevelLimits::new(12, 6, 0).unwrap();
    let exempt = LevelLimits::new(10, 0, 0).unwrap();
    let mut levels = [
        LevelBorrowing::new(exempt, true, Duration::ZERO),
        LevelBorrowing::new(no_borrowing, false, Duration::ZERO),
        LevelBorrowing::new(no_borrowing, false, Duration::ZERO),
    ];
    let adjustment = adjust_limits(10 * S, &mut levels);
    assert!(matches!(
        adjustment.error,
        Some(AllocationError::UpperBoundsTooLow { required: 34, .. })
    ));
    let limits: Vec<u32> = levels.iter().map(LevelBorrowing::current_limit).collect();
    assert_eq!(limits, [10, 9, 9]);
}

#[test]
fn only_exempt_levels_change_nothing() {
    let exempt = LevelLimits::new(10, 0, 0).unwrap();
    let mut levels = [LevelBorrowing::new(exempt, true, Duration::ZERO)];
    levels[0].set_demand(Duration::ZERO, 30.0);
    adjust_limits(10 * S, &mut levels);
    assert_eq!(levels[0].current_limit(), 10);
    assert_eq!(levels[0].stats().high_watermark, 30);
}

#[test]
fn the_smoothed_demand_sets_the_target_and_decays() {
    let half = LevelLimits::from_percent(12, 50, None, 24).unwrap();
    let mut l = LevelBorrowing::new(half, false, Duration::ZERO);
    l.set_demand(Duration::ZERO, 30.0);
    adjust_limits(10 * S, std::slice::from_mut(&mut l));
    assert_eq!((l.lower_bound(), l.target()), (12, 30.0));
    l.set_demand(10 * S, 0.0);
    adjust_limits(20 * S, std::slice::from_mut(&mut l));
    // The period started at 30, so its high watermark is still 30.
    assert_eq!(l.lower_bound(), 12);
    assert!((l.target() - 30.0 * SeatDemandStats::SMOOTHING).abs() < 1e-9);
    adjust_limits(30 * S, std::slice::from_mut(&mut l));
    assert_eq!(l.lower_bound(), 6);
}

#[test]
fn time_going_back_adds_nothing() {
    let mut demand = DemandIntegrator::new(10 * S);
    demand.set(5 * S, 4.0);
    let r = demand.reset(12 * S);
    assert_eq!((r.duration, r.average), (2 * S, 4.0));
}
