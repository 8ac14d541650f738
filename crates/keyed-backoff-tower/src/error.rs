//! The middleware's error type.

/// The error of a [`KeyedBackoff`](crate::KeyedBackoff) service, as tower's
/// own middleware reports theirs: the inner service's error, or an
/// [`InBackoff`](keyed_backoff::InBackoff) for a request refused because
/// its key is in backoff. Tell them apart with `downcast_ref`.
///
/// ```
/// use keyed_backoff_tower::{BoxError, InBackoff};
/// use std::time::Duration;
/// let refused: BoxError = Box::new(InBackoff { remaining: Duration::from_secs(2) });
/// assert_eq!(refused.downcast_ref::<InBackoff>().map(|e| e.remaining), Some(Duration::from_secs(2)));
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
