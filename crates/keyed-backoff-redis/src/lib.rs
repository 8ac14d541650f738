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
//!   `Clock` can replace it, which is how the tests
//!   replay client-go's traces against Redis under a mock clock.
//! - **Jitter is drawn here**, in the client, and passed to the script, so
//!   `.seed(n)` keeps runs reproducible.
//! - **Redis collects garbage**: every write sets the key to expire after
//!   the expiry window plus `max`. There is no `gc()`.
//! - **Failures are errors** ([`StoreError`]): unavailable, timed out (the
//!   outcome is unknown), or corrupt (our key holds another type; it is
//!   never overwritten). Nothing fails open with zero backoff.
//!
//! ```no_run
//! use keyed_backoff_redis::{Event, RedisBackoff};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use keyed_backoff_redis::redis; // the same redis-rs major the store uses
//! let client = redis::Client::open("redis://127.0.0.1:6379/")?;
//! let conn = redis::aio::ConnectionManager::new(client).await?;
//! let backoff = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
//!     .prefix("crashloop")
//!     .build(conn)?;
//! match backoff.try_next("pod-a", Event::now()).await? {
//!     Ok(delay) => println!("failed again: retry in {delay:?}"),
//!     Err(wait) => println!("still backing off for {:?}", wait.remaining),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! - `cluster`: Redis Cluster, through redis-rs's
//!   `cluster_async::ClusterConnection` (build the store on one).
//! - `tracing`, `metrics`: events and counters for operators.
//!
//! The repository's `docs/fleet.md` covers failover (and
//! [`wait_for_replicas`](RedisBackoffBuilder::wait_for_replicas)), the
//! fallback and the costs measured against a plain `GET`.

#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod error;
mod event;
mod fallback;
mod near;
mod observe;
mod script;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::__private::UnitDraws;
use keyed_backoff::InBackoff;
use redis::aio::ConnectionLike;

pub use builder::RedisBackoffBuilder;
pub use error::StoreError;
pub use event::{Event, OpId};
/// The `redis` crate this store is built on, so users name its types
/// (`redis::Client`, `redis::aio::ConnectionManager`) at the same major
/// version without a dependency of their own.
pub use redis;

use builder::Now;
use fallback::Fallback;
use near::NearCache;
use script::{Op, Replicas, Reply};

/// client-go's per-key backoff, kept in Redis so a whole fleet shares it.
///
/// The operations of [`Backoff`](keyed_backoff::Backoff), async, each one Lua
/// script (one round trip, atomic on the key), each returning
/// `Result<_, StoreError>`. Event times are [`Event`]s. Cloning is cheap
/// (the connection is cloned, as redis-rs connections are meant to be).
///
/// ```no_run
/// use keyed_backoff_redis::{Event, RedisBackoff};
/// use std::time::Duration;
/// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), Box<dyn std::error::Error>> {
/// let b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).build(conn)?;
/// assert_eq!(b.next("host-a", Event::now()).await?, Duration::from_secs(1));
/// assert_eq!(b.next("host-a", Event::now()).await?, Duration::from_secs(2));
/// assert_eq!(b.attempts("host-a").await?, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisBackoff<C> {
    conn: C,
    prefix: String,
    initial_ns: u64,
    max_ns: u64,
    jitter: f64,
    window_ns: u64,
    ttl_ms: u64,
    timeout: Duration,
    draws: Arc<UnitDraws>,
    now: Now,
    fallback: Option<Arc<Fallback>>,
    near: Option<Arc<NearCache>>,
    replicas: Option<Replicas>,
}

impl<C> fmt::Debug for RedisBackoff<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackoff")
            .field("prefix", &self.prefix)
            .field("initial", &Duration::from_nanos(self.initial_ns))
            .field("max", &Duration::from_nanos(self.max_ns))
            .field("jitter", &self.jitter)
            .field("expire_after", &Duration::from_nanos(self.window_ns))
            .field("timeout", &self.timeout)
            .field("wait_for_replicas", &self.replicas.map(|r| r.count))
            .finish_non_exhaustive()
    }
}

