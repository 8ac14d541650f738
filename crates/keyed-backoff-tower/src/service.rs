//! [`KeyedBackoff`]: the service a [`KeyedBackoffLayer`](crate::KeyedBackoffLayer)
//! makes.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

use crate::ask::Answer;
use crate::error::BoxError;
use crate::future::ResponseFuture;
use crate::policy::{Classify, Policy};
use crate::replay::Replay;

/// The service [`KeyedBackoffLayer`](crate::KeyedBackoffLayer) makes
/// around `S`; the layer's documentation says what it does.
///
/// Cloning it is cheap, and clones share the layer's manager, budget and
/// settings. Each request and each retry is sent through a clone of `S`,
/// so `S` must be `Clone` (wrap it in `tower::buffer::Buffer` if it is
/// not). Retries send a copy of the request made by the layer's
/// [`Replay`](crate::Replay): `Clone` by default.
///
/// ```
/// use keyed_backoff_tower::{Backoff, KeyedBackoff, KeyedBackoffLayer};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::Layer;
/// let backoff = Arc::new(Backoff::<u8>::new(Duration::from_millis(10), Duration::from_secs(1))?);
/// let service: KeyedBackoff<_, u8, _> = KeyedBackoffLayer::new(backoff, |shard: &u8| *shard)
///     .layer(tower::service_fn(|shard: u8| async move { Ok::<_, std::io::Error>(shard) }));
/// # let _ = service;
/// # Ok::<(), keyed_backoff_tower::ConfigError>(())
/// ```
pub struct KeyedBackoff<S, K, F, Cl = crate::RetryErrors, Rp = crate::CloneRequest> {
    inner: S,
    policy: Arc<Policy<K, F, Cl, Rp>>,
}

impl<S, K, F, Cl, Rp> KeyedBackoff<S, K, F, Cl, Rp> {
    pub(crate) fn new(inner: S, policy: Arc<Policy<K, F, Cl, Rp>>) -> Self {
        KeyedBackoff { inner, policy }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, K, F, Cl, Rp> Clone for KeyedBackoff<S, K, F, Cl, Rp> {
    fn clone(&self) -> Self {
        KeyedBackoff {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<S: fmt::Debug, K, F, Cl, Rp> fmt::Debug for KeyedBackoff<S, K, F, Cl, Rp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBackoff")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, Req, K, F, Cl, Rp> Service<Req> for KeyedBackoff<S, K, F, Cl, Rp>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    K: fmt::Debug + Clone + Send + Sync + 'static,
    F: Fn(&Req) -> K,
    Cl: Classify<S::Response, S::Error>,
    Rp: Replay<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Req, K, F, Cl, Rp>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.policy.key)(&request);
        let policy = Arc::clone(&self.policy);
        let admitted = match policy.admit(&key) {
            Answer::Now(remaining) => policy.admitted(&key, remaining),
            // A remote gate: the request asks it, then goes on as below.
            Answer::Later(admission) => {
                let service = self.inner.clone();
                return ResponseFuture::admitting(service, request, admission, key, policy);
            }
        };
        match admitted {
            Err(refused) => ResponseFuture::refused(refused, self.inner.clone(), key, policy),
            // The key may run: send the request on the service made ready
            // by `poll_ready`, and keep a fresh clone in its place.
            Ok(None) => {
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                ResponseFuture::call(ready, request, key, policy)
            }
            // It must wait: its readiness stays here for the next request,
            // and the wait holds only a clone, made ready after the wait.
            Ok(Some(wait)) => ResponseFuture::wait(self.inner.clone(), request, wait, key, policy),
        }
    }
}
