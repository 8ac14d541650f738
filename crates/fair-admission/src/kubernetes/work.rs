//! Work estimates: how many seats a request takes, and for how long after
//! its handler returns; and the per-level cap on them.

use std::time::Duration;

use super::WorkEstimator;

/// What a request costs the server: seats while it runs, and seats held
/// after its response for work it leaves behind (a write's events going out
/// to its watchers). The request holds the larger of the two seat counts
/// from dispatch until `additional_latency` after its response ends.
///
/// Build one with [`seats`](Self::seats), from a [`WorkEstimator`] (which
/// looks at the request, as Kubernetes' estimators do), or any way you
/// like, and give it to `Class::work` (feature `tower`) or take
/// [`max_seats`](Self::max_seats) as the width for
/// [`Apf::admit`](crate::Apf::admit). An estimate is taken as it is: the
/// caps live in the estimators.
///
/// ```
/// use fair_admission::WorkEstimate;
/// use std::time::Duration;
/// let w = WorkEstimate::mutating(250);
/// assert_eq!((w.initial_seats, w.final_seats), (1, 10));
/// // 25 seats' worth of 5 ms, reshaped onto the 10 seats it may hold.
/// assert_eq!(w.additional_latency, Duration::from_micros(12_500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkEstimate {
    /// Seats while the handler runs.
    pub initial_seats: u32,
    /// Seats held after the response, for `additional_latency` (0: none).
    pub final_seats: u32,
    /// How long the request's seats stay held after its response ends.
    pub additional_latency: Duration,
}

impl Default for WorkEstimate {
    fn default() -> Self {
        WorkEstimate::seats(1)
    }
}

impl WorkEstimate {
    /// A request of `seats` seats that leaves nothing behind.
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// assert_eq!(WorkEstimate::seats(4).max_seats(), 4);
    /// assert_eq!(WorkEstimate::seats(500).max_seats(), 500);
    /// ```
    pub fn seats(seats: u32) -> Self {
        WorkEstimate {
            initial_seats: seats,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// Kubernetes' estimate for a create, update, patch or delete with
    /// `watchers` watches to notify, with the default [`WorkEstimator`]
    /// and no per-level cap: see [`WorkEstimator::mutating`].
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// use std::time::Duration;
    /// assert_eq!(WorkEstimate::mutating(9), WorkEstimate::seats(1));
    /// let w = WorkEstimate::mutating(35);
    /// assert_eq!((w.final_seats, w.additional_latency), (4, Duration::from_millis(5)));
    /// ```
    pub fn mutating(watchers: u64) -> Self {
        WorkEstimator::default().mutating(&super::RequestInfo::default(), None, watchers)
    }

    /// The seats the request holds: the larger of the two counts.
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// assert_eq!(WorkEstimate::mutating(100).max_seats(), 10);
    /// ```
    pub fn max_seats(&self) -> u32 {
        self.initial_seats.max(self.final_seats)
    }
}
