//! `RedisBackoff`: the store's public operations. Each one is a request
//! that the near cache may answer, else the fallback, else Redis.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::__private::UnitDraws;
use keyed_backoff::InBackoff;
use redis::aio::ConnectionLike;

use crate::error::StoreError;
use crate::event::{Event, OpId};
use crate::fallback::{Answer, Fallback};
use crate::near_cache::NearCache;
use crate::protocol::{self, Extra, Op, Reply, Request, Rule, TimeSource};
use crate::stats::Stats;
use crate::transport::Transport;

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
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .open("redis://127.0.0.1:6379/")
///     .await?;
/// assert_eq!(b.next("host-a", Event::now()).await?, Duration::from_secs(1));
/// assert_eq!(b.next("host-a", Event::now()).await?, Duration::from_secs(2));
/// assert_eq!(b.attempts("host-a").await?, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisBackoff<C> {
    pub(crate) transport: Transport<C>,
    pub(crate) prefix: String,
    pub(crate) rule: Rule,
    pub(crate) draws: Arc<UnitDraws>,
    pub(crate) time: TimeSource,
    pub(crate) fallback: Option<Arc<Fallback>>,
    pub(crate) near: Option<Arc<NearCache>>,
}

impl<C> fmt::Debug for RedisBackoff<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackoff")
            .field("prefix", &self.prefix)
            .field("initial", &Duration::from_nanos(self.rule.initial_ns))
            .field("max", &Duration::from_nanos(self.rule.max_ns))
            .field("jitter", &self.rule.jitter)
            .field(
                "expire_after",
                &Duration::from_nanos(self.rule.expire_after_ns),
            )
            .field("timeout", &self.transport.timeout())
            .field(
                "wait_for_replicas",
                &self.transport.replicas().map(|r| r.count),
            )
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
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
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
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), StoreError> {
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
        match self.call(Op::Next, key, event, id).await? {
            Reply::Level { backoff_ns, .. } => Ok(Duration::from_nanos(backoff_ns)),
            _ => Err(StoreError::unexpected(key, "next was refused")),
        }
    }

    /// The gate, in one atomic step: `Err(InBackoff)` with the wait left if
    /// `key` is in backoff at `event` or held past it by a floor
    /// ([`Gate::hold`](keyed_backoff::Gate::hold); the longer wait),
    /// otherwise `next`. Racing callers across the whole fleet advance a
    /// key exactly once per window.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), StoreError> {
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
        self.try_next_as(key, event, None).await
    }

    /// [`try_next`](Self::try_next) under a caller's operation id: calling
    /// again with the same id returns the first call's answer (the backoff
    /// it advanced to, or the wait it was refused with), whatever ran in
    /// between. Each key remembers its last 4 such answers.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, OpId, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), StoreError> {
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
        self.try_next_as(key, event, Some(id)).await
    }

    async fn try_next_as(
        &self,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Result<Duration, InBackoff>, StoreError> {
        match self.call(Op::TryNext, key, event, id).await? {
            Reply::Level { backoff_ns, .. } => Ok(Ok(Duration::from_nanos(backoff_ns))),
            Reply::Refused { remaining_ns } => Ok(Err(InBackoff {
                remaining: Duration::from_nanos(remaining_ns),
            })),
            _ => Err(StoreError::unexpected(key, "a number from try_next")),
        }
    }

    /// client-go's `Get`: the current backoff, zero if there is no entry.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
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
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// assert_eq!(b.attempts("never-failed").await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn attempts(&self, key: &str) -> Result<u32, StoreError> {
        let n = self.number(Op::Attempts, key, Event::now()).await?;
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// The wait left at `event` before the key's window ends, or its floor
    /// if that ends later; `None` if it is not in backoff (missing,
    /// expired, or the window has passed) nor held.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
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
    /// `event`), or the key is held by a floor now.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>, finished: std::time::Instant) -> Result<(), keyed_backoff_redis::StoreError> {
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
    /// than the key's backoff after its last update, or before its floor.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
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

    /// client-go's `Reset`: removes the key's entry and its floor; whether
    /// there was an entry.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// b.reset("host-a").await?; // it answered: start over next time
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, key: &str) -> Result<bool, StoreError> {
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
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), keyed_backoff_redis::StoreError> {
    /// let removed = b.gc_key("host-a").await?;
    /// # let _ = removed; Ok(())
    /// # }
    /// ```
    pub async fn gc_key(&self, key: &str) -> Result<bool, StoreError> {
        self.number(Op::GcKey, key, Event::now())
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
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), keyed_backoff_redis::ConfigError> {
    /// let b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(2))
    ///     .prefix("p")
    ///     .open("redis://127.0.0.1:6379/") // connects on first use only
    ///     .await?;
    /// assert_eq!(b.redis_key("k"), "p:k");
    /// assert_eq!(b.redis_key("ns:pod"), "p:ns%3Apod");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        protocol::redis_key(&self.prefix, key)
    }

    async fn number(&self, op: Op, key: &str, event: Event) -> Result<u64, StoreError> {
        self.call(op, key, event, None)
            .await?
            .number()
            .ok_or_else(|| StoreError::unexpected(key, "an entry instead of a number"))
    }

    /// The store's counters in this process: gates the near cache
    /// answered, operations the fallback answered.
    ///
    /// ```no_run
    /// # use keyed_backoff_redis::RedisBackoff;
    /// # fn f(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) {
    /// let stats = b.stats();
    /// if stats.fallback_answers > 0 {
    ///     eprintln!("Redis was down; some backoffs were this process's alone");
    /// }
    /// println!("round trips saved: {}", stats.near_cache_hits);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        Stats {
            near_cache_hits: self.near.as_ref().map_or(0, |n| n.hits()),
            fallback_answers: self.fallback.as_ref().map_or(0, |f| f.answers()),
        }
    }

    /// One operation: answered by the near cache if it knows the answer,
    /// else by the fallback while its breaker is open, else by Redis.
    async fn call(
        &self,
        op: Op,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Reply, StoreError> {
        let request = Request {
            op,
            key,
            event,
            id,
            extra: Extra::None,
        };
        self.request(request).await
    }

    /// [`call`](Self::call) for a request made in full.
    pub(crate) async fn request(&self, request: Request<'_>) -> Result<Reply, StoreError> {
        let answer = self.answer(request);
        match &self.near {
            None => answer.await.map(|a| a.reply),
            Some(near) => near.around(&self.time, request, answer).await,
        }
    }

    /// The fallback's answer, or Redis's.
    async fn answer(&self, request: Request<'_>) -> Result<Answer, StoreError> {
        let remote = self.remote(request);
        match &self.fallback {
            None => remote.await.map(Answer::shared),
            Some(fallback) => fallback.around(request, remote).await,
        }
    }

    /// Redis's answer: the script call, made now.
    async fn remote(&self, request: Request<'_>) -> Result<Reply, StoreError> {
        let call = request.call(&self.prefix, &self.time, &self.rule, &self.draws);
        self.transport.run(request.key, call).await
    }
}
