//! What can go wrong talking to the store.

use std::fmt;
use std::time::Duration;

/// A store operation that did not complete. Every variant is something the
/// caller can act on; none means "no backoff".
///
/// ```
/// use keyed_backoff_redis::StoreError;
/// use std::time::Duration;
/// let e = StoreError::TimedOut { after: Duration::from_millis(250) };
/// assert!(e.outcome_unknown());
/// assert!(e.to_string().contains("250ms"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// Redis could not be reached (refused, dropped, reconnecting). The
    /// operation did not run.
    Unavailable {
        /// What the client reported.
        detail: String,
    },
    /// No answer within the timeout. The script may still have run: the
    /// outcome is unknown (retry `next` with the same
    /// [`OpId`](crate::OpId) to be safe).
    TimedOut {
        /// The configured timeout.
        after: Duration,
    },
    /// The key holds something that is not one of our entries (another
    /// program wrote it). It is left untouched.
    Corrupt {
        /// The caller's key.
        key: String,
        /// What Redis or the reply said.
        detail: String,
    },
    /// The operation ran on the master, but fewer replicas than
    /// [`wait_for_replicas`](crate::RedisBackoffBuilder::wait_for_replicas)
    /// asks for acknowledged it in time. A failover now may or may not
    /// keep it: the outcome is unknown (retry with the same
    /// [`OpId`](crate::OpId) to be safe).
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
    Redis {
        /// What the server said.
        detail: String,
    },
}

impl StoreError {
    /// Whether the operation may have taken effect even though it failed:
    /// a timeout, or a write too few replicas acknowledged.
    ///
    /// ```
    /// use keyed_backoff_redis::StoreError;
    /// assert!(!StoreError::Unavailable { detail: "refused".into() }.outcome_unknown());
    /// ```
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            StoreError::TimedOut { .. } | StoreError::NotReplicated { .. }
        )
    }

    pub(crate) fn unexpected(key: &str, what: &str) -> Self {
        StoreError::Corrupt {
            key: key.to_string(),
            detail: format!("unexpected reply: {what}"),
        }
    }

    /// Sorts a client error; `timeout` is the operation's own, reported
    /// when the client gave up waiting for an answer (outcome unknown).
    pub(crate) fn from_redis(key: &str, e: redis::RedisError, timeout: Duration) -> Self {
        let detail = e.to_string();
        let unreachable = e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || (e.is_unrecoverable_error() && e.code().is_none());
        if e.code() == Some("WRONGTYPE") || detail.contains("WRONGTYPE") {
            StoreError::Corrupt {
                key: key.to_string(),
                detail,
            }
        } else if e.is_timeout() {
            StoreError::TimedOut { after: timeout }
        } else if unreachable {
            StoreError::Unavailable { detail }
        } else {
            StoreError::Redis { detail }
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable { detail } => write!(f, "backoff store unavailable: {detail}"),
            StoreError::TimedOut { after } => {
                write!(
                    f,
                    "backoff store did not answer within {after:?}; outcome unknown"
                )
            }
            StoreError::Corrupt { key, detail } => {
                write!(f, "backoff entry for {key:?} is not ours: {detail}")
            }
            StoreError::NotReplicated { key, acked, wanted } => write!(
                f,
                "backoff entry for {key:?} written on the master, but {acked} of the \
                 {wanted} replicas asked for acknowledged it; outcome unknown"
            ),
            StoreError::Redis { detail } => write!(f, "backoff store error: {detail}"),
        }
    }
}

impl std::error::Error for StoreError {}
