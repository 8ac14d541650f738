//! The adaptive `Retry-After`: a level's refusals per second and the wait they call for.

use std::collections::VecDeque;

use std::time::Duration;

/// The longest `Retry-After` a level advises: 32 s, Kubernetes' cap.
///
/// ```
/// assert_eq!(fair_admission::MAX_RETRY_AFTER.as_secs(), 32);
/// ```
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(32);

/// A level's refusals per second over the last seconds, and the
/// `Retry-After` they call for (whole seconds, 1 to 32).
#[derive(Debug, Clone)]
pub(crate) struct Drops {
    /// (second, refusals) for past seconds, oldest first.
    pub(crate) history: VecDeque<(u64, u64)>,
    pub(crate) second: u64,
    pub(crate) count: u64,
    pub(crate) retry_after: u64,
    /// When `retry_after` was last raised.
    pub(crate) raised_at: u64,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            history: VecDeque::new(),
            second: 0,
            count: 0,
            retry_after: 1,
            raised_at: 0,
        }
    }
}

impl Drops {
    const MAX: u64 = MAX_RETRY_AFTER.as_secs();

    pub(crate) fn record(&mut self, second: u64) {
        if second <= self.second {
            self.count += 1;
            return;
        }
        self.history.push_back((self.second, self.count));
        // Seconds older than twice the current value (or the cap) can no
        // longer count.
        let keep = (2 * self.retry_after).min(Self::MAX);
        while self
            .history
            .front()
            .is_some_and(|&(s, _)| self.second - s > keep)
        {
            self.history.pop_front();
        }
        self.second = second;
        self.count = 1;
        self.update(second);
    }

    /// Re-evaluates `retry_after` at the start of `now`, from the seconds
    /// before it.
    fn update(&mut self, now: u64) {
        let current = self.retry_after;
        let recent: u64 = self
            .history
            .iter()
            .rev()
            .take_while(|&&(s, _)| now - s <= current && s >= self.raised_at)
            .map(|&(_, n)| n)
            .sum();
        if now - self.raised_at >= current && recent >= 3 * current {
            self.retry_after = (2 * current).min(Self::MAX);
            self.raised_at = now;
        } else if recent < current && current > 1 {
            self.retry_after = current - 1;
        }
    }
}
