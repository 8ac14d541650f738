//! What a result means for its key and its request: which results are
//! failures to retry ([`Classify`]), and the decisions taken on each
//! attempt (wait, refuse, retry or return), in one place.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::InBackoff;
use keyed_backoff::budget::RetryBudget;

use crate::ask::{self, Answer};
use crate::observe::{self, Attempt, Denied};
use crate::replay::Replay;
use keyed_backoff::DynGate;

/// Which results are failures: a failure advances its key's backoff and
/// may be retried; any other `Ok` is a success and resets the key.
/// [`RetryErrors`] (every `Err`) by default, `RetryHttp`
/// for HTTP, or any `Fn(&Result<Res, E>) -> bool`.
///
/// A failure may also carry the server's own wait ([`retry_after`](Self::retry_after)):
/// the key is then held at least that long.
///
/// ```
/// use keyed_backoff_tower::{Classify, RetryErrors};
/// let retry_5xx = |r: &Result<u16, ()>| matches!(r, Err(_) | Ok(500..=599));
/// assert!(retry_5xx.should_retry(&Ok(503)));
/// assert!(!retry_5xx.should_retry(&Ok(404)));
/// assert!(Classify::<u16, ()>::should_retry(&RetryErrors, &Err(())));
/// ```
pub trait Classify<Res, E> {
    /// Whether this result is a failure to retry. A result that is not,
    /// and is `Ok`, counts as a success and resets its key.
    fn should_retry(&self, result: &Result<Res, E>) -> bool;

    /// For a failure, how long the server asked its key to wait (an HTTP
    /// `Retry-After`); `None` by default.
    ///
    /// ```
    /// use keyed_backoff_tower::Classify;
    /// use std::time::Duration;
    /// // Replies are (status, seconds to wait); 429 is retried after them.
    /// struct Busy;
    /// impl Classify<(u16, u64), ()> for Busy {
    ///     fn should_retry(&self, r: &Result<(u16, u64), ()>) -> bool {
    ///         matches!(r, Err(_) | Ok((429, _)))
    ///     }
    ///     fn retry_after(&self, r: &Result<(u16, u64), ()>) -> Option<Duration> {
    ///         match r {
    ///             Ok((429, secs)) => Some(Duration::from_secs(*secs)),
    ///             _ => None,
    ///         }
    ///     }
    /// }
    /// assert_eq!(Busy.retry_after(&Ok((429, 2))), Some(Duration::from_secs(2)));
    /// ```
    fn retry_after(&self, result: &Result<Res, E>) -> Option<Duration> {
        let _ = result;
        None
    }
}

/// Retry every `Err` and nothing else.
///
/// ```
/// use keyed_backoff_tower::{Classify, RetryErrors};
/// assert!(!Classify::<u8, ()>::should_retry(&RetryErrors, &Ok(1)));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryErrors;

impl<Res, E> Classify<Res, E> for RetryErrors {
    fn should_retry(&self, result: &Result<Res, E>) -> bool {
        result.is_err()
    }
}

impl<Res, E, F: Fn(&Result<Res, E>) -> bool> Classify<Res, E> for F {
    fn should_retry(&self, result: &Result<Res, E>) -> bool {
        self(result)
    }
}

/// The numbers a layer is configured with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_retries: u32,
    pub(crate) max_wait: Duration,
    pub(crate) max_retry_after: Duration,
}

/// How a layer names the dependency of a key's requests.
pub(crate) type DomainOf<K> = dyn for<'a> Fn(&'a K) -> Option<&'a str> + Send + Sync;

/// Go now, or after a wait.
pub(crate) type Wait = Option<Duration>;

/// Everything a layer's services share: the keys' manager, how to key and
/// classify, the budget and the limits.
pub(crate) struct Policy<K, F, Cl, Rp> {
    pub(crate) gate: Arc<dyn DynGate<K>>,
    pub(crate) key: Arc<F>,
    /// The dependency a key's requests go to, if the layer names one.
    pub(crate) domain: Option<Arc<DomainOf<K>>>,
    pub(crate) classify: Arc<Cl>,
    pub(crate) replay: Arc<Rp>,
    pub(crate) budget: Option<Arc<dyn RetryBudget>>,
    pub(crate) limits: Limits,
}

impl<K, F, Cl, Rp> Clone for Policy<K, F, Cl, Rp> {
    fn clone(&self) -> Self {
        Policy {
            gate: Arc::clone(&self.gate),
            key: Arc::clone(&self.key),
            domain: self.domain.clone(),
            classify: Arc::clone(&self.classify),
            replay: Arc::clone(&self.replay),
            budget: self.budget.clone(),
            limits: self.limits,
        }
    }
}

