//! The in-process manager behind an object backoff, and how its calls are
//! answered at once.

use keyed_backoff::Backoff;
use keyed_backoff::clock::TokioClock;

use crate::key::ObjectKey;

/// The manager type behind an [`ObjectBackoff`](crate::ObjectBackoff): one entry per object
/// identity (reference and uid), on tokio's clock.
pub type ObjectManager<K> = Backoff<ObjectKey<K>, TokioClock>;

/// One poll answers an in-process gate's call.
pub(crate) use keyed_backoff::__private::ready;
