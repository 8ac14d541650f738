//! Waiting on tokio's clock until a key may run again.

use std::time::Duration;

use crate::error::InBackoff;

/// Sleeps while `remaining` says there is a wait left, asking again after
/// each sleep (the key may have been advanced meanwhile).
pub(crate) async fn until_ready(mut remaining: impl FnMut() -> Option<Duration>) {
    while let Some(wait) = remaining() {
        tokio::time::sleep(wait).await;
    }
}

/// Calls `try_next` until it lets the caller through, sleeping out each
/// refusal's remaining wait; returns what it returned.
pub(crate) async fn until_ready_then(
    mut try_next: impl FnMut() -> Result<Duration, InBackoff>,
) -> Duration {
    loop {
        match try_next() {
            Ok(backoff) => return backoff,
            Err(InBackoff { remaining }) => tokio::time::sleep(remaining).await,
        }
    }
}
