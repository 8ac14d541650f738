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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::ConfigError;
use crate::clock::{Clock, ClockInstant, DefaultClock};
use crate::error::finite_at_least;
use crate::keyed::UnitDraws;

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
                Some((t + delta).clamp(0, max))
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

/// Counters over a sliding window of `SLOTS` equal slots; the last slot is
/// the current one. Shared by [`TpsBudget`] and [`AdaptiveThrottle`].
#[derive(Debug)]
struct Window<I, T> {
    slot_len: Duration,
    slots: VecDeque<T>,
    current_start: Option<I>,
}

impl<I: ClockInstant, T: Default + Copy> Window<I, T> {
    fn new(span: Duration) -> Self {
        Window {
            slot_len: (span / SLOTS).max(Duration::from_nanos(1)),
            slots: VecDeque::from(vec![T::default(); SLOTS as usize]),
            current_start: None,
        }
    }

    /// Moves the window to `now`, dropping slots older than its span.
    fn roll(&mut self, now: I) {
        let start = *self.current_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        let steps = (elapsed.as_nanos() / self.slot_len.as_nanos()).min(u128::from(SLOTS)) as u32;
        for _ in 0..steps {
            self.slots.pop_front();
            self.slots.push_back(T::default());
        }
        if steps == SLOTS {
            self.current_start = Some(now);
        } else if steps > 0 {
            self.current_start = Some(start.saturating_add(self.slot_len * steps));
        }
    }

    fn current(&mut self) -> &mut T {
        self.slots.back_mut().expect("a window always has slots")
    }
}

/// Resolution of [`TpsBudget`] balances: one retry is a million units, so
/// percentages are exact to 0.0001 %.
const UNITS_PER_RETRY: i64 = 1_000_000;
const SLOTS: u32 = 10;

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
pub struct TpsBudget<C: Clock = DefaultClock> {
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
            clock: DefaultClock::default(),
            ttl,
            reserve: i64::from(min_per_sec) * ttl.as_secs() as i64 * UNITS_PER_RETRY,
            deposit: (percent * UNITS_PER_RETRY as f64).round() as i64,
            window: Mutex::new(Window::new(ttl)),
        })
    }
}

impl<C: Clock> TpsBudget<C> {
    /// Measures the window on `clock`. Default [`DefaultClock`].
    ///
    /// ```
    /// use keyed_backoff::budget::TpsBudget;
    /// use keyed_backoff::clock::MockClock;
    /// use std::time::Duration;
    /// let _ = TpsBudget::new(Duration::from_secs(10), 0, 0.1)?.clock(MockClock::new());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
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
pub struct AdaptiveThrottle<C: Clock = DefaultClock> {
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
            clock: DefaultClock::default(),
            draws: UnitDraws::new(rand::random()),
            counts: Mutex::new(Window::new(Duration::from_secs(120))),
        })
    }
}

impl<C: Clock> AdaptiveThrottle<C> {
    /// Counts over `window` instead of 2 minutes.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// let _ = AdaptiveThrottle::new(2.0)?.window(std::time::Duration::from_secs(60));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self.counts = Mutex::new(Window::new(window));
        self
    }

    /// Seeds the rejection draws, for reproducible tests.
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// let _ = AdaptiveThrottle::new(2.0)?.seed(7);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.draws = UnitDraws::new(seed);
        self
    }

    /// Measures the window on `clock`. Default [`DefaultClock`].
    ///
    /// ```
    /// use keyed_backoff::budget::AdaptiveThrottle;
    /// use keyed_backoff::clock::MockClock;
    /// let _ = AdaptiveThrottle::new(2.0)?.clock(MockClock::new());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
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
