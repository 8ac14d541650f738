//! The [`Gate`] contract's calls and what they call: `try_next` (client-go's `Next`
//! refused while the key is in backoff), `remaining`, floors
//! (`hold_until`), and the manager's implementation of the [`Gate`]
//! contract, every future ready at once, never failing.

use std::borrow::Borrow;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::Backoff;
use crate::clock::{Clock, ClockInstant};
use crate::entry::{Entry, Level};
use crate::error::InBackoff;
use crate::gate::Gate;
use crate::rules::{self, Staleness};

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// The atomic check and advance: in one operation under the key's lock, refuse with
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
        self.try_next_at(key, Some(self.tick(now)))
            .map(Entry::backoff)
    }

    /// [`try_next`](Self::try_next) at the manager's own clock's now: the
    /// call for callers that have no event time, such as a controller's
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
        self.try_next_at(key, None).map(Entry::backoff)
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
    #[inline]
    pub fn remaining<Q>(&self, key: &Q, now: C::Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now = self.tick(now);
        let wait = self.own_wait(key, None, now);
        wait.max(rules::held(self.holds.get(key), now))
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
    #[inline]
    pub fn remaining_since<Q>(&self, key: &Q, event_time: C::Instant) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (event, now) = (self.tick(event_time), self.now_tick());
        let wait = self.own_wait(key, Some(event), now);
        wait.max(rules::held(self.holds.get(key), now))
    }

    /// A floor under `key`'s wait: the key may not run before `until`,
    /// whatever its backoff says, as when a server answered 429 or 503 with
    /// `Retry-After`.
    ///
    /// Every check a caller makes before running honours it:
    /// [`try_next`](Self::try_next) refuses with the longer of the two
    /// waits, [`remaining`](Self::remaining) and
    /// [`remaining_since`](Self::remaining_since) report it,
    /// [`is_in_backoff_since`](Self::is_in_backoff_since) and
    /// [`is_in_backoff_since_update`](Self::is_in_backoff_since_update) say
    /// "in backoff", and `until_ready` waits for it. A later `until`
    /// extends the floor; an earlier one never shortens it;
    /// [`reset`](Self::reset) clears it, and `gc` forgets it once passed.
    ///
    /// The floor is not part of the key's entry: [`next`](Self::next),
    /// [`get`](Self::get) and [`attempts`](Self::attempts) are client-go's,
    /// so the backoff grows exactly as it would without it, and the views,
    /// stats and snapshots describe the entries alone.
    ///
    /// ```
    /// use keyed_backoff::{Backoff, InBackoff};
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// assert_eq!(b.try_next("api.example.com", clock.now()), Ok(Duration::from_secs(1)));
    /// // The server answered 429 with `Retry-After: 30`.
    /// b.hold_until("api.example.com", clock.now() + Duration::from_secs(30));
    /// clock.advance(Duration::from_secs(1)); // the backoff is over, the floor is not
    /// assert_eq!(
    ///     b.try_next("api.example.com", clock.now()),
    ///     Err(InBackoff { remaining: Duration::from_secs(29) })
    /// );
    /// clock.advance(Duration::from_secs(29));
    /// // The ladder goes on where it was: 1 s, then 2 s.
    /// assert_eq!(b.try_next("api.example.com", clock.now()), Ok(Duration::from_secs(2)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn hold_until<Q>(&self, key: &Q, until: C::Instant)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.expiry.enter();
        self.holds.extend(key, self.tick(until));
    }

    /// The key's level, if it has an entry that has not expired now.
    fn live_level(&self, key: &K) -> Option<Level> {
        self.expiry.enter();
        let now = self.now_tick();
        let entry = self.store.get(key)?;
        let expired = self
            .expiry
            .judged(|stale| rules::expired(stale, entry, now));
        (!expired).then(|| entry.level())
    }
}

/// The in-process manager: every call ready at once, never failing.
impl<K, C, S> Gate<K> for Backoff<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync,
    C: Clock,
    S: BuildHasher + Clone + Send + Sync,
{
    type Error = Infallible;
    const ANSWERS_AT_ONCE: bool = true;

    #[inline]
    fn wait(&self, key: &K) -> impl Future<Output = Result<Option<Duration>, Infallible>> + Send {
        ready(Ok(self.remaining(key, self.clock().now())))
    }

    #[inline]
    fn fail(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, Infallible>> + Send {
        ready(Ok(self.try_next_at(key, None).map(Entry::level)))
    }

    #[inline]
    fn succeed(&self, key: &K) -> impl Future<Output = Result<(), Infallible>> + Send {
        self.reset(key);
        ready(Ok(()))
    }

    fn hold(&self, key: &K, wait: Duration) -> impl Future<Output = Result<(), Infallible>> + Send {
        self.hold_until(key, self.clock().now().saturating_add(wait));
        ready(Ok(()))
    }

    fn level(&self, key: &K) -> impl Future<Output = Result<Option<Level>, Infallible>> + Send {
        ready(Ok(self.live_level(key)))
    }

    fn standing(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<(Option<Level>, Option<Duration>), Infallible>> + Send
    where
        K: Sync,
    {
        ready(Ok((
            self.live_level(key),
            self.remaining(key, self.clock().now()),
        )))
    }

    fn resume(&self, key: &K, level: Level) -> impl Future<Output = Result<(), Infallible>> + Send {
        let _ = self.write(key, |old, now, stale: &dyn Staleness| {
            rules::resumed(stale, old, level, now).ok_or(())
        });
        ready(Ok(()))
    }
}
