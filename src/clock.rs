//! Clocks: where "now" comes from.
//!
//! A [`Backoff`](crate::Backoff) reads the time through the [`Clock`] trait,
//! so tests drive it with a [`MockClock`] and production code picks the clock
//! whose cost and guarantees suit it:
//!
//! | clock | instant type | monotonic | cost per read (see `docs/benchmarks.md`) |
//! |---|---|---|---|
//! | [`StdClock`] (the [`DefaultClock`]) | [`std::time::Instant`] | yes, by the OS | a vDSO call |
//! | [`QuantaClock`] | [`quanta::Instant`] | per core; TSC caveats | a few ns |
//! | [`SystemClock`] | [`std::time::SystemTime`] | no (wall time can jump) | a vDSO call |
//! | [`MockClock`] | [`MockInstant`] | moves only when told | an atomic load |
//!
//! Every instant type implements [`ClockInstant`], whose arithmetic
//! saturates: adding [`Duration::MAX`] or asking for the time since a later
//! instant never panics.
//!
//! ```
//! use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
//! use std::time::Duration;
//!
//! let clock = MockClock::new();
//! let start = clock.now();
//! clock.advance(Duration::from_secs(10));
//! assert_eq!(clock.now().saturating_duration_since(start), Duration::from_secs(10));
//! // Never panics, even backwards or at the extremes.
//! assert_eq!(start.saturating_duration_since(clock.now()), Duration::ZERO);
//! let _far = start.saturating_add(Duration::MAX);
//! ```

use std::fmt::Debug;
use std::ops::{Add, Sub};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

/// The clock used when none is chosen: [`StdClock`].
///
/// The OS monotonic clock is guaranteed never to go backwards, and
/// [`std::time::Instant`] is what most code already has at hand for event
/// times. `docs/design.md` records the measurement behind this choice;
/// [`QuantaClock`] is cheaper per read for users who want that trade.
///
/// ```
/// use keyed_backoff::clock::{Clock, DefaultClock};
/// let now: std::time::Instant = DefaultClock::default().now();
/// # let _ = now;
/// ```
pub type DefaultClock = StdClock;

/// A source of the current time.
///
/// Implementations must be cheap to call and safe to share between threads.
///
/// ```
/// use keyed_backoff::clock::{Clock, MockClock};
/// fn elapsed_ticks<C: Clock>(c: &C) -> C::Instant { c.now() }
/// let _ = elapsed_ticks(&MockClock::new());
/// ```
pub trait Clock: Send + Sync + 'static {
    /// The point-in-time type this clock produces.
    type Instant: ClockInstant;

    /// The current time.
    ///
    /// ```
    /// use keyed_backoff::clock::{Clock, StdClock};
    /// let _t: std::time::Instant = StdClock.now();
    /// ```
    fn now(&self) -> Self::Instant;
}

