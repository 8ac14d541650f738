//! How a blocking retry loop waits.

use std::time::Duration;

/// Waits between attempts of a blocking retry loop.
///
/// Implemented for [`ThreadSleeper`] (real time) and for any
/// `FnMut(Duration)`, so a test can record the delays or advance a
/// [`MockClock`](crate::clock::MockClock) instead of waiting.
///
/// ```
/// use keyed_backoff::retry::Sleeper;
/// use std::time::Duration;
/// let mut waited = Duration::ZERO;
/// let mut record = |d: Duration| waited += d;
/// record.sleep(Duration::from_secs(3));
/// assert_eq!(waited, Duration::from_secs(3));
/// ```
pub trait Sleeper {
    /// Waits for `d` (or pretends to).
    ///
    /// ```
    /// use keyed_backoff::retry::{Sleeper, ThreadSleeper};
    /// ThreadSleeper.sleep(std::time::Duration::from_millis(1));
    /// ```
    fn sleep(&mut self, d: Duration);
}

/// Sleeps the current thread.
///
/// ```
/// use keyed_backoff::retry::{Sleeper, ThreadSleeper};
/// ThreadSleeper.sleep(std::time::Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}

impl<F: FnMut(Duration)> Sleeper for F {
    fn sleep(&mut self, d: Duration) {
        self(d);
    }
}
