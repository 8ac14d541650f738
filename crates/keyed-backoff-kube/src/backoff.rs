//! The backoff type: one client-go backoff entry per object, the calls an
//! error policy and a reconcile make on it, and what it shares between
//! clones.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::clock::Clock;
use keyed_backoff::{GcGuard, InBackoff, Level, SpawnError};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Lookup;

use crate::decisions::Decisions;
use crate::domain::DomainOf;
use crate::key::ObjectKey;
use crate::manager::ObjectManager;
use crate::observe;
use crate::rate_limit::Bucket;
use crate::stats::{Stats, Tally};
use keyed_backoff_outage::DomainStatus;

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
    /// The manager, wrapped in outage awareness when the builder asked.
    decisions: Decisions<K>,
    /// The dependency a reconcile error names, if the builder was told how.
    domain: Option<DomainOf>,
    /// The controller-wide bucket, if any: every counted failure takes a
    /// token from it.
    bucket: Option<Bucket>,
    dyntype: K::DynamicType,
    skip_while_in_backoff: bool,
    tally: Tally,
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
            .field("manager", self.manager())
            .field(
                "overall_rate_limit",
                &self.shared.bucket.as_ref().map(Bucket::limit),
            )
            .field("skip_while_in_backoff", &self.shared.skip_while_in_backoff)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// A backoff deciding through `decisions`, as the builder checked it.
    pub(crate) fn new(
        decisions: Decisions<K>,
        domain: Option<DomainOf>,
        bucket: Option<Bucket>,
        dyntype: K::DynamicType,
        skip_while_in_backoff: bool,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                decisions,
                domain,
                bucket,
                dyntype,
                skip_while_in_backoff,
                tally: Tally::default(),
            }),
        }
    }

    pub(crate) fn key(&self, obj: &K) -> ObjectKey<K> {
        ObjectKey::new(obj, self.shared.dyntype.clone())
    }

    /// Whether a run of an object in backoff skips the reconcile body.
    pub(crate) fn skips_while_in_backoff(&self) -> bool {
        self.shared.skip_while_in_backoff
    }

    /// The dependency `error` names, if the builder was told how.
    pub(crate) fn domain_of<'a>(
        &self,
        error: &'a (dyn std::any::Any + 'static),
    ) -> Option<&'a str> {
        self.shared.domain.as_ref()?.of(error)
    }

    /// What every run asks and every outcome is told to.
    pub(crate) fn decisions(&self) -> &Decisions<K> {
        &self.shared.decisions
    }

    /// Whether the object backoff is wrapped in outage awareness.
    #[cfg_attr(not(feature = "prometheus-client"), allow(dead_code))]
    pub(crate) fn outage_aware(&self) -> bool {
        self.shared.decisions.outage().is_some()
    }

    /// Whether the object backoff is kept in a shared store.
    #[cfg_attr(not(feature = "prometheus-client"), allow(dead_code))]
    pub(crate) fn shares_a_store(&self) -> bool {
        self.shared.decisions.is_shared()
    }

    /// The totals, for the parts of the crate that count.
    pub(crate) fn tally(&self) -> &Tally {
        &self.shared.tally
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
    /// is exactly this for an error the reconcile wrapper did not record.
    /// With a [`shared`](crate::ObjectBackoffBuilder::shared) store, a
    /// synchronous call cannot wait for it: the local fallback answers
    /// unless the store answers at once, and the store is told in the
    /// background (the reconcile wrapper waits for the store instead).
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
        let answer = self.shared.decisions.fail(&key, None).now();
        self.failed(&key, answer)
    }

    /// The requeue for the gate's answer to a failure of `key`, counted.
    pub(crate) fn failed(&self, key: &ObjectKey<K>, answer: Result<Level, InBackoff>) -> Action {
        match answer {
            Ok(level) => {
                self.shared.tally.failures.add_one();
                let now = self.manager().clock().now();
                let queued = self
                    .shared
                    .bucket
                    .as_ref()
                    .map_or(Duration::ZERO, |bucket| bucket.reserve(now));
                let wait = level.backoff.max(queued);
                observe::failed(key, level.attempts, level.backoff, wait);
                Action::requeue(wait)
            }
            Err(InBackoff { remaining }) => {
                self.shared.tally.refusals.add_one();
                observe::refused(key, remaining);
                Action::requeue(remaining)
            }
        }
    }

    /// Records a successful reconcile of `obj`: its backoff is reset, so its
    /// next failure starts again at the initial delay. With a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, the local
    /// fallback forgets it at once and the store when it answers (in the
    /// background).
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
        let key = self.key(obj);
        let (had, told) = self.shared.decisions.succeed(&key);
        told.now();
        self.succeeded(&key, had);
    }

    /// A success of `key`, told to the gate, counted; `had`: whether the
    /// manager had an entry for it.
    pub(crate) fn succeeded(&self, key: &ObjectKey<K>, had: bool) {
        self.shared.tally.successes.add_one();
        if had {
            observe::reset(key);
        }
    }

    /// Removes `obj`'s entry without counting a success, for an object that
    /// was deleted: its memory is freed now instead of at the first GC after
    /// it expires. Returns whether there was an entry (with a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, in the local
    /// fallback; the store forgets it too, in the background).
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
    /// assert!(backoff.reset(&cm));
    /// assert!(backoff.manager().is_empty());
    /// assert_eq!(backoff.stats().successes, 0);
    /// # }
    /// ```
    pub fn reset(&self, obj: &K) -> bool {
        self.shared.decisions.forget(&self.key(obj))
    }

    /// The wait left before `obj`'s backoff window ends, or `None` when it
    /// is not in backoff. With a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, the local
    /// fallback's wait (a synchronous call cannot wait for the store; a
    /// run's question in the reconcile wrapper asks it).
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

    pub(crate) fn remaining_of(&self, key: &ObjectKey<K>) -> Option<Duration> {
        self.shared.decisions.wait(key)
    }

    /// How many failures `obj` has had since its backoff was last reset
    /// (0 if none): a per-object gauge for metrics. With a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, the local
    /// fallback's count; [`level`](Self::level) asks the store.
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
        self.manager().attempts(&self.key(obj))
    }

    /// `obj`'s level where its backoff is kept: its backoff and the
    /// failures counted, or `None` when it has no live entry. With a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, the store's
    /// answer (the local fallback's when the store cannot answer);
    /// otherwise ready at once.
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
    /// assert_eq!(backoff.level(&cm).await, None);
    /// backoff.on_error(&cm);
    /// let level = backoff.level(&cm).await.unwrap();
    /// assert_eq!((level.backoff, level.attempts), (Duration::from_secs(10), 1));
    /// # }
    /// ```
    pub async fn level(&self, obj: &K) -> Option<Level> {
        self.shared.decisions.level(&self.key(obj)).await
    }

    /// The totals so far: failures counted, early failures refused,
    /// successes, skipped runs, panics; and, with
    /// [`outage`](crate::ObjectBackoffBuilder::outage) awareness on,
    /// whether an outage is under way, the objects it parks and the
    /// outages so far.
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
    /// let c = backoff.stats();
    /// assert_eq!((c.failures, c.refusals), (1, 1));
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        let decisions = &self.shared.decisions;
        self.shared
            .tally
            .read(decisions.outage(), decisions.local_answers())
    }

    /// Every dependency tracked with an outage of its own, by name: the
    /// domains reconcile errors named ([`domain`](crate::ObjectBackoffBuilder::domain)),
    /// whether each one's outage is under way, the objects it parks, its
    /// outages so far. Empty without outage awareness, and for a fleet's
    /// store (whose one outage counts every domain's failures).
    pub fn domains(&self) -> Vec<DomainStatus> {
        self.shared.decisions.domains()
    }

    /// The underlying keyed manager (with a
    /// [`shared`](crate::ObjectBackoffBuilder::shared) store, its local
    /// fallback), for what this type does not wrap:
    /// [`stats`](keyed_backoff::Backoff::stats), [`snapshot`](keyed_backoff::Backoff::snapshot),
    /// [`entries`](keyed_backoff::Backoff::entries).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// assert!(backoff.manager().is_empty());
    /// ```
    pub fn manager(&self) -> &ObjectManager<K> {
        self.shared.decisions.manager()
    }

    /// Removes expired entries (including those of deleted or recreated
    /// objects' old uids) every `interval` from a tokio task, on tokio's
    /// clock, until the guard is dropped. Outside a tokio runtime, in one
    /// without timers, or with a zero `interval`, returns a [`SpawnError`]
    /// and starts nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), keyed_backoff_kube::SpawnError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::ObjectBackoff;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let _gc = backoff.spawn_gc_task(Duration::from_secs(60))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn_gc_task(&self, interval: Duration) -> Result<GcGuard, SpawnError> {
        self.shared.decisions.manager().spawn_gc_task(interval)
    }
}
