//! [`Backoff`]: client-go's `flowcontrol.Backoff` on a concurrent map.
//!
//! This file holds the type, how one is made, and the write path every
//! operation goes through (the clock read once, the rules asked, the store
//! written). The public methods are grouped by audience, one file each:
//! client-go's operations (`clientgo.rs`), the `Gate` calls beside what
//! they call (`gate.rs`), inspection (`inspection.rs`) and waits and
//! background GC (`waits.rs`). Each is thin: it reads the clock, asks the
//! rules (`rules.rs`) and writes through the store (`store.rs`). See
//! `docs/semantics.md` for every behaviour side by side with client-go.

use std::borrow::Borrow;
use std::convert::Infallible;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use crate::builder::{BackoffBuilder, DefaultHashBuilder};
use crate::clock::{Clock, StdClock};
use crate::entry::{Entry, Tick};
use crate::error::{ConfigError, InBackoff};
use crate::expiry::Expiry;
use crate::gc::{self, Amortized};
use crate::growth::Growth;
use crate::hold::Holds;
use crate::observe;
use crate::rules::{self, Staleness};
use crate::settings::Settings;
use crate::store::Store;
use crate::strategy::{Step, Strategy};

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

mod clientgo;
mod gate;
mod inspection;
mod waits;

impl<K: Hash + Eq + Clone> Backoff<K> {
    /// A manager with client-go's strategy, no jitter, the default expiry
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

    /// A builder with client-go's settings as a [`Settings`] value holds it
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
    /// let linear = Linear::new(Duration::from_secs(1), Duration::from_secs(2)).max(Duration::from_secs(10));
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

// The write path and the time line.
impl<K, C, S> Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    C: Clock,
    S: BuildHasher + Clone,
{
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

    /// `try_next` at `event`, or at the clock's now read under the key's lock
    /// when `event` is `None`.
    #[inline]
    fn try_next_at<Q>(&self, key: &Q, event: Option<Tick>) -> Result<Entry, InBackoff>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let hold = self.holds.get(key);
        let decide = |old, now, stale: &dyn Staleness| {
            rules::try_next(&self.growth, stale, old, event.unwrap_or(now), now, hold)
        };
        self.write(key, decide)
            .map_err(|remaining| InBackoff { remaining })
    }

    /// `key`'s own wait at `now` (its floor aside), counted from its last
    /// update, or from `since` (client-go's `IsInBackOffSince`).
    #[inline]
    fn own_wait<Q>(&self, key: &Q, since: Option<Tick>, now: Tick) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let own = |stale: &dyn Staleness| {
            let entry = self.store.get(key)?;
            match since {
                Some(event) => rules::remaining_since(stale, entry, event, now),
                None => rules::remaining(stale, entry, now),
            }
        };
        self.expiry.judged(own)
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
