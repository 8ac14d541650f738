//! When an entry is forgotten: a fixed window (client-go's `2·max` by
//! default, the kubelet's 600 s) or a user function of instants, client-go's
//! `HasExpiredFunc`, and the guard that keeps that function from calling
//! back into the manager that runs it.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::ClockInstant;
use crate::duration::saturating_nanos;
use crate::entry::Tick;
use crate::rules::{Staleness, Window};

/// A user expiry function: `(event, last_update, max) -> expired?`.
pub(crate) type ExpiryFn<I> = Arc<dyn Fn(I, I, Duration) -> bool + Send + Sync>;

pub(crate) enum Expiry<I> {
    /// Stale when `event − last_update > window`.
    After(Window),
    /// Any function of `(event, last_update, max)`, with what it needs to
    /// see instants: the manager's epoch and `max`.
    Custom {
        expired: ExpiryFn<I>,
        epoch: I,
        max: Duration,
    },
}

impl<I> fmt::Debug for Expiry<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expiry::After(w) => write!(f, "After({:?})", Duration::from_nanos(w.0)),
            Expiry::Custom { .. } => f.write_str("Custom(..)"),
        }
    }
}

impl<I: ClockInstant> Expiry<I> {
    /// Stale after a fixed window.
    pub(crate) fn after(window: Duration) -> Self {
        Expiry::After(Window(saturating_nanos(window)))
    }

    /// client-go's default rule, `event − last_update > 2·max`.
    pub(crate) fn twice_max(max: Duration) -> Self {
        Expiry::After(Window(saturating_nanos(max).saturating_mul(2)))
    }

    /// Calls `f` with the rule as the rules module asks it, matched once:
    /// the common fixed window goes as itself (no re-entry check, no
    /// dispatch per judgement, so `f` inlines to plain arithmetic), a user
    /// function after the re-entry check.
    #[inline]
    pub(crate) fn judged<R>(&self, f: impl FnOnce(&dyn Staleness) -> R) -> R {
        match self {
            Expiry::After(window) => f(window),
            Expiry::Custom { .. } => {
                self.enter();
                f(self)
            }
        }
    }

    /// Refuses a call from inside this rule's own expiry function (only a
    /// custom function can call back; the fixed window cannot).
    #[inline]
    pub(crate) fn enter(&self) {
        if let Expiry::Custom { .. } = self {
            refuse_reentry(self.owner());
        }
    }

    /// The identity of the manager that owns this rule, for re-entry
    /// checks: the rule's address, which cannot change while the manager
    /// is borrowed.
    #[inline]
    fn owner(&self) -> usize {
        std::ptr::from_ref(self).addr()
    }
}

thread_local! {
    /// The manager whose expiry function this thread is running, or 0.
    static RUNNING_FOR: Cell<usize> = const { Cell::new(0) };
}

/// Panics if this thread is inside `owner`'s expiry function: the function
/// runs under a shard lock, so calling the same manager from it would
/// deadlock (or, from a read lock, block every writer of that shard).
#[inline]
fn refuse_reentry(owner: usize) {
    if RUNNING_FOR.with(Cell::get) == owner {
        panic!(
            "keyed-backoff: the expiry function called back into the Backoff it belongs to; \
             it runs while the manager holds a lock, so it must not use that manager"
        );
    }
}

/// Runs `f` marked as `owner`'s expiry function, restoring the mark after
/// (also when `f` panics).
fn running_for<T>(owner: usize, f: impl FnOnce() -> T) -> T {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            RUNNING_FOR.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(RUNNING_FOR.with(|c| c.replace(owner)));
    f()
}

impl<I: ClockInstant> Staleness for Expiry<I> {
    #[inline]
    fn is_stale(&self, event: Tick, last_update: Tick) -> bool {
        match self {
            Expiry::After(window) => window.is_stale(event, last_update),
            Expiry::Custom {
                expired,
                epoch,
                max,
            } => running_for(self.owner(), || {
                expired(event.instant(*epoch), last_update.instant(*epoch), *max)
            }),
        }
    }
}
