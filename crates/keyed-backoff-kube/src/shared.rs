//! An object backoff kept in a shared store (any [`Gate<String>`], such as
//! the Redis store): the store as a gate over object keys, each object
//! asked under its store key (`Kind.group/namespace/name`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::{DynGate, Gate, InBackoff, Level};
use keyed_backoff_outage::OutageStatus;
use kube::runtime::reflector::Lookup;

use crate::key::ObjectKey;

/// The store a builder was given, as the gate its objects ask, and what it
/// reports of an outage when it is outage-aware.
pub(crate) struct SharedStore<K: Lookup> {
    pub(crate) gate: Arc<dyn DynGate<ObjectKey<K>>>,
    pub(crate) status: Option<Arc<dyn OutageStatus>>,
}

impl<K> SharedStore<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    pub(crate) fn new<G: Gate<String> + 'static>(store: G) -> Self {
        SharedStore {
            gate: Arc::new(StoreKeys(Arc::new(store))),
            status: None,
        }
    }

    /// A store that follows an outage (its own, or a fleet's).
    pub(crate) fn outage_aware<G: Gate<String> + OutageStatus + 'static>(store: G) -> Self {
        let store = Arc::new(store);
        SharedStore {
            gate: Arc::new(StoreKeys(Arc::clone(&store))),
            status: Some(store),
        }
    }
}

impl<K: Lookup> Clone for SharedStore<K> {
    fn clone(&self) -> Self {
        SharedStore {
            gate: Arc::clone(&self.gate),
            status: self.status.clone(),
        }
    }
}

impl<K: Lookup> fmt::Debug for SharedStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedStore")
    }
}

/// A store over string keys, asked about objects by their store keys.
struct StoreKeys<G>(Arc<G>);

impl<G> Clone for StoreKeys<G> {
    fn clone(&self) -> Self {
        StoreKeys(Arc::clone(&self.0))
    }
}

impl<K, G> Gate<ObjectKey<K>> for StoreKeys<G>
where
    K: Lookup + Sync,
    K::DynamicType: Sync,
    G: Gate<String>,
{
    type Error = G::Error;
    const ANSWERS_AT_ONCE: bool = G::ANSWERS_AT_ONCE;

    async fn wait(&self, key: &ObjectKey<K>) -> Result<Option<Duration>, G::Error> {
        Gate::wait(&*self.0, &key.store_key()).await
    }

    async fn claim(&self, key: &ObjectKey<K>) -> Result<Option<Duration>, G::Error> {
        Gate::claim(&*self.0, &key.store_key()).await
    }

    async fn fail(&self, key: &ObjectKey<K>) -> Result<Result<Level, InBackoff>, G::Error> {
        Gate::fail(&*self.0, &key.store_key()).await
    }

    async fn succeed(&self, key: &ObjectKey<K>) -> Result<(), G::Error> {
        Gate::succeed(&*self.0, &key.store_key()).await
    }

    async fn fail_in(
        &self,
        key: &ObjectKey<K>,
        domain: &str,
    ) -> Result<Result<Level, InBackoff>, G::Error> {
        Gate::fail_in(&*self.0, &key.store_key(), domain).await
    }

    async fn succeed_in(&self, key: &ObjectKey<K>, domain: &str) -> Result<(), G::Error> {
        Gate::succeed_in(&*self.0, &key.store_key(), domain).await
    }

    async fn hold(&self, key: &ObjectKey<K>, wait: Duration) -> Result<(), G::Error> {
        Gate::hold(&*self.0, &key.store_key(), wait).await
    }

    async fn level(&self, key: &ObjectKey<K>) -> Result<Option<Level>, G::Error> {
        Gate::level(&*self.0, &key.store_key()).await
    }

    async fn standing(
        &self,
        key: &ObjectKey<K>,
    ) -> Result<(Option<Level>, Option<Duration>), G::Error> {
        Gate::standing(&*self.0, &key.store_key()).await
    }

    async fn resume(&self, key: &ObjectKey<K>, level: Level) -> Result<(), G::Error> {
        Gate::resume(&*self.0, &key.store_key(), level).await
    }
}
