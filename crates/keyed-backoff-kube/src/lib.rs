//! Per-object exponential backoff for [kube-runtime] controllers.
//!
//! kube-runtime's `error_policy` is synchronous, is not told how many times
//! an object has failed, and never hears about successes; its scheduler also
//! lets a watch event cut an error requeue short. [`ObjectBackoff`] keeps one
//! [`keyed_backoff::Backoff`] entry per object and plugs into
//! [`Controller::run`](kube::runtime::Controller::run) with two calls:
//!
//! - [`ObjectBackoff::error_policy`] requeues a failed object after its next
//!   backoff (doubling up to the cap), and refuses to count a failure that
//!   comes early (a watch event during backoff) as a new one: such a run is
//!   requeued at the wait that was left.
//! - [`ObjectBackoff::reconciler`] wraps the reconcile function: a success
//!   resets the object's backoff; a panic fails only its own object (it
//!   becomes [`ReconcileError::Panicked`], backed off like an error); and
//!   (opt-in, [`skip_while_in_backoff`](ObjectBackoffBuilder::skip_while_in_backoff))
//!   a run triggered while the object is still in backoff skips the body and
//!   requeues at the wait left.
//!
//! # Whose backoff
//!
//! An object's backoff belongs to its uid ([`ObjectKey`]), as the kubelet's
//! belongs to the pod's uid: an object deleted and created again under the
//! same name starts at the initial delay. The old uid's entry is forgotten
//! after the reset window and removed by GC ([`ObjectBackoff::spawn_gc`]),
//! or at once with [`ObjectBackoff::forget`].
//!
//! # Presets
//!
//! | preset | per object | whole controller | source |
//! |---|---|---|---|
//! | [`kubelet`](ObjectBackoff::kubelet) | 10 s doubling to 300 s, reset after 600 s | none | kubelet CrashLoopBackOff |
//! | [`workqueue`](ObjectBackoff::workqueue) | 5 ms doubling to 1000 s | token bucket 10/s, burst 100 | client-go `DefaultTypedControllerRateLimiter` |
//! | [`controller_runtime`](ObjectBackoff::controller_runtime) | 5 ms doubling to 1000 s | none | controller-runtime's default with its priority queue |
//!
//! # Observability
//!
//! [`counters`](ObjectBackoff::counters) are always kept. With the
//! `prometheus-client` feature, `ObjectBackoff::register` exports
//! them to a `prometheus_client` registry under controller-runtime's names;
//! with the `tracing` feature, failures, refusals, skips, resets and panics
//! are `tracing` events carrying the object. Without the features neither
//! costs anything.
//!
//! Time is [`TokioClock`], so tokio's paused time drives the backoff in tests
//! exactly as it drives the controller's scheduler.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use keyed_backoff_kube::ObjectBackoff;
//! use kube::runtime::controller::{Action, Controller};
//! use kube::runtime::watcher;
//! use kube::{Api, Client};
//! use futures::StreamExt;
//!
//! #[derive(Debug)]
//! struct Error;
//! impl std::fmt::Display for Error {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("reconcile failed")
//!     }
//! }
//! impl std::error::Error for Error {}
//!
//! async fn reconcile(cm: Arc<ConfigMap>, _ctx: Arc<()>) -> Result<Action, Error> {
//!     # let _ = cm;
//!     Ok(Action::await_change())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default().await?;
//! let backoff = ObjectBackoff::<ConfigMap>::kubelet();
//! Controller::new(Api::<ConfigMap>::all(client), watcher::Config::default())
//!     .run(backoff.reconciler(reconcile), backoff.error_policy(), Arc::new(()))
//!     .for_each(|_| async {})
//!     .await;
//! # Ok(())
//! # }
//! ```
//!
//! [kube-runtime]: https://docs.rs/kube-runtime

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod bucket;
mod error;
mod events;
mod key;
#[cfg(feature = "prometheus-client")]
mod metrics;

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use keyed_backoff::clock::{Clock, TokioClock};
use keyed_backoff::{Backoff, ConfigError, GcTaskGuard, InBackoff, Settings, SpawnError};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Lookup;

use bucket::{Bucket, BucketLimit};
use events::event;

pub use error::ReconcileError;
pub use key::ObjectKey;
pub use keyed_backoff;

/// The manager type behind an [`ObjectBackoff`]: one entry per object
/// identity (reference and uid), on tokio's clock.
pub type ObjectManager<K> = Backoff<ObjectKey<K>, TokioClock>;

