//! Per-object exponential backoff for [kube-runtime] controllers.
//!
//! kube-runtime's `error_policy` is synchronous, is not told how many times
//! an object has failed, and never hears about successes; its scheduler also
//! lets a watch event cut an error requeue short. [`ObjectBackoff`] keeps one
//! [`keyed_backoff::Backoff`] entry per object and plugs into
//! [`Controller::run`](kube::runtime::Controller::run) with two calls:
//!
//! - [`ObjectBackoff::error_policy`] requeues a failed object after its next
//!   backoff (doubling up to the cap), and refuses to count a failure that
//!   comes early (a watch event during backoff) as a new one: such a run is
//!   requeued at the wait that was left.
//! - [`ObjectBackoff::reconciler`] wraps the reconcile function: a success
//!   resets the object's backoff; a panic fails only its own object (it
//!   becomes a [`ReconcileError`] that [`is_panic`](ReconcileError::is_panic), backed off like an error); and
//!   (opt-in, [`skip_while_in_backoff`](ObjectBackoffBuilder::skip_while_in_backoff))
//!   a run triggered while the object is still in backoff skips the body and
//!   requeues at the wait left.
//!
//! An operator that writes its own error policy (to log, count, or wait for
//! a change on some errors) calls [`ObjectBackoff::on_error`] from it;
//! [`ReconcileError`] shows one, and the crate's `widget` example is a
//! whole operator for a custom resource built that way.
//!
//! # Whose backoff
//!
//! An object's backoff belongs to its uid ([`ObjectKey`]), as the kubelet's
//! belongs to the pod's uid: an object deleted and created again under the
//! same name starts at the initial delay. The old uid's entry expires (see
//! [`expire_after`](ObjectBackoffBuilder::expire_after)) and is removed by
//! GC ([`ObjectBackoff::spawn_gc_task`]), or at once with
//! [`ObjectBackoff::reset`].
//!
//! # Across restarts and replicas
//!
//! [`shared`](ObjectBackoffBuilder::shared) keeps every object's backoff in
//! a store the controller's replicas share (the Redis store of
//! `keyed-backoff-redis`, or any [`Gate`] over string keys), so that a
//! restarted controller or a new leader finds each broken object where the
//! last one left it; while the store is unreachable, the builder's own
//! in-process manager answers in its place.
//!
//! # Presets
//!
//! | preset | per object | whole controller | source |
//! |---|---|---|---|
//! | [`kubelet`](ObjectBackoff::kubelet) | 10 s doubling to 300 s, expires after 600 s | none | kubelet CrashLoopBackOff |
//! | [`workqueue`](ObjectBackoff::workqueue) | 5 ms doubling to 1000 s | token bucket 10/s, burst 100 | client-go `DefaultTypedControllerRateLimiter` |
//! | [`controller_runtime`](ObjectBackoff::controller_runtime) | 5 ms doubling to 1000 s | none | controller-runtime's default with its priority queue |
//!
//! Each preset turns on outage-aware backoff (when one dependency every
//! object needs is down) in one line on its builder:
//! `ObjectBackoffBuilder::workqueue().outage(OutageSettings::default())`;
//! see [`outage`](ObjectBackoffBuilder::outage).
//!
//! # Observability
//!
//! [`stats`](ObjectBackoff::stats) are always kept. With the
//! `prometheus-client` feature, `ObjectBackoff::register` exports
//! them to a `prometheus_client` registry under controller-runtime's names
//! (and the outage's state, with [`outage`](ObjectBackoffBuilder::outage));
//! with the `metrics` feature, an outage's beginning, end and release are
//! reported through the `metrics` facade as they happen; with the `tracing`
//! feature, failures, refusals, skips, resets and panics
//! are `tracing` events carrying the object. Without the features neither
//! costs anything.
//!
//! Time is [`TokioClock`], so tokio's paused time drives the backoff in tests
//! exactly as it drives the controller's scheduler.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use keyed_backoff_kube::ObjectBackoff;
//! use kube::runtime::controller::{Action, Controller};
//! use kube::runtime::watcher;
//! use kube::{Api, Client};
//! use futures::StreamExt;
//!
//! #[derive(Debug)]
//! struct Error;
//! impl std::fmt::Display for Error {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("reconcile failed")
//!     }
//! }
//! impl std::error::Error for Error {}
//!
//! async fn reconcile(cm: Arc<ConfigMap>, _ctx: Arc<()>) -> Result<Action, Error> {
//!     # let _ = cm;
//!     Ok(Action::await_change())
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::try_default().await?;
//! let backoff = ObjectBackoff::<ConfigMap>::kubelet();
//! Controller::new(Api::<ConfigMap>::all(client), watcher::Config::default())
//!     .run(backoff.reconciler(reconcile), backoff.error_policy(), Arc::new(()))
//!     .for_each(|_| async {})
//!     .await;
//! # Ok(())
//! # }
//! ```
//!
//! [kube-runtime]: https://docs.rs/kube-runtime

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
mod builder;
mod decisions;
mod domain;
#[cfg(feature = "fair")]
mod fair;
mod key;
mod manager;
mod observe;
mod presets;
#[cfg(feature = "prometheus-client")]
mod prometheus;
mod rate_limit;
mod reconcile;
mod shared;
mod stats;

pub use backoff::ObjectBackoff;
pub use builder::ObjectBackoffBuilder;
#[cfg(feature = "fair")]
#[cfg_attr(docsrs, doc(cfg(feature = "fair")))]
pub use fair::{FairReconciles, FairReconcilesBuilder, FairStats, FlowWait, Priority};
#[cfg(feature = "fair")]
#[cfg_attr(docsrs, doc(cfg(feature = "fair")))]
pub use fair_admission;
pub use key::ObjectKey;
pub use keyed_backoff;
pub use keyed_backoff_outage;
pub use keyed_backoff_outage::{DomainStatus, OutageSettings};
pub use manager::ObjectManager;
// The core's types in this crate's signatures, named from here.
pub use keyed_backoff::{
    ConfigError, Gate, GcGuard, InBackoff, Level, SpawnError, clock::TokioClock,
};
pub use reconcile::ReconcileError;
pub use stats::Stats;

/// The README's examples, compiled as doc tests (its fair reconciles need
/// the `fair` feature).
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "fair"))]
pub struct ReadmeDoctests;
