//! Fair reconciles: a controller's reconciles take a bounded number of
//! seats through fair queues, so that one busy namespace cannot starve the
//! others.

mod builder;
mod calls;
mod observe;
mod seats;
mod stats;
mod wrap;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::channel::oneshot;

use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::reflector::{Lookup, Store};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::key::ObjectKey;
use calls::Calls;
use seats::{Answer, Call, Seats};

pub use builder::FairReconcilesBuilder;
pub use stats::{FairStats, FlowWait, Priority};

/// The flow function: the name of the flow an object's reconciles belong to.
type FlowFn<K> = Arc<dyn Fn(&K) -> String + Send + Sync>;

/// A controller's reconciles through fair queues: at most
/// [`seats`](FairReconcilesBuilder::seats) run at once, and a seat that
/// frees goes to the next reconcile by fair queuing between *flows* (an
/// object's namespace by default, or any name the
/// [`flow`](FairReconcilesBuilder::flow) function gives), with shuffle
/// sharding and queue lengths as `fair-admission`'s [`Apf`](fair_admission::Apf)
/// has them. A first reconcile or one after a change of the object's
/// generation ([`Priority::Changed`]) goes before resyncs and requeues
/// ([`Priority::Resync`]).
///
/// [`reconciler`](Self::reconciler) wraps a reconcile function as
/// [`ObjectBackoff::reconciler`](crate::ObjectBackoff::reconciler) does, and
/// takes a seat before it runs. A reconcile that would wait returns at once
/// (requeued a minute later, in case the call for it is lost) and its object waits in the
/// fair queues: the controller holds no reconcile that waits, so its cost does not
/// grow with the number waiting. When the fair queues reach the object, they
/// ask the controller for its reconcile (through
/// [`controller`](Self::controller), which must wire the controller), and
/// that reconcile waits for the next seat that frees; the next reconciles,
/// and a few per seat ahead of their turn, are asked for while the current
/// ones run, so that the controller holds a bounded number of reconciles.
///
/// - an object in backoff (with
///   [`skip_while_in_backoff`](crate::ObjectBackoffBuilder::skip_while_in_backoff),
///   or parked by an outage) takes no seat and does not queue;
/// - waiting is not a run: the object's backoff hears only of the run
///   itself, which asks whether it may go (its backoff, an outage) when it
///   has its seat;
/// - an object deleted (or replaced under its name) while it waits leaves
///   its queue without running, within a second while any reconcile
///   starts or ends;
/// - a reconcile that finds no room to wait (its flow's backlog is as long
///   as its hand of queues could hold, or its priority's queues are full)
///   is not lost: it is requeued after the level's `Retry-After` (1 s,
///   doubling to 32 s while refusals go on), counted in
///   [`FairStats::requeued_full`].
///
/// The controller's own concurrency must be left unbounded (kube-runtime's
/// default), so that every due object reaches the fair queues and the fair queues, not
/// the controller's first-in first-out order, decides which runs. The
/// store given to the builder must be the controller's
/// ([`Controller::store`](kube::runtime::Controller::store)): it says
/// whether a waiting object still exists. One `FairReconciles` serves one controller.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::{FairReconciles, ObjectBackoff, Priority};
/// use kube::runtime::controller::Action;
/// use kube::runtime::{reflector, watcher};
/// use std::sync::Arc;
///
/// async fn reconcile(_: Arc<ConfigMap>, _: Arc<()>) -> Result<Action, std::io::Error> {
///     Ok(Action::await_change())
/// }
///
/// // The controller's store (here one filled by hand).
/// let (store, mut writer) = reflector::store::<ConfigMap>();
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("app".into());
/// cm.metadata.namespace = Some("team-a".into());
/// writer.apply_watcher_event(&watcher::Event::Apply(cm.clone()));
///
/// let fair = FairReconciles::builder(store).seats(4).build()?;
/// let backoff = ObjectBackoff::<ConfigMap>::kubelet();
/// let mut wrapped = fair.reconciler(&backoff, reconcile);
/// wrapped(Arc::new(cm.clone()), Arc::new(())).await?;
/// let stats = fair.stats();
/// assert_eq!((stats.seats, stats.seats_in_use), (4, 0));
/// assert_eq!(stats.granted(Priority::Changed), 1); // its first reconcile
/// wrapped(Arc::new(cm), Arc::new(())).await?;
/// assert_eq!(fair.stats().granted(Priority::Resync), 1); // nothing changed
/// # Ok(())
/// # }
/// ```
pub struct FairReconciles<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    shared: Arc<Shared<K>>,
}

