//! One backoff per key across a fleet: the keyed manager's operations on a
//! Redis store (feature `redis`).
//!
//! N replicas that each keep their own [`Backoff`](crate::Backoff) multiply
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
//! use keyed_backoff::fleet::{Event, RedisBackoff};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
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

mod error;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionLike;

pub use error::StoreError;

use crate::InBackoff;
use crate::clock::{Clock, ClockInstant};
use crate::draws::UnitDraws;
use crate::duration::saturating_nanos;
use crate::error::{ConfigError, finite_at_least, within_max_backoff};

/// The script every operation runs.
static SCRIPT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("entry.lua")));

/// When the event being judged happened, as an age: how long before the
/// store's now (negative ages are in the future).
///
/// Process instants cannot cross machines, but an age can: the caller
/// measures it on its own monotonic clock, and the store subtracts it from
/// its own now (Redis `TIME`). With Redis time an age is rounded to the
/// microsecond.
///
/// ```
/// use keyed_backoff::fleet::Event;
/// use std::time::{Duration, Instant};
/// let finished = Instant::now();
/// let _e = Event::since(finished); // the container finished this long ago
/// assert_eq!(Event::ago(Duration::from_secs(2)).age_nanos(), 2_000_000_000);
/// assert_eq!(Event::ahead(Duration::from_secs(1)).age_nanos(), -1_000_000_000);
/// assert_eq!(Event::now().age_nanos(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    age_ns: i64,
}

impl Event {
    /// The event is now.
    ///
    /// ```
    /// assert_eq!(keyed_backoff::fleet::Event::now().age_nanos(), 0);
    /// ```
    pub fn now() -> Self {
        Event { age_ns: 0 }
    }

    /// The event happened `age` ago (saturating at about 292 years).
    ///
    /// ```
    /// use keyed_backoff::fleet::Event;
    /// assert_eq!(Event::ago(std::time::Duration::from_millis(3)).age_nanos(), 3_000_000);
    /// ```
    pub fn ago(age: Duration) -> Self {
        Event {
            age_ns: i64::try_from(saturating_nanos(age)).unwrap_or(i64::MAX),
        }
    }

    /// The event is `ahead` in the future.
    ///
    /// ```
    /// use keyed_backoff::fleet::Event;
    /// assert_eq!(Event::ahead(std::time::Duration::from_nanos(5)).age_nanos(), -5);
    /// ```
    pub fn ahead(ahead: Duration) -> Self {
        Event {
            age_ns: -Event::ago(ahead).age_ns,
        }
    }

    /// The event happened at `instant` on this process's monotonic clock.
    ///
    /// ```
    /// use keyed_backoff::fleet::Event;
    /// assert!(Event::since(std::time::Instant::now()).age_nanos() >= 0);
    /// ```
    pub fn since(instant: std::time::Instant) -> Self {
        Event::ago(instant.elapsed())
    }

    /// The event at `event`, judged at `now`, on any crate clock.
    ///
    /// ```
    /// use keyed_backoff::clock::MockInstant;
    /// use keyed_backoff::fleet::Event;
    /// let e = Event::between(MockInstant::from_nanos(4), MockInstant::from_nanos(10));
    /// assert_eq!(e.age_nanos(), 6);
    /// ```
    pub fn between<I: ClockInstant>(event: I, now: I) -> Self {
        Event {
            age_ns: now.nanos_since(event),
        }
    }

    /// The age in nanoseconds (negative: in the future).
    ///
    /// ```
    /// assert_eq!(keyed_backoff::fleet::Event::now().age_nanos(), 0);
    /// ```
    pub fn age_nanos(self) -> i64 {
        self.age_ns
    }
}

/// Identifies one `next`, so that a caller retrying after a timeout cannot
/// advance the key twice: the store answers a repeated id with the entry it
/// already made.
///
/// ```
/// use keyed_backoff::fleet::OpId;
/// assert_ne!(OpId::new(), OpId::new());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(u64);