/// A point in time with saturating arithmetic.
///
/// The `+`/`-` operators with a [`Duration`] are required for convenience; for
/// [`std::time::Instant`] and [`SystemTime`] they panic on overflow, so the
/// crate itself only ever uses the saturating methods below.
///
/// ```
/// use keyed_backoff::clock::{ClockInstant, MockInstant};
/// use std::time::Duration;
/// let t = MockInstant::from_nanos(5);
/// assert_eq!(t.saturating_sub(Duration::from_nanos(7)), MockInstant::from_nanos(-2));
/// assert_eq!(t.nanos_since(MockInstant::from_nanos(8)), -3);
/// ```
pub trait ClockInstant:
    Copy
    + Ord
    + Send
    + Sync
    + Debug
    + 'static
    + Add<Duration, Output = Self>
    + Sub<Duration, Output = Self>
{
    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    ///
    /// ```
    /// use keyed_backoff::clock::{ClockInstant, MockInstant};
    /// use std::time::Duration;
    /// let (a, b) = (MockInstant::from_nanos(1), MockInstant::from_nanos(4));
    /// assert_eq!(b.saturating_duration_since(a), Duration::from_nanos(3));
    /// assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    /// ```
    fn saturating_duration_since(&self, earlier: Self) -> Duration;

    /// `self + d`, clamped to the latest representable instant.
    ///
    /// ```
    /// use keyed_backoff::clock::ClockInstant;
    /// use std::time::{Duration, Instant};
    /// let now = Instant::now();
    /// assert!(now.saturating_add(Duration::MAX) > now); // `now + Duration::MAX` would panic
    /// ```
    fn saturating_add(self, d: Duration) -> Self;

    /// `self - d`, clamped to the earliest representable instant.
    ///
    /// ```
    /// use keyed_backoff::clock::ClockInstant;
    /// use std::time::{Duration, SystemTime};
    /// let now = SystemTime::now();
    /// assert!(now.saturating_sub(Duration::MAX) < now);
    /// ```
    fn saturating_sub(self, d: Duration) -> Self;

    /// Signed nanoseconds from `origin` to `self`, saturating to the `i64`
    /// range (about ±292 years).
    ///
    /// The keyed manager stores times as such offsets from its creation
    /// instant, which keeps entries at 16 bytes for every clock.
    ///
    /// ```
    /// use keyed_backoff::clock::{ClockInstant, MockInstant};
    /// assert_eq!(MockInstant::from_nanos(i64::MIN).nanos_since(MockInstant::from_nanos(1)), i64::MIN);
    /// ```
    fn nanos_since(self, origin: Self) -> i64 {
        if self >= origin {
            saturating_nanos_i64(self.saturating_duration_since(origin))
        } else {
            saturating_nanos_i64(origin.saturating_duration_since(self)).saturating_neg()
        }
    }

    /// The instant `nanos` nanoseconds after `self` (before, if negative),
    /// saturating. The inverse of [`ClockInstant::nanos_since`].
    ///
    /// ```
    /// use keyed_backoff::clock::{ClockInstant, QuantaClock, Clock};
    /// let origin = QuantaClock.now();
    /// assert_eq!(origin.offset_by_nanos(-250).nanos_since(origin), -250);
    /// ```
    fn offset_by_nanos(self, nanos: i64) -> Self {
        let magnitude = Duration::from_nanos(nanos.unsigned_abs());
        if nanos >= 0 {
            self.saturating_add(magnitude)
        } else {
            self.saturating_sub(magnitude)
        }
    }
}

pub use crate::duration::saturating_nanos;

#[inline]
fn saturating_nanos_i64(d: Duration) -> i64 {
    i64::try_from(saturating_nanos(d)).unwrap_or(i64::MAX)
}

/// Applies `checked` (an instant's `checked_add` or `checked_sub`) and, when
/// the full step does not fit, walks as far as it does: the saturating
/// behaviour for instant types that expose no maximum.
fn saturate_with<T: Copy>(start: T, d: Duration, checked: impl Fn(T, Duration) -> Option<T>) -> T {
    if let Some(t) = checked(start, d) {
        return t;
    }
    let (mut at, mut step) = (start, d);
    while !step.is_zero() {
        match checked(at, step) {
            Some(next) => at = next,
            None => step /= 2,
        }
    }
    at
}

/// The operating system's monotonic clock, [`std::time::Instant`].
///
/// ```
/// use keyed_backoff::clock::{Clock, StdClock};
/// let a = StdClock.now();
/// assert!(StdClock.now() >= a);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct StdClock;

impl Clock for StdClock {
    type Instant = std::time::Instant;
    #[inline]
    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }
}

impl ClockInstant for std::time::Instant {
    #[inline]
    fn saturating_duration_since(&self, earlier: Self) -> Duration {
        std::time::Instant::saturating_duration_since(self, earlier)
    }
    fn saturating_add(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_add(d))
    }
    fn saturating_sub(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_sub(d))
    }
}

/// The `quanta` crate's clock: the CPU's time-stamp counter where it is
/// reliable, calibrated against the OS clock; the OS clock otherwise.
///
/// Cheaper per read than [`StdClock`]. The TSC is known to drift between
/// cores or across suspend on some hardware and hypervisors; the keyed
/// manager tolerates small steps backwards (all its arithmetic saturates),
/// but if your platform's TSC is unreliable prefer [`StdClock`].
///
/// ```
/// use keyed_backoff::clock::{Clock, QuantaClock};
/// let a = QuantaClock.now();
/// let _ = QuantaClock.now() >= a;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct QuantaClock;

