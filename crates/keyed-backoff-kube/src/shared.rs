//! An object backoff kept in a shared store (any [`Gate<String>`], such as
//! the Redis store), with the builder's in-process manager as its fallback:
//! every decision goes to the store, and a decision the store cannot make
//! (unreachable, or not at once for a synchronous call) is made by the
//! fallback instead, and counted.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use keyed_backoff::{Advanced, Gate, InBackoff};
use keyed_backoff_outage::OutageStatus;
use kube::runtime::reflector::Lookup;

use crate::key::ObjectKey;
use crate::manager::{ObjectManager, ready};
use crate::observe;
use crate::stats::{Count, LocalAnswers};

/// Why the store could not answer.
type StoreError = Box<dyn std::error::Error + Send + Sync>;

/// A store's answer to come.
type Answer<T> = BoxFuture<'static, Result<T, StoreError>>;

/// The calls this crate makes on a store, object-safe: each future owns
/// what it needs, so that one a synchronous call could not wait for can
/// finish in the background.
trait Store: Send + Sync {
    fn claim(&self, key: String) -> Answer<Option<Duration>>;
    fn fail(&self, key: String) -> Answer<Result<Advanced, InBackoff>>;
    fn succeed(&self, key: String) -> Answer<()>;
    fn level(&self, key: String) -> Answer<Option<Advanced>>;
}

/// Any gate over string keys, as a [`Store`].
struct Adapter<G>(Arc<G>);

fn boxed(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    Box::new(e)
}

impl<G: Gate<String> + 'static> Store for Adapter<G> {
    fn claim(&self, key: String) -> Answer<Option<Duration>> {
        let gate = Arc::clone(&self.0);
        async move { gate.claim(&key).await.map_err(boxed) }.boxed()
    }

    fn fail(&self, key: String) -> Answer<Result<Advanced, InBackoff>> {
        let gate = Arc::clone(&self.0);
        async move { gate.fail(&key).await.map_err(boxed) }.boxed()
    }

    fn succeed(&self, key: String) -> Answer<()> {
        let gate = Arc::clone(&self.0);
        async move { gate.succeed(&key).await.map_err(boxed) }.boxed()
    }

    fn level(&self, key: String) -> Answer<Option<Advanced>> {
        let gate = Arc::clone(&self.0);
        async move { gate.level(&key).await.map_err(boxed) }.boxed()
    }
}

/// The store a builder was given, until it builds, and what it reports of
/// an outage when it is outage-aware.
#[derive(Clone)]
pub(crate) struct SharedStore {
    store: Arc<dyn Store>,
    status: Option<Arc<dyn OutageStatus>>,
}

impl SharedStore {
    pub(crate) fn new<G: Gate<String> + 'static>(gate: G) -> Self {
        SharedStore {
            store: Arc::new(Adapter(Arc::new(gate))),
            status: None,
        }
    }

    /// A store that follows an outage (its own, or a fleet's).
    pub(crate) fn outage_aware<G: Gate<String> + OutageStatus + 'static>(gate: G) -> Self {
        let gate = Arc::new(gate);
        SharedStore {
            store: Arc::new(Adapter(Arc::clone(&gate))),
            status: Some(gate),
        }
    }
}

impl fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedStore")
    }
}

/// The store and its fallback.
pub(crate) struct SharedGate<K: Lookup> {
    store: Arc<dyn Store>,
    status: Option<Arc<dyn OutageStatus>>,
    local: Arc<ObjectManager<K>>,
    /// Answers given because the store could not answer.
    fallbacks: Count,
    /// Answers given because a synchronous call could not wait.
    not_at_once: Count,
    /// Whether the last call the store was asked failed, so that an
    /// unreachable store is reported once, and again once it answers.
    unreachable: AtomicBool,
}

