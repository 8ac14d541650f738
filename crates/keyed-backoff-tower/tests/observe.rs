//! What an operator sees: a `tracing` event and a metric for each wait,
//! refusal, hold and denied retry (the budget's included, with its
//! reason), through a recording `metrics` backend and a `tracing`
//! subscriber, under tokio's paused time.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::manager;
use keyed_backoff_tower::keyed_backoff::budget::TokenBucket;
use keyed_backoff_tower::{Classify, KeyedBackoffLayer};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};
use tracing_subscriber::layer::SubscriberExt;

/// Every event: its message and fields, as `name=value` words.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0 += &format!("{}={v:?} ", f.name());
            }
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                self.0 += &format!("{}={v} ", f.name());
            }
        }
        let mut fields = Fields(format!("{} ", event.metadata().target()));
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
}

impl Events {
    /// The `n` events holding every word of `words`; the first of them.
    fn find(&self, n: usize, words: &[&str]) -> String {
        let events = self.0.lock().unwrap();
        let found: Vec<&String> = events
            .iter()
            .filter(|e| words.iter().all(|w| e.contains(w)))
            .collect();
        assert_eq!(found.len(), n, "{words:?} in {events:#?}");
        found[0].clone()
    }
}

/// One reading of every metric: name, labels, value.
type Metrics = Vec<(String, Vec<(String, String)>, DebugValue)>;

/// Every metric recorded so far (a reading drains the counters).
fn read(snapshotter: &Snapshotter) -> Metrics {
    let snapshot = snapshotter.snapshot().into_vec();
    snapshot
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key.labels();
            let labels = labels.map(|l| (l.key().to_owned(), l.value().to_owned()));
            (key.name().to_owned(), labels.collect(), value)
        })
        .collect()
}

/// The value of metric `name` with `labels`.
fn metric<'a>(metrics: &'a Metrics, name: &str, labels: &[(&str, &str)]) -> &'a DebugValue {
    let found = metrics.iter().find(|(n, ls, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
    });
    found
        .map(|(_, _, value)| value)
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
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
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let events = Events::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(subscriber, || {
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

    let denial = events.find(2, &["retry denied", "reason=budget"]);
    assert!(
        denial.starts_with("keyed_backoff_tower ")
            && denial.contains("the retry budget is spent")
            && denial.contains("key=\"busy\"")
            && denial.contains("retries=0"),
        "{denial}"
    );
    events.find(
        1,
        &[
            "waiting for the key's backoff",
            "key=\"busy\"",
            "wait_ms=2000",
            "attempt=first",
        ],
    );
    events.find(1, &["refused: the key is in backoff", "key=\"busy\""]);
    let held = events.find(
        2,
        &[
            "the server asked the key to wait",
            "retry_after_ms=5000",
            "held_ms=2000",
        ],
    );
    assert!(held.contains("key=\"busy\""), "{held}");

    let metrics = read(&snapshotter);
    assert_eq!(
        metric(
            &metrics,
            "keyed_backoff_tower_retries_denied_total",
            &[("reason", "budget")]
        ),
        &DebugValue::Counter(2)
    );
    assert_eq!(
        metric(
            &metrics,
            "keyed_backoff_tower_retry_after_total",
            &[("capped", "true")]
        ),
        &DebugValue::Counter(2)
    );
    assert_eq!(
        metric(&metrics, "keyed_backoff_tower_refusals_total", &[]),
        &DebugValue::Counter(1)
    );
    assert_eq!(
        metric(
            &metrics,
            "keyed_backoff_tower_waits_total",
            &[("attempt", "first")]
        ),
        &DebugValue::Counter(1)
    );
    match metric(
        &metrics,
        "keyed_backoff_tower_wait_duration_seconds",
        &[("attempt", "first")],
    ) {
        DebugValue::Histogram(waits) => {
            let waits: Vec<f64> = waits.iter().map(|w| w.into_inner()).collect();
            assert_eq!(waits, [2.0]);
        }
        other => panic!("{other:?}"),
    }
}
