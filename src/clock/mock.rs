//! A clock that moves only when told to, for tests and simulations.

use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::{Clock, ClockInstant};
use crate::duration::saturating_nanos;

/// An instant of a [`MockClock`]: signed nanoseconds from the clock's start.
///
/// It spans about ±292 years around the start, so tests can express event
/// times long before the manager was created. `+` and `-` saturate.
///
/// ```
/// use keyed_backoff::clock::MockInstant;
/// use std::time::Duration;
/// let a_year_before = MockInstant::ZERO - Duration::from_secs(365 * 24 * 3600);
/// assert!(a_year_before < MockInstant::ZERO);
/// assert_eq!(MockInstant::ZERO + Duration::MAX, MockInstant::from_nanos(i64::MAX));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MockInstant(i64);

impl MockInstant {
    /// The instant at which every [`MockClock`] starts.
    pub const ZERO: MockInstant = MockInstant(0);

    /// The instant `nanos` nanoseconds after (or, if negative, before) the start.
    ///
    /// ```
    /// use keyed_backoff::clock::MockInstant;
    /// assert_eq!(MockInstant::from_nanos(-1).as_nanos(), -1);
    /// ```
    pub const fn from_nanos(nanos: i64) -> Self {
        MockInstant(nanos)
    }

    /// Signed nanoseconds since the clock's start.
    ///
    /// ```
    /// use keyed_backoff::clock::MockInstant;
    /// assert_eq!(MockInstant::ZERO.as_nanos(), 0);
    /// ```
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
}

impl Add<Duration> for MockInstant {
    type Output = MockInstant;
    fn add(self, d: Duration) -> MockInstant {
        self.saturating_add(d)
    }
}

impl Sub<Duration> for MockInstant {
    type Output = MockInstant;
    fn sub(self, d: Duration) -> MockInstant {
        self.saturating_sub(d)
    }
}

/// The time from `earlier` to `self`, zero if `earlier` is later, as
/// `std::time::Instant`'s subtraction.
///
/// ```
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
/// let clock = MockClock::new();
/// let start = clock.now();
/// clock.advance(Duration::from_secs(3));
/// assert_eq!(clock.now() - start, Duration::from_secs(3));
/// assert_eq!(start - clock.now(), Duration::ZERO);
/// ```
impl Sub<MockInstant> for MockInstant {
    type Output = Duration;
    fn sub(self, earlier: MockInstant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl ClockInstant for MockInstant {
    #[inline]
    fn saturating_duration_since(&self, earlier: Self) -> Duration {
        Duration::from_nanos(u64::try_from(i128::from(self.0) - i128::from(earlier.0)).unwrap_or(0))
    }
    #[inline]
    fn saturating_add(self, d: Duration) -> Self {
        MockInstant(self.0.saturating_add_unsigned(saturating_nanos(d)))
    }
    #[inline]
    fn saturating_sub(self, d: Duration) -> Self {
        MockInstant(self.0.saturating_sub_unsigned(saturating_nanos(d)))
    }
    #[inline]
    fn nanos_since(self, origin: Self) -> i64 {
        self.0.saturating_sub(origin.0)
    }
    #[inline]
    fn offset_by_nanos(self, nanos: i64) -> Self {
        MockInstant(self.0.saturating_add(nanos))
    }
}

/// A clock that moves only when told to: for tests and simulations.
///
/// Clones share one time, so a test keeps a clone and advances the clock a
/// manager reads. It starts at [`MockInstant::ZERO`].
///
/// ```
/// use keyed_backoff::clock::{Clock, MockClock, MockInstant};
/// use std::time::Duration;
/// let clock = MockClock::new();
/// let shared = clock.clone();
/// shared.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), MockInstant::from_nanos(1_500_000_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct MockClock {
    nanos: Arc<AtomicI64>,
}

impl MockClock {
    /// A new clock at [`MockInstant::ZERO`].
    ///
    /// ```
    /// use keyed_backoff::clock::{Clock, MockClock, MockInstant};
    /// assert_eq!(MockClock::new().now(), MockInstant::ZERO);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the time forward by `d` (saturating at the latest instant).
    ///
    /// ```
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let c = MockClock::new();
    /// c.advance(Duration::MAX); // saturates, never panics
    /// assert_eq!(c.now().as_nanos(), i64::MAX);
    /// ```
    pub fn advance(&self, d: Duration) {
        let step = saturating_nanos(d);
        // fetch_update never fails here: the closure always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add_unsigned(step))
            });
    }

    /// Sets the time, forwards or backwards: for testing what happens when a
    /// clock jumps.
    ///
    /// ```
    /// use keyed_backoff::clock::{Clock, MockClock, MockInstant};
    /// let c = MockClock::new();
    /// c.set(MockInstant::from_nanos(-5));
    /// assert_eq!(c.now(), MockInstant::from_nanos(-5));
    /// ```
    pub fn set(&self, to: MockInstant) {
        self.nanos.store(to.0, Ordering::Release);
    }
}

impl Clock for MockClock {
    type Instant = MockInstant;
    #[inline]
    fn now(&self) -> MockInstant {
        MockInstant(self.nanos.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mock_offsets_round_trip_and_saturate() {
        let o = MockInstant::from_nanos(10);
        assert_eq!(o.offset_by_nanos(-30).nanos_since(o), -30);
        assert_eq!(
            MockInstant::from_nanos(i64::MIN).nanos_since(MockInstant::from_nanos(1)),
            i64::MIN
        );
        let c = MockClock::new();
        c.advance(Duration::MAX);
        c.advance(Duration::from_secs(1));
        assert_eq!(c.now().as_nanos(), i64::MAX);
    }
}
