//! [`Backoff`]: client-go's `flowcontrol.Backoff` on a concurrent map.
//!
//! Every public method of the manager is here, grouped by use: making one,
//! client-go's operations, the gate, waiting (tokio), background GC, and
//! inspection. Each is thin: it reads the clock, asks the rules (`rules.rs`)
//! and writes through the store (`store.rs`). See
//! `docs/semantics.md` for every behaviour side by side with client-go.

use std::borrow::Borrow;
use std::convert::Infallible;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::builder::{BackoffBuilder, DefaultHashBuilder};
#[cfg(feature = "tokio")]
use crate::clock::TokioClock;
use crate::clock::{Clock, StdClock};
use crate::duration::saturating_nanos;
use crate::entry::{Advanced, Entry, MAX_BACKOFF, Tick};
use crate::error::{ConfigError, InBackoff, SpawnError};

use crate::expiry::Expiry;
use crate::gc::{self, Amortized, GcGuard};
use crate::growth::Growth;
use crate::hold::Holds;
use crate::inspect::{self, EntryView, Stats};
use crate::observe;
use crate::rules::{self, Staleness};
use crate::settings::Settings;
use crate::snapshot::{self, Snapshot};
use crate::store::Store;
use crate::strategy::{Step, Strategy};
#[cfg(feature = "tokio")]
use crate::wait;

/// A per-key exponential backoff with exactly the semantics of Kubernetes
/// client-go's `util/flowcontrol` `Backoff`.
///
/// Each key (a container, `podUID_image`, a URL host…) has an entry holding
/// its current backoff and the clock time of its last [`next`](Self::next).
/// `next` starts an entry at `initial` and doubles it up to `max`; an entry
/// untouched for longer than the expiry window (by default `2·max`) counts as
/// stale: `next` starts it over, the checks report "not in backoff", and
/// [`gc`](Self::gc) removes it.
///
/// `Backoff` is `Send + Sync` and every method takes `&self`; share it in an
/// `Arc`. Methods take the key's borrowed form (`&str` for
/// `Backoff<String>`) and allocate an owned key only when inserting.
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let backoff = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(clock.clone())
///     .build()?;
///
/// assert_eq!(backoff.next("pod-a", clock.now()), Duration::from_secs(10));
/// assert_eq!(backoff.next("pod-a", clock.now()), Duration::from_secs(20));
/// assert!(backoff.is_in_backoff_since("pod-a", clock.now()));
/// clock.advance(Duration::from_secs(20));
/// assert!(!backoff.is_in_backoff_since("pod-a", clock.now() - Duration::from_secs(20)));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
pub struct Backoff<K, C: Clock = StdClock, S = DefaultHashBuilder> {
    store: Store<K, S>,
    clock: C,
    epoch: C::Instant,
    /// client-go's `maxDuration`, or a strategy's largest delay: the unit
    /// of the default expiry and the `max` a custom expiry is given.
    max: Duration,
    growth: Growth,
    expiry: Expiry<C::Instant>,
    amortized: Option<Amortized>,
    /// Per-key floors (`hold_until`), apart from client-go's entries.
    holds: Holds<K, S>,
}

