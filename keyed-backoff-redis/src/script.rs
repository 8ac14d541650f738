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
        let (now, unit) = match &self.now {
            Now::Redis => (String::new(), 1_000u32),
            Now::Caller(now) => (now().to_string(), 1),
        };
        let draw = if self.jitter == 0.0 || !op.advances() {
            0.0
        } else {
            self.draws.next_unit()
        };
        let mut invocation = SCRIPT.prepare_invoke();
        invocation
            .key(self.redis_key(key))
            .arg(op.name())
            .arg(now)
            .arg(unit)
            .arg(event.age_nanos())
            .arg(self.initial_ns)
            .arg(self.max_ns)
            .arg(self.jitter)
            .arg(draw)
            .arg(self.window_ns)
            .arg(self.ttl_ms.to_string())
            .arg(id.map_or(String::new(), |id| id.0.to_string()));
        let mut conn = self.conn.clone();
        let timer = observe::Timer::start();
        let result =
            match tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn)).await {
                Ok(Ok(reply)) => parse(key, reply),
                Ok(Err(e)) => Err(StoreError::from_redis(key, e, self.timeout)),
                Err(_) => Err(StoreError::TimedOut {
                    after: self.timeout,
                }),
            };
        observe::operation(op, key, &result, timer);
        result
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