impl OpId {
    /// A fresh random id.
    ///
    /// ```
    /// let _id = keyed_backoff::fleet::OpId::new();
    /// ```
    #[allow(clippy::new_without_default)] // a default id would not be fresh
    pub fn new() -> Self {
        OpId(rand::random())
    }
}

/// Where the store's now comes from.
#[derive(Clone)]
enum Now {
    /// Redis `TIME`, in microseconds.
    Redis,
    /// A caller's clock, in nanoseconds since the store's epoch.
    Caller(Arc<dyn Fn() -> i64 + Send + Sync>),
}

/// Builds a [`RedisBackoff`]; made by [`RedisBackoff::builder`].
///
/// Defaults: no jitter, client-go's expiry (`2·max`), a random seed, the
/// key prefix `keyed-backoff`, a 250 ms timeout per operation, Redis `TIME`,
/// no fallback (a failure is an `Err`).
/// Only fixed expiry windows exist here: a custom expiry function cannot run
/// inside Redis.
///
/// ```
/// use keyed_backoff::fleet::RedisBackoff;
/// use std::time::Duration;
/// let b = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .jitter(0.1)
///     .expire_after(Duration::from_secs(600))
///     .prefix("restarts")
///     .timeout(Duration::from_millis(100));
/// # let _ = b;
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct RedisBackoffBuilder {
    initial: Duration,
    max: Duration,
    jitter: f64,
    seed: Option<u64>,
    window: Option<Duration>,
    prefix: String,
    timeout: Duration,
    now: Now,
    fallback: Option<Duration>,
}

impl RedisBackoffBuilder {
    /// client-go's jitter factor: each step adds `U[0,1) · jitter ·
    /// previous backoff` before the cap. Default 0; finite and `>= 0`.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).jitter(0.5);
    /// ```
    pub fn jitter(mut self, factor: f64) -> Self {
        self.jitter = factor;
        self
    }

