//! One script call on the wire: `EVALSHA` (the script is loaded once when
//! the server answers `NOSCRIPT`), followed in the same round trip by
//! `WAIT` when a write must reach replicas, the whole bounded by the
//! operation's timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::FromRedisValue;
use redis::aio::ConnectionLike;

use crate::error::{Address, StoreError};
use crate::observe;
use crate::protocol::{Call, Reply, SCRIPT};

/// Wait for this many replicas, this long (in ms), after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replicas {
    pub(crate) count: u32,
    pub(crate) timeout_ms: u64,
}

/// The connection and how long a call may take on it.
#[derive(Clone)]
pub(crate) struct Transport<C> {
    conn: C,
    /// The server, as errors name it.
    address: Address,
    timeout: Duration,
    replicas: Option<Replicas>,
    /// Whether Redis is unreachable now, as the latest calls found it;
    /// shared by the store's clones, so an outage is reported once.
    unreachable: Arc<AtomicBool>,
}

impl<C> Transport<C> {
    pub(crate) fn new(
        conn: C,
        address: Address,
        timeout: Duration,
        replicas: Option<Replicas>,
    ) -> Self {
        Transport {
            conn,
            address,
            timeout,
            replicas,
            unreachable: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Tells operators when Redis becomes unreachable and when it answers
    /// again, once each, from the outcome of each call; returns whether
    /// the call's own error (if any) is part of such an outage.
    fn track<T>(&self, result: &Result<T, StoreError>) -> bool {
        let down = matches!(result, Err(e) if e.is_unreachable());
        match result {
            // Anything but a failure to reach it is an answer from Redis.
            Err(error) if down => {
                if !self.unreachable.swap(true, Ordering::AcqRel) {
                    observe::unreachable(error);
                }
            }
            _ => {
                if self.unreachable.swap(false, Ordering::AcqRel) {
                    observe::reachable();
                }
            }
        }
        down
    }

    /// No answer within the operation's timeout.
    pub(crate) fn timed_out(&self) -> StoreError {
        StoreError::timed_out(&self.address, self.timeout)
    }

    /// The longest a call may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The replicas a write waits for, if any.
    pub(crate) fn replicas(&self) -> Option<Replicas> {
        self.replicas
    }
}

impl<C> Transport<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Runs `call` for the caller's `key` (the one errors name), bounded by
    /// the timeout, and reports it to operators.
    pub(crate) async fn run(&self, key: &str, call: Call<'_>) -> Result<Reply, StoreError> {
        // Only an operation that may write waits for replicas.
        let wait = self.replicas.filter(|_| call.op.may_write());
        let timer = observe::Timer::start();
        let result = match tokio::time::timeout(self.timeout, self.send(&call, wait)).await {
            Ok(Ok((reply, acked))) => match Reply::from_redis_value(reply) {
                Ok(reply) => Self::check(key, &call, reply, wait, acked),
                Err(e) => Err(StoreError::unreadable(key, e)),
            },
            Ok(Err(e)) => Err(StoreError::from_redis(&self.address, key, e, self.timeout)),
            Err(_) => Err(self.timed_out()),
        };
        let outage = self.track(&result);
        observe::operation(call.op, key, &result, timer, outage);
        result
    }

    /// Runs another script's `invocation` (loaded once if the server does
    /// not know it) for the caller's `key` (the one errors name), bounded
    /// by the timeout; Redis found unreachable or answering again is told
    /// to operators as for the store's own calls.
    pub(crate) async fn invoke<T: redis::FromRedisValue>(
        &self,
        key: &str,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.clone();
        // Read as a plain value first: a reply redis-rs cannot parse is
        // then the server's fault, one it can parse but we cannot read is
        // the key's.
        let answer = invocation.invoke_async::<redis::Value>(&mut conn);
        let result = match tokio::time::timeout(self.timeout, answer).await {
            Ok(Ok(value)) => T::from_redis_value(value).map_err(|e| StoreError::unreadable(key, e)),
            Ok(Err(e)) => Err(StoreError::from_redis(&self.address, key, e, self.timeout)),
            Err(_) => Err(self.timed_out()),
        };
        self.track(&result);
        result
    }

    /// An entry that is not ours is an error; so is a write too few
    /// replicas acknowledged.
    fn check(
        key: &str,
        call: &Call<'_>,
        reply: Reply,
        wait: Option<Replicas>,
        acked: Option<i64>,
    ) -> Result<Reply, StoreError> {
        if let Reply::NotOurs { detail } = reply {
            return Err(StoreError::Corrupt {
                key: key.to_string(),
                detail,
                source: None,
            });
        }
        match (wait, acked) {
            (Some(wait), Some(acked)) if call.wrote(&reply) && acked < i64::from(wait.count) => {
                Err(StoreError::NotReplicated {
                    key: key.to_string(),
                    acked: u32::try_from(acked.max(0)).unwrap_or(0),
                    wanted: wait.count,
                })
            }
            _ => Ok(reply),
        }
    }

    /// Sends the script call, followed in the same round trip by `WAIT`
    /// when asked (its answer: the replicas that acknowledged); loads the
    /// script once if the server does not know it. The script's reply is
    /// returned as redis-rs parsed it, for the caller to read.
    async fn send(
        &self,
        call: &Call<'_>,
        wait: Option<Replicas>,
    ) -> redis::RedisResult<(redis::Value, Option<i64>)> {
        let mut conn = self.conn.clone();
        // EVALSHA built here rather than through `Script::prepare_invoke`,
        // which copies every argument twice.
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(SCRIPT.get_hash()).arg(call);
        // The command moves into the pipeline when there is one: no copy.
        enum Request {
            Alone(redis::Cmd),
            ThenWait(redis::Pipeline),
        }
        let request = match wait {
            None => Request::Alone(cmd),
            Some(wait) => {
                let mut pipe = redis::pipe();
                pipe.add_command(cmd)
                    .cmd("WAIT")
                    .arg(wait.count)
                    .arg(wait.timeout_ms);
                Request::ThenWait(pipe)
            }
        };
        let mut loaded = false;
        loop {
            let result = match &request {
                Request::Alone(cmd) => cmd.query_async(&mut conn).await.map(|r| (r, None)),
                Request::ThenWait(pipe) => pipe
                    .query_async::<(redis::Value, i64)>(&mut conn)
                    .await
                    .map(|(r, acked)| (r, Some(acked))),
            };
            match result {
                Err(e)
                    if !loaded
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    SCRIPT.load_async(&mut conn).await?;
                    loaded = true;
                }
                other => return other,
            }
        }
    }
}
