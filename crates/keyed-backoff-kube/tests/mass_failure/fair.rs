//! The same outages with outage detection on and the reconciles through
//! fair queues: an object parked by the outage takes no seat, and the
//! table holds as it does without the queues.

use std::time::Duration;

use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};

use crate::detected::assert_held_and_released;
use crate::outage::Measured;
use crate::outage_row_with;

/// Seats: fewer than the outage's first wave, so that the queues decide.
const SEATS: Option<u32> = Some(8);

/// The preset without detection, with detection, and with detection and
/// fair queues; every row printed, the last held to what detection
/// promises and the same as the one without the queues.
async fn off_and_fair(
    preset: &str,
    builder: fn() -> ObjectBackoffBuilder<k8s_openapi::api::core::v1::ConfigMap>,
    down_for: Duration,
) {
    let off = outage_row_with(preset, builder(), down_for, None).await;
    let on = || builder().outage(OutageSettings::default());
    let plain = outage_row_with(&format!("{preset} + outage"), on(), down_for, None).await;
    let label = format!("{preset} + outage + fair");
    let fair = outage_row_with(&label, on(), down_for, SEATS).await;
    assert_held_and_released(&fair, &off, 200);
    // The same row, as the table prints it (the recovery to a tenth of a
    // second).
    let counts = |m: &Measured| (m.during, m.during_busiest_second, m.after_busiest_second);
    assert_eq!(counts(&fair), counts(&plain), "{fair} against {plain}");
    let recovery = fair.last_first_success.abs_diff(plain.last_first_success);
    assert!(
        recovery < Duration::from_millis(100),
        "{fair} against {plain}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_fair_queues_controller_runtime_with_detection_is_held_and_released_as_without() {
    let preset = ObjectBackoffBuilder::controller_runtime;
    off_and_fair("controller_runtime()", preset, Duration::from_secs(120)).await;
}

#[tokio::test(start_paused = true)]
async fn with_fair_queues_the_workqueue_with_detection_is_held_and_released_as_without() {
    let preset = ObjectBackoffBuilder::workqueue;
    off_and_fair("workqueue()", preset, Duration::from_secs(120)).await;
}

#[tokio::test(start_paused = true)]
async fn with_fair_queues_the_kubelet_with_detection_recovers_within_15_s_of_a_five_minute_outage()
{
    let preset = ObjectBackoffBuilder::kubelet;
    off_and_fair("kubelet()", preset, Duration::from_secs(300)).await;
}
