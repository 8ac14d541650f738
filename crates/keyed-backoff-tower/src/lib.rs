//! [tower] retry with per-key exponential backoff, and
//! [keyed-backoff](keyed_backoff)'s retry budgets as tower budgets.
//!
//! - [`KeyedRetryPolicy`] is a [`tower::retry::Policy`] that backs off per
//!   key: a function picks the key from the request (its host, tenant or
//!   shard), and every request for a failing key waits out that key's
//!   window, which doubles with each failure and resets on success. Other
//!   keys are not slowed down. Any [`keyed_backoff::Backoff`] works, so any
//!   rule does: client-go's, or one of the crate's strategies through
//!   [`Backoff::with_strategy`](keyed_backoff::Backoff::with_strategy).
//! - [`TowerBudget`] turns a [`RetryBudget`] ([`TokenBucket`](keyed_backoff::budget::TokenBucket),
//!   [`TpsBudget`](keyed_backoff::budget::TpsBudget),
//!   [`AdaptiveThrottle`](keyed_backoff::budget::AdaptiveThrottle)) into
//!   tower's [`Budget`], for this policy or any other.
//!
//! Waits are tokio sleeps, and the manager must run on
//! [`TokioClock`], so tokio's paused time drives both in tests.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use keyed_backoff::Backoff;
//! use keyed_backoff::budget::TokenBucket;
//! use keyed_backoff::clock::TokioClock;
//! use keyed_backoff_tower::{KeyedRetryPolicy, TowerBudget};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! // Requests name their host; each host backs off on its own.
//! #[derive(Clone)]
//! struct Get { host: &'static str }
//!
//! let backoff = Arc::new(
//!     Backoff::<&'static str>::builder(Duration::from_millis(100), Duration::from_secs(10))
//!         .clock(TokioClock)
//!         .build()?,
//! );
//! let policy = KeyedRetryPolicy::new(backoff, |req: &Get| req.host)
//!     .max_retries(3)
//!     .budget(TowerBudget::new(TokenBucket::new(10.0, 0.1)?));
//! let service = ServiceBuilder::new()
//!     .retry(policy)
//!     .service_fn(|req: Get| async move {
//!         if req.host == "down.example" { Err("connection refused") } else { Ok(200) }
//!     });
//! assert_eq!(service.clone().oneshot(Get { host: "up.example" }).await, Ok(200));
//! assert!(service.oneshot(Get { host: "down.example" }).await.is_err());
//! # Ok(())
//! # }
//! ```
//!
//! [tower]: https://docs.rs/tower

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::budget::RetryBudget;
use keyed_backoff::clock::TokioClock;
use keyed_backoff::{Backoff, InBackoff};
use tower::retry::Policy;
use tower::retry::budget::Budget;

/// A [`RetryBudget`] as tower's [`Budget`].
///
/// tower's retry calls [`deposit`](Budget::deposit) for a successful
/// response and [`withdraw`](Budget::withdraw) before each retry. Here a
/// deposit reports a request and its success to the budget
/// (`on_request`, `on_outcome(true)`), and a withdrawal reports a failure
/// (`on_outcome(false)`) and asks `try_retry`.
///
/// ```
/// use keyed_backoff::budget::TokenBucket;
/// use keyed_backoff_tower::TowerBudget;
/// use tower::retry::budget::Budget;
/// let budget = TowerBudget::new(TokenBucket::new(4.0, 0.5)?); // retries while tokens > 2
/// assert!(budget.withdraw()); // a failure: 3 tokens, above 2: retry
/// assert!(!budget.withdraw()); // another: 2 tokens, no more retries
/// for _ in 0..4 {
///     budget.deposit(); // four successes: back to 4 tokens
/// }
/// assert!(budget.withdraw());
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct TowerBudget<B>(B);

impl<B: RetryBudget> TowerBudget<B> {
    /// Wraps `budget`; pass an `Arc` to share it with other retry loops.
    ///
    /// ```
    /// use keyed_backoff::budget::TpsBudget;
    /// use keyed_backoff_tower::TowerBudget;
    /// use std::time::Duration;
    /// let b = TowerBudget::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)?);
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(budget: B) -> Self {
        Self(budget)
    }