impl<K, F, Cl, Rp> fmt::Debug for Policy<K, F, Cl, Rp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("max_retries", &self.limits.max_retries)
            .field("max_wait", &self.limits.max_wait)
            .field("max_retry_after", &self.limits.max_retry_after)
            .field("budget", &self.budget.is_some())
            .finish_non_exhaustive()
    }
}

/// What a failed attempt's record asks of the request: the gate's answer
/// (the wait before a retry, when one may come), then [`Policy::retry`].
pub(crate) struct Failed {
    pub(crate) answer: Answer<Option<Duration>>,
    /// Whether a retry may come, so that the answer carries its wait.
    pub(crate) may_retry: bool,
}

/// An attempt's result as recorded: a success or a result not to retry
/// (with the gate's answer to await, if any), or a failure.
pub(crate) enum Settled {
    Done(Option<Answer<()>>),
    Failed(Failed),
}

impl<K: fmt::Debug + Clone + Send + Sync + 'static, F, Cl, Rp> Policy<K, F, Cl, Rp> {
    /// The dependency `key`'s requests go to, if the layer names one.
    fn domain_of<'k>(&self, key: &'k K) -> Option<&'k str> {
        self.domain.as_ref().and_then(|domain| domain(key))
    }

    /// A new request for `key`: the gate's wait, which [`admitted`](Self::admitted)
    /// then judges.
    pub(crate) fn admit(&self, key: &K) -> Answer<Option<Duration>> {
        if let Some(budget) = &self.budget {
            budget.on_request();
        }
        ask::remaining(&self.gate, key)
    }

    /// A new request for `key` whose wait is `remaining`: it may go now,
    /// must wait, or is refused because its key's window ends later than
    /// `max_wait` from now.
    pub(crate) fn admitted(&self, key: &K, remaining: Option<Duration>) -> Result<Wait, InBackoff> {
        match remaining {
            None => Ok(None),
            Some(remaining) if remaining > self.limits.max_wait => {
                observe::refused(key, remaining);
                Err(InBackoff { remaining })
            }
            Some(wait) => {
                observe::waiting(key, wait, Attempt::First);
                Ok(Some(wait))
            }
        }
    }

    /// An attempt for `key` ended with `result` after `retries` retries:
    /// the outcome is recorded for the key and the budget. A failure goes
    /// on to [`retry`](Self::retry) with the gate's wait. A request that
    /// was not copied (`replayable` false) is not retried.
    pub(crate) fn settle<Res, E>(
        &self,
        key: &K,
        result: &Result<Res, E>,
        retries: u32,
        replayable: bool,
    ) -> Settled
    where
        Cl: Classify<Res, E>,
    {
        let failed = self.classify.should_retry(result);
        if let Some(budget) = &self.budget {
            budget.on_outcome(!failed);
        }
        if !failed {
            let domain = self.domain_of(key);
            return Settled::Done(
                result
                    .is_ok()
                    .then(|| ask::succeeded(&self.gate, key, domain)),
            );
        }
        let asked = self.classify.retry_after(result);
        let held = asked.map(|asked| asked.min(self.limits.max_retry_after));
        let may_retry = retries < self.limits.max_retries && replayable;
        let answer = ask::failed(&self.gate, key, self.domain_of(key), held, may_retry);
        if let (Some(asked), Some(held)) = (asked, held) {
            observe::held(key, asked, held);
        }
        if retries >= self.limits.max_retries {
            observe::retry_denied(Some(key), Denied::MaxRetries, Some(retries));
        }
        Settled::Failed(Failed { answer, may_retry })
    }

    /// A failed attempt for `key` whose failure is recorded and whose wait
    /// before a retry is `wait`: retried (now or after the wait), or
    /// `None`: the result returns.
    pub(crate) fn retry(&self, key: &K, wait: Option<Duration>, retries: u32) -> Option<Wait> {
        let denied = |why| {
            observe::retry_denied(Some(key), why, Some(retries));
            None
        };
        if wait.is_some_and(|w| w > self.limits.max_wait) {
            return denied(Denied::MaxWait);
        }
        if self.budget.as_ref().is_some_and(|b| !b.try_retry()) {
            return denied(Denied::Budget);
        }
        observe::retry(key, retries + 1);
        if let Some(wait) = wait {
            observe::waiting(key, wait, Attempt::Retry);
        }
        Some(wait)
    }
}

impl<K, F, Cl, Rp> Policy<K, F, Cl, Rp> {
    /// A copy of `request` for a retry, if the request may make one more
    /// after `retries` and can be copied.
    pub(crate) fn backup<Req>(&self, request: &Req, retries: u32) -> Option<Req>
    where
        Rp: Replay<Req>,
    {
        if retries < self.limits.max_retries {
            self.replay.replay(request)
        } else {
            None
        }
    }
}
