//! The per-key entry (16 bytes) and its time unit, the [`Tick`].
//!
//! `last_update` is the clock reading at the latest `next`, kept as signed
//! nanoseconds from the manager's epoch (its creation instant). The second
//! word packs the current backoff (low 52 bits, nanoseconds) and the number of
//! `next` calls since the entry was (re)initialised (high 12 bits, saturating).

use std::time::Duration;

use crate::clock::ClockInstant;

const BACKOFF_BITS: u32 = 52;
const BACKOFF_MASK: u64 = (1 << BACKOFF_BITS) - 1;
const ATTEMPTS_MAX: u32 = (1 << (64 - BACKOFF_BITS)) - 1;

/// The largest backoff an entry can hold ([`Settings::MAX_BACKOFF`](crate::Settings::MAX_BACKOFF)).
pub(crate) const MAX_BACKOFF: Duration = Duration::from_nanos(BACKOFF_MASK);

/// The largest attempt count an entry reports ([`Settings::MAX_ATTEMPTS`](crate::Settings::MAX_ATTEMPTS)).
pub(crate) const MAX_ATTEMPTS: u32 = ATTEMPTS_MAX;

/// A time on the manager's clock: signed nanoseconds since its epoch (the
/// instant it was built). Negative ticks are instants before the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Tick(pub(crate) i64);

/// A key's level: its backoff and how many failures advanced it since it
/// started. What a counted failure gives ([`Gate::fail`](crate::Gate::fail))
/// and what [`Gate::level`](crate::Gate::level) reads.
///
/// ```
/// use keyed_backoff::Level;
/// use std::time::Duration;
/// let level = Level { backoff: Duration::from_secs(20), attempts: 2 };
/// assert_eq!(level.attempts, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Level {
    /// The key's backoff now.
    pub backoff: Duration,
    /// Failures counted since its ladder started (1 for a failure that
    /// started it).
    pub attempts: u32,
}

impl Tick {
    /// `t` on the time line that starts at `epoch`.
    #[inline]
    pub(crate) fn of<I: ClockInstant>(t: I, epoch: I) -> Tick {
        Tick(t.nanos_since(epoch))
    }

    /// The instant of this tick on the time line that starts at `epoch`.
    #[inline]
    pub(crate) fn instant<I: ClockInstant>(self, epoch: I) -> I {
        epoch.offset_by_nanos(self.0)
    }

    /// `self − earlier` in nanoseconds, exact (no overflow in `i128`).
    #[inline]
    pub(crate) fn since(self, earlier: Tick) -> i128 {
        i128::from(self.0) - i128::from(earlier.0)
    }

    /// `self + ns`, saturating at the ends of `i64`.
    #[inline]
    pub(crate) fn plus(self, ns: i128) -> Tick {
        Tick((i128::from(self.0) + ns).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    last_update: Tick,
    packed: u64,
}

impl Entry {
    /// An entry updated at `last_update` holding `backoff_ns` (clamped to
    /// [`MAX_BACKOFF`]) after `attempts` (clamped to [`MAX_ATTEMPTS`]).
    #[inline]
    pub(crate) fn new(last_update: Tick, backoff_ns: u64, attempts: u32) -> Self {
        let backoff = backoff_ns.min(BACKOFF_MASK);
        let attempts = u64::from(attempts.min(ATTEMPTS_MAX));
        Entry {
            last_update,
            packed: (attempts << BACKOFF_BITS) | backoff,
        }
    }

    #[inline]
    pub(crate) fn last_update(self) -> Tick {
        self.last_update
    }

    #[inline]
    pub(crate) fn backoff_ns(self) -> u64 {
        self.packed & BACKOFF_MASK
    }

    #[inline]
    pub(crate) fn backoff(self) -> Duration {
        Duration::from_nanos(self.backoff_ns())
    }

    #[inline]
    pub(crate) fn attempts(self) -> u32 {
        (self.packed >> BACKOFF_BITS) as u32
    }

    /// Its backoff and attempts, as the [`Gate`](crate::Gate) reports them.
    #[inline]
    pub(crate) fn level(self) -> Level {
        Level {
            backoff: self.backoff(),
            attempts: self.attempts(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 16);
    }

    #[test]
    fn the_limits_are_52_days_and_4095_attempts() {
        assert_eq!(MAX_BACKOFF.as_secs() / 86_400, 52);
        assert_eq!(MAX_ATTEMPTS, 4095);
    }

    #[test]
    fn fields_round_trip_and_clamp() {
        let e = Entry::new(Tick(-7), 123, 5);
        assert_eq!(
            (e.last_update(), e.backoff_ns(), e.attempts()),
            (Tick(-7), 123, 5)
        );
        let big = Entry::new(Tick(i64::MAX), u64::MAX, u32::MAX);
        assert_eq!(big.backoff(), MAX_BACKOFF);
        assert_eq!(big.attempts(), MAX_ATTEMPTS);
        assert_eq!(big.last_update(), Tick(i64::MAX));
    }
}
