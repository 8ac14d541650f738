//! What the layer reports: Kubernetes' `apiserver_flowcontrol_*` metrics
//! through the `metrics` facade (feature `metrics`) and a `tracing` event
//! per refusal (feature `tracing`). Without the features these functions
//! are empty and inlined away.

#![cfg_attr(
    not(any(feature = "metrics", feature = "tracing")),
    allow(unused_variables)
)]

use tokio::time::Instant;

use crate::{Apf, Class, LevelId, Rejected};

/// Kubernetes' `reason` label for a refusal.
#[cfg_attr(not(any(feature = "metrics", feature = "tracing")), allow(dead_code))]
fn reason(r: Rejected) -> &'static str {
    match r {
        Rejected::QueueFull => "queue-full",
        Rejected::NoSeat => "concurrency-limit",
        Rejected::TimedOut => "time-out",
        Rejected::UnknownLevel => "unknown-level",
        Rejected::NoTimer => "no-timer",
    }
}

/// `level`'s gauges after a change: seats executing, requests waiting and
/// the seat limit.
#[inline]
pub(crate) fn level(apf: &Apf, level: LevelId) {
    #[cfg(feature = "metrics")]
    if let (Some(stats), Some(name)) = (apf.level_stats(level), apf.level_name(level)) {
        let name = name.to_owned();
        metrics::gauge!("apiserver_flowcontrol_current_executing_seats", "priority_level" => name.clone())
            .set(f64::from(stats.seats_in_use));
        metrics::gauge!("apiserver_flowcontrol_current_inqueue_requests", "priority_level" => name.clone())
            .set(stats.waiting as f64);
        metrics::gauge!("apiserver_flowcontrol_current_limit_seats", "priority_level" => name)
            .set(f64::from(stats.seats));
    }
}

/// A request left its queue after waiting since `arrived`: to run
/// (`executed`) or refused.
#[inline]
pub(crate) fn waited(apf: &Apf, level: LevelId, arrived: Instant, executed: bool) {
    #[cfg(feature = "metrics")]
    if let Some(name) = apf.level_name(level) {
        metrics::histogram!(
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "priority_level" => name.to_owned(),
            "execute" => if executed { "true" } else { "false" }
        )
        .record(arrived.elapsed().as_secs_f64());
    }
}

/// A request of `class` was refused for `why`.
#[inline]
pub(crate) fn rejected(apf: &Apf, class: &Class, why: Rejected) {
    let level = apf
        .level_name(class.level)
        .unwrap_or("(another Apf's level)");
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "apiserver_flowcontrol_rejected_requests_total",
        "priority_level" => level.to_owned(),
        "reason" => reason(why)
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    tracing::info!(
        target: "fair_admission",
        priority_level = level,
        flow = class.flow.as_str(),
        reason = reason(why),
        "request refused"
    );
}
