//! Collecting garbage without being asked: a background thread, a tokio
//! task, or an amortised sweep on the callers' own time.
//!
//! Keyed state that nobody collects is a slow leak. Each mechanism here holds
//! only a weak reference to the manager, so it never keeps a dropped manager
//! alive, and each stops when its handle is dropped.

use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::Backoff;
use crate::ConfigError;
use crate::clock::Clock;

/// Keeps a background GC thread running; made by [`Backoff::spawn_gc`].
///
/// A guard, not a `JoinHandle`: **dropping it stops the thread** (it wakes
/// the thread, waits for it to exit and joins it), so the thread never
/// outlives its guard. Keep it in the struct that owns the manager, or call
/// [`detach`](Self::detach) to let the thread run until the manager is
/// dropped. `let _ = b.spawn_gc(..)` stops GC at once.
///
/// ```
/// use keyed_backoff::Backoff;
/// use std::sync::Arc;
/// use std::time::Duration;
/// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
/// let gc = b.spawn_gc(Duration::from_secs(30))?;
/// gc.stop(); // returns once the thread has exited
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard stops the GC thread; keep it, or call .detach()"]
pub struct GcGuard {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    detached: bool,
}

impl GcGuard {
    /// Stops the thread and waits for it to exit.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
    /// b.spawn_gc(Duration::from_millis(10))?.stop();
    /// assert_eq!(Arc::weak_count(&b), 0); // the thread's reference is gone
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn stop(self) {
        drop(self);
    }

    /// Lets the thread run on its own: it stops when the manager is dropped
    /// (it holds only a weak reference), never because of this guard.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
    /// b.spawn_gc(Duration::from_secs(30))?.detach();
    /// drop(b); // the thread notices at its next wake-up and exits
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn detach(mut self) {
        // Dropping the join handle detaches the thread; the stop flag is
        // never set, so it runs until its weak reference finds the manager gone.
        self.thread.take();
        self.detached = true;
    }
}

impl Drop for GcGuard {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        let (flag, wake) = &*self.stop;
        *flag.lock() = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // The thread contains panics of the expiry function, so it
            // only ends through the stop flag or a dropped manager.
            let _ = thread.join();
        }
    }
}

/// Keeps a background GC task on the tokio runtime running; made by
/// [`Backoff::spawn_gc_task`].
///
/// A guard, not a `JoinHandle`: **dropping it aborts the task**. Keep it
/// beside the manager, or call [`detach`](Self::detach) to let the task run
/// until the manager is dropped.
#[cfg(feature = "tokio")]
#[derive(Debug)]
#[must_use = "dropping the guard stops the GC task; keep it, or call .detach()"]
pub struct GcTaskGuard {
    task: Option<tokio::task::JoinHandle<()>>,
}

#[cfg(feature = "tokio")]
impl GcTaskGuard {
    /// Aborts the task.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
    /// b.spawn_gc_task(Duration::from_secs(30))?.stop();
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn stop(self) {
        drop(self);
    }

    /// Lets the task run on its own until the manager is dropped.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
    /// b.spawn_gc_task(Duration::from_secs(30))?.detach();
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn detach(mut self) {
        self.task.take();
    }
}

#[cfg(feature = "tokio")]
impl Drop for GcTaskGuard {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn positive(interval: Duration) -> Result<Duration, ConfigError> {
    if interval.is_zero() {
        Err(ConfigError::new("interval", "greater than zero", "0s"))
    } else {
        Ok(interval)
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
    /// assert_eq!(b.spawn_gc(Duration::ZERO).unwrap_err().field(), "interval");
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn spawn_gc(self: &Arc<Self>, interval: Duration) -> Result<GcGuard, ConfigError> {
        let interval = positive(interval)?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let weak: Weak<Self> = Arc::downgrade(self);
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("keyed-backoff-gc".into())
            .spawn(move || {
                let (flag, wake) = &*signal;
                loop {
                    {
                        let mut stopped = flag.lock();
                        if !*stopped {
                            wake.wait_for(&mut stopped, interval);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    match weak.upgrade() {
                        Some(backoff) => backoff.gc_contained(),
                        None => return,
                    }
                }
            })
            .map_err(|e| ConfigError::new("interval", "a GC thread the OS can start", e))?;
        Ok(GcGuard {
            stop,
            thread: Some(thread),
            detached: false,
        })
    }

    /// Runs [`gc`](Self::gc) every `interval` from a tokio task (the sweep
    /// itself runs on the blocking pool, so async workers are never held up)
    /// until the returned handle is dropped or the manager is. `interval`
    /// must be greater than zero, and the call must be made inside a tokio
    /// runtime with its time driver on (`enable_time`): otherwise it
    /// returns an error naming `runtime` and starts nothing.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?);
    /// let gc = b.spawn_gc_task(Duration::from_secs(60))?;
    /// drop(gc); // aborts the task
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// # }).unwrap();
    /// // Outside a runtime: an error, not a panic.
    /// # use keyed_backoff::Backoff;
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300)).unwrap());
    /// assert_eq!(b.spawn_gc_task(Duration::from_secs(60)).unwrap_err().field(), "runtime");
    /// ```
    #[cfg(feature = "tokio")]
    pub fn spawn_gc_task(self: &Arc<Self>, interval: Duration) -> Result<GcTaskGuard, ConfigError> {
        let interval = positive(interval)?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ConfigError::new("runtime", "a call inside a tokio runtime", e))?;
        // A runtime built without `enable_time` panics on the first timer;
        // find out here, in the caller's context, instead of in the task.
        let _probe = runtime.enter();
        let mut ticks =
            std::panic::catch_unwind(|| tokio::time::interval(interval)).map_err(|_| {
                ConfigError::new(
                    "runtime",
                    "a tokio runtime with its time driver (enable_time)",
                    "timers disabled",
                )
            })?;
        let weak: Weak<Self> = Arc::downgrade(self);
        let task = runtime.spawn(async move {
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is immediate
            loop {
                ticks.tick().await;
                let Some(backoff) = weak.upgrade() else {
                    return;
                };
                // A panic in the expiry function is counted, and the next
                // tick tries again.
                let _ = tokio::task::spawn_blocking(move || backoff.gc_contained()).await;
            }
        });
        Ok(GcTaskGuard { task: Some(task) })
    }
}