    /// Seed for the jitter draws (made in this client). Default: random.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).seed(7);
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Expiry after a fixed window: an entry untouched for longer starts
    /// over. Default `2·max`. At most [`MAX_BACKOFF`](crate::MAX_BACKOFF).
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .expire_after(Duration::from_secs(600));
    /// ```
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.window = Some(window);
        self
    }

    /// Prefix of every Redis key: an entry for `k` lives at `prefix:k`.
    /// Default `keyed-backoff`. Must not be empty.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).prefix("image-pull");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest an operation may take before it fails with
    /// [`StoreError::TimedOut`]. Default 250 ms; from 1 ms to 1 hour.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .timeout(Duration::from_millis(50));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Opt-in fallback while Redis is down: after an operation fails as
    /// unavailable or timed out, every operation for the next `open_for`
    /// is answered by an in-process [`Backoff`](crate::Backoff) with the
    /// same settings (a circuit breaker), then Redis is tried again.
    /// Answers during that time are this process's alone, not the fleet's;
    /// [`fallback_answers`](RedisBackoff::fallback_answers) counts them.
    /// Default: off (fail closed). `open_for` from 1 ms to 1 hour.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .fallback(Duration::from_secs(5));
    /// ```
    pub fn fallback(mut self, open_for: Duration) -> Self {
        self.fallback = Some(open_for);
        self
    }

    /// Read now from `clock` instead of Redis `TIME`, in nanoseconds since
    /// the instant the store is built. For tests and replays (a
    /// [`MockClock`](crate::clock::MockClock)): instances built at
    /// different moments do not share a time line, so a fleet should keep
    /// Redis time. Entries still expire in real time, after at least a day.
    ///
    /// ```
    /// use keyed_backoff::clock::MockClock;
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).clock(MockClock::new());
    /// ```
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        let epoch = clock.now();
        self.now = Now::Caller(Arc::new(move || clock.now().nanos_since(epoch)));
        self
    }

    /// Validates the settings and builds the store on `conn`: a
    /// [`redis::aio::ConnectionManager`] (which reconnects by itself), a
    /// cluster connection, or any other async connection.
    ///
    /// Errors: `initial`, `max` or the expiry window above [`MAX_BACKOFF`](crate::MAX_BACKOFF);
    /// `jitter` NaN, infinite or negative; an empty `prefix`; a `timeout`
    /// outside 1 ms ..= 1 h.
    ///
    /// ```
    /// # async fn run(conn: redis::aio::ConnectionManager) {
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let err = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .prefix("")
    ///     .build(conn)
    ///     .err()
    ///     .unwrap();
    /// assert_eq!(err.field(), "prefix");
    /// # }
    /// ```
    pub fn build<C>(self, conn: C) -> Result<RedisBackoff<C>, ConfigError>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let initial = within_max_backoff("initial", self.initial)?;
        let max = within_max_backoff("max", self.max)?;
        let jitter = finite_at_least("jitter", self.jitter, 0.0)?;
        let window = match self.window {
            Some(w) => within_max_backoff("expire_after", w)?,
            None => max.saturating_mul(2),
        };
        if self.prefix.is_empty() {
            return Err(ConfigError::new("prefix", "a non-empty string", "\"\""));
        }
        let timeout = millisecond_to_hour("timeout", self.timeout)?;
        let fallback = match self.fallback {
            None => None,
            Some(open_for) => {
                let open_for = millisecond_to_hour("fallback", open_for)?;
                let local = crate::Backoff::<String>::builder(initial, max)
                    .jitter(jitter)
                    .expire_after(window)
                    .build()?;
                Some(Arc::new(Fallback {
                    local,
                    open_for,
                    open_until: parking_lot::Mutex::new(None),
                    answers: std::sync::atomic::AtomicU64::new(0),
                }))
            }
        };
        // Redis forgets an entry once no operation can find it fresh: after
        // the window, plus `max` for checks whose event time lags behind.
        let mut ttl = window.saturating_add(max);
        if matches!(self.now, Now::Caller(_)) {
            ttl = ttl.max(Duration::from_secs(86_400));
        }
        Ok(RedisBackoff {
            conn,
            prefix: self.prefix,
            initial_ns: saturating_nanos(initial),
            max_ns: saturating_nanos(max),
            jitter,
            window_ns: saturating_nanos(window),
            ttl_ms: ttl.as_millis().max(1),
            timeout,
            draws: Arc::new(UnitDraws::new(self.seed.unwrap_or_else(rand::random))),
            now: self.now,
            fallback,
        })
    }
}

/// `d` if it lies in 1 ms ..= 1 h, else an error naming `field`.
fn millisecond_to_hour(field: &'static str, d: Duration) -> Result<Duration, ConfigError> {
    if (Duration::from_millis(1)..=Duration::from_secs(3600)).contains(&d) {
        Ok(d)
    } else {
        Err(ConfigError::new(
            field,
            "from 1 ms to 1 hour",
            format!("{d:?}"),
        ))
    }
}

/// client-go's per-key backoff, kept in Redis so a whole fleet shares it.
///
/// The operations of [`Backoff`](crate::Backoff), async, each one Lua
/// script (one round trip, atomic on the key), each returning
/// `Result<_, StoreError>`. Event times are [`Event`]s. Cloning is cheap
/// (the connection is cloned, as redis-rs connections are meant to be).
///
/// ```no_run
/// use keyed_backoff::fleet::{Event, RedisBackoff};
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
    ttl_ms: u128,
    timeout: Duration,
    draws: Arc<UnitDraws>,
    now: Now,
    fallback: Option<Arc<Fallback>>,
}

/// The in-process stand-in behind the circuit breaker.
struct Fallback {
    local: crate::Backoff<String>,
    open_for: Duration,
    /// While set and in the future, Redis is not asked.
    open_until: parking_lot::Mutex<Option<std::time::Instant>>,
    answers: std::sync::atomic::AtomicU64,
}

