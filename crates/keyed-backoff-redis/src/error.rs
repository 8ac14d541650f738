//! What can go wrong talking to the store.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A store operation that did not complete. Every variant is something the
/// caller can act on; none means "no backoff". Where redis-rs reported the
/// failure, its [`redis::RedisError`] is the error's
/// [`source`](Error::source).
///
/// ```no_run
/// use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
/// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) {
/// match b.next("host-a", Event::now()).await {
///     Ok(delay) => println!("retry in {delay:?}"),
///     // The script did not run: nothing was counted, trying again is safe.
///     Err(e @ StoreError::Unavailable { .. }) => eprintln!("{e}: {:?}", std::error::Error::source(&e)),
///     // It may have run: retry under an `OpId` to count it once.
///     Err(e) if e.outcome_unknown() => eprintln!("{e}"),
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StoreError {
    /// Redis could not be reached (refused, dropped, reconnecting). The
    /// operation did not run.
    #[non_exhaustive]
    Unavailable {
        /// The server the store talks to (see [`Address`]).
        address: Address,
        /// What redis-rs reported.
        source: redis::RedisError,
    },
    /// No answer within the timeout. The script may still have run: the
    /// outcome is unknown (retry `next` with the same
    /// [`OpId`](crate::OpId) to be safe).
    #[non_exhaustive]
    TimedOut {
        /// The server the store talks to (see [`Address`]).
        address: Address,
        /// The configured timeout.
        after: Duration,
        /// What redis-rs reported, when it gave up first (its own response
        /// timeout); `None` when the operation's timeout ran out.
        source: Option<redis::RedisError>,
    },
    /// The server answered, but not as Redis does: the bytes were not
    /// Redis's protocol (the URL points at another kind of server, such as
    /// a web server, or a proxy in between mangled the reply). No entry is
    /// to blame. Treated as an unreachable store: the
    /// [`fallback`](crate::RedisBackoffBuilder::fallback) answers in its
    /// place. Whether the operation ran is unknown.
    #[non_exhaustive]
    Protocol {
        /// The server that answered (see [`Address`]).
        address: Address,
        /// What redis-rs could not read.
        source: redis::RedisError,
    },
    /// The key holds something that is not one of our entries (another
    /// program wrote it), or the reply made no sense. It is left untouched.
    #[non_exhaustive]
    Corrupt {
        /// The caller's key.
        key: String,
        /// What is wrong with the entry or the reply.
        detail: String,
        /// What redis-rs reported, when it saw the problem (a wrong type, a
        /// reply it could not read).
        source: Option<redis::RedisError>,
    },
    /// The operation ran on the master, but fewer replicas than
    /// [`wait_for_replicas`](crate::RedisBackoffBuilder::wait_for_replicas)
    /// asks for acknowledged it in time. A failover now may or may not
    /// keep it: the outcome is unknown (retry with the same
    /// [`OpId`](crate::OpId) to be safe).
    #[non_exhaustive]
    NotReplicated {
        /// The caller's key.
        key: String,
        /// How many replicas acknowledged the write.
        acked: u32,
        /// How many were asked for.
        wanted: u32,
    },
    /// Any other error reply from Redis (out of memory, a read-only
    /// replica, scripts disabled…).
    #[non_exhaustive]
    Redis {
        /// The server that answered (see [`Address`]).
        address: Address,
        /// What the server said.
        source: redis::RedisError,
    },
}

