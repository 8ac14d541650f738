//! `RedisBackoffBuilder`: the store's settings, checked when it is built.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::__private::{UnitDraws, saturating_nanos};
use keyed_backoff::clock::{Clock, ClockInstant};
use keyed_backoff::{Backoff, ConfigError, Settings};
use redis::aio::{ConnectionLike, ConnectionManager};

use crate::connection::fail_fast;
use crate::error::Address;
use crate::fallback::Fallback;
use crate::near_cache::NearCache;
use crate::protocol::{Rule, TimeSource};
use crate::store::RedisBackoff;
use crate::transport::{Replicas, Transport};

/// Builds a [`RedisBackoff`]; made by [`RedisBackoff::builder`].
///
/// Defaults: no jitter, client-go's `expire_after` (`2·max`), a random
/// seed, the key prefix `keyed-backoff`, a 250 ms timeout per operation,
/// Redis `TIME` as the clock, no fallback (a failure is an `Err`), no near
/// cache, no waiting for replicas. Only a fixed `expire_after` exists here:
/// a custom expiry function cannot run inside Redis.
///
/// ```
/// use keyed_backoff_redis::RedisBackoff;
/// use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), keyed_backoff_redis::ConfigError> {
/// let backoff = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .jitter(0.1)
///     .expire_after(Duration::from_secs(600))
///     .prefix("restarts")
///     .timeout(Duration::from_millis(100))
///     .open("redis://127.0.0.1:6379/") // connects on first use
///     .await?;
/// assert_eq!(backoff.redis_key("pod-a"), "restarts:pod-a");
/// # Ok(())
/// # }
/// ```
#[must_use = "a builder does nothing until .open() or .build() is called"]
#[derive(Clone)]
pub struct RedisBackoffBuilder {
    settings: Settings,
    prefix: String,
    timeout: Duration,
    time: TimeSource,
    fallback: Option<Duration>,
    near_cache: bool,
    replicas: Option<(u32, Duration)>,
    address: Option<String>,
}

impl fmt::Debug for RedisBackoffBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackoffBuilder")
            .field("settings", &self.settings)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("redis_time", &matches!(self.time, TimeSource::Redis))
            .field("fallback", &self.fallback)
            .field("near_cache", &self.near_cache)
            .field("wait_for_replicas", &self.replicas)
            .field("address", &self.address)
            .finish()
    }
}

