//! The same outages with outage detection on: `.outage(...)` on each
//! preset's builder, everything else as the preset has it.
//!
//! kube-runtime makes the futures of every ready object before it polls
//! any of them; the wrapped reconcile asks again whether its object is
//! held when its future first runs, and the first failures are seen by
//! detection as the reconcile returns them, so the first wave is held
//! back like every later one.

use std::time::Duration;

use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};

use crate::outage::Measured;
use crate::outage_row;

/// The default settings' probes per step.
const PROBES: usize = 3;

/// The default settings' distinct keys failing that declare an outage.
const MIN_FAILING_KEYS: usize = 20;

/// What every run with detection on must show against the same preset's
/// run without it (`off`), with parked objects let go at `release_rate`:
/// no second of the recovery sees more than `release_rate` runs, the probes
/// that found the dependency back included, and the whole outage reaches
/// the dependency at least 5x less.
pub(crate) fn assert_held_and_released(on: &Measured, off: &Measured, release_rate: usize) {
    assert!(
        on.last_first_success <= Duration::from_secs(15),
        "the last object first succeeded {:?} after recovery",
        on.last_first_success
    );
    assert!(
        on.after_busiest_second <= release_rate,
        "{} runs in one second of the recovery, above {release_rate}",
        on.after_busiest_second
    );
    assert_whole_outage_5x_cheaper(on, off);
    // The first wave is held too: its first second sees the failures that
    // declare the outage and the probes of the ladder's first step.
    assert!(
        on.during_busiest_second <= MIN_FAILING_KEYS + PROBES,
        "{} runs in the busiest second of the outage",
        on.during_busiest_second
    );
}

/// The whole outage, every object's first run included: at least 5x fewer
/// runs reach the dependency with detection than without.
fn assert_whole_outage_5x_cheaper(on: &Measured, off: &Measured) {
    assert!(
        on.during * 5 <= off.during,
        "{} runs reached the dependency during the outage with detection, {} without",
        on.during,
        off.during
    );
}

/// Both runs of `preset`, off and on; prints both rows.
async fn off_and_on(
    preset: &str,
    builder: fn() -> ObjectBackoffBuilder<k8s_openapi::api::core::v1::ConfigMap>,
    settings: OutageSettings,
    down_for: Duration,
) -> (Measured, Measured) {
    let off = outage_row(preset, builder(), down_for).await;
    let on = outage_row(
        &format!("{preset} + outage"),
        builder().outage(settings),
        down_for,
    )
    .await;
    (off, on)
}

#[tokio::test(start_paused = true)]
async fn with_detection_controller_runtime_reaches_the_dependency_over_5x_less_and_recovers_within_15_s()
 {
    let (off, on) = off_and_on(
        "controller_runtime()",
        ObjectBackoffBuilder::controller_runtime,
        OutageSettings::default(),
        Duration::from_secs(120),
    )
    .await;
    assert_held_and_released(&on, &off, 200);
}

#[tokio::test(start_paused = true)]
async fn with_detection_the_workqueue_recovers_within_15_s_instead_of_n_over_10_seconds() {
    let (off, on) = off_and_on(
        "workqueue()",
        ObjectBackoffBuilder::workqueue,
        OutageSettings::default(),
        Duration::from_secs(120),
    )
    .await;
    assert_held_and_released(&on, &off, 200);
}

#[tokio::test(start_paused = true)]
async fn with_detection_the_kubelet_recovers_within_15_s_of_a_five_or_ten_minute_outage() {
    for minutes in [5, 10] {
        let (off, on) = off_and_on(
            "kubelet()",
            ObjectBackoffBuilder::kubelet,
            OutageSettings::default(),
            Duration::from_secs(60 * minutes),
        )
        .await;
        assert_held_and_released(&on, &off, 200);
    }
}

#[tokio::test(start_paused = true)]
async fn after_an_outage_the_held_objects_are_let_go_at_the_configured_rate() {
    let on = outage_row(
        "controller_runtime() + outage at 100/s",
        ObjectBackoffBuilder::controller_runtime()
            .outage(OutageSettings::default().release_rate(100.0)),
        Duration::from_secs(120),
    )
    .await;
    // The probes that found the dependency back count against the
    // release's first second: no second holds more than 100 runs.
    assert!(on.after_busiest_second <= 100, "{on}");
    assert!(on.last_first_success <= Duration::from_secs(15), "{on}");
}
