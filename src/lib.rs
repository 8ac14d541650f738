//! # keyed-backoff
//!
//! Per-key exponential backoff for controllers, with exactly the semantics of
//! Kubernetes client-go's `util/flowcontrol` `Backoff` (the manager behind
//! the kubelet's CrashLoopBackOff and image-pull backoff), on a concurrent
//! map.
//!
//! ## The keyed manager
//!
//! A [`Backoff`] maps stable keys (a pod's container, `podUID_image`, a URL
//! host, an object reference) to entries. [`Backoff::next`] records a
//! failure and returns the new backoff: `initial`, then doubling, capped at
//! `max`. [`Backoff::is_in_backoff_since`] and
//! [`Backoff::is_in_backoff_since_update`] ask whether a key must still wait.
//! An entry left alone longer than the expiry window (`2·max` by default, any
//! function if you like) is forgotten: the next failure starts over, and
//! [`Backoff::gc`] reclaims it.
//!
//! ```
//! use keyed_backoff::Backoff;
//! use keyed_backoff::clock::{Clock, MockClock};
//! use std::time::Duration;
//!
//! let clock = MockClock::new();
//! let restarts = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
//!     .clock(clock.clone())
//!     .expire_after(Duration::from_secs(600)) // the kubelet's reset window
//!     .build()?;
//!
//! let key = "pod-123_default_uid_app_1a2b3c4d";
//! let finished = clock.now();
//! if !restarts.is_in_backoff_since(key, finished) {
//!     let wait = restarts.next(key, finished); // 10 s, then 20 s, 40 s … 300 s
//!     assert_eq!(wait, Duration::from_secs(10));
//! }
//! assert!(restarts.is_in_backoff_since(key, finished));
//! # Ok::<(), keyed_backoff::ConfigError>(())
//! ```
//!
//! ## Clocks
//!
//! The manager reads time through the [`clock::Clock`] trait: the OS
//! monotonic clock by default, [`clock::QuantaClock`] for cheaper reads,
//! [`clock::SystemClock`] for wall-clock event times, and
//! [`clock::MockClock`] for tests and simulations.
//!
//! ## Semantics
//!
//! Every behaviour of client-go's manager is reproduced, including the
//! surprising ones (an expired entry's stale `get`, strict comparisons,
//! `initial > max`). The crate's tests replay operation traces recorded from
//! client-go itself. `docs/semantics.md` lists each behaviour side by side
//! with client-go and says where this crate saturates instead of wrapping.

pub mod budget;
pub mod clock;
mod error;
mod keyed;
pub mod retry;
pub mod strategy;

pub use error::ConfigError;
#[cfg(feature = "tokio")]
pub use keyed::GcTask;
pub use keyed::{
    Backoff, BackoffBuilder, DEFAULT_SHARDS, DefaultHashBuilder, EntryView, GcHandle, InBackoff,
    MAX_ATTEMPTS, MAX_BACKOFF, Snapshot, SnapshotEntry, Stats,
};

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