    /// The wrapped budget.
    ///
    /// ```
    /// use keyed_backoff::budget::TokenBucket;
    /// use keyed_backoff_tower::TowerBudget;
    /// let b = TowerBudget::new(TokenBucket::new(4.0, 0.5)?);
    /// assert_eq!(b.get_ref().tokens(), 4.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn get_ref(&self) -> &B {
        &self.0
    }
}

impl<B: RetryBudget> Budget for TowerBudget<B> {
    fn deposit(&self) {
        self.0.on_request();
        self.0.on_outcome(true);
    }

    fn withdraw(&self) -> bool {
        self.0.on_outcome(false);
        self.0.try_retry()
    }
}

/// Which results to retry; [`RetryErrors`] (every `Err`) by default, or
/// any `Fn(&Result<Res, E>) -> bool`.
///
/// ```
/// use keyed_backoff_tower::{Classify, RetryErrors};
/// let retry_5xx = |r: &Result<u16, ()>| matches!(r, Err(_) | Ok(500..=599));
/// assert!(retry_5xx.should_retry(&Ok(503)));
/// assert!(!retry_5xx.should_retry(&Ok(404)));
/// assert!(Classify::<u16, ()>::should_retry(&RetryErrors, &Err(())));
/// ```
pub trait Classify<Res, E> {
    /// Whether this result should be retried. A result that should not, and
    /// is `Ok`, counts as a success and resets its key.
    fn should_retry(&self, result: &Result<Res, E>) -> bool;
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

/// A [`tower::retry::Policy`] that backs off per key.
///
/// For each result to retry, the request's key goes through the manager's
/// gate ([`try_next_now`](Backoff::try_next_now)): if the key is out of
/// backoff, its backoff advances and the retry waits for it; if another
/// request already advanced it (the key is in backoff), the retry waits for
/// the window left, without advancing it again. So however many requests
/// fail for one key, its backoff doubles once per window, and every request
/// for it waits out the same window. A success resets the key.
///
/// Each request may retry at most [`max_retries`](Self::max_retries) times
/// (default 3), and each retry must be allowed by the
/// [`budget`](Self::budget), if any.
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::TokioClock;
/// use keyed_backoff_tower::KeyedRetryPolicy;
/// use std::sync::Arc;
/// use std::time::Duration;
/// let backoff = Arc::new(
///     Backoff::<String>::builder(Duration::from_millis(50), Duration::from_secs(5))
///         .clock(TokioClock)
///         .build()?,
/// );
/// let policy = KeyedRetryPolicy::new(backoff, |url: &String| url.split('/').nth(2).unwrap_or("").to_owned());
/// # let _ = policy;
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
pub struct KeyedRetryPolicy<K, KeyFn, C = RetryErrors, S = keyed_backoff::DefaultHashBuilder> {
    backoff: Arc<Backoff<K, TokioClock, S>>,
    key: Arc<KeyFn>,
    classify: Arc<C>,
    budget: Option<Arc<dyn Budget + Send + Sync>>,
    max_retries: u32,
    /// Retries this request has made (the policy is cloned per request).
    retries: u32,
}

impl<K, KeyFn, C, S> Clone for KeyedRetryPolicy<K, KeyFn, C, S> {
    fn clone(&self) -> Self {
        Self {
            backoff: Arc::clone(&self.backoff),
            key: Arc::clone(&self.key),
            classify: Arc::clone(&self.classify),
            budget: self.budget.clone(),
            max_retries: self.max_retries,
            retries: self.retries,
        }
    }
}

impl<K, KeyFn, C, S> fmt::Debug for KeyedRetryPolicy<K, KeyFn, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRetryPolicy")
            .field("max_retries", &self.max_retries)
            .field("retries", &self.retries)
            .field("budget", &self.budget.is_some())
            .finish_non_exhaustive()
    }
}

