//! Prometheus metrics through `prometheus-client`, read from the totals
//! at scrape time (nothing is updated on the reconcile path).

use std::borrow::Cow;
use std::fmt;

use kube::runtime::reflector::Lookup;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::backoff::ObjectBackoff;

struct Scrape<K: Lookup> {
    backoff: ObjectBackoff<K>,
    controller: Cow<'static, str>,
}

impl<K: Lookup> fmt::Debug for Scrape<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scrape")
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

/// Writes one metric with one label.
fn write(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: (&str, &str),
    metric: &impl EncodeMetric,
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    let labels = [label];
    metric.encode(family.encode_family(&labels)?)
}

impl<K> Collector for Scrape<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let c = self.backoff.stats();
        let controller = ("controller", &*self.controller);
        write(
            &mut encoder,
            "workqueue_retries",
            "Failures requeued after their object's backoff (counted failures).",
            ("name", &*self.controller),
            &ConstCounter::new(c.failures),
        )?;
        write(
            &mut encoder,
            "controller_runtime_reconcile_errors",
            "Reconciles that ended in an error, counted or not (a panic included).",
            controller,
            &ConstCounter::new(c.failures.saturating_add(c.refusals)),
        )?;
        write(
            &mut encoder,
            "controller_runtime_reconcile_panics",
            "Reconciles that panicked.",
            controller,
            &ConstCounter::new(c.panics),
        )?;
        write(
            &mut encoder,
            "keyed_backoff_reconcile_refusals",
            "Errors during an object's backoff (an early run): requeued at the wait left, not counted.",
            controller,
            &ConstCounter::new(c.refusals),
        )?;
        write(
            &mut encoder,
            "keyed_backoff_reconcile_resets",
            "Successful reconciles, each resetting its object's backoff.",
            controller,
            &ConstCounter::new(c.successes),
        )?;
        write(
            &mut encoder,
            "keyed_backoff_reconcile_skips",
            "Runs skipped because the object was in backoff.",
            controller,
            &ConstCounter::new(c.skips),
        )?;
        let in_backoff =
            i64::try_from(self.backoff.manager().stats().in_backoff).unwrap_or(i64::MAX);
        write(
            &mut encoder,
            "keyed_backoff_objects_in_backoff",
            "Objects whose backoff window has not ended.",
            controller,
            &ConstGauge::new(in_backoff),
        )?;
        if self.backoff.shares_a_store() {
            write(
                &mut encoder,
                "keyed_backoff_fallback_answers",
                "Answers the local fallback gave because the shared store could not answer.",
                controller,
                &ConstCounter::new(c.fallback_answers),
            )?;
            write(
                &mut encoder,
                "keyed_backoff_local_answers",
                "Answers the local fallback gave to synchronous calls that could not wait for the shared store (told to it in the background).",
                controller,
                &ConstCounter::new(c.local_answers),
            )?;
        }
        if !self.backoff.outage_aware() {
            return Ok(());
        }
        write(
            &mut encoder,
            "keyed_backoff_outages",
            "Outages declared: many objects newly failing while almost none succeed.",
            controller,
            &ConstCounter::new(c.outages),
        )?;
        write(
            &mut encoder,
            "keyed_backoff_outage_active",
            "1 while an outage is under way, else 0.",
            controller,
            &ConstGauge::new(i64::from(c.in_outage)),
        )?;
        write(
            &mut encoder,
            "keyed_backoff_outage_parked_objects",
            "Objects an outage parks now, or until the release lets them go.",
            controller,
            &ConstGauge::new(i64::try_from(c.parked).unwrap_or(i64::MAX)),
        )
    }
}

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// Exports this backoff's totals to `registry`, labelled with
    /// `controller` (feature `prometheus-client`). The values are read at
    /// each scrape; the reconcile path pays nothing.
    ///
    /// | metric | type | label | value |
    /// |---|---|---|---|
    /// | `workqueue_retries_total` | counter | `name` | failures that advanced a backoff |
    /// | `controller_runtime_reconcile_errors_total` | counter | `controller` | every error the policy saw |
    /// | `controller_runtime_reconcile_panics_total` | counter | `controller` | panics caught |
    /// | `keyed_backoff_reconcile_refusals_total` | counter | `controller` | errors during backoff, not counted |
    /// | `keyed_backoff_reconcile_resets_total` | counter | `controller` | successes |
    /// | `keyed_backoff_reconcile_skips_total` | counter | `controller` | runs skipped in backoff |
    /// | `keyed_backoff_objects_in_backoff` | gauge | `controller` | objects in backoff now (in process: with a shared store, the fallback's) |
    /// | `keyed_backoff_outages_total` | counter | `controller` | outages declared (with [`outage`](crate::ObjectBackoffBuilder::outage) on) |
    /// | `keyed_backoff_outage_active` | gauge | `controller` | 1 during an outage (with `outage` on) |
    /// | `keyed_backoff_outage_parked_objects` | gauge | `controller` | objects parked now (with `outage` on) |
    /// | `keyed_backoff_fallback_answers_total` | counter | `controller` | answers the local fallback gave because a [`shared`](crate::ObjectBackoffBuilder::shared) store could not answer (with one) |
    /// | `keyed_backoff_local_answers_total` | counter | `controller` | answers the local fallback gave to synchronous calls that could not wait for a healthy shared store (with one) |
    ///
    /// The first three carry controller-runtime's names and labels, so its
    /// dashboards and alerts apply.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut registry = Registry::default();
    /// backoff.register(&mut registry, "configmaps");
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// backoff.on_error(&cm);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("workqueue_retries_total{name=\"configmaps\"} 1\n"));
    /// assert!(text.contains("keyed_backoff_objects_in_backoff{controller=\"configmaps\"} 1\n"));
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "prometheus-client")))]
    pub fn register(&self, registry: &mut Registry, controller: impl Into<Cow<'static, str>>) {
        registry.register_collector(Box::new(Scrape {
            backoff: self.clone(),
            controller: controller.into(),
        }));
    }
}
