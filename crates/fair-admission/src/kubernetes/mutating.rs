//! Kubernetes' estimate for a mutating request: one seat while it runs,
//! and seats held afterwards for the events it sends its watchers.

use std::time::Duration;

use super::{RequestInfo, WorkEstimate, WorkEstimator};

/// Kubernetes' unit of work: 10⁻⁸ seat-seconds.
const SEAT_SECONDS_SCALE: f64 = 1e8;

impl WorkEstimator {
    /// Kubernetes' estimate for a create, update, patch or delete whose
    /// change reaches `watchers` watches: one seat while it runs; from
    /// [`WATCHES_PER_SEAT`](Self::WATCHES_PER_SEAT) watchers on, one seat
    /// per that many watchers, each for
    /// [`EVENT_SEAT_TIME`](Self::EVENT_SEAT_TIME), reshaped onto at most
    /// the cap (the level's, at most
    /// [`maximum_mutating_seats`](Self::maximum_mutating_seats)) held
    /// after the response for correspondingly longer. Creating a service
    /// account token sends no event and holds nothing after.
    ///
    /// ```
    /// use fair_admission::{RequestInfo, WorkEstimator};
    /// use std::time::Duration;
    /// let e = WorkEstimator::default();
    /// let patch = RequestInfo { verb: "patch", resource: "foos", ..RequestInfo::default() };
    /// let w = e.mutating(&patch, Some(5), 100);
    /// // 10 seats of 5 ms reshaped onto the level's 5: 10 ms each.
    /// assert_eq!((w.initial_seats, w.final_seats), (1, 5));
    /// assert_eq!(w.additional_latency, Duration::from_millis(10));
    /// let token = RequestInfo { verb: "create", resource: "serviceaccounts", subresource: "token", ..patch };
    /// assert_eq!(e.mutating(&token, None, 5_777).max_seats(), 1);
    /// ```
    pub fn mutating(
        &self,
        request: &RequestInfo<'_>,
        level_max_seats: Option<u32>,
        watchers: u64,
    ) -> WorkEstimate {
        let max = Self::cap(level_max_seats, self.maximum_mutating_seats);
        if request.resource == "serviceaccounts" && request.subresource == "token" {
            return WorkEstimate::seats(Self::MINIMUM_SEATS);
        }
        let mut estimate = WorkEstimate::seats(1);
        if watchers >= Self::WATCHES_PER_SEAT {
            let needed = watchers.div_ceil(Self::WATCHES_PER_SEAT) as f64;
            // Work in Kubernetes' fixed-point seat-seconds, rounded as it
            // rounds, then spread over the seats held (truncated to ns).
            let nanos = Self::EVENT_SEAT_TIME.as_nanos() as f64;
            let work = (needed * nanos / (1e9 / SEAT_SECONDS_SCALE)).round();
            let held = needed.min(f64::from(max));
            let per_seat = work / held * (1e9 / SEAT_SECONDS_SCALE);
            estimate.final_seats = held as u32;
            estimate.additional_latency = Duration::from_nanos(per_seat as u64);
        }
        estimate
    }
}
