//! The opt-in in-process stand-in that answers while Redis is down, behind
//! a circuit breaker: it wraps one call to Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff::__private::saturating_nanos;
use keyed_backoff::Backoff;
use keyed_backoff::clock::ClockInstant;
use parking_lot::Mutex;

use crate::error::StoreError;
use crate::observe;
use crate::protocol::{Op, Reply, Request};

/// A reply, and whether this process alone made it (the fallback) rather
/// than the fleet's store.
pub(crate) struct Answer {
    pub(crate) reply: Reply,
    pub(crate) local: bool,
}

impl Answer {
    /// Redis's answer.
    pub(crate) fn shared(reply: Reply) -> Self {
        Answer {
            reply,
            local: false,
        }
    }
}

/// The in-process stand-in behind the circuit breaker.
pub(crate) struct Fallback {
    local: Backoff<String>,
    open_for: Duration,
    /// While set and in the future, Redis is not asked.
    open_until: Mutex<Option<Instant>>,
    answers: AtomicU64,
}

impl Fallback {
    pub(crate) fn new(local: Backoff<String>, open_for: Duration) -> Self {
        Fallback {
            local,
            open_for,
            open_until: Mutex::new(None),
            answers: AtomicU64::new(0),
        }
    }

    /// How many operations it has answered.
    pub(crate) fn answers(&self) -> u64 {
        self.answers.load(Ordering::Relaxed)
    }

    /// The request: Redis's answer through `remote`, or the local
    /// manager's while the breaker is open or when Redis cannot be reached
    /// or does not answer (which opens it). `remote` is not started while
    /// the breaker is open.
    pub(crate) async fn around(
        &self,
        request: Request<'_>,
        remote: impl Future<Output = Result<Reply, StoreError>>,
    ) -> Result<Answer, StoreError> {
        if self.is_open() {
            return Ok(self.answer(request));
        }
        match remote.await {
            Err(error @ (StoreError::Unavailable { .. } | StoreError::TimedOut { .. })) => {
                if self.trip() {
                    observe::breaker_opened(&error, self.open_for);
                }
                Ok(self.answer(request))
            }
            other => {
                if self.close() {
                    observe::breaker_closed();
                }
                other.map(Answer::shared)
            }
        }
    }

    fn is_open(&self) -> bool {
        self.open_until
            .lock()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Opens the breaker for `open_for`; whether it had been closed.
    fn trip(&self) -> bool {
        self.open_until
            .lock()
            .replace(Instant::now() + self.open_for)
            .is_none()
    }

    /// Closes the breaker after Redis answered; whether it had been open.
    fn close(&self) -> bool {
        self.open_until.lock().take().is_some()
    }

    /// The request answered by the local manager; the event's age is
    /// measured back from this process's now.
    fn answer(&self, request: Request<'_>) -> Answer {
        let Request { op, key, event, .. } = request;
        observe::fallback_answer(op, key);
        self.answers.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let at = now.offset_by_nanos(event.age_nanos().saturating_neg());
        let b = &self.local;
        let flag = |x: bool| Reply::Number(u64::from(x));
        let advanced = |d: Duration| Reply::Advanced {
            backoff_ns: saturating_nanos(d),
        };
        let reply = match op {
            Op::Next => advanced(b.next(key, at)),
            Op::Gate => match b.try_next(key, at) {
                Ok(d) => advanced(d),
                Err(w) => Reply::Refused {
                    remaining_ns: saturating_nanos(w.remaining),
                },
            },
            Op::Get => Reply::Number(saturating_nanos(b.get(key))),
            Op::Attempts => Reply::Number(u64::from(b.attempts(key))),
            Op::Remaining => Reply::Number(b.remaining(key, at).map_or(0, saturating_nanos)),
            Op::Since => flag(b.is_in_backoff_since(key, at)),
            Op::SinceUpdate => flag(b.is_in_backoff_since_update(key, at)),
            Op::Reset => flag(b.reset(key)),
            Op::GcKey => flag(false), // the local manager has its own GC
        };
        Answer { reply, local: true }
    }
}