// Making a manager.
impl<K: Hash + Eq + Clone> Backoff<K> {
    /// A manager with client-go's rule, no jitter, the default expiry
    /// (`2·max`) and the [`StdClock`].
    ///
    /// Fails if `initial` or `max` exceeds [`MAX_BACKOFF`](crate::Settings::MAX_BACKOFF). `initial > max`
    /// is allowed, as in client-go: the first backoff is `initial`, uncapped.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert_eq!(b.next("host-a", Instant::now()), Duration::from_secs(1));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Result<Self, ConfigError> {
        Self::builder(initial, max).build()
    }

    /// A builder starting from `initial` and `max`; see [`BackoffBuilder`]
    /// for jitter, clock, expiry, seed and hasher.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .jitter(0.1)
    ///     .seed(7)
    ///     .build()?;
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn builder(initial: Duration, max: Duration) -> BackoffBuilder<K> {
        BackoffBuilder::client_go(Settings::new(initial, max))
    }

    /// A builder with client-go's rule as a [`Settings`] value holds it
    /// (`initial`, `max`, jitter, seed, expiry window): the way other
    /// builders that keep the same settings (the Redis store's fallback,
    /// the kube crate) make an in-process manager.
    ///
    /// ```
    /// use keyed_backoff::{Backoff, Settings};
    /// use std::time::{Duration, Instant};
    /// let settings = Settings::new(Duration::from_secs(10), Duration::from_secs(300))
    ///     .expire_after(Duration::from_secs(600));
    /// let b = Backoff::<String>::from_settings(settings).build()?;
    /// assert_eq!(b.next("pod-a", Instant::now()), Duration::from_secs(10));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn from_settings(settings: Settings) -> BackoffBuilder<K> {
        BackoffBuilder::client_go(settings)
    }

    /// A builder for a manager whose rule is any [`strategy`](crate::strategy)
    /// instead of client-go's: a new or expired entry gets the strategy's
    /// first delay, each further `next` its following one (given the
    /// attempt count and the previous backoff). A strategy that gives up
    /// keeps the last backoff; use [`attempts`](Self::attempts) to stop.
    ///
    /// The default expiry is twice the strategy's
    /// [`max_delay`](crate::strategy::Step::max_delay); a strategy without
    /// a bound needs [`expire_after`](BackoffBuilder::expire_after). Random
    /// draws use the builder's [`seed`](BackoffBuilder::seed), else the
    /// strategy's, else a random one.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use keyed_backoff::strategy::{Linear, Strategy};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let linear = Linear::new(Duration::from_secs(1), Duration::from_secs(2)).cap(Duration::from_secs(10));
    /// let b = Backoff::<String>::with_strategy(Strategy::new(linear)?)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let secs: Vec<u64> = (0..3).map(|_| b.next("k", clock.now()).as_secs()).collect();
    /// assert_eq!(secs, [1, 3, 5]);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn with_strategy<St: Step + Clone>(strategy: Strategy<St>) -> BackoffBuilder<K> {
        BackoffBuilder::strategy(strategy)
    }
}

impl<K, C: Clock, S> BackoffBuilder<K, C, S> {
    /// Validates the settings and builds the manager.
    ///
    /// Errors: `initial`, `max` or `expire_after` above
    /// [`MAX_BACKOFF`](crate::Settings::MAX_BACKOFF) (about 52 days); `jitter` NaN,
    /// infinite or negative, or set with a strategy; `shards` not a power of
    /// two in 2..=65536; `amortized_gc(0)`; a clock set after a custom
    /// expiry; a strategy that gives no delay, or gives up only beyond
    /// [`MAX_ATTEMPTS`](crate::Settings::MAX_ATTEMPTS); a strategy with unbounded
    /// delays and no `expire_after` window.
    pub fn build(self) -> Result<Backoff<K, C, S>, ConfigError>
    where
        K: Hash + Eq + Clone,
        S: BuildHasher + Clone,
    {
        let p = self.into_parts()?;
        Ok(Backoff {
            store: p.store,
            clock: p.clock,
            epoch: p.epoch,
            max: p.max,
            growth: p.growth,
            expiry: p.expiry,
            amortized: p.amortized,
            holds: p.holds,
        })
    }
}