impl Clock for QuantaClock {
    type Instant = quanta::Instant;
    #[inline]
    fn now(&self) -> quanta::Instant {
        quanta::Instant::now()
    }
}

impl ClockInstant for quanta::Instant {
    #[inline]
    fn saturating_duration_since(&self, earlier: Self) -> Duration {
        quanta::Instant::saturating_duration_since(self, earlier)
    }
    fn saturating_add(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_add(d))
    }
    fn saturating_sub(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_sub(d))
    }
}

/// tokio's clock, [`tokio::time::Instant`] (feature `tokio`).
///
/// Under tokio's paused time (`#[tokio::test(start_paused = true)]`,
/// `tokio::time::pause`) it moves only when the runtime auto-advances or
/// `tokio::time::advance` is called, so a keyed manager, a retry loop's
/// `max_elapsed` and a GC task all follow the test's virtual time. In
/// production it reads the OS monotonic clock, like [`StdClock`].
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::{Clock, TokioClock};
/// use std::time::Duration;
/// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(16))
///     .clock(TokioClock)
///     .build()?;
/// assert_eq!(b.try_next_now("obj"), Ok(Duration::from_secs(1)));
/// tokio::time::advance(Duration::from_secs(1)).await;
/// assert_eq!(b.try_next_now("obj"), Ok(Duration::from_secs(2)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// # }).unwrap();
/// ```
#[cfg(feature = "tokio")]
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    type Instant = tokio::time::Instant;
    #[inline]
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

#[cfg(feature = "tokio")]
impl ClockInstant for tokio::time::Instant {
    #[inline]
    fn saturating_duration_since(&self, earlier: Self) -> Duration {
        tokio::time::Instant::saturating_duration_since(self, earlier)
    }
    fn saturating_add(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_add(d))
    }
    fn saturating_sub(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_sub(d))
    }
}

/// Wall-clock time, [`SystemTime`].
///
/// Use it when event times come from outside the process, such as a
/// container's recorded finish time. Wall time can jump backwards (NTP,
/// operators); the manager's arithmetic saturates, so such a jump cannot
/// panic, but it can shorten or lengthen a wait exactly as client-go's would.
///
/// ```
/// use keyed_backoff::clock::{Clock, SystemClock};
/// let now: std::time::SystemTime = SystemClock.now();
/// # let _ = now;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    type Instant = SystemTime;
    #[inline]
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

impl ClockInstant for SystemTime {
    #[inline]
    fn saturating_duration_since(&self, earlier: Self) -> Duration {
        self.duration_since(earlier).unwrap_or(Duration::ZERO)
    }
    fn saturating_add(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_add(d))
    }
    fn saturating_sub(self, d: Duration) -> Self {
        saturate_with(self, d, |t, d| t.checked_sub(d))
    }
}

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
    fn std_instant_saturates_instead_of_panicking() {
        let now = std::time::Instant::now();
        let far = now.saturating_add(Duration::MAX);
        assert!(far > now);
        let early = now.saturating_sub(Duration::MAX);
        assert!(early < now);
        assert_eq!(early.saturating_duration_since(far), Duration::ZERO);
        assert_eq!(far.nanos_since(early), i64::MAX);
        assert_eq!(early.nanos_since(far), -i64::MAX);
    }

    #[test]
    fn system_time_saturates_instead_of_panicking() {
        let now = SystemTime::now();
        assert!(now.saturating_add(Duration::MAX) > now);
        assert!(now.saturating_sub(Duration::MAX) < now);
    }

    #[test]
    fn quanta_round_trips_offsets() {
        let origin = QuantaClock.now();
        let later = origin.offset_by_nanos(1_000);
        assert_eq!(later.nanos_since(origin), 1_000);
    }

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

    #[test]
    fn saturating_nanos_covers_edges() {
        assert_eq!(saturating_nanos(Duration::ZERO), 0);
        assert_eq!(
            saturating_nanos(Duration::new(18_446_744_073, 709_551_615)),
            u64::MAX
        );
        assert_eq!(
            saturating_nanos(Duration::new(18_446_744_073, 709_551_616 - 1)),
            u64::MAX
        );
        assert_eq!(saturating_nanos(Duration::new(18_446_744_074, 0)), u64::MAX);
    }
}
