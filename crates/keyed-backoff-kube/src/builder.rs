//! The builder: any ladder, a controller-wide rate limit, when entries
//! expire, jitter, and whether runs in backoff skip the body.

use std::time::Duration;

use keyed_backoff::clock::TokioClock;
use keyed_backoff::{Backoff, ConfigError, Settings};
use kube::runtime::reflector::Lookup;

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
/// failure (client-go's rule), so an object quiet that long starts over at
/// `initial`; no controller-wide rate limit; every run reaches the
/// reconcile body. [`build`](Self::build) checks every value.
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
    /// assert_eq!(b.manager().max(), Duration::from_secs(60));
    /// # Ok::<(), keyed_backoff_kube::ConfigError>(())
    /// ```
    pub fn new_with(initial: Duration, max: Duration, dyntype: K::DynamicType) -> Self {
        Self {
            settings: Settings::new(initial, max),
            bucket: None,
            dyntype,
            skip_while_in_backoff: false,
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
    pub fn skip_while_in_backoff(mut self, skip: bool) -> Self {
        self.skip_while_in_backoff = skip;
        self
    }

    /// Checks the settings and builds; errors name the field and its
    /// allowed range, as the core builder's do (`initial`, `max`, `jitter`,
    /// `expire_after`, and `overall_rate_limit.per_second` / `.burst`).
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
        Ok(ObjectBackoff::new(
            manager,
            bucket.map(Bucket::new),
            self.dyntype,
            self.skip_while_in_backoff,
        ))
    }
}
