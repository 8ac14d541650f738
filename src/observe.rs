//! What the manager tells an operator: `tracing` events at its decisions
//! (feature `tracing`, target `keyed_backoff`). The rest of the crate calls
//! these functions; without the feature each is empty and compiles to
//! nothing.

/// A GC sweep removed `removed` entries and left `entries()` (DEBUG:
/// sweeps run on a schedule). `entries` is only counted when the event is
/// compiled in.
#[inline]
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn gc_swept(removed: usize, entries: impl FnOnce() -> usize) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "keyed_backoff", removed, entries = entries(), "gc sweep");
}

/// A background or amortised sweep ended early because the user's expiry
/// function panicked; the panic was contained (ERROR: a bug to fix).
#[inline]
pub(crate) fn gc_panicked() {
    #[cfg(feature = "tracing")]
    tracing::error!(
        target: "keyed_backoff",
        "the expiry function panicked; the sweep ended early and the next one will retry"
    );
}
