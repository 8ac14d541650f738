//! Waiting for a key on tokio's clock, and GC in the background.

#[cfg(feature = "tokio")]
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::Duration;

use super::Backoff;
use crate::clock::Clock;
#[cfg(feature = "tokio")]
use crate::clock::TokioClock;
use crate::error::SpawnError;
use crate::gc::{self, GcGuard};
#[cfg(feature = "tokio")]
use crate::wait;

#[cfg(feature = "tokio")]
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
        wait::until_ready(|| self.remaining(key, self.clock.now())).await;
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
        wait::until_ready_then(|| self.try_next_now(key)).await
    }
}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Runs [`gc`](Self::gc) every `interval` (real time) on a background
    /// thread until the returned handle is dropped or the manager is.
    ///
    /// The thread holds only a weak reference, sleeps on a condition
    /// variable (so stopping is immediate) and is joined by the handle.
    /// `interval` must be greater than zero.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?);
    /// let _gc = b.spawn_gc(Duration::from_secs(60))?; // kept alive as long as needed
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_gc(self: &Arc<Self>, interval: Duration) -> Result<GcGuard, SpawnError> {
        gc::spawn_thread(Arc::downgrade(self), interval, Self::gc_contained)
    }

    /// Runs [`gc`](Self::gc) every `interval` from a tokio task (the sweep
    /// itself runs on the blocking pool, so async workers are never held up)
    /// until the returned handle is dropped or the manager is. `interval`
    /// must be greater than zero, and the call must be made inside a tokio
    /// runtime with its time driver on (`enable_time`): otherwise it
    /// returns a [`SpawnError`] and starts nothing. It never panics: tokio
    /// cannot be asked whether a runtime has timers, so a timer is made
    /// under `catch_unwind` with its panic message kept quiet. Built with
    /// `panic = "abort"`, where that cannot be caught, the sweeps are paced
    /// by a thread on real time instead (the same as tokio's time unless a
    /// test pauses it).
    ///
    /// ```
    /// use keyed_backoff::{Backoff, SpawnError};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?);
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let gc = b.spawn_gc_task(Duration::from_secs(60))?;
    /// drop(gc); // aborts the task
    /// # Ok::<(), SpawnError>(())
    /// # })?;
    /// // Outside a runtime: an error, not a panic.
    /// assert!(matches!(b.spawn_gc_task(Duration::from_secs(60)), Err(SpawnError::NoRuntime)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn spawn_gc_task(self: &Arc<Self>, interval: Duration) -> Result<GcGuard, SpawnError> {
        gc::spawn_task(Arc::downgrade(self), interval, Self::gc_contained)
    }
}
