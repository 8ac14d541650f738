//! Collecting garbage without being asked: a background thread, a tokio
//! task, or an amortised sweep on the callers' own time.
//!
//! Keyed state that nobody collects is a slow leak. Each mechanism here holds
//! only a weak reference to the manager, so it never keeps a dropped manager
//! alive, and each stops when its handle is dropped. What a sweep is, this
//! module does not know: it is given a function to call.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::SpawnError;

/// Keeps a background GC thread running; made by [`Backoff::spawn_gc`](crate::Backoff::spawn_gc).
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
/// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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
/// [`Backoff::spawn_gc_task`](crate::Backoff::spawn_gc_task).
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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

/// `interval` if it is greater than zero.
fn positive(interval: Duration) -> Result<Duration, SpawnError> {
    if interval.is_zero() {
        Err(SpawnError::ZeroInterval)
    } else {
        Ok(interval)
    }
}

/// Calls `sweep(&owner)` every `interval` (real time) on a thread of its
/// own, while `owner` is alive and the guard is held.
///
/// The thread holds only a weak reference, sleeps on a condition variable
/// (so stopping is immediate) and is joined by the guard.
pub(crate) fn spawn_thread<T: Send + Sync + 'static>(
    owner: Weak<T>,
    interval: Duration,
    sweep: fn(&T),
) -> Result<GcGuard, SpawnError> {
    let interval = positive(interval)?;
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
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
                match owner.upgrade() {
                    Some(owner) => sweep(&owner),
                    None => return,
                }
            }
        })
        .map_err(SpawnError::Thread)?;
    Ok(GcGuard {
        stop,
        thread: Some(thread),
        detached: false,
    })
}

/// Calls `sweep(&owner)` every `interval` from a tokio task, the sweep
/// itself on the blocking pool, while `owner` is alive and the guard is
/// held.
#[cfg(feature = "tokio")]
pub(crate) fn spawn_task<T: Send + Sync + 'static>(
    owner: Weak<T>,
    interval: Duration,
    sweep: fn(&T),
) -> Result<GcTaskGuard, SpawnError> {
    let interval = positive(interval)?;
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| SpawnError::NoRuntime)?;
    // A runtime built without `enable_time` panics on the first timer;
    // find out here, in the caller's context, instead of in the task.
    let _probe = runtime.enter();
    let mut ticks = std::panic::catch_unwind(|| tokio::time::interval(interval))
        .map_err(|_| SpawnError::NoTimers)?;
    let task = runtime.spawn(async move {
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is immediate
        loop {
            ticks.tick().await;
            let Some(owner) = owner.upgrade() else {
                return;
            };
            // A panic in the sweep is the sweep's to contain; the next
            // tick tries again either way.
            let _ = tokio::task::spawn_blocking(move || sweep(&owner)).await;
        }
    });
    Ok(GcTaskGuard { task: Some(task) })
}

/// Runs `sweep`, containing a panic: `false` if it panicked.
pub(crate) fn contained(sweep: impl FnOnce()) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(sweep)).is_ok()
}

/// Opt-in amortised GC: every `every`-th write runs a sweep, unless another
/// caller is already sweeping.
#[derive(Debug)]
pub(crate) struct Amortized {
    every: u64,
    calls: AtomicU64,
    sweeping: AtomicBool,
}

impl Amortized {
    pub(crate) fn new(every: u32) -> Self {
        Amortized {
            every: u64::from(every.max(1)),
            calls: AtomicU64::new(0),
            sweeping: AtomicBool::new(false),
        }
    }

    /// Counts one call; runs `sweep` on every `every`-th, one sweeper at a time.
    #[inline]
    pub(crate) fn tick(&self, sweep: impl FnOnce()) {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(self.every) && !self.sweeping.swap(true, Ordering::Acquire) {
            struct Release<'a>(&'a AtomicBool);
            impl Drop for Release<'_> {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _release = Release(&self.sweeping);
            sweep();
        }
    }
}
