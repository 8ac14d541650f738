//! A request's way through the layer, as futures with explicit states:
//! admission (waiting in its queue until it is dispatched or its wait runs
//! out), then the inner service's readiness and response.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower_service::Service;

use super::shared::{Admitted, Limits, Seat, Shared, Waiting};
use super::{BoxError, Class, Overloaded};
use crate::Rejected;

pin_project! {
    /// Admission of one request: its seat, or its refusal.
    #[project = AcquireProj]
    pub(crate) enum Acquire {
        // Not polled yet: admission starts at the first poll.
        Start { admit: Option<(Arc<Shared>, Class, Limits)> },
        // Waiting in its queue; the timer wakes it when its wait runs out
        // or when its level has something to do on its own.
        Queued { waiting: Waiting, #[pin] sleep: Sleep },
        Done,
    }
}

impl Acquire {
    pub(crate) fn new(shared: Arc<Shared>, class: Class, limits: Limits) -> Self {
        Acquire::Start {
            admit: Some((shared, class, limits)),
        }
    }
}

impl Future for Acquire {
    type Output = Result<Seat, Overloaded>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                AcquireProj::Start { admit } => {
                    let (shared, class, limits) = admit.take().expect("polled after completion");
                    let admitted = shared.admit(class, limits, cx.waker(), Instant::now());
                    let (waiting, next) = match admitted {
                        Admitted::Seated(seat) => return self.finish(Ok(seat)),
                        Admitted::Refused(refused) => return self.finish(Err(refused)),
                        Admitted::Queued(waiting, next) => (waiting, next),
                    };
                    // Its task is known to its level already: the timer is
                    // all that is left to set. Making one panics without a
                    // time driver: the wait cannot be bounded, so the
                    // request is refused.
                    let wake_at = next.map_or(waiting.deadline, |at| at.min(waiting.deadline));
                    match std::panic::catch_unwind(|| tokio::time::sleep_until(wake_at)) {
                        Ok(sleep) => self.set(Acquire::Queued { waiting, sleep }),
                        Err(_) => {
                            let given_up = give_up(waiting, Instant::now(), Rejected::NoTimer);
                            return self.finish(given_up);
                        }
                    }
                    let AcquireProj::Queued { sleep, .. } = self.as_mut().project() else {
                        unreachable!("queued above");
                    };
                    ready!(sleep.poll(cx));
                }
                AcquireProj::Queued { waiting, mut sleep } => {
                    let now = Instant::now();
                    let shared = &waiting.shared;
                    let (dispatched, next) =
                        shared.poll_dispatched(waiting.ticket, cx.waker(), now);
                    if dispatched {
                        waiting.armed = false;
                        let index = waiting.ticket.level;
                        shared.observer.waited(index, waiting.arrived, now, true);
                        let seat = Seat {
                            shared: Arc::clone(shared),
                            ticket: waiting.ticket,
                        };
                        return self.finish(Ok(seat));
                    }
                    if now >= waiting.deadline {
                        waiting.armed = false;
                        let given_up = waiting.shared.give_up(
                            waiting.ticket,
                            waiting.arrived,
                            now,
                            waiting.limits,
                            Rejected::TimedOut,
                        );
                        return self.finish(given_up);
                    }
                    let wake_at = next.map_or(waiting.deadline, |at| at.min(waiting.deadline));
                    if sleep.deadline() != wake_at {
                        sleep.as_mut().reset(wake_at);
                    }
                    ready!(sleep.poll(cx));
                }
                AcquireProj::Done => panic!("polled after completion"),
            }
        }
    }
}

impl Acquire {
    fn finish(
        mut self: Pin<&mut Self>,
        out: Result<Seat, Overloaded>,
    ) -> Poll<Result<Seat, Overloaded>> {
        self.set(Acquire::Done);
        Poll::Ready(out)
    }
}

/// `waiting` stops waiting at `now` for `why`.
fn give_up(mut waiting: Waiting, now: Instant, why: Rejected) -> Result<Seat, Overloaded> {
    waiting.armed = false;
    let (ticket, arrived, limits) = (waiting.ticket, waiting.arrived, waiting.limits);
    waiting.shared.give_up(ticket, arrived, now, limits, why)
}

/// Why a call ended without a response.
pub(crate) enum Failure<E> {
    /// Admission refused it.
    Refused(Overloaded),
    /// The inner service failed (its seat is released).
    Service(E),
}

pin_project! {
    /// One request through the layer: admission, then the inner service's
    /// readiness and response, with the seat that held it.
    pub(crate) struct Call<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S::Future>,
        inner: S,
        request: Option<Req>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Admitting { #[pin] acquire: Acquire },
        // Seated: waiting for the inner service to be ready.
        Ready { seat: Option<Seat> },
        Called { #[pin] future: F, seat: Option<Seat> },
        Done,
    }
}

impl<S: Service<Req>, Req> Call<S, Req> {
    /// `request` for `inner`, once admitted by `acquire`.
    pub(crate) fn new(acquire: Acquire, inner: S, request: Req) -> Self {
        Call {
            state: State::Admitting { acquire },
            inner,
            request: Some(request),
        }
    }
}

impl<S: Service<Req>, Req> Future for Call<S, Req> {
    type Output = Result<(S::Response, Seat), Failure<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Admitting { acquire } => match ready!(acquire.poll(cx)) {
                    Ok(seat) => this.state.set(State::Ready { seat: Some(seat) }),
                    Err(refused) => {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(Failure::Refused(refused)));
                    }
                },
                StateProj::Ready { seat } => {
                    if let Err(e) = ready!(this.inner.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(Failure::Service(e)));
                    }
                    let seat = seat.take();
                    let request = this.request.take().expect("called once");
                    let future = this.inner.call(request);
                    this.state.set(State::Called { future, seat });
                }
                StateProj::Called { future, seat } => {
                    let output = ready!(future.poll(cx));
                    let seat = seat.take();
                    this.state.set(State::Done);
                    return Poll::Ready(match (output, seat) {
                        (Ok(response), Some(seat)) => Ok((response, seat)),
                        (Ok(_), None) => unreachable!("a called request holds its seat"),
                        (Err(e), _) => Err(Failure::Service(e)),
                    });
                }
                StateProj::Done => panic!("polled after completion"),
            }
        }
    }
}

pin_project! {
    /// The future of a [`Fairness`](super::Fairness) call: admission (it
    /// may wait in its queue), then the inner service's readiness and
    /// response. Its seat is released when the response is ready, when
    /// the inner service fails, or when it is dropped.
    pub struct ResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        call: Call<S, Req>,
    }
}

impl<S: Service<Req>, Req> ResponseFuture<S, Req> {
    pub(crate) fn new(call: Call<S, Req>) -> Self {
        ResponseFuture { call }
    }
}

impl<S, Req> Future for ResponseFuture<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.project().call.poll(cx)) {
            // The seat is released as the response leaves.
            Ok((response, _seat)) => Ok(response),
            Err(Failure::Refused(refused)) => Err(Box::new(refused)),
            Err(Failure::Service(e)) => Err(e.into()),
        })
    }
}

impl<S: Service<Req>, Req> fmt::Debug for ResponseFuture<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
