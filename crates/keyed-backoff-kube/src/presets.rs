//! The presets: the backoffs Kubernetes' own components use, built
//! (`ObjectBackoff::kubelet()`) or as a builder to adjust
//! (`ObjectBackoffBuilder::kubelet()`).

use std::time::Duration;

use kube::runtime::reflector::Lookup;

use crate::backoff::ObjectBackoff;
use crate::builder::ObjectBackoffBuilder;

/// client-go's per-item exponential limiter bounds: 5 ms doubling to 1000 s.
const WORKQUEUE_INITIAL: Duration = Duration::from_millis(5);
const WORKQUEUE_MAX: Duration = Duration::from_secs(1000);

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// The kubelet's CrashLoopBackOff: 10 s doubling to 300 s; an entry
    /// expires 600 s after its last failure (twice the cap, client-go's
    /// rule). No controller-wide limit.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(b.on_error(&cm), Action::requeue(Duration::from_secs(10)));
    /// assert_eq!(b.manager().max(), Duration::from_secs(300));
    /// # }
    /// ```
    pub fn kubelet() -> Self {
        ObjectBackoffBuilder::kubelet()
            .build()
            .expect("the kubelet's settings are valid")
    }

    /// client-go's default controller rate limiter
    /// (`workqueue.DefaultTypedControllerRateLimiter`), the default of Go
    /// controllers built on client-go: the longer of a per-object
    /// exponential backoff (5 ms doubling to 1000 s) and a token bucket
    /// shared by all objects of the controller (10 per second, burst 100).
    ///
    /// When many objects fail together (an API outage, a broken webhook),
    /// the first 100 are requeued after 5 ms and the rest are spread at 10
    /// per second: 5,000 objects take about 490 s to be retried once.
    ///
    /// The workqueue resets an object only when told of a success; here a
    /// success resets it too, and an object that has not failed for 2000 s
    /// (twice the cap) starts over.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::workqueue();
    /// let requeues: Vec<Action> = (0..101)
    ///     .map(|i| {
    ///         let mut cm = ConfigMap::default();
    ///         cm.metadata.name = Some(format!("app-{i}"));
    ///         b.on_error(&cm)
    ///     })
    ///     .collect();
    /// // The burst of 100 at the per-object 5 ms, then the bucket's pace.
    /// assert_eq!(requeues[99], Action::requeue(Duration::from_millis(5)));
    /// assert_eq!(requeues[100], Action::requeue(Duration::from_millis(100)));
    /// # }
    /// ```
    pub fn workqueue() -> Self {
        ObjectBackoffBuilder::workqueue()
            .build()
            .expect("the workqueue's settings are valid")
    }

    /// controller-runtime's default when its priority queue is on
    /// (controller-runtime 0.20 and later; the default queue since 0.23):
    /// client-go's per-object exponential limiter alone, 5 ms doubling to
    /// 1000 s, with no controller-wide bucket. Reset as
    /// [`workqueue`](Self::workqueue).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::controller_runtime();
    /// let last = (0..1000)
    ///     .map(|i| {
    ///         let mut cm = ConfigMap::default();
    ///         cm.metadata.name = Some(format!("app-{i}"));
    ///         b.on_error(&cm)
    ///     })
    ///     .last();
    /// assert_eq!(last, Some(Action::requeue(Duration::from_millis(5))));
    /// # }
    /// ```
    pub fn controller_runtime() -> Self {
        ObjectBackoffBuilder::controller_runtime()
            .build()
            .expect("controller-runtime's settings are valid")
    }
}

impl<K> ObjectBackoffBuilder<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// [`ObjectBackoff::kubelet`] as a builder, to adjust before building,
    /// for example to turn on [`outage`](Self::outage) detection.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};
    /// use std::time::Duration;
    /// let backoff = ObjectBackoffBuilder::<ConfigMap>::kubelet()
    ///     .outage(OutageSettings::default())
    ///     .build()?;
    /// assert_eq!(backoff.manager().max(), Duration::from_secs(300));
    /// # Ok::<(), keyed_backoff_kube::ConfigError>(())
    /// ```
    pub fn kubelet() -> Self {
        ObjectBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
    }

    /// [`ObjectBackoff::workqueue`] as a builder, to adjust before building
    /// (`.outage(OutageSettings::default())` turns on outage detection).
    pub fn workqueue() -> Self {
        ObjectBackoff::builder(WORKQUEUE_INITIAL, WORKQUEUE_MAX).overall_rate_limit(10.0, 100)
    }

    /// [`ObjectBackoff::controller_runtime`] as a builder, to adjust before
    /// building (`.outage(OutageSettings::default())` turns on outage
    /// detection).
    pub fn controller_runtime() -> Self {
        ObjectBackoff::builder(WORKQUEUE_INITIAL, WORKQUEUE_MAX)
    }
}
