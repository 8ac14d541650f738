//! [`ResponseFuture`]: one request through the middleware, from its first
//! wait to its last attempt.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use keyed_backoff::InBackoff;
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower::Service;

use crate::error::BoxError;
use crate::observe::{self, Attempt};
use crate::policy::{Classify, Policy};
use crate::replay::Replay;

pin_project! {
    /// The future of [`KeyedBackoff`](crate::KeyedBackoff)'s responses.
    ///
    /// It waits for the request's key when it must, sends the request,
    /// records the outcome for the key, and retries as the layer allows.
    /// Dropping it at any point is safe: a wait in progress holds nothing
    /// but a clone of the inner service.
    pub struct ResponseFuture<S, Req, K, F, Cl, Rp>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S::Future>,
        service: S,
        // The request for the next attempt, while one may come.
        request: Option<Req>,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
        retries: u32,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut> {
        // Refused before any attempt.
        Refused { refused: InBackoff },
        // Waiting for the key's window to end.
        Waiting { sleep: Pin<Box<Sleep>>, since: Instant },
        // Waiting for the inner service to be ready.
        Ready,
        // An attempt in flight.
        Called { #[pin] future: Fut },
    }
}

/// The instant `wait` after `now`, or far in the future if that overflows.
fn after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

fn waiting<Fut>(wait: Duration) -> State<Fut> {
    let since = Instant::now();
    State::Waiting {
        sleep: Box::pin(tokio::time::sleep_until(after(since, wait))),
        since,
    }
}

impl<S, Req, K, F, Cl, Rp> ResponseFuture<S, Req, K, F, Cl, Rp>
where
    S: Service<Req>,
    Rp: Replay<Req>,
{
    pub(crate) fn refused(
        refused: InBackoff,
        service: S,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
    ) -> Self {
        Self::with(State::Refused { refused }, service, None, key, policy)
    }

    /// Sends `request` now on `service`, made ready by the caller.
    pub(crate) fn call(
        mut service: S,
        request: Req,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
    ) -> Self {
        let backup = policy.backup(&request, 0);
        let future = service.call(request);
        Self::with(State::Called { future }, service, backup, key, policy)
    }

    /// Sends `request` on `service` (not ready yet) after `wait`.
    pub(crate) fn wait(
        service: S,
        request: Req,
        wait: Duration,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
    ) -> Self {
        Self::with(waiting(wait), service, Some(request), key, policy)
    }

    fn with(
        state: State<S::Future>,
        service: S,
        request: Option<Req>,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
    ) -> Self {
        ResponseFuture {
            state,
            service,
            request,
            key,
            policy,
            retries: 0,
        }
    }
}

impl<S, Req, K, F, Cl, Rp> Future for ResponseFuture<S, Req, K, F, Cl, Rp>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    K: fmt::Debug,
    Cl: Classify<S::Response, S::Error>,
    Rp: Replay<Req>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Refused { refused } => return Poll::Ready(Err(Box::new(*refused))),
                StateProj::Waiting { sleep, since } => {
                    ready!(sleep.as_mut().poll(cx));
                    // The window may have been extended meanwhile.
                    if let Some(wait) = this.policy.gate.remaining(this.key) {
                        sleep.as_mut().reset(after(Instant::now(), wait));
                        continue;
                    }
                    let attempt = if *this.retries == 0 {
                        Attempt::First
                    } else {
                        Attempt::Retry
                    };
                    observe::waited(since.elapsed(), attempt);
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        return Poll::Ready(Err(error.into()));
                    }
                    let Some(request) = this.request.take() else {
                        unreachable!("an attempt is made only with a request to send")
                    };
                    *this.request = this.policy.backup(&request, *this.retries);
                    let future = this.service.call(request);
                    this.state.set(State::Called { future });
                }
                StateProj::Called { future } => {
                    let result = ready!(future.poll(cx));
                    let replayable = this.request.is_some();
                    match this
                        .policy
                        .settle(this.key, &result, *this.retries, replayable)
                    {
                        None => return Poll::Ready(result.map_err(Into::into)),
                        Some(wait) => {
                            *this.retries += 1;
                            this.state.set(match wait {
                                Some(wait) => waiting(wait),
                                None => State::Ready,
                            });
                        }
                    }
                }
            }
        }
    }
}

impl<S, Req, K, F, Cl, Rp> fmt::Debug for ResponseFuture<S, Req, K, F, Cl, Rp>
where
    S: Service<Req>,
    K: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("key", &self.key)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}