impl<C> RedisBackoff<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// client-go's `Next`: moves `key`'s backoff to its next value (or
    /// starts it at `initial` if missing or expired as of `event`) and
    /// returns it.
    ///
    /// A [`StoreError::TimedOut`] leaves the outcome unknown; to retry
    /// without risking a second advance, use [`next_with`](Self::next_with).
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # use std::time::Duration;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// let delay = b.next("host-a", Event::now()).await?;
    /// # let _ = delay; Ok(())
    /// # }
    /// ```
    pub async fn next(&self, key: &str, event: Event) -> Result<Duration, StoreError> {
        self.advance(key, event, None).await
    }

    /// [`next`](Self::next) under a caller's operation id: calling again
    /// with the same id (after a timeout, say) returns the answer the first
    /// call got instead of advancing again, whatever other replicas did to
    /// the key in between. Each key remembers the answers to its last 4
    /// operations that carried an id.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, OpId, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), StoreError> {
    /// let id = OpId::new();
    /// let delay = match b.next_with("host-a", Event::now(), id).await {
    ///     Err(StoreError::TimedOut { .. }) => b.next_with("host-a", Event::now(), id).await?,
    ///     other => other?,
    /// };
    /// # let _ = delay; Ok(())
    /// # }
    /// ```
    pub async fn next_with(
        &self,
        key: &str,
        event: Event,
        id: OpId,
    ) -> Result<Duration, StoreError> {
        self.advance(key, event, Some(id)).await
    }

    async fn advance(
        &self,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Duration, StoreError> {
        let sent = self.near.as_ref().map(|n| n.now(&self.now));
        match self.run(Op::Next, key, event, id).await? {
            Reply::Advanced { backoff_ns, .. } => {
                self.remember(key, sent, backoff_ns);
                Ok(Duration::from_nanos(backoff_ns))
            }
            _ => Err(StoreError::unexpected(key, "next was refused")),
        }
    }

    /// The gate, in one atomic step: `Err(InBackoff)` with the wait left if
    /// `key` is in backoff at `event`, otherwise `next`. Racing callers
    /// across the whole fleet advance a key exactly once per window.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), StoreError> {
    /// match b.try_next("host-a", Event::now()).await? {
    ///     Ok(delay) => println!("retry in {delay:?}"),
    ///     Err(wait) => println!("another replica counted this failure; {:?} left", wait.remaining),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn try_next(
        &self,
        key: &str,
        event: Event,
    ) -> Result<Result<Duration, InBackoff>, StoreError> {
        self.gate(key, event, None).await
    }

    /// [`try_next`](Self::try_next) under a caller's operation id: calling
    /// again with the same id returns the first call's answer (the backoff
    /// it advanced to, or the wait it was refused with), whatever ran in
    /// between. Each key remembers its last 4 such answers.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, OpId, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), StoreError> {
    /// let id = OpId::new();
    /// let answer = match b.try_next_with("host-a", Event::now(), id).await {
    ///     Err(e) if e.outcome_unknown() => b.try_next_with("host-a", Event::now(), id).await?,
    ///     other => other?,
    /// };
    /// # let _ = answer; Ok(())
    /// # }
    /// ```
    pub async fn try_next_with(
        &self,
        key: &str,
        event: Event,
        id: OpId,
    ) -> Result<Result<Duration, InBackoff>, StoreError> {
        self.gate(key, event, Some(id)).await
    }

    async fn gate(
        &self,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Result<Duration, InBackoff>, StoreError> {
        let sent = self.near.as_ref().map(|n| n.now(&self.now));
        let at = sent.map(|sent| sent.saturating_sub(event.age_nanos()));
        // A refusal whose end is known is answered here. Not for an
        // operation id: its retry must get its first answer from Redis.
        if let (Some(near), Some(at), None) = (&self.near, at, id)
            && let Some(remaining_ns) = near.refusal(key, at)
        {
            return Ok(Err(InBackoff {
                remaining: Duration::from_nanos(remaining_ns),
            }));
        }
        Ok(match self.run(Op::Gate, key, event, id).await? {
            Reply::Advanced { backoff_ns, .. } => {
                self.remember(key, sent, backoff_ns);
                Ok(Duration::from_nanos(backoff_ns))
            }
            Reply::Refused { remaining_ns } => {
                self.remember(key, at, remaining_ns);
                Err(InBackoff {
                    remaining: Duration::from_nanos(remaining_ns),
                })
            }
            Reply::Number(_) => {
                return Err(StoreError::unexpected(key, "a number from the gate"));
            }
        })
    }

    /// client-go's `Get`: the current backoff, zero if there is no entry.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// assert_eq!(b.get("never-failed").await?, std::time::Duration::ZERO);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get(&self, key: &str) -> Result<Duration, StoreError> {
        self.number(Op::Get, key, Event::now())
            .await
            .map(Duration::from_nanos)
    }

    /// The number of `next` calls since the entry was (re)started; 0 if
    /// there is no entry.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// assert_eq!(b.attempts("never-failed").await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn attempts(&self, key: &str) -> Result<u32, StoreError> {
        let n = self.number(Op::Attempts, key, Event::now()).await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The wait left at `event` before the key's window ends; `None` if it
    /// is not in backoff (missing, expired, or the window has passed).
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// if let Some(wait) = b.remaining("host-a", Event::now()).await? {
    ///     println!("wait {wait:?}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn remaining(&self, key: &str, event: Event) -> Result<Option<Duration>, StoreError> {
        let ns = self.number(Op::Remaining, key, event).await?;
        Ok((ns > 0).then(|| Duration::from_nanos(ns)))
    }

    /// client-go's `IsInBackOffSince`: whether less than the key's backoff
    /// has passed since `event` (false when missing or expired as of
    /// `event`).
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>, finished: std::time::Instant) -> Result<(), keyed_backoff_redis::StoreError> {
    /// if !b.is_in_backoff_since("pod-a", Event::since(finished)).await? {
    ///     // restart the container
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn is_in_backoff_since(&self, key: &str, event: Event) -> Result<bool, StoreError> {
        self.number(Op::Since, key, event).await.map(|n| n == 1)
    }

    /// client-go's `IsInBackOffSinceUpdate`: whether `event` falls less
    /// than the key's backoff after its last update.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// let waiting = b.is_in_backoff_since_update("host-a", Event::now()).await?;
    /// # let _ = waiting; Ok(())
    /// # }
    /// ```
    pub async fn is_in_backoff_since_update(
        &self,
        key: &str,
        event: Event,
    ) -> Result<bool, StoreError> {
        self.number(Op::SinceUpdate, key, event)
            .await
            .map(|n| n == 1)
    }

    /// client-go's `Reset`: removes the key's entry; whether there was one.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// b.reset("host-a").await?; // it answered: start over next time
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        if let Some(near) = &self.near {
            near.forget(key);
        }
        self.number(Op::Reset, key, Event::now())
            .await
            .map(|n| n == 1)
    }

    /// client-go's `GC` for one key: removes its entry if it is stale as of
    /// the store's now; whether it did. Redis expires every entry by itself
    /// (after the window plus `max`), so a fleet never needs this; it is
    /// for callers whose clock is not Redis's (a mock clock in tests).
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// let removed = b.collect("host-a").await?;
    /// # let _ = removed; Ok(())
    /// # }
    /// ```
    pub async fn collect(&self, key: &str) -> Result<bool, StoreError> {
        self.number(Op::Collect, key, Event::now())
            .await
            .map(|n| n == 1)
    }

    /// The Redis key that holds `key`'s entry: `prefix:key`, with `%` and
    /// `:` in `key` written `%25` and `%3A`. The entry's key is then
    /// everything after the last `:`, so no two (prefix, key) pairs share
    /// an entry (prefix `a` with key `b:c` is `a:b%3Ac`; prefix `a:b` with
    /// key `c` is `a:b:c`). Braces pass through unchanged, so a Redis
    /// Cluster hash tag in the prefix or the key works as usual.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), keyed_backoff::ConfigError> {
    /// let b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(2)).prefix("p").build(conn)?;
    /// assert_eq!(b.redis_key("k"), "p:k");
    /// assert_eq!(b.redis_key("ns:pod"), "p:ns%3Apod");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        let mut out = String::with_capacity(self.prefix.len() + 1 + key.len());
        out.push_str(&self.prefix);
        out.push(':');
        for c in key.chars() {
            match c {
                '%' => out.push_str("%25"),
                ':' => out.push_str("%3A"),
                c => out.push(c),
            }
        }
        out
    }

    async fn number(&self, op: Op, key: &str, event: Event) -> Result<u64, StoreError> {
        match self.run(op, key, event, None).await? {
            Reply::Number(n) => Ok(n),
            _ => Err(StoreError::unexpected(key, "an entry instead of a number")),
        }
    }

    /// With the near cache, `key` is in backoff for `wait_ns` from `from`
    /// (the store's time line).
    fn remember(&self, key: &str, from: Option<i64>, wait_ns: u64) {
        // The fallback's answers are this process's alone: not remembered.
        if self.fallback.as_ref().is_some_and(|f| f.is_open()) {
            return;
        }
        if let (Some(near), Some(from)) = (&self.near, from) {
            let end = from.saturating_add_unsigned(wait_ns);
            near.remember(key, end, from);
        }
    }

    /// How many refusals the near cache answered without a round trip
    /// (see [`RedisBackoffBuilder::near_cache`]); always 0 without it.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # fn f(b: RedisBackoff<redis::aio::ConnectionManager>) {
    /// println!("round trips saved: {}", b.near_cache_hits());
    /// # }
    /// ```
    pub fn near_cache_hits(&self) -> u64 {
        self.near.as_ref().map_or(0, |n| n.hits())
    }

    /// How many answers came from the in-process fallback (see
    /// [`RedisBackoffBuilder::fallback`]); always 0 without one.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # fn f(b: RedisBackoff<redis::aio::ConnectionManager>) {
    /// if b.fallback_answers() > 0 {
    ///     eprintln!("Redis was down; some backoffs were this process's alone");
    /// }
    /// # }
    /// ```
    pub fn fallback_answers(&self) -> u64 {
        self.fallback.as_ref().map_or(0, |f| f.answers())
    }

    /// One operation: from Redis, or from the fallback while its breaker
    /// is open or when Redis cannot be reached.
    async fn run(
        &self,
        op: Op,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Reply, StoreError> {
        let Some(fallback) = &self.fallback else {
            return self.run_script(op, key, event, id).await;
        };
        if fallback.is_open() {
            observe::fallback_answer(op, key);
            return Ok(fallback.answer(op, key, event));
        }
        match self.run_script(op, key, event, id).await {
            Err(error @ (StoreError::Unavailable { .. } | StoreError::TimedOut { .. })) => {
                if fallback.trip() {
                    observe::breaker_opened(&error, fallback.open_for());
                }
                observe::fallback_answer(op, key);
                Ok(fallback.answer(op, key, event))
            }
            other => {
                if fallback.close() {
                    observe::breaker_closed();
                }
                other
            }
        }
    }
}

/// A [`ConnectionManager`](redis::aio::ConnectionManager) setup that fails
/// fast, for a store whose operations have `timeout`: connecting and each
/// response are bounded by it, and a lost connection is retried once,
/// quickly. With it, an operation on a server that is down returns
/// [`StoreError::Unavailable`] (the script did not run) instead of waiting
/// out the whole timeout and reporting [`StoreError::TimedOut`] (outcome
/// unknown), as redis-rs's default reconnection backoff can.
///
/// ```no_run
/// use keyed_backoff_redis::{RedisBackoff, fail_fast};
/// use redis::aio::ConnectionManager;
/// use std::time::Duration;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let timeout = Duration::from_millis(250);
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = ConnectionManager::new_with_config(client, fail_fast(timeout)).await?;
/// let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .timeout(timeout)
///     .build(conn)?;
/// # let _ = store; Ok(())
/// # }
/// ```
pub fn fail_fast(timeout: Duration) -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(timeout.min(Duration::from_millis(100)))
}

/// The README's example, compiled as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
