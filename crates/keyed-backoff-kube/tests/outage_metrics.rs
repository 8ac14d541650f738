//! An outage on a real `Controller`, as an operator sees it: the core's
//! outage metrics through the `metrics` facade (feature `metrics`) and the
//! Prometheus export (feature `prometheus-client`).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{ObjectBackoff, OutageSettings};
use keyed_backoff_testkit::metrics::Metrics;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use support::{ApiServer, Ctx, configmap, run_controller};

/// Six objects that always fail, on a 1 s to 16 s ladder, with outage
/// awareness declaring an outage after three fresh failures.
fn backoff() -> ObjectBackoff<ConfigMap> {
    ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(16))
        .outage(OutageSettings::default().min_failing_keys(3))
        .build()
        .unwrap()
}

fn scrape(registry: &Registry) -> Vec<String> {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with("keyed_backoff_outage"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_outage_and_its_end_reach_metrics_and_prometheus() {
    let metrics = Metrics::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let backoff = backoff();
    let mut registry = Registry::default();
    backoff.register(&mut registry, "configmaps");
    let names = ["a", "b", "c", "d", "e", "f"];
    metrics.record(|| {
        runtime.block_on(async {
            let server = ApiServer::new(names.iter().map(|n| configmap(n, 1)).collect());
            run_controller(server, &backoff, Ctx::new(&[], &[]), Duration::from_secs(5)).await;
        })
    });
    let stats = backoff.stats();
    assert!(stats.in_outage, "{stats:?}");
    assert_eq!(stats.outages, 1);
    assert!(stats.parked >= 3, "{stats:?}");
    assert_eq!(
        scrape(&registry),
        [
            "keyed_backoff_outages_total{controller=\"configmaps\"} 1".to_string(),
            "keyed_backoff_outage_active{controller=\"configmaps\"} 1".to_string(),
            format!(
                "keyed_backoff_outage_parked_objects{{controller=\"configmaps\"}} {}",
                stats.parked
            ),
        ]
    );

    // Two successes in a row end it: the gauge falls, the parked objects
    // are counted, and the export says so.
    metrics.record(|| {
        runtime.block_on(async {
            backoff.on_success(&configmap("a", 1));
            backoff.on_success(&configmap("b", 1));
        })
    });
    // One outage began and ended: the gauge went up and back down.
    let after = metrics.samples();
    assert_eq!(after.counter("keyed_backoff_outages_total", &[]), 1);
    assert_eq!(after.gauge("keyed_backoff_outage_active", &[]), Some(0.0));
    assert_eq!(
        after.counter("keyed_backoff_outage_parked_keys_total", &[]),
        stats.parked as u64 - 2,
        "the parked objects let go after the two successes"
    );
    let lines = scrape(&registry);
    assert_eq!(
        lines[0],
        "keyed_backoff_outages_total{controller=\"configmaps\"} 1"
    );
    assert_eq!(
        lines[1],
        "keyed_backoff_outage_active{controller=\"configmaps\"} 0"
    );
}
