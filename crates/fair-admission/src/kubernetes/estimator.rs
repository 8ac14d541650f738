//! Kubernetes' work estimator: the estimate for a request from what it is
//! (its verb, resource and query), dispatched to the LIST and mutating
//! estimators.

use std::time::Duration;

use crate::ConfigError;

use super::{ObjectStats, WorkEstimate};

/// A request as Kubernetes' work estimator sees it (its `RequestInfo` and
/// query string). Fields left empty are absent.
///
/// ```
/// use fair_admission::RequestInfo;
/// let list = RequestInfo {
///     verb: "list",
///     resource: "pods",
///     query: "limit=500&resourceVersion=0",
///     ..RequestInfo::default()
/// };
/// # let _ = list;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestInfo<'a> {
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, …
    pub verb: &'a str,
    /// The API group (empty for the core group).
    pub api_group: &'a str,
    /// The resource (`pods`).
    pub resource: &'a str,
    /// The subresource (`status`, `token`).
    pub subresource: &'a str,
    /// The object's name, for a request about one object (a LIST with a
    /// `metadata.name` field selector has it too).
    pub name: &'a str,
    /// The URL query string, without the `?`.
    pub query: &'a str,
}

/// Kubernetes' work estimator, with its configuration. Defaults are
/// Kubernetes' today: LISTs cost by the memory they load (at most 100
/// seats), mutating requests at most 10 seats, a WATCH that starts with
/// its initial events costs as a LIST, and consistent reads are served
/// from storage (as when the store cannot report watch progress).
///
/// Each estimate is capped by the level's own cap when given
/// ([`level_max_seats`](Self::level_max_seats), `None` or 0 for none) and by
/// the estimator's cap for its kind, and is at least one seat.
///
/// ```
/// use fair_admission::{ObjectStats, RequestInfo, WorkEstimator};
/// let estimator = WorkEstimator::default();
/// let events = RequestInfo { verb: "list", resource: "events", query: "limit=399", ..RequestInfo::default() };
/// let stats = ObjectStats::Known { count: 699, average_size: 10_000 };
/// // 399 objects of 10 kB read from storage: 40 seats of 100 kB.
/// assert_eq!(estimator.list(&events, None, stats).initial_seats, 40);
/// // A level whose cap is 20 seats.
/// assert_eq!(estimator.list(&events, Some(20), stats).initial_seats, 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkEstimator {
    /// LISTs cost by the memory they load (Kubernetes'
    /// `SizeBasedListCostEstimate`, on by default); off, by the objects
    /// they go through, one seat per [`OBJECTS_PER_SEAT`](Self::OBJECTS_PER_SEAT).
    pub size_based_lists: bool,
    /// The most seats a LIST takes: 100 (Kubernetes uses 10 with
    /// count-based LISTs).
    pub maximum_list_seats: u32,
    /// The most seats a mutating request holds: 10.
    pub maximum_mutating_seats: u32,
    /// A WATCH that sends its initial events costs as a LIST (Kubernetes'
    /// `WatchList`, on by default); off, every WATCH takes one seat.
    pub watch_list: bool,
    /// Consistent LISTs (no resource version) are served from the watch
    /// cache (Kubernetes does so when its store reports watch progress);
    /// off by default: they are read from storage.
    pub consistent_reads_from_cache: bool,
}

impl Default for WorkEstimator {
    fn default() -> Self {
        WorkEstimator {
            size_based_lists: true,
            maximum_list_seats: 100,
            maximum_mutating_seats: 10,
            watch_list: true,
            consistent_reads_from_cache: false,
        }
    }
}

impl WorkEstimator {
    /// The fewest seats a request takes: 1.
    pub const MINIMUM_SEATS: u32 = 1;
    /// Objects one seat goes through, for a count-based LIST: 100.
    pub const OBJECTS_PER_SEAT: u64 = 100;
    /// Bytes one seat loads, for a size-based LIST: 100 kB.
    pub const BYTES_PER_SEAT: u64 = 100_000;
    /// The most memory a LIST from the watch cache is charged for (it
    /// streams): 1 MB.
    pub const CACHE_MEMORY_CAP: u64 = 1_000_000;
    /// The size assumed for objects of unknown size: 1.5 MB, the largest
    /// object etcd accepts by default.
    pub const MAX_OBJECT_SIZE: u64 = 1_500_000;
    /// The object count assumed when the count is stale: 10⁹.
    pub const STALE_OBJECT_COUNT: u64 = 1_000_000_000;
    /// Watchers one seat notifies, for a mutating request: 10.
    pub const WATCHES_PER_SEAT: u64 = 10;
    /// The time one seat takes to send one event: 5 ms.
    pub const EVENT_SEAT_TIME: Duration = Duration::from_millis(5);
    /// The share of a level's nominal seats one request may take: 15 %.
    pub const LEVEL_MAX_SEATS_SHARE: f64 = 0.15;

