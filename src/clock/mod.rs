//! Clocks: where "now" comes from.
//!
//! A [`Backoff`](crate::Backoff) reads the time through the [`Clock`] trait,
//! so tests drive it with a [`MockClock`] and production code picks the clock
//! whose cost and guarantees suit it:
//!
//! | clock | instant type | monotonic | cost per read (see `docs/benchmarks.md`) |
//! |---|---|---|---|
//! | [`StdClock`] (the default) | [`std::time::Instant`] | yes, by the OS | a vDSO call |
//! | [`QuantaClock`] | [`quanta::Instant`] | per core; TSC caveats | a TSC read |
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

mod mock;
mod quanta_clock;
mod std_clock;
mod system_clock;
#[cfg(feature = "tokio")]
mod tokio_clock;

use std::fmt::Debug;
use std::ops::{Add, Sub};
use std::time::Duration;

pub use mock::{MockClock, MockInstant};
pub use quanta_clock::QuantaClock;
pub use std_clock::StdClock;
pub use system_clock::SystemClock;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;

use crate::duration::saturating_nanos;

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
    fn now(&self) -> Self::Instant;
}

/// A point in time with saturating arithmetic.
///
/// The `+`/`-` operators with a [`Duration`] are required for convenience; for
/// [`std::time::Instant`] and [`SystemTime`](std::time::SystemTime) they panic on overflow, so the
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

#[inline]
fn saturating_nanos_i64(d: Duration) -> i64 {
    i64::try_from(saturating_nanos(d)).unwrap_or(i64::MAX)
}

/// Applies `checked` (an instant's `checked_add` or `checked_sub`) and, when
/// the full step does not fit, walks as far as it does: the saturating
/// behaviour for instant types that expose no maximum.
pub(crate) fn saturate_with<T: Copy>(
    start: T,
    d: Duration,
    checked: impl Fn(T, Duration) -> Option<T>,
) -> T {
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
