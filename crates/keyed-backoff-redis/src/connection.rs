//! Connections that fail fast: a server that refuses connections is
//! reported as unavailable at once, not after the operation's timeout.

use std::time::Duration;

/// A [`ConnectionManager`](redis::aio::ConnectionManager) setup that fails
/// fast, for a store whose operations have `timeout`: connecting and each
/// response are bounded by it, and a lost connection is not retried in the
/// background: the next operation connects again. With it, an operation on
/// a server that refuses connections returns
/// [`StoreError::Unavailable`](crate::StoreError::Unavailable) at once (the
/// script did not run) instead of waiting out the timeout behind
/// redis-rs's reconnection backoff and reporting
/// [`StoreError::TimedOut`](crate::StoreError::TimedOut) (outcome unknown).
/// [`RedisBackoffBuilder::open`](crate::RedisBackoffBuilder::open) uses it;
/// set it up yourself for a connection of your own making.
///
/// ```no_run
/// use keyed_backoff_redis::redis::{self, aio::ConnectionManager};
/// use keyed_backoff_redis::{RedisBackoff, fail_fast};
/// use std::time::Duration;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let timeout = Duration::from_millis(100);
/// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
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
        .set_number_of_retries(0)
}