impl Fallback {
    fn is_open(&self) -> bool {
        self.open_until
            .lock()
            .is_some_and(|until| std::time::Instant::now() < until)
    }

    fn trip(&self) {
        *self.open_until.lock() = Some(std::time::Instant::now() + self.open_for);
    }

    /// `op` answered by the local manager; the event's age is measured back
    /// from this process's now.
    fn answer(&self, op: Op, key: &str, event: Event) -> Reply {
        use std::sync::atomic::Ordering;
        self.answers.fetch_add(1, Ordering::Relaxed);
        let now = std::time::Instant::now();
        let at = now.offset_by_nanos(event.age_ns.saturating_neg());
        let b = &self.local;
        let flag = |x: bool| Reply::Number(u64::from(x));
        let advanced = |d: Duration| Reply::Advanced {
            backoff_ns: saturating_nanos(d),
        };
        match op {
            Op::Next => advanced(b.next(key, at)),
            Op::Gate => match b.try_next(key, at) {
                Ok(d) => advanced(d),
                Err(w) => Reply::Refused {
                    remaining_ns: saturating_nanos(w.remaining),
                },
            },
            Op::Get => Reply::Number(saturating_nanos(b.get(key))),
            Op::Attempts => Reply::Number(u64::from(b.attempts(key))),
            Op::Remaining => Reply::Number(b.remaining(key, at).map_or(0, saturating_nanos)),
            Op::Since => flag(b.is_in_backoff_since(key, at)),
            Op::SinceUpdate => flag(b.is_in_backoff_since_update(key, at)),
            Op::Reset => flag(b.reset(key)),
            Op::Collect => flag(false), // the local manager has its own GC
        }
    }
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
            .finish_non_exhaustive()
    }
}

/// The script's operations (its first argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
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
    fn name(self) -> &'static str {
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
    fn advances(self) -> bool {
        matches!(self, Op::Next | Op::Gate)
    }
}

/// What the script answers for one operation.
enum Reply {
    Advanced { backoff_ns: u64 },
    Refused { remaining_ns: u64 },
    Number(u64),
}

