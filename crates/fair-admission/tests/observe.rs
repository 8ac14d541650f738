//! The layer's Kubernetes metrics and refusal events, through a recording
//! `metrics` backend and a `tracing` subscriber, under tokio's paused time.
#![cfg(all(feature = "metrics", feature = "tracing"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fair_admission::{
    Apf, BoxError, Class, FairnessLayer, LevelSpec, LimitResponse, Overloaded, Rejected,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::{Layer, ServiceExt, service_fn};

/// One metric: name, labels, value.
type Sample = (String, Vec<(String, String)>, DebugValue);

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a DebugValue> {
    samples
        .iter()
        .find(|(n, ls, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| ls.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| v)
}

#[derive(Clone, Default)]
struct Refusals(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Refusals {
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
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
}

#[test]
fn refusals_waits_and_seats_are_reported_under_kubernetes_names() {
    use tracing_subscriber::layer::SubscriberExt;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let refusals = Refusals::default();
    let subscriber = tracing_subscriber::registry().with(refusals.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(subscriber, || {
            rt.block_on(async {
                let apf = Apf::builder(1)
                    .level(
                        "workload",
                        LevelSpec::limited(
                            1,
                            LimitResponse::Queue {
                                queues: 1,
                                queue_length_limit: 1,
                                hand_size: 1,
                            },
                        ),
                    )
                    .build()
                    .unwrap();
                let level = apf.level_id("workload").unwrap();
                let layer = FairnessLayer::new(apf, move |u: &String| {
                    Class::new(level, u.clone()).schema("global-default")
                });
                let service = layer.layer(service_fn(|_: String| async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok::<(), BoxError>(())
                }));
                let a = tokio::spawn(service.clone().oneshot("alice".to_owned()));
                tokio::task::yield_now().await;
                let b = tokio::spawn(service.clone().oneshot("bob".to_owned()));
                tokio::task::yield_now().await;
                // One running, one waiting: the queue (length 1) is full.
                let c = service
                    .clone()
                    .oneshot("carol".to_owned())
                    .await
                    .unwrap_err();
                assert_eq!(
                    c.downcast::<Overloaded>().unwrap().reason(),
                    Rejected::QueueFull
                );
                a.await.unwrap().unwrap();
                b.await.unwrap().unwrap();
            });
        });
    });

    let samples: Vec<Sample> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            (key.key().name().to_owned(), labels, value)
        })
        .collect();
    let level = [("priority_level", "workload")];
    assert!(matches!(
        find(
            &samples,
            "apiserver_flowcontrol_rejected_requests_total",
            &[
                ("priority_level", "workload"),
                ("flow_schema", "global-default"),
                ("reason", "queue-full")
            ]
        ),
        Some(DebugValue::Counter(1))
    ));
    for (name, value) in [
        ("apiserver_flowcontrol_current_executing_seats", 0.0),
        ("apiserver_flowcontrol_current_inqueue_requests", 0.0),
        ("apiserver_flowcontrol_current_limit_seats", 1.0),
    ] {
        match find(&samples, name, &level) {
            Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), value, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    // Alice ran at once; Bob waited the one second Alice ran.
    match find(
        &samples,
        "apiserver_flowcontrol_request_wait_duration_seconds",
        &[("execute", "true")],
    ) {
        Some(DebugValue::Histogram(h)) => {
            let mut waits: Vec<f64> = h.iter().map(|w| w.into_inner()).collect();
            waits.sort_by(f64::total_cmp);
            assert_eq!(waits.len(), 2, "{waits:?}");
            assert!(
                waits[0] < 0.001 && (waits[1] - 1.0).abs() < 0.01,
                "{waits:?}"
            );
        }
        other => panic!("wait histogram: {other:?}"),
    }
    let seen = refusals.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].contains("priority_level=workload")
            && seen[0].contains("flow_schema=global-default")
            && seen[0].contains("flow=carol")
            && seen[0].contains("reason=queue-full"),
        "{seen:?}"
    );
}