impl StoreError {
    /// Whether the operation may have taken effect even though it failed:
    /// a timeout, or a write too few replicas acknowledged.
    ///
    /// ```no_run
    /// use keyed_backoff_redis::{Event, OpId, RedisBackoff, StoreError};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) -> Result<(), StoreError> {
    /// let id = OpId::new();
    /// let delay = match b.next_with("host-a", Event::now(), id).await {
    ///     // It may have counted: the same id cannot count twice.
    ///     Err(e) if e.outcome_unknown() => b.next_with("host-a", Event::now(), id).await?,
    ///     other => other?,
    /// };
    /// # let _ = delay; Ok(())
    /// # }
    /// ```
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            StoreError::TimedOut { .. }
                | StoreError::Protocol { .. }
                | StoreError::NotReplicated { .. }
        )
    }

    /// Whether the store could not be asked: Redis could not be reached
    /// ([`Unavailable`](Self::Unavailable)), did not answer in time
    /// ([`TimedOut`](Self::TimedOut)), or something other than Redis
    /// answered ([`Protocol`](Self::Protocol)). These are the errors the
    /// [`fallback`](crate::RedisBackoffBuilder::fallback) answers in the
    /// store's place; the others are answers from Redis.
    ///
    /// ```no_run
    /// use keyed_backoff_redis::{Event, RedisBackoff};
    /// # async fn run(b: RedisBackoff<keyed_backoff_redis::redis::aio::ConnectionManager>) {
    /// if let Err(e) = b.next("host-a", Event::now()).await {
    ///     if e.is_unreachable() {
    ///         eprintln!("Redis is down or the URL is wrong: {e}");
    ///     }
    /// }
    /// # }
    /// ```
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. }
                | StoreError::TimedOut { .. }
                | StoreError::Protocol { .. }
        )
    }

    /// A reply of a shape the script never gives.
    pub(crate) fn unexpected(key: &str, what: &str) -> Self {
        StoreError::Corrupt {
            key: key.to_string(),
            detail: format!("unexpected reply: {what}"),
            source: None,
        }
    }

    /// No answer from the server at `address` within `after`.
    pub(crate) fn timed_out(address: &Address, after: Duration) -> Self {
        StoreError::TimedOut {
            address: address.clone(),
            after,
            source: None,
        }
    }

    /// Sorts a client error from the server at `address`; `timeout` is
    /// the operation's own, reported when the client gave up waiting for
    /// an answer (outcome unknown). A reply redis-rs could not parse is a
    /// protocol error: the caller converts well-formed replies itself, so
    /// that an entry that is not ours is told apart from a server that is
    /// not Redis.
    pub(crate) fn from_redis(
        address: &Address,
        key: &str,
        e: redis::RedisError,
        timeout: Duration,
    ) -> Self {
        let address = address.clone();
        let unreachable = e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || (e.is_unrecoverable_error() && e.code().is_none());
        if e.code() == Some("WRONGTYPE") || e.to_string().contains("WRONGTYPE") {
            StoreError::Corrupt {
                key: key.to_string(),
                detail: "the key holds a value of another type".to_owned(),
                source: Some(e),
            }
        } else if e.kind() == redis::ErrorKind::Parse {
            StoreError::Protocol { address, source: e }
        } else if e.is_timeout() {
            StoreError::TimedOut {
                address,
                after: timeout,
                source: Some(e),
            }
        } else if unreachable {
            StoreError::Unavailable { address, source: e }
        } else {
            StoreError::Redis { address, source: e }
        }
    }

    /// A well-formed reply of a shape the caller never gets from its
    /// script, for `key`.
    pub(crate) fn unreadable(key: &str, e: redis::ParsingError) -> Self {
        StoreError::Corrupt {
            key: key.to_string(),
            detail: "unexpected reply".to_owned(),
            source: Some(e.into()),
        }
    }
}

/// Each message says what happened at the store's level; the redis-rs
/// error that caused it is the [`source`](Error::source), not repeated here.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable { address, .. } => {
                write!(
                    f,
                    "backoff store at {address} unavailable; the operation did not run"
                )
            }
            StoreError::TimedOut { address, after, .. } => {
                write!(
                    f,
                    "backoff store at {address} did not answer within {after:?}; outcome unknown"
                )
            }
            StoreError::Protocol { address, .. } => {
                write!(
                    f,
                    "the server at {address} did not answer as Redis does (is the URL right?); \
                     outcome unknown"
                )
            }
            StoreError::Corrupt { key, detail, .. } => {
                write!(f, "backoff entry for {key:?} is not ours: {detail}")
            }
            StoreError::NotReplicated {
                key, acked, wanted, ..
            } => write!(
                f,
                "backoff entry for {key:?} written on the master, but {acked} of the \
                 {wanted} replicas asked for acknowledged it; outcome unknown"
            ),
            StoreError::Redis { address, source } => match source.code() {
                Some(code) => write!(
                    f,
                    "backoff store at {address} answered with an error ({code})"
                ),
                None => write!(f, "backoff store at {address} answered with an error"),
            },
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StoreError::Unavailable { source, .. }
            | StoreError::Protocol { source, .. }
            | StoreError::Redis { source, .. } => Some(source),
            StoreError::TimedOut { source, .. } | StoreError::Corrupt { source, .. } => {
                source.as_ref().map(|e| e as &(dyn Error + 'static))
            }
            StoreError::NotReplicated { .. } => None,
        }
    }
}

/// The server a store talks to, as its errors name it: the host and port
/// of the URL given to [`open`](crate::RedisBackoffBuilder::open), or what
/// [`address`](crate::RedisBackoffBuilder::address) says for a connection
/// given to [`build`](crate::RedisBackoffBuilder::build).
///
/// ```
/// use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
/// use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let backoff = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .open("redis://127.0.0.1:1/")
///     .await?;
/// let err = backoff.next("host-a", Event::now()).await.unwrap_err();
/// let StoreError::Unavailable { address, .. } = &err else { panic!("{err}") };
/// assert_eq!(address.as_str(), "127.0.0.1:1");
/// assert!(err.to_string().contains("127.0.0.1:1"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address(Arc<str>);

impl Address {
    pub(crate) fn new(address: &str) -> Self {
        Address(Arc::from(address))
    }

    /// The address as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
