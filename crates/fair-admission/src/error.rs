//! The one error this crate returns: a configuration it refuses.

use std::fmt;

/// A setting outside its allowed range, refused when a [`Dealer`](crate::Dealer),
/// an [`Apf`](crate::Apf) or a layer is built.
///
/// It names the field as the builder spells it, the priority level it
/// belongs to (if it is a level's), the range it accepts and the value it
/// was given, so the message alone says what to change.
///
/// ```
/// use fair_admission::{Apf, ConfigError};
/// let err: ConfigError = Apf::builder(0).build().unwrap_err();
/// assert_eq!(err.field(), "seats");
/// assert_eq!(err.to_string(), "invalid seats: must be at least 1, got 0");
///
/// use fair_admission::{LevelSpec, LimitResponse};
/// let none = LimitResponse::Queue { queues: 0, queue_length_limit: 50, hand_size: 1 };
/// let err = Apf::builder(10).level("workload", LevelSpec::limited(1, none)).build().unwrap_err();
/// assert_eq!(err.level(), Some("workload"));
/// assert_eq!(
///     err.to_string(),
///     "invalid queues of priority level \"workload\": must be between 1 and 10000000, got 0"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    level: Option<String>,
    allowed: String,
    got: String,
}

impl ConfigError {
    /// Refuses `got` for `field`, which accepts `allowed` (in words).
    ///
    /// ```
    /// let e = fair_admission::ConfigError::new("queues", "between 1 and 10", 0);
    /// assert_eq!(e.allowed(), "between 1 and 10");
    /// ```
    pub fn new(field: &'static str, allowed: impl Into<String>, got: impl fmt::Display) -> Self {
        let (allowed, got) = (allowed.into(), got.to_string());
        ConfigError {
            field,
            level: None,
            allowed,
            got,
        }
    }

    /// The same error, of the priority level `name`.
    pub(crate) fn at_level(mut self, name: &str) -> Self {
        self.level = Some(name.to_owned());
        self
    }

    /// The refused field.
    ///
    /// ```
    /// assert_eq!(fair_admission::ConfigError::new("seats", "at least 1", 0).field(), "seats");
    /// ```
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The priority level the refused field belongs to, if it is one of a
    /// level's.
    ///
    /// ```
    /// use fair_admission::{Apf, LevelSpec};
    /// assert_eq!(Apf::builder(0).level("e", LevelSpec::exempt()).build().unwrap_err().level(), None);
    /// ```
    pub fn level(&self) -> Option<&str> {
        self.level.as_deref()
    }

    /// What the field accepts, in words.
    ///
    /// ```
    /// assert_eq!(fair_admission::ConfigError::new("seats", "at least 1", 0).allowed(), "at least 1");
    /// ```
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ConfigError {
            field,
            level,
            allowed,
            got,
        } = self;
        write!(f, "invalid {field}")?;
        if let Some(level) = level {
            write!(f, " of priority level \"{level}\"")?;
        }
        write!(f, ": must be {allowed}, got {got}")
    }
}

impl std::error::Error for ConfigError {}
