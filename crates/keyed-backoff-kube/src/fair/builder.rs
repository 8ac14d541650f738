//! The builder of [`FairReconciles`], checked when built.

use std::sync::Arc;

use fair_admission::{Apf, ConfigError, LevelSpec, LimitResponse};
use kube::Resource;
use kube::runtime::reflector::{Lookup, Store};

use super::seats::{Limits, Seats};
use super::{FairReconciles, FlowFn, Priority};

/// Builds a [`FairReconciles`]: its seats, its flow function and its
/// queues. Every setting is checked by [`build`](Self::build).
///
/// ```
/// use fair_admission::LimitResponse;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::FairReconciles;
/// use kube::runtime::reflector;
/// let (store, _writer) = reflector::store::<ConfigMap>();
/// let fair = FairReconciles::builder(store)
///     .seats(16)
///     // One flow per value of the `team` label (objects without it share one).
///     .flow(|cm: &ConfigMap| {
///         let labels = cm.metadata.labels.as_ref();
///         labels.and_then(|l| l.get("team")).cloned().unwrap_or_default()
///     })
///     .queuing(LimitResponse::Queue { queues: 128, queue_length_limit: 500, hand_size: 6 })
///     .build()?;
/// assert_eq!(fair.stats().seats, 16);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub struct FairReconcilesBuilder<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    store: Store<K>,
    seats: u32,
    queuing: LimitResponse,
    flow: FlowFn<K>,
}

impl<K> FairReconcilesBuilder<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// The most seats: kube-runtime's largest concurrency.
    pub const MAX_SEATS: u32 = u16::MAX as u32;

    pub(crate) fn new(store: Store<K>) -> Self {
        Self {
            store,
            seats: 8,
            queuing: LimitResponse::Queue {
                queues: 64,
                queue_length_limit: 1_000,
                hand_size: 8,
            },
            flow: Arc::new(|obj: &K| obj.namespace().map(|n| n.into_owned()).unwrap_or_default()),
        }
    }

    /// How many reconciles run at once (default 8), between 1 and
    /// [`MAX_SEATS`](Self::MAX_SEATS).
    pub fn seats(mut self, seats: u32) -> Self {
        self.seats = seats;
        self
    }

    /// The flow an object's reconciles belong to (default: its namespace,
    /// `""` for a cluster-scoped object). Flows share the seats fairly,
    /// whatever each has waiting. A panic in `flow` puts that object in the
    /// flow `""` and is counted in
    /// [`FairStats::flow_panics`](crate::FairStats::flow_panics).
    pub fn flow(mut self, flow: impl Fn(&K) -> String + Send + Sync + 'static) -> Self {
        self.flow = Arc::new(flow);
        self
    }

    /// The queues of each priority, as an `Apf` level's
    /// ([`LimitResponse::Queue`]: queues, their length, the hand each flow
    /// is dealt; default 64 queues of 1,000, hands of 8), or
    /// [`LimitResponse::Reject`] to wait in no queue (a reconcile that
    /// finds every seat taken is requeued).
    ///
    /// A flow has at most `queue_length_limit × hand_size` reconciles
    /// waiting at a priority, and a priority at most `queues ×
    /// queue_length_limit`; a reconcile beyond either is requeued after
    /// the level's `Retry-After`, without running.
    pub fn queuing(mut self, queuing: LimitResponse) -> Self {
        self.queuing = queuing;
        self
    }

    /// Checks every setting and builds the fair queues.
    ///
    /// ```
    /// use fair_admission::LimitResponse;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::FairReconciles;
    /// use kube::runtime::reflector;
    /// let builder = || FairReconciles::builder(reflector::store::<ConfigMap>().0);
    /// let err = builder().seats(0).build().unwrap_err();
    /// assert_eq!((err.field(), err.allowed()), ("seats", "between 1 and 65535"));
    /// assert_eq!(err.to_string(), "invalid seats: must be between 1 and 65535, got 0");
    /// let none = LimitResponse::Queue { queues: 0, queue_length_limit: 10, hand_size: 1 };
    /// assert_eq!(builder().queuing(none).build().unwrap_err().field(), "queues");
    /// ```
    pub fn build(self) -> Result<FairReconciles<K>, ConfigError> {
        if !(1..=Self::MAX_SEATS).contains(&self.seats) {
            let allowed = format!("between 1 and {}", Self::MAX_SEATS);
            return Err(ConfigError::new("seats", allowed, self.seats));
        }
        let mut apf = Apf::builder(4 * self.seats);
        for p in Priority::ALL {
            apf = apf.level(p.as_str(), LevelSpec::limited(1, self.queuing));
        }
        let apf = apf.build()?;
        // The levels in the builder's order: changed, then resync.
        let mut ids = apf.level_ids();
        let (changed, resync) = (ids.next(), ids.next());
        drop(ids);
        let (Some(changed), Some(resync)) = (changed, resync) else {
            return Err(ConfigError::new("levels", "changed and resync", "fewer"));
        };
        let levels = [changed, resync];
        let limits = match self.queuing {
            LimitResponse::Queue {
                queues,
                queue_length_limit,
                hand_size,
            } => Limits {
                per_flow: queue_length_limit.saturating_mul(hand_size),
                per_priority: queues.saturating_mul(queue_length_limit),
            },
            _ => Limits {
                per_flow: 1,
                per_priority: self.seats as usize,
            },
        };
        let seats = Seats::new(apf, levels, self.seats, limits);
        Ok(FairReconciles::new(self.store, self.flow, seats))
    }
}
