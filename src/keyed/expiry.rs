//! The expiry rule as configured: a fixed window (client-go's `2·max` by
//! default, the kubelet's 600 s) or a user function of instants, client-go's
//! `HasExpiredFunc`. [`Judge`] presents either to the policy.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::policy::{Staleness, Tick, Window};
use crate::clock::ClockInstant;
use crate::duration::saturating_nanos;

/// A user expiry function: `(event, last_update, max) -> expired?`.
pub(crate) type ExpiryFn<I> = Arc<dyn Fn(I, I, Duration) -> bool + Send + Sync>;

pub(crate) enum Expiry<I> {
    /// Stale when `event − last_update > window`.
    After(Window),
    /// Any function of `(event, last_update, max)`.
    Custom(ExpiryFn<I>),
}

impl<I> fmt::Debug for Expiry<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expiry::After(w) => write!(f, "After({:?})", Duration::from_nanos(w.0)),
            Expiry::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl<I> Expiry<I> {
    /// Stale after a fixed window.
    pub(crate) fn after(window: Duration) -> Self {
        Expiry::After(Window(saturating_nanos(window)))
    }

    /// client-go's default rule, `event − last_update > 2·max`.
    pub(crate) fn twice_max(max: Duration) -> Self {
        Expiry::After(Window(saturating_nanos(max).saturating_mul(2)))
    }
}

/// The configured rule with what a user function needs to see instants:
/// the manager's epoch and `max`, and which manager asks (to refuse a
/// function that calls back into it).
pub(crate) struct Judge<'a, I> {
    pub(crate) expiry: &'a Expiry<I>,
    pub(crate) epoch: &'a I,
    pub(crate) max: &'a Duration,
    pub(crate) owner: usize,
}

thread_local! {
    /// The manager whose expiry function this thread is running, or 0.
    static RUNNING_FOR: Cell<usize> = const { Cell::new(0) };
}

/// Panics if this thread is inside `owner`'s expiry function: the function
/// runs under a shard lock, so calling the same manager from it would
/// deadlock (or, from a read lock, block every writer of that shard).
#[inline]
pub(crate) fn refuse_reentry(owner: usize) {
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

impl<I: ClockInstant> Staleness for Judge<'_, I> {
    #[inline]
    fn is_stale(&self, event: Tick, last_update: Tick) -> bool {
        match self.expiry {
            Expiry::After(window) => window.is_stale(event, last_update),
            Expiry::Custom(f) => running_for(self.owner, || {
                f(
                    self.epoch.offset_by_nanos(event.0),
                    self.epoch.offset_by_nanos(last_update.0),
                    *self.max,
                )
            }),
        }
    }
}
