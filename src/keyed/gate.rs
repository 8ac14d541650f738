//! The atomic gate and what it reports: `try_next`, `attempts`,
//! `remaining`.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::Backoff;
use super::entry::Entry;
use super::policy;
use crate::clock::Clock;

/// Returned by [`Backoff::try_next`] while the key must still wait.
///
/// ```
/// use keyed_backoff::InBackoff;
/// use std::time::Duration;
/// let e = InBackoff { remaining: Duration::from_secs(3) };
/// assert_eq!(e.to_string(), "in backoff for another 3s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InBackoff {
    /// How long until the backoff window ends.
    pub remaining: Duration,
}

impl fmt::Display for InBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "in backoff for another {:?}", self.remaining)
    }
}

impl std::error::Error for InBackoff {}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// How many times `next` advanced the key's entry since it was created
    /// or re-initialised (saturating at [`MAX_ATTEMPTS`](crate::MAX_ATTEMPTS)); 0 for a missing key.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert_eq!(b.attempts("k"), 0);
    /// b.next("k", Instant::now());
    /// b.next("k", Instant::now());
    /// assert_eq!(b.attempts("k"), 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn attempts<Q>(&self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.enter();
        self.store.get(key).map_or(0, Entry::attempts)
    }

    /// The wait left at `now` before the key's backoff window (started at
    /// its last update) ends, or `None` if it is not in backoff: missing,
    /// expired as of `now`, or the window has passed.
    ///
    /// `remaining(key, now).is_some()` equals
    /// `is_in_backoff_since_update(key, now)`.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("k", clock.now());
    /// clock.advance(Duration::from_secs(4));
    /// assert_eq!(b.remaining("k", clock.now()), Some(Duration::from_secs(6)));
    /// clock.advance(Duration::from_secs(6));
    /// assert_eq!(b.remaining("k", clock.now()), None);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn remaining<Q>(&self, key: &Q, now: C::Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.judged(|stale| policy::remaining(stale, self.store.get(key)?, self.tick(now)))
    }

    /// The wait left at the clock's now before a backoff counted from
    /// `event_time` ends, or `None` when there is none: the kubelet's "how
    /// long until this container may restart", with `event_time` its exit.
    ///
    /// It is `get(key) − (now − event_time)` while positive, and `None` for
    /// a missing key or one expired as of `event_time`. At every instant,
    /// `remaining_since(key, t).is_some()` equals
    /// [`is_in_backoff_since(key, t)`](Self::is_in_backoff_since). Compare
    /// [`remaining`](Self::remaining), which counts from the key's last
    /// update instead.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("c", clock.now()); // the container starts: 10 s backoff
    /// clock.advance(Duration::from_secs(3));
    /// let exit = clock.now(); // it exits after 3 s
    /// clock.advance(Duration::from_secs(2));
    /// // No restart before 10 s after the exit: 8 s left.
    /// assert_eq!(b.remaining_since("c", exit), Some(Duration::from_secs(8)));
    /// // `remaining` counts from the start instead.
    /// assert_eq!(b.remaining("c", clock.now()), Some(Duration::from_secs(5)));
    /// clock.advance(Duration::from_secs(8));
    /// assert_eq!(b.remaining_since("c", exit), None);
    /// assert!(!b.is_in_backoff_since("c", exit));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn remaining_since<Q>(&self, key: &Q, event_time: C::Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.judged(|stale| {
            policy::remaining_since(
                stale,
                self.store.get(key)?,
                self.tick(event_time),
                self.now_tick(),
            )
        })
    }

    /// The atomic gate: in one operation under the key's lock, refuse with
    /// the remaining wait if the key is in backoff at `now`, otherwise
    /// advance it (as `next(key, now)`) and return the new backoff.
    ///
    /// With client-go's API a caller checks `IsInBackOffSince…` and then
    /// calls `Next`; two callers (or an event-driven requeue that skips the
    /// check) can both pass the check or advance without waiting, and the
    /// failure count races to the cap. (client-go's workqueue rate limiter
    /// shows the same effect: every spurious requeue through
    /// `AddRateLimited` counts as a failure, kubernetes issue 132805.)
    /// `try_next` cannot: at most one caller advances per backoff window.
    ///
    /// ```
    /// use keyed_backoff::{Backoff, InBackoff};
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(b.try_next("obj", clock.now()), Ok(Duration::from_secs(10)));
    /// clock.advance(Duration::from_secs(3));
    /// assert_eq!(b.try_next("obj", clock.now()), Err(InBackoff { remaining: Duration::from_secs(7) }));
    /// clock.advance(Duration::from_secs(7));
    /// assert_eq!(b.try_next("obj", clock.now()), Ok(Duration::from_secs(20)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn try_next<Q>(&self, key: &Q, now: C::Instant) -> Result<Duration, InBackoff>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.gate_at(key, Some(self.tick(now)))
    }

    /// [`try_next`](Self::try_next) at the manager's own clock's now: the
    /// gate for callers that have no event time, such as a controller's
    /// error policy. With [`TokioClock`](crate::clock::TokioClock) it follows
    /// tokio's paused time in tests.
    ///
    /// ```
    /// use keyed_backoff::{Backoff, InBackoff};
    /// use keyed_backoff::clock::MockClock;
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(b.try_next_now("obj"), Ok(Duration::from_secs(10)));
    /// clock.advance(Duration::from_secs(4));
    /// assert_eq!(b.try_next_now("obj"), Err(InBackoff { remaining: Duration::from_secs(6) }));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn try_next_now<Q>(&self, key: &Q) -> Result<Duration, InBackoff>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.gate_at(key, None)
    }

    /// [`next`](Self::next) with the manager's own clock's now as the event
    /// time.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::MockClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .clock(MockClock::new())
    ///     .build()?;
    /// assert_eq!(b.next_now("k"), Duration::from_secs(1));
    /// assert_eq!(b.next_now("k"), Duration::from_secs(2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn next_now<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.next_at(key, None)
    }
}
