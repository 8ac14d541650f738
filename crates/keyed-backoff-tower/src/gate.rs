//! The keyed backoff as the middleware sees it: any in-process
//! implementation of the core's [`Gate`](keyed_backoff::Gate) contract
//! (the manager, or the manager wrapped in outage awareness), behind one
//! object-safe trait so that the layer's type names neither the gate's
//! type nor its clock or hasher.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// What the middleware asks of a keyed backoff.
pub(crate) trait Gate<K>: Send + Sync {
    /// The wait left before `key` may run, or `None` if it may run now;
    /// asked by a request about to be sent (a wrapper may count it as the
    /// key's turn).
    fn remaining(&self, key: &K) -> Option<Duration>;
    /// A failure for `key`: its backoff advances, at most once per window
    /// however many requests fail for it.
    fn failed(&self, key: &K);
    /// A success for `key`: once its window has passed, its backoff and
    /// any hold are forgotten. Within the window the success answers a
    /// request sent before the key's latest failure, and changes nothing.
    fn succeeded(&self, key: &K);
    /// `key` may not run for `wait` from now; a longer hold already in
    /// place is kept.
    fn hold(&self, key: &K, wait: Duration);
}

/// An in-process gate of the core's contract, as a [`Gate`].
pub(crate) struct Contract<G>(pub(crate) G);

impl<K, G> Gate<K> for Contract<G>
where
    G: keyed_backoff::Gate<K, Error = Infallible>,
{
    fn remaining(&self, key: &K) -> Option<Duration> {
        ready(self.0.claim(key))
    }

    fn failed(&self, key: &K) {
        // In backoff already: another request advanced this window.
        let _ = ready(self.0.fail(key));
    }

    fn succeeded(&self, key: &K) {
        if ready(self.0.wait(key)).is_none() {
            ready(self.0.succeed(key));
        }
    }

    fn hold(&self, key: &K, wait: Duration) {
        ready(self.0.hold(key, wait));
    }
}

/// The answer of an in-process gate's call: its futures are ready at
/// once (the manager's are `std::future::Ready`, and a wrapper over it
/// awaits nothing else), so one poll completes them.
fn ready<T>(call: impl Future<Output = Result<T, Infallible>>) -> T {
    let mut call = pin!(call);
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(answer)) => answer,
        Poll::Pending => unreachable!("an in-process gate answers at once"),
    }
}
