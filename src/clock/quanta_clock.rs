//! The `quanta` crate's clock: the CPU's time-stamp counter.

use std::time::Duration;

use super::{Clock, ClockInstant, saturate_with};

/// The `quanta` crate's clock: the CPU's time-stamp counter where it is
/// reliable, calibrated against the OS clock; the OS clock otherwise.
///
/// Cheaper per read than [`StdClock`](super::StdClock). The TSC is known to drift between
/// cores or across suspend on some hardware and hypervisors; the keyed
/// manager tolerates small steps backwards (all its arithmetic saturates),
/// but if your platform's TSC is unreliable prefer [`StdClock`](super::StdClock).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_round_trips_offsets() {
        let origin = QuantaClock.now();
        let later = origin.offset_by_nanos(1_000);
        assert_eq!(later.nanos_since(origin), 1_000);
    }
}
