//! The error a wrapped reconcile returns: the reconcile's own, or a panic
//! caught on its way out.

use std::any::Any;
use std::fmt;

/// What a reconcile wrapped by
/// [`ObjectBackoff::reconciler`](crate::ObjectBackoff::reconciler) failed
/// with: its own error, or a panic that was caught so that it fails only its
/// object.
///
/// # In a hand-written error policy
///
/// The wrapped reconcile's error type is `ReconcileError<E>`, so an error
/// policy written by hand (kube-rs's controller examples write one to log,
/// count or pick a delay per error) takes `&ReconcileError<E>` where it
/// took `&E`, reads the reconcile's own error with
/// [`as_inner`](Self::as_inner) (`None` for a panic), and calls
/// [`on_error`](crate::ObjectBackoff::on_error) to back off:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use keyed_backoff_kube::{ObjectBackoff, ReconcileError};
/// use kube::runtime::controller::{Action, Controller};
/// use kube::runtime::watcher;
/// use kube::Api;
///
/// #[derive(Debug)]
/// enum Error {
///     /// Only a change to the object helps.
///     Invalid,
///     /// The API, a webhook, the network: worth retrying.
///     Kube(kube::Error),
/// }
/// # impl std::fmt::Display for Error {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
/// #         write!(f, "{self:?}")
/// #     }
/// # }
/// # impl std::error::Error for Error {}
///
/// struct Ctx {
///     backoff: ObjectBackoff<ConfigMap>,
/// }
///
/// fn error_policy(cm: Arc<ConfigMap>, error: &ReconcileError<Error>, ctx: Arc<Ctx>) -> Action {
///     match error.as_inner() {
///         Some(Error::Invalid) => Action::await_change(),
///         // The reconcile's other errors and panics back off.
///         _ => ctx.backoff.on_error(&cm),
///     }
/// }
///
/// async fn reconcile(cm: Arc<ConfigMap>, _ctx: Arc<Ctx>) -> Result<Action, Error> {
///     match cm.data {
///         Some(_) => Ok(Action::await_change()),
///         None => Err(Error::Invalid),
///     }
/// }
///
/// // Beside the wrapper, as in any controller:
/// fn controller(api: Api<ConfigMap>, ctx: Arc<Ctx>) {
///     let reconcile = ctx.backoff.reconciler(reconcile);
///     let run = Controller::new(api, watcher::Config::default()).run(reconcile, error_policy, ctx);
///     # drop(run);
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let ctx = Arc::new(Ctx { backoff: ObjectBackoff::kubelet() });
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("app".into());
/// let cm = Arc::new(cm);
/// let invalid = ReconcileError::Reconcile(Error::Invalid);
/// assert_eq!(error_policy(cm.clone(), &invalid, ctx.clone()), Action::await_change());
/// let panicked = ReconcileError::Panicked("boom".into());
/// assert_eq!(
///     error_policy(cm, &panicked, ctx),
///     Action::requeue(Duration::from_secs(10))
/// );
/// # }
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

    /// The reconcile's own error, or `None` if it panicked: what a
    /// hand-written error policy matches on (see the type's example).
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::Reconcile(7);
    /// assert_eq!(e.as_inner(), Some(&7));
    /// assert_eq!(ReconcileError::<i32>::Panicked("boom".into()).as_inner(), None);
    /// ```
    pub fn as_inner(&self) -> Option<&E> {
        match self {
            ReconcileError::Reconcile(e) => Some(e),
            ReconcileError::Panicked(_) => None,
        }
    }

    /// The reconcile's own error, owned, or `None` if it panicked.
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
