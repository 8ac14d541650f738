//! The Lua script every operation runs, its operations, the call that
//! sends it and the reading of its reply.

use std::sync::LazyLock;

use redis::Script;
use redis::aio::ConnectionLike;

use crate::builder::Now;
use crate::event::Event;
use crate::observe;
use crate::{OpId, RedisBackoff, StoreError};

/// The script every operation runs.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("entry.lua")));

/// The script's operations (its first argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Next,
    Gate,
    Get,
    Attempts,
    Remaining,
    Since,
    SinceUpdate,
    Reset,
    Collect,
}

impl Op {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Next => "next",
            Op::Gate => "gate",
            Op::Get => "get",
            Op::Attempts => "attempts",
            Op::Remaining => "remaining",
            Op::Since => "since",
            Op::SinceUpdate => "since_update",
            Op::Reset => "reset",
            Op::Collect => "collect",
        }
    }

    /// Whether the operation may advance an entry (and so needs a draw).
    pub(crate) fn advances(self) -> bool {
        matches!(self, Op::Next | Op::Gate)
    }
}

/// What the script answers for one operation.
pub(crate) enum Reply {
    Advanced { backoff_ns: u64 },
    Refused { remaining_ns: u64 },
    Number(u64),
}

/// Wait for this many replicas, this long (in ms), after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replicas {
    pub(crate) count: u32,
    pub(crate) timeout_ms: u64,
}

impl<C> RedisBackoff<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// One script call, bounded by the timeout, and reported.
    pub(crate) async fn run_script(
        &self,
        op: Op,
        key: &str,
        event: Event,
        id: Option<OpId>,
    ) -> Result<Reply, StoreError> {
        // The draw times the factor, as the jitter rule multiplies them
        // (`u * factor * backoff`, left to right): the script then needs
        // one number for the jitter, and none when it is zero.
        let scaled = if self.jitter == 0.0 || !op.advances() {
            0.0
        } else {
            self.draws.next_unit() * self.jitter
        };
        // EVALSHA built here rather than through `Script::prepare_invoke`,
        // which copies every argument twice; NOSCRIPT is handled in `send`.
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(SCRIPT.get_hash())
            .arg(1)
            .arg(self.redis_key(key))
            .arg(op.name());
        match &self.now {
            Now::Redis => cmd.arg(""),
            Now::Caller(now) => cmd.arg(now()),
        };
        cmd.arg(event.age_nanos())
            .arg(self.initial_ns)
            .arg(self.max_ns);
        if scaled == 0.0 {
            cmd.arg("0");
        } else {
            cmd.arg(scaled);
        }
        cmd.arg(self.window_ns).arg(self.ttl_ms);
        match id {
            Some(id) => cmd.arg(id.0),
            None => cmd.arg(""),
        };
        // Only an operation that may write waits for replicas.
        let wait = self
            .replicas
            .filter(|_| matches!(op, Op::Next | Op::Gate | Op::Reset | Op::Collect));
        let timer = observe::Timer::start();
        let result = match tokio::time::timeout(self.timeout, self.send(cmd, wait)).await {
            Ok(Ok((reply, acked))) => parse(key, reply).and_then(|reply| {
                let wrote = match reply {
                    Reply::Advanced { .. } => true,
                    Reply::Refused { .. } => id.is_some(),
                    Reply::Number(n) => n == 1 && matches!(op, Op::Reset | Op::Collect),
                };
                match (wait, acked) {
                    (Some(wait), Some(acked)) if wrote && acked < i64::from(wait.count) => {
                        Err(StoreError::NotReplicated {
                            key: key.to_string(),
                            acked: u32::try_from(acked.max(0)).unwrap_or(0),
                            wanted: wait.count,
                        })
                    }
                    _ => Ok(reply),
                }
            }),
            Ok(Err(e)) => Err(StoreError::from_redis(key, e, self.timeout)),
            Err(_) => Err(StoreError::TimedOut {
                after: self.timeout,
            }),
        };
        observe::operation(op, key, &result, timer);
        result
    }

    /// Sends the script call, followed in the same round trip by `WAIT`
    /// when asked (its answer: the replicas that acknowledged); loads the
    /// script once if the server does not know it.
    async fn send(
        &self,
        cmd: redis::Cmd,
        wait: Option<Replicas>,
    ) -> redis::RedisResult<(redis::Value, Option<i64>)> {
        let mut conn = self.conn.clone();
        // The command moves into the pipeline when there is one: no copy.
        enum Call {
            Alone(redis::Cmd),
            ThenWait(redis::Pipeline),
        }
        let call = match wait {
            None => Call::Alone(cmd),
            Some(wait) => {
                let mut pipe = redis::pipe();
                pipe.add_command(cmd)
                    .cmd("WAIT")
                    .arg(wait.count)
                    .arg(wait.timeout_ms);
                Call::ThenWait(pipe)
            }
        };
        let mut loaded = false;
        loop {
            let result = match &call {
                Call::Alone(cmd) => cmd.query_async(&mut conn).await.map(|v| (v, None)),
                Call::ThenWait(pipe) => pipe
                    .query_async::<(redis::Value, i64)>(&mut conn)
                    .await
                    .map(|(v, acked)| (v, Some(acked))),
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

fn parse(key: &str, reply: redis::Value) -> Result<Reply, StoreError> {
    use redis::Value;
    let int = |v: &Value| match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    match &reply {
        Value::Array(items)
            if items.first().and_then(|v| match v {
                Value::Int(n) => Some(*n),
                _ => None,
            }) == Some(-1) =>
        {
            let detail = match items.get(1) {
                Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
                Some(Value::SimpleString(s)) => s.clone(),
                _ => "an entry that is not ours".to_owned(),
            };
            Err(StoreError::Corrupt {
                key: key.to_string(),
                detail,
            })
        }
        Value::Int(n) => u64::try_from(*n)
            .map(Reply::Number)
            .map_err(|_| StoreError::unexpected(key, "a negative number")),
        Value::Array(items) => match items.as_slice() {
            [flag, b, _attempts] if int(flag) == Some(1) => int(b)
                .map(|backoff_ns| Reply::Advanced { backoff_ns })
                .ok_or_else(|| StoreError::unexpected(key, "a malformed entry")),
            [flag, left] if int(flag) == Some(0) => int(left)
                .map(|remaining_ns| Reply::Refused { remaining_ns })
                .ok_or_else(|| StoreError::unexpected(key, "a malformed wait")),
            _ => Err(StoreError::unexpected(key, "an array of the wrong shape")),
        },
        _ => Err(StoreError::unexpected(key, "a reply of the wrong type")),
    }
}
