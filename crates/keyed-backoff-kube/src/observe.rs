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
