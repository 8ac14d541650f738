//! gRPC's retry throttling.

use std::sync::atomic::{AtomicI64, Ordering};

use super::RetryBudget;
use crate::ConfigError;
use crate::error::finite_at_least;

/// gRPC's retry throttling token bucket.
///
/// Tokens start at `max_tokens`. Each failed attempt takes one token (not
/// below 0), each success adds `token_ratio` (not above `max_tokens`), and
/// retries are allowed while tokens are strictly above `max_tokens / 2`.
/// Tokens are kept in thousandths, as gRPC specifies: `max_tokens` in
/// (0, 1000], `token_ratio` > 0 with at most three decimals that count.
///
/// ```
/// use keyed_backoff::budget::{RetryBudget, TokenBucket};
/// let b = TokenBucket::new(4.0, 0.5)?;
/// b.on_outcome(false);
/// b.on_outcome(false); // 2 tokens: not above 4 / 2
/// assert!(!b.try_retry());
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct TokenBucket {
    milli: AtomicI64,
    max_milli: i64,
    ratio_milli: i64,
}

impl TokenBucket {
    /// A full bucket of `max_tokens`, refilled by `token_ratio` per success.
    ///
    /// ```
    /// use keyed_backoff::budget::TokenBucket;
    /// assert_eq!(TokenBucket::new(0.0, 0.1).unwrap_err().field(), "max_tokens");
    /// assert_eq!(TokenBucket::new(10.0, 0.0001).unwrap_err().field(), "token_ratio");
    /// ```
    pub fn new(max_tokens: f64, token_ratio: f64) -> Result<Self, ConfigError> {
        if !(max_tokens.is_finite() && max_tokens > 0.0 && max_tokens <= 1000.0) {
            return Err(ConfigError::new(
                "max_tokens",
                "a number in (0, 1000]",
                max_tokens,
            ));
        }
        let ratio_milli =
            (finite_at_least("token_ratio", token_ratio, 0.0)? * 1000.0).round() as i64;
        if ratio_milli < 1 {
            return Err(ConfigError::new(
                "token_ratio",
                "at least 0.001",
                token_ratio,
            ));
        }
        let max_milli = (max_tokens * 1000.0).round() as i64;
        Ok(TokenBucket {
            milli: AtomicI64::new(max_milli),
            max_milli,
            ratio_milli,
        })
    }

    /// The tokens in the bucket now.
    ///
    /// ```
    /// use keyed_backoff::budget::TokenBucket;
    /// assert_eq!(TokenBucket::new(3.0, 0.1)?.tokens(), 3.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn tokens(&self) -> f64 {
        self.milli.load(Ordering::Acquire) as f64 / 1000.0
    }

    fn adjust(&self, delta: i64) {
        let max = self.max_milli;
        // Never fails: the closure always returns Some.
        let _ = self
            .milli
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(delta).clamp(0, max))
            });
    }
}

impl RetryBudget for TokenBucket {
    fn on_outcome(&self, success: bool) {
        self.adjust(if success { self.ratio_milli } else { -1000 });
    }
    fn try_retry(&self) -> bool {
        // Strictly above half: compare doubled values to stay in integers.
        2 * self.milli.load(Ordering::Acquire) > self.max_milli
    }
}