impl<K, KeyFn, S> KeyedRetryPolicy<K, KeyFn, RetryErrors, S> {
    /// A policy over `backoff`, keying each request with `key`; it retries
    /// every `Err`, at most 3 times per request, with no budget.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use keyed_backoff_tower::KeyedRetryPolicy;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::builder(Duration::from_millis(10), Duration::from_secs(1)).clock(TokioClock).build()?);
    /// let policy = KeyedRetryPolicy::new(backoff, |tenant: &u32| *tenant);
    /// # let _ = policy;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(backoff: Arc<Backoff<K, TokioClock, S>>, key: KeyFn) -> Self {
        Self {
            backoff,
            key: Arc::new(key),
            classify: Arc::new(RetryErrors),
            budget: None,
            max_retries: 3,
            retries: 0,
        }
    }
}

impl<K, KeyFn, C, S> KeyedRetryPolicy<K, KeyFn, C, S> {
    /// Retry the results `classify` selects instead of every `Err` (for
    /// example a 503 response).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use keyed_backoff_tower::KeyedRetryPolicy;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::builder(Duration::from_millis(10), Duration::from_secs(1)).clock(TokioClock).build()?);
    /// let policy = KeyedRetryPolicy::new(backoff, |tenant: &u32| *tenant)
    ///     .retry_if(|r: &Result<u16, std::io::Error>| matches!(r, Err(_) | Ok(503)));
    /// # let _ = policy;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn retry_if<C2>(self, classify: C2) -> KeyedRetryPolicy<K, KeyFn, C2, S> {
        KeyedRetryPolicy {
            backoff: self.backoff,
            key: self.key,
            classify: Arc::new(classify),
            budget: self.budget,
            max_retries: self.max_retries,
            retries: self.retries,
        }
    }

    /// At most `n` retries per request (after its first attempt). Default 3.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use keyed_backoff_tower::KeyedRetryPolicy;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::builder(Duration::from_millis(10), Duration::from_secs(1)).clock(TokioClock).build()?);
    /// let policy = KeyedRetryPolicy::new(backoff, |tenant: &u32| *tenant).max_retries(5);
    /// # let _ = policy;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Bound retries by `budget`, shared by every request through this
    /// policy (and any other holder of the same budget): a
    /// [`TowerBudget`] around one of keyed-backoff's budgets, or tower's
    /// own [`TpsBudget`](tower::retry::budget::TpsBudget).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// use keyed_backoff::clock::TokioClock;
    /// use keyed_backoff_tower::{KeyedRetryPolicy, TowerBudget};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::builder(Duration::from_millis(10), Duration::from_secs(1)).clock(TokioClock).build()?);
    /// let policy = KeyedRetryPolicy::new(backoff, |tenant: &u32| *tenant)
    ///     .budget(TowerBudget::new(AdaptiveThrottle::new(2.0)?));
    /// # let _ = policy;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn budget(mut self, budget: impl Budget + Send + Sync + 'static) -> Self {
        self.budget = Some(Arc::new(budget));
        self
    }

    /// The manager holding every key's backoff.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use keyed_backoff_tower::KeyedRetryPolicy;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::builder(Duration::from_millis(10), Duration::from_secs(1)).clock(TokioClock).build()?);
    /// let policy = KeyedRetryPolicy::new(Arc::clone(&backoff), |tenant: &u32| *tenant);
    /// assert!(policy.backoff().is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn backoff(&self) -> &Arc<Backoff<K, TokioClock, S>> {
        &self.backoff
    }
}

impl<Req, Res, E, K, KeyFn, C, S> Policy<Req, Res, E> for KeyedRetryPolicy<K, KeyFn, C, S>
where
    Req: Clone,
    K: Hash + Eq + Clone,
    KeyFn: Fn(&Req) -> K,
    C: Classify<Res, E>,
    S: BuildHasher + Clone,
{
    type Future = tokio::time::Sleep;

    fn retry(&mut self, req: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        let key = (self.key)(req);
        if !self.classify.should_retry(result) {
            if result.is_ok() {
                self.backoff.reset(&key);
                if let Some(budget) = &self.budget {
                    budget.deposit();
                }
            }
            return None;
        }
        if self.retries >= self.max_retries {
            return None;
        }
        if self.budget.as_ref().is_some_and(|b| !b.withdraw()) {
            return None;
        }
        self.retries += 1;
        let wait: Duration = match self.backoff.try_next_now(&key) {
            Ok(backoff) => backoff,
            Err(InBackoff { remaining }) => remaining,
        };
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

/// The README's example, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
