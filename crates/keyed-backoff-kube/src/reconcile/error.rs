//! The error a wrapped reconcile returns: the reconcile's own, or a panic
//! caught on its way out.

use std::any::Any;
use std::fmt;

/// What a reconcile wrapped by
/// [`ObjectBackoff::reconciler`](crate::ObjectBackoff::reconciler) failed
/// with: its own error, or a panic that was caught so that it fails only its
/// object.
///
/// ```
/// use keyed_backoff_kube::ReconcileError;
/// let e: ReconcileError<std::io::Error> = ReconcileError::Reconcile(std::io::Error::other("boom"));
/// assert_eq!(e.to_string(), "boom");
/// assert!(!e.is_panic());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ReconcileError<E> {
    /// The reconcile returned this error.
    Reconcile(E),
    /// The reconcile panicked with this message (the payload when it was a
    /// string, a placeholder otherwise).
    Panicked(String),
}

impl<E> ReconcileError<E> {
    /// Whether the reconcile panicked.
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::<std::io::Error>::Panicked("index out of bounds".into());
    /// assert!(e.is_panic());
    /// assert_eq!(e.to_string(), "reconcile panicked: index out of bounds");
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, ReconcileError::Panicked(_))
    }

    /// The reconcile's own error, if it returned one.
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::Reconcile(7);
    /// assert_eq!(e.into_inner(), Some(7));
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self {
            ReconcileError::Reconcile(e) => Some(e),
            ReconcileError::Panicked(_) => None,
        }
    }
}

/// A panic's message: its payload when that is a string.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string payload".to_owned()
    }
}

impl<E: fmt::Display> fmt::Display for ReconcileError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReconcileError::Reconcile(e) => e.fmt(f),
            ReconcileError::Panicked(message) => write!(f, "reconcile panicked: {message}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ReconcileError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the inner error is displayed as this one.
            ReconcileError::Reconcile(e) => e.source(),
            ReconcileError::Panicked(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// An error with a cause, as a reconcile's errors usually are.
    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("apply failed")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_reconcile_error_is_transparent_and_keeps_its_cause() {
        let e = ReconcileError::Reconcile(Outer(std::io::Error::other("connection reset")));
        assert_eq!(e.to_string(), "apply failed");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("connection reset")
        );
        let p = ReconcileError::<Outer>::Panicked("boom".into());
        assert!(p.source().is_none());
    }

    #[test]
    fn a_panic_message_is_its_string_payload() {
        let s: Box<dyn Any + Send> = Box::new("static str");
        let owned: Box<dyn Any + Send> = Box::new(String::from("owned"));
        let other: Box<dyn Any + Send> = Box::new(7u8);
        assert_eq!(panic_message(&*s), "static str");
        assert_eq!(panic_message(&*owned), "owned");
        assert_eq!(panic_message(&*other), "a non-string payload");
    }
}
