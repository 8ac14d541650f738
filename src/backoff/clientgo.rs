//! client-go's operations: `Next`, `Get`, `IsInBackOffSince`,
//! `IsInBackOffSinceUpdate`, `Reset` (and `DeleteEntry`); `GC` is the
//! write path's sweep, beside it in `mod.rs`.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use super::Backoff;
use crate::clock::Clock;
use crate::entry::Entry;
use crate::rules;

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// client-go's `Next`: moves `key`'s backoff to its next value and
    /// returns it.
    ///
    /// If the key has no entry, or its entry has expired as of `event_time`,
    /// the entry starts over at `initial` (plus jitter). Otherwise the
    /// backoff doubles (plus jitter drawn from the previous value) and is
    /// capped at `max`. The entry's last-update time becomes the clock's now,
    /// not `event_time`.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(3))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let secs: Vec<u64> = (0..4).map(|_| b.next("k", clock.now()).as_secs()).collect();
    /// assert_eq!(secs, [1, 2, 3, 3]);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn next<Q>(&self, key: &Q, event_time: C::Instant) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.next_at(key, Some(self.tick(event_time)))
    }

    /// client-go's `Get`: the key's current backoff, or zero if it has no
    /// entry.
    ///
    /// An expired entry still reports its last value until `next`, `reset`
    /// or `gc` touches it.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(2), Duration::from_secs(60))?;
    /// assert_eq!(b.get("missing"), Duration::ZERO);
    /// b.next("k", Instant::now());
    /// assert_eq!(b.get("k"), Duration::from_secs(2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn get<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.expiry.enter();
        self.store.get(key).map_or(Duration::ZERO, Entry::backoff)
    }

    /// client-go's `IsInBackOffSince`: whether less than the key's backoff
    /// has passed between `event_time` and the clock's now.
    ///
    /// False for a missing or expired key (expiry is judged on `event_time`
    /// against the last update). An `event_time` in the future is in
    /// backoff. This is the check the kubelet makes with a container's finish
    /// time.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let finished = clock.now();
    /// b.next("c", finished);
    /// clock.advance(Duration::from_secs(9));
    /// assert!(b.is_in_backoff_since("c", finished));
    /// clock.advance(Duration::from_secs(1));
    /// assert!(!b.is_in_backoff_since("c", finished));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    #[inline]
    pub fn is_in_backoff_since<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (event, now) = (self.tick(event_time), self.now_tick());
        rules::in_backoff(
            self.own_wait(key, Some(event), now),
            || self.holds.get(key),
            now,
        )
    }

    /// client-go's `IsInBackOffSinceUpdate`: whether `event_time` falls
    /// less than the key's backoff after its last update.
    ///
    /// False for a missing or expired key. An `event_time` before the last
    /// update is always in backoff, even with a zero backoff.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("c", clock.now());
    /// let t = clock.now();
    /// assert!(b.is_in_backoff_since_update("c", t + Duration::from_secs(9)));
    /// assert!(!b.is_in_backoff_since_update("c", t + Duration::from_secs(10)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    #[inline]
    pub fn is_in_backoff_since_update<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let at = self.tick(event_time);
        rules::in_backoff(self.own_wait(key, None, at), || self.holds.get(key), at)
    }

    /// client-go's `Reset` and `DeleteEntry` (the same operation there):
    /// removes the key's entry. Returns whether there was one.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next("k", Instant::now());
    /// assert!(b.reset("k"));
    /// assert!(!b.reset("k"));
    /// assert_eq!(b.get("k"), Duration::ZERO);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn reset<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.expiry.enter();
        self.holds.clear(key);
        self.store.remove(key)
    }
}
