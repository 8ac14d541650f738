//! Outage awareness: when many keys fail at once because one dependency
//! is down, back off once for all of them, and recover in seconds once it
//! is back. A wrapper, [`OutageAware`], over any keyed backoff that
//! implements the [`Gate`](crate::Gate) contract; nothing of it lives in
//! the backoff under it.
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
//! fixed origin): no clock, lock or map. The `watch` holds their state and
//! the parked keys; [`OutageAware`] asks it at each call of the contract.
//! `docs/outage.md` has the whole rule, what it can mistake for an outage,
//! and its knobs.

mod aware;
mod detector;
pub(crate) mod fleet;
mod ladder;
mod parked;
mod release;
mod settings;
mod state;
mod watch;

pub use aware::OutageAware;
pub use settings::OutageSettings;

pub(crate) use state::Event;
