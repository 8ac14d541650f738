//! `RedisBackoffBuilder`: the store's settings, checked when it is built.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::__private::{UnitDraws, resolved, saturating_nanos};
use keyed_backoff::clock::{Clock, ClockInstant};
use keyed_backoff::{Backoff, ConfigError, Settings};
use redis::aio::ConnectionLike;

use crate::RedisBackoff;
use crate::fallback::Fallback;
use crate::near::NearCache;
use crate::script::Replicas;

/// Where the store's now comes from.
#[derive(Clone)]
pub(crate) enum Now {
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
/// use keyed_backoff_redis::RedisBackoff;
/// use std::time::Duration;
/// let b = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .jitter(0.1)
///     .expire_after(Duration::from_secs(600))
///     .prefix("restarts")
///     .timeout(Duration::from_millis(100));
/// # let _ = b;
/// ```
#[must_use = "a builder does nothing until .build() is called"]
#[derive(Clone)]
pub struct RedisBackoffBuilder {
    settings: Settings,
    prefix: String,
    timeout: Duration,
    now: Now,
    fallback: Option<Duration>,
    near_cache: bool,
    replicas: Option<(u32, Duration)>,
}

impl fmt::Debug for RedisBackoffBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackoffBuilder")
            .field("settings", &self.settings)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("redis_time", &matches!(self.now, Now::Redis))
            .field("fallback", &self.fallback)
            .field("near_cache", &self.near_cache)
            .field("wait_for_replicas", &self.replicas)
            .finish()
    }
}

impl RedisBackoffBuilder {
    /// client-go's jitter factor: each step adds `U[0,1) · jitter ·
    /// previous backoff` before the cap. Default 0; finite and `>= 0`.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).jitter(0.5);
    /// ```
    pub fn jitter(mut self, factor: f64) -> Self {
        self.settings = self.settings.jitter(factor);
        self
    }

