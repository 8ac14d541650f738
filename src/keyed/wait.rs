//! Waiting on tokio's clock until a key may run again.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::Backoff;
use crate::InBackoff;
use crate::clock::{Clock, TokioClock};

impl<K, S> Backoff<K, TokioClock, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    /// Waits until `key` is out of backoff: its window, counted from its
    /// last update, has ended (at once for a missing or expired key).
    ///
    /// The wait is on tokio's clock, the manager's own, so paused time
    /// drives it in tests. It is cancel-safe: it changes nothing, and
    /// dropping it at any point leaves the manager as it was. The window is
    /// read again after each sleep, so a key advanced meanwhile (by another
    /// task's [`next`](Self::next)) is waited for again; a
    /// [`reset`](Self::reset) is seen when the current sleep ends.
    ///
    /// Several tasks waiting on one key all wake together; to let exactly
    /// one of them go per window, use
    /// [`until_ready_then_next`](Self::until_ready_then_next).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff::ConfigError> {
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(TokioClock)
    ///     .build()?;
    /// b.next_now("db");
    /// let start = tokio::time::Instant::now();
    /// b.until_ready("db").await;
    /// assert_eq!(start.elapsed(), Duration::from_secs(10));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        while let Some(wait) = self.remaining(key, self.clock().now()) {
            tokio::time::sleep(wait).await;
        }
    }

    /// Waits until `key` is out of backoff, then advances it in the same
    /// step as [`try_next_now`](Self::try_next_now) and returns the new
    /// backoff: the kubelet's restart gate ("no restart inside the window;
    /// each restart doubles it") for async code.
    ///
    /// Among tasks racing on one key, exactly one advances per window; the
    /// others go back to waiting for the new window. Cancel-safe: a
    /// dropped call never advanced the key, and one that returned did
    /// exactly once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff::ConfigError> {
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(TokioClock)
    ///     .build()?;
    /// let start = tokio::time::Instant::now();
    /// assert_eq!(b.until_ready_then_next("pod").await, Duration::from_secs(10)); // at once
    /// assert_eq!(b.until_ready_then_next("pod").await, Duration::from_secs(20)); // after 10 s
    /// assert_eq!(start.elapsed(), Duration::from_secs(10));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready_then_next<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        loop {
            match self.try_next_now(key) {
                Ok(backoff) => return backoff,
                Err(InBackoff { remaining }) => tokio::time::sleep(remaining).await,
            }
        }
    }
}
