//! Retry helpers: run an operation until it succeeds or a limit says stop.
//!
//! # When to use what
//!
//! - **Backoff** spaces retries out so a struggling dependency gets room to
//!   recover, and jitter keeps many clients from retrying in lockstep. It
//!   does not bound the load: every failed call is still retried.
//! - **Max attempts** bounds the work per call. It multiplies across layers:
//!   five layers that each try 3 times turn one user request into up to
//!   3^5 = 243 calls at the bottom. Retry at one layer only.
//! - **Retry budgets** ([`crate::budget`]) bound retries as a share of
//!   traffic. With a 10 % budget an overloaded backend sees at most about
//!   1.1× its normal load from retries, where "3 attempts per request"
//!   approaches 3× exactly when the backend is failing: the feedback loop
//!   that keeps systems stuck after an overload (metastable failure). gRPC's
//!   retry throttling, Finagle's and tower's budgets and the SRE book's
//!   client-side throttling all exist for this reason.
//!
//! [`Retry`] combines all three, measures elapsed time on a [`Clock`] (so a
//! [`MockClock`](crate::clock::MockClock) drives it in tests), sleeps through
//! a function you give it (so tests never wait), honours a server's `retry_after`,
//! and reports how many attempts ran.
//!
//! ```
//! use keyed_backoff::retry::{Retry, Verdict};
//! use keyed_backoff::strategy::{Exponential, Strategy};
//! use std::time::Duration;
//!
//! let strategy = Strategy::new(Exponential::new(Duration::from_millis(10), 2.0))?;
//! let mut slept = Vec::new();
//! let outcome = Retry::new(&strategy)
//!     .max_attempts(5)
//!     .classify(|e: &&str| if *e == "bad request" { Verdict::Stop } else { Verdict::Retry })
//!     .run(|d| slept.push(d), |attempt| if attempt < 3 { Err("unavailable") } else { Ok(("done", attempt)) });
//! assert_eq!(outcome.unwrap(), ("done", 3));
//! assert_eq!(slept, [Duration::from_millis(10), Duration::from_millis(20)]);
//! # Ok::<(), keyed_backoff::ConfigError>(())
//! ```

use std::fmt;
use std::time::Duration;

use crate::budget::RetryBudget;
use crate::clock::{Clock, ClockInstant, StdClock};
use crate::strategy::{Step, Strategy};

/// How to treat one error.
///
/// ```
/// use keyed_backoff::retry::Verdict;
/// use std::time::Duration;
/// let v = Verdict::RetryAfter(Duration::from_secs(2)); // e.g. from an HTTP Retry-After header
/// assert_ne!(v, Verdict::Stop);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Transient: retry after the strategy's next delay.
    Retry,
    /// Transient, and the server said when: retry after this delay instead
    /// (capped at the strategy's cap), still advancing the strategy.
    RetryAfter(Duration),
    /// Permanent: stop at once.
    Stop,
}

/// Why retrying stopped.
///
/// ```
/// use keyed_backoff::retry::GaveUp;
/// assert_eq!(GaveUp::MaxAttempts.to_string(), "attempt limit reached");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GaveUp {
    /// The error was classified permanent.
    Permanent,
    /// `max_attempts` attempts ran.
    MaxAttempts,
    /// Waiting for the next attempt would pass `max_elapsed`.
    MaxElapsed,
    /// The strategy returned no further delay.
    StrategyExhausted,
    /// The retry budget refused the retry.
    Budget,
}

impl fmt::Display for GaveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GaveUp::Permanent => "permanent error",
            GaveUp::MaxAttempts => "attempt limit reached",
            GaveUp::MaxElapsed => "time limit reached",
            GaveUp::StrategyExhausted => "backoff strategy gave up",
            GaveUp::Budget => "retry budget exhausted",
        })
    }
}

