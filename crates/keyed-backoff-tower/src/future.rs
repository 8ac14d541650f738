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

use crate::ask::{Answer, Pending};
use crate::error::BoxError;
use crate::observe::{self, Attempt};
use crate::policy::{Classify, Failed, Policy, Settled, Wait};
use crate::replay::Replay;

pin_project! {
    /// The future of [`KeyedBackoff`](crate::KeyedBackoff)'s responses.
    ///
    /// It waits for the request's key when it must, sends the request,
    /// records the outcome for the key, and retries as the layer allows.
    /// Dropping it at any point is safe: a wait in progress holds nothing
    /// but a clone of the inner service. Over a gate that answers across
    /// the network (a store shared by a fleet) it also awaits the gate's
    /// answers; over an in-process gate it never does.
    pub struct ResponseFuture<S, Req, K, F, Cl, Rp>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S::Future, S::Response, S::Error>,
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
    enum State<Fut, Res, E> {
        // Refused before any attempt.
        Refused { refused: InBackoff },
        // Asking a remote gate whether the key may run.
        Admitting { answer: Pending<Option<Duration>> },
        // Waiting for the key's window to end.
        Waiting { sleep: Pin<Box<Sleep>>, since: Instant },
        // Asking a remote gate again once a wait has ended.
        Rechecking { answer: Pending<Option<Duration>>, since: Instant },
        // Waiting for the inner service to be ready.
        Ready,
        // An attempt in flight.
        Called { #[pin] future: Fut },
        // A failed attempt being recorded by a remote gate, which answers
        // the wait before a retry.
        Failing { answer: Pending<Option<Duration>>, may_retry: bool, result: Option<Result<Res, E>> },
        // A success being recorded by a remote gate.
        Succeeding { answer: Pending<()>, result: Option<Result<Res, E>> },
    }
}

/// The instant `wait` after `now`, or far in the future if that overflows.
fn after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

fn waiting<Fut, Res, E>(wait: Duration) -> State<Fut, Res, E> {
    waiting_since(wait, Instant::now())
}

/// Waiting `wait` from now, for a wait that began at `since`.
fn waiting_since<Fut, Res, E>(wait: Duration, since: Instant) -> State<Fut, Res, E> {
    State::Waiting {
        sleep: Box::pin(tokio::time::sleep_until(after(Instant::now(), wait))),
        since,
    }
}

/// A wait that began at `since` is over: the attempt is made.
fn waited_out<Fut, Res, E>(since: Instant, retries: u32) -> State<Fut, Res, E> {
    let attempt = if retries == 0 {
        Attempt::First
    } else {
        Attempt::Retry
    };
    observe::waited(since.elapsed(), attempt);
    State::Ready
}

/// The next attempt: now, or after `wait`.
fn retried<Fut, Res, E>(wait: Wait) -> State<Fut, Res, E> {
    match wait {
        Some(wait) => waiting(wait),
        None => State::Ready,
    }
}

/// The result kept while a remote gate records it.
fn kept<T>(result: &mut Option<T>) -> T {
    let Some(result) = result.take() else {
        unreachable!("a result is kept until its record is answered")
    };
    result
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

    /// Sends `request` on `service` (not ready yet) once a remote gate
    /// answers `admission`: now, after a wait, or never (refused).
    pub(crate) fn admitting(
        service: S,
        request: Req,
        admission: Pending<Option<Duration>>,
        key: K,
        policy: Arc<Policy<K, F, Cl, Rp>>,
    ) -> Self {
        let state = State::Admitting { answer: admission };
        Self::with(state, service, Some(request), key, policy)
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
        state: State<S::Future, S::Response, S::Error>,
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
    K: fmt::Debug + Clone + Send + Sync + 'static,
    Cl: Classify<S::Response, S::Error>,
    Rp: Replay<Req>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Refused { refused } => return Poll::Ready(Err(Box::new(*refused))),
                StateProj::Admitting { answer } => {
                    // A gate that cannot answer refuses: never sent blind.
                    let remaining = ready!(answer.as_mut().poll(cx))?;
                    match this.policy.admitted(this.key, remaining) {
                        Err(refused) => return Poll::Ready(Err(Box::new(refused))),
                        Ok(wait) => this.state.set(retried(wait)),
                    }
                }
                StateProj::Waiting { sleep, since } => {
                    ready!(sleep.as_mut().poll(cx));
                    // The window may have been extended meanwhile.
                    match crate::ask::remaining(&this.policy.gate, this.key) {
                        Answer::Now(Some(wait)) => {
                            sleep.as_mut().reset(after(Instant::now(), wait));
                            continue;
                        }
                        Answer::Now(None) => {
                            let next = waited_out(*since, *this.retries);
                            this.state.set(next);
                        }
                        Answer::Later(answer) => {
                            let since = *since;
                            this.state.set(State::Rechecking { answer, since });
                        }
                    }
                }
                StateProj::Rechecking { answer, since } => {
                    let since = *since;
                    let next = match ready!(answer.as_mut().poll(cx))? {
                        Some(wait) => waiting_since(wait, since),
                        None => waited_out(since, *this.retries),
                    };
                    this.state.set(next);
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
                    let settled = this
                        .policy
                        .settle(this.key, &result, *this.retries, replayable);
                    let retry = match settled {
                        Settled::Done(None | Some(Answer::Now(()))) => None,
                        Settled::Done(Some(Answer::Later(answer))) => {
                            let result = Some(result);
                            this.state.set(State::Succeeding { answer, result });
                            continue;
                        }
                        Settled::Failed(Failed {
                            answer: Answer::Now(wait),
                            may_retry,
                        }) => may_retry
                            .then(|| this.policy.retry(this.key, wait, *this.retries))
                            .flatten(),
                        Settled::Failed(Failed {
                            answer: Answer::Later(answer),
                            may_retry,
                        }) => {
                            let result = Some(result);
                            this.state.set(State::Failing {
                                answer,
                                may_retry,
                                result,
                            });
                            continue;
                        }
                    };
                    match retry {
                        None => return Poll::Ready(result.map_err(Into::into)),
                        Some(wait) => {
                            *this.retries += 1;
                            this.state.set(retried(wait));
                        }
                    }
                }
                StateProj::Failing {
                    answer,
                    may_retry,
                    result,
                } => {
                    // A failure the gate could not record is not retried.
                    let recorded = ready!(answer.as_mut().poll(cx));
                    let retry = match recorded {
                        Ok(wait) if *may_retry => this.policy.retry(this.key, wait, *this.retries),
                        _ => None,
                    };
                    match retry {
                        None => return Poll::Ready(kept(result).map_err(Into::into)),
                        Some(wait) => {
                            *this.retries += 1;
                            this.state.set(retried(wait));
                        }
                    }
                }
                StateProj::Succeeding { answer, result } => {
                    // The response is the caller's whether or not the
                    // gate recorded the success.
                    let _ = ready!(answer.as_mut().poll(cx));
                    return Poll::Ready(kept(result).map_err(Into::into));
                }
            }
        }
    }
}

impl<S, Req, K, F, Cl, Rp> fmt::Debug for ResponseFuture<S, Req, K, F, Cl, Rp>
where
    S: Service<Req>,
    K: fmt::Debug + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("key", &self.key)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}
