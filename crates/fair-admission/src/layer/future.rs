//! Admission as a future: a request waits in its queue until it is
//! dispatched or its wait runs out, and the service's response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::seat::{Seat, Waiting};
use super::shared::{Limits, Shared, far_future};
use super::{BoxError, Class, Overloaded};
use crate::{Admit, Rejected, Ticket};

/// The future of a [`Fairness`](super::Fairness) call: admission, then the
/// inner service's response.
pub struct ResponseFuture<T> {
    inner: Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>,
}

impl<T> ResponseFuture<T> {
    pub(crate) fn new(inner: impl Future<Output = Result<T, BoxError>> + Send + 'static) -> Self {
        ResponseFuture {
            inner: Box::pin(inner),
        }
    }
}

impl<T> Future for ResponseFuture<T> {
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for ResponseFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl Shared {
    /// Admits a request, waiting in its queue up to `limits.queue_wait`.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        class: Class,
        limits: Limits,
    ) -> Result<Seat, Overloaded> {
        let arrived = Instant::now();
        let level = class.level;
        let (ticket, rx) = {
            let mut state = self.state.lock();
            self.advance(&mut state, arrived);
            let admission = state.apf.admit(level, &class.flow_key(), class.work);
            state.wake(admission.dispatched);
            self.observer.level(&state.apf, level);
            let ticket = match admission.admit {
                Admit::Rejected(reason) => {
                    self.observer.rejected(&class, reason);
                    return Err(state.overloaded(limits, level, reason));
                }
                Admit::Dispatched(ticket) | Admit::Queued(ticket) => ticket,
            };
            state.apf.name_flow(ticket, &class.schema, &class.flow);
            if let Admit::Dispatched(ticket) = admission.admit {
                self.observer.waited(level, arrived, arrived, true);
                return Ok(self.seat(ticket, &class));
            }
            let (tx, rx) = oneshot::channel();
            state.waiters.insert(ticket, tx);
            (ticket, rx)
        };
        let mut waiting = Waiting {
            shared: Arc::clone(self),
            ticket,
            level,
            armed: true,
        };
        let dispatched = match self.wait(rx, arrived, limits).await {
            Some(dispatched) => dispatched,
            None => {
                // A runtime built without `enable_time` cannot bound the
                // wait: the request is refused (dropping `waiting` gives
                // its place up).
                drop(waiting);
                self.observer.rejected(&class, Rejected::NoTimer);
                let state = self.state.lock();
                return Err(state.overloaded(limits, level, Rejected::NoTimer));
            }
        };
        waiting.armed = false;
        let now = Instant::now();
        if dispatched {
            self.observer.waited(level, arrived, now, true);
            return Ok(self.seat(ticket, &class));
        }
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        state.waiters.remove(&ticket);
        if !state.apf.cancel(ticket) {
            // Dispatched at the moment the wait ran out: the seat is ours.
            return Ok(self.seat(ticket, &class));
        }
        self.observer.level(&state.apf, level);
        self.observer.waited(level, arrived, now, false);
        self.observer.rejected(&class, Rejected::TimedOut);
        Err(state.overloaded(limits, level, Rejected::TimedOut))
    }

    /// Waits for `rx` (the request's dispatch) until the queue wait runs
    /// out: `Some(true)` if dispatched, `Some(false)` if the time ran out,
    /// `None` if the runtime has no timer. Meanwhile it wakes whenever the
    /// `Apf` has something to do on its own (seats freed after an
    /// additional latency, seats divided again between levels), so that
    /// those reach waiting requests however quiet the server is otherwise.
    async fn wait(
        &self,
        mut rx: oneshot::Receiver<()>,
        arrived: Instant,
        limits: Limits,
    ) -> Option<bool> {
        let deadline = arrived
            .checked_add(limits.queue_wait)
            .unwrap_or_else(far_future);
        loop {
            let wake_at = match self.state.lock().next_event() {
                Some(at) => at.min(deadline),
                None => deadline,
            };
            // Making a timer panics without a time driver.
            let rx = &mut rx;
            let timed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                tokio::time::timeout_at(wake_at, rx)
            }))
            .ok()?;
            match timed.await {
                Ok(woken) => return Some(woken.is_ok()),
                Err(_) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Some(false);
                    }
                    let mut state = self.state.lock();
                    self.advance(&mut state, now);
                }
            }
        }
    }

    fn seat(self: &Arc<Self>, ticket: Ticket, class: &Class) -> Seat {
        Seat {
            shared: Arc::clone(self),
            ticket,
            level: class.level,
        }
    }
}