/// The last error, how many attempts ran and why retrying stopped.
///
/// ```
/// use keyed_backoff::retry::{GaveUp, Retry};
/// use keyed_backoff::strategy::{Constant, Strategy};
/// let s = Strategy::new(Constant::new(std::time::Duration::ZERO))?;
/// let f = Retry::new(&s).max_attempts(3).run(|_| {}, |_| Err::<(), _>("boom")).unwrap_err();
/// assert_eq!(f.reason, GaveUp::MaxAttempts);
/// assert_eq!(f.to_string(), "gave up after 3 attempts (attempt limit reached): boom");
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failure<E> {
    /// The error of the last attempt.
    pub error: E,
    /// Attempts run.
    pub attempts: u32,
    /// Why no further attempt was made.
    pub reason: GaveUp,
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "gave up after {} attempts ({}): {}",
            self.attempts, self.reason, self.error
        )
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for Failure<E> {}

type Classifier<'a, E> = Box<dyn Fn(&E) -> Verdict + Send + 'a>;
type Notifier<'a, E> = Box<dyn FnMut(&E, Duration, u32) + Send + 'a>;

/// A retry loop's settings; made by [`Retry::new`], run by
/// [`run`](Self::run) (blocking) or `run_async` (with the `tokio` feature).
///
/// Defaults: no attempt limit (the strategy decides), no time limit, every
/// error transient, no notification, no budget, the [`StdClock`].
#[must_use = "a Retry does nothing until run"]
pub struct Retry<'a, E, C: Clock = StdClock> {
    delays: Box<dyn Iterator<Item = Duration> + Send + 'a>,
    cap: Duration,
    max_attempts: Option<u32>,
    max_elapsed: Option<Duration>,
    clock: C,
    classify: Classifier<'a, E>,
    notify: Option<Notifier<'a, E>>,
    budget: Option<Box<dyn RetryBudget + 'a>>,
}

impl<E, C: Clock> fmt::Debug for Retry<'_, E, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("cap", &self.cap)
            .field("max_attempts", &self.max_attempts)
            .field("max_elapsed", &self.max_elapsed)
            .field("notify", &self.notify.is_some())
            .field("budget", &self.budget.is_some())
            .finish_non_exhaustive()
    }
}

impl<'a, E> Retry<'a, E> {
    /// Retries with the delays of `strategy` (a fresh iterator per loop).
    ///
    /// ```
    /// use keyed_backoff::retry::Retry;
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::ZERO))?.max_attempts(2);
    /// let failed = Retry::new(&s).run(|_| {}, |_| Err::<(), _>("no")).unwrap_err();
    /// assert_eq!(failed.attempts, 3); // the first try and two retries
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new<S: Step + Clone + Send>(strategy: &Strategy<S>) -> Self {
        Retry {
            delays: Box::new(strategy.iter()),
            cap: strategy.max_delay(),
            max_attempts: None,
            max_elapsed: None,
            clock: StdClock,
            classify: Box::new(|_| Verdict::Retry),
            notify: None,
            budget: None,
        }
    }
}