impl<K> SharedGate<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    pub(crate) fn new(store: SharedStore, local: Arc<ObjectManager<K>>) -> Self {
        Self {
            store: store.store,
            status: store.status,
            local,
            fallbacks: Count::default(),
            not_at_once: Count::default(),
            unreachable: AtomicBool::new(false),
        }
    }

    /// What the store reports of the outage it follows, when it does.
    pub(crate) fn outage(&self) -> Option<&dyn OutageStatus> {
        self.status.as_deref()
    }

    /// The in-process fallback.
    pub(crate) fn local(&self) -> &Arc<ObjectManager<K>> {
        &self.local
    }

    /// The answers the fallback gave in the store's place, by why.
    pub(crate) fn local_answers(&self) -> LocalAnswers {
        LocalAnswers {
            fallback: self.fallbacks.get(),
            not_at_once: self.not_at_once.get(),
        }
    }

    /// The store's answer, or the fallback's when it fails.
    async fn ask<T>(
        &self,
        key: &ObjectKey<K>,
        call: &'static str,
        answer: Answer<T>,
        local: impl FnOnce() -> T,
    ) -> T {
        match answer.await {
            Ok(answer) => {
                self.answered();
                answer
            }
            Err(error) => {
                self.failed(key, call, &error);
                local()
            }
        }
    }

    /// An outcome told to the store: its answer if it has one at once (one
    /// poll), else the fallback's; an outcome the store could not take at
    /// once is told to it in the background, on the current tokio runtime
    /// if there is one.
    fn ask_now<T: Send + 'static>(
        &self,
        key: &ObjectKey<K>,
        call: &'static str,
        mut answer: Answer<T>,
        local: impl FnOnce() -> T,
    ) -> T {
        match answer
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(Ok(answer)) => {
                self.answered();
                answer
            }
            Poll::Ready(Err(error)) => {
                self.failed(key, call, &error);
                local()
            }
            Poll::Pending => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(answer.map(drop));
                }
                self.not_at_once.add_one();
                observe::fallback_not_at_once(key, call);
                local()
            }
        }
    }

    fn answered(&self) {
        if self.unreachable.load(Ordering::Relaxed)
            && self.unreachable.swap(false, Ordering::Relaxed)
        {
            observe::store_answers_again();
        }
    }

    fn failed(&self, key: &ObjectKey<K>, call: &'static str, error: &StoreError) {
        self.fallbacks.add_one();
        let first = !self.unreachable.swap(true, Ordering::Relaxed);
        observe::fallback(key, call, &**error, first);
    }

    pub(crate) async fn claim(&self, key: &ObjectKey<K>) -> Option<Duration> {
        let answer = self.store.claim(key.store_key());
        self.ask(key, "claim", answer, || ready(self.local.claim(key)))
            .await
    }

    pub(crate) async fn fail(&self, key: &ObjectKey<K>) -> Result<Advanced, InBackoff> {
        let answer = self.store.fail(key.store_key());
        self.ask(key, "fail", answer, || ready(self.local.fail(key)))
            .await
    }

    /// A success: the store forgets the key, and so does the fallback.
    pub(crate) async fn succeed(&self, key: &ObjectKey<K>) {
        self.local.reset(key);
        let answer = self.store.succeed(key.store_key());
        self.ask(key, "succeed", answer, || ()).await;
    }

    pub(crate) async fn level(&self, key: &ObjectKey<K>) -> Option<Advanced> {
        let answer = self.store.level(key.store_key());
        self.ask(key, "level", answer, || ready(self.local.level(key)))
            .await
    }

    pub(crate) fn fail_now(&self, key: &ObjectKey<K>) -> Result<Advanced, InBackoff> {
        let answer = self.store.fail(key.store_key());
        self.ask_now(key, "fail", answer, || ready(self.local.fail(key)))
    }

    /// A success, or a forgotten object: the fallback forgets it now, the
    /// store when it can. Whether the fallback had an entry.
    pub(crate) fn succeed_now(&self, key: &ObjectKey<K>) -> bool {
        let had = self.local.reset(key);
        let answer = self.store.succeed(key.store_key());
        self.ask_now(key, "succeed", answer, || ());
        had
    }
}
