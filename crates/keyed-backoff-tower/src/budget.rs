//! [`TowerBudget`]: keyed-backoff's retry budgets for tower's own retry
//! middleware.

use keyed_backoff::budget::RetryBudget;
use tower::retry::budget::Budget;

use crate::observe::{self, Denied};

/// A [`RetryBudget`] as tower's [`Budget`], for `tower::retry` policies
/// (a [`KeyedBackoffLayer`](crate::KeyedBackoffLayer) takes a
/// `RetryBudget` as it is, through its `budget` method).
///
/// tower's retry calls [`deposit`](Budget::deposit) for a successful
/// response and [`withdraw`](Budget::withdraw) before each retry. Here a
/// deposit reports a request and its success to the budget
/// (`on_request`, `on_outcome(true)`), and a withdrawal reports a failure
/// (`on_outcome(false)`) and asks `try_retry`. A refusal is reported as
/// the layer reports its own (feature `tracing` or `metrics`).
///
/// ```
/// use keyed_backoff_tower::TowerBudget;
/// use keyed_backoff_tower::keyed_backoff::budget::TokenBucket;
/// use tower::retry::budget::Budget;
/// let budget = TowerBudget::new(TokenBucket::new(4.0, 0.5)?); // retries while tokens > 2
/// assert!(budget.withdraw()); // a failure: 3 tokens, above 2: retry
/// assert!(!budget.withdraw()); // another: 2 tokens, no more retries
/// for _ in 0..4 {
///     budget.deposit(); // four successes: back to 4 tokens
/// }
/// assert!(budget.withdraw());
/// # Ok::<(), keyed_backoff_tower::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct TowerBudget<B>(B);

impl<B: RetryBudget> TowerBudget<B> {
    /// Wraps `budget`; pass an `Arc` to share it with other retry loops.
    pub fn new(budget: B) -> Self {
        Self(budget)
    }

    /// The wrapped budget.
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
        let allowed = self.0.try_retry();
        if !allowed {
            observe::retry_denied(None, Denied::Budget, None);
        }
        allowed
    }
}
