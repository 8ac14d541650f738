//! The dependency a failed reconcile's error names: a function from the
//! user's error type, set once on the builder, erased so that the object
//! backoff's type does not name the error.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// The erased function: `None` for an error of another type.
type Erased = dyn for<'a> Fn(&'a (dyn Any + 'static)) -> Option<&'a str> + Send + Sync;

/// How a reconcile error names its dependency.
#[derive(Clone)]
pub(crate) struct DomainOf(Arc<Erased>);

/// `f` with the signature it must have (a closure's own is inferred too
/// narrowly for the erased one).
fn erased<F>(f: F) -> F
where
    F: for<'a> Fn(&'a (dyn Any + 'static)) -> Option<&'a str> + Send + Sync,
{
    f
}

impl DomainOf {
    /// Names the dependency of an error of type `E` with `name`.
    pub(crate) fn new<E, F>(name: F) -> Self
    where
        E: 'static,
        F: for<'a> Fn(&'a E) -> Option<&'a str> + Send + Sync + 'static,
    {
        DomainOf(Arc::new(erased(move |error| {
            error.downcast_ref::<E>().and_then(&name)
        })))
    }

    /// The dependency `error` names, if it is of the type given and names
    /// one.
    pub(crate) fn of<'a>(&self, error: &'a (dyn Any + 'static)) -> Option<&'a str> {
        (self.0)(error)
    }
}

impl fmt::Debug for DomainOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DomainOf(..)")
    }
}