/// One exponential backoff per Kubernetes object, for a kube-runtime
/// `Controller`. Cheap to clone (clones share the state), so it can live in
/// the controller's context as well as in the closures given to
/// [`Controller::run`](kube::runtime::Controller::run).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::ObjectBackoff;
/// use std::time::Duration;
/// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
/// assert_eq!(backoff.manager().max(), Duration::from_secs(300));
/// ```
pub struct ObjectBackoff<K: Lookup> {
    shared: Arc<Shared<K>>,
}

struct Shared<K: Lookup> {
    manager: Arc<ObjectManager<K>>,
    /// The controller-wide bucket, if any: every counted failure takes a
    /// token from it.
    bucket: Option<Bucket>,
    dyntype: K::DynamicType,
    skip_while_in_backoff: bool,
    failures: AtomicU64,
    refusals: AtomicU64,
    successes: AtomicU64,
    skips: AtomicU64,
    panics: AtomicU64,
}

impl<K: Lookup> Clone for ObjectBackoff<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> fmt::Debug for ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    ObjectManager<K>: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectBackoff")
            .field("manager", &self.shared.manager)
            .field(
                "overall_rate_limit",
                &self.shared.bucket.as_ref().map(Bucket::limit),
            )
            .field("skip_while_in_backoff", &self.shared.skip_while_in_backoff)
            .field("counters", &self.counters())
            .finish()
    }
}

/// Totals since the [`ObjectBackoff`] was built, for metrics.
///
/// ```
/// use keyed_backoff_kube::Counters;
/// let c = Counters::default();
/// assert_eq!(c.failures + c.refusals + c.successes + c.skips + c.panics, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Failures that advanced an object's backoff (each is a retry with
    /// backoff: `workqueue_retries_total`).
    pub failures: u64,
    /// Failures that came while the object was still in backoff (an early
    /// run, such as one a watch event triggered): requeued at the wait left,
    /// not counted as a new failure.
    pub refusals: u64,
    /// Successful reconciles (each resets the object's backoff).
    pub successes: u64,
    /// Runs whose body was skipped because the object was still in backoff
    /// (only with [`skip_while_in_backoff`](ObjectBackoffBuilder::skip_while_in_backoff)).
    pub skips: u64,
    /// Reconciles that panicked (each is also a failure or a refusal when
    /// the error policy sees it).
    pub panics: u64,
}

