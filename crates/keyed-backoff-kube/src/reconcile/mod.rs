//! The reconcile wrapper and the error policy: the pair given to
//! [`Controller::run`](kube::runtime::Controller::run).

mod error;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Lookup;

use crate::backoff::ObjectBackoff;
use crate::observe;

pub use error::ReconcileError;

impl<K> ObjectBackoff<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// An error policy for [`Controller::run`](kube::runtime::Controller::run):
    /// [`on_error`](Self::on_error) for the failed object, whatever the
    /// error and the context. To treat some errors differently, write the
    /// policy by hand: [`ReconcileError`] shows how.
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

    /// With [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
    /// the wait left if `key` is in backoff now: the run is skipped, and
    /// counted.
    fn skip(&self, key: &crate::key::ObjectKey<K>) -> Option<std::time::Duration> {
        let wait = self
            .remaining_of(key)
            .filter(|_| self.skips_while_in_backoff())?;
        self.tally().skips.add_one();
        observe::skipped(key, wait);
        Some(wait)
    }

    /// Wraps a reconcile function for [`Controller::run`](kube::runtime::Controller::run):
    ///
    /// - a success resets the object's backoff;
    /// - an error is returned as [`ReconcileError::Reconcile`];
    /// - a panic, whether in the call or while the future runs, is caught,
    ///   counted, and returned as [`ReconcileError::Panicked`], so the error
    ///   policy backs that object off and the controller keeps reconciling
    ///   every other object;
    /// - with [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
    ///   a run while the object is still in backoff does not call
    ///   `reconcile` (or, when the object was held between the call and
    ///   the moment its future first runs, does not run it) and requeues at
    ///   the wait left;
    /// - with [`outage`](crate::ObjectBackoffBuilder::outage) detection, an
    ///   error or a panic is told to detection as soon as the reconcile
    ///   returns it ([`Backoff::note_failure`](keyed_backoff::Backoff::note_failure)),
    ///   before the error policy runs. kube-runtime runs the error policy of
    ///   a reconcile only after it has started the reconciles of every other
    ///   ready object, so without this the whole first wave of an outage
    ///   (every object's first run) would reach the failing dependency
    ///   before detection heard of any failure. The failure is seen by
    ///   detection even when a hand-written error policy chooses not to call
    ///   [`on_error`](Self::on_error) for that error; when it does call it,
    ///   the failure counts once.
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
    /// assert_eq!(backoff.stats().panics, 1);
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
            if let Some(wait) = this.skip(&key) {
                return futures::future::ready(Ok(Action::requeue(wait))).boxed();
            }
            // A panic in the call itself (before any future exists) is
            // caught as one in the future is.
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj, ctx)));
            let this = this.clone();
            async move {
                // Asked again when the run starts: kube-runtime makes the
                // futures of every ready object before it runs any, so an
                // outage seen since (from the failures noted below) may
                // hold this object now.
                if run.is_ok()
                    && let Some(wait) = this.skip(&key)
                {
                    return Ok(Action::requeue(wait));
                }
                let outcome = match run {
                    Ok(run) => AssertUnwindSafe(run).catch_unwind().await,
                    Err(payload) => Err(payload),
                };
                match outcome {
                    Ok(Ok(action)) => {
                        this.succeeded(&key);
                        Ok(action)
                    }
                    Ok(Err(e)) => {
                        this.manager().note_failure(&key);
                        Err(ReconcileError::Reconcile(e))
                    }
                    Err(payload) => {
                        this.manager().note_failure(&key);
                        this.tally().panics.add_one();
                        let message = error::panic_message(&*payload);
                        observe::panicked(&key, &message);
                        Err(ReconcileError::Panicked(message))
                    }
                }
            }
            .boxed()
        }
    }
}
