//! # keyed-backoff
//!
//! Per-key exponential backoff for controllers, with exactly the semantics of
//! Kubernetes client-go's `util/flowcontrol` `Backoff` (the manager behind
//! the kubelet's CrashLoopBackOff and image-pull backoff), on a concurrent
//! map.
//!
//! ## Start here
//!
//! A [`Backoff`] maps stable keys (a pod's container, `podUID_image`, a URL
//! host, an object reference) to entries. [`Backoff::next`] records a
//! failure and returns the new backoff: `initial`, then doubling, capped at
//! `max`. [`Backoff::is_in_backoff_since`] and
//! [`Backoff::is_in_backoff_since_update`] ask whether a key must still wait.
//! An entry left alone longer than the expiry window (`2·max` by default, or
//! a fixed window such as the kubelet's 600 s) is forgotten: the next failure
//! starts over, and [`Backoff::gc`] reclaims it. Name the key type once
//! (`Backoff::<String>`): methods take its borrowed form (`&str`).
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
//! ## Choosing a clock
//!
//! The manager reads time through the [`clock::Clock`] trait, chosen with
//! [`BackoffBuilder::clock`] (before a custom expiry, which is written for
//! the clock's instant type; `build` refuses the other order):
//!
//! - [`clock::StdClock`] (the default): `std::time::Instant`, monotonic.
//! - [`clock::QuantaClock`]: cheaper reads where the CPU's TSC is reliable.
//! - [`clock::SystemClock`]: wall-clock event times (a container's finish
//!   time as recorded by a runtime).
//! - [`clock::MockClock`]: tests and simulations; moves only when told.
//! - `clock::TokioClock` (feature `tokio`): tokio's instants, so tokio's
//!   paused time drives the manager in async tests.
//!
//! [`Backoff::try_next_now`] and [`Backoff::next_now`] read the manager's
//! own clock, for callers with no event time (a controller's error policy).
//!
//! ## The gate: one atomic decision per failure
//!
//! Controllers requeue on watch events as well as on errors. With
//! client-go's check-then-`Next`, an early requeue can count as a new
//! failure. [`Backoff::try_next`] decides and advances under the key's lock:
//! it refuses with [`InBackoff`] (and the remaining wait) while the key is in
//! backoff, so the failure count grows once per window however often the
//! object is requeued. [`Backoff::attempts`] and [`Backoff::remaining`]
//! report where a key stands.
//!
//! ## Garbage collection in production
//!
//! Entries of keys that never fail again (deleted objects) stay until
//! collected. Run [`Backoff::gc`] on a schedule: [`Backoff::spawn_gc`] (a
//! thread) or `Backoff::spawn_gc_task` (tokio, feature `tokio`), both on an
//! `Arc<Backoff>`. They return a guard: **dropping the guard stops GC**, so
//! keep it beside the manager or call `detach()`. Without a task,
//! [`BackoffBuilder::amortized_gc`] sweeps on every n-th `next`.
//! [`Backoff::snapshot`] and [`Backoff::restore`] carry state across
//! restarts; [`Backoff::stats`] and [`Backoff::dump`] serve debug endpoints.
//!
//! ## One contract for integrations, and layers over it
//!
//! [`Gate`] is what an integration asks of a keyed backoff: the wait left
//! for a key, a failure, a success, a floor (`Retry-After`). [`Backoff`]
//! implements it at no cost (its futures are ready at once); the contract is
//! asynchronous and fallible so that a store shared by a fleet can
//! implement it over the network. The
//! tower layer and the kube crate take a gate, and optional behaviour wraps
//! one instead of living in the manager.
//!
//! ## When one dependency is down: outage awareness
//!
//! Per-key backoff assumes keys fail on their own. When the API server or a
//! webhook is down, every key fails at once, each ladder climbs to its cap in
//! lockstep, and recovery waits for the cap or comes as one herd. The
//! companion crate `keyed-backoff-outage` wraps any gate and tells a shared
//! outage from keys failing on their own: during one, no key climbs its own
//! ladder, every key waits on one short shared ladder and only a few probe;
//! when successes return, the parked keys are let go at a bounded rate,
//! each at its own level from before the outage. It is a [`Gate`] over a
//! [`Gate`]: nothing of it lives in this crate.
//!
//! ## Beyond the keyed manager
//!
//! - [`strategy`]: the delay formulas users compare (constant, linear,
//!   exponential, AWS full / equal / decorrelated jitter, client-go's,
//!   apimachinery's `wait.Backoff`, or a formula of your own), formulas that `strategy::Strategy` validates into `Duration`
//!   iterators (with a seed and an attempt limit); any of them
//!   can replace client-go's strategy in the keyed manager
//!   ([`Backoff::with_strategy`]).
//! - [`retry`]: blocking and async retry loops with max attempts, max
//!   elapsed time on any clock, permanent errors and `Retry-After`.
//! - [`budget`]: retry budgets (gRPC's token bucket, a TPS budget, the SRE
//!   book's adaptive throttling), which bound the load retries add where
//!   backoff alone cannot.
//!
//! ## Features and MSRV
//!
//! | feature | adds |
//! |---|---|
//! | `tokio` | `TokioClock`, `Retry::run_async`, `Backoff::spawn_gc_task`, `Backoff::until_ready` and `until_ready_then_next` |
//! | `serde` | `Serialize` / `Deserialize` for [`Snapshot`] |
//! | `tracing` | events (target `keyed_backoff`) for GC sweeps (DEBUG) and for panics of the expiry function that a sweeper contained (ERROR); without it nothing is compiled in |
//!
//! Companion crates, each with its own version: `keyed-backoff-outage`
//! (outage awareness over any gate), `keyed-backoff-redis` (one
//! backoff per key shared by a fleet, in Redis), `keyed-backoff-kube`
//! (per-object backoff in kube-runtime controllers) and `fair-admission`
//! (the server's half: API Priority and Fairness, 429 with Retry-After).
//! [`Settings`] is client-go's settings as one validated value, shared by every
//! builder of it in these crates.
//!
//! The minimum supported Rust version is 1.88; CI checks that no dependency
//! needs a newer one. Jitter seeded with `.seed(n)` draws from SplitMix64,
//! so a seed gives the same delays on every platform and release.
//!
//! ## Semantics
//!
//! Every behaviour of client-go's manager is reproduced, including the
//! surprising ones (an expired entry's stale `get`, strict comparisons,
//! `initial > max`). The crate's tests replay operation traces recorded from
//! client-go itself. `docs/semantics.md` lists each behaviour side by side
//! with client-go and says where this crate saturates instead of wrapping.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
pub mod budget;
mod builder;
pub mod clock;
mod draws;
mod duration;
mod entry;
mod erased;
mod error;
mod expiry;
mod gate;
mod gc;
mod growth;
mod hold;
mod inspect;
mod observe;
pub mod retry;
mod rules;
mod settings;
mod snapshot;
mod store;
pub mod strategy;
#[cfg(feature = "tokio")]
mod wait;

pub use backoff::Backoff;
pub use builder::BackoffBuilder;
pub use entry::Level;
pub use erased::{Answer, DynGate};
pub use error::{ConfigError, InBackoff, SpawnError};
pub use gate::Gate;
pub use gc::GcGuard;
pub use inspect::{EntryView, Stats};
pub use settings::Settings;
pub use snapshot::{Snapshot, SnapshotEntry};

/// What the companion crates of this workspace borrow from the core: not
/// API, and no semver promise.
#[doc(hidden)]
pub mod __private {
    pub use crate::draws::UnitDraws;
    pub use crate::duration::saturating_nanos;
    pub use crate::settings::Resolved;

    /// `settings` with every value resolved (the expiry window in force).
    pub fn resolved(settings: &crate::Settings) -> Resolved {
        settings.resolved()
    }

    pub use crate::erased::now;
}

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