// client-go's operations.
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
        let own =
            |stale: &dyn Staleness| rules::remaining_since(stale, self.store.get(key)?, event, now);
        rules::in_backoff(self.expiry.judged(own), || self.holds.get(key), now)
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
        let own = |stale: &dyn Staleness| rules::remaining(stale, self.store.get(key)?, at);
        rules::in_backoff(self.expiry.judged(own), || self.holds.get(key), at)
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

    /// client-go's `GC`: removes every entry that has expired as of the
    /// clock's now. Returns how many were removed.
    ///
    /// Each entry is judged and removed under its shard's lock, so an entry
    /// that a concurrent `next` has just refreshed is never removed.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// b.next("k", clock.now());
    /// clock.advance(Duration::from_secs(10)); // exactly 2·max: kept
    /// assert_eq!(b.gc(), 0);
    /// clock.advance(Duration::from_nanos(1));
    /// assert_eq!(b.gc(), 1);
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn gc(&self) -> usize {
        self.expiry.enter();
        let now = self.now_tick();
        let removed = self
            .store
            .sweep(|entry| rules::expired(&self.expiry, entry, now));
        self.holds.sweep(now);
        observe::gc_swept(removed, || self.store.len());
        removed
    }

    // The gate: one decision per failure, and where a key stands.

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
        self.gate_at(key, Some(self.tick(now))).map(Entry::backoff)
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
        self.gate_at(key, None).map(Entry::backoff)
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
        let own = |stale: &dyn Staleness| rules::remaining(stale, self.store.get(key)?, now);
        let wait = self.expiry.judged(own);
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
        let own =
            |stale: &dyn Staleness| rules::remaining_since(stale, self.store.get(key)?, event, now);
        let wait = self.expiry.judged(own);
        wait.max(rules::held(self.holds.get(key), now))
    }

    /// How many times `next` advanced the key's entry since it was created
    /// or re-initialised (saturating at [`MAX_ATTEMPTS`](crate::Settings::MAX_ATTEMPTS)); 0 for a missing key.
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
        self.expiry.enter();
        self.store.get(key).map_or(0, Entry::attempts)
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
}

// Waiting on tokio's clock.
#[cfg(feature = "tokio")]
impl<K, S> Backoff<K, TokioClock, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    /// Waits until `key` is out of backoff: its window, counted from its
    /// last update, has ended (at once for a missing or expired key).
    ///
    /// The wait is on tokio's clock, the manager's own, so paused time
    /// drives it in tests. It is cancel-safe: it changes nothing, and
    /// dropping it at any point leaves the manager as it was. The window is
    /// read again after each sleep, so a key advanced meanwhile (by another
    /// task's [`next`](Self::next)) is waited for again; a
    /// [`reset`](Self::reset) is seen when the current sleep ends.
    ///
    /// Several tasks waiting on one key all wake together; to let exactly
    /// one of them go per window, use
    /// [`until_ready_then_next`](Self::until_ready_then_next).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff::ConfigError> {
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(TokioClock)
    ///     .build()?;
    /// b.next_now("db");
    /// let start = tokio::time::Instant::now();
    /// b.until_ready("db").await;
    /// assert_eq!(start.elapsed(), Duration::from_secs(10));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        wait::until_ready(|| self.remaining(key, self.clock.now())).await;
    }

    /// Waits until `key` is out of backoff, then advances it in the same
    /// step as [`try_next_now`](Self::try_next_now) and returns the new
    /// backoff: the kubelet's restart gate ("no restart inside the window;
    /// each restart doubles it") for async code.
    ///
    /// Among tasks racing on one key, exactly one advances per window; the
    /// others go back to waiting for the new window. Cancel-safe: a
    /// dropped call never advanced the key, and one that returned did
    /// exactly once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), keyed_backoff::ConfigError> {
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::TokioClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(TokioClock)
    ///     .build()?;
    /// let start = tokio::time::Instant::now();
    /// assert_eq!(b.until_ready_then_next("pod").await, Duration::from_secs(10)); // at once
    /// assert_eq!(b.until_ready_then_next("pod").await, Duration::from_secs(20)); // after 10 s
    /// assert_eq!(start.elapsed(), Duration::from_secs(10));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready_then_next<Q>(&self, key: &Q) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        wait::until_ready_then(|| self.try_next_now(key)).await
    }
}

