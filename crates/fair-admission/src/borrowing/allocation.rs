//! Dividing a whole number of seats between classes with bounds and
//! targets: Kubernetes' concurrency allocation.

use std::fmt;

/// One class of a concurrency allocation (a priority level): the seats it
/// should get in proportion to, and the least and most it may get.
///
/// A valid class has `0 <= lower_bound <= target` and
/// `lower_bound <= upper_bound`, all finite. A target below
/// [`MIN_TARGET`](Self::MIN_TARGET) counts as `MIN_TARGET`, so that a class
/// that wants nothing still gets its share of what nobody else can take.
///
/// ```
/// use fair_admission::AllocationClass;
/// let busy = AllocationClass { target: 40.0, lower_bound: 12.0, upper_bound: 36.0 };
/// assert!(busy.target >= busy.lower_bound);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocationClass {
    /// What the class would like: allocations are proportional to targets
    /// wherever no bound applies.
    pub target: f64,
    /// The least the class gets.
    pub lower_bound: f64,
    /// The most the class gets.
    pub upper_bound: f64,
}

impl AllocationClass {
    /// The smallest target an allocation works with (Kubernetes' figure):
    /// smaller targets, zero included, count as this.
    pub const MIN_TARGET: f64 = 0.001;
}

/// The answer of [`allocate_concurrency`]: each class's seats, and the fair
/// fraction they follow.
///
/// ```
/// use fair_admission::{allocate_concurrency, AllocationClass};
/// let class = |target| AllocationClass { target, lower_bound: 0.0, upper_bound: 100.0 };
/// let a = allocate_concurrency(30, &[class(1.0), class(2.0)])?;
/// assert_eq!(a.seats, [10.0, 20.0]);
/// assert_eq!(a.fair_fraction, 10.0);
/// # Ok::<(), fair_admission::AllocationError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Allocation {
    /// Each class's seats, in the order the classes were given (not
    /// rounded: they sum to the required total).
    pub seats: Vec<f64>,
    /// The fair fraction `f`: a class not held at a bound gets
    /// `f × target`.
    pub fair_fraction: f64,
}

/// Why [`allocate_concurrency`] has no answer.
///
/// ```
/// use fair_admission::{allocate_concurrency, AllocationClass, AllocationError};
/// let tight = AllocationClass { target: 1.0, lower_bound: 0.0, upper_bound: 2.0 };
/// let err = allocate_concurrency(5, &[tight, tight]).unwrap_err();
/// assert!(matches!(err, AllocationError::UpperBoundsTooLow { .. }));
/// assert_eq!(err.to_string(), "the upper bounds sum to 4, below the required 5 seats");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AllocationError {
    /// A class's field is outside its range.
    Class {
        /// The class's index.
        index: usize,
        /// `lower_bound`, `target` or `upper_bound`.
        field: &'static str,
        /// What the field accepts, in words.
        allowed: &'static str,
        /// The value given.
        got: f64,
    },
    /// The lower bounds alone exceed the seats to divide.
    LowerBoundsTooHigh {
        /// The sum of the lower bounds.
        sum: f64,
        /// The seats to divide.
        required: u32,
    },
    /// The upper bounds together fall short of the seats to divide.
    UpperBoundsTooLow {
        /// The sum of the upper bounds.
        sum: f64,
        /// The seats to divide.
        required: u32,
    },
    /// Rounding left no fair fraction to find (the sweep over the bounds
    /// ran out of bounds before reaching the total).
    NoSolution,
}

impl fmt::Display for AllocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocationError::Class {
                index,
                field,
                allowed,
                got,
            } => write!(
                f,
                "class {index}: invalid {field}: must be {allowed}, got {got}"
            ),
            AllocationError::LowerBoundsTooHigh { sum, required } => write!(
                f,
                "the lower bounds sum to {sum}, above the required {required} seats"
            ),
            AllocationError::UpperBoundsTooLow { sum, required } => write!(
                f,
                "the upper bounds sum to {sum}, below the required {required} seats"
            ),
            AllocationError::NoSolution => {
                f.write_str("ran out of bounds before reaching the required seats")
            }
        }
    }
}

