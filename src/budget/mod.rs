//! Retry budgets: bound retries as a share of traffic, so that retrying
//! cannot multiply the load on a backend that is already failing.
//!
//! All three are thread-safe (a `parking_lot` mutex around a few numbers, or
//! an atomic) and plug into [`Retry::budget`](crate::retry::Retry::budget)
//! through [`RetryBudget`]:
//!
//! | budget | rule | from |
//! |---|---|---|
//! | [`TokenBucket`] | tokens start full; a failure takes 1, a success adds `ratio`; retry while tokens > max/2 | gRPC retry throttling |
//! | [`TpsBudget`] | each request deposits `percent` of a retry, each retry withdraws one, over a sliding window, plus `min_per_sec` always | Finagle, tower |
//! | [`AdaptiveThrottle`] | reject locally with probability `max(0, (requests − K·accepts) / (requests + 1))` | Google SRE book, "Handling Overload" |
//!
//! ```
//! use keyed_backoff::budget::{RetryBudget, TokenBucket};
//! let bucket = TokenBucket::new(10.0, 0.1)?;
//! for _ in 0..5 { bucket.on_outcome(false); } // five failures: 5 tokens left
//! assert!(!bucket.try_retry());                // not above max/2 = 5
//! bucket.on_outcome(true);                     // 5.1 tokens
//! assert!(bucket.try_retry());
//! # Ok::<(), keyed_backoff::ConfigError>(())
//! ```

mod adaptive;
mod token_bucket;
mod tps;
mod window;

pub use adaptive::AdaptiveThrottle;
pub use token_bucket::TokenBucket;
pub use tps::TpsBudget;

/// What a retry loop tells a budget, and asks it.
///
/// ```
/// use keyed_backoff::budget::RetryBudget;
/// struct Never;
/// impl RetryBudget for Never {
///     fn try_retry(&self) -> bool { false }
/// }
/// assert!(!Never.try_retry());
/// ```
pub trait RetryBudget: Send + Sync {
    /// A new request (its first attempt) is about to run.
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TpsBudget};
    /// use std::time::Duration;
    /// let b = TpsBudget::new(Duration::from_secs(10), 0, 1.0)?;
    /// b.on_request(); // deposits one retry's worth
    /// assert!(b.try_retry());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    fn on_request(&self) {}

    /// An attempt finished, successfully or not.
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TokenBucket};
    /// let b = TokenBucket::new(2.0, 1.0)?;
    /// b.on_outcome(false);
    /// assert_eq!(b.tokens(), 1.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    fn on_outcome(&self, success: bool) {
        let _ = success;
    }

    /// May one retry run now? A `true` may spend from the budget.
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TokenBucket};
    /// assert!(TokenBucket::new(2.0, 1.0)?.try_retry());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    fn try_retry(&self) -> bool;
}

/// Implements `RetryBudget` for a pointer to a budget by forwarding.
macro_rules! forward_budget {
    ($(#[$doc:meta])* $pointer:ty) => {
        $(#[$doc])*
        impl<B: RetryBudget + ?Sized> RetryBudget for $pointer {
            fn on_request(&self) {
                (**self).on_request();
            }
            fn on_outcome(&self, success: bool) {
                (**self).on_outcome(success);
            }
            fn try_retry(&self) -> bool {
                (**self).try_retry()
            }
        }
    };
}

forward_budget!(
    /// A borrowed budget is a budget: a retry loop can use one it does not own.
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TokenBucket};
    /// fn spend(b: impl RetryBudget) -> bool { b.try_retry() }
    /// let bucket = TokenBucket::new(2.0, 1.0)?;
    /// assert!(spend(&bucket));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    &B
);

forward_budget!(
    /// A shared budget is a budget: one `Arc` can bound the retries of many
    /// loops, on many tasks.
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TokenBucket};
    /// use std::sync::Arc;
    /// let shared = Arc::new(TokenBucket::new(4.0, 0.1)?);
    /// let for_a_task = Arc::clone(&shared);
    /// for_a_task.on_outcome(false);
    /// assert_eq!(shared.tokens(), 3.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    std::sync::Arc<B>
);
