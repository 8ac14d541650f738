//! The object backoff's gate: the in-process manager alone, wrapped in
//! outage awareness, or a shared store with the manager as its fallback.
//! All speak the core's [`Gate`] contract; this crate asks it one question
//! per run and tells it each outcome once.

use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::clock::TokioClock;
use keyed_backoff::{Advanced, Gate, InBackoff};
use keyed_backoff_outage::{InProcess, OutageAware, OutageStatus};
use kube::runtime::reflector::Lookup;

use crate::key::ObjectKey;
use crate::manager::{ObjectManager, ready};
use crate::shared::SharedGate;
use crate::stats::{LocalAnswers, OutageState};

/// The manager, with or without outage awareness around it, or a shared
/// store over it.
pub(crate) enum ObjectGate<K: Lookup> {
    Plain(Arc<ObjectManager<K>>),
    Outage(Box<OutageAware<Arc<ObjectManager<K>>, InProcess<TokioClock>>>),
    Shared(Box<SharedGate<K>>),
}

impl<K> ObjectGate<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// The in-process manager under any wrapper, or a shared store's
    /// fallback.
    pub(crate) fn manager(&self) -> &Arc<ObjectManager<K>> {
        match self {
            ObjectGate::Plain(m) => m,
            ObjectGate::Outage(w) => w.inner(),
            ObjectGate::Shared(s) => s.local(),
        }
    }

    /// The wait left before a run of `key` may reach the reconcile body,
    /// asked by that run: an outage may count it as the key's turn.
    pub(crate) async fn claim(&self, key: &ObjectKey<K>) -> Option<Duration> {
        match self {
            ObjectGate::Plain(m) => ready(m.claim(key)),
            ObjectGate::Outage(w) => ready(w.claim(key)),
            ObjectGate::Shared(s) => s.claim(key).await,
        }
    }

    /// The wait left for `key`, changing nothing (a shared store's
    /// fallback's: a synchronous call cannot wait for the store).
    pub(crate) fn wait(&self, key: &ObjectKey<K>) -> Option<Duration> {
        match self {
            ObjectGate::Plain(m) => ready(m.wait(key)),
            ObjectGate::Outage(w) => ready(w.wait(key)),
            ObjectGate::Shared(s) => ready(s.local().wait(key)),
        }
    }

    /// `key`'s level where its state is kept.
    pub(crate) async fn level(&self, key: &ObjectKey<K>) -> Option<Advanced> {
        match self {
            ObjectGate::Plain(m) => ready(m.level(key)),
            ObjectGate::Outage(w) => ready(w.level(key)),
            ObjectGate::Shared(s) => s.level(key).await,
        }
    }

    /// A failure of `key`: counted at most once per backoff. A shared
    /// store answers if it can at once.
    pub(crate) fn fail(&self, key: &ObjectKey<K>) -> Result<Advanced, InBackoff> {
        match self {
            ObjectGate::Plain(m) => ready(m.fail(key)),
            ObjectGate::Outage(w) => ready(w.fail(key)),
            ObjectGate::Shared(s) => s.fail_now(key),
        }
    }

    /// [`fail`](Self::fail), waiting for a shared store's answer.
    pub(crate) async fn fail_async(&self, key: &ObjectKey<K>) -> Result<Advanced, InBackoff> {
        match self {
            ObjectGate::Shared(s) => s.fail(key).await,
            _ => self.fail(key),
        }
    }

    /// A success of `key`; whether it had an entry (a shared store's
    /// fallback's entry: the store does not say).
    pub(crate) fn succeed(&self, key: &ObjectKey<K>) -> bool {
        match self {
            ObjectGate::Plain(m) => m.reset(key),
            ObjectGate::Outage(w) => {
                let had = w.inner().attempts(key) > 0;
                ready(w.succeed(key));
                had
            }
            ObjectGate::Shared(s) => s.succeed_now(key),
        }
    }

    /// [`succeed`](Self::succeed), waiting for a shared store's answer;
    /// with one, always `true`.
    pub(crate) async fn succeed_async(&self, key: &ObjectKey<K>) -> bool {
        match self {
            ObjectGate::Shared(s) => {
                s.succeed(key).await;
                true
            }
            _ => self.succeed(key),
        }
    }

    /// Forgets `key` without a success; whether the manager (a shared
    /// store's fallback) had an entry. A shared store forgets it too.
    pub(crate) fn forget(&self, key: &ObjectKey<K>) -> bool {
        match self {
            ObjectGate::Shared(s) => s.succeed_now(key),
            _ => self.manager().reset(key),
        }
    }

    /// The answers a shared store's fallback gave in its place, by why.
    pub(crate) fn local_answers(&self) -> LocalAnswers {
        match self {
            ObjectGate::Shared(s) => s.local_answers(),
            _ => LocalAnswers::default(),
        }
    }

    /// The outage's state, when the gate follows one: the builder's
    /// outage wrapper, or an outage-aware shared store (a fleet's).
    pub(crate) fn outage(&self) -> Option<OutageState> {
        let status: &dyn OutageStatus = match self {
            ObjectGate::Plain(_) => return None,
            ObjectGate::Outage(w) => &**w,
            ObjectGate::Shared(s) => s.outage()?,
        };
        Some(OutageState {
            in_outage: status.in_outage(),
            parked: status.parked(),
            outages: status.outages(),
        })
    }
}