impl RedisBackoff<()> {
    /// A builder starting from `initial` and `max` (client-go's rule).
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_millis(5), Duration::from_secs(1000));
    /// ```
    pub fn builder(initial: Duration, max: Duration) -> RedisBackoffBuilder {
        RedisBackoffBuilder {
            initial,
            max,
            jitter: 0.0,
            seed: None,
            window: None,
            prefix: "keyed-backoff".to_string(),
            timeout: Duration::from_millis(250),
            now: Now::Redis,
            fallback: None,
        }
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
    /// # use keyed_backoff::fleet::{Event, RedisBackoff};
    /// # use std::time::Duration;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
    /// let delay = b.next("host-a", Event::now()).await?;
    /// # let _ = delay; Ok(())
    /// # }
    /// ```
    pub async fn next(&self, key: &str, event: Event) -> Result<Duration, StoreError> {
        self.next_with(key, event, OpId::new()).await
    }

    /// [`next`](Self::next) under a caller's operation id: calling again
    /// with the same id (after a timeout, say) returns the entry the first
    /// call made instead of advancing again, as long as no other `next`
    /// has advanced the key since.
    ///
    /// ```no_run
    /// # use keyed_backoff::fleet::{Event, OpId, RedisBackoff, StoreError};
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
        match self.run(Op::Next, key, event, Some(id)).await? {
            Reply::Advanced { backoff_ns, .. } => Ok(Duration::from_nanos(backoff_ns)),
            _ => Err(StoreError::unexpected(key, "next was refused")),
        }
    }

    /// The gate, in one atomic step: `Err(InBackoff)` with the wait left if
    /// `key` is in backoff at `event`, otherwise `next`. Racing callers
    /// across the whole fleet advance a key exactly once per window.
    ///
    /// ```no_run
    /// # use keyed_backoff::fleet::{Event, RedisBackoff, StoreError};
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
        Ok(
            match self.run(Op::Gate, key, event, Some(OpId::new())).await? {
                Reply::Advanced { backoff_ns, .. } => Ok(Duration::from_nanos(backoff_ns)),
                Reply::Refused { remaining_ns } => Err(InBackoff {
                    remaining: Duration::from_nanos(remaining_ns),
                }),
                Reply::Number(_) => {
                    return Err(StoreError::unexpected(key, "a number from the gate"));
                }
            },
        )
    }

    /// client-go's `Get`: the current backoff, zero if there is no entry.
    ///
    /// ```no_run
    /// # use keyed_backoff::fleet::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>, finished: std::time::Instant) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
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
    /// # use keyed_backoff::fleet::RedisBackoff;
    /// # async fn run(b: RedisBackoff<redis::aio::ConnectionManager>) -> Result<(), keyed_backoff::fleet::StoreError> {
    /// let removed = b.collect("host-a").await?;
    /// # let _ = removed; Ok(())
    /// # }
    /// ```
    pub async fn collect(&self, key: &str) -> Result<bool, StoreError> {
        self.number(Op::Collect, key, Event::now())
            .await
            .map(|n| n == 1)
    }

    /// The Redis key that holds `key`'s entry: `prefix:key`.
    ///
    /// ```
    /// use keyed_backoff::fleet::RedisBackoff;
    /// use std::time::Duration;
    /// # async fn run(conn: redis::aio::ConnectionManager) -> Result<(), keyed_backoff::ConfigError> {
    /// let b = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(2)).prefix("p").build(conn)?;
    /// assert_eq!(b.redis_key("k"), "p:k");
    /// # Ok(())
    /// # }
    /// ```
    pub fn redis_key(&self, key: &str) -> String {
        format!("{}:{key}", self.prefix)
    }

    async fn number(&self, op: Op, key: &str, event: Event) -> Result<u64, StoreError> {
        match self.run(op, key, event, None).await? {
            Reply::Number(n) => Ok(n),
            _ => Err(StoreError::unexpected(key, "an entry instead of a number")),
        }
    }

    /// How many answers came from the in-process fallback (see
    /// [`RedisBackoffBuilder::fallback`]); always 0 without one.
    ///
    /// ```no_run
    /// # use keyed_backoff::fleet::RedisBackoff;
    /// # fn f(b: RedisBackoff<redis::aio::ConnectionManager>) {
    /// if b.fallback_answers() > 0 {
    ///     eprintln!("Redis was down; some backoffs were this process's alone");
    /// }
    /// # }
    /// ```
    pub fn fallback_answers(&self) -> u64 {
        self.fallback
            .as_ref()
            .map_or(0, |f| f.answers.load(std::sync::atomic::Ordering::Relaxed))
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
            return Ok(fallback.answer(op, key, event));
        }
        match self.run_script(op, key, event, id).await {
            Err(StoreError::Unavailable { .. } | StoreError::TimedOut { .. }) => {
                fallback.trip();
                Ok(fallback.answer(op, key, event))
            }
            other => other,
        }
    }

    /// One script call, bounded by the timeout.
    async fn run_script(
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
            .arg(event.age_ns)
            .arg(self.initial_ns)
            .arg(self.max_ns)
            .arg(self.jitter)
            .arg(draw)
            .arg(self.window_ns)
            .arg(self.ttl_ms.to_string())
            .arg(id.map_or(String::new(), |id| id.0.to_string()));
        let mut conn = self.conn.clone();
        let reply: redis::Value =
            match tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn)).await {
                Ok(result) => result.map_err(|e| StoreError::from_redis(key, e, self.timeout))?,
                Err(_) => {
                    return Err(StoreError::TimedOut {
                        after: self.timeout,
                    });
                }
            };
        parse(key, reply)
    }
}

fn parse(key: &str, reply: redis::Value) -> Result<Reply, StoreError> {
    use redis::Value;
    let int = |v: &Value| match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    match &reply {
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
