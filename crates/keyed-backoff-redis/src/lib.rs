//! # keyed-backoff-redis
//!
//! One backoff per key across a fleet: the operations of
//! [keyed-backoff](keyed_backoff)'s manager (client-go's
//! `flowcontrol.Backoff`) on a Redis store.
//!
//! N replicas that each keep their own [`Backoff`](keyed_backoff::Backoff) multiply
//! a failing downstream's load by N. A [`RedisBackoff`] keeps each key's
//! entry in Redis instead, so every replica sees the same ladder: one
//! backoff per key, fleet-wide.
//!
//! - **Atomic, one round trip.** Every operation is one Lua script that reads
//!   the entry, decides by the same rules as the in-process manager
//!   (client-go's), and writes it back. No WATCH/retry loop.
//! - **One clock.** By default the script reads Redis `TIME`, so replicas
//!   on different machines agree; event times travel as an [`Event`] (how
//!   long ago, on the caller's own monotonic clock). A caller's
//!   [`Clock`](clock::Clock) can replace it, which is how the tests
//!   replay client-go's traces against Redis under a mock clock.
//! - **Jitter is drawn here**, in the client, and passed to the script, so
//!   `.seed(n)` keeps runs reproducible.
//! - **Redis drops stale entries by itself**: every write sets the key to
//!   expire after `expire_after` plus `max`. There is no `gc()` to call
//!   ([`gc_key`](RedisBackoff::gc_key) applies client-go's strategy to one key
//!   now, for callers on a clock of their own).
//! - **Failures are errors** ([`StoreError`]): unavailable (the operation
//!   did not run), timed out (the outcome is unknown), or corrupt (our key
//!   holds something else; it is never overwritten). Nothing fails open
//!   with zero backoff.
//! - **The core's contract.** [`RedisBackoff`] implements
//!   [`Gate`](keyed_backoff::Gate), so code written against it (the outage
//!   wrapper [`OutageAware`](keyed_backoff_outage::OutageAware), say) runs on the
//!   fleet's store; its floor (`hold`, a server's `Retry-After`) is kept in
//!   Redis, so every replica honours it.
//! - **Fails fast.** [`open`](RedisBackoffBuilder::open) connects with
//!   settings under which a server that refuses connections is
//!   `Unavailable` at once, and one that stops answering is `TimedOut`
//!   after the operation's timeout (250 ms by default).
//!
//! ```no_run
//! use keyed_backoff_redis::{Event, RedisBackoff};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let backoff = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
//!     .prefix("crashloop")
//!     .open("redis://127.0.0.1:6379/")
//!     .await?;
//! match backoff.try_next("pod-a", Event::now()).await? {
//!     Ok(delay) => println!("failed again: retry in {delay:?}"),
//!     Err(wait) => println!("still backing off for {:?}", wait.remaining),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A connection of your own (a Redis Cluster's, or a
//! [`ConnectionManager`](redis::aio::ConnectionManager) set up with
//! [`fail_fast`]) goes to [`build`](RedisBackoffBuilder::build) instead.
//!
//! # Features
//!
//! - `cluster`: Redis Cluster, through redis-rs's
//!   `cluster_async::ClusterConnection` (build the store on one).
//! - `tracing`, `metrics`: events and counters for operators.
//!
//! [`RedisBackoff::outage_aware`] shares one outage (keyed-backoff-outage's
//! one wrapper, over a [`RedisOutageStore`]) among the replicas on a
//! prefix: the repository's `docs/outage.md` has its design. The repository's `docs/fleet.md` covers failover (and
//! [`wait_for_replicas`](RedisBackoffBuilder::wait_for_replicas)), the
//! fallback and the costs measured against a plain `GET`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod connection;
mod error;
mod event;
mod fallback;
mod fleet;
mod gate;
mod near_cache;
mod observe;
mod protocol;
mod stats;
mod store;
mod transport;

pub use builder::RedisBackoffBuilder;
pub use connection::fail_fast;
pub use error::{Address, StoreError};
pub use event::{Event, OpId};
pub use fleet::{RedisOutageAware, RedisOutageStore, StoreClock};
pub use stats::Stats;
pub use store::RedisBackoff;

/// The core crate, [keyed-backoff](keyed_backoff), at the version this store
/// is built on: its in-process manager and everything it names.
pub use keyed_backoff;
/// The clocks a store can read instead of Redis `TIME`
/// ([`RedisBackoffBuilder::clock`]) and whose instants an [`Event`] can be
/// measured between: the core's `clock` module.
pub use keyed_backoff::clock;
/// The core's types in this crate's signatures, so that they are named from
/// here: a gate's refusal ([`RedisBackoff::try_next`]), a builder's error,
/// and the settings a builder can start from.
pub use keyed_backoff::{ConfigError, InBackoff, Settings};
pub use keyed_backoff_outage;
pub use keyed_backoff_outage::OutageSettings;
/// The `redis` crate this store is built on, so users name its types
/// (`redis::Client`, `redis::aio::ConnectionManager`) at the same major
/// version without a dependency of their own.
pub use redis;

/// The README's example, compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
