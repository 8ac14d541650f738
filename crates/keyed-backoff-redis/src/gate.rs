//! The core's contract, [`Gate`], on the store: each call one script call
//! (one round trip, atomic on the key), the floor kept in Redis beside the
//! key's entry so that a whole fleet honours it.

use std::time::Duration;

use keyed_backoff::{Gate, InBackoff, Level};
use redis::aio::ConnectionLike;

use crate::error::StoreError;
use crate::event::Event;
use crate::protocol::{Extra, Op, Reply, Request};
use crate::store::RedisBackoff;

/// The core's contract on the store, so that what is written against
/// [`Gate`] (the tower layer, the kube crate,
/// [`OutageAware`](keyed_backoff_outage::OutageAware)) runs on a backoff shared
/// by a fleet.
///
/// Every method is one script call on Redis' own clock (`TIME`), unless the
/// caller gave the store a clock of its own. [`wait`](Gate::wait) is
/// [`remaining`](RedisBackoff::remaining) now, [`fail`](Gate::fail) is
/// [`try_next`](RedisBackoff::try_next) now with the level reached,
/// [`succeed`](Gate::succeed) is [`reset`](RedisBackoff::reset).
///
/// [`hold`](Gate::hold) writes a floor into the key's entry in Redis: every
/// replica's gate then refuses the key with the longer of its backoff's
/// wait and the floor's, and its `remaining`, `is_in_backoff_since` and
/// `is_in_backoff_since_update` report it, as the in-process manager's do.
/// A later floor extends it, an earlier one never shortens it, a reset
/// clears it; the ladder (`next`, `get`, `attempts`, `level`) grows as if
/// there were none. A floor is at most [`MAX_BACKOFF`](keyed_backoff::Settings::MAX_BACKOFF)
/// long, and the entry is kept in Redis at least until it ends.
///
/// With a [fallback](crate::RedisBackoffBuilder::fallback), the calls made
/// while its breaker is open are answered by its in-process manager, through
/// the same contract.
///
/// ```no_run
/// use keyed_backoff_redis::keyed_backoff::{Gate, InBackoff};
/// use keyed_backoff_redis::RedisBackoff;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let replica_a = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .prefix("upstream")
///     .open("redis://127.0.0.1:6379/")
///     .await?;
/// let replica_b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .prefix("upstream")
///     .open("redis://127.0.0.1:6379/")
///     .await?;
/// let host = "api.example.com".to_string();
/// // Replica A was answered 429 with `Retry-After: 30`.
/// replica_a.hold(&host, Duration::from_secs(30)).await?;
/// // Replica B's gate refuses the host for those 30 s, and counts nothing.
/// match replica_b.fail(&host).await? {
///     Err(InBackoff { remaining }) => assert!(remaining <= Duration::from_secs(30)),
///     Ok(level) => unreachable!("held, yet advanced to {level:?}"),
/// }
/// assert_eq!(replica_b.level(&host).await?, None); // the ladder never started
/// # Ok(())
/// # }
/// ```
impl<C> Gate<String> for RedisBackoff<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    type Error = StoreError;

    async fn wait(&self, key: &String) -> Result<Option<Duration>, StoreError> {
        self.remaining(key, Event::now()).await
    }

    async fn fail(&self, key: &String) -> Result<Result<Level, InBackoff>, StoreError> {
        match self.request(plain(Op::TryNext, key, Extra::None)).await? {
            Reply::Level {
                backoff_ns,
                attempts,
            } => Ok(Ok(level(backoff_ns, attempts))),
            Reply::Refused { remaining_ns } => Ok(Err(InBackoff {
                remaining: Duration::from_nanos(remaining_ns),
            })),
            _ => Err(StoreError::unexpected(key, "a number from try_next")),
        }
    }

    async fn succeed(&self, key: &String) -> Result<(), StoreError> {
        self.reset(key).await.map(drop)
    }

    async fn hold(&self, key: &String, wait: Duration) -> Result<(), StoreError> {
        self.request(plain(Op::Hold, key, Extra::hold(wait)))
            .await
            .map(drop)
    }

    async fn level(&self, key: &String) -> Result<Option<Level>, StoreError> {
        match self.request(plain(Op::Level, key, Extra::None)).await? {
            Reply::Level {
                backoff_ns,
                attempts,
            } => Ok(Some(level(backoff_ns, attempts))),
            Reply::Number(0) => Ok(None),
            _ => Err(StoreError::unexpected(key, "a level or none")),
        }
    }

    async fn resume(&self, key: &String, level: Level) -> Result<(), StoreError> {
        self.request(plain(Op::Resume, key, Extra::resume(level)))
            .await
            .map(drop)
    }

    /// One round trip for both.
    async fn standing(
        &self,
        key: &String,
    ) -> Result<(Option<Level>, Option<Duration>), StoreError> {
        match self.request(plain(Op::Standing, key, Extra::None)).await? {
            Reply::Standing {
                level: live,
                remaining_ns,
            } => Ok((
                live.map(|(backoff_ns, attempts)| level(backoff_ns, attempts)),
                (remaining_ns > 0).then(|| Duration::from_nanos(remaining_ns)),
            )),
            _ => Err(StoreError::unexpected(key, "a level and a wait")),
        }
    }
}

/// A request on the store's now, without an operation id.
fn plain(op: Op, key: &str, extra: Extra) -> Request<'_> {
    Request {
        op,
        key,
        event: Event::now(),
        id: None,
        extra,
    }
}

fn level(backoff_ns: u64, attempts: u32) -> Level {
    Level {
        backoff: Duration::from_nanos(backoff_ns),
        attempts,
    }
}

#[cfg(test)]
#[path = "standing_tests.rs"]
mod tests;
