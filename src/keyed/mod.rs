//! The keyed backoff manager: client-go's `flowcontrol.Backoff` on a
//! concurrent map.
//!
//! See [`Backoff`] for the operations and `docs/semantics.md` for every
//! behaviour side by side with client-go.

mod background;
mod builder;
mod entry;
mod expiry;
mod gate;
mod observe;
mod policy;
mod rule;
mod settings;
mod store;
#[cfg(feature = "tokio")]
mod wait;

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::time::Duration;

pub use background::GcGuard;
#[cfg(feature = "tokio")]
pub use background::GcTaskGuard;
pub use builder::{
    BackoffBuilder, ClientGoRule, ClockFixed, ClockOpen, DEFAULT_SHARDS, StrategyRule,
};
pub use entry::{MAX_ATTEMPTS, MAX_BACKOFF};
pub use gate::InBackoff;
pub use observe::{EntryView, Snapshot, SnapshotEntry, Stats};
pub use settings::{Settings, ValidSettings};

use crate::clock::{Clock, ClockInstant, DefaultClock};
use entry::Entry;
use expiry::{Expiry, Judge};
use policy::{Staleness, Tick};
use rule::Rule;
use store::Store;

/// The hasher used when none is chosen: foldhash's fast hasher, seeded
/// randomly per manager so keys from untrusted input cannot be crafted to
/// collide.
///
/// ```
/// use keyed_backoff::DefaultHashBuilder;
/// use std::hash::BuildHasher;
/// let a = DefaultHashBuilder::default();
/// let _ = a.hash_one("pod-1");
/// ```
pub type DefaultHashBuilder = foldhash::fast::RandomState;

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
pub struct Backoff<K, C: Clock = DefaultClock, S = DefaultHashBuilder> {
    store: Store<K, S>,
    clock: C,
    epoch: C::Instant,
    /// client-go's `maxDuration`, or a strategy's largest delay: the unit
    /// of the default expiry and the `max` a custom expiry is given.
    max: Duration,
    rule: Rule,
    expiry: Expiry<C::Instant>,
}

