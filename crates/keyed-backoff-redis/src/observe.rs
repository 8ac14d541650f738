//! What operators see, called at the store's decisions: `tracing` events
//! (feature `tracing`, target `keyed_backoff_redis`) and `metrics` counters
//! (feature `metrics`). With a feature off its code is not compiled: with
//! both off every function here is empty and the timer reads no clock.

// A function whose feature is off uses none of its arguments.
#![cfg_attr(
    not(all(feature = "metrics", feature = "tracing")),
    allow(unused_variables)
)]

use std::time::Duration;

use crate::error::StoreError;
use crate::protocol::{Op, Reply};

/// Measures a script call, only when something reports the time.
pub(crate) struct Timer(#[cfg(any(feature = "metrics", feature = "tracing"))] std::time::Instant);

impl Timer {
    #[inline]
    pub(crate) fn start() -> Self {
        Timer(
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            std::time::Instant::now(),
        )
    }
}

/// One script call ended (in Redis, not the fallback), timed by `timer`:
/// counted and timed per operation and result. An error is a `WARN` event
/// (an `ERROR` for an entry that is not ours), except while Redis is
/// unreachable (`outage`): the outage is reported once, by
/// [`unreachable`], and each failed call is a `DEBUG` event.
#[inline]
pub(crate) fn operation(
    op: Op,
    key: &str,
    result: &Result<Reply, StoreError>,
    timer: Timer,
    outage: bool,
) {
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
        Err(error @ StoreError::Corrupt { .. }) => tracing::error!(
            target: "keyed_backoff_redis",
            op = op.name(),
            key,
            %error,
            cause = cause(error),
            "entry is not ours"
        ),
        Err(error) if outage => tracing::debug!(
            target: "keyed_backoff_redis",
            op = op.name(),
            key,
            %error,
            elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            "store error while Redis is unreachable"
        ),
        Err(error) => tracing::warn!(
            target: "keyed_backoff_redis",
            op = op.name(),
            key,
            %error,
            cause = cause(error),
            elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            "store error"
        ),
        Ok(_) => {}
    }
}

/// Calls started failing to reach Redis (refused, dropped or timed out),
/// with the first such `error`: reported once until Redis answers again.
#[inline]
pub(crate) fn unreachable(error: &StoreError) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("keyed_backoff_redis_unreachable_total").increment(1);
        metrics::gauge!("keyed_backoff_redis_unreachable").set(1.0);
    }
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "keyed_backoff_redis",
        %error,
        cause = cause(error),
        "Redis unreachable: calls are failing (each one is a DEBUG event until it answers again)"
    );
}

/// Redis answered a call again after being unreachable.
#[inline]
pub(crate) fn reachable() {
    #[cfg(feature = "metrics")]
    metrics::gauge!("keyed_backoff_redis_unreachable").set(0.0);
    #[cfg(feature = "tracing")]
    tracing::info!(target: "keyed_backoff_redis", "Redis answers again");
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
        cause = cause(error),
        open_for_ms = u64::try_from(open_for.as_millis()).unwrap_or(u64::MAX),
        "breaker opened: the in-process fallback answers until Redis is asked again"
    );
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
}

/// The `result` label of an operation.
#[cfg(feature = "metrics")]
fn result_label(result: &Result<Reply, StoreError>) -> &'static str {
    match result {
        Ok(Reply::Refused { .. }) => "refused",
        Ok(_) => "ok",
        Err(StoreError::Unavailable { .. }) => "unavailable",
        Err(StoreError::TimedOut { .. }) => "timed_out",
        Err(StoreError::Protocol { .. }) => "protocol",
        Err(StoreError::Corrupt { .. }) => "corrupt",
        Err(StoreError::NotReplicated { .. }) => "not_replicated",
        Err(_) => "error",
    }
}

/// The redis-rs error under `error`, as an event field (empty when there
/// is none).
#[cfg(feature = "tracing")]
fn cause(error: &StoreError) -> String {
    std::error::Error::source(error).map_or_else(String::new, ToString::to_string)
}
