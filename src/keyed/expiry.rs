//! The expiry rule: when an entry counts as stale.
//!
//! One rule serves `next` (re-initialise a stale entry), both
//! `is_in_backoff_*` checks (a stale entry is not in backoff) and `gc`
//! (remove stale entries), exactly as client-go's `HasExpiredFunc` does.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{ClockInstant, saturating_nanos};

/// A user expiry function: `(event, last_update, max) -> expired?`.
pub(crate) type ExpiryFn<I> = Arc<dyn Fn(I, I, Duration) -> bool + Send + Sync>;

pub(crate) enum Expiry<I> {
    /// Expired when `event − last_update > window` nanoseconds. client-go's
    /// default is the window `2·max` ([`Expiry::twice_max`]); the kubelet
    /// uses 600 s.
    After(u64),
    /// Any function of `(event, last_update, max)`.
    Custom(ExpiryFn<I>),
}

impl<I> fmt::Debug for Expiry<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expiry::After(w) => write!(f, "After({:?})", Duration::from_nanos(*w)),
            Expiry::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Everything the rule may need about one check. Times are the manager's
/// signed nanosecond offsets; `epoch` turns them back into instants for a
/// custom function.
pub(crate) struct ExpiryCheck<I> {
    pub(crate) event: I,
    pub(crate) event_tick: i64,
    pub(crate) last_tick: i64,
    pub(crate) epoch: I,
    pub(crate) max: Duration,
}

impl<I: ClockInstant> Expiry<I> {
    /// client-go's default rule, `event − last_update > 2·max`, as a
    /// precomputed window.
    pub(crate) fn twice_max(max: Duration) -> Self {
        Expiry::After(saturating_nanos(max).saturating_mul(2))
    }

    #[inline]
    pub(crate) fn has_expired(&self, c: &ExpiryCheck<I>) -> bool {
        // Signed difference, exact in i128: an event before the last update is
        // negative and never expires, as Go's signed `Sub` gives.
        let since_update = i128::from(c.event_tick) - i128::from(c.last_tick);
        match self {
            Expiry::After(window) => since_update > i128::from(*window),
            Expiry::Custom(f) => f(c.event, c.epoch.offset_by_nanos(c.last_tick), c.max),
        }
    }
}
