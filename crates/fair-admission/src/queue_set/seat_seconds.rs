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
        SeatSeconds(round(seats * nanos / (1e9 / SCALE)) as u64)
    }

    /// `seats` × `duration`.
    pub(crate) fn times(seats: f64, duration: Duration) -> SeatSeconds {
        SeatSeconds::of(seats, nanos(duration))
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

/// `d` in nanoseconds, as a float (as `d.as_nanos() as f64`, without the
/// 128-bit conversion while the count fits 64 bits).
pub(crate) fn nanos(d: Duration) -> f64 {
    let n = d.as_secs().checked_mul(1_000_000_000);
    match n.and_then(|n| n.checked_add(u64::from(d.subsec_nanos()))) {
        Some(n) => n as f64,
        None => d.as_nanos() as f64,
    }
}

/// `x` rounded half away from zero and saturated, as `x.round() as i64`,
/// without a call to the C library's `round`.
fn round(x: f64) -> i64 {
    // Below 2^52 in magnitude, the truncation and the fraction left are
    // exact.
    if x.abs() < 4_503_599_627_370_496.0 {
        let t = x as i64;
        let fraction = x - t as f64;
        if fraction >= 0.5 {
            t + 1
        } else if fraction <= -0.5 {
            t - 1
        } else {
            t
        }
    } else {
        x.round() as i64
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
    fn rounding_agrees_with_the_standard_library() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut samples = vec![
            0.5,
            -0.5,
            1.5,
            -2.5,
            0.49999999999999994,
            4503599627370495.5,
        ];
        samples.extend([
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            1e300,
            -1e19,
            9.3e18,
        ]);
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let scale = 10f64.powi((x >> 59) as i32 - 8);
            samples.push(((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * scale);
            samples.push((x % 1000) as f64 / 2.0 - 250.0);
        }
        for v in samples {
            assert_eq!(round(v), v.round() as i64, "{v}");
        }
        let d = Duration::new(u64::MAX, 999_999_999);
        assert_eq!(nanos(d), d.as_nanos() as f64);
    }

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
