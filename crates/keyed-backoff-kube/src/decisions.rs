//! Where an object backoff's decisions are made: one erased [`DynGate`]
//! (the in-process manager, the manager wrapped in outage awareness, or a
//! shared store), with the manager answering in its place when it cannot.
//! This crate asks it one question per run and tells it each outcome once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keyed_backoff::{Answer, DynGate, InBackoff, Level};
use keyed_backoff_outage::{DomainStatus, OutageStatus};
use kube::runtime::reflector::Lookup;

use crate::key::ObjectKey;
use crate::manager::ObjectManager;
use crate::observe;
use crate::stats::{Count, LocalAnswers, OutageState};

/// Why the gate could not answer.
type GateError = Box<dyn std::error::Error + Send + Sync>;

/// Every decision of an object backoff, and who answers when its gate
/// cannot.
pub(crate) struct Decisions<K: Lookup> {
    /// The manager, the manager in outage awareness, or a shared store.
    gate: Arc<dyn DynGate<ObjectKey<K>>>,
    /// The in-process manager: the gate itself, under the gate's wrapper,
    /// or a shared store's fallback.
    manager: Arc<ObjectManager<K>>,
    /// A shared store, when the gate is one: it forgets deleted objects.
    store: Option<Arc<dyn DynGate<ObjectKey<K>>>>,
    /// What the gate reports of the outage it follows, when it does.
    outage: Option<Arc<dyn OutageStatus>>,
    /// Answers given by the manager because the gate could not answer.
    fallbacks: Count,
    /// Answers given by the manager because a synchronous call could not
    /// wait for the gate.
    not_at_once: Count,
    /// Whether the gate's last answer was an error, so that a gate that
    /// cannot be reached is reported once, and again once it answers.
    unreachable: AtomicBool,
}

/// The in-process manager's answer: always at once, never an error.
fn local<T>(answer: Answer<T>) -> T {
    match answer {
        Answer::Now(answer) => answer,
        Answer::Later(_) => unreachable!("the in-process manager answers at once"),
    }
}

