//! The error a wrapped reconcile returns: the reconcile's own, or a panic
//! caught on its way out.

use std::any::Any;
use std::fmt;

use kube::runtime::controller::Action;

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
/// took `&E` and reads the reconcile's own error with
/// [`as_inner`](Self::as_inner) (`None` for a panic). The wrapper has
/// already told the object's backoff of the failure, the moment the
/// reconcile returned it: [`requeue`](Self::requeue) is what the backoff
/// decided. For an error that only a change to the object fixes, forget
/// the backoff ([`ObjectBackoff::reset`](crate::ObjectBackoff::reset)), so
/// that the run the change triggers is not skipped:
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
///         Some(Error::Invalid) => {
///             ctx.backoff.reset(&cm);
///             Action::await_change()
///         }
///         // The reconcile's other errors and panics back off.
///         _ => error.requeue().unwrap_or_else(|| ctx.backoff.on_error(&cm)),
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
/// let invalid = ReconcileError::reconcile(Error::Invalid);
/// assert_eq!(error_policy(cm.clone(), &invalid, ctx.clone()), Action::await_change());
/// let panicked = ReconcileError::panicked("boom");
/// assert_eq!(
///     error_policy(cm, &panicked, ctx),
///     Action::requeue(Duration::from_secs(10))
/// );
/// # }
/// ```
#[derive(Debug)]
pub struct ReconcileError<E> {
    cause: Cause<E>,
    requeue: Option<Action>,
}

#[derive(Debug)]
enum Cause<E> {
    Reconcile(E),
    Panicked(String),
}

impl<E> ReconcileError<E> {
    /// The reconcile returned `error`. Made by the wrapper; by hand, for
    /// tests of an error policy (it carries no requeue).
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::reconcile(7);
    /// assert_eq!((e.as_inner(), e.requeue()), (Some(&7), None));
    /// ```
    pub fn reconcile(error: E) -> Self {
        ReconcileError {
            cause: Cause::Reconcile(error),
            requeue: None,
        }
    }

    /// The reconcile panicked with `message`. Made by the wrapper; by
    /// hand, for tests of an error policy.
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::<std::io::Error>::panicked("index out of bounds");
    /// assert!(e.is_panic());
    /// assert_eq!(e.to_string(), "reconcile panicked: index out of bounds");
    /// ```
    pub fn panicked(message: impl Into<String>) -> Self {
        ReconcileError {
            cause: Cause::Panicked(message.into()),
            requeue: None,
        }
    }

    /// The same error with the requeue its failure was given.
    pub(crate) fn with_requeue(mut self, requeue: Action) -> Self {
        self.requeue = Some(requeue);
        self
    }

    /// When to run the object again, as its backoff decided the moment the
    /// wrapper recorded this failure: after its new backoff (or later, if
    /// the controller-wide rate limit has no token left), or, when the
    /// object was still in backoff, after the wait left. `None` for an
    /// error made by hand.
    pub fn requeue(&self) -> Option<Action> {
        self.requeue.clone()
    }

    /// Whether the reconcile panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.cause, Cause::Panicked(_))
    }

    /// The panic's message (the payload when it was a string, a
    /// placeholder otherwise), or `None` if the reconcile returned an
    /// error.
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::<i32>::panicked("boom");
    /// assert_eq!(e.panic_message(), Some("boom"));
    /// ```
    pub fn panic_message(&self) -> Option<&str> {
        match &self.cause {
            Cause::Panicked(message) => Some(message),
            Cause::Reconcile(_) => None,
        }
    }

    /// The reconcile's own error, or `None` if it panicked: what a
    /// hand-written error policy matches on (see the type's example).
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::reconcile(7);
    /// assert_eq!(e.as_inner(), Some(&7));
    /// assert_eq!(ReconcileError::<i32>::panicked("boom").as_inner(), None);
    /// ```
    pub fn as_inner(&self) -> Option<&E> {
        match &self.cause {
            Cause::Reconcile(e) => Some(e),
            Cause::Panicked(_) => None,
        }
    }

    /// The reconcile's own error, owned, or `None` if it panicked.
    ///
    /// ```
    /// use keyed_backoff_kube::ReconcileError;
    /// let e = ReconcileError::reconcile(7);
    /// assert_eq!(e.into_inner(), Some(7));
    /// ```
    pub fn into_inner(self) -> Option<E> {
        match self.cause {
            Cause::Reconcile(e) => Some(e),
            Cause::Panicked(_) => None,
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
        match &self.cause {
            Cause::Reconcile(e) => e.fmt(f),
            Cause::Panicked(message) => write!(f, "reconcile panicked: {message}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ReconcileError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            // Transparent: the inner error is displayed as this one.
            Cause::Reconcile(e) => e.source(),
            Cause::Panicked(_) => None,
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
        let e = ReconcileError::reconcile(Outer(std::io::Error::other("connection reset")));
        assert_eq!(e.to_string(), "apply failed");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("connection reset")
        );
        let p = ReconcileError::<Outer>::panicked("boom");
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
