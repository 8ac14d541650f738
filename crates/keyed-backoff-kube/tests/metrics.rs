//! The Prometheus text after a scripted run of a real `Controller`.

mod support;

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use support::{ApiServer, Ctx, configmap, one_to_sixteen, run_controller};

#[tokio::test(start_paused = true)]
async fn the_metrics_text_counts_a_scripted_run() {
    let backoff = one_to_sixteen(false);
    let mut registry = Registry::default();
    backoff.register(&mut registry, "configmaps");
    // Over 10 s on a 1 s to 16 s ladder:
    // - broken fails at 0, 1, 3, 7 (4 counted) and once more at 2 s on a
    //   watch event, during its backoff (1 refused);
    // - flaky fails at 0 and 1, succeeds at 3 (2 counted, 1 reset);
    // - panicky panics at 0, 1, 3, 7 (4 panics, 4 counted).
    let server = ApiServer::new(vec![
        configmap("broken", 1),
        configmap("flaky", 1),
        configmap("panicky", 1),
    ])
    .modified(Duration::from_secs(2), "broken");
    let script: &[(&str, &[bool])] = &[("flaky", &[false, false, true])];
    let ctx = Ctx::new(script, &["panicky"]);
    run_controller(server, &backoff, ctx, Duration::from_secs(10)).await;

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        samples,
        [
            "workqueue_retries_total{name=\"configmaps\"} 10",
            "controller_runtime_reconcile_errors_total{controller=\"configmaps\"} 11",
            "controller_runtime_reconcile_panics_total{controller=\"configmaps\"} 4",
            "keyed_backoff_reconcile_refusals_total{controller=\"configmaps\"} 1",
            "keyed_backoff_reconcile_resets_total{controller=\"configmaps\"} 1",
            "keyed_backoff_reconcile_skips_total{controller=\"configmaps\"} 0",
            "keyed_backoff_objects_in_backoff{controller=\"configmaps\"} 2",
        ]
    );
    assert!(
        text.contains("# TYPE workqueue_retries counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE keyed_backoff_objects_in_backoff gauge\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}
