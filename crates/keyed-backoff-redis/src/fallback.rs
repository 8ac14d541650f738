//! The opt-in in-process stand-in that answers while Redis is down, behind
//! a circuit breaker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff::__private::saturating_nanos;
use keyed_backoff::Backoff;
use keyed_backoff::clock::ClockInstant;
use parking_lot::Mutex;

use crate::event::Event;
use crate::script::{Op, Reply};

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

    pub(crate) fn is_open(&self) -> bool {
        self.open_until
            .lock()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Opens the breaker for `open_for`; whether it had been closed.
    pub(crate) fn trip(&self) -> bool {
        self.open_until
            .lock()
            .replace(Instant::now() + self.open_for)
            .is_none()
    }

    /// Closes the breaker after Redis answered; whether it had been open.
    pub(crate) fn close(&self) -> bool {
        let mut open_until = self.open_until.lock();
        open_until.take().is_some()
    }

    pub(crate) fn open_for(&self) -> Duration {
        self.open_for
    }

    /// `op` answered by the local manager; the event's age is measured back
    /// from this process's now.
    pub(crate) fn answer(&self, op: Op, key: &str, event: Event) -> Reply {
        self.answers.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let at = now.offset_by_nanos(event.age_nanos().saturating_neg());
        let b = &self.local;
        let flag = |x: bool| Reply::Number(u64::from(x));
        let advanced = |d: Duration| Reply::Advanced {
            backoff_ns: saturating_nanos(d),
        };
        match op {
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
            Op::Collect => flag(false), // the local manager has its own GC
        }
    }
}