impl RedisBackoffBuilder {
    /// client-go's jitter: each step adds `U[0,1) · jitter · previous
    /// backoff` before the cap. Finite and `>= 0`.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.settings = self.settings.jitter(jitter);
        self
    }

    /// Seed for the jitter draws (made in this client).
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings = self.settings.seed(seed);
        self
    }

    /// The window after which an untouched entry is forgotten (the next
    /// failure starts over at `initial`). At most
    /// [`MAX_BACKOFF`](keyed_backoff::Settings::MAX_BACKOFF).
    pub fn expire_after(mut self, expire_after: Duration) -> Self {
        self.settings = self.settings.expire_after(expire_after);
        self
    }

    /// Prefix of every Redis key: an entry for `k` lives at `prefix:k`.
    /// Must not be empty.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest an operation may take before it fails with
    /// [`StoreError::TimedOut`](crate::StoreError::TimedOut): from 1 ms to 1
    /// hour.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How errors name the server (see
    /// [`Address`](crate::Address)), for a connection given to
    /// [`build`](Self::build), which cannot tell: `host:port`, or a name
    /// an operator recognizes. [`open`](Self::open) takes the URL's host
    /// and port instead. Without it, errors of a built store say
    /// `"the connection given to build"`.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// let builder = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .address("redis-sessions.internal:6379");
    /// # let _ = builder;
    /// ```
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }

    /// Opt-in fallback while Redis is down: after an operation fails as
    /// unreachable (unavailable, timed out, or not answering as Redis
    /// does), every operation for the next `open_for`
    /// is answered by an in-process [`Backoff`](keyed_backoff::Backoff) with the
    /// same settings (a circuit breaker), then Redis is tried again.
    /// Answers during that time are this process's alone, not the fleet's;
    /// [`stats`](RedisBackoff::stats) counts them.
    /// Without it a failure is an `Err` (fail closed). `open_for` from 1 ms
    /// to 1 hour.
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
    /// with an [`OpId`](crate::OpId) always go to Redis.
    pub fn near_cache(mut self, on: bool) -> Self {
        self.near_cache = on;
        self
    }

    /// Durability across a failover: every operation that writes (an
    /// advance, a refusal remembered under an [`OpId`](crate::OpId), a
    /// reset, a removal by [`gc_key`](RedisBackoff::gc_key)) is followed, in the same round trip, by Redis
    /// `WAIT replicas timeout`, and is acknowledged only once that many
    /// replicas hold it. If fewer do within `timeout`, the operation fails
    /// with [`StoreError::NotReplicated`](crate::StoreError::NotReplicated)
    /// (it ran on the master; the outcome is unknown). A replica promoted
    /// after the master dies then holds every advance the fleet was told
    /// about. Without it an acknowledged advance can be lost in a failover
    /// (the repository's `docs/fleet.md` gives the measurements).
    ///
    /// `replicas` from 1 to 100; `timeout` from 1 ms to less than the
    /// operation's [`timeout`](Self::timeout), which bounds the whole call.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some((replicas, timeout));
        self
    }

    /// Read now from `clock` instead of Redis `TIME`, in nanoseconds since
    /// the instant the store is built. For tests and replays (a
    /// [`MockClock`](keyed_backoff::clock::MockClock)): instances built at
    /// different moments do not share a time line, so a fleet should keep
    /// Redis time. Entries still expire in real time, after at least a day.
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        let epoch = clock.now();
        self.time = TimeSource::Caller(Arc::new(move || clock.now().nanos_since(epoch)));
        self
    }

    /// Validates the settings and builds the store on the Redis server at
    /// `url` (`redis://host:port/db`, or `rediss://` with a TLS feature of
    /// redis-rs), through a
    /// [`ConnectionManager`](redis::aio::ConnectionManager) that fails fast
    /// ([`fail_fast`](crate::fail_fast) with the operation's
    /// [`timeout`](Self::timeout)). The connection is made on first use and
    /// made again after it is lost, so a store opened while Redis is down
    /// works once it is up.
    ///
    /// While the server refuses connections (not started, killed,
    /// restarting) every operation fails at once with
    /// [`StoreError::Unavailable`](crate::StoreError::Unavailable): it did
    /// not run. A server that accepts but does not answer (overloaded,
    /// frozen) makes an operation fail after the timeout with
    /// [`StoreError::TimedOut`](crate::StoreError::TimedOut): it may have
    /// run. Call it inside a Tokio runtime (the connection is driven by a
    /// task of its own).
    ///
    /// Errors: those of [`build`](Self::build), and `url` when it is not a
    /// Redis URL.
    ///
    /// ```
    /// use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Nothing listens on port 1: the operation fails at once, without
    /// // having run, instead of waiting out the timeout.
    /// let backoff = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .open("redis://127.0.0.1:1/")
    ///     .await?;
    /// let err = backoff.next("host-a", Event::now()).await.unwrap_err();
    /// assert!(matches!(err, StoreError::Unavailable { .. }));
    ///
    /// let typo = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .open("127.0.0.1:6379")
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(typo.field(), "url");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(self, url: &str) -> Result<RedisBackoff<ConnectionManager>, ConfigError> {
        let not_a_url = |e: redis::RedisError| {
            ConfigError::new(
                "url",
                "a Redis URL such as redis://127.0.0.1:6379/",
                format!("{url:?} ({e})"),
            )
        };
        let client = redis::Client::open(url).map_err(not_a_url)?;
        let address = client.get_connection_info().addr().to_string();
        let config = fail_fast(self.timeout);
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(not_a_url)?;
        self.address(address).build(conn)
    }

    /// Validates the settings and builds the store on `conn`: a
    /// [`ConnectionManager`](redis::aio::ConnectionManager) (which
    /// reconnects by itself; set it up with [`fail_fast`](crate::fail_fast),
    /// or use [`open`](Self::open)), a cluster connection, or any other
    /// async connection.
    ///
    /// Errors: `initial`, `max` or `expire_after` above
    /// [`MAX_BACKOFF`](keyed_backoff::Settings::MAX_BACKOFF); `jitter` NaN, infinite
    /// or negative; an empty `prefix`; a `timeout` outside 1 ms ..= 1 h;
    /// `wait_for_replicas` outside its ranges.
    ///
    /// ```
    /// use keyed_backoff_redis::RedisBackoff;
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .prefix("")
    ///     .open("redis://127.0.0.1:6379/")
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "prefix");
    /// assert_eq!(err.allowed(), "a non-empty string");
    /// # }
    /// ```
    pub fn build<C>(self, conn: C) -> Result<RedisBackoff<C>, ConfigError>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let settings = self.settings.validate()?;
        let resolved = keyed_backoff::__private::resolved(&settings);
        // Resolved here, so that the fallback draws the same stream.
        let seed = resolved.seed.unwrap_or_else(rand::random);
        let (max, expire_after) = (resolved.max, resolved.expire_after);
        if self.prefix.is_empty() {
            return Err(ConfigError::new("prefix", "a non-empty string", "\"\""));
        }
        let timeout = millisecond_to_hour("timeout", self.timeout)?;
        let address = match &self.address {
            Some(address) if address.is_empty() => {
                return Err(ConfigError::new("address", "a non-empty string", "\"\""));
            }
            Some(address) => address.as_str(),
            None => "the connection given to build",
        };
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
        // `expire_after`, plus `max` for checks whose event time lags behind.
        let mut ttl = expire_after.saturating_add(max);
        if matches!(self.time, TimeSource::Caller(_)) {
            ttl = ttl.max(Duration::from_secs(86_400));
        }
        Ok(RedisBackoff {
            transport: Transport::new(conn, Address::new(address), timeout, replicas),
            prefix: self.prefix,
            rule: Rule {
                initial_ns: saturating_nanos(resolved.initial),
                max_ns: saturating_nanos(max),
                jitter: resolved.jitter,
                expire_after_ns: saturating_nanos(expire_after),
                ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1),
            },
            draws: Arc::new(UnitDraws::new(seed)),
            time: self.time,
            fallback,
            near: self.near_cache.then(|| Arc::new(NearCache::new())),
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
    /// A builder starting from `initial` and `max` (client-go's strategy).
    pub fn builder(initial: Duration, max: Duration) -> RedisBackoffBuilder {
        RedisBackoff::from_settings(Settings::new(initial, max))
    }

    /// A builder starting from `settings`, the value the in-process manager
    /// takes ([`Backoff::from_settings`]), so both follow one rule and are
    /// validated alike; with the same seed they draw the same jitter.
    ///
    /// ```
    /// use keyed_backoff_redis::keyed_backoff::Backoff;
    /// use keyed_backoff_redis::{RedisBackoff, Settings};
    /// use std::time::Duration;
    /// let rule = Settings::new(Duration::from_secs(1), Duration::from_secs(60)).jitter(0.2).seed(7);
    /// let local = Backoff::<String>::from_settings(rule.clone()).build()?;
    /// let shared = RedisBackoff::from_settings(rule).prefix("payments");
    /// # let _ = (local, shared);
    /// # Ok::<(), keyed_backoff_redis::ConfigError>(())
    /// ```
    pub fn from_settings(settings: Settings) -> RedisBackoffBuilder {
        RedisBackoffBuilder {
            settings,
            prefix: "keyed-backoff".to_string(),
            timeout: Duration::from_millis(250),
            time: TimeSource::Redis,
            fallback: None,
            near_cache: false,
            replicas: None,
            address: None,
        }
    }
}
