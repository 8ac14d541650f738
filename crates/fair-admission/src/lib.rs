//! # fair-admission
//!
//! Fair admission for servers under overload: Kubernetes' API Priority and
//! Fairness (APF) as a library, with fair queuing, shuffle sharding,
//! priority levels and a tower layer that refuses overload with an error to
//! answer as HTTP 429 with `Retry-After`.
//!
//! A server that rejects overload with 429 expects its clients to back off;
//! APF decides *whom* to reject so that one flow offering far more than its
//! share (an elephant) cannot starve the others (mice):
//!
//! - [`Dealer`] deals each flow a hand of queues by shuffle sharding, from
//!   the hash of its flow key, exactly as Kubernetes does;
//!   [`crush_probability`] is the exact chance that elephants cover all of a
//!   mouse's queues.
//! - [`Apf`] is a server's priority levels: each holds a share of the
//!   server's seats, lends and borrows them, and either rejects what does
//!   not fit or queues it, with Kubernetes' fair queuing between its queues
//!   (`queueset.go`, rule for rule); exempt levels admit everything. It is
//!   a state machine on the caller's clock, and every call returns the
//!   requests it dispatched.
//! - `FairnessLayer` (feature `tower`) puts an [`Apf`] in front of any tower
//!   service and refuses overload with an error to answer as HTTP 429.
//!
//! The repository's `docs/fairness.md` explains the model, what differs
//! from Kubernetes, and reproduces Kubernetes' table of crush
//! probabilities. The crate's `tests/kubernetes` are Kubernetes' own APF
//! tests, ported.
//!
//! ```
//! use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};
//! use std::time::Duration;
//!
//! let queuing = LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 };
//! let mut apf = Apf::builder(1).level("workload", LevelSpec::limited(1, queuing)).build()?;
//! let level = apf.level_id("workload").unwrap();
//! let Admit::Dispatched(first) = apf.admit(level, "alice", 1).admit else { unreachable!() };
//! let Admit::Queued(second) = apf.admit(level, "bob", 1).admit else { unreachable!() };
//! apf.advance_to(Duration::from_millis(40)); // the caller's clock
//! assert_eq!(apf.complete(first), Some(vec![second]));
//! # Ok::<(), fair_admission::ConfigError>(())
//! ```
//!
//! ## Features
//!
//! | feature | adds |
//! |---|---|
//! | `tower` | `FairnessLayer`, the tower layer (on tokio) |
//! | `http` | `FairnessLayer::http`: 429 with `Retry-After` from the layer, seats held until the body ends; `FairnessLayer::debug_service`, the dump at Kubernetes' debug paths |
//! | `metrics` | Kubernetes' `apiserver_flowcontrol_*` metrics through the `metrics` facade |
//! | `tracing` | a DEBUG event per refused request |
//!
//! Beyond the basics: [`LevelSpec`] declares a level's shares, limit
//! response and lending; [`Apf::suggested`] and [`suggested_flow_schema`]
//! are Kubernetes' suggested configuration; [`WorkEstimator`] sizes a
//! request in seats as Kubernetes' LIST and mutating-request estimators do;
//! [`Apf::admit_hashed`] takes a flow hash computed by the caller;
//! [`Apf::dump`] lists levels, queues and requests with Kubernetes' columns;
//! [`Apf::retry_after`] is the adaptive `Retry-After`.
//!
//! The pieces of Kubernetes' arithmetic the ported tests reach on their
//! own (the division of seats between levels, the demand integrator, the
//! dropped-requests rule behind `Retry-After`) are public but hidden from
//! these docs, and outside the semver promise.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod apf;
mod borrowing;
mod builder;
mod dealer;
mod dump;
mod error;
#[cfg(feature = "http")]
mod http;
mod kubernetes;
#[cfg(feature = "tower")]
mod layer;
mod name;
#[cfg(feature = "tower")]
mod observe;
mod queue_set;
mod retry_after;
mod spec;
mod ticket;

pub use apf::{Apf, LevelId, LevelStats};
// Kubernetes' internals, for its ported tests: not part of the API.
#[doc(hidden)]
pub use borrowing::{
    Adjustment, Allocation, AllocationClass, AllocationError, DemandIntegrator, IntegratorResults,
    LevelBorrowing, LevelLimits, SeatDemandStats, adjust_limits, allocate_concurrency,
};
pub use builder::ApfBuilder;
pub use dealer::{Dealer, Hand, MAX_DECK_SIZE, MAX_HASH_BITS, crush_probability};
pub use dump::{Dump, LevelDump, QueueDump, RequestDump};
pub use error::ConfigError;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use http::{DebugService, HttpFairness, HttpFairnessLayer, HttpResponseFuture, SeatBody};
pub use kubernetes::{
    FlowMatch, ObjectStats, RequestAttributes, RequestInfo, SUGGESTED_SEATS, WorkEstimate,
    WorkEstimator, suggested_flow_schema,
};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use layer::{BoxError, Class, Fairness, FairnessLayer, Overloaded, ResponseFuture};
pub use name::Name;
#[doc(hidden)]
pub use retry_after::DroppedRequests;
pub use spec::{LevelSpec, LimitResponse};
pub use ticket::{Admission, Admit, Rejected, Ticket};

/// The README's example, compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
