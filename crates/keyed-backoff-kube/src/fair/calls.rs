//! The way from the fair queues to the controller: a waiting object's reconcile
//! is asked for when the object's turn comes.
//!
//! A reconcile that has to wait returns at once instead of waiting inside
//! the controller: kube-runtime polls every reconcile it is running
//! whenever one of them wakes, so thousands of reconciles waiting there
//! would cost the controller in proportion to their number at every wake.
//! The object waits in the fair queues alone; when the fair queues dispatch it,
//! the fair queues ask for its reconcile through the stream the controller was
//! wired to ([`FairReconciles::controller`](super::FairReconciles::controller)),
//! and that reconcile waits for the seat a running one frees.

use std::time::Duration;

use futures::channel::mpsc;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use super::seats::Call;
use crate::key::ObjectKey;

/// The requests for reconciles, and the controller's end until it is
/// wired.
pub(crate) struct Calls<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    tx: mpsc::UnboundedSender<ObjectRef<K>>,
    rx: Option<mpsc::UnboundedReceiver<ObjectRef<K>>>,
}

impl<K> Calls<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// How soon a waiting reconcile of a controller that is not wired
    /// asks again (to find whether its turn has come).
    const UNWIRED_RETRY: Duration = Duration::from_secs(1);

    /// How soon a waiting reconcile of a wired controller asks again, in
    /// case a request for it were lost: it keeps its place.
    const WIRED_RETRY: Duration = Duration::from_secs(60);

    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded();
        Calls { tx, rx: Some(rx) }
    }

    /// The requests, for the controller; `None` once taken.
    pub(crate) fn requests(&mut self) -> Option<mpsc::UnboundedReceiver<ObjectRef<K>>> {
        self.rx.take()
    }

    /// When a reconcile that leaves its object waiting asks again.
    pub(crate) fn retry(&self) -> Duration {
        if self.rx.is_none() {
            Self::WIRED_RETRY
        } else {
            Self::UNWIRED_RETRY
        }
    }

    /// Asks for the reconcile of `key` now, or after the wait given.
    pub(crate) fn call(&self, key: &ObjectKey<K>, call: Call) {
        let reference = key.reference().clone();
        match call {
            // The controller's end gone (it stopped): nothing to run.
            Call::Now => drop(self.tx.unbounded_send(reference)),
            Call::After(wait) => {
                let tx = self.tx.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => drop(runtime.spawn(async move {
                        tokio::time::sleep(wait).await;
                        let _ = tx.unbounded_send(reference);
                    })),
                    Err(_) => drop(tx.unbounded_send(reference)),
                }
            }
        }
    }
}
