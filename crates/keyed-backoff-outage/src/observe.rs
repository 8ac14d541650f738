//! What outage awareness tells an operator: `tracing` events (feature
//! `tracing`, target `keyed_backoff_outage`) and `metrics` (feature
//! `metrics`) when an outage begins, ends, and when its release is over.
//! Without the features each function is empty and compiles to nothing.
//!
//! | event (INFO) | metrics |
//! |---|---|
//! | an outage began, with the failures and successes that declared it | `keyed_backoff_outages_total` +1, `keyed_backoff_outage_active` +1 |
//! | the outage ended, with how long it lasted and the keys it parked | `keyed_backoff_outage_active` −1, `keyed_backoff_outage_duration_seconds` (histogram), `keyed_backoff_outage_parked_keys_total` + the keys parked |
//! | the release after it is over, with the keys let go | `keyed_backoff_outage_released_keys_total` + the keys let go |
//! | (ERROR, once) a fleet's store holds an outage state that is not ours | `keyed_backoff_outage_foreign_state_total` +1, `keyed_backoff_outage_foreign_state` 1 (0 once ours again) |
//! | (WARN) a fleet's store failed: the replica goes on alone for a second | |
//!
//! The gauge counts the wrappers in an outage, so several in one process
//! add up instead of overwriting each other. The outage of a domain (a
//! dependency failures name) tells the same, with the field and the label
//! `domain`: at most `max_domains` values, as no more are tracked.

use crate::Event;

/// An event of the outage of `domain`, or of everything when `None`.
pub(crate) fn outage(domain: Option<&str>, event: Event) {
    #[cfg(feature = "tracing")]
    trace_outage(domain, event);
    #[cfg(feature = "metrics")]
    count_outage(domain, event);
    let _ = (domain, event);
}

#[cfg(feature = "tracing")]
fn trace_outage(domain: Option<&str>, event: Event) {
    let domain = domain.unwrap_or("");
    match event {
        Event::Began(c) => tracing::info!(
            target: "keyed_backoff_outage",
            domain,
            fresh_failures = c.fresh_failures,
            failures = c.failures,
            successes = c.successes,
            over_ms = c.over.as_millis() as u64,
            "outage began: many keys newly failing and almost none succeeding; \
             every key now waits on the shared outage ladder"
        ),
        Event::Ended { lasted, parked } => tracing::info!(
            target: "keyed_backoff_outage",
            domain,
            lasted_ms = lasted.as_millis() as u64,
            parked,
            "outage ended: parked keys are let go at the release rate"
        ),
        Event::Released { released } => tracing::info!(
            target: "keyed_backoff_outage",
            domain,
            released,
            "outage release over: no key is parked any more"
        ),
    }
}

#[cfg(feature = "metrics")]
fn count_outage(domain: Option<&str>, event: Event) {
    // The outage of everything has no label, as before domains; a
    // domain's is labelled with its name.
    let labels: Vec<metrics::Label> = domain
        .map(|d| metrics::Label::new("domain", d.to_owned()))
        .into_iter()
        .collect();
    match event {
        Event::Began(_) => {
            metrics::counter!("keyed_backoff_outages_total", labels.clone()).increment(1);
            metrics::gauge!("keyed_backoff_outage_active", labels).increment(1.0);
        }
        Event::Ended { lasted, parked } => {
            metrics::gauge!("keyed_backoff_outage_active", labels.clone()).decrement(1.0);
            metrics::histogram!("keyed_backoff_outage_duration_seconds", labels.clone())
                .record(lasted.as_secs_f64());
            metrics::counter!("keyed_backoff_outage_parked_keys_total", labels)
                .increment(parked as u64);
        }
        Event::Released { released } => {
            metrics::counter!("keyed_backoff_outage_released_keys_total", labels)
                .increment(released);
        }
    }
}

/// The fleet's store holds a value that is not ours (`what`): reported
/// once, until one of ours is read again.
pub(crate) fn foreign_state(what: &dyn std::fmt::Display) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("keyed_backoff_outage_foreign_state_total").increment(1);
        metrics::gauge!("keyed_backoff_outage_foreign_state").set(1.0);
    }
    #[cfg(feature = "tracing")]
    tracing::error!(
        target: "keyed_backoff_outage",
        found = %what,
        "the fleet's outage state in its store is not ours: left untouched; this replica goes on \
         alone (fix or delete that value)"
    );
    let _ = what;
}

/// The fleet's store holds one of our states again.
pub(crate) fn state_ours_again() {
    #[cfg(feature = "metrics")]
    metrics::gauge!("keyed_backoff_outage_foreign_state").set(0.0);
    #[cfg(feature = "tracing")]
    tracing::info!(target: "keyed_backoff_outage", "the fleet's outage state is ours again");
}

/// The fleet's store failed with `error`: this replica goes on alone for
/// a second.
pub(crate) fn store_failed(error: &dyn std::error::Error) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "keyed_backoff_outage",
        %error,
        "the fleet's outage state could not be read or written: this replica goes on alone for a \
         second"
    );
    let _ = error;
}
