//! The builder: any ladder, a controller-wide rate limit, when entries
//! expire, jitter, and whether runs in backoff skip the body.

use std::time::Duration;

use keyed_backoff::clock::TokioClock;
use std::sync::Arc;

use keyed_backoff::{Backoff, ConfigError, Settings};
use keyed_backoff_outage::{OutageAware, OutageSettings, OutageStatus};

use keyed_backoff::Gate;
use kube::runtime::reflector::Lookup;

use crate::decisions::Decisions;
use crate::domain::DomainOf;
use crate::shared::SharedStore;

use crate::backoff::ObjectBackoff;
use crate::rate_limit::{Bucket, BucketLimit};

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// A builder whose backoff starts at `initial` and doubles up to `max`;
    /// [`ObjectBackoffBuilder`] lists the defaults of everything else.
    pub fn builder(initial: Duration, max: Duration) -> ObjectBackoffBuilder<K> {
        ObjectBackoffBuilder::new_with(initial, max, K::DynamicType::default())
    }
}

/// Builds an [`ObjectBackoff`]; from [`ObjectBackoff::builder`].
///
/// Defaults: no jitter; an object's entry expires `2 * max` after its last
/// failure (client-go's strategy), so an object quiet that long starts over at
/// `initial`; no controller-wide rate limit; every run reaches the
/// reconcile body; no outage detection. [`build`](Self::build) checks every
/// value.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::ObjectBackoff;
/// use kube::runtime::controller::Action;
/// use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), keyed_backoff_kube::ConfigError> {
/// let backoff = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .expire_after(Duration::from_secs(3600))
///     .overall_rate_limit(10.0, 100)
///     .skip_while_in_backoff(true)
///     .build()?;
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("app".into());
/// assert_eq!(backoff.on_error(&cm), Action::requeue(Duration::from_secs(1)));
///
/// let err = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .jitter(-1.0)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ObjectBackoffBuilder<K: Lookup> {
    settings: Settings,
    bucket: Option<BucketLimit>,
    dyntype: K::DynamicType,
    /// `None` until set: then on exactly when outage detection is.
    skip_while_in_backoff: Option<bool>,
    outage: Option<OutageSettings>,
    shared: Option<SharedStore<K>>,
    domain: Option<DomainOf>,
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
    /// assert_eq!(b.manager().max(), Duration::from_secs(60));
    /// # Ok::<(), keyed_backoff_kube::ConfigError>(())
    /// ```
    pub fn new_with(initial: Duration, max: Duration, dyntype: K::DynamicType) -> Self {
        Self {
            settings: Settings::new(initial, max),
            bucket: None,
            dyntype,
            skip_while_in_backoff: None,
            outage: None,
            shared: None,
            domain: None,
        }
    }

    /// An object's entry expires once this long has passed since its last
    /// failure: its next failure starts over at `initial`.
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.settings = self.settings.expire_after(window);
        self
    }

    /// Spreads each delay by up to `jitter` times itself (client-go's
    /// jitter factor), so objects that fail together do not retry together.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.settings = self.settings.jitter(jitter);
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
    /// failing object run faster than its backoff. With `false`, every
    /// run reaches the body, and only the count of failures is protected.
    /// Off by default, on by default with [`outage`](Self::outage), which
    /// refuses `false`, and with [`shared`](Self::shared).
    pub fn skip_while_in_backoff(mut self, skip: bool) -> Self {
        self.skip_while_in_backoff = Some(skip);
        self
    }

    /// Turns on outage-aware backoff (the core's
    /// [`OutageAware`](keyed_backoff_outage::OutageAware) around the manager)
    /// and with it [`skip_while_in_backoff`](Self::skip_while_in_backoff):
    /// when many objects newly fail together while (almost) none succeeds,
    /// no object climbs its own ladder; the objects wait on one short
    /// shared ladder, spread over it, while a few probe the dependency, and
    /// once successes return they are let go at
    /// [`release_rate`](OutageSettings::release_rate) per second, each at
    /// its level from before the outage. A success (a reset) ends it.
    ///
    /// An outage parks only runs that ask before they reach the body,
    /// so skipping is part of the feature: `build` refuses
    /// `skip_while_in_backoff(false)` with it (with an error policy alone,
    /// every requeue would reach the dependency once per step of the shared
    /// ladder, more often than the objects' own ladders would).
    /// [`ObjectBackoff::stats`] reports the outage.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff_kube::ConfigError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};
    /// let backoff = ObjectBackoffBuilder::<ConfigMap>::kubelet()
    ///     .outage(OutageSettings::default().min_failing_keys(3))
    ///     .build()?;
    /// for name in ["a", "b", "c"] {
    ///     let mut cm = ConfigMap::default();
    ///     cm.metadata.name = Some(name.into());
    ///     backoff.on_error(&cm);
    /// }
    /// // Three objects newly failed and none succeeded: an outage. An
    /// // object that has not failed is parked as well.
    /// assert!(backoff.stats().in_outage);
    /// let mut new = ConfigMap::default();
    /// new.metadata.name = Some("d".into());
    /// assert!(backoff.remaining(&new).is_some());
    ///
    /// let err = ObjectBackoffBuilder::<ConfigMap>::kubelet()
    ///     .outage(OutageSettings::default())
    ///     .skip_while_in_backoff(false)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "skip_while_in_backoff");
    /// # Ok(())
    /// # }
    /// ```
    pub fn outage(mut self, settings: OutageSettings) -> Self {
        self.outage = Some(settings);
        self
    }

    /// Names the dependency a failed reconcile's error came from (a
    /// region, an account, a webhook, a database), so that outage
    /// awareness sees an outage of that dependency alone: the objects that
    /// use it are parked on its own ladder while every other object runs
    /// as before ([`Gate::fail_in`](keyed_backoff::Gate::fail_in),
    /// `docs/outage.md`). `domain` reads the reconcile's error, of the
    /// type the reconcile returns; an error of another type, or one it
    /// names no dependency for, counts in the outage of everything alone.
    /// Name dependencies only, never an object's own errors (an invalid
    /// spec): a reconcile's success names no dependency, so a domain is
    /// judged by its failing objects.
    ///
    /// Needs [`outage`](Self::outage), or a store that follows an outage
    /// ([`shared_outage_aware`](Self::shared_outage_aware), whose fleet
    /// counts a domain's failures in its one outage): `build` refuses it
    /// otherwise.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{ObjectBackoffBuilder, OutageSettings};
    /// #[derive(Debug)]
    /// enum Error {
    ///     Region(String),
    ///     Invalid,
    /// }
    /// let backoff = ObjectBackoffBuilder::<ConfigMap>::workqueue()
    ///     .outage(OutageSettings::default())
    ///     .domain(|error: &Error| match error {
    ///         Error::Region(region) => Some(region.as_str()),
    ///         Error::Invalid => None,
    ///     })
    ///     .build()?;
    /// assert!(backoff.domains().is_empty()); // none has failed yet
    /// # Ok::<(), keyed_backoff_kube::ConfigError>(())
    /// ```
    pub fn domain<E, F>(mut self, domain: F) -> Self
    where
        E: 'static,
        F: for<'a> Fn(&'a E) -> Option<&'a str> + Send + Sync + 'static,
    {
        self.domain = Some(DomainOf::new(domain));
        self
    }

    /// Keeps every object's backoff in `store`, a backoff shared by the
    /// controller's replicas and its restarts (the Redis store,
    /// `keyed_backoff_redis::RedisBackoff`, or any [`Gate`] over string
    /// keys), so that a controller that restarts, or a new leader, finds
    /// each broken object where the last one left it instead of retrying
    /// every one at once. An object's key in the store is its
    /// [`ObjectKey::store_key`](crate::ObjectKey::store_key)
    /// (`Kind.group/namespace/name@uid`; the Redis store puts its prefix
    /// and a colon before it).
    ///
    /// The store's own settings make the ladder: give it the ones given
    /// here. The manager these settings build stays in process as the
    /// store's **fallback**: when a call to the store fails (unreachable,
    /// timed out), the fallback decides (the object waits at least
    /// `initial`, doubling on each failure up to `max` as always: never an
    /// immediate retry of every object), and
    /// [`Stats::fallback_answers`](crate::Stats::fallback_answers) counts
    /// it. With the `tracing` feature the first such answer is a warning,
    /// the next ones debug events, and the store's return an info event.
    ///
    /// The reconcile wrapper ([`ObjectBackoff::reconciler`]) waits for the
    /// store: a run's question (with
    /// [`skip_while_in_backoff`](Self::skip_while_in_backoff), which a
    /// shared store turns on by default, so that a restarted controller's
    /// first run of a broken object waits out its backoff), its failure,
    /// its success. The error policy ([`ObjectBackoff::error_policy`])
    /// then returns the requeue the wrapper decided and asks nothing. The
    /// synchronous calls cannot wait for the network:
    /// [`on_error`](ObjectBackoff::on_error),
    /// [`on_success`](ObjectBackoff::on_success) and
    /// [`reset`](ObjectBackoff::reset) answer from the fallback unless the
    /// store answers at once (a Redis store never does) and tell the store
    /// in the background ([`Stats::local_answers`](crate::Stats::local_answers)
    /// counts those answers apart from the fallback's); [`remaining`](ObjectBackoff::remaining),
    /// [`attempts`](ObjectBackoff::attempts) and
    /// [`manager`](ObjectBackoff::manager) describe the fallback, and
    /// [`level`](ObjectBackoff::level) asks the store.
    ///
    /// The builder's outage awareness runs inside one process: `build`
    /// refuses [`outage`](Self::outage) with a shared store (field
    /// `outage`). For one outage across the fleet, share a store that is
    /// outage-aware itself, such as keyed-backoff-redis's
    /// `RedisBackoff::outage_aware(settings)`, through
    /// [`shared_outage_aware`](Self::shared_outage_aware), so that
    /// [`ObjectBackoff::stats`] reports the fleet's outage.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff_kube::ConfigError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{ObjectBackoff, ObjectBackoffBuilder, OutageSettings};
    /// use keyed_backoff_kube::keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// // Any store over string keys: here an in-process manager stands in
    /// // for a `RedisBackoff` that two controllers share.
    /// let store = Arc::new(Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).build()?);
    /// let controller = |store| {
    ///     ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///         .shared(store)
    ///         .build()
    /// };
    /// let (old, new) = (controller(Arc::clone(&store))?, controller(Arc::clone(&store))?);
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// cm.metadata.namespace = Some("default".into());
    /// old.on_error(&cm);
    /// // The new controller sees the failure the old one recorded.
    /// assert_eq!(new.level(&cm).await.map(|l| l.attempts), Some(1));
    /// assert_eq!(store.attempts(&"ConfigMap/default/app".to_string()), 1);
    ///
    /// let err = ObjectBackoffBuilder::<ConfigMap>::kubelet()
    ///     .shared(store)
    ///     .outage(OutageSettings::default())
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "outage");
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared<G: Gate<String> + 'static>(mut self, store: G) -> Self {
        self.shared = Some(SharedStore::new(store));
        self
    }

    /// [`shared`](Self::shared), over a store that follows an outage
    /// itself (keyed-backoff-redis's `RedisOutageAware`, made by
    /// `RedisBackoff::outage_aware(settings)`: one outage for the whole
    /// fleet): [`ObjectBackoff::stats`] reports that outage (whether one is
    /// under way, the objects it parks, the outages so far, as the store
    /// last saw them), and with `prometheus-client` so does the export.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff_kube::ConfigError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::keyed_backoff::Backoff;
    /// use keyed_backoff_kube::keyed_backoff_outage::OutageAware;
    /// use keyed_backoff_kube::{ObjectBackoff, OutageSettings};
    /// use std::time::Duration;
    /// // Any outage-aware store over string keys: here the outage wrapper
    /// // over an in-process manager stands in for a fleet's.
    /// let manager = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// let store = OutageAware::new(manager, OutageSettings::default().min_failing_keys(3))?;
    /// let backoff = ObjectBackoff::<ConfigMap>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .shared_outage_aware(store)
    ///     .build()?;
    /// for name in ["a", "b", "c"] {
    ///     let mut cm = ConfigMap::default();
    ///     cm.metadata.name = Some(name.into());
    ///     backoff.on_error(&cm);
    /// }
    /// let stats = backoff.stats();
    /// assert!(stats.in_outage);
    /// assert_eq!(stats.outages, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared_outage_aware<G>(mut self, store: G) -> Self
    where
        G: Gate<String> + OutageStatus + 'static,
    {
        self.shared = Some(SharedStore::outage_aware(store));
        self
    }

    /// Checks the settings and builds; errors name the field and its
    /// allowed range, as the core builder's do (`initial`, `max`, `jitter`,
    /// `expire_after`, `overall_rate_limit.per_second` / `.burst`, the
    /// `outage.*` settings, `skip_while_in_backoff` turned off with an
    /// outage, and `outage` with a [`shared`](Self::shared) store).
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
        let outage = self.outage.is_some();
        if outage && self.skip_while_in_backoff == Some(false) {
            return Err(ConfigError::new(
                "skip_while_in_backoff",
                "true with outage detection on (an outage parks only runs that ask)",
                false,
            ));
        }
        let follows_outage = outage
            || self
                .shared
                .as_ref()
                .is_some_and(|store| store.status.is_some());
        if self.domain.is_some() && !follows_outage {
            return Err(ConfigError::new(
                "domain",
                "set with outage detection on (`outage`) or a shared store that follows an outage",
                "no outage",
            ));
        }
        if outage && self.shared.is_some() {
            return Err(ConfigError::new(
                "outage",
                "off with a shared store (give the store outage awareness of its own, for the whole fleet)",
                "on",
            ));
        }
        let shared = self.shared.is_some();
        let manager = Arc::new(
            Backoff::from_settings(self.settings)
                .clock(TokioClock)
                .build()?,
        );
        let decisions = match (self.outage, self.shared) {
            (Some(settings), _) => {
                let outage = Arc::new(OutageAware::with_clock(
                    Arc::clone(&manager),
                    settings,
                    TokioClock,
                )?);
                Decisions::new(Arc::new(Arc::clone(&outage)), manager, None, Some(outage))
            }
            (None, Some(store)) => {
                let gate = Arc::clone(&store.gate);
                Decisions::new(gate, manager, Some(store.gate), store.status)
            }
            (None, None) => Decisions::manager_only(manager),
        };
        let bucket = self.bucket.map(BucketLimit::check).transpose()?;
        Ok(ObjectBackoff::new(
            decisions,
            self.domain,
            bucket.map(Bucket::new),
            self.dyntype,
            self.skip_while_in_backoff.unwrap_or(outage || shared),
        ))
    }
}
