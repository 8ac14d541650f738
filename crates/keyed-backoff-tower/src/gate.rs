//! The keyed backoff as the middleware sees it: any implementation of the
//! core's [`Gate`](keyed_backoff::Gate) contract, behind one object-safe
//! trait so that the layer's type names neither the gate's type nor its
//! clock or hasher.
//!
//! An in-process gate (the manager, or the manager wrapped in outage
//! awareness) answers at once: its answers are [`Answer::Now`], and a
//! request through the layer allocates nothing for them. A gate across
//! the network (a store shared by a fleet) answers [`Answer::Later`]: one
//! boxed future per question, which the request's future awaits.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::__private::ready;

use crate::error::BoxError;

/// A remote gate's answer, still to come.
pub(crate) type Pending<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// A gate's answer: at once (in process), or to be awaited (a store).
pub(crate) enum Answer<T> {
    Now(T),
    Later(Pending<T>),
}

/// What the middleware asks of a keyed backoff.
pub(crate) trait Gate<K>: Send + Sync {
    /// The wait left before `key` may run, or `None` if it may run now;
    /// asked by a request about to be sent (a wrapper may count it as the
    /// key's turn).
    fn remaining(&self, key: &K) -> Answer<Option<Duration>>;
    /// A failure for `key`: its backoff advances, at most once per window
    /// however many requests fail for it; then the floor `hold` (a
    /// server's `Retry-After`) if there is one, a longer one in place
    /// being kept; then, if `then_wait`, the wait left before a retry.
    fn failed(&self, key: &K, hold: Option<Duration>, then_wait: bool) -> Answer<Option<Duration>>;
    /// A success for `key`: once its window has passed, its backoff and
    /// any hold are forgotten. Within the window the success answers a
    /// request sent before the key's latest failure, and changes nothing.
    fn succeeded(&self, key: &K) -> Answer<()>;
}

/// An in-process gate of the core's contract: every answer at once.
pub(crate) struct Contract<G>(pub(crate) G);

impl<K, G> Gate<K> for Contract<G>
where
    G: keyed_backoff::Gate<K, Error = Infallible>,
{
    fn remaining(&self, key: &K) -> Answer<Option<Duration>> {
        Answer::Now(ready(self.0.claim(key)))
    }

    fn failed(&self, key: &K, hold: Option<Duration>, then_wait: bool) -> Answer<Option<Duration>> {
        // In backoff already: another request advanced this window.
        let _ = ready(self.0.fail(key));
        if let Some(wait) = hold {
            ready(self.0.hold(key, wait));
        }
        Answer::Now(if then_wait {
            ready(self.0.claim(key))
        } else {
            None
        })
    }

    fn succeeded(&self, key: &K) -> Answer<()> {
        if ready(self.0.wait(key)).is_none() {
            ready(self.0.succeed(key));
        }
        Answer::Now(())
    }
}

/// A gate that answers over the network (a store shared by a fleet): each
/// question one boxed future owning a clone of the key, awaited by the
/// request. The same questions, in the same order, as [`Contract`] asks.
pub(crate) struct Remote<G>(pub(crate) Arc<G>);

impl<K, G> Gate<K> for Remote<G>
where
    G: keyed_backoff::Gate<K> + 'static,
    K: Clone + Send + Sync + 'static,
{
    fn remaining(&self, key: &K) -> Answer<Option<Duration>> {
        let (gate, key) = (Arc::clone(&self.0), key.clone());
        Answer::Later(Box::pin(async move { Ok(gate.claim(&key).await?) }))
    }

    fn failed(&self, key: &K, hold: Option<Duration>, then_wait: bool) -> Answer<Option<Duration>> {
        let (gate, key) = (Arc::clone(&self.0), key.clone());
        Answer::Later(Box::pin(async move {
            let _ = gate.fail(&key).await?;
            if let Some(wait) = hold {
                gate.hold(&key, wait).await?;
            }
            Ok(if then_wait {
                gate.claim(&key).await?
            } else {
                None
            })
        }))
    }

    fn succeeded(&self, key: &K) -> Answer<()> {
        let (gate, key) = (Arc::clone(&self.0), key.clone());
        Answer::Later(Box::pin(async move {
            if gate.wait(&key).await?.is_none() {
                gate.succeed(&key).await?;
            }
            Ok(())
        }))
    }
}
