//! What operators see: `tracing` events and `metrics` counters, each behind
//! its feature. Without the features every function here is empty and
//! inlined away.

use std::time::Duration;
#[cfg(any(feature = "metrics", feature = "tracing"))]
use std::time::Instant;

use crate::error::StoreError;
use crate::protocol::{Op, Reply};

/// The `result` label of an operation.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn result_label(result: &Result<Reply, StoreError>) -> &'static str {
    match result {
        Ok(Reply::Refused { .. }) => "refused",
        Ok(_) => "ok",
        Err(StoreError::Unavailable { .. }) => "unavailable",
        Err(StoreError::TimedOut { .. }) => "timed_out",
        Err(StoreError::Corrupt { .. }) => "corrupt",
        Err(StoreError::NotReplicated { .. }) => "not_replicated",
        Err(_) => "error",
    }
}

/// Measures a script call, only when something reports the time: without
/// the features it is empty and reads no clock.
pub(crate) struct Timer(#[cfg(any(feature = "metrics", feature = "tracing"))] Instant);

impl Timer {
    #[inline]
    pub(crate) fn start() -> Self {
        Timer(
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            Instant::now(),
        )
    }
}

/// One script call ended (in Redis, not the fallback), timed by `timer`.
#[inline]
pub(crate) fn operation(op: Op, key: &str, result: &Result<Reply, StoreError>, timer: Timer) {
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    let elapsed = timer.0.elapsed();
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(
            "keyed_backoff_redis_operations_total",
            "op" => op.name(),
            "result" => result_label(result)
        )
        .increment(1);
        metrics::histogram!("keyed_backoff_redis_operation_duration_seconds", "op" => op.name())
            .record(elapsed.as_secs_f64());
    }
    #[cfg(feature = "tracing")]
    match result {
        Err(error @ StoreError::Corrupt { .. }) => {
            tracing::error!(target: "keyed_backoff_redis", op = op.name(), key, %error, "entry is not ours");
        }
        Err(error) => {
            tracing::warn!(
                target: "keyed_backoff_redis",
                op = op.name(),
                key,
                %error,
                elapsed_ms = elapsed.as_millis() as u64,
                "store error"
            );
        }
        Ok(_) => {}
    }
    let _ = (op, key, result, timer);
}

/// The breaker opened after `error`: the fallback answers for `open_for`.
#[inline]
pub(crate) fn breaker_opened(error: &StoreError, open_for: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("keyed_backoff_redis_breaker_trips_total").increment(1);
        metrics::gauge!("keyed_backoff_redis_breaker_open").set(1.0);
    }
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "keyed_backoff_redis",
        %error,
        open_for_ms = open_for.as_millis() as u64,
        "breaker opened: the in-process fallback answers until Redis is asked again"
    );
    let _ = (error, open_for);
}

/// Redis answered again after the breaker had opened.
#[inline]
pub(crate) fn breaker_closed() {
    #[cfg(feature = "metrics")]
    metrics::gauge!("keyed_backoff_redis_breaker_open").set(0.0);
    #[cfg(feature = "tracing")]
    tracing::info!(target: "keyed_backoff_redis", "breaker closed: Redis answers again");
}

/// The fallback answered `op` for `key`.
#[inline]
pub(crate) fn fallback_answer(op: Op, key: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("keyed_backoff_redis_fallback_answers_total", "op" => op.name()).increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "keyed_backoff_redis", op = op.name(), key, "answered by the in-process fallback");
    let _ = (op, key);
}
