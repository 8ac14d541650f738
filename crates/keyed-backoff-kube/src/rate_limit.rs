//! The overall token bucket client-go puts beside the per-item backoff in
//! its default controller rate limiter (`BucketRateLimiter` over
//! `golang.org/x/time/rate`): every counted failure reserves one token, and
//! a reservation that finds the bucket empty waits for its token to be
//! refilled. Tokens go negative, so waits queue up one behind the other at
//! the refill rate.

use std::sync::Mutex;
use std::time::Duration;

use keyed_backoff::ConfigError;
use tokio::time::Instant;

/// Rate and burst of an overall bucket, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BucketLimit {
    pub(crate) per_second: f64,
    pub(crate) burst: u32,
}

/// The most tokens per second accepted: one per nanosecond.
const MAX_RATE: f64 = 1e9;

impl BucketLimit {
    pub(crate) fn check(self) -> Result<Self, ConfigError> {
        if !(self.per_second.is_finite() && self.per_second > 0.0 && self.per_second <= MAX_RATE) {
            return Err(ConfigError::new(
                "overall_rate_limit.per_second",
                format!("a finite rate in (0, {MAX_RATE:e}] tokens per second"),
                self.per_second,
            ));
        }
        if self.burst == 0 {
            return Err(ConfigError::new(
                "overall_rate_limit.burst",
                "at least 1 token",
                self.burst,
            ));
        }
        Ok(self)
    }
}

#[derive(Debug)]
pub(crate) struct Bucket {
    limit: BucketLimit,
    /// Tokens left at `at` (negative: reservations waiting), and `at`.
    state: Mutex<(f64, Option<Instant>)>,
}

impl Bucket {
    pub(crate) fn new(limit: BucketLimit) -> Self {
        Self {
            limit,
            state: Mutex::new((f64::from(limit.burst), None)),
        }
    }

    pub(crate) fn limit(&self) -> BucketLimit {
        self.limit
    }

    /// Takes one token at `now` and returns how long its holder must wait
    /// for it (zero while the bucket has tokens).
    pub(crate) fn reserve(&self, now: Instant) -> Duration {
        // A poisoned lock only means another thread panicked between two
        // plain stores; the numbers are still usable.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = &mut *state;
        if let Some(last) = *at {
            let elapsed = now.saturating_duration_since(last).as_secs_f64();
            *tokens = (*tokens + elapsed * self.limit.per_second).min(f64::from(self.limit.burst));
        }
        if at.is_none_or(|last| now > last) {
            *at = Some(now);
        }
        *tokens -= 1.0;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            // Finite and bounded: the debt is at most the number of calls.
            Duration::try_from_secs_f64(-*tokens / self.limit.per_second).unwrap_or(Duration::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ten_per_second_burst_100() -> Bucket {
        Bucket::new(
            BucketLimit {
                per_second: 10.0,
                burst: 100,
            }
            .check()
            .unwrap(),
        )
    }

    #[test]
    fn a_full_bucket_grants_its_burst_then_spaces_reservations_at_the_rate() {
        let bucket = ten_per_second_burst_100();
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..103).map(|_| bucket.reserve(t0)).collect();
        assert!(waits[..100].iter().all(|w| w.is_zero()));
        assert_eq!(waits[100], Duration::from_millis(100));
        assert_eq!(waits[101], Duration::from_millis(200));
        assert_eq!(waits[102], Duration::from_millis(300));
    }

    #[test]
    fn time_refills_the_bucket_up_to_its_burst_only() {
        let bucket = ten_per_second_burst_100();
        let t0 = Instant::now();
        for _ in 0..100 {
            bucket.reserve(t0);
        }
        // One second refills ten tokens.
        let later = t0 + Duration::from_secs(1);
        let waits: Vec<Duration> = (0..11).map(|_| bucket.reserve(later)).collect();
        assert!(waits[..10].iter().all(|w| w.is_zero()));
        assert_eq!(waits[10], Duration::from_millis(100));
        // An hour idle refills to the burst, not beyond.
        let idle = later + Duration::from_secs(3600);
        let granted = (0..200)
            .take_while(|_| bucket.reserve(idle).is_zero())
            .count();
        assert_eq!(granted, 100);
    }

    #[test]
    fn an_instant_earlier_than_the_last_does_not_refill_or_move_time_back() {
        let bucket = ten_per_second_burst_100();
        let t0 = Instant::now();
        let late = t0 + Duration::from_secs(5);
        for _ in 0..100 {
            bucket.reserve(late);
        }
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
    }

    #[test]
    fn bad_limits_name_their_field_and_range() {
        for per_second in [0.0, -1.0, f64::NAN, f64::INFINITY, 2e9] {
            let err = BucketLimit {
                per_second,
                burst: 1,
            }
            .check()
            .unwrap_err();
            assert_eq!(err.field(), "overall_rate_limit.per_second");
            assert!(err.to_string().contains("(0, 1e9]"), "{err}");
        }
        let err = BucketLimit {
            per_second: 1.0,
            burst: 0,
        }
        .check()
        .unwrap_err();
        assert_eq!(err.field(), "overall_rate_limit.burst");
    }
}
