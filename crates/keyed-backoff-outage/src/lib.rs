//! Outage awareness: when many keys fail at once because one dependency
//! is down, back off once for all of them, and recover in seconds once it
//! is back. A wrapper, [`OutageAware`], over any keyed backoff that
//! implements the core's [`Gate`](keyed_backoff::Gate) contract (the
//! in-process [`Backoff`](keyed_backoff::Backoff), a store shared by a
//! fleet); nothing of it lives in the backoff under it, and this crate uses
//! only the core's public API.
//!
//! Per-key backoff assumes keys fail on their own. When the API server, a
//! webhook or a database is down, every key fails together: each ladder
//! climbs toward its cap in lockstep, and when the dependency returns each
//! key waits out its own long backoff, or all of them retry in the same
//! instant. The wrapper tells the two apart and handles the shared case in
//! three parts:
//!
//! - **Detection** (`detector`): many keys newly failing within the
//!   detection window while (almost) nothing succeeds is an outage;
//!   successes in a row end it.
//! - **Parking** (`ladder`): during an outage no key's own ladder climbs;
//!   every key waits on one shared ladder, at a slot of its own in each
//!   step, and only a few keys per step may try the dependency.
//! - **Release** (`release`): when the outage ends, parked keys are let go
//!   one at a time at a bounded rate, each back at its own pre-outage
//!   level.
//!
//! Each part is a pure rule over times on one line (durations from any
//! fixed origin): no clock, lock or map. Where their state and the parked
//! keys live is the wrapper's second parameter, an [`OutageState`]: in
//! this process ([`InProcess`], the default), or shared by a fleet through
//! any [`OutageStore`] ([`Shared`]; the Redis crate implements the store
//! over Redis). [`OutageAware`] asks it the same questions at each call of
//! the contract, whichever it is.
//! The repository's `docs/outage.md` has the whole rule, what it can
//! mistake for an outage, its knobs and its measurements.
//!
//! ```
//! use keyed_backoff::{Backoff, Gate};
//! use keyed_backoff_outage::{OutageAware, OutageSettings};
//! use std::time::Duration;
//!
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
//! # }
//! let backoff = Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?;
//! let gate = OutageAware::new(backoff, OutageSettings::default())?;
//! // Outside an outage the wrapper answers as the backoff under it.
//! let level = block_on(gate.fail(&"payments-api".to_string()))?.unwrap();
//! assert_eq!(level.backoff, Duration::from_secs(10));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `tracing` | INFO events (target `keyed_backoff_outage`) when an outage begins, ends, and when its release is over; without it nothing is compiled in |
//! | `metrics` | outage counters, gauge and histogram through the `metrics` facade (`keyed_backoff_outages_total`, ...); without it nothing is compiled in |
//! | `serde` | `Serialize` / `Deserialize` for [`SharedOutage`] and [`ParkedKey`], for a store that keeps them as text |
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod aware;
mod detector;
mod domains;
mod fleet;
mod holder;
mod ladder;
mod nanos;
mod observe;
mod one;
mod outages;
mod parked;
mod release;
mod settings;
mod shared;
mod state;
mod status;
mod store;
mod watch;

pub use aware::OutageAware;
pub use domains::DomainStatus;
pub use holder::{InProcess, OutageState};
pub use settings::OutageSettings;
pub use shared::Shared;
pub use status::OutageStatus;
pub use store::{Loaded, OutageStore, ParkedKey, SharedOutage, SharedPhase, Stored};

pub(crate) use state::Event;
