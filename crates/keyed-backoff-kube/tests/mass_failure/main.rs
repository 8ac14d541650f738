//! Thousands of objects failing at once (an API outage, a broken webhook):
//! a real `Controller` against a mocked API server, under tokio's paused
//! time.

mod detected;
#[cfg(feature = "fair")]
mod fair;
mod outage;
mod partial;
#[path = "../support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use keyed_backoff_kube::{ObjectBackoff, ObjectBackoffBuilder};
use outage::Measured;
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

/// One dependency down from the start, 1,000 objects: what each preset
/// costs today. Each run prints its row (`--nocapture`): preset, outage |
/// calls that reached the dependency during the outage (busiest second) |
/// the last object's first success after recovery | busiest second after
/// recovery.
pub(crate) const OUTAGE_OBJECTS: usize = 1_000;

pub(crate) async fn outage_row(
    preset: &str,
    builder: ObjectBackoffBuilder<ConfigMap>,
    down_for: Duration,
) -> Measured {
    outage_row_with(preset, builder, down_for, None).await
}

/// [`outage_row`], with the reconciles through fair queues of `fair_seats`
/// seats if given.
pub(crate) async fn outage_row_with(
    preset: &str,
    builder: ObjectBackoffBuilder<ConfigMap>,
    down_for: Duration,
    fair_seats: Option<u32>,
) -> Measured {
    let measured = outage::measure(builder, OUTAGE_OBJECTS, down_for, fair_seats).await;
    println!("{preset}, {} s | {measured}", down_for.as_secs());
    measured
}

/// What objects that all fail together on a per-object ladder alone (no
/// controller-wide limit, no jitter) must show: each runs at 0, then after
/// `initial`, `2 initial`, ... up to `max`, all in the same instants.
fn in_lockstep(initial: Duration, max: Duration, down_for: Duration) -> Measured {
    let mut runs = vec![Duration::ZERO];
    let mut delay = initial;
    while *runs.last().unwrap() < down_for {
        runs.push(*runs.last().unwrap() + delay);
        delay = (delay * 2).min(max);
    }
    let recovery = runs.pop().unwrap();
    let mut per_second: HashMap<u64, usize> = HashMap::new();
    for run in &runs {
        *per_second.entry(run.as_secs()).or_default() += OUTAGE_OBJECTS;
    }
    Measured {
        during: runs.len() * OUTAGE_OBJECTS,
        during_busiest_second: per_second.values().copied().max().unwrap(),
        last_first_success: recovery - down_for,
        after_busiest_second: OUTAGE_OBJECTS,
    }
}

#[tokio::test(start_paused = true)]
async fn in_an_outage_the_workqueue_bucket_spares_the_dependency_but_recovery_takes_n_over_10_seconds()
 {
    let m = outage_row(
        "workqueue()",
        ObjectBackoffBuilder::workqueue(),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!((m.during, m.during_busiest_second), (2_299, 1_109));
    // The bucket releases the held objects at its 10 per second.
    assert_eq!(m.after_busiest_second, 10);
    let last = m.last_first_success.as_secs_f64();
    assert!((99.85..99.95).contains(&last), "{last} s");
}

#[tokio::test(start_paused = true)]
async fn in_an_outage_controller_runtime_retries_in_lockstep_and_recovers_all_at_once() {
    let down_for = Duration::from_secs(120);
    let m = outage_row(
        "controller_runtime()",
        ObjectBackoffBuilder::controller_runtime(),
        down_for,
    )
    .await;
    let expected = in_lockstep(
        Duration::from_millis(5),
        Duration::from_secs(1000),
        down_for,
    );
    assert_eq!(m, expected);
    assert_eq!((m.during, m.during_busiest_second), (15_000, 8_000));
    assert_eq!(m.last_first_success, Duration::from_millis(43_835));
}

/// The kubelet's ladder, 10 s doubling to 300 s, in an outage of
/// `down_for`.
async fn kubelet_outage(down_for: Duration) -> Measured {
    let m = outage_row("kubelet()", ObjectBackoffBuilder::kubelet(), down_for).await;
    let ladder = in_lockstep(Duration::from_secs(10), Duration::from_secs(300), down_for);
    assert_eq!(m, ladder);
    m
}

#[tokio::test(start_paused = true)]
async fn in_a_five_minute_outage_the_kubelet_ladder_recovers_every_object_in_one_instant() {
    let m = kubelet_outage(Duration::from_secs(300)).await;
    assert_eq!((m.during, m.during_busiest_second), (5_000, 1_000));
    assert_eq!(m.last_first_success, Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn in_a_ten_minute_outage_the_kubelet_ladder_is_at_its_cap_when_the_dependency_returns() {
    // Runs at 0, 10, 30, 70, 150, 310 and 610 s: the last wait before
    // recovery is the 300 s cap, and recovery comes with the next run.
    let m = kubelet_outage(Duration::from_secs(600)).await;
    assert_eq!((m.during, m.during_busiest_second), (6_000, 1_000));
    assert_eq!(m.last_first_success, Duration::from_secs(10));
}