impl<K> Decisions<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// The manager alone.
    pub(crate) fn manager_only(manager: Arc<ObjectManager<K>>) -> Self {
        Self::new(Arc::new(Arc::clone(&manager)), manager, None, None)
    }

    /// `gate` over `manager` (a wrapper around it, or a store it stands
    /// in for), `store` when the gate is a shared store, and the outage
    /// the gate follows, if any.
    pub(crate) fn new(
        gate: Arc<dyn DynGate<ObjectKey<K>>>,
        manager: Arc<ObjectManager<K>>,
        store: Option<Arc<dyn DynGate<ObjectKey<K>>>>,
        outage: Option<Arc<dyn OutageStatus>>,
    ) -> Self {
        Decisions {
            gate,
            manager,
            store,
            outage,
            fallbacks: Count::default(),
            not_at_once: Count::default(),
            unreachable: AtomicBool::new(false),
        }
    }

    /// The in-process manager under any wrapper, or a shared store's
    /// fallback.
    pub(crate) fn manager(&self) -> &Arc<ObjectManager<K>> {
        &self.manager
    }

    /// Whether the gate is a shared store.
    pub(crate) fn is_shared(&self) -> bool {
        self.store.is_some()
    }

    /// The wait left before a run of `key` may reach the reconcile body,
    /// asked by that run: an outage may count it as the key's turn.
    pub(crate) async fn claim(&self, key: &ObjectKey<K>) -> Option<Duration> {
        let fallback = || local(self.manager.claim(key));
        self.asked(key, "claim", self.gate.claim(key), fallback)
            .get()
            .await
    }

    /// The wait left for `key`, changing nothing. A synchronous read
    /// cannot wait for a gate across the network: the manager's.
    pub(crate) fn wait(&self, key: &ObjectKey<K>) -> Option<Duration> {
        let fallback = || local(self.manager.wait(key));
        if !self.gate.answers_at_once() {
            return fallback();
        }
        self.asked(key, "wait", self.gate.wait(key), fallback).now()
    }

    /// `key`'s level where its state is kept.
    pub(crate) async fn level(&self, key: &ObjectKey<K>) -> Option<Level> {
        let fallback = || local(self.manager.level(key));
        self.asked(key, "level", self.gate.level(key), fallback)
            .get()
            .await
    }

    /// A failure of `key`, in the dependency `domain` when the error named
    /// one, counted at most once per backoff: taken at once or awaited
    /// ([`Asked`]).
    pub(crate) fn fail<'a>(
        &'a self,
        key: &'a ObjectKey<K>,
        domain: Option<&str>,
    ) -> Asked<'a, K, Result<Level, InBackoff>, impl FnOnce() -> Result<Level, InBackoff>> {
        let fallback = || local(self.manager.fail(key));
        let answer = match domain {
            Some(domain) => self.gate.fail_in(key, domain),
            None => self.gate.fail(key),
        };
        self.asked(key, "fail", answer, fallback)
    }

    /// A success of `key`, taken as [`fail`](Self::fail) is; and whether
    /// the manager had an entry for it (a shared store's fallback forgets
    /// it too).
    pub(crate) fn succeed<'a>(
        &'a self,
        key: &'a ObjectKey<K>,
    ) -> (bool, Asked<'a, K, (), impl FnOnce()>) {
        let had = if self.store.is_some() {
            // The store's fallback: the store does not touch it.
            self.manager.reset(key)
        } else {
            // The gate resets the manager itself (under any wrapper):
            // whether it had an entry is asked only for the event that
            // says so, not on every success.
            cfg!(feature = "tracing") && self.manager.attempts(key) > 0
        };
        (
            had,
            self.asked(key, "succeed", self.gate.succeed(key), || ()),
        )
    }

    /// Forgets `key` without a success; whether the manager had an entry.
    /// A shared store forgets it too, in the background if it cannot at
    /// once.
    pub(crate) fn forget(&self, key: &ObjectKey<K>) -> bool {
        let had = self.manager.reset(key);
        if let Some(store) = &self.store {
            self.asked(key, "succeed", store.succeed(key), || ()).now();
        }
        had
    }

    /// The answers the manager gave in the gate's place, by why.
    pub(crate) fn local_answers(&self) -> LocalAnswers {
        LocalAnswers {
            fallback: self.fallbacks.get(),
            not_at_once: self.not_at_once.get(),
        }
    }

    /// The domains tracked by the outage the gate follows, if any.
    pub(crate) fn domains(&self) -> Vec<DomainStatus> {
        self.outage
            .as_deref()
            .map_or_else(Vec::new, OutageStatus::domains)
    }

    /// The outage's state, when the gate follows one: the builder's
    /// outage wrapper, or an outage-aware shared store (a fleet's).
    pub(crate) fn outage(&self) -> Option<OutageState> {
        let status = self.outage.as_deref()?;
        Some(OutageState {
            in_outage: status.in_outage(),
            parked: status.parked(),
            outages: status.outages(),
        })
    }

    fn asked<'a, T, F: FnOnce() -> T>(
        &'a self,
        key: &'a ObjectKey<K>,
        call: &'static str,
        answer: Answer<T>,
        fallback: F,
    ) -> Asked<'a, K, T, F> {
        Asked {
            gate: self,
            key,
            call,
            answer,
            fallback,
        }
    }

    fn answered<T>(&self, answer: T) -> T {
        if self.unreachable.load(Ordering::Relaxed)
            && self.unreachable.swap(false, Ordering::Relaxed)
        {
            observe::store_answers_again();
        }
        answer
    }

    fn failed<T>(
        &self,
        key: &ObjectKey<K>,
        call: &'static str,
        error: &GateError,
        fallback: impl FnOnce() -> T,
    ) -> T {
        self.fallbacks.add_one();
        let first = !self.unreachable.swap(true, Ordering::Relaxed);
        observe::fallback(key, call, &**error, first);
        fallback()
    }
}

/// The gate's answer to one call, with the manager's to give in its
/// place: awaited ([`get`](Asked::get)), or taken at once by a caller that
/// cannot wait ([`now`](Asked::now)).
pub(crate) struct Asked<'a, K: Lookup, T, F> {
    gate: &'a Decisions<K>,
    key: &'a ObjectKey<K>,
    call: &'static str,
    answer: Answer<T>,
    fallback: F,
}

impl<K, T, F> Asked<'_, K, T, F>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    F: FnOnce() -> T,
{
    /// The gate's answer, or the manager's when the gate fails.
    pub(crate) async fn get(self) -> T {
        match self.answer.get().await {
            Ok(answer) => self.gate.answered(answer),
            Err(error) => self.gate.failed(self.key, self.call, &error, self.fallback),
        }
    }

    /// The gate's answer if it has one at once, else the manager's; an
    /// answer the gate could not give at once finishes in the background,
    /// on the current tokio runtime if there is one.
    pub(crate) fn now(self) -> T
    where
        T: Send + 'static,
    {
        match self.answer.try_now() {
            Ok(Ok(answer)) => self.gate.answered(answer),
            Ok(Err(error)) => self.gate.failed(self.key, self.call, &error, self.fallback),
            Err(later) => {
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(later.get());
                }
                self.gate.not_at_once.add_one();
                observe::fallback_not_at_once(self.key, self.call);
                (self.fallback)()
            }
        }
    }
}
