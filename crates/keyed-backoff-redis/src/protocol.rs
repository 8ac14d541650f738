//! The script's calling convention, written once: the arguments
//! `entry.lua` takes (its header lists them in the same order) as a
//! [`Call`] that redis-rs writes with [`ToRedisArgs`], and its answer as a
//! [`Reply`] read with [`FromRedisValue`].
//!
//! Every argument with a special value has a type of its own, so no caller
//! writes `""` or `"0"` by hand: [`ScriptNow`] (the script reads Redis
//! `TIME`, or takes the caller's now), [`Draw`] (no jitter, or the scaled
//! draw) and the operation id (none, or its number).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use keyed_backoff::__private::{UnitDraws, saturating_nanos};
use keyed_backoff::Level;
use redis::{FromRedisValue, ParsingError, RedisWrite, Script, ToRedisArgs, Value};

use crate::event::{Event, OpId};

/// The script every operation runs.
pub(crate) static SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("entry.lua")));

/// The script's operations (ARGV[1]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Next,
    TryNext,
    Get,
    Attempts,
    Remaining,
    Since,
    SinceUpdate,
    Reset,
    GcKey,
    /// A floor under the key's wait (ARGV[10]: the wait).
    Hold,
    /// The key's level, if its entry is live.
    Level,
    /// The key put back at a level unless it is live (ARGV[10], ARGV[11]).
    Resume,
    /// `Level` and `Remaining` in one call.
    Standing,
}

impl Op {
    /// The name the script knows it by (and the `op` label operators see).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Next => "next",
            Op::TryNext => "try_next",
            Op::Get => "get",
            Op::Attempts => "attempts",
            Op::Remaining => "remaining",
            Op::Since => "since",
            Op::SinceUpdate => "since_update",
            Op::Reset => "reset",
            Op::GcKey => "gc_key",
            Op::Hold => "hold",
            Op::Level => "level",
            Op::Resume => "resume",
            Op::Standing => "standing",
        }
    }

    /// Whether the operation may advance an entry (and so needs a draw).
    pub(crate) fn advances(self) -> bool {
        matches!(self, Op::Next | Op::TryNext)
    }

    /// Whether the operation may write the entry (and so may wait for
    /// replicas): an advance, a refusal remembered under an id, a removal,
    /// a floor, a resumed level.
    pub(crate) fn may_write(self) -> bool {
        matches!(
            self,
            Op::Next | Op::TryNext | Op::Reset | Op::GcKey | Op::Hold | Op::Resume
        )
    }
}

/// Whose clock gives the store's now.
#[derive(Clone)]
pub(crate) enum TimeSource {
    /// Redis `TIME`, read by the script (in microseconds).
    Redis,
    /// A caller's clock, in nanoseconds since the store's epoch.
    Caller(Arc<dyn Fn() -> i64 + Send + Sync>),
}

impl TimeSource {
    /// ARGV[2] for a call made now.
    pub(crate) fn now(&self) -> ScriptNow {
        match self {
            TimeSource::Redis => ScriptNow::RedisTime,
            TimeSource::Caller(now) => ScriptNow::Nanos(now()),
        }
    }
}

/// ARGV[2]: the store's now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptNow {
    /// The script reads Redis `TIME`; its time unit is then a microsecond
    /// (sent as `""`).
    RedisTime,
    /// The caller's now in nanoseconds; the time unit is a nanosecond.
    Nanos(i64),
}

/// The rule as the script takes it: ARGV[4], ARGV[5], ARGV[7] and ARGV[8],
/// and the jitter its draws are scaled by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rule {
    pub(crate) initial_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) jitter: f64,
    /// The expiry window: an entry untouched for longer starts over.
    pub(crate) expire_after_ns: u64,
    /// The time to live of a written entry, in milliseconds.
    pub(crate) ttl_ms: u64,
}

/// ARGV[6]: the jitter draw times the jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Draw {
    /// No jitter: the operation does not advance, or the jitter (or the
    /// draw) is zero (sent as `"0"`).
    None,
    /// `U[0,1) · jitter`, in `(0, jitter)`.
    Scaled(f64),
}

