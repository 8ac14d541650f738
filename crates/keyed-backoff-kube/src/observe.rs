//! What the crate tells an operator at each decision, and how.
//!
//! The reconcile path calls the functions here at its decisions (a failure
//! counted, a failure refused, a run skipped, a reset, a panic). With the
//! `tracing` feature each is an event under the target
//! `keyed_backoff_kube` carrying the object; without it they are empty and
//! inlined away, and anything costly to compute for an event is passed as a
//! closure that is never called. The Prometheus export (`prometheus.rs`)
//! reads the totals at scrape time instead.

use std::fmt::Display;
use std::time::Duration;

/// The `tracing` target of every event.
#[cfg(feature = "tracing")]
const TARGET: &str = "keyed_backoff_kube";

/// Whole milliseconds, as the events report durations.
#[cfg(feature = "tracing")]
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A failure was counted: the object waits `backoff` (its own ladder) or
/// `requeue` (longer, when the controller-wide bucket is empty).
#[inline]
pub(crate) fn failed(object: &impl Display, attempts: u32, backoff: Duration, requeue: Duration) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: TARGET,
        object = %object,
        attempts,
        backoff_ms = millis(backoff),
        requeue_ms = millis(requeue),
        "reconcile failed; requeued after its backoff"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (object, attempts, backoff, requeue);
}

/// A failure came while the object was in backoff: not counted.
#[inline]
pub(crate) fn refused(object: &impl Display, remaining: Duration) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: TARGET,
        object = %object,
        remaining_ms = millis(remaining),
        "reconcile failed during its backoff; not counted, requeued at the wait left"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (object, remaining);
}

/// A run of an object in backoff skipped the reconcile body.
#[inline]
pub(crate) fn skipped(object: &impl Display, remaining: Duration) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: TARGET,
        object = %object,
        remaining_ms = millis(remaining),
        "run skipped: the object is in backoff"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (object, remaining);
}

/// A success reset an object that had a backoff entry.
#[inline]
pub(crate) fn reset(object: &impl Display) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: TARGET, object = %object, "reconcile succeeded; backoff reset");
    #[cfg(not(feature = "tracing"))]
    let _ = object;
}

/// A reconcile panicked with `message`.
#[inline]
pub(crate) fn panicked(object: &impl Display, message: &str) {
    #[cfg(feature = "tracing")]
    tracing::error!(target: TARGET, object = %object, panic = %message, "reconcile panicked");
    #[cfg(not(feature = "tracing"))]
    let _ = (object, message);
}

/// A shared store could not answer `call` for `object`: the local fallback
/// answered. The first such answer after the store last answered is a
/// warning; the next ones, until it answers again, are debug events.
#[inline]
pub(crate) fn fallback(
    object: &impl Display,
    call: &'static str,
    error: &(dyn std::error::Error + 'static),
    first: bool,
) {
    #[cfg(feature = "tracing")]
    if first {
        tracing::warn!(
            target: TARGET,
            object = %object,
            call,
            error = %error,
            "shared backoff store unreachable; the local fallback answers until it is back"
        );
    } else {
        tracing::debug!(
            target: TARGET,
            object = %object,
            call,
            error = %error,
            "shared backoff store unreachable; answered by the local fallback"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (object, call, error, first);
}

/// A synchronous call could not wait for a shared store: the local
/// fallback answered, and the store is told in the background.
#[inline]
pub(crate) fn fallback_not_at_once(object: &impl Display, call: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: TARGET,
        object = %object,
        call,
        "the shared backoff store cannot answer a synchronous call at once; answered by the local fallback"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (object, call);
}

/// A shared store answers again after it was unreachable.
#[inline]
pub(crate) fn store_answers_again() {
    #[cfg(feature = "tracing")]
    tracing::info!(target: TARGET, "shared backoff store answers again");
}
