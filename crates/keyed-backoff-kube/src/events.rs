//! `tracing` events, compiled in only with the `tracing` feature: with it
//! off, the macro expands to nothing and its arguments are not evaluated.

/// `event!(level, fields...; "message")`: a `tracing` event at `level` with
/// the crate's target, or nothing without the feature.
macro_rules! event {
    ($level:ident, $($rest:tt)*) => {
        #[cfg(feature = "tracing")]
        {
            tracing::$level!(target: "keyed_backoff_kube", $($rest)*);
        }
    };
}

pub(crate) use event;
