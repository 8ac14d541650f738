//! The in-process manager behind an object backoff, and how its calls are
//! answered at once.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use keyed_backoff::Backoff;
use keyed_backoff::clock::TokioClock;

use crate::key::ObjectKey;

/// The manager type behind an [`ObjectBackoff`](crate::ObjectBackoff): one entry per object
/// identity (reference and uid), on tokio's clock.
pub type ObjectManager<K> = Backoff<ObjectKey<K>, TokioClock>;

/// The answer of an in-process gate's call. The manager's futures are
/// ready at once and the outage wrapper awaits nothing else, so one poll
/// completes them.
pub(crate) fn ready<T>(call: impl Future<Output = Result<T, Infallible>>) -> T {
    let mut call = pin!(call);
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(answer)) => answer,
        Poll::Pending => unreachable!("an in-process gate answers at once"),
    }
}
