//! tokio's clock, which follows tokio's paused time.

use std::time::Duration;

use super::{Clock, ClockInstant, saturate_with};

/// tokio's clock, [`tokio::time::Instant`] (feature `tokio`).
///
/// Under tokio's paused time (`#[tokio::test(start_paused = true)]`,
/// `tokio::time::pause`) it moves only when the runtime auto-advances or
/// `tokio::time::advance` is called, so a keyed manager, a retry loop's
/// `max_elapsed` and a GC task all follow the test's virtual time. In
/// production it reads the OS monotonic clock, like [`StdClock`](super::StdClock).
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
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    type Instant = tokio::time::Instant;
    #[inline]
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
}

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
