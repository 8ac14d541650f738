//! What the middleware asks of its gate, composed of the core's
//! [`DynGate`] questions: the same questions in the same order over any
//! gate, asked in place when the gate answers at once (in process: no
//! allocation) and as one boxed future when it answers across the network.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use keyed_backoff::Answer;
use keyed_backoff::DynGate;

use crate::error::BoxError;

/// A remote gate's answer, still to come.
pub(crate) type Pending<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// `steps`, composed of the gate's questions about a key and its domain:
/// asked in place over a gate that answers at once, else one boxed future
/// owning clones of the gate, the key and the domain's name.
macro_rules! compose {
    ($gate:expr, $key:expr, $domain:expr, |$g:ident, $k:ident, $d:ident| $steps:expr) => {{
        let (gate, key, domain) = ($gate, $key, $domain);
        if gate.answers_at_once() {
            let ($g, $k, $d): (&dyn DynGate<_>, _, Option<&str>) = (&**gate, key, domain);
            Answer::at_once($steps)
        } else {
            let (gate, key, domain) = (Arc::clone(gate), key.clone(), domain.map(str::to_owned));
            Answer::Later(Box::pin(async move {
                let ($g, $k, $d): (&dyn DynGate<_>, _, Option<&str>) =
                    (&*gate, &key, domain.as_deref());
                $steps.await
            }))
        }
    }};
}

/// The wait left before `key` may run, asked by a request about to be
/// sent (a wrapper may count it as the key's turn).
pub(crate) fn remaining<K>(gate: &Arc<dyn DynGate<K>>, key: &K) -> Answer<Option<Duration>> {
    gate.claim(key)
}

/// A failure for `key` (in the dependency `domain`, if the layer names
/// one): its backoff advances, at most once per window however many
/// requests fail for it; then the floor `hold` (a server's `Retry-After`)
/// if there is one, a longer one in place being kept; then, if
/// `then_wait`, the wait left before a retry.
pub(crate) fn failed<K>(
    gate: &Arc<dyn DynGate<K>>,
    key: &K,
    domain: Option<&str>,
    hold: Option<Duration>,
    then_wait: bool,
) -> Answer<Option<Duration>>
where
    K: Clone + Send + Sync + 'static,
{
    compose!(gate, key, domain, |g, k, d| record_failure(
        g, k, d, hold, then_wait
    ))
}

async fn record_failure<K>(
    gate: &dyn DynGate<K>,
    key: &K,
    domain: Option<&str>,
    hold: Option<Duration>,
    then_wait: bool,
) -> Result<Option<Duration>, BoxError> {
    // In backoff already: another request advanced this window.
    let _ = match domain {
        Some(domain) => gate.fail_in(key, domain),
        None => gate.fail(key),
    }
    .get()
    .await?;
    if let Some(wait) = hold {
        gate.hold(key, wait).get().await?;
    }
    Ok(if then_wait {
        gate.claim(key).get().await?
    } else {
        None
    })
}

/// A success for `key`: once its window has passed, its backoff and any
/// hold are forgotten. Within the window the success answers a request
/// sent before the key's latest failure, and changes nothing.
pub(crate) fn succeeded<K>(gate: &Arc<dyn DynGate<K>>, key: &K, domain: Option<&str>) -> Answer<()>
where
    K: Clone + Send + Sync + 'static,
{
    compose!(gate, key, domain, |g, k, d| record_success(g, k, d))
}

async fn record_success<K>(
    gate: &dyn DynGate<K>,
    key: &K,
    domain: Option<&str>,
) -> Result<(), BoxError> {
    if gate.wait(key).get().await?.is_none() {
        match domain {
            Some(domain) => gate.succeed_in(key, domain),
            None => gate.succeed(key),
        }
        .get()
        .await?;
    }
    Ok(())
}
