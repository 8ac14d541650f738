//! The SRE book's client-side adaptive throttling.

use std::time::Duration;

use parking_lot::Mutex;

use super::RetryBudget;
use super::window::Window;
use crate::ConfigError;
use crate::clock::{Clock, StdClock};
use crate::draws::UnitDraws;
use crate::error::finite_at_least;

/// Client-side adaptive throttling from the Google SRE book: over a sliding
/// window (default 2 minutes, kept as 10 slots of counters) count `requests` (attempts the client made)
/// and `accepts` (attempts the backend accepted), and reject a new attempt
/// locally with probability `max(0, (requests − K·accepts) / (requests + 1))`.
/// `K` (default 2) sets how much overload to allow: with `K = 2` the backend
/// sees up to about twice the traffic it accepts.
///
/// ```
/// use keyed_backoff::budget::AdaptiveThrottle;
/// let t = AdaptiveThrottle::new(2.0)?;
/// for _ in 0..100 { t.record(false); } // 100 requests, none accepted
/// assert!((t.rejection_probability() - 100.0 / 101.0).abs() < 1e-12);
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct AdaptiveThrottle<C: Clock = StdClock> {
    k: f64,
    window: Duration,
    clock: C,
    draws: UnitDraws,
    /// (requests, accepts) per slot.
    counts: Mutex<Window<C::Instant, (u64, u64)>>,
}

impl AdaptiveThrottle {
    /// `k` must be finite and `>= 1`; the window is 2 minutes.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// assert_eq!(AdaptiveThrottle::new(0.5).unwrap_err().field(), "k");
    /// ```
    pub fn new(k: f64) -> Result<Self, ConfigError> {
        Ok(AdaptiveThrottle {
            k: finite_at_least("k", k, 1.0)?,
            window: Duration::from_secs(120),
            clock: StdClock,
            draws: UnitDraws::new(rand::random()),
            counts: Mutex::new(Window::new(Duration::from_secs(120))),
        })
    }
}

impl<C: Clock> AdaptiveThrottle<C> {
    /// Counts over `window` instead of 2 minutes.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self.counts = Mutex::new(Window::new(window));
        self
    }

    /// Seeds the rejection draws, for reproducible tests.
    pub fn seed(mut self, seed: u64) -> Self {
        self.draws = UnitDraws::new(seed);
        self
    }

    /// Measures the window on `clock`. Default [`StdClock`].
    pub fn clock<C2: Clock>(self, clock: C2) -> AdaptiveThrottle<C2> {
        AdaptiveThrottle {
            k: self.k,
            window: self.window,
            clock,
            draws: self.draws,
            counts: Mutex::new(Window::new(self.window)),
        }
    }

    /// Records one attempt and whether the backend accepted it.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// let t = AdaptiveThrottle::new(2.0)?;
    /// t.record(true);
    /// assert_eq!(t.rejection_probability(), 0.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn record(&self, accepted: bool) {
        let mut counts = self.counts.lock();
        counts.roll(self.clock.now());
        let (requests, accepts) = counts.current();
        *requests += 1;
        *accepts += u64::from(accepted);
    }

    /// `max(0, (requests − K·accepts) / (requests + 1))` over the window.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// assert_eq!(AdaptiveThrottle::new(2.0)?.rejection_probability(), 0.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn rejection_probability(&self) -> f64 {
        let mut counts = self.counts.lock();
        counts.roll(self.clock.now());
        let (requests, accepts) = counts
            .slots
            .iter()
            .fold((0u64, 0u64), |(r, a), &(sr, sa)| (r + sr, a + sa));
        let (requests, accepts) = (requests as f64, accepts as f64);
        ((requests - self.k * accepts) / (requests + 1.0)).max(0.0)
    }

    /// Draws whether to reject the next attempt locally.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// assert!(!AdaptiveThrottle::new(2.0)?.should_reject());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn should_reject(&self) -> bool {
        self.draws.next_unit() < self.rejection_probability()
    }
}

impl<C: Clock> RetryBudget for AdaptiveThrottle<C> {
    fn on_outcome(&self, success: bool) {
        self.record(success);
    }
    fn try_retry(&self) -> bool {
        !self.should_reject()
    }
}