impl<'a, E, C: Clock> Retry<'a, E, C> {
    /// At most `n` attempts in all, the first included (`n = 0` behaves as 1).
    ///
    /// ```
    /// use keyed_backoff::retry::{GaveUp, Retry};
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::ZERO))?;
    /// let f = Retry::new(&s).max_attempts(4).run(|_| {}, |_| Err::<(), _>(())).unwrap_err();
    /// assert_eq!((f.attempts, f.reason), (4, GaveUp::MaxAttempts));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n.max(1));
        self
    }

    /// Stop before a wait that would end more than `limit` after the first
    /// attempt started, measured on the retry's clock.
    ///
    /// ```
    /// use keyed_backoff::retry::{GaveUp, Retry};
    /// use keyed_backoff::clock::MockClock;
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let s = Strategy::new(Constant::new(Duration::from_secs(4)))?;
    /// let f = Retry::new(&s)
    ///     .clock(clock.clone())
    ///     .max_elapsed(Duration::from_secs(10))
    ///     .run(|d| clock.advance(d), |_| Err::<(), _>(()))
    ///     .unwrap_err();
    /// assert_eq!((f.attempts, f.reason), (3, GaveUp::MaxElapsed)); // waits 4 s + 4 s; a third wait would end at 12 s
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max_elapsed(mut self, limit: Duration) -> Self {
        self.max_elapsed = Some(limit);
        self
    }

    /// The clock that measures elapsed time.
    pub fn clock<C2: Clock>(self, clock: C2) -> Retry<'a, E, C2> {
        Retry {
            delays: self.delays,
            cap: self.cap,
            max_attempts: self.max_attempts,
            max_elapsed: self.max_elapsed,
            clock,
            classify: self.classify,
            notify: self.notify,
            budget: self.budget,
        }
    }

    /// Classifies each error: retry, retry after a server-given delay, or
    /// stop.
    ///
    /// ```
    /// use keyed_backoff::retry::{GaveUp, Retry, Verdict};
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::ZERO))?;
    /// let f = Retry::new(&s)
    ///     .classify(|code: &u16| if *code == 404 { Verdict::Stop } else { Verdict::Retry })
    ///     .run(|_| {}, |_| Err::<(), u16>(404))
    ///     .unwrap_err();
    /// assert_eq!((f.attempts, f.reason), (1, GaveUp::Permanent));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn classify(mut self, classify: impl Fn(&E) -> Verdict + Send + 'a) -> Self {
        self.classify = Box::new(classify);
        self
    }

    /// Retry only errors for which `predicate` holds (others are
    /// permanent). A shorthand for [`classify`](Self::classify).
    ///
    /// ```
    /// use keyed_backoff::retry::{GaveUp, Retry};
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::ZERO))?;
    /// let f = Retry::new(&s).when(|e: &&str| e.contains("timeout")).run(|_| {}, |_| Err::<(), _>("denied")).unwrap_err();
    /// assert_eq!(f.reason, GaveUp::Permanent);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn when(self, predicate: impl Fn(&E) -> bool + Send + 'a) -> Self {
        self.classify(move |e| {
            if predicate(e) {
                Verdict::Retry
            } else {
                Verdict::Stop
            }
        })
    }

    /// Called before each wait with the error, the delay and the number of
    /// the attempt that failed (1 for the first).
    ///
    /// ```
    /// use keyed_backoff::retry::Retry;
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::from_millis(1)))?.max_attempts(2);
    /// let mut seen = Vec::new();
    /// let _ = Retry::new(&s).notify(|e: &&str, d, n| seen.push((e.to_string(), d, n))).run(|_| {}, |_| Err::<(), _>("x"));
    /// assert_eq!(seen.len(), 2);
    /// assert_eq!(seen[1].2, 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn notify(mut self, notify: impl FnMut(&E, Duration, u32) + Send + 'a) -> Self {
        self.notify = Some(Box::new(notify));
        self
    }

    /// Spend retries from `budget`: each first attempt and each outcome is
    /// reported to it, and every retry must be allowed by it.
    ///
    /// The budget is taken by value: pass `&budget` to lend it for a loop
    /// run in place, or an `Arc` to share it with a loop that moves into a
    /// spawned task (a `Retry<'static, _>` owns everything it needs).
    ///
    /// ```
    /// use keyed_backoff::budget::TokenBucket;
    /// use keyed_backoff::retry::{GaveUp, Retry};
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let budget = TokenBucket::new(4.0, 0.1)?; // retries while tokens > 2
    /// let s = Strategy::new(Constant::new(Duration::ZERO))?;
    /// let f = Retry::new(&s).budget(&budget).run(|_| {}, |_| Err::<(), _>(())).unwrap_err();
    /// assert_eq!((f.attempts, f.reason), (2, GaveUp::Budget));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn budget(mut self, budget: impl RetryBudget + 'a) -> Self {
        self.budget = Some(Box::new(budget));
        self
    }

    /// Runs `op` (given the attempt number, from 1) until it succeeds or a
    /// limit stops it, calling `sleep` with each delay between attempts:
    /// `std::thread::sleep` in production; a closure that records the delays
    /// or advances a [`MockClock`](crate::clock::MockClock) in tests.
    ///
    /// ```
    /// use keyed_backoff::retry::Retry;
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::from_millis(1)))?;
    /// // `op` is given the attempt number: a success returns it if it counts.
    /// let attempts = Retry::new(&s).run(std::thread::sleep, |n| if n == 2 { Ok(n) } else { Err(()) }).unwrap();
    /// assert_eq!(attempts, 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn run<T>(
        mut self,
        mut sleep: impl FnMut(Duration),
        mut op: impl FnMut(u32) -> Result<T, E>,
    ) -> Result<T, Failure<E>> {
        let start = self.clock.now();
        let mut attempt = 1;
        self.started();
        loop {
            let outcome = op(attempt);
            match self.after(outcome, attempt, start) {
                Next::Done(result) => return result,
                Next::Wait(delay) => {
                    sleep(delay);
                    attempt += 1;
                }
            }
        }
    }

    /// Async version of [`run`](Self::run): sleeps with `tokio::time::sleep`
    /// (so tokio's paused time drives its sleeps in tests). `max_elapsed` is
    /// measured on the retry's clock: under paused time set
    /// `.clock(TokioClock)` so that it follows the same virtual time as the
    /// sleeps.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
    /// use keyed_backoff::retry::Retry;
    /// use keyed_backoff::strategy::{Constant, Strategy};
    /// use std::time::Duration;
    /// let s = Strategy::new(Constant::new(Duration::from_secs(5)))?;
    /// let attempts = Retry::new(&s).run_async(|n| async move { if n == 3 { Ok(n) } else { Err(()) } }).await.unwrap();
    /// assert_eq!(attempts, 3);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// # }).unwrap();
    /// ```
    #[cfg(feature = "tokio")]
    pub async fn run_async<T, F>(mut self, mut op: impl FnMut(u32) -> F) -> Result<T, Failure<E>>
    where
        F: std::future::Future<Output = Result<T, E>>,
    {
        let start = self.clock.now();
        let mut attempt = 1;
        self.started();
        loop {
            let outcome = op(attempt).await;
            match self.after(outcome, attempt, start) {
                Next::Done(result) => return result,
                Next::Wait(delay) => {
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    fn started(&self) {
        if let Some(b) = &self.budget {
            b.on_request();
        }
    }

    /// The one decision both drivers share: what follows attempt `attempt`.
    fn after<T>(&mut self, outcome: Result<T, E>, attempt: u32, start: C::Instant) -> Next<T, E> {
        let error = match outcome {
            Ok(value) => {
                if let Some(b) = &self.budget {
                    b.on_outcome(true);
                }
                return Next::Done(Ok(value));
            }
            Err(error) => error,
        };
        if let Some(b) = &self.budget {
            b.on_outcome(false);
        }
        let stop = |error, reason| {
            Next::Done(Err(Failure {
                error,
                attempts: attempt,
                reason,
            }))
        };
        let verdict = (self.classify)(&error);
        if verdict == Verdict::Stop {
            return stop(error, GaveUp::Permanent);
        }
        if self.max_attempts.is_some_and(|max| attempt >= max) {
            return stop(error, GaveUp::MaxAttempts);
        }
        let Some(computed) = self.delays.next() else {
            return stop(error, GaveUp::StrategyExhausted);
        };
        let delay = match verdict {
            Verdict::RetryAfter(asked) => asked.min(self.cap),
            _ => computed,
        };
        if let Some(limit) = self.max_elapsed {
            let elapsed = self.clock.now().saturating_duration_since(start);
            if elapsed.saturating_add(delay) > limit {
                return stop(error, GaveUp::MaxElapsed);
            }
        }
        if self.budget.as_ref().is_some_and(|b| !b.try_retry()) {
            return stop(error, GaveUp::Budget);
        }
        if let Some(notify) = &mut self.notify {
            notify(&error, delay, attempt);
        }
        Next::Wait(delay)
    }
}

enum Next<T, E> {
    Done(Result<T, Failure<E>>),
    Wait(Duration),
}