// Garbage collection in the background, and memory.
impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    /// Runs [`gc`](Self::gc) every `interval` (real time) on a background
    /// thread until the returned handle is dropped or the manager is.
    ///
    /// The thread holds only a weak reference, sleeps on a condition
    /// variable (so stopping is immediate) and is joined by the handle.
    /// `interval` must be greater than zero.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?);
    /// let _gc = b.spawn_gc(Duration::from_secs(60))?; // kept alive as long as needed
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn_gc(self: &Arc<Self>, interval: Duration) -> Result<GcGuard, SpawnError> {
        gc::spawn_thread(Arc::downgrade(self), interval, Self::gc_contained)
    }

    /// Runs [`gc`](Self::gc) every `interval` from a tokio task (the sweep
    /// itself runs on the blocking pool, so async workers are never held up)
    /// until the returned handle is dropped or the manager is. `interval`
    /// must be greater than zero, and the call must be made inside a tokio
    /// runtime with its time driver on (`enable_time`): otherwise it
    /// returns a [`SpawnError`] and starts nothing. It never panics: tokio
    /// cannot be asked whether a runtime has timers, so a timer is made
    /// under `catch_unwind` with its panic message kept quiet. Built with
    /// `panic = "abort"`, where that cannot be caught, the sweeps are paced
    /// by a thread on real time instead (the same as tokio's time unless a
    /// test pauses it).
    ///
    /// ```
    /// use keyed_backoff::{Backoff, SpawnError};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let b = Arc::new(Backoff::<String>::new(Duration::from_secs(10), Duration::from_secs(300))?);
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let gc = b.spawn_gc_task(Duration::from_secs(60))?;
    /// drop(gc); // aborts the task
    /// # Ok::<(), SpawnError>(())
    /// # })?;
    /// // Outside a runtime: an error, not a panic.
    /// assert!(matches!(b.spawn_gc_task(Duration::from_secs(60)), Err(SpawnError::NoRuntime)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tokio")]
    pub fn spawn_gc_task(self: &Arc<Self>, interval: Duration) -> Result<GcGuard, SpawnError> {
        gc::spawn_task(Arc::downgrade(self), interval, Self::gc_contained)
    }
}

