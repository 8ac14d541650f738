//! The operating system's monotonic clock; the default.

use std::time::Duration;

use super::{Clock, ClockInstant, saturate_with};

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
}
