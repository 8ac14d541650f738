//! Finagle's and tower's retry budget, exact for any percentage.

use std::time::Duration;

use parking_lot::Mutex;

use super::RetryBudget;
use super::window::Window;
use crate::ConfigError;
use crate::clock::{Clock, StdClock};
use crate::error::finite_at_least;

/// Resolution of [`TpsBudget`] balances: one retry is a million units, so
/// percentages are exact to 0.0001 %.
const UNITS_PER_RETRY: i64 = 1_000_000;

/// A retry budget over a sliding time window (Finagle's and tower's design):
/// each request deposits `retry_percent` of a retry, each retry withdraws a
/// whole one, deposits expire after `ttl`, and `min_per_sec · ttl` retries
/// are always available on top.
///
/// Unlike tower's `TpsBudget`, whose integer withdraw amount truncates
/// `1 / percent` (a 15 % budget allows 1 retry per 6 requests, 16.7 %),
/// balances here are kept in millionths of a retry, so any percentage is
/// honoured exactly.
///
/// ```
/// use keyed_backoff::budget::{RetryBudget, TpsBudget};
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
/// let b = TpsBudget::new(Duration::from_secs(10), 0, 0.15)?.clock(MockClock::new());
/// for _ in 0..1_000 { b.on_request(); }
/// let allowed = (0..1_000).take_while(|_| b.try_retry()).count();
/// assert_eq!(allowed, 150);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct TpsBudget<C: Clock = StdClock> {
    clock: C,
    ttl: Duration,
    reserve: i64,
    deposit: i64,
    window: Mutex<Window<C::Instant, i64>>,
}

impl TpsBudget {
    /// `ttl` in [1 s, 60 s]; `min_per_sec` retries per second always
    /// allowed; `retry_percent` in [0, 1000] as a fraction (0.1 = 10 %).
    ///
    /// ```
    /// use keyed_backoff::budget::TpsBudget;
    /// use std::time::Duration;
    /// assert_eq!(TpsBudget::new(Duration::from_secs(0), 1, 0.1).unwrap_err().field(), "ttl");
    /// assert_eq!(TpsBudget::new(Duration::from_secs(10), 1, -0.1).unwrap_err().field(), "retry_percent");
    /// ```
    pub fn new(ttl: Duration, min_per_sec: u32, retry_percent: f64) -> Result<Self, ConfigError> {
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&ttl) {
            return Err(ConfigError::new(
                "ttl",
                "between 1 s and 60 s",
                format!("{ttl:?}"),
            ));
        }
        let percent = finite_at_least("retry_percent", retry_percent, 0.0)?;
        if percent > 1000.0 {
            return Err(ConfigError::new(
                "retry_percent",
                "a fraction in [0, 1000]",
                percent,
            ));
        }
        Ok(TpsBudget {
            clock: StdClock,
            ttl,
            reserve: i64::from(min_per_sec) * ttl.as_secs() as i64 * UNITS_PER_RETRY,
            deposit: (percent * UNITS_PER_RETRY as f64).round() as i64,
            window: Mutex::new(Window::new(ttl)),
        })
    }
}

impl<C: Clock> TpsBudget<C> {
    /// Measures the window on `clock`. Default [`StdClock`].
    pub fn clock<C2: Clock>(self, clock: C2) -> TpsBudget<C2> {
        TpsBudget {
            clock,
            ttl: self.ttl,
            reserve: self.reserve,
            deposit: self.deposit,
            window: Mutex::new(Window::new(self.ttl)),
        }
    }

    /// Retries available now (fractional).
    ///
    /// ```
    /// use keyed_backoff::budget::{RetryBudget, TpsBudget};
    /// use std::time::Duration;
    /// let b = TpsBudget::new(Duration::from_secs(10), 1, 0.5)?;
    /// b.on_request();
    /// assert_eq!(b.balance(), 10.5);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn balance(&self) -> f64 {
        let mut window = self.window.lock();
        window.roll(self.clock.now());
        (self.reserve + window.slots.iter().sum::<i64>()) as f64 / UNITS_PER_RETRY as f64
    }
}

impl<C: Clock> RetryBudget for TpsBudget<C> {
    fn on_request(&self) {
        let mut window = self.window.lock();
        window.roll(self.clock.now());
        *window.current() += self.deposit;
    }

    fn try_retry(&self) -> bool {
        let mut window = self.window.lock();
        window.roll(self.clock.now());
        if self.reserve + window.slots.iter().sum::<i64>() < UNITS_PER_RETRY {
            return false;
        }
        *window.current() -= UNITS_PER_RETRY;
        true
    }
}