struct Shared<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    state: Mutex<State<K>>,
    store: Store<K>,
    flow: FlowFn<K>,
}

struct State<K: Resource + 'static>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    seats: Seats<ObjectKey<K>>,
    calls: Calls<K>,
    /// The version each object last started a run at.
    seen: HashMap<ObjectKey<K>, Version>,
    last_sweep: Instant,
    sweeps: u32,
}

/// What a change of an object is told by: its generation, or its resource
/// version for kinds without one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Version {
    Generation(i64),
    Resource(Option<String>),
}

impl<K: Resource + 'static> Clone for FairReconciles<K>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Resource + 'static> std::fmt::Debug for FairReconciles<K>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stats = self.shared.lock().seats.stats;
        f.debug_struct("FairReconciles")
            .field("stats", &stats)
            .finish_non_exhaustive()
    }
}

impl<K: Resource + 'static> Shared<K>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K> FairReconciles<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// How often, at most, waiting reconciles are checked against the
    /// store for objects deleted since they began to wait.
    pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

    /// Sweeps between two prunings of the versions seen of objects gone.
    const SWEEPS_PER_PRUNE: u32 = 10;

    /// A builder for the controller whose store is `store`: 8 seats, the
    /// namespace as the flow, 64 queues of 1,000 with hands of 8.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::FairReconciles;
    /// use kube::runtime::reflector;
    /// let (store, _writer) = reflector::store::<ConfigMap>();
    /// let fair = FairReconciles::builder(store).build().unwrap();
    /// assert_eq!(fair.stats().seats, 8);
    /// ```
    pub fn builder(store: Store<K>) -> FairReconcilesBuilder<K> {
        FairReconcilesBuilder::new(store)
    }

    fn new(store: Store<K>, flow: FlowFn<K>, seats: Seats<ObjectKey<K>>) -> Self {
        let state = State {
            seats,
            calls: Calls::new(),
            seen: HashMap::new(),
            last_sweep: Instant::now(),
            sweeps: 0,
        };
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                store,
                flow,
            }),
        }
    }

    /// Whether the object `key` names is still in the store, under its
    /// uid.
    fn alive(store: &Store<K>, key: &ObjectKey<K>) -> bool {
        store
            .get(key.reference())
            .is_some_and(|obj| obj.meta().uid.as_deref() == key.uid())
    }

    /// Runs `f` on the state, after a sweep if one is due, then asks for
    /// the reconciles of the objects called; a call of `own`, whose
    /// reconcile is here, is returned instead.
    fn with<T>(
        &self,
        own: Option<&ObjectKey<K>>,
        f: impl FnOnce(&mut State<K>, &dyn Fn(&ObjectKey<K>) -> bool) -> T,
    ) -> (T, Option<Call>) {
        let store = &self.shared.store;
        let alive = |key: &ObjectKey<K>| Self::alive(store, key);
        let mut state = self.shared.lock();
        if state.last_sweep.elapsed() >= Self::SWEEP_INTERVAL {
            state.last_sweep = Instant::now();
            state.seats.sweep(alive);
            state.sweeps += 1;
            if state.sweeps.is_multiple_of(Self::SWEEPS_PER_PRUNE) {
                state.seen.retain(|key, _| alive(key));
            }
        }
        let out = f(&mut state, &alive);
        let mut mine = None;
        for (key, call) in state.seats.drain() {
            if own == Some(&key) {
                mine = Some(call);
            } else {
                state.calls.call(&key, call);
            }
        }
        (out, mine)
    }

    /// Wires `controller` to the fair queues: a seat given to an object whose
    /// reconcile waits for it asks the controller to run that reconcile at
    /// once (kube-runtime's `reconcile_on`). A waiting reconcile returns
    /// at once, its object keeping its place in the fair queues, so the
    /// controller holds no reconcile that waits. Wire the controller whose
    /// store the builder was given, once, before [`Controller::run`].
    ///
    /// Fair queues whose controller is not wired still serve it, more slowly:
    /// a reconcile that leaves its object waiting asks again every second,
    /// and an object whose turn came keeps it for a few seconds.
    ///
    /// ```no_run
    /// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::FairReconciles;
    /// use kube::Api;
    /// use kube::runtime::{Controller, watcher};
    /// let controller = Controller::new(Api::<ConfigMap>::all(client), watcher::Config::default());
    /// let fair = FairReconciles::builder(controller.store()).build()?;
    /// let controller = fair.controller(controller);
    /// # let _ = controller;
    /// # Ok(())
    /// # }
    /// ```
    pub fn controller(&self, controller: Controller<K>) -> Controller<K>
    where
        K: DeserializeOwned + std::fmt::Debug,
    {
        match self.shared.lock().calls.requests() {
            Some(requests) => controller.reconcile_on(requests),
            None => controller,
        }
    }

    /// The flow of `obj`: the flow function's answer, or `""` if it
    /// panicked (counted).
    fn flow_of(&self, obj: &K) -> Arc<str> {
        let flow = &self.shared.flow;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| flow(obj))) {
            Ok(name) => name.into(),
            Err(_) => {
                self.shared.lock().seats.stats.flow_panics += 1;
                "".into()
            }
        }
    }

    /// The run of `key` in `flow` at `version` arrives: it waits for a
    /// seat if its object's turn has come (at once, if the object had
    /// none), or it returns with the wait before it asks again (its object
    /// keeps its place in the queues, or there was no room for it).
    async fn arrive(&self, key: ObjectKey<K>, flow: Arc<str>, version: Version) -> Granted<K> {
        let (here, rx) = oneshot::channel();
        let (step, mine) = self.with(Some(&key), |state, alive| {
            let priority = match state.seen.get(&key) {
                Some(seen) if *seen == version => Priority::Resync,
                _ => Priority::Changed,
            };
            if let Some((id, waiting_at, called)) = state.seats.place(&key) {
                if called {
                    state.seats.attach(id, here, alive);
                    return Ok(id);
                }
                // A change moves a waiting resync ahead; otherwise the
                // object keeps its place.
                if waiting_at == priority || priority == Priority::Resync {
                    return Err(state.calls.retry());
                }
                state.seats.cancel(id, alive);
            }
            let id = state.seats.enqueue(key.clone(), flow, priority, alive)?;
            match state.seats.place(&key) {
                Some((_, _, true)) => {
                    state.seats.attach(id, here, alive);
                    Ok(id)
                }
                _ => Err(state.calls.retry()),
            }
        });
        let id = match (step, mine) {
            (Err(_), Some(Call::After(wait))) | (Err(wait), _) => return Granted::Wait(wait),
            (Ok(id), _) => id,
        };
        let mut waiting = Waiting {
            fair: self.clone(),
            id,
            rx,
            done: false,
        };
        let answer = (&mut waiting.rx).await;
        waiting.done = true;
        match answer {
            Ok(Answer::Seat(ticket)) => {
                self.shared.lock().seen.insert(key, version);
                Granted::Seat(Seat {
                    fair: self.clone(),
                    ticket,
                })
            }
            Ok(Answer::Gone) => Granted::Gone,
            Ok(Answer::Full(wait)) => Granted::Wait(wait),
            // Never sent: not lost, tried again shortly.
            Err(_) => Granted::Wait(Duration::from_secs(1)),
        }
    }

    /// The place of `key`, if it waits, goes to the next (its run was
    /// skipped: it is in backoff, and asks again when that ends).
    fn forgo(&self, key: &ObjectKey<K>) {
        self.with(None, |state, alive| {
            if let Some((id, ..)) = state.seats.place(key) {
                state.seats.cancel(id, alive);
            }
        });
    }

    /// The fair queues' counts now.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::{FairReconciles, Priority};
    /// use kube::runtime::reflector;
    /// let (store, _writer) = reflector::store::<ConfigMap>();
    /// let fair = FairReconciles::builder(store).seats(2).build().unwrap();
    /// let stats = fair.stats();
    /// assert_eq!((stats.seats, stats.seats_in_use, stats.waiting(Priority::Changed)), (2, 0, 0));
    /// ```
    pub fn stats(&self) -> FairStats {
        self.shared.lock().seats.stats
    }

    /// For each flow with reconciles waiting (at each priority), how long
    /// its oldest has waited, longest first. It walks every waiting
    /// reconcile: for a dump or a debug endpoint, not for every reconcile.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::FairReconciles;
    /// use kube::runtime::reflector;
    /// let (store, _writer) = reflector::store::<ConfigMap>();
    /// let fair = FairReconciles::builder(store).build().unwrap();
    /// assert!(fair.longest_waits().is_empty());
    /// ```
    pub fn longest_waits(&self) -> Vec<FlowWait> {
        self.shared.lock().seats.longest_waits()
    }

    /// The fair queues' levels (`changed`, `resync`), queues and requests
    /// with Kubernetes' columns: see [`fair_admission::Dump`]. A level's
    /// requests are the reconciles dispatched from its queues or waiting in
    /// them; those still in their flow's backlog are not listed.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use keyed_backoff_kube::FairReconciles;
    /// use kube::runtime::reflector;
    /// let (store, _writer) = reflector::store::<ConfigMap>();
    /// let fair = FairReconciles::builder(store).build().unwrap();
    /// let dump = fair.dump();
    /// assert_eq!(dump.levels[0].name, "changed");
    /// assert_eq!(dump.levels[1].name, "resync");
    /// ```
    pub fn dump(&self) -> fair_admission::Dump {
        self.shared.lock().seats.dump()
    }
}

