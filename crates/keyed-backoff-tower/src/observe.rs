//! What operators see: `tracing` events (feature `tracing`, DEBUG, target
//! `keyed_backoff_tower`, the key as a field) and `keyed_backoff_tower_*`
//! metrics (feature `metrics`) at each decision the middleware takes.
//! Without the features every function here is empty and inlined away.

use std::fmt::Debug;
use std::time::Duration;

/// Which attempt of a request waited: its first, or a retry.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Attempt {
    First,
    Retry,
}

impl Attempt {
    #[cfg_attr(not(any(feature = "metrics", feature = "tracing")), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            Attempt::First => "first",
            Attempt::Retry => "retry",
        }
    }
}

/// Why a failed request was not retried.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Denied {
    /// The request had made its last allowed retry.
    MaxRetries,
    /// Its key's window ends later than the longest wait allowed.
    MaxWait,
    /// The shared retry budget refused.
    Budget,
}

impl Denied {
    #[cfg_attr(not(any(feature = "metrics", feature = "tracing")), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            Denied::MaxRetries => "max_retries",
            Denied::MaxWait => "max_wait",
            Denied::Budget => "budget",
        }
    }
}

/// An attempt for `key` starts waiting `wait` for the key's window to end.
#[inline]
pub(crate) fn waiting(key: &dyn Debug, wait: Duration, attempt: Attempt) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "keyed_backoff_tower",
        key = ?key,
        wait_ms = wait.as_millis() as u64,
        attempt = attempt.label(),
        "waiting for the key's backoff"
    );
    let _ = (key, wait, attempt);
}

/// An attempt waited `waited` in all before it went.
#[inline]
pub(crate) fn waited(waited: Duration, attempt: Attempt) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("keyed_backoff_tower_waits_total", "attempt" => attempt.label())
            .increment(1);
        metrics::histogram!("keyed_backoff_tower_wait_duration_seconds", "attempt" => attempt.label())
            .record(waited.as_secs_f64());
    }
    let _ = (waited, attempt);
}

/// A request for `key` was refused at once: its key's window ends in
/// `remaining`, later than the layer may wait.
#[inline]
pub(crate) fn refused(key: &dyn Debug, remaining: Duration) {
    #[cfg(feature = "metrics")]
    metrics::counter!("keyed_backoff_tower_refusals_total").increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "keyed_backoff_tower",
        key = ?key,
        remaining_ms = remaining.as_millis() as u64,
        "refused: the key is in backoff"
    );
    let _ = (key, remaining);
}

/// The server asked `key` to wait `asked`; it is held for `held` (the
/// same, or the layer's cap).
#[inline]
pub(crate) fn held(key: &dyn Debug, asked: Duration, held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "keyed_backoff_tower_retry_after_total",
        "capped" => if held < asked { "true" } else { "false" }
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "keyed_backoff_tower",
        key = ?key,
        retry_after_ms = asked.as_millis() as u64,
        held_ms = held.as_millis() as u64,
        "the server asked the key to wait"
    );
    let _ = (key, asked, held);
}

/// A request for `key` makes its `retry`-th retry.
#[inline]
pub(crate) fn retry(key: &dyn Debug, retry: u32) {
    #[cfg(feature = "metrics")]
    metrics::counter!("keyed_backoff_tower_retries_total").increment(1);
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "keyed_backoff_tower", key = ?key, retry, "retrying");
    let _ = (key, retry);
}

/// A failed request (for `key`, after `retries` retries, when known) is
/// not retried, for `why`.
#[inline]
pub(crate) fn retry_denied(key: Option<&dyn Debug>, why: Denied, retries: Option<u32>) {
    #[cfg(feature = "metrics")]
    metrics::counter!("keyed_backoff_tower_retries_denied_total", "reason" => why.label())
        .increment(1);
    #[cfg(feature = "tracing")]
    match why {
        Denied::Budget => tracing::debug!(
            target: "keyed_backoff_tower",
            key = key.map(tracing::field::debug),
            retries,
            reason = why.label(),
            "retry denied: the retry budget is spent (too many failures across all keys)"
        ),
        Denied::MaxRetries | Denied::MaxWait => tracing::debug!(
            target: "keyed_backoff_tower",
            key = key.map(tracing::field::debug),
            retries,
            reason = why.label(),
            "retry denied"
        ),
    }
    let _ = (key, why, retries);
}
