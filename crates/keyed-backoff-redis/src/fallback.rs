//! The opt-in in-process stand-in that answers while Redis is down, behind
//! a circuit breaker: it wraps one call to Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff::__private::saturating_nanos;
use keyed_backoff::clock::ClockInstant;
use keyed_backoff::{Backoff, Gate, InBackoff, Level};
use parking_lot::Mutex;

use crate::error::StoreError;
use crate::observe;
use crate::protocol::{Extra, Op, Reply, Request};

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
            return Ok(self.answer(request).await);
        }
        match remote.await {
            Err(error) if error.is_unreachable() => {
                if self.trip() {
                    observe::breaker_opened(&error, self.open_for);
                }
                Ok(self.answer(request).await)
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
    /// measured back from this process's now. The contract's operations
    /// (a gate on now, a floor, a level) go through its [`Gate`]
    /// implementation, as the store's own do through the script.
    async fn answer(&self, request: Request<'_>) -> Answer {
        let Request {
            op,
            key,
            event,
            extra,
            ..
        } = request;
        observe::fallback_answer(op, key);
        self.answers.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let at = now.offset_by_nanos(event.age_nanos().saturating_neg());
        let b = &self.local;
        let flag = |x: bool| Reply::Number(u64::from(x));
        let advanced = |level: Level| Reply::Level {
            backoff_ns: saturating_nanos(level.backoff),
            attempts: level.attempts,
        };
        let refused = |w: InBackoff| Reply::Refused {
            remaining_ns: saturating_nanos(w.remaining),
        };
        let owned = || key.to_owned();
        let reply = match (op, extra) {
            (Op::Next, _) => {
                let backoff = b.next(key, at);
                advanced(Level {
                    backoff,
                    attempts: b.attempts(key),
                })
            }
            // On now: the gate and the new level in one step.
            (Op::TryNext, _) if event.age_nanos() == 0 => {
                let Ok(gated) = b.fail(&owned()).await;
                gated.map_or_else(refused, advanced)
            }
            (Op::TryNext, _) => match b.try_next(key, at) {
                Ok(backoff) => advanced(Level {
                    backoff,
                    attempts: b.attempts(key),
                }),
                Err(w) => refused(w),
            },
            (Op::Get, _) => Reply::Number(saturating_nanos(b.get(key))),
            (Op::Attempts, _) => Reply::Number(u64::from(b.attempts(key))),
            (Op::Remaining, _) => Reply::Number(b.remaining(key, at).map_or(0, saturating_nanos)),
            (Op::Since, _) => flag(b.is_in_backoff_since(key, at)),
            (Op::SinceUpdate, _) => flag(b.is_in_backoff_since_update(key, at)),
            (Op::Reset, _) => flag(b.reset(key)),
            (Op::GcKey, _) => flag(false), // the local manager has its own GC
            (Op::Hold, Extra::Hold { wait_ns }) => {
                let Ok(()) = b.hold(&owned(), Duration::from_nanos(wait_ns)).await;
                flag(true)
            }
            (Op::Level, _) => {
                let Ok(level) = Gate::level(b, &owned()).await;
                level.map_or(Reply::Number(0), advanced)
            }
            (Op::Standing, _) => {
                let Ok(level) = Gate::level(b, &owned()).await;
                Reply::Standing {
                    level: level.map(|l| (saturating_nanos(l.backoff), l.attempts)),
                    remaining_ns: b.remaining(key, at).map_or(0, saturating_nanos),
                }
            }
            (
                Op::Resume,
                Extra::Resume {
                    backoff_ns,
                    attempts,
                },
            ) => {
                let level = Level {
                    backoff: Duration::from_nanos(backoff_ns),
                    attempts,
                };
                let Ok(()) = b.resume(&owned(), level).await;
                flag(true)
            }
            (Op::Hold | Op::Resume, _) => {
                unreachable!("hold and resume are always made with their arguments")
            }
        };
        Answer { reply, local: true }
    }
}
