//! Kubernetes' LIST work estimate: seats by the memory a LIST loads (or,
//! the older way, by the objects it goes through).

use super::query::ListOptions;
use super::{RequestInfo, WorkEstimate, WorkEstimator};

/// What the server knows of a resource's stored objects, as Kubernetes'
/// object count tracker reports it.
///
/// ```
/// use fair_admission::ObjectStats;
/// let pods = ObjectStats::Known { count: 12_000, average_size: 4_000 };
/// assert_ne!(pods, ObjectStats::Stale);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectStats {
    /// The resource holds `count` objects of `average_size` bytes on
    /// average (0: unknown, taken as
    /// [`MAX_OBJECT_SIZE`](WorkEstimator::MAX_OBJECT_SIZE)).
    Known {
        /// Objects stored.
        count: u64,
        /// Their average size in bytes.
        average_size: u64,
    },
    /// The count has not been refreshed for too long (or could not be
    /// read): the store may be struggling, so the LIST is charged as if
    /// it held [`STALE_OBJECT_COUNT`](WorkEstimator::STALE_OBJECT_COUNT)
    /// objects of the largest size.
    Stale,
    /// No count for the resource (unknown, or served elsewhere, as an
    /// aggregated API is): the LIST is charged the fewest seats.
    Unknown,
}

impl WorkEstimator {
    /// Kubernetes' estimate for a LIST (or a WATCH, which starts as one)
    /// of a resource holding `stats`.
    ///
    /// From the query it reads the page size (`limit`), the selectors, the
    /// resource version and its match, and the continue token; these tell
    /// whether the LIST is served from the watch cache or from storage as
    /// Kubernetes' cache decides it (an exact resource version, a continue
    /// token, a paged `resourceVersion` other than 0, an unknown match, and
    /// — unless [`consistent_reads_from_cache`](Self::consistent_reads_from_cache)
    /// — a consistent read go to storage). A query Kubernetes cannot read
    /// (a `limit` that is not an integer) is charged the cap.
    ///
    /// Size-based (the default), it charges one seat per
    /// [`BYTES_PER_SEAT`](Self::BYTES_PER_SEAT) of objects loaded at once:
    /// one object for a request naming one; the page for a LIST from the
    /// cache (whose memory counts up to
    /// [`CACHE_MEMORY_CAP`](Self::CACHE_MEMORY_CAP)) or from storage
    /// without a selector; the page or half the objects, the larger, from
    /// storage with a selector. Count-based, one seat per
    /// [`OBJECTS_PER_SEAT`](Self::OBJECTS_PER_SEAT) objects gone through:
    /// one, all stored objects from the cache, the objects plus the page
    /// with a selector, twice the page without. A WATCH that sends no
    /// initial events takes one seat.
    ///
    /// ```
    /// use fair_admission::{ObjectStats, RequestInfo, WorkEstimator};
    /// let e = WorkEstimator::default();
    /// let events = |query| RequestInfo { verb: "list", resource: "events", query, ..RequestInfo::default() };
    /// let stats = ObjectStats::Known { count: 799, average_size: 10_000 };
    /// let seats = |query| e.list(&events(query), None, stats).initial_seats;
    /// assert_eq!(seats("labelSelector=app%3Dweb"), 80); // 7.99 MB from storage
    /// assert_eq!(seats("resourceVersion=0"), 10);        // from the cache: 1 MB
    /// assert_eq!(seats("resourceVersion=0&limit=20"), 2); // 200 kB
    /// assert_eq!(seats("limit=invalid"), 100);
    /// assert_eq!(e.list(&events(""), None, ObjectStats::Unknown).initial_seats, 1);
    /// ```
    pub fn list(
        &self,
        request: &RequestInfo<'_>,
        level_max_seats: Option<u32>,
        stats: ObjectStats,
    ) -> WorkEstimate {
        let min = Self::MINIMUM_SEATS;
        let max = Self::cap(level_max_seats, self.maximum_list_seats);
        let Ok(options) = ListOptions::from_query(request.query) else {
            return WorkEstimate::seats(max);
        };
        if request.verb == "watch" {
            let initial_events = options.send_initial_events == Some(true);
            let legacy = matches!(options.resource_version.as_str(), "" | "0");
            if !initial_events && !legacy {
                return WorkEstimate::seats(min);
            }
        }
        let from_cache = request.verb == "watch" || !self.reads_storage(&options);
        let (count, size) = match stats {
            ObjectStats::Known {
                count,
                average_size,
            } => (count, average_size),
            ObjectStats::Stale => (Self::STALE_OBJECT_COUNT, Self::MAX_OBJECT_SIZE),
            ObjectStats::Unknown => return WorkEstimate::seats(min),
        };
        let list = Listed {
            count,
            size,
            limit: options.limit,
            selector: !options.label_selector.is_empty() || !options.field_selector.is_empty(),
            single: !request.name.is_empty(),
            from_cache,
        };
        let seats = if self.size_based_lists {
            list.seats_by_size()
        } else {
            list.seats_by_count()
        };
        WorkEstimate::seats(u32::try_from(seats).unwrap_or(u32::MAX).clamp(min, max))
    }

    /// Whether Kubernetes' cache sends this LIST to storage.
    fn reads_storage(&self, options: &ListOptions) -> bool {
        match options.resource_version_match.as_str() {
            "Exact" => true,
            "NotOlderThan" => false,
            "" => {
                let rv = options.resource_version.as_str();
                // A continuation, or a paged read at an exact version.
                let exact = options.limit > 0 && !rv.is_empty() && rv != "0";
                if !options.continue_token.is_empty() || exact {
                    true
                } else if rv.is_empty() {
                    // A consistent read.
                    !self.consistent_reads_from_cache
                } else {
                    false
                }
            }
            _ => true,
        }
    }
}

/// A LIST as the seat formulas see it.
struct Listed {
    count: u64,
    size: u64,
    limit: i64,
    selector: bool,
    single: bool,
    from_cache: bool,
}

impl Listed {
    /// The objects of one page: the limit, if positive and below the count.
    fn page(&self) -> u64 {
        u64::try_from(self.limit)
            .ok()
            .filter(|&l| l > 0 && l < self.count)
            .unwrap_or(self.count)
    }

    fn seats_by_size(&self) -> u64 {
        let size = if self.size == 0 && self.count != 0 {
            WorkEstimator::MAX_OBJECT_SIZE
        } else {
            self.size
        };
        let objects = if self.single {
            1
        } else if !self.from_cache && self.selector {
            self.page().max(self.count / 2)
        } else {
            self.page()
        };
        let mut memory = objects.saturating_mul(size);
        if self.from_cache {
            memory = memory.min(WorkEstimator::CACHE_MEMORY_CAP);
        }
        memory.div_ceil(WorkEstimator::BYTES_PER_SEAT)
    }

    fn seats_by_count(&self) -> u64 {
        let objects = if self.single {
            1
        } else if self.from_cache {
            self.count
        } else if self.selector {
            self.count.saturating_add(self.page())
        } else {
            self.page().saturating_mul(2)
        };
        objects.div_ceil(WorkEstimator::OBJECTS_PER_SEAT)
    }
}
