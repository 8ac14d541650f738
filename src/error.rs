//! The crate's errors: a configuration refused, a key still in backoff, a
//! background GC that could not start.

use std::fmt;
use std::time::Duration;

/// A configuration value outside its allowed range.
///
/// Every builder in the crate validates its input and returns this error
/// instead of panicking. The message names the field, the allowed range and
/// the value that was given.
///
/// ```
/// use keyed_backoff::{Backoff, ConfigError};
/// use std::time::Duration;
///
/// let err = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .jitter(f64::NAN)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// assert!(err.to_string().contains("finite number >= 0"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    field: &'static str,
    allowed: String,
    got: String,
}

impl ConfigError {
    /// A new error for `field`, whose allowed range is `allowed`, given `got`.
    ///
    /// ```
    /// use keyed_backoff::ConfigError;
    /// let e = ConfigError::new("factor", "a finite number >= 1", "0.5");
    /// assert_eq!(e.to_string(), "invalid factor: must be a finite number >= 1, got 0.5");
    /// ```
    pub fn new(field: &'static str, allowed: impl Into<String>, got: impl fmt::Display) -> Self {
        ConfigError {
            field,
            allowed: allowed.into(),
            got: got.to_string(),
        }
    }

    /// The name of the offending field, as the builder method spells it.
    ///
    /// ```
    /// use keyed_backoff::ConfigError;
    /// assert_eq!(ConfigError::new("max", "<= 1s", "2s").field(), "max");
    /// ```
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range, in words.
    ///
    /// ```
    /// use keyed_backoff::ConfigError;
    /// assert_eq!(ConfigError::new("max", "<= 1s", "2s").allowed(), "<= 1s");
    /// ```
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}: must be {}, got {}",
            self.field, self.allowed, self.got
        )
    }
}

impl std::error::Error for ConfigError {}

/// Checks that `value` is a finite number at least `min`, naming `field` otherwise.
pub(crate) fn finite_at_least(
    field: &'static str,
    value: f64,
    min: f64,
) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= min {
        Ok(value)
    } else {
        Err(ConfigError::new(
            field,
            format!("a finite number >= {min}"),
            value,
        ))
    }
}

/// Returned by [`Backoff::try_next`](crate::Backoff::try_next) while the
/// key must still wait.
///
/// ```
/// use keyed_backoff::InBackoff;
/// use std::time::Duration;
/// let e = InBackoff { remaining: Duration::from_secs(3) };
/// assert_eq!(e.to_string(), "in backoff for another 3s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InBackoff {
    /// How long until the backoff window ends.
    pub remaining: Duration,
}

impl fmt::Display for InBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in backoff for another {:?}", self.remaining)
    }
}

impl std::error::Error for InBackoff {}

/// Why a background GC could not start; from
/// [`Backoff::spawn_gc`](crate::Backoff::spawn_gc) and
/// `Backoff::spawn_gc_task`. Nothing was started.
///
/// ```
/// use keyed_backoff::{Backoff, SpawnError};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
/// let err = b.spawn_gc(Duration::ZERO).unwrap_err();
/// assert!(matches!(err, SpawnError::ZeroInterval));
/// assert_eq!(err.to_string(), "invalid interval: must be greater than zero, got 0s");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SpawnError {
    /// The interval was zero.
    ZeroInterval,
    /// `spawn_gc_task` was called outside a tokio runtime.
    NoRuntime,
    /// The tokio runtime has no time driver (it was built without
    /// `enable_time`).
    NoTimers,
    /// The operating system would not start the GC thread.
    Thread(std::io::Error),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::ZeroInterval => {
                f.write_str("invalid interval: must be greater than zero, got 0s")
            }
            SpawnError::NoRuntime => {
                f.write_str("spawn_gc_task must be called inside a tokio runtime")
            }
            SpawnError::NoTimers => f.write_str(
                "spawn_gc_task needs a tokio runtime with its time driver (enable_time)",
            ),
            SpawnError::Thread(e) => write!(f, "the OS would not start the GC thread: {e}"),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpawnError::Thread(e) => Some(e),
            _ => None,
        }
    }
}
