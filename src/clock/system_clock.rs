//! Wall-clock time.

use std::time::{Duration, SystemTime};

use super::{Clock, ClockInstant, saturate_with};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_time_saturates_instead_of_panicking() {
        let now = SystemTime::now();
        assert!(now.saturating_add(Duration::MAX) > now);
        assert!(now.saturating_sub(Duration::MAX) < now);
    }
}
