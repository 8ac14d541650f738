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
    /// use keyed_backoff_kube::{ObjectBackoff, ReconcileError};
    /// use kube::runtime::controller::Action;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
    /// let policy = backoff.error_policy::<std::io::Error, ()>();
    /// // An error made by hand carries no requeue: the policy records it.
    /// let err = ReconcileError::reconcile(std::io::Error::other("boom"));
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = Some("app".into());
    /// let action = policy(Arc::new(cm), &err, Arc::new(()));
    /// assert_eq!(action, Action::requeue(Duration::from_secs(10)));
    /// # }
    /// ```
    pub fn error_policy<E, Ctx>(
        &self,
    ) -> impl Fn(Arc<K>, &ReconcileError<E>, Arc<Ctx>) -> Action + use<K, E, Ctx> {
        let this = self.clone();
        move |obj, err, _ctx| err.requeue().unwrap_or_else(|| this.on_error(&obj))
    }

    /// With [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
    /// the wait left if `key` may not run now (its backoff, or an outage
    /// that parks it): the run is skipped, and counted. The run's one
    /// question to the gate, which may count it as the key's turn.
    pub(crate) async fn skip(&self, key: &crate::key::ObjectKey<K>) -> Option<std::time::Duration> {
        if !self.skips_while_in_backoff() {
            return None;
        }
        let wait = self.decisions().claim(key).await?;
        self.tally().skips.add_one();
        observe::skipped(key, wait);
        Some(wait)
    }

    /// Wraps a reconcile function for [`Controller::run`](kube::runtime::Controller::run):
    ///
    /// - a success resets the object's backoff;
    /// - an error is returned as a [`ReconcileError`] carrying it
    ///   ([`ReconcileError::as_inner`]);
    /// - a panic, whether in the call or while the future runs, is caught,
    ///   counted, and returned as a [`ReconcileError`] that
    ///   [`is_panic`](ReconcileError::is_panic), so the error
    ///   policy backs that object off and the controller keeps reconciling
    ///   every other object;
    /// - with [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
    ///   a run asks once, when its future first runs, whether the object
    ///   may go (its backoff, or an outage that parks it); if not, it does
    ///   not call `reconcile` and requeues at the wait left;
    /// - an error or a panic is recorded as the object's failure at once,
    ///   as the reconcile returns it (exactly what
    ///   [`on_error`](Self::on_error) records), and the requeue decided is
    ///   carried in the [`ReconcileError`] for the error policy
    ///   ([`error_policy`](Self::error_policy) returns it). kube-runtime
    ///   runs the error policy of a reconcile only after it has started
    ///   the reconciles of every other ready object, so with
    ///   [`outage`](crate::ObjectBackoffBuilder::outage) awareness the
    ///   failures of an outage's first wave are seen before the rest of
    ///   the wave runs.
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
            // The key is built once per run, for the question and the outcome.
            let key = this.key(&obj);
            // A panic in the call itself (before any future exists) is
            // caught as one in the future is.
            let run = std::panic::catch_unwind(AssertUnwindSafe(|| reconcile(obj, ctx)));
            let this = this.clone();
            async move {
                // Asked when the run starts, not when its future is made:
                // kube-runtime makes the futures of every ready object
                // before it runs any, and failures seen since may have
                // declared an outage that parks this object.
                if run.is_ok()
                    && let Some(wait) = this.skip(&key).await
                {
                    return Ok(Action::requeue(wait));
                }
                this.outcome(&key, run).await
            }
            .boxed()
        }
    }

    /// The run of `key` once it may go: `run` (the reconcile's future, or
    /// the panic of the call that made it) awaited with panics caught, and
    /// its outcome recorded once: a success resets the object, an error or
    /// a panic is its failure, with the requeue decided carried along.
    pub(crate) async fn outcome<E, Fut>(
        &self,
        key: &crate::key::ObjectKey<K>,
        run: std::thread::Result<Fut>,
    ) -> Result<Action, ReconcileError<E>>
    where
        E: 'static,
        Fut: Future<Output = Result<Action, E>>,
    {
        let outcome = match run {
            Ok(run) => AssertUnwindSafe(run).catch_unwind().await,
            Err(payload) => Err(payload),
        };
        let error = match outcome {
            Ok(Ok(action)) => {
                let (had, told) = self.decisions().succeed(key);
                told.get().await;
                self.succeeded(key, had);
                return Ok(action);
            }
            Ok(Err(e)) => {
                let domain = self.domain_of(&e);
                let answer = self.decisions().fail(key, domain).get().await;
                let requeue = self.failed(key, answer);
                return Err(ReconcileError::reconcile(e).with_requeue(requeue));
            }
            Err(payload) => {
                self.tally().panics.add_one();
                let message = error::panic_message(&*payload);
                observe::panicked(key, &message);
                ReconcileError::panicked(message)
            }
        };
        let answer = self.decisions().fail(key, None).get().await;
        Err(error.with_requeue(self.failed(key, answer)))
    }
}
