//! The in-process manager behind an object backoff.

use keyed_backoff::Backoff;
use keyed_backoff::clock::TokioClock;

use crate::key::ObjectKey;

/// The manager type behind an [`ObjectBackoff`](crate::ObjectBackoff): one entry per object
/// identity (reference and uid), on tokio's clock.
pub type ObjectManager<K> = Backoff<ObjectKey<K>, TokioClock>;
