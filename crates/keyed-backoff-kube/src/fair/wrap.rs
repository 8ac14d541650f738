//! The reconcile wrapper: a seat before the run, the object's backoff
//! around it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Resource;
use kube::runtime::controller::Action;

use super::{FairReconciles, Granted, Version};
use crate::{ObjectBackoff, ReconcileError};

impl<K> FairReconciles<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// Wraps a reconcile function for [`Controller::run`](kube::runtime::Controller::run)
    /// exactly as [`ObjectBackoff::reconciler`] does (outcomes recorded in
    /// `backoff`, panics caught, runs of objects in backoff skipped), with a
    /// seat taken before the run and given back after it. Pair it with
    /// [`ObjectBackoff::error_policy`] (or a hand-written policy), as
    /// without the fair queues:
    ///
    /// - with [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
    ///   an object in backoff (or parked by an outage) is requeued at the
    ///   wait left without waiting for a seat;
    /// - otherwise the run waits for a seat and then asks its backoff
    ///   whether it may go, as an unwrapped run asks when it starts;
    /// - a run whose object was deleted while it waited returns
    ///   `Action::await_change()`, and one that found no room to wait
    ///   `Action::requeue` after the level's `Retry-After`: neither ran,
    ///   and `backoff` counts neither.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{FairReconciles, ObjectBackoff};
    /// use kube::runtime::controller::Action;
    /// use kube::runtime::reflector;
    /// use std::sync::Arc;
    /// async fn reconcile(_: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, std::io::Error> {
    ///     Err(std::io::Error::other("broken"))
    /// }
    /// // An empty store: the object is not (or no longer) there.
    /// let (store, _writer) = reflector::store::<ConfigMap>();
    /// let fair = FairReconciles::builder(store).build()?;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let mut wrapped = fair.reconciler(&backoff, reconcile);
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("gone".into());
    /// let action = wrapped(Arc::new(cm), Arc::new(())).await?;
    /// assert_eq!(action, Action::await_change());
    /// assert_eq!(fair.stats().dropped_deleted, 1);
    /// assert_eq!(backoff.stats().failures, 0); // it never ran
    /// # Ok(())
    /// # }
    /// ```
    pub fn reconciler<Ctx, E, F, Fut>(
        &self,
        backoff: &ObjectBackoff<K>,
        mut reconcile: F,
    ) -> impl FnMut(Arc<K>, Arc<Ctx>) -> BoxFuture<'static, Result<Action, ReconcileError<E>>>
    + use<K, Ctx, E, F, Fut>
    where
        F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        Ctx: 'static,
    {
        let (fair, backoff) = (self.clone(), backoff.clone());
        move |obj, ctx| {
            let key = backoff.key(&obj);
            let flow = fair.flow_of(&obj);
            let version = Version::of(&*obj);
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj, ctx)));
            let (fair, backoff) = (fair.clone(), backoff.clone());
            async move {
                // An object in backoff takes no seat: its run asks now.
                let in_backoff =
                    backoff.skips_while_in_backoff() && backoff.decisions().wait(&key).is_some();
                if run.is_ok()
                    && in_backoff
                    && let Some(wait) = backoff.skip(&key).await
                {
                    fair.forgo(&key);
                    return Ok(Action::requeue(wait));
                }
                let _seat = match fair.arrive(key.clone(), flow, version).await {
                    Granted::Seat(seat) => seat,
                    Granted::Gone => return Ok(Action::await_change()),
                    Granted::Wait(wait) => return Ok(Action::requeue(wait)),
                };
                // Asked when the run starts (once): an outage may have
                // been declared while it waited.
                if run.is_ok()
                    && !in_backoff
                    && let Some(wait) = backoff.skip(&key).await
                {
                    return Ok(Action::requeue(wait));
                }
                backoff.outcome(&key, run).await
            }
            .boxed()
        }
    }
}
