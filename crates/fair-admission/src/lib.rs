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
//!   server's seats and either rejects what does not fit or queues it, with
//!   fair queuing between its queues; exempt levels bypass it all.
//! - `FairnessLayer` (feature `tower`) puts an [`Apf`] in front of any tower
//!   service and refuses overload with an error to answer as HTTP 429.
//!
//! The repository's `docs/fairness.md` explains the model and reproduces
//! Kubernetes' table of crush probabilities.
//!
//! ```
//! use fair_admission::{LevelSpec, Admit, Apf, LimitResponse};
//!
//! let mut apf = Apf::builder(2).level("workload", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
//! let level = apf.level_id("workload").unwrap();
//! let first = apf.admit(level, "alice", 1);
//! assert!(matches!(first, Admit::Dispatched(_)));
//! # Ok::<(), fair_admission::ConfigError>(())
//! ```
//!
//! ## Features
//!
//! | feature | adds |
//! |---|---|
//! | `tower` | `FairnessLayer`, the tower layer (on tokio) |
//! | `http` | `FairnessLayer::http`: 429 with `Retry-After` from the layer, seats held until the body ends |
//! | `metrics` | Kubernetes' `apiserver_flowcontrol_*` metrics through the `metrics` facade |
//! | `tracing` | an event per refused request |
//!
//! Beyond the basics: [`ApfBuilder::lending`] lets levels lend and borrow
//! seats, [`Apf::suggested`] and [`suggested_flow_schema`] are Kubernetes'
//! suggested configuration, [`WorkEstimate`] has Kubernetes' LIST and
//! mutating-request estimators, and [`Apf::retry_after`] is the adaptive
//! `Retry-After`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod apf;
mod borrowing;
mod builder;
mod dealer;
mod dump;
mod error;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "tower")]
mod layer;
#[cfg(feature = "tower")]
mod observe;
mod queue_set;
mod retry_after;
mod suggested;
mod work;

pub use apf::{Admission, Admit, Apf, LevelId, LevelStats, Rejected, Ticket};
pub use borrowing::{
    Adjustment, Allocation, AllocationClass, AllocationError, DemandIntegrator, IntegratorResults,
    LevelBorrowing, LevelLimits, SeatDemandStats, adjust_limits, allocate_concurrency,
};
pub use builder::{ApfBuilder, LevelSpec, LimitResponse};
pub use dealer::{Dealer, Hand, MAX_DECK_SIZE, MAX_HASH_BITS, crush_probability};
pub use dump::{Dump, LevelDump, QueueDump, RequestDump};
pub use error::ConfigError;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use http::{DebugService, HttpFairness, HttpFairnessLayer, SeatBody};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use layer::{BoxError, Class, Fairness, FairnessLayer, Overloaded, ResponseFuture};
pub use retry_after::DroppedRequests;
pub use suggested::{FlowMatch, RequestAttributes, SUGGESTED_SEATS, suggested_flow_schema};
pub use work::{
    EVENT_SEAT_TIME, ListRequest, OBJECTS_PER_SEAT, ObjectCount, WATCHES_PER_SEAT, WorkEstimate,
};

/// The most seats the work estimators give one request (Kubernetes' cap).
pub(crate) const MAX_SEATS_PER_REQUEST: u32 = 10;

/// The README's example, compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
