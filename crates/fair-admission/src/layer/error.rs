//! The layer's refusal, to answer with 429 and `Retry-After`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::Rejected;

/// An error boxed as tower middleware boxes them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The layer's refusal: answer it with HTTP 429 and a `Retry-After` header
/// of [`retry_after_secs`](Self::retry_after_secs), so that clients back off.
/// Services behind [`FairnessLayer`](crate::FairnessLayer) fail with it boxed in a [`BoxError`].
///
/// ```
/// use fair_admission::{BoxError, Overloaded};
/// // In the HTTP layer's error handler:
/// fn status_and_retry_after(err: &BoxError) -> (u16, Option<u64>) {
///     match err.downcast_ref::<Overloaded>() {
///         Some(o) => (429, Some(o.retry_after_secs())),
///         None => (500, None),
///     }
/// }
/// # let _ = status_and_retry_after;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Overloaded {
    pub(crate) reason: Rejected,
    pub(crate) retry_after: Duration,
    /// The priority level's name (empty for a level of another `Apf`).
    pub(crate) level: Arc<str>,
}

impl Overloaded {
    /// Why the request was refused.
    ///
    /// ```
    /// # use fair_admission::{Overloaded, Rejected};
    /// # fn f(o: Overloaded) -> bool {
    /// o.reason() == Rejected::QueueFull
    /// # }
    /// ```
    pub fn reason(&self) -> Rejected {
        self.reason
    }

    /// The name of the priority level that refused the request (empty if
    /// the request was classified into a level of another
    /// [`Apf`](crate::Apf)).
    ///
    /// ```
    /// # use fair_admission::Overloaded;
    /// # fn f(o: Overloaded) -> bool {
    /// o.level() == "workload-low"
    /// # }
    /// ```
    pub fn level(&self) -> &str {
        &self.level
    }

    /// How long the client should wait before retrying.
    ///
    /// ```
    /// # use fair_admission::Overloaded;
    /// # fn f(o: Overloaded) -> std::time::Duration {
    /// o.retry_after()
    /// # }
    /// ```
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, rounded up and
    /// at least 1: the value of the `Retry-After` header.
    ///
    /// ```
    /// # use fair_admission::Overloaded;
    /// # fn f(o: Overloaded) -> String {
    /// o.retry_after_secs().to_string()
    /// # }
    /// ```
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }
}

impl fmt::Display for Overloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("too many requests: ")?;
        if !self.level.is_empty() {
            write!(f, "priority level \"{}\": ", self.level)?;
        }
        write!(
            f,
            "{}; retry after {}s",
            self.reason,
            self.retry_after_secs()
        )
    }
}

impl std::error::Error for Overloaded {}
