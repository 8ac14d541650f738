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

/// Keeps background GC running; made by
/// [`Backoff::spawn_gc`](crate::Backoff::spawn_gc) (a thread) and
/// `Backoff::spawn_gc_task` (a tokio task, feature `tokio`).
///
/// A guard, not a `JoinHandle`: **dropping it stops GC**. A thread is woken,
/// and joined once it exits, so it never outlives its guard; a task is
/// aborted. Keep the guard in the struct that owns the manager, or call
/// [`detach`](Self::detach) to let GC run until the manager is dropped.
/// `let _ = b.spawn_gc(..)` stops GC at once.
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
#[must_use = "dropping the guard stops GC; keep it, or call .detach()"]
pub struct GcGuard {
    pacer: Option<Pacer>,
}

/// What paces the sweeps: a thread of its own, or a tokio task.
#[derive(Debug)]
enum Pacer {
    Thread {
        stop: Arc<(Mutex<bool>, Condvar)>,
        thread: JoinHandle<()>,
    },
    #[cfg(feature = "tokio")]
    #[cfg_attr(not(panic = "unwind"), allow(dead_code))]
    Task(tokio::task::JoinHandle<()>),
}

impl GcGuard {
    /// Stops GC: a thread is stopped and joined, a task aborted.
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

    /// Lets GC run on its own: it stops when the manager is dropped (it
    /// holds only a weak reference), never because of this guard.
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
        // Dropping a join handle detaches a thread or a task; the stop
        // flag is never set, so it runs until its weak reference finds
        // the manager gone.
        self.pacer.take();
    }
}

impl Drop for GcGuard {
    fn drop(&mut self) {
        match self.pacer.take() {
            Some(Pacer::Thread { stop, thread }) => {
                let (flag, wake) = &*stop;
                *flag.lock() = true;
                wake.notify_all();
                // The thread contains panics of the expiry function, so it
                // only ends through the stop flag or a dropped manager.
                let _ = thread.join();
            }
            #[cfg(feature = "tokio")]
            Some(Pacer::Task(task)) => task.abort(),
            None => {}
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
        pacer: Some(Pacer::Thread { stop, thread }),
    })
}

/// Calls `sweep(&owner)` every `interval` of tokio's time from a task on
/// the current runtime, the sweep itself on the blocking pool, while
/// `owner` is alive and the guard is held.
///
/// Nothing here panics. No runtime: [`SpawnError::NoRuntime`]. A runtime
/// without timers cannot be asked (tokio has no such query, and its first
/// timer panics), so [`timers_enabled`] makes one under `catch_unwind` with
/// the message kept quiet. Built with `panic = "abort"`, where no panic can
/// be caught, the sweeps are paced by a thread on real time instead, which
/// is tokio's time unless a test pauses it (and tests unwind).
#[cfg(feature = "tokio")]
pub(crate) fn spawn_task<T: Send + Sync + 'static>(
    owner: Weak<T>,
    interval: Duration,
    sweep: fn(&T),
) -> Result<GcGuard, SpawnError> {
    let interval = positive(interval)?;
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| SpawnError::NoRuntime)?;
    #[cfg(panic = "unwind")]
    {
        let entered = runtime.enter();
        if !timers_enabled() {
            return Err(SpawnError::NoTimers);
        }
        let mut ticks = tokio::time::interval(interval);
        drop(entered);
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
        Ok(GcGuard {
            pacer: Some(Pacer::Task(task)),
        })
    }
    #[cfg(not(panic = "unwind"))]
    {
        drop(runtime);
        let thread = spawn_thread(owner, interval, sweep)?;
        Ok(thread)
    }
}

/// Whether the current tokio runtime has its time driver: a timer made
/// under `catch_unwind`. For that one probe the panic hook in place is
/// wrapped by one that stays silent on this thread while probing (and
/// passes every other panic on); the hook in place before is put back
/// after. One probe at a time in the process: two interleaved could each
/// put back the hook it found while the other is probing, and the other's
/// panic would reach a hook that prints it.
#[cfg(all(feature = "tokio", panic = "unwind"))]
fn timers_enabled() -> bool {
    use std::cell::Cell;
    thread_local! {
        static PROBING: Cell<bool> = const { Cell::new(false) };
    }
    static ONE_AT_A_TIME: parking_lot::Mutex<()> = parking_lot::const_mutex(());
    let _probe = ONE_AT_A_TIME.lock();
    let previous = Arc::new(std::panic::take_hook());
    let forward = Arc::clone(&previous);
    std::panic::set_hook(Box::new(move |info| {
        if !PROBING.with(Cell::get) {
            forward(info);
        }
    }));
    PROBING.with(|p| p.set(true));
    let made = std::panic::catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))).is_ok();
    PROBING.with(|p| p.set(false));
    drop(std::panic::take_hook());
    std::panic::set_hook(Box::new(move |info| previous(info)));
    made
}

/// Runs `sweep`, containing a panic: one is counted in `store`'s
/// [`Stats::gc_panics`](crate::Stats::gc_panics) and observed, never
/// propagated.
pub(crate) fn contained<K, S>(store: &crate::store::Store<K, S>, sweep: impl FnOnce())
where
    K: std::hash::Hash + Eq + Clone,
    S: std::hash::BuildHasher + Clone,
{
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(sweep)).is_err() {
        store.count_gc_panic();
        crate::observe::gc_panicked();
    }
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
