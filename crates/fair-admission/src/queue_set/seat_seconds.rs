//! Seat-seconds, the unit of work and of virtual time, in Kubernetes'
//! fixed point: an unsigned count of 10⁻⁸ seat-seconds. Arithmetic wraps,
//! as Kubernetes' does: a negative correction is added as its two's
//! complement, and the progress meter is wound back before it overflows.

use std::fmt;
use std::time::Duration;

/// Work or virtual time in 10⁻⁸ seat-seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub(crate) struct SeatSeconds(pub(crate) u64);

/// Units per seat-second.
const SCALE: f64 = 1e8;

impl SeatSeconds {
    /// The largest value.
    pub(crate) const MAX: SeatSeconds = SeatSeconds(u64::MAX);

    /// How far the progress meter is wound back when it grows too large:
    /// half its range (about 92 billion seat-seconds).
    pub(crate) const EPOCH: SeatSeconds = SeatSeconds(u64::MAX / 2);

    /// The reading at which the meter is wound back by [`EPOCH`](Self::EPOCH).
    pub(crate) const HIGH: SeatSeconds = SeatSeconds(u64::MAX / 2 + u64::MAX / 4);

    /// `seats` × `nanos` nanoseconds, rounded to the unit; negative
    /// products wrap (they are subtracted by adding them).
    pub(crate) fn of(seats: f64, nanos: f64) -> SeatSeconds {
        // Out-of-range floats saturate in `as`.
        SeatSeconds((seats * nanos / (1e9 / SCALE)).round() as i64 as u64)
    }

    /// `seats` × `duration`.
    pub(crate) fn times(seats: f64, duration: Duration) -> SeatSeconds {
        SeatSeconds::of(seats, duration.as_nanos() as f64)
    }

    /// Wrapping sum.
    pub(crate) fn plus(self, other: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.wrapping_add(other.0))
    }

    /// Wrapping difference.
    pub(crate) fn minus(self, other: SeatSeconds) -> SeatSeconds {
        SeatSeconds(self.0.wrapping_sub(other.0))
    }

    /// In seat-seconds (may lose precision).
    pub(crate) fn as_f64(self) -> f64 {
        self.0 as f64 / SCALE
    }

    /// The time this much work takes on `seats` seats.
    pub(crate) fn per_seat(self, seats: f64) -> Duration {
        Duration::try_from_secs_f64(self.as_f64() / seats).unwrap_or(Duration::MAX)
    }
}

impl fmt::Display for SeatSeconds {
    /// As Kubernetes prints it: whole seat-seconds, a point, eight digits,
    /// and `ss`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scale = SCALE as u64;
        write!(f, "{}.{:08}ss", self.0 / scale, self.0 % scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_round_to_the_unit_and_negatives_wrap() {
        let three_ms = SeatSeconds::times(1.0, Duration::from_millis(3));
        assert_eq!(three_ms, SeatSeconds(300_000));
        assert_eq!(three_ms.to_string(), "0.00300000ss");
        let back = SeatSeconds::of(1.0, -3e6);
        assert_eq!(three_ms.plus(back), SeatSeconds(0));
        assert_eq!(SeatSeconds(0).minus(back), three_ms);
        assert_eq!(
            SeatSeconds(250_000_000).per_seat(2.0),
            Duration::from_millis(1_250)
        );
    }
}
