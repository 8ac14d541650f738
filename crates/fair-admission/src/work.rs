//! Work estimates: how many seats a request takes, and for how long after
//! its handler returns, from what it does (Kubernetes' LIST and mutating
//! request estimators).

use std::time::Duration;

use crate::MAX_SEATS_PER_REQUEST;

/// Objects one seat processes, for a LIST: Kubernetes' figure.
pub const OBJECTS_PER_SEAT: u64 = 100;

/// Watchers one seat notifies, for a mutating request: Kubernetes' figure.
pub const WATCHES_PER_SEAT: u64 = 10;

/// The time one seat takes to send one event to its watchers: Kubernetes'
/// figure, 5 ms.
pub const EVENT_SEAT_TIME: Duration = Duration::from_millis(5);

/// What a request costs the server: seats while it runs, and seats held
/// after its response for work it leaves behind (a write's events going out
/// to its watchers). The request holds the larger of the two seat counts
/// from dispatch until `additional_latency` after its response ends.
///
/// Build one with [`seats`](Self::seats), [`list`](Self::list) or
/// [`mutating`](Self::mutating), or any way you like, and give it to
/// `Class::work` (feature `tower`) or take
/// [`max_seats`](Self::max_seats) as the width for [`Apf::admit`](crate::Apf::admit).
///
/// ```
/// use fair_admission::WorkEstimate;
/// use std::time::Duration;
/// let w = WorkEstimate::mutating(250);
/// assert_eq!((w.initial_seats, w.final_seats), (1, 10));
/// // 25 seats' worth of 5 ms, spread over the 10 seats it may hold.
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

/// How many objects a LIST will go through, as an object count tracker
/// reports them.
///
/// ```
/// use fair_admission::ObjectCount;
/// let counted = ObjectCount::Known(12_000);
/// assert_ne!(counted, ObjectCount::Stale);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectCount {
    /// The resource holds this many objects.
    Known(u64),
    /// The count has not been refreshed for too long: the store may be
    /// struggling, so the LIST is charged the most seats.
    Stale,
    /// No count for the resource (unknown, or served elsewhere, as an
    /// aggregated API is): the LIST is charged one seat.
    Unknown,
}

/// A LIST request as the estimator sees it.
///
/// ```
/// use fair_admission::{ListRequest, ObjectCount, WorkEstimate};
/// let list = ListRequest { stored: ObjectCount::Known(5_000), limit: Some(500), selector: false, from_cache: false };
/// assert_eq!(WorkEstimate::list(&list).initial_seats, 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRequest {
    /// Objects stored for the resource listed.
    pub stored: ObjectCount,
    /// The page size asked for (`limit`), if any.
    pub limit: Option<u64>,
    /// Whether a label or field selector filters the result.
    pub selector: bool,
    /// Whether it is served from the watch cache (it then goes through
    /// every stored object, whatever the limit).
    pub from_cache: bool,
}

impl WorkEstimate {
    /// A request of `seats` seats (taken as 1 to [`MAX_SEATS_PER_REQUEST`])
    /// that leaves nothing behind.
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// assert_eq!(WorkEstimate::seats(4).max_seats(), 4);
    /// assert_eq!(WorkEstimate::seats(0).max_seats(), 1);
    /// assert_eq!(WorkEstimate::seats(500).max_seats(), 10);
    /// ```
    pub fn seats(seats: u32) -> Self {
        WorkEstimate {
            initial_seats: clamp_seats(u64::from(seats)),
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// Kubernetes' estimate for a LIST: one seat per [`OBJECTS_PER_SEAT`]
    /// objects it goes through, from 1 to [`MAX_SEATS_PER_REQUEST`]. From
    /// the watch cache it goes through every stored object; from storage
    /// with a selector, every stored object plus the page; from storage
    /// without one, twice the page. The page is the `limit` if it is below
    /// the count, else the count. A stale count charges the most seats, an
    /// unknown one the fewest.
    ///
    /// ```
    /// use fair_admission::{ListRequest, ObjectCount, WorkEstimate};
    /// let pods = |limit, selector, from_cache| ListRequest {
    ///     stored: ObjectCount::Known(1_000), limit, selector, from_cache,
    /// };
    /// let seats = |l: ListRequest| WorkEstimate::list(&l).initial_seats;
    /// assert_eq!(seats(pods(Some(100), false, false)), 2);  // 2 × 100 objects
    /// assert_eq!(seats(pods(Some(100), true, false)), 10);  // 1,000 + 100
    /// assert_eq!(seats(pods(None, false, true)), 10);       // all 1,000
    /// assert_eq!(seats(pods(Some(50), false, false)), 1);
    /// let unknown = ListRequest { stored: ObjectCount::Unknown, ..pods(None, false, false) };
    /// assert_eq!(seats(unknown), 1);
    /// ```
    pub fn list(request: &ListRequest) -> Self {
        let stored = match request.stored {
            ObjectCount::Known(n) => n,
            ObjectCount::Stale => return WorkEstimate::seats(MAX_SEATS_PER_REQUEST),
            ObjectCount::Unknown => return WorkEstimate::seats(1),
        };
        let page = request
            .limit
            .filter(|&l| l > 0 && l < stored)
            .unwrap_or(stored);
        let objects = if request.from_cache {
            stored
        } else if request.selector {
            stored.saturating_add(page)
        } else {
            page.saturating_mul(2)
        };
        WorkEstimate {
            initial_seats: clamp_seats(objects.div_ceil(OBJECTS_PER_SEAT)),
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// Kubernetes' estimate for a create, update, patch or delete with
    /// `watchers` watches to notify: one seat while it runs, and from
    /// [`WATCHES_PER_SEAT`] watchers on, one seat per that many watchers
    /// (at most [`MAX_SEATS_PER_REQUEST`]) held afterwards for as long as
    /// those seats take to send the event ([`EVENT_SEAT_TIME`] each),
    /// spread over the seats held.
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// use std::time::Duration;
    /// assert_eq!(WorkEstimate::mutating(9), WorkEstimate::seats(1));
    /// let w = WorkEstimate::mutating(35);
    /// assert_eq!((w.final_seats, w.additional_latency), (4, Duration::from_millis(5)));
    /// ```
    pub fn mutating(watchers: u64) -> Self {
        if watchers < WATCHES_PER_SEAT {
            return WorkEstimate::seats(1);
        }
        let needed = watchers.div_ceil(WATCHES_PER_SEAT);
        let held = clamp_seats(needed);
        // `needed` seats for one event's time, reshaped onto `held` seats.
        let total = EVENT_SEAT_TIME.saturating_mul(u32::try_from(needed).unwrap_or(u32::MAX));
        WorkEstimate {
            initial_seats: 1,
            final_seats: held,
            additional_latency: total / held,
        }
    }

    /// The seats the request holds: the larger of the two counts, from 1
    /// to [`MAX_SEATS_PER_REQUEST`].
    ///
    /// ```
    /// use fair_admission::WorkEstimate;
    /// assert_eq!(WorkEstimate::mutating(100).max_seats(), 10);
    /// ```
    pub fn max_seats(&self) -> u32 {
        clamp_seats(u64::from(self.initial_seats.max(self.final_seats)))
    }
}

fn clamp_seats(seats: u64) -> u32 {
    u32::try_from(seats.clamp(1, u64::from(MAX_SEATS_PER_REQUEST))).unwrap_or(1)
}