/// client-go's per-item exponential limiter bounds: 5 ms doubling to 1000 s.
const WORKQUEUE_INITIAL: Duration = Duration::from_millis(5);
const WORKQUEUE_MAX: Duration = Duration::from_secs(1000);

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// The kubelet's CrashLoopBackOff: 10 s doubling to 300 s, forgotten
    /// after 600 s without a failure (twice the cap, client-go's rule). No
    /// controller-wide limit.
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
        Self::builder(Duration::from_secs(10), Duration::from_secs(300))
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
    /// The workqueue forgets an object only when told of a success; here a
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
        Self::builder(WORKQUEUE_INITIAL, WORKQUEUE_MAX)
            .overall_rate_limit(10.0, 100)
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
        Self::builder(WORKQUEUE_INITIAL, WORKQUEUE_MAX)
            .build()
            .expect("controller-runtime's settings are valid")
    }

    /// A builder: backoff starts at `initial` and doubles up to `max`.
    /// [`build`](ObjectBackoffBuilder::build) checks the values.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .reset_after(Duration::from_secs(600))
    ///     .skip_while_in_backoff(true)
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn builder(initial: Duration, max: Duration) -> ObjectBackoffBuilder<K> {
        ObjectBackoffBuilder::new_with(initial, max, K::DynamicType::default())
    }
}

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fn key(&self, obj: &K) -> ObjectKey<K> {
        ObjectKey::new(obj, self.shared.dyntype.clone())
    }

    /// Records a failed reconcile of `obj` and says when to run it again.
    ///
    /// If the object is out of backoff, its backoff advances (the first
    /// failure gets the initial delay, each next one twice the last, up to
    /// the cap) and the object is requeued after it, or later if the
    /// controller-wide bucket has no token left. If it is still in backoff
    /// (the run came early, typically from a watch event), the failure is
    /// not counted and the object is requeued at the wait left.
    /// Use it in a hand-written error policy; [`error_policy`](Self::error_policy)
    /// is exactly this.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(backoff.on_error(&cm), Action::requeue(Duration::from_secs(10)));
    /// tokio::time::advance(Duration::from_secs(4)).await;
    /// // Early: not a new failure.
    /// assert_eq!(backoff.on_error(&cm), Action::requeue(Duration::from_secs(6)));
    /// tokio::time::advance(Duration::from_secs(6)).await;
    /// assert_eq!(backoff.on_error(&cm), Action::requeue(Duration::from_secs(20)));
    /// # }
    /// ```
    pub fn on_error(&self, obj: &K) -> Action {
        let key = self.key(obj);
        let manager = &self.shared.manager;
        let now = manager.clock().now();
        match manager.try_next(&key, now) {
            Ok(delay) => {
                self.shared.failures.fetch_add(1, Ordering::Relaxed);
                let queued = self
                    .shared
                    .bucket
                    .as_ref()
                    .map_or(Duration::ZERO, |bucket| bucket.reserve(now));
                let wait = delay.max(queued);
                event!(
                    warn,
                    object = %key,
                    attempts = manager.attempts(&key),
                    backoff_ms = delay.as_millis() as u64,
                    requeue_ms = wait.as_millis() as u64,
                    "reconcile failed; requeued after its backoff"
                );
                Action::requeue(wait)
            }
            Err(InBackoff { remaining }) => {
                self.shared.refusals.fetch_add(1, Ordering::Relaxed);
                event!(
                    debug,
                    object = %key,
                    remaining_ms = remaining.as_millis() as u64,
                    "reconcile failed during its backoff; not counted, requeued at the wait left"
                );
                Action::requeue(remaining)
            }
        }
    }

    /// Records a successful reconcile of `obj`: its backoff is forgotten, so
    /// its next failure starts again at the initial delay.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// backoff.on_error(&cm);
    /// assert_eq!(backoff.attempts(&cm), 1);
    /// backoff.on_success(&cm);
    /// assert_eq!(backoff.attempts(&cm), 0);
    /// # }
    /// ```
    pub fn on_success(&self, obj: &K) {
        self.succeeded(&self.key(obj));
    }

    fn succeeded(&self, key: &ObjectKey<K>) {
        self.shared.successes.fetch_add(1, Ordering::Relaxed);
        if self.shared.manager.reset(key) {
            event!(debug, object = %key, "reconcile succeeded; backoff reset");
        }
    }

    /// Drops `obj`'s entry without counting a success, for an object that
    /// was deleted: its memory is freed now instead of at the next GC after
    /// the reset window. Returns whether there was an entry.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// backoff.on_error(&cm);
    /// assert!(backoff.forget(&cm));
    /// assert!(backoff.manager().is_empty());
    /// assert_eq!(backoff.counters().successes, 0);
    /// # }
    /// ```
    pub fn forget(&self, obj: &K) -> bool {
        self.shared.manager.reset(&self.key(obj))
    }

    /// The wait left before `obj`'s backoff window ends, or `None` when it
    /// is not in backoff.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(backoff.remaining(&cm), None);
    /// backoff.on_error(&cm);
    /// assert_eq!(backoff.remaining(&cm), Some(Duration::from_secs(10)));
    /// # }
    /// ```
    pub fn remaining(&self, obj: &K) -> Option<Duration> {
        self.remaining_of(&self.key(obj))
    }

    fn remaining_of(&self, key: &ObjectKey<K>) -> Option<Duration> {
        let manager = &self.shared.manager;
        manager.remaining(key, manager.clock().now())
    }

    /// How many failures `obj` has had since its backoff was last reset
    /// (0 if none): a per-object gauge for metrics.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// assert_eq!(backoff.attempts(&cm), 0);
    /// # }
    /// ```
    pub fn attempts(&self, obj: &K) -> u32 {
        self.shared.manager.attempts(&self.key(obj))
    }

    /// The totals so far: failures counted, early failures refused,
    /// successes, skipped runs, panics.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// backoff.on_error(&cm);
    /// backoff.on_error(&cm);
    /// let c = backoff.counters();
    /// assert_eq!((c.failures, c.refusals), (1, 1));
    /// # }
    /// ```
    pub fn counters(&self) -> Counters {
        let s = &self.shared;
        Counters {
            failures: s.failures.load(Ordering::Relaxed),
            refusals: s.refusals.load(Ordering::Relaxed),
            successes: s.successes.load(Ordering::Relaxed),
            skips: s.skips.load(Ordering::Relaxed),
            panics: s.panics.load(Ordering::Relaxed),
        }
    }

    /// The underlying keyed manager, for what this type does not wrap:
    /// [`stats`](Backoff::stats), [`snapshot`](Backoff::snapshot),
    /// [`entries`](Backoff::entries).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// assert!(backoff.manager().is_empty());
    /// ```
    pub fn manager(&self) -> &ObjectManager<K> {
        &self.shared.manager
    }

    /// Removes forgotten entries (including those of deleted or recreated
    /// objects' old uids) every `interval` from a tokio task, on tokio's
    /// clock, until the guard is dropped. Outside a tokio runtime, or with
    /// a zero `interval`, returns an error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), keyed_backoff::SpawnError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let _gc = backoff.spawn_gc(Duration::from_secs(60))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn_gc(&self, interval: Duration) -> Result<GcTaskGuard, SpawnError> {
        self.shared.manager.spawn_gc_task(interval)
    }

    /// An error policy for [`Controller::run`](kube::runtime::Controller::run):
    /// [`on_error`](Self::on_error) for the failed object, whatever the
    /// error and the context.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let policy = backoff.error_policy::<std::io::Error, ()>();
    /// let err = std::io::Error::other("boom");
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// let action = policy(Arc::new(cm), &err, Arc::new(()));
    /// assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    /// # }
    /// ```
    pub fn error_policy<E, Ctx>(&self) -> impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action + use<K, E, Ctx> {
        let this = self.clone();
        move |obj, _err, _ctx| this.on_error(&obj)
    }

    /// Wraps a reconcile function for [`Controller::run`](kube::runtime::Controller::run):
    ///
    /// - a success resets the object's backoff;
    /// - an error is returned as [`ReconcileError::Reconcile`];
    /// - a panic, whether in the call or while the future runs, is caught,
    ///   counted, and returned as [`ReconcileError::Panicked`], so the error
    ///   policy backs that object off and the controller keeps reconciling
    ///   every other object;
    /// - with [`skip_while_in_backoff`](ObjectBackoffBuilder::skip_while_in_backoff),
    ///   a run while the object is still in backoff does not call
    ///   `reconcile` and requeues at the wait left.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use kube::runtime::controller::Action;
    /// use std::sync::Arc;
    /// async fn reconcile(cm: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, std::io::Error> {
    ///     if cm.data.is_none() {
    ///         panic!("no data");
    ///     }
    ///     Ok(Action::await_change())
    /// }
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut wrapped = backoff.reconciler(reconcile);
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// let err = wrapped(Arc::new(cm.clone()), Arc::new(())).await.unwrap_err();
    /// assert!(err.is_panic());
    /// assert_eq!(err.to_string(), "reconcile panicked: no data");
    /// assert_eq!(backoff.counters().panics, 1);
    ///
    /// backoff.on_error(&cm);
    /// cm.data = Some(Default::default());
    /// # tokio::time::advance(std::time::Duration::from_secs(10)).await;
    /// wrapped(Arc::new(cm.clone()), Arc::new(())).await.unwrap();
    /// assert_eq!(backoff.attempts(&cm), 0);
    /// # }
    /// ```
    pub fn reconciler<Ctx, E, F, Fut>(
        &self,
        mut reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, ReconcileError<E>>>
    + use<K, Ctx, E, F, Fut>
    where
        F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        Ctx: 'static,
    {
        let this = self.clone();
        move |obj, ctx| {
            // The key is built once per run, for the check and the reset.
            let key = this.key(&obj);
            if this.shared.skip_while_in_backoff
                && let Some(wait) = this.remaining_of(&key)
            {
                this.shared.skips.fetch_add(1, Ordering::Relaxed);
                event!(
                    debug,
                    object = %key,
                    remaining_ms = wait.as_millis() as u64,
                    "run skipped: the object is in backoff"
                );
                return futures::future::ready(Ok(Action::requeue(wait))).boxed();
            }
            // A panic in the call itself (before any future exists) is
            // caught as one in the future is.
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj, ctx)));
            let this = this.clone();
            async move {
                let outcome = match run {
                    Ok(run) => AssertUnwindSafe(run).catch_unwind().await,
                    Err(payload) => Err(payload),
                };
                match outcome {
                    Ok(Ok(action)) => {
                        this.succeeded(&key);
                        Ok(action)
                    }
                    Ok(Err(e)) => Err(ReconcileError::Reconcile(e)),
                    Err(payload) => {
                        this.shared.panics.fetch_add(1, Ordering::Relaxed);
                        let message = error::panic_message(&*payload);
                        event!(error, object = %key, panic = %message, "reconcile panicked");
                        Err(ReconcileError::Panicked(message))
                    }
                }
            }
            .boxed()
        }
    }

    /// Objects whose backoff window has not ended now.
    #[cfg(feature = "prometheus-client")]
    fn in_backoff(&self) -> usize {
        self.shared.manager.stats().in_backoff
    }
}