impl std::error::Error for AllocationError {}

/// Slack within which the required total counts as reached by a sum of
/// bounds (Kubernetes' figure).
const EPSILON: f64 = 1e-7;

/// Divides `required` seats between `classes` as Kubernetes divides its
/// server's seats between priority levels: the one fair fraction `f` such
/// that every class gets `f × target` clamped to its bounds, and the
/// allocations sum to `required`. Each class then has exactly one of: its
/// allocation is `f × target`; or it is its lower bound, which is above
/// `f × target`; or it is its upper bound, which is below `f × target`.
///
/// When the lower bounds sum to the total (within 10⁻⁷), every class gets
/// its lower bound and `f` is the smallest ratio lower bound / target; when
/// the upper bounds do, every class gets its upper bound and `f` is the
/// largest ratio upper bound / target. Zero seats give zeros and `f = 0`.
///
/// # Errors
///
/// [`AllocationError::Class`] for a class that is not finite or breaks
/// `0 <= lower_bound <= target` or `lower_bound <= upper_bound` (the first
/// such field, in that order); [`LowerBoundsTooHigh`] or
/// [`UpperBoundsTooLow`] when the bounds leave no answer (by more than
/// 10⁻⁷).
///
/// [`LowerBoundsTooHigh`]: AllocationError::LowerBoundsTooHigh
/// [`UpperBoundsTooLow`]: AllocationError::UpperBoundsTooLow
///
/// ```
/// use fair_admission::{allocate_concurrency, AllocationClass};
/// // Three levels share 30 seats by targets 10, 10, 40; the last may
/// // not take more than 15, and the first needs at least 8.
/// let classes = [
///     AllocationClass { target: 10.0, lower_bound: 8.0, upper_bound: 30.0 },
///     AllocationClass { target: 10.0, lower_bound: 0.0, upper_bound: 30.0 },
///     AllocationClass { target: 40.0, lower_bound: 0.0, upper_bound: 15.0 },
/// ];
/// let a = allocate_concurrency(30, &classes)?;
/// assert_eq!(a.seats, [8.0, 7.0, 15.0]);
/// assert!((a.fair_fraction - 0.7).abs() < 1e-12);
///
/// let bad = AllocationClass { target: 1.0, lower_bound: -1.0, upper_bound: 2.0 };
/// let err = allocate_concurrency(1, &[bad]).unwrap_err();
/// assert_eq!(err.to_string(), "class 0: invalid lower_bound: must be finite and at least 0, got -1");
/// # Ok::<(), fair_admission::AllocationError>(())
/// ```
pub fn allocate_concurrency(
    required: u32,
    classes: &[AllocationClass],
) -> Result<Allocation, AllocationError> {
    let required_f = f64::from(required);
    let relative = relative_classes(classes)?;
    let low_sum: f64 = classes.iter().map(|c| c.lower_bound).sum();
    let high_sum: f64 = classes.iter().map(|c| c.upper_bound).sum();
    if low_sum - required_f > EPSILON {
        return Err(AllocationError::LowerBoundsTooHigh {
            sum: low_sum,
            required,
        });
    }
    if required_f - high_sum > EPSILON {
        return Err(AllocationError::UpperBoundsTooLow {
            sum: high_sum,
            required,
        });
    }
    let answer = |seats: Vec<f64>, fair_fraction| Allocation {
        seats,
        fair_fraction,
    };
    if required == 0 {
        return Ok(answer(vec![0.0; classes.len()], 0.0));
    }
    // Kubernetes starts its ranges at the largest float32.
    let start = f64::from(f32::MAX);
    let lower_min = relative.iter().map(|r| r.lower).fold(start, f64::min);
    let lower_max = relative.iter().map(|r| r.lower).fold(0.0, f64::max);
    let upper_min = relative.iter().map(|r| r.upper).fold(start, f64::min);
    let upper_max = relative.iter().map(|r| r.upper).fold(0.0, f64::max);
    if low_sum - required_f > -EPSILON {
        // No room above the lower bounds.
        let seats = classes.iter().map(|c| c.lower_bound).collect();
        return Ok(answer(seats, lower_min));
    }
    if required_f - high_sum > -EPSILON {
        // No room below the upper bounds.
        let seats = classes.iter().map(|c| c.upper_bound).collect();
        return Ok(answer(seats, upper_max));
    }
    let target_sum: f64 = relative.iter().map(|r| r.target).sum();
    let unbounded = required_f / target_sum;
    if lower_max <= unbounded && unbounded <= upper_min {
        // No bound matters.
        let seats = relative.iter().map(|r| r.target * unbounded).collect();
        return Ok(answer(seats, unbounded));
    }
    let fair = sweep(required_f, low_sum, lower_min, &relative)?;
    let seats = classes
        .iter()
        .zip(&relative)
        .map(|(c, r)| c.lower_bound.max(c.upper_bound.min(fair * r.target)))
        .collect();
    Ok(answer(seats, fair))
}

