//! Event times as ages, and operation ids: what a call sends besides its key.

use std::time::Duration;

use keyed_backoff::__private::saturating_nanos;
use keyed_backoff::clock::ClockInstant;

/// When the event being judged happened, as an age: how long before the
/// store's now (negative ages are in the future).
///
/// Process instants cannot cross machines, but an age can: the caller
/// measures it on its own monotonic clock, and the store subtracts it from
/// its own now (Redis `TIME`). With Redis time an age is rounded to the
/// microsecond.
///
/// ```
/// use keyed_backoff_redis::Event;
/// use std::time::{Duration, Instant};
/// let finished = Instant::now();
/// let _e = Event::since(finished); // the container finished this long ago
/// assert_eq!(Event::ago(Duration::from_secs(2)).age_nanos(), 2_000_000_000);
/// assert_eq!(Event::ahead(Duration::from_secs(1)).age_nanos(), -1_000_000_000);
/// assert_eq!(Event::now().age_nanos(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    age_ns: i64,
}

impl Event {
    /// The event is now.
    ///
    /// ```
    /// assert_eq!(keyed_backoff_redis::Event::now().age_nanos(), 0);
    /// ```
    pub fn now() -> Self {
        Event { age_ns: 0 }
    }

    /// The event happened `age` ago (saturating at about 292 years).
    ///
    /// ```
    /// use keyed_backoff_redis::Event;
    /// assert_eq!(Event::ago(std::time::Duration::from_millis(3)).age_nanos(), 3_000_000);
    /// ```
    pub fn ago(age: Duration) -> Self {
        Event {
            age_ns: i64::try_from(saturating_nanos(age)).unwrap_or(i64::MAX),
        }
    }

    /// The event is `ahead` in the future.
    ///
    /// ```
    /// use keyed_backoff_redis::Event;
    /// assert_eq!(Event::ahead(std::time::Duration::from_nanos(5)).age_nanos(), -5);
    /// ```
    pub fn ahead(ahead: Duration) -> Self {
        Event {
            age_ns: -Event::ago(ahead).age_ns,
        }
    }

    /// The event happened at `instant` on this process's monotonic clock.
    ///
    /// ```
    /// use keyed_backoff_redis::Event;
    /// assert!(Event::since(std::time::Instant::now()).age_nanos() >= 0);
    /// ```
    pub fn since(instant: std::time::Instant) -> Self {
        Event::ago(instant.elapsed())
    }

    /// The event at `event`, judged at `now`, on any crate clock.
    ///
    /// ```
    /// use keyed_backoff_redis::clock::MockInstant;
    /// use keyed_backoff_redis::Event;
    /// let e = Event::between(MockInstant::from_nanos(4), MockInstant::from_nanos(10));
    /// assert_eq!(e.age_nanos(), 6);
    /// ```
    pub fn between<I: ClockInstant>(event: I, now: I) -> Self {
        Event {
            age_ns: now.nanos_since(event),
        }
    }

    /// The age in nanoseconds (negative: in the future).
    ///
    /// ```
    /// assert_eq!(keyed_backoff_redis::Event::now().age_nanos(), 0);
    /// ```
    pub fn age_nanos(self) -> i64 {
        self.age_ns
    }
}

/// Identifies one `next`, so that a caller retrying after a timeout cannot
/// advance the key twice: the store answers a repeated id with the entry it
/// already made.
///
/// ```
/// use keyed_backoff_redis::OpId;
/// assert_ne!(OpId::new(), OpId::new());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub(crate) u64);

impl OpId {
    /// A fresh random id.
    ///
    /// ```
    /// let _id = keyed_backoff_redis::OpId::new();
    /// ```
    #[allow(clippy::new_without_default)] // a default id would not be fresh
    pub fn new() -> Self {
        OpId(rand::random())
    }
}