    /// The estimate for `request`, by its verb as Kubernetes dispatches
    /// it: `list` (and `watch` with [`watch_list`](Self::watch_list)) by
    /// [`list`](Self::list), asking `stats` for the resource's objects;
    /// `create`, `update`, `patch` and `delete` by
    /// [`mutating`](Self::mutating), asking `watchers` how many watches the
    /// change reaches; anything else takes one seat.
    ///
    /// ```
    /// use fair_admission::{ObjectStats, RequestInfo, WorkEstimator};
    /// let e = WorkEstimator::default();
    /// let get = RequestInfo { verb: "get", resource: "pods", name: "web-0", ..RequestInfo::default() };
    /// let create = RequestInfo { verb: "create", resource: "pods", ..get };
    /// let w = |r: &RequestInfo| e.estimate(r, Some(10), |_| ObjectStats::Unknown, |_| 29);
    /// assert_eq!(w(&get).max_seats(), 1);
    /// assert_eq!((w(&create).initial_seats, w(&create).final_seats), (1, 3));
    /// ```
    pub fn estimate(
        &self,
        request: &RequestInfo<'_>,
        level_max_seats: Option<u32>,
        stats: impl FnOnce(&RequestInfo<'_>) -> ObjectStats,
        watchers: impl FnOnce(&RequestInfo<'_>) -> u64,
    ) -> WorkEstimate {
        match request.verb {
            "list" => self.list(request, level_max_seats, stats(request)),
            "watch" if self.watch_list => self.list(request, level_max_seats, stats(request)),
            "create" | "update" | "patch" | "delete" => {
                self.mutating(request, level_max_seats, watchers(request))
            }
            _ => WorkEstimate::seats(Self::MINIMUM_SEATS),
        }
    }

    /// The most seats one request may take on a queuing level of `nominal`
    /// seats dealing hands of `hand_size`, as Kubernetes' APF controller
    /// sets it: `max(1, min(ceil(0.15 × nominal), nominal / hand_size))`,
    /// the division rounding down. Kubernetes keeps this figure uncapped;
    /// the estimators then cap it by their own maximum (10 for a mutating
    /// request). Levels that do not queue have no such cap.
    ///
    /// # Errors
    ///
    /// A `hand_size` of 0 is refused.
    ///
    /// ```
    /// use fair_admission::WorkEstimator;
    /// assert_eq!(WorkEstimator::level_max_seats(20, 6)?, 3);   // min(3, 3)
    /// assert_eq!(WorkEstimator::level_max_seats(100, 20)?, 5); // min(15, 5)
    /// assert_eq!(WorkEstimator::level_max_seats(5, 6)?, 1);    // min(1, 0), at least 1
    /// assert_eq!(WorkEstimator::level_max_seats(200, 6)?, 30); // uncapped here
    /// assert_eq!(WorkEstimator::level_max_seats(10, 0).unwrap_err().field(), "hand_size");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_max_seats(nominal: u32, hand_size: u32) -> Result<u32, ConfigError> {
        if hand_size == 0 {
            return Err(ConfigError::new("hand_size", "at least 1", hand_size));
        }
        // Kubernetes' float arithmetic; `as` saturates.
        let share = (f64::from(nominal) * Self::LEVEL_MAX_SEATS_SHARE).ceil() as u32;
        Ok(share.min(nominal / hand_size).max(1))
    }

    /// The cap for one kind of request: the level's, unless it has none
    /// or it is above the kind's own.
    pub(crate) fn cap(level_max_seats: Option<u32>, kind_max: u32) -> u32 {
        let kind_max = kind_max.max(Self::MINIMUM_SEATS);
        match level_max_seats {
            Some(level) if level > 0 && level <= kind_max => level,
            _ => kind_max,
        }
    }
}
