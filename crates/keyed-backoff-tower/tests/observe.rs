//! What an operator sees: a `tracing` event and a metric for each wait,
//! refusal, hold and denied retry (the budget's included, with its
//! reason), through a recording `metrics` backend and a `tracing`
//! subscriber, under tokio's paused time.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::manager;
use keyed_backoff_testkit::events::{Events, Seen};
use keyed_backoff_testkit::metrics::Metrics;
use keyed_backoff_tower::keyed_backoff::budget::TokenBucket;
use keyed_backoff_tower::{Classify, KeyedBackoffLayer};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

/// The events of this crate whose message holds `message` and whose
/// fields are `fields`; there must be `n` of them.
fn find(events: &Events, n: usize, message: &str, fields: &[(&str, &str)]) -> Vec<Seen> {
    let found: Vec<Seen> = events
        .with_message(message)
        .into_iter()
        .filter(|e| e.target == "keyed_backoff_tower")
        .filter(|e| fields.iter().all(|(k, v)| e.field(k) == Some(*v)))
        .collect();
    assert_eq!(
        found.len(),
        n,
        "{message} {fields:?} in {:#?}",
        events.seen()
    );
    found
}

/// `busy` errors carry the server's wait: 5 s.
#[derive(Clone, Copy)]
struct Busy;

impl Classify<(), &'static str> for Busy {
    fn should_retry(&self, result: &Result<(), &'static str>) -> bool {
        result.is_err()
    }
    fn retry_after(&self, result: &Result<(), &'static str>) -> Option<Duration> {
        (result == &Err("busy")).then_some(Duration::from_secs(5))
    }
}

/// Every key fails, with its own name as the error.
fn upstream() -> BoxCloneService<&'static str, (), &'static str> {
    BoxCloneService::new(tower::service_fn(
        |key: &'static str| async move { Err(key) },
    ))
}

fn key(req: &&'static str) -> &'static str {
    req
}

#[test]
fn waits_refusals_holds_and_denied_retries_are_reported() {
    let metrics = Metrics::new();
    let events = Events::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics.record(|| {
        events.record(|| {
            rt.block_on(async {
                let backoff = manager();
                // Retries while more than 1 of 2 tokens is left: the
                // first failure leaves 1.
                let bucket = Arc::new(TokenBucket::new(2.0, 0.1).unwrap());
                let layer = KeyedBackoffLayer::new(Arc::clone(&backoff), key)
                    .retry_if(Busy)
                    .max_retry_after(Duration::from_secs(2))
                    .budget(bucket);
                let service = layer.clone().layer(upstream());
                // Fails, held 2 s (capped from 5), retry denied by the budget.
                assert!(service.clone().oneshot("busy").await.is_err());
                // Waits the 2 s, fails and is held again, denied again.
                assert!(service.clone().oneshot("busy").await.is_err());
                // While `busy` is held, a layer that never waits refuses.
                let fast = layer.fail_fast().layer(upstream());
                assert!(fast.oneshot("busy").await.is_err());
            });
        });
    });

    let busy = ("key", "\"busy\"");
    let denials = find(
        &events,
        2,
        "retry denied",
        &[busy, ("reason", "budget"), ("retries", "0")],
    );
    assert!(
        denials[0].message.contains("the retry budget is spent"),
        "{denials:?}"
    );
    assert_eq!(denials[0].level, tracing::Level::DEBUG);
    let first = [busy, ("wait_ms", "2000"), ("attempt", "first")];
    find(&events, 1, "waiting for the key's backoff", &first);
    find(&events, 1, "refused: the key is in backoff", &[busy]);
    let held = [busy, ("retry_after_ms", "5000"), ("held_ms", "2000")];
    find(&events, 2, "the server asked the key to wait", &held);

    let now = metrics.samples();
    let denied = [("reason", "budget")];
    assert_eq!(
        now.counter("keyed_backoff_tower_retries_denied_total", &denied),
        2
    );
    let capped = [("capped", "true")];
    assert_eq!(
        now.counter("keyed_backoff_tower_retry_after_total", &capped),
        2
    );
    assert_eq!(now.counter("keyed_backoff_tower_refusals_total", &[]), 1);
    let first = [("attempt", "first")];
    assert_eq!(now.counter("keyed_backoff_tower_waits_total", &first), 1);
    let waits = now.histogram("keyed_backoff_tower_wait_duration_seconds", &first);
    assert_eq!(waits, [2.0]);
}