impl Version {
    fn of<K: Resource>(obj: &K) -> Self {
        match obj.meta().generation {
            Some(generation) => Version::Generation(generation),
            None => Version::Resource(obj.resource_version().map(|v| v.into_owned())),
        }
    }
}

/// What a run that arrives at the fair queues is told.
enum Granted<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    /// Run now.
    Seat(Seat<K>),
    /// The object is gone: do not run.
    Gone,
    /// Not now: ask again after this wait (the object keeps its place,
    /// or there was no room for it).
    Wait(Duration),
}

/// A run waiting for its answer; dropped unanswered, it stops waiting.
struct Waiting<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fair: FairReconciles<K>,
    id: u64,
    rx: oneshot::Receiver<Answer>,
    done: bool,
}

impl<K> Drop for Waiting<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // A seat given while the run was being dropped goes back at once.
        match self.rx.try_recv() {
            Ok(Some(Answer::Seat(ticket))) => self.fair.finish(ticket),
            _ => {
                let id = self.id;
                self.fair
                    .with(None, |state, alive| state.seats.cancel(id, alive));
            }
        }
    }
}

/// A seat taken: dropped, it goes to the next reconcile.
struct Seat<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fair: FairReconciles<K>,
    ticket: fair_admission::Ticket,
}

impl<K> Drop for Seat<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fn drop(&mut self) {
        self.fair.finish(self.ticket);
    }
}

impl<K> FairReconciles<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
{
    fn finish(&self, ticket: fair_admission::Ticket) {
        self.with(None, |state, alive| state.seats.finish(ticket, alive));
    }
}
