//! Duration arithmetic shared by the clock, the strategies and the keyed
//! manager: whole nanoseconds, saturating instead of overflowing.

use std::time::Duration;

/// Whole nanoseconds in `d`, saturating at `u64::MAX` (about 584 years).
#[inline]
pub fn saturating_nanos(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

/// A signed nanosecond count as a duration, or `None` if it is not positive.
#[inline]
pub(crate) fn positive_nanos(ns: i128) -> Option<Duration> {
    (ns > 0).then(|| Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_nanos_covers_edges() {
        assert_eq!(saturating_nanos(Duration::from_secs(1)), 1_000_000_000);
        assert_eq!(saturating_nanos(Duration::MAX), u64::MAX);
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
