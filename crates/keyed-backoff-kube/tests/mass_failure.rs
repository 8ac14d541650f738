//! Thousands of objects failing at once (an API outage, a broken webhook)
//! under client-go's default controller limiter: a real `Controller`
//! against a mocked API server, under tokio's paused time.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::ObjectBackoff;
use support::{ApiServer, Ctx, configmap, run_controller};

const OBJECTS: usize = 5_000;

/// Runs `OBJECTS` always-failing objects for `horizon` and returns the
/// times (seconds) of their retries, that is every run after each object's
/// first, sorted, and how many objects were retried.
async fn retries(backoff: ObjectBackoff<ConfigMap>, horizon: Duration) -> (Vec<f64>, usize) {
    let objects = (0..OBJECTS)
        .map(|i| configmap(&format!("cm-{i}"), 1))
        .collect();
    let ctx = run_controller(
        ApiServer::new(objects),
        &backoff,
        Ctx::new(&[], &[]),
        horizon,
    )
    .await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut times = Vec::new();
    for (name, at) in ctx.runs() {
        let n = seen.entry(name).or_default();
        if *n > 0 {
            times.push(at.as_secs_f64());
        }
        *n += 1;
    }
    times.sort_by(f64::total_cmp);
    let retried = seen.values().filter(|n| **n > 1).count();
    (times, retried)
}

#[tokio::test(start_paused = true)]
async fn five_thousand_objects_failing_at_once_are_retried_at_most_ten_per_second_after_the_burst()
{
    let (times, retried) = retries(ObjectBackoff::workqueue(), Duration::from_secs(495)).await;
    assert_eq!(retried, OBJECTS, "every object is retried within 495 s");
    // The burst of 100 is retried after the per-object 5 ms ...
    assert!(
        times[..100].iter().all(|t| *t < 0.01),
        "{:?}",
        &times[..100]
    );
    // ... and from then on retries come no faster than the bucket's 10/s:
    // the n-th retry (n > 100) is not before (n - 100) / 10 s.
    for (i, t) in times.iter().enumerate().skip(100) {
        let earliest = (i - 99) as f64 / 10.0;
        assert!(
            *t >= earliest - 1e-9,
            "retry {i} at {t} s, before {earliest} s"
        );
    }
    // As client-go spreads them: the last object's first retry about 490 s
    // after the failure.
    let last_first_retry = times[OBJECTS - 1];
    assert!(
        (489.0..=491.0).contains(&last_first_retry),
        "the 5,000th retry at {last_first_retry} s"
    );
}

#[tokio::test(start_paused = true)]
async fn without_the_bucket_the_same_failures_are_all_retried_within_milliseconds() {
    // controller-runtime's per-object-only default: every object is retried
    // 5 ms later, together. This is the lockstep the bucket prevents.
    let (times, retried) =
        retries(ObjectBackoff::controller_runtime(), Duration::from_secs(1)).await;
    assert_eq!(retried, OBJECTS);
    let within_10ms = times.iter().filter(|t| **t < 0.01).count();
    assert!(within_10ms >= OBJECTS, "{within_10ms} retries within 10 ms");
}
