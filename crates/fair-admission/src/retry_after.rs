//! The `Retry-After` a level advises: Kubernetes' dropped-requests tracker.

use std::collections::VecDeque;
use std::time::Duration;

/// A level's refused requests per second, and the `Retry-After` they call
/// for, exactly as Kubernetes' dropped-requests tracker counts them.
///
/// It starts at 1 s. When a refusal falls in a new second, the value `r`
/// is reconsidered from the refusals of the `r` seconds before that one
/// (each second at most `r` seconds back, the current one excluded):
///
/// - at least `3 × r` refusals, and at least `r` seconds since it last
///   grew: it doubles, up to [`MAX_RETRY_AFTER`](Self::MAX_RETRY_AFTER);
/// - fewer than `r` refusals: it falls by one second (not below 1 s).
///
/// Nothing happens between refusals: a level that stops refusing keeps its
/// value until its next refusal. Times are offsets on the caller's clock
/// (any origin, never going back; an earlier time counts in the latest
/// second); seconds are whole seconds of that clock.
///
/// ```
/// use fair_admission::DroppedRequests;
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// let mut drops = DroppedRequests::new();
/// for _ in 0..5 {
///     drops.record(s(0)); // five refusals in second 0
/// }
/// assert_eq!(drops.retry_after(), s(1));
/// drops.record(s(1)); // second 1 looks back at second 0: 5 >= 3 × 1
/// assert_eq!(drops.retry_after(), s(2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRequests {
    /// (second, refusals) of past seconds, oldest first.
    history: VecDeque<(u64, u64)>,
    /// The second refusals are being counted in, once there was one.
    current: Option<u64>,
    count: u64,
    retry_after: u64,
    /// When the value last grew (never, at first: it may grow at once).
    raised_at: Option<u64>,
}

impl Default for DroppedRequests {
    fn default() -> Self {
        DroppedRequests::new()
    }
}

impl DroppedRequests {
    /// The largest `Retry-After` advised: 32 s (Kubernetes' figure).
    pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(32);

    const MAX: u64 = Self::MAX_RETRY_AFTER.as_secs();

    /// A tracker with no refusals, advising 1 s.
    pub fn new() -> Self {
        DroppedRequests {
            history: VecDeque::new(),
            current: None,
            count: 0,
            retry_after: 1,
            raised_at: None,
        }
    }

    /// Counts a request refused at `now`; on the first refusal of a new
    /// second, reconsiders the `Retry-After`.
    pub fn record(&mut self, now: Duration) {
        let second = now.as_secs();
        match self.current {
            Some(current) if second <= current => {
                self.count = self.count.saturating_add(1);
                return;
            }
            Some(current) => self.push_history(current, self.count),
            None => {}
        }
        self.current = Some(second);
        self.count = 1;
        self.reconsider(second);
    }

    /// The `Retry-After` advised now: whole seconds from 1 s to
    /// [`MAX_RETRY_AFTER`](Self::MAX_RETRY_AFTER).
    pub fn retry_after(&self) -> Duration {
        Duration::from_secs(self.retry_after)
    }

    /// Files a finished second, forgetting seconds too old to count again:
    /// more than twice the value (at most the cap) before it.
    fn push_history(&mut self, second: u64, count: u64) {
        self.history.push_back((second, count));
        let keep = (2 * self.retry_after).min(Self::MAX);
        while self
            .history
            .front()
            .is_some_and(|&(s, _)| second - s > keep)
        {
            self.history.pop_front();
        }
    }

    /// Reconsiders the value at the start of `now`, from the refusals of
    /// the seconds in `[now − r, now)`.
    fn reconsider(&mut self, now: u64) {
        let r = self.retry_after;
        let refused: u64 = self
            .history
            .iter()
            .rev()
            .take_while(|&&(s, _)| now - s <= r)
            .map(|&(_, n)| n)
            .sum();
        let may_grow = self.raised_at.is_none_or(|at| now - at >= r);
        if may_grow && refused >= 3 * r {
            self.retry_after = (2 * r).min(Self::MAX);
            self.raised_at = Some(now);
        } else if refused < r && r > 1 {
            self.retry_after = r - 1;
        }
    }
}