/// Builds an [`ObjectBackoff`]; from [`ObjectBackoff::builder`].
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::ObjectBackoff;
/// use std::time::Duration;
/// let err = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .jitter(-1.0)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// ```
#[derive(Debug, Clone)]
pub struct ObjectBackoffBuilder<K: Lookup> {
    settings: Settings,
    bucket: Option<BucketLimit>,
    dyntype: K::DynamicType,
    skip_while_in_backoff: bool,
}

impl<K> ObjectBackoffBuilder<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// A builder for a resource whose type is known only at runtime (such as
    /// `kube::api::DynamicObject` with its `ApiResource`).
    ///
    /// ```
    /// use keyed_backoff_kube::ObjectBackoffBuilder;
    /// use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    /// use std::time::Duration;
    /// let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    /// let b = ObjectBackoffBuilder::<DynamicObject>::new_with(
    ///     Duration::from_secs(1),
    ///     Duration::from_secs(60),
    ///     ApiResource::from_gvk(&gvk),
    /// )
    /// .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new_with(initial: Duration, max: Duration, dyntype: K::DynamicType) -> Self {
        Self {
            settings: Settings::new(initial, max),
            bucket: None,
            dyntype,
            skip_while_in_backoff: false,
        }
    }

    /// Forget an object's backoff once this long has passed since its last
    /// failure. Default: twice `max`, client-go's rule (600 s for the
    /// kubelet's 300 s cap).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .reset_after(Duration::from_secs(3600))
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn reset_after(mut self, window: Duration) -> Self {
        self.settings = self.settings.expire_after(window);
        self
    }

    /// Spread each delay by up to `factor` of itself (client-go's jitter),
    /// so objects that fail together do not retry together. `build` checks
    /// the factor.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .jitter(0.1)
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn jitter(mut self, factor: f64) -> Self {
        self.settings = self.settings.jitter(factor);
        self
    }

    /// A token bucket shared by every object of the controller, as client-go's
    /// `BucketRateLimiter`: each counted failure takes a token, and is
    /// requeued after the longer of its own backoff and the wait for its
    /// token. The bucket starts full with `burst` tokens and refills at
    /// `per_second`. `build` checks both (`per_second` finite in (0, 1e9],
    /// `burst` at least 1).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let err = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .overall_rate_limit(0.0, 10)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "overall_rate_limit.per_second");
    /// ```
    pub fn overall_rate_limit(mut self, per_second: f64, burst: u32) -> Self {
        self.bucket = Some(BucketLimit { per_second, burst });
        self
    }

    /// With `true`, a run of an object that is still in backoff (triggered
    /// by a watch event, a related object, or another requeue) skips the
    /// reconcile body and requeues at the wait left, so no event can make a
    /// failing object run faster than its backoff. Default `false`: every
    /// run reaches the body, and only the count of failures is protected.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let b = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .skip_while_in_backoff(true)
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn skip_while_in_backoff(mut self, skip: bool) -> Self {
        self.skip_while_in_backoff = skip;
        self
    }

    /// Checks the settings and builds; errors name the field and its
    /// allowed range, as the core builder's do (`initial`, `max`, `jitter`,
    /// `expire_after` for the reset window, and
    /// `overall_rate_limit.per_second` / `.burst`).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let err = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .jitter(f64::NAN)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "jitter");
    /// assert!(err.to_string().contains("finite"));
    /// ```
    pub fn build(self) -> Result<ObjectBackoff<K>, ConfigError> {
        let manager = Backoff::from_settings(self.settings)
            .clock(TokioClock)
            .build()?;
        let bucket = self.bucket.map(BucketLimit::check).transpose()?;
        Ok(ObjectBackoff {
            shared: Arc::new(Shared {
                manager: Arc::new(manager),
                bucket: bucket.map(Bucket::new),
                dyntype: self.dyntype,
                skip_while_in_backoff: self.skip_while_in_backoff,
                failures: AtomicU64::new(0),
                refusals: AtomicU64::new(0),
                successes: AtomicU64::new(0),
                skips: AtomicU64::new(0),
                panics: AtomicU64::new(0),
            }),
        })
    }
}

/// The README's example, compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