impl Draw {
    /// The draw for `op` under `rule`, taken from `draws` only when the
    /// script may use it. The draw times the jitter, as client-go's strategy
    /// multiplies them (`u * jitter * backoff`, left to right): the script
    /// then needs one number for the jitter.
    pub(crate) fn for_op(op: Op, rule: &Rule, draws: &UnitDraws) -> Draw {
        if rule.jitter == 0.0 || !op.advances() {
            return Draw::None;
        }
        let scaled = draws.next_unit() * rule.jitter;
        if scaled == 0.0 {
            Draw::None
        } else {
            Draw::Scaled(scaled)
        }
    }
}

/// ARGV[10] and ARGV[11]: what `hold` and `resume` take (nothing for the
/// other operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    /// No further arguments.
    None,
    /// `hold`: the floor's wait from the store's now, ns (at most 2^52 − 1).
    Hold { wait_ns: u64 },
    /// `resume`: the level, its backoff in ns (at most 2^52 − 1).
    Resume { backoff_ns: u64, attempts: u32 },
}

/// The largest backoff or floor the script takes, in ns: 2^52 − 1, exact
/// in a Lua number (the core's `Settings::MAX_BACKOFF`).
const MAX_NS: u64 = (1 << 52) - 1;

impl Extra {
    /// `hold` for `wait` (cut to the largest backoff).
    pub(crate) fn hold(wait: Duration) -> Self {
        Extra::Hold {
            wait_ns: saturating_nanos(wait).min(MAX_NS),
        }
    }

    /// `resume` at `level` (its backoff cut to the largest).
    pub(crate) fn resume(level: Level) -> Self {
        Extra::Resume {
            backoff_ns: saturating_nanos(level.backoff).min(MAX_NS),
            attempts: level.attempts,
        }
    }
}

/// One operation as the caller asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request<'a> {
    pub(crate) op: Op,
    /// The caller's key (errors name it).
    pub(crate) key: &'a str,
    pub(crate) event: Event,
    pub(crate) id: Option<OpId>,
    /// What `hold` and `resume` take.
    pub(crate) extra: Extra,
}

impl Request<'_> {
    /// The script call that carries it, made now: the clock is read and,
    /// if the operation may advance, a jitter draw taken.
    pub(crate) fn call<'r>(
        &self,
        prefix: &str,
        time: &TimeSource,
        rule: &'r Rule,
        draws: &UnitDraws,
    ) -> Call<'r> {
        Call {
            redis_key: redis_key(prefix, self.key),
            op: self.op,
            now: time.now(),
            age_ns: self.event.age_nanos(),
            rule,
            draw: Draw::for_op(self.op, rule, draws),
            id: self.id,
            extra: self.extra,
        }
    }
}

/// One script call: everything after the script's hash in
/// `EVALSHA sha 1 KEYS[1] ARGV[1..9]` (and ARGV[10..11] for `hold` and
/// `resume`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call<'a> {
    /// KEYS[1]: the entry's Redis key.
    pub(crate) redis_key: String,
    /// ARGV[1].
    pub(crate) op: Op,
    /// ARGV[2].
    pub(crate) now: ScriptNow,
    /// ARGV[3]: the event's age in nanoseconds (negative: in the future).
    pub(crate) age_ns: i64,
    /// ARGV[4], ARGV[5], ARGV[7], ARGV[8].
    pub(crate) rule: &'a Rule,
    /// ARGV[6].
    pub(crate) draw: Draw,
    /// ARGV[9]: the operation id (sent as `""` when there is none).
    pub(crate) id: Option<OpId>,
    /// ARGV[10] and ARGV[11], when the operation takes them.
    pub(crate) extra: Extra,
}

impl Call<'_> {
    /// Whether the script wrote the entry when it answered `reply`: an
    /// advance (`SET`), a refusal under an id (`SET ... KEEPTTL`), a removal
    /// (`DEL` answered 1).
    pub(crate) fn wrote(&self, reply: &Reply) -> bool {
        match reply {
            Reply::Level { .. } => matches!(self.op, Op::Next | Op::TryNext),
            Reply::Refused { .. } => self.id.is_some(),
            Reply::Number(n) => {
                *n == 1 && matches!(self.op, Op::Reset | Op::GcKey | Op::Hold | Op::Resume)
            }
            Reply::Standing { .. } | Reply::NotOurs { .. } => false,
        }
    }
}

