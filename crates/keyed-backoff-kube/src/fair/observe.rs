//! The fair queues' metrics through the `metrics` facade (feature
//! `metrics`); without the feature, nothing.

use std::time::Duration;

use super::stats::{FairStats, Priority};

/// A seat was given at `priority` to a reconcile that waited `waited`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn granted(priority: Priority, waited: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!(
        "keyed_backoff_kube_fair_wait_seconds",
        "priority" => priority.as_str()
    )
    .record(waited.as_secs_f64());
}

/// The fair queues' state after a change.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn state(stats: &FairStats, longest_wait: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("keyed_backoff_kube_fair_seats_in_use").set(stats.seats_in_use);
        for p in Priority::ALL {
            metrics::gauge!("keyed_backoff_kube_fair_waiting", "priority" => p.as_str())
                .set(stats.waiting(p) as f64);
        }
        metrics::gauge!("keyed_backoff_kube_fair_longest_wait_seconds")
            .set(longest_wait.as_secs_f64());
        metrics::counter!("keyed_backoff_kube_fair_requeued_full_total")
            .absolute(stats.requeued_full);
        metrics::counter!("keyed_backoff_kube_fair_dropped_deleted_total")
            .absolute(stats.dropped_deleted);
    }
}