impl<K: Hash + Eq + Clone> Backoff<K> {
    /// A manager with client-go's rule, no jitter, the default expiry
    /// (`2·max`) and the [`DefaultClock`].
    ///
    /// Fails if `initial` or `max` exceeds [`MAX_BACKOFF`]. `initial > max`
    /// is allowed, as in client-go: the first backoff is `initial`, uncapped.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::{Duration, Instant};
    /// let b = Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?;
    /// assert_eq!(b.next("host-a", Instant::now()), Duration::from_secs(1));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Result<Self, crate::ConfigError> {
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
    pub fn with_strategy<St: crate::strategy::Step + Clone>(
        strategy: crate::strategy::Strategy<St>,
    ) -> BackoffBuilder<K, DefaultClock, DefaultHashBuilder, ClockOpen, StrategyRule> {
        BackoffBuilder::strategy(strategy)
    }
}

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
        self.enter();
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
    pub fn is_in_backoff_since<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.judged(|stale| {
            self.store.get(key).is_some_and(|entry| {
                policy::in_backoff_since(stale, entry, self.tick(event_time), self.now_tick())
            })
        })
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
    pub fn is_in_backoff_since_update<Q>(&self, key: &Q, event_time: C::Instant) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.judged(|stale| {
            self.store.get(key).is_some_and(|entry| {
                policy::in_backoff_since_update(stale, entry, self.tick(event_time))
            })
        })
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
        self.enter();
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
        self.enter();
        let now = self.now_tick();
        let judge = self.judge();
        let removed = self
            .store
            .sweep(|entry| policy::expired(&judge, entry, now));
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "keyed_backoff",
            removed,
            entries = self.store.len(),
            "gc sweep"
        );
        removed
    }

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
        self.enter();
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
        self.enter();
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
        self.enter();
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
    pub fn rule(&self) -> &dyn crate::strategy::Step {
        self.rule.step()
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

    /// `t` on the manager's time line.
    #[inline]
    fn tick(&self, t: C::Instant) -> Tick {
        Tick(t.nanos_since(self.epoch))
    }

    /// The clock's now on the manager's time line.
    #[inline]
    fn now_tick(&self) -> Tick {
        self.tick(self.clock.now())
    }

    /// Calls `f` with the expiry rule as the policy asks it, matched once:
    /// the common fixed window goes as itself (no re-entry check, no
    /// dispatch per judgement, so `f` inlines to plain arithmetic), a user
    /// function through [`Judge`] after the re-entry check.
    #[inline]
    fn judged<R>(&self, f: impl FnOnce(&dyn Staleness) -> R) -> R {
        match &self.expiry {
            Expiry::After(window) => f(window),
            Expiry::Custom(_) => {
                self.enter();
                f(&self.judge())
            }
        }
    }

    /// The expiry rule as the policy asks it.
    #[inline]
    fn judge(&self) -> Judge<'_, C::Instant> {
        Judge {
            expiry: &self.expiry,
            epoch: &self.epoch,
            max: &self.max,
            owner: self.owner_id(),
        }
    }

    /// This manager's identity for re-entry checks: its address.
    #[inline]
    fn owner_id(&self) -> usize {
        std::ptr::from_ref(&self.store).addr()
    }

    /// Refuses a call from inside this manager's own expiry function (only
    /// a custom function can call back; the fixed window cannot).
    #[inline]
    fn enter(&self) {
        if let Expiry::Custom(_) = self.expiry {
            expiry::refuse_reentry(self.owner_id());
        }
    }

    /// [`gc`](Self::gc) for the background sweepers and amortised GC: a
    /// panic in the user's expiry function is counted in
    /// [`Stats::gc_panics`], never propagated, so it cannot end a GC thread
    /// or fail an unrelated caller whose own update already took effect.
    pub(crate) fn gc_contained(&self) {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.gc())).is_err() {
            self.store.count_gc_panic();
            #[cfg(feature = "tracing")]
            tracing::error!(
                target: "keyed_backoff",
                "the expiry function panicked; the sweep ended early and the next one will retry"
            );
        }
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
        let written = self.write(key, |old, now, stale| {
            Ok::<_, std::convert::Infallible>(policy::next_entry(
                &self.rule,
                stale,
                old,
                event.unwrap_or(now),
                now,
            ))
        });
        match written {
            Ok(entry) => entry.backoff(),
        }
    }

    /// The gate at `event`, or at the clock's now read under the key's lock
    /// when `event` is `None`.
    #[inline]
    fn gate_at<Q>(&self, key: &Q, event: Option<Tick>) -> Result<Duration, InBackoff>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.write(key, |old, now, stale| {
            policy::gate(&self.rule, stale, old, event.unwrap_or(now), now)
                .map_err(|remaining| InBackoff { remaining })
        })
        .map(Entry::backoff)
    }

    /// One write through the store (`decide` gets the key's entry, the
    /// clock's now read under the key's lock, and the expiry rule), counted
    /// for amortised GC.
    ///
    #[inline]
    fn write<Q, E, D>(&self, key: &Q, decide: D) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
        D: FnOnce(Option<Entry>, Tick, &dyn Staleness) -> Result<Entry, E>,
    {
        // Matched here rather than through `judged`: with `decide` nested
        // one closure deeper, the compiler stops inlining the update.
        let written = match &self.expiry {
            Expiry::After(window) => {
                self.store
                    .update(key, || self.now_tick(), |old, now| decide(old, now, window))
            }
            Expiry::Custom(_) => self.write_custom(key, decide),
        };
        self.after_write();
        written
    }

    /// [`write`](Self::write) with a user expiry function, kept out of line
    /// so the fixed-window path stays small.
    #[inline(never)]
    fn write_custom<Q, E, D>(&self, key: &Q, decide: D) -> Result<Entry, E>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
        D: FnOnce(Option<Entry>, Tick, &dyn Staleness) -> Result<Entry, E>,
    {
        self.enter();
        let judge = self.judge();
        self.store
            .update(key, || self.now_tick(), |old, now| decide(old, now, &judge))
    }

    /// Counts a write for amortised GC, sweeping when it is due.
    #[inline]
    fn after_write(&self) {
        self.store.after_write(|| self.gc_contained());
    }
}

impl<K, C: Clock, S> fmt::Debug for Backoff<K, C, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher + Clone,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("rule", &self.rule.step())
            .field("expiry", &self.expiry)
            .field("entries", &self.store.len())
            .finish_non_exhaustive()
    }
}