    /// Seed for the jitter draws (made in this client). Default: random.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).seed(7);
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings = self.settings.seed(seed);
        self
    }

    /// Expiry after a fixed window: an entry untouched for longer starts
    /// over. Default `2·max`. At most [`MAX_BACKOFF`](keyed_backoff::MAX_BACKOFF).
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .expire_after(Duration::from_secs(600));
    /// ```
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.settings = self.settings.expire_after(window);
        self
    }

    /// Prefix of every Redis key: an entry for `k` lives at `prefix:k`.
    /// Default `keyed-backoff`. Must not be empty.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).prefix("image-pull");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest an operation may take before it fails with
    /// [`StoreError::TimedOut`](crate::StoreError::TimedOut). Default 250 ms; from 1 ms to 1 hour.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
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
    /// is answered by an in-process [`Backoff`](keyed_backoff::Backoff) with the
    /// same settings (a circuit breaker), then Redis is tried again.
    /// Answers during that time are this process's alone, not the fleet's;
    /// [`fallback_answers`](RedisBackoff::fallback_answers) counts them.
    /// Default: off (fail closed). `open_for` from 1 ms to 1 hour.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .fallback(Duration::from_secs(5));
    /// ```
    pub fn fallback(mut self, open_for: Duration) -> Self {
        self.fallback = Some(open_for);
        self
    }

    /// Answer a gate ([`try_next`](RedisBackoff::try_next)) in process,
    /// without a round trip, while this store already knows the key is in
    /// backoff: after this store advanced the key, or was refused, until
    /// the end of that backoff. The answer cannot change before then except
    /// by a reset: a [`reset`](RedisBackoff::reset) through this store is
    /// seen at once, but a reset by another replica only when the
    /// remembered window ends (never later than the key's backoff). Calls
    /// with an [`OpId`](crate::OpId) always go to Redis. Default: off.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let builder = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60)).near_cache(true);
    /// # let _ = builder;
    /// ```
    pub fn near_cache(mut self, on: bool) -> Self {
        self.near_cache = on;
        self
    }

    /// Durability across a failover: every operation that writes (an
    /// advance, a refusal remembered under an [`OpId`](crate::OpId), a
    /// reset, a collection) is followed, in the same round trip, by Redis
    /// `WAIT replicas timeout`, and is acknowledged only once that many
    /// replicas hold it. If fewer do within `timeout`, the operation fails
    /// with [`StoreError::NotReplicated`](crate::StoreError::NotReplicated)
    /// (it ran on the master; the outcome is unknown). A replica promoted
    /// after the master dies then holds every advance the fleet was told
    /// about. Default: off (an acknowledged advance can be lost in a
    /// failover; the repository's `docs/fleet.md` gives the measurements).
    ///
    /// `replicas` from 1 to 100; `timeout` from 1 ms to less than the
    /// operation's [`timeout`](Self::timeout), which bounds the whole call.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .timeout(Duration::from_millis(500))
    ///     .wait_for_replicas(1, Duration::from_millis(200));
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some((replicas, timeout));
        self
    }

    /// Read now from `clock` instead of Redis `TIME`, in nanoseconds since
    /// the instant the store is built. For tests and replays (a
    /// [`MockClock`](keyed_backoff::clock::MockClock)): instances built at
    /// different moments do not share a time line, so a fleet should keep
    /// Redis time. Entries still expire in real time, after at least a day.
    ///
    /// ```
    /// use keyed_backoff::clock::MockClock;
    /// use keyed_backoff_redis::RedisBackoff;
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
    /// Errors: `initial`, `max` or the expiry window above [`MAX_BACKOFF`](keyed_backoff::MAX_BACKOFF);
    /// `jitter` NaN, infinite or negative; an empty `prefix`; a `timeout`
    /// outside 1 ms ..= 1 h; `wait_for_replicas` outside its ranges.
    ///
    /// ```
    /// # async fn run(conn: redis::aio::ConnectionManager) {
    /// use keyed_backoff_redis::RedisBackoff;
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
        let settings = self.settings.validate()?;
        let rule = resolved(&settings);
        // Resolved here, so that the fallback draws the same stream.
        let seed = rule.seed.unwrap_or_else(rand::random);
        let (max, window) = (rule.max, rule.expire_after);
        if self.prefix.is_empty() {
            return Err(ConfigError::new("prefix", "a non-empty string", "\"\""));
        }
        let timeout = millisecond_to_hour("timeout", self.timeout)?;
        let replicas = match self.replicas {
            None => None,
            Some((count, wait)) => {
                if !(1..=100).contains(&count) {
                    return Err(ConfigError::new(
                        "wait_for_replicas.replicas",
                        "from 1 to 100",
                        count.to_string(),
                    ));
                }
                if wait < Duration::from_millis(1) || wait >= timeout {
                    return Err(ConfigError::new(
                        "wait_for_replicas.timeout",
                        format!("from 1 ms to less than the operation timeout ({timeout:?})"),
                        format!("{wait:?}"),
                    ));
                }
                Some(Replicas {
                    count,
                    timeout_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                })
            }
        };
        let fallback = match self.fallback {
            None => None,
            Some(open_for) => {
                let open_for = millisecond_to_hour("fallback", open_for)?;
                let local = Backoff::<String>::from_settings(settings.seed(seed));
                Some(Arc::new(Fallback::new(local.build()?, open_for)))
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
            initial_ns: saturating_nanos(rule.initial),
            max_ns: saturating_nanos(max),
            jitter: rule.jitter,
            window_ns: saturating_nanos(window),
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1),
            timeout,
            draws: Arc::new(UnitDraws::new(seed)),
            now: self.now,
            fallback,
            near: self.near_cache.then(|| Arc::new(NearCache::new())),
            replicas,
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

impl RedisBackoff<()> {
    /// A builder starting from `initial` and `max` (client-go's rule).
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let _ = RedisBackoff::builder(Duration::from_millis(5), Duration::from_secs(1000));
    /// ```
    pub fn builder(initial: Duration, max: Duration) -> RedisBackoffBuilder {
        RedisBackoffBuilder {
            settings: Settings::new(initial, max),
            prefix: "keyed-backoff".to_string(),
            timeout: Duration::from_millis(250),
            now: Now::Redis,
            fallback: None,
            near_cache: false,
            replicas: None,
        }
    }
}