/// A class with its target raised to the minimum and its bounds divided by
/// it: the fair fractions at which each bound starts or stops applying.
struct Relative {
    target: f64,
    lower: f64,
    upper: f64,
}

/// Checks every class and derives its relative bounds.
fn relative_classes(classes: &[AllocationClass]) -> Result<Vec<Relative>, AllocationError> {
    let refuse = |index, field, allowed, got| {
        Err(AllocationError::Class {
            index,
            field,
            allowed,
            got,
        })
    };
    let mut out = Vec::with_capacity(classes.len());
    for (i, c) in classes.iter().enumerate() {
        if !(c.lower_bound.is_finite() && c.lower_bound >= 0.0) {
            return refuse(i, "lower_bound", "finite and at least 0", c.lower_bound);
        }
        if !(c.target.is_finite() && c.target >= c.lower_bound) {
            return refuse(i, "target", "finite and at least the lower bound", c.target);
        }
        if !(c.upper_bound.is_finite() && c.upper_bound >= c.lower_bound) {
            let allowed = "finite and at least the lower bound";
            return refuse(i, "upper_bound", allowed, c.upper_bound);
        }
        let target = c.target.max(AllocationClass::MIN_TARGET);
        out.push(Relative {
            target,
            lower: c.lower_bound / target,
            upper: c.upper_bound / target,
        });
    }
    Ok(out)
}

/// Finds the fair fraction when some bounds matter: walks the relative
/// bounds in increasing order from the smallest lower one, keeping the sum
/// of the targets of the classes between their bounds (those whose
/// allocation still grows with the fraction), until the allocations reach
/// `required`.
fn sweep(
    required: f64,
    low_sum: f64,
    lower_min: f64,
    relative: &[Relative],
) -> Result<f64, AllocationError> {
    // Each bound as (fraction, class, is it the lower bound), ascending.
    let mut bounds: Vec<(f64, usize, bool)> = relative
        .iter()
        .enumerate()
        .flat_map(|(i, r)| [(r.lower, i, true), (r.upper, i, false)])
        .collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut sum = low_sum;
    let mut fair = lower_min;
    let (mut growing_targets, mut pending_targets) = (0.0, 0.0);
    let (mut growing, mut pending) = (0i64, 0i64);
    let mut next = 0;
    while sum < required {
        // Take in every bound at the current fraction: they all govern the
        // next stretch. Stop at the first bound beyond it.
        let next_bound = loop {
            growing_targets += pending_targets;
            growing += pending;
            let &(bound, i, lower) = bounds.get(next).ok_or(AllocationError::NoSolution)?;
            let sign = if lower { 1.0 } else { -1.0 };
            pending = sign as i64;
            pending_targets = sign * relative[i].target;
            next += 1;
            if bound > fair {
                break bound;
            }
        };
        if growing == 0 {
            // Nothing grows over this stretch: skip it.
            fair = next_bound;
            continue;
        }
        let reached = fair + (required - sum) / growing_targets;
        if reached <= next_bound {
            return Ok(reached);
        }
        sum += (next_bound - fair) * growing_targets;
        fair = next_bound;
    }
    Ok(fair)
}
