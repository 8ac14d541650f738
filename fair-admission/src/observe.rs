//! What the layer reports: Kubernetes' `apiserver_flowcontrol_*` metrics
//! through the `metrics` facade (feature `metrics`) and a `tracing` event
//! per refusal (feature `tracing`). The metric handles and level names are
//! made once, with the layer; without the features the [`Observer`] holds
//! nothing and its methods are empty.

use tokio::time::Instant;

use crate::{Apf, Class, LevelId, Rejected};

/// The label of a refusal of a level that belongs to another `Apf`.
#[cfg(any(feature = "metrics", feature = "tracing"))]
const UNKNOWN: &str = "(another Apf's level)";

/// Kubernetes' `reason` label for a refusal.
#[cfg(any(feature = "metrics", feature = "tracing"))]
fn reason(r: Rejected) -> &'static str {
    match r {
        Rejected::QueueFull => "queue-full",
        Rejected::NoSeat => "concurrency-limit",
        Rejected::TimedOut => "time-out",
        Rejected::UnknownLevel => "unknown-level",
        Rejected::NoTimer => "no-timer",
    }
}

/// Every refusal reason, in the order of [`Handles::rejected`].
#[cfg(feature = "metrics")]
const REASONS: [Rejected; 5] = [
    Rejected::QueueFull,
    Rejected::NoSeat,
    Rejected::TimedOut,
    Rejected::UnknownLevel,
    Rejected::NoTimer,
];

/// One level's metrics, registered once.
#[cfg(feature = "metrics")]
struct Handles {
    executing: metrics::Gauge,
    inqueue: metrics::Gauge,
    limit: metrics::Gauge,
    waited_ran: metrics::Histogram,
    waited_refused: metrics::Histogram,
    rejected: [metrics::Counter; 5],
}

#[cfg(feature = "metrics")]
fn rejected_counter(level: &str, why: Rejected) -> metrics::Counter {
    metrics::counter!(
        "apiserver_flowcontrol_rejected_requests_total",
        "priority_level" => level.to_owned(),
        "reason" => reason(why)
    )
}

#[cfg(feature = "metrics")]
impl Handles {
    fn new(level: &str) -> Self {
        let name = || level.to_owned();
        let waited = |execute: &'static str| {
            metrics::histogram!(
                "apiserver_flowcontrol_request_wait_duration_seconds",
                "priority_level" => name(),
                "execute" => execute
            )
        };
        Handles {
            executing: metrics::gauge!("apiserver_flowcontrol_current_executing_seats", "priority_level" => name()),
            inqueue: metrics::gauge!("apiserver_flowcontrol_current_inqueue_requests", "priority_level" => name()),
            limit: metrics::gauge!("apiserver_flowcontrol_current_limit_seats", "priority_level" => name()),
            waited_ran: waited("true"),
            waited_refused: waited("false"),
            rejected: REASONS.map(|why| rejected_counter(level, why)),
        }
    }
}

/// The layer's reporting, one per layer.
pub(crate) struct Observer {
    /// Level names by index, for events.
    #[cfg(feature = "tracing")]
    names: Vec<String>,
    /// Metric handles by level index.
    #[cfg(feature = "metrics")]
    levels: Vec<Handles>,
    /// Refusals of levels of another `Apf`, by reason.
    #[cfg(feature = "metrics")]
    unknown: metrics::Counter,
}

#[cfg_attr(
    not(any(feature = "metrics", feature = "tracing")),
    allow(unused_variables)
)]
impl Observer {
    /// Names and registers what `apf`'s levels report. Made where the
    /// layer is made, so it registers with the recorder installed then.
    pub(crate) fn new(apf: &Apf) -> Self {
        #[cfg(any(feature = "metrics", feature = "tracing"))]
        let names: Vec<String> = apf
            .level_ids()
            .map(|l| apf.level_name(l).unwrap_or(UNKNOWN).to_owned())
            .collect();
        Observer {
            #[cfg(feature = "metrics")]
            levels: names.iter().map(|n| Handles::new(n)).collect(),
            #[cfg(feature = "metrics")]
            unknown: rejected_counter(UNKNOWN, Rejected::UnknownLevel),
            #[cfg(feature = "tracing")]
            names,
        }
    }

    /// `level`'s gauges after a change: seats executing, requests waiting
    /// and the seat limit. Nothing for a level of another `Apf`.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn level(&self, apf: &Apf, level: LevelId) {
        #[cfg(feature = "metrics")]
        if let (Some(stats), Some(h)) = (apf.level_stats(level), self.levels.get(level.index())) {
            h.executing.set(f64::from(stats.seats_in_use));
            h.inqueue.set(stats.waiting as f64);
            h.limit.set(f64::from(stats.seats));
        }
    }

    /// A request of `level` left its queue after waiting since `arrived`:
    /// to run (`executed`) or refused. Only for requests that were admitted
    /// to their level, so `level` is one of this `Apf`'s.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn waited(&self, level: LevelId, arrived: Instant, executed: bool) {
        #[cfg(feature = "metrics")]
        if let Some(h) = self.levels.get(level.index()) {
            let waited = if executed {
                &h.waited_ran
            } else {
                &h.waited_refused
            };
            waited.record(arrived.elapsed().as_secs_f64());
        }
    }

    /// A request of `class` was refused for `why`.
    #[inline]
    pub(crate) fn rejected(&self, class: &Class, why: Rejected) {
        // A level of another `Apf` is refused as such, and only then.
        let index = (why != Rejected::UnknownLevel).then(|| class.level.index());
        #[cfg(feature = "metrics")]
        match index.and_then(|i| self.levels.get(i)) {
            Some(h) => {
                let at = REASONS.iter().position(|r| *r == why).unwrap_or(0);
                h.rejected[at].increment(1);
            }
            None => self.unknown.increment(1),
        }
        #[cfg(feature = "tracing")]
        tracing::info!(
            target: "fair_admission",
            priority_level = index.and_then(|i| self.names.get(i)).map_or(UNKNOWN, String::as_str),
            flow = class.flow.as_str(),
            reason = reason(why),
            "request refused"
        );
    }
}
