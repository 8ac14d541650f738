//! Port of `TestConcAlloc` (`pkg/util/flowcontrol/conc_alloc_test.go:30`):
//! 10,000 random allocation problems, each checked against the allocation's
//! defining properties with Kubernetes' slack of 10⁻¹⁰.
//!
//! Differences, on purpose: the random stream is this crate's seeded
//! generator, not Go's `math/rand` (same seed, same distributions, other
//! numbers); the required sum is unsigned, so Kubernetes' "negative sums"
//! refusal is a type error here rather than a case.

use fair_admission::{AllocationClass, AllocationError, allocate_concurrency};

use crate::Rng;

/// Floating-point slack (`fpSlack`).
const SLACK: f64 = 1e-10;

#[derive(Debug, Default)]
struct Seen {
    errors: usize,
    solutions: usize,
    styles: [usize; 4],
    at_lower: usize,
    at_upper: usize,
    proportional: usize,
}

#[test]
fn test_conc_alloc() {
    let mut rng = Rng::new(1_234_567_890);
    let mut seen = Seen::default();
    for _ in 0..10_000 {
        one_problem(&mut rng, &mut seen);
    }
    // Every style and every kind of answer was exercised.
    assert!(seen.styles.iter().all(|&n| n > 0), "{seen:?}");
    assert!(seen.errors > 0 && seen.solutions > 0, "{seen:?}");
    assert!(
        seen.at_lower > 0 && seen.at_upper > 0 && seen.proportional > 0,
        "{seen:?}"
    );
}

/// `test1ConcAlloc` (`conc_alloc_test.go:37`).
fn one_problem(rng: &mut Rng, seen: &mut Seen) {
    let len = [0, 1, 2, 3, 4, 6, 9][rng.intn(7)];
    let mut classes = vec![
        AllocationClass {
            target: 0.0,
            lower_bound: 0.0,
            upper_bound: 0.0,
        };
        len
    ];
    let mut required = 0u32;
    let mut style = 0;
    if len > 0 {
        match rng.intn(20) {
            0 => {
                style = 1; // bound from below
                required = rng.intn(len * 3) as u32;
                for (j, x) in partition(rng, len, f64::from(required))
                    .into_iter()
                    .enumerate()
                {
                    classes[j].lower_bound = x;
                    classes[j].target = x + 2.0 * rng.float64();
                    classes[j].upper_bound = x + 3.0 * rng.float64();
                }
            }
            1 => {
                style = 2; // bound from above
                required = rng.intn(len * 3) as u32 + 1;
                for (j, x) in partition(rng, len, f64::from(required))
                    .into_iter()
                    .enumerate()
                {
                    classes[j].upper_bound = x;
                    classes[j].lower_bound = x * (1.25 * rng.float64() - 1.0).max(0.0);
                    classes[j].target = classes[j].lower_bound + rng.float64();
                }
            }
            _ => {
                style = 3; // not set by bounds
                for class in classes.iter_mut() {
                    let x = (rng.float64() * 5.0 - 1.0).max(0.0);
                    class.lower_bound = x;
                    class.target = x + 2.0 * rng.float64();
                    class.upper_bound = x + 3.0 * rng.float64();
                }
                let (low, high) = sums(&classes);
                required = (low + (high - low) * rng.float64()).round() as u32;
            }
        }
    }
    seen.styles[style] += 1;
    while rng.float64() < 0.25 {
        // A class with a target of zero, at a random place.
        let before = classes.len();
        classes.push(AllocationClass {
            target: 0.0,
            lower_bound: 0.0,
            upper_bound: rng.float64() + 0.00001,
        });
        if before > 1 {
            let m = rng.intn(before);
            classes.swap(m, before);
        }
    }
    let (low, high) = sums(&classes);
    let required_f = f64::from(required);
    let expect_error = low - required_f > SLACK || required_f - high > SLACK;
    let problem = format!("required {required}, style {style}, classes {classes:?}");
    let allocation = match allocate_concurrency(required, &classes) {
        Err(err) => {
            assert!(expect_error, "{problem}: unexpected error {err}");
            assert!(
                matches!(
                    err,
                    AllocationError::LowerBoundsTooHigh { .. }
                        | AllocationError::UpperBoundsTooLow { .. }
                ),
                "{problem}: {err:?}"
            );
            seen.errors += 1;
            return;
        }
        Ok(allocation) => allocation,
    };
    assert!(
        !expect_error,
        "{problem}: expected an error, got {allocation:?}"
    );
    seen.solutions += 1;
    let sum: f64 = allocation.seats.iter().sum();
    assert!(rel_diff(required_f, sum) <= SLACK, "{problem}: sum {sum}");
    let fair = allocation.fair_fraction;
    for (i, (class, &got)) in classes.iter().zip(&allocation.seats).enumerate() {
        let proportional = fair * class.target.max(AllocationClass::MIN_TARGET);
        if proportional <= class.lower_bound {
            assert_eq!(
                got, class.lower_bound,
                "{problem}: class {i} not at its lower bound"
            );
            seen.at_lower += 1;
        } else if proportional >= class.upper_bound {
            assert_eq!(
                got, class.upper_bound,
                "{problem}: class {i} not at its upper bound"
            );
            seen.at_upper += 1;
        } else {
            assert!(
                rel_diff(proportional, got) <= SLACK,
                "{problem}: class {i} got {got}, not proportional {proportional}"
            );
            seen.proportional += 1;
        }
    }
}

fn sums(classes: &[AllocationClass]) -> (f64, f64) {
    let low = classes.iter().map(|c| c.lower_bound).sum();
    let high = classes.iter().map(|c| c.upper_bound).sum();
    (low, high)
}

/// `partition64` (`conc_alloc_test.go:131`): `n` random parts summing to `x`.
fn partition(rng: &mut Rng, n: usize, x: f64) -> Vec<f64> {
    let mut cuts: Vec<f64> = (0..n - 1).map(|_| rng.float64()).collect();
    cuts.sort_by(f64::total_cmp);
    let mut last = 0.0;
    let mut parts = Vec::with_capacity(n);
    for cut in cuts {
        parts.push((cut - last) * x);
        last = cut;
    }
    parts.push((1.0 - last) * x);
    parts
}

/// `f64RelDiff` (`conc_alloc_test.go:150`).
fn rel_diff(a: f64, b: f64) -> f64 {
    let den = a.abs().max(b.abs());
    if den == 0.0 { 0.0 } else { (a - b).abs() / den }
}

/// Kubernetes refuses bad classes before anything else; so does the port,
/// naming the class and field (`conc_alloc.go:130-138`).
#[test]
fn bad_classes_are_refused_by_index_and_field() {
    let ok = AllocationClass {
        target: 1.0,
        lower_bound: 0.0,
        upper_bound: 2.0,
    };
    let cases = [
        (
            AllocationClass {
                lower_bound: -1.0,
                ..ok
            },
            "lower_bound",
        ),
        (
            AllocationClass {
                target: f64::NAN,
                ..ok
            },
            "target",
        ),
        (
            AllocationClass {
                lower_bound: 1.5,
                ..ok
            },
            "target",
        ),
        (
            AllocationClass {
                upper_bound: -0.5,
                ..ok
            },
            "upper_bound",
        ),
        (
            AllocationClass {
                upper_bound: f64::INFINITY,
                ..ok
            },
            "upper_bound",
        ),
    ];
    for (bad, expected) in cases {
        match allocate_concurrency(1, &[ok, bad]) {
            Err(AllocationError::Class { index, field, .. }) => {
                assert_eq!((index, field), (1, expected), "{bad:?}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}