impl ToRedisArgs for Call<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        out.write_arg(b"1"); // one key
        out.write_arg(self.redis_key.as_bytes());
        out.write_arg(self.op.name().as_bytes());
        match self.now {
            ScriptNow::RedisTime => out.write_arg(b""),
            ScriptNow::Nanos(now) => now.write_redis_args(out),
        }
        self.age_ns.write_redis_args(out);
        self.rule.initial_ns.write_redis_args(out);
        self.rule.max_ns.write_redis_args(out);
        match self.draw {
            Draw::None => out.write_arg(b"0"),
            Draw::Scaled(scaled) => scaled.write_redis_args(out),
        }
        self.rule.expire_after_ns.write_redis_args(out);
        self.rule.ttl_ms.write_redis_args(out);
        match self.id {
            None => out.write_arg(b""),
            Some(id) => id.0.write_redis_args(out),
        }
        match self.extra {
            Extra::None => {}
            Extra::Hold { wait_ns } => wait_ns.write_redis_args(out),
            Extra::Resume {
                backoff_ns,
                attempts,
            } => {
                backoff_ns.write_redis_args(out);
                attempts.write_redis_args(out);
            }
        }
    }

    fn num_of_args(&self) -> usize {
        match self.extra {
            Extra::None => 11,
            Extra::Hold { .. } => 12,
            Extra::Resume { .. } => 13,
        }
    }
}

/// What the script answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `next` or `try_next` advanced the entry, or `level` read a live one:
    /// `{1, backoff_ns, attempts}`.
    Level { backoff_ns: u64, attempts: u32 },
    /// `try_next` refused: `{0, remaining_ns}`.
    Refused { remaining_ns: u64 },
    /// Any other operation: an integer (a backoff, a count, a wait with 0
    /// for none, or a flag 0 or 1).
    Number(u64),
    /// `standing`: the key's level if its entry is live, and the wait it
    /// has left (0 for none): `{2, live, backoff_ns, attempts, remaining_ns}`.
    Standing {
        level: Option<(u64, u32)>,
        remaining_ns: u64,
    },
    /// The key holds something that is not one of our entries:
    /// `{-1, what is wrong}`.
    NotOurs { detail: String },
}

impl Reply {
    /// The integer of an operation that answers one.
    pub(crate) fn number(self) -> Option<u64> {
        match self {
            Reply::Number(n) => Some(n),
            _ => None,
        }
    }
}

impl FromRedisValue for Reply {
    fn from_redis_value(v: Value) -> Result<Self, ParsingError> {
        match v {
            Value::Int(_) => non_negative(&v).map(Reply::Number),
            Value::Array(items) => {
                let mut items = items.into_iter();
                let flag = match items.next() {
                    Some(v) => i64::from_redis_value(v)?,
                    None => return Err("an empty array".into()),
                };
                let rest: Vec<Value> = items.collect();
                match (flag, rest.as_slice()) {
                    (-1, [detail, ..]) => Ok(Reply::NotOurs {
                        detail: String::from_redis_value_ref(detail)?,
                    }),
                    (-1, []) => Ok(Reply::NotOurs {
                        detail: "an entry that is not ours".to_owned(),
                    }),
                    (1, [backoff, attempts]) => Ok(Reply::Level {
                        backoff_ns: non_negative(backoff)?,
                        attempts: attempts_of(attempts)?,
                    }),
                    (0, [remaining]) => Ok(Reply::Refused {
                        remaining_ns: non_negative(remaining)?,
                    }),
                    (2, [live, backoff, attempts, remaining]) => Ok(Reply::Standing {
                        level: match non_negative(live)? {
                            0 => None,
                            _ => Some((non_negative(backoff)?, attempts_of(attempts)?)),
                        },
                        remaining_ns: non_negative(remaining)?,
                    }),
                    _ => Err("an array of the wrong shape".into()),
                }
            }
            _ => Err("a reply of the wrong type".into()),
        }
    }
}

/// An attempt count.
fn attempts_of(v: &Value) -> Result<u32, ParsingError> {
    u32::try_from(non_negative(v)?).map_err(|_| "an attempt count out of range".into())
}

/// An integer that must not be negative (redis-rs would wrap it into a
/// `u64`).
fn non_negative(v: &Value) -> Result<u64, ParsingError> {
    u64::try_from(i64::from_redis_value_ref(v)?).map_err(|_| "a negative number".into())
}

/// The Redis key of `key`'s entry under `prefix`: `prefix:key`, with `%`
/// and `:` in `key` written `%25` and `%3A`.
pub(crate) fn redis_key(prefix: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1 + key.len());
    out.push_str(prefix);
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

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
