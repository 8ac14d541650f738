//! What the layer reports: Kubernetes' `apiserver_flowcontrol_*` metrics
//! through the `metrics` facade (feature `metrics`) and a `tracing` event
//! per refusal at DEBUG (feature `tracing`). The metric handles and level names are
//! made once, with the layer; without the features the [`Observer`] holds
//! nothing and its methods are empty.

use tokio::time::Instant;

use crate::apf::Level;
use crate::{Apf, Rejected};

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

/// One level's metrics, registered once.
#[cfg(feature = "metrics")]
struct Handles {
    executing: metrics::Gauge,
    inqueue: metrics::Gauge,
    limit: metrics::Gauge,
    waited_ran: metrics::Histogram,
    waited_refused: metrics::Histogram,
}

/// Every refusal reason, in the order of a [`Refusals`] entry.
#[cfg(feature = "metrics")]
const REASONS: [Rejected; 5] = [
    Rejected::QueueFull,
    Rejected::NoSeat,
    Rejected::TimedOut,
    Rejected::UnknownLevel,
    Rejected::NoTimer,
];

/// The refusal counters, by level index (`usize::MAX` for a level of
/// another `Apf`) and flow schema, one per reason. A schema's counters are
/// registered at its first refusal, so later refusals neither allocate nor
/// look the registry up.
#[cfg(feature = "metrics")]
type Refusals =
    std::collections::HashMap<usize, std::collections::HashMap<Box<str>, [metrics::Counter; 5]>>;

#[cfg(feature = "metrics")]
fn refusal_counters(level: &str, schema: &str) -> [metrics::Counter; 5] {
    REASONS.map(|why| {
        metrics::counter!(
            "apiserver_flowcontrol_rejected_requests_total",
            "priority_level" => level.to_owned(),
            "flow_schema" => schema.to_owned(),
            "reason" => reason(why)
        )
    })
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
        }
    }
}

/// The layer's reporting, one per layer.
pub(crate) struct Observer {
    /// Level names by index, for refusals.
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    names: Vec<String>,
    /// Metric handles by level index.
    #[cfg(feature = "metrics")]
    levels: Vec<Handles>,
    #[cfg(feature = "metrics")]
    refusals: parking_lot::Mutex<Refusals>,
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
            refusals: parking_lot::Mutex::default(),
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            names,
        }
    }

    /// The gauges of `level`, the level of index `index`, after a change:
    /// seats executing, requests waiting and the seat limit.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn level(&self, index: usize, level: &Level) {
        #[cfg(feature = "metrics")]
        if let Some(h) = self.levels.get(index) {
            let stats = level.stats();
            h.executing.set(stats.seats_in_use as f64);
            h.inqueue.set(stats.waiting as f64);
            h.limit.set(f64::from(stats.seats));
        }
    }

    /// A request of the level of index `index` left its queue at `left`
    /// after waiting since `arrived`: to run (`executed`) or refused.
    #[inline]
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn waited(&self, index: usize, arrived: Instant, left: Instant, executed: bool) {
        #[cfg(feature = "metrics")]
        if let Some(h) = self.levels.get(index) {
            let waited = if executed {
                &h.waited_ran
            } else {
                &h.waited_refused
            };
            waited.record(left.saturating_duration_since(arrived).as_secs_f64());
        }
    }

    /// A request of flow schema `schema` and flow `flow` at the level of
    /// index `index` was refused for `why`.
    #[inline]
    #[cfg_attr(
        not(any(feature = "metrics", feature = "tracing")),
        allow(unused_variables)
    )]
    pub(crate) fn rejected(&self, index: usize, schema: &str, flow: &str, why: Rejected) {
        // A level of another `Apf` is refused as such, and only then.
        #[cfg(any(feature = "metrics", feature = "tracing"))]
        let index = (why != Rejected::UnknownLevel)
            .then_some(index)
            .filter(|&i| i < self.names.len());
        #[cfg(any(feature = "metrics", feature = "tracing"))]
        let level = index.map_or(UNKNOWN, |i| self.names[i].as_str());
        #[cfg(feature = "metrics")]
        {
            let mut refusals = self.refusals.lock();
            let by_schema = refusals.entry(index.unwrap_or(usize::MAX)).or_default();
            let at = REASONS.iter().position(|r| *r == why).unwrap_or(0);
            match by_schema.get(schema) {
                Some(counters) => counters[at].increment(1),
                None => {
                    let counters = refusal_counters(level, schema);
                    counters[at].increment(1);
                    by_schema.insert(schema.into(), counters);
                }
            }
        }
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "fair_admission",
            priority_level = level,
            flow_schema = schema,
            flow = flow,
            reason = reason(why),
            "request refused"
        );
    }
}