// Inspection.
impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// Releases table memory left over after entries were removed (for
    /// example by a large [`gc`](Self::gc)). Locks one shard at a time.
    ///
    /// `gc` never shrinks by itself, so its cost stays predictable; call
    /// this after a collection that removed a large share of the entries.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// for k in 0..1_000 { b.next(&k, Instant::now()); }
    /// for k in 0..1_000 { b.reset(&k); }
    /// b.shrink_to_fit();
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn shrink_to_fit(&self) {
        self.expiry.enter();
        self.store.shrink_to_fit();
    }

    /// The number of entries held, expired ones included.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next(&1, Instant::now());
    /// b.next(&2, Instant::now());
    /// assert_eq!(b.len(), 2);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.expiry.enter();
        self.store.len()
    }

    /// Whether no entries are held.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<u64>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert!(b.is_empty());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.expiry.enter();
        self.store.is_empty()
    }

    /// The clock this manager reads.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(2))
    ///     .clock(MockClock::new())
    ///     .build()?;
    /// b.clock().advance(Duration::from_secs(1));
    /// assert_eq!(b.clock().now().as_nanos(), 1_000_000_000);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The rule that moves each entry: client-go's
    /// [`FactorJitter`](crate::strategy::FactorJitter) for a manager from
    /// [`builder`](Self::builder), the strategy for one from
    /// [`with_strategy`](Self::with_strategy).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(2))?;
    /// assert_eq!(b.rule().delay(0, None, &mut || 0.0), Some(Duration::from_secs(1)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn rule(&self) -> &dyn Step {
        self.growth.step()
    }

    /// client-go's `max` (for a strategy, its largest delay): the unit of
    /// the default expiry, `2·max`, and the `max` given to a custom expiry.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(2))?;
    /// assert_eq!(b.max(), Duration::from_secs(2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Every entry as seen now (one clock read; shards are read one at a
    /// time, so concurrent updates may or may not be included).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<u32>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next(&7, Instant::now());
    /// assert_eq!(b.entries().len(), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn entries(&self) -> Vec<EntryView<K, C::Instant>> {
        self.expiry.enter();
        inspect::entries(&self.store, self.now_tick(), self.epoch, &self.expiry)
    }

    /// One key's entry as seen now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert!(b.entry("k").is_none());
    /// b.next("k", Instant::now());
    /// assert_eq!(b.entry("k").unwrap().attempts, 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn entry<Q>(&self, key: &Q) -> Option<EntryView<K, C::Instant>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.expiry.enter();
        let now = self.now_tick();
        let (k, e) = self.store.get_key_value(key)?;
        Some(inspect::view(&k, e, now, self.epoch, &self.expiry))
    }

    /// Counters: entries, in backoff now, expired awaiting GC, GC runs and
    /// removals. Scans every entry (under read locks, shard by shard).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.gc();
    /// assert_eq!(b.stats().gc_runs, 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.expiry.enter();
        inspect::stats(&self.store, self.now_tick(), &self.expiry)
    }

    /// A copy of every entry with wall-clock last-update times, taking
    /// [`SystemTime::now`] as the wall time of the clock's now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.next("k", Instant::now());
    /// assert_eq!(b.snapshot().entries.len(), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot<K> {
        self.snapshot_at(SystemTime::now())
    }

    /// Like [`snapshot`](Self::snapshot), taking `wall_now` as the wall time
    /// of the clock's now (for tests and simulations).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::{Duration, SystemTime};
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).clock(clock.clone()).build()?;
    /// b.next("k", clock.now());
    /// clock.advance(Duration::from_secs(5));
    /// let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    /// let snap = b.snapshot_at(wall);
    /// assert_eq!(snap.entries[0].last_update, wall - Duration::from_secs(5));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn snapshot_at(&self, wall_now: SystemTime) -> Snapshot<K> {
        self.expiry.enter();
        snapshot::take(&self.store, self.now_tick(), wall_now)
    }

    /// Rebuilds entries from a snapshot, mapping each wall-clock last update
    /// onto this manager's clock with [`SystemTime::now`] as the wall time of
    /// the clock's now. Entries already expired by then are dropped;
    /// existing entries for the same keys are replaced. A last update in the
    /// future (a snapshot written by a node whose wall clock runs ahead)
    /// counts as now, and a backoff above this manager's `max` is cut to it,
    /// so a snapshot never holds a key longer than this manager would. When
    /// a key appears more than once, its last occurrence decides. Returns
    /// how many keys were restored (all held afterwards).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let a = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// a.next("k", Instant::now());
    /// a.next("k", Instant::now());
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// b.restore(&a.snapshot());
    /// assert_eq!((b.get("k"), b.attempts("k")), (Duration::from_secs(2), 2));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn restore(&self, snapshot: &Snapshot<K>) -> usize {
        self.restore_at(snapshot, SystemTime::now())
    }

    /// Like [`restore`](Self::restore), taking `wall_now` as the wall time
    /// of the clock's now.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::MockClock;
    /// use std::time::{Duration, SystemTime};
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).clock(MockClock::new()).build()?;
    /// let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    /// let snap = keyed_backoff::Snapshot {
    ///     entries: vec![keyed_backoff::SnapshotEntry { key: "k".to_string(), backoff: Duration::from_secs(8), attempts: 4, last_update: t0 }],
    /// };
    /// assert_eq!(b.restore_at(&snap, t0 + Duration::from_secs(121)), 0); // past 2·max: dropped
    /// assert_eq!(b.restore_at(&snap, t0 + Duration::from_secs(3)), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn restore_at(&self, snapshot: &Snapshot<K>, wall_now: SystemTime) -> usize {
        self.expiry.enter();
        let max_ns = saturating_nanos(self.growth.step().max_delay().min(MAX_BACKOFF));
        let now = self.now_tick();
        snapshot::restore(&self.store, snapshot, &self.expiry, now, wall_now, max_ns)
    }

    // The write path and the time line.

    /// `t` on the manager's time line.
    #[inline]
    fn tick(&self, t: C::Instant) -> Tick {
        Tick::of(t, self.epoch)
    }

    /// The clock's now on the manager's time line.
    #[inline]
    fn now_tick(&self) -> Tick {
        self.tick(self.clock.now())
    }

    /// `next` at `event`, or at the clock's now read under the key's lock
    /// (one clock read) when `event` is `None`.
    #[inline]
    fn next_at<Q>(&self, key: &Q, event: Option<Tick>) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let next = |old, now, stale: &dyn Staleness| {
            Ok::<_, Infallible>(rules::next_entry(
                &self.growth,
                stale,
                old,
                event.unwrap_or(now),
                now,
            ))
        };
        let Ok(entry) = self.write(key, next);
        entry.backoff()
    }

    /// The gate at `event`, or at the clock's now read under the key's lock
    /// when `event` is `None`.
    #[inline]
    fn gate_at<Q>(&self, key: &Q, event: Option<Tick>) -> Result<Entry, InBackoff>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let hold = self.holds.get(key);
        let gate = |old, now, stale: &dyn Staleness| {
            rules::gate(&self.growth, stale, old, event.unwrap_or(now), now, hold)
        };
        self.write(key, gate)
            .map_err(|remaining| InBackoff { remaining })
    }

    /// The gate at the clock's now, with the key's new level.
    pub(crate) fn try_next_level(&self, key: &K) -> Result<Advanced, InBackoff> {
        self.gate_at(key, None).map(Entry::level)
    }

    /// The key's level, if it has an entry that has not expired now.
    pub(crate) fn live_level(&self, key: &K) -> Option<Advanced> {
        self.expiry.enter();
        let now = self.now_tick();
        let entry = self.store.get(key)?;
        let expired = self
            .expiry
            .judged(|stale| rules::expired(stale, entry, now));
        (!expired).then(|| entry.level())
    }

    /// Puts `key` back at `level`, its backoff just over now, unless it
    /// has a live entry.
    pub(crate) fn resume_at(&self, key: &K, level: Advanced) {
        let _ = self.write(key, |old, now, stale: &dyn Staleness| {
            rules::resumed(stale, old, level, now).ok_or(())
        });
    }

    /// One write through the store, counted for amortised GC.
    #[inline]
    fn write<Q, E, D>(&self, key: &Q, decide: D) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
        D: FnOnce(Option<Entry>, Tick, &dyn Staleness) -> Result<Entry, E>,
    {
        let written = self
            .store
            .write(key, &self.expiry, || self.now_tick(), decide);
        if let Some(amortized) = &self.amortized {
            amortized.tick(|| self.gc_contained());
        }
        written
    }

    /// [`gc`](Self::gc) for the background sweepers and amortised GC: a
    /// panic in the user's expiry function is counted in
    /// [`Stats::gc_panics`], never propagated, so it cannot end a GC thread
    /// or fail an unrelated caller whose own update already took effect.
    fn gc_contained(&self) {
        gc::contained(&self.store, || {
            self.gc();
        });
    }
}

impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone + fmt::Display,
    C: Clock,
    S: BuildHasher + Clone,
{
    /// A table of every entry, longest remaining wait first, as an operator
    /// would print it from a debug endpoint.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300)).clock(clock.clone()).build()?;
    /// b.next("default/web-0", clock.now());
    /// let table = b.dump();
    /// assert!(table.contains("default/web-0"));
    /// assert!(table.contains("in backoff"));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn dump(&self) -> String {
        self.expiry.enter();
        // One clock reading for the rows and the totals alike.
        let now = self.clock.now();
        let views = inspect::entries(&self.store, self.tick(now), self.epoch, &self.expiry);
        inspect::dump(&self.store, views, now)
    }
}

impl<K, C: Clock, S> fmt::Debug for Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("rule", &self.growth.step())
            .field("expiry", &self.expiry)
            .field("entries", &self.store.len())
            .finish_non_exhaustive()
    }
}
