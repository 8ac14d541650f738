//! `BackoffBuilder`: every setting of a [`Backoff`], validated in one place.

use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;

use super::entry::MAX_BACKOFF;
use super::expiry::Expiry;
use super::rule::{Formula, Rule};
use super::store::Store;
use super::{Backoff, DefaultHashBuilder};
use crate::clock::{Clock, DefaultClock};
use crate::error::{ConfigError, finite_at_least};
use crate::strategy::{FactorJitter, Step, Strategy};

/// Builds a [`Backoff`]; made by [`Backoff::builder`].
///
/// Defaults: no jitter (`0.0`), the [`DefaultClock`], client-go's expiry
/// (`event − last_update > 2·max`), a random jitter seed, the
/// [`DefaultHashBuilder`] and [`DEFAULT_SHARDS`] shards.
/// [`build`](Self::build) checks every value and returns a [`ConfigError`]
/// naming the first one out of range.
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
///
/// // The kubelet's CrashLoopBackOff: 10 s doubling to 300 s, forgotten
/// // after 600 s without a restart.
/// let crashloop = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(MockClock::new())
///     .expire_after(Duration::from_secs(600))
///     .build()?;
/// # let _ = crashloop;
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct BackoffBuilder<K, C: Clock = DefaultClock, S = DefaultHashBuilder, T = ClockOpen> {
    settings: Settings,
    clock: C,
    hasher: S,
    /// `None`: client-go's default (`2·max`), resolved in `build`.
    expiry: Option<Expiry<C::Instant>>,
    keys: PhantomData<fn() -> (K, T)>,
}

/// The settings whose types do not depend on the clock or the hasher, so a
/// builder that changes type carries them over as one value.
struct Settings {
    initial: Duration,
    max: Duration,
    jitter: f64,
    seed: Option<u64>,
    shards: Option<usize>,
    capacity: usize,
    strategy: Option<(Box<dyn Step>, Option<u64>)>,
    amortized_gc: Option<u32>,
}

/// Builder state: the clock may still be changed with
/// [`BackoffBuilder::clock`].
///
/// ```
/// use keyed_backoff::{Backoff, BackoffBuilder, ClockOpen};
/// let _b: BackoffBuilder<String, _, _, ClockOpen> =
///     Backoff::<String>::builder(std::time::Duration::from_secs(1), std::time::Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ClockOpen;

/// Builder state after [`BackoffBuilder::expiry`]: the custom expiry is
/// written for the clock's instant type, so the clock can no longer change.
/// Calling `.clock(..)` then does not compile:
///
/// ```compile_fail
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
/// let _ = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(2))
///     .expiry(|_, _, _| false)
///     .clock(MockClock::new()); // error: set the clock before the expiry
/// ```
///
/// Set the clock first:
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
/// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(2))
///     .clock(MockClock::new())
///     .expiry(|_, _, _| false)
///     .build()?;
/// # let _ = b;
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ClockFixed;

impl<K> BackoffBuilder<K> {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        BackoffBuilder {
            settings: Settings {
                initial,
                max,
                jitter: 0.0,
                seed: None,
                shards: None,
                capacity: 0,
                strategy: None,
                amortized_gc: None,
            },
            clock: DefaultClock::default(),
            hasher: DefaultHashBuilder::default(),
            expiry: None,
            keys: PhantomData,
        }
    }
}

impl<K, C: Clock, S> BackoffBuilder<K, C, S, ClockOpen> {
    /// The clock to read; changes the builder's clock type. Default
    /// [`DefaultClock`].
    ///
    /// Only available before [`expiry`](Self::expiry): a custom expiry is
    /// written for one clock's instant type, so the compiler refuses a
    /// `.clock(..)` after it (see [`ClockFixed`]).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::QuantaClock;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .clock(QuantaClock)
    ///     .build()?;
    /// b.next("k", quanta::Instant::now());
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn clock<C2: Clock>(self, clock: C2) -> BackoffBuilder<K, C2, S, ClockOpen> {
        // A fixed window carries over; a custom expiry cannot be set here
        // (`expiry` moves the builder to `ClockFixed`).
        let expiry = match self.expiry {
            Some(Expiry::After(window)) => Some(Expiry::After(window)),
            _ => None,
        };
        BackoffBuilder {
            settings: self.settings,
            clock,
            hasher: self.hasher,
            expiry,
            keys: PhantomData,
        }
    }
}

impl<K, C: Clock, S, T> BackoffBuilder<K, C, S, T> {
    /// Jitter factor, client-go's `maxJitterFactor`: each step adds
    /// `U[0,1) · jitter · previous backoff` before the cap. Default `0.0`.
    /// Must be a finite number `>= 0`.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).jitter(0.2).build();
    /// assert!(b.is_ok());
    /// let bad = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).jitter(-0.1).build();
    /// assert_eq!(bad.unwrap_err().field(), "jitter");
    /// ```
    pub fn jitter(mut self, factor: f64) -> Self {
        self.settings.jitter = factor;
        self
    }

    /// Seed for the jitter draws, for reproducible runs. Default: random per
    /// manager.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let make = || Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .jitter(0.5).seed(42).clock(MockClock::new()).build().unwrap();
    /// let (a, b) = (make(), make());
    /// let t = a.clock().now();
    /// assert_eq!(a.next("k", t), b.next("k", t));
    /// assert_eq!(a.next("k", t), b.next("k", t));
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = Some(seed);
        self
    }

    /// A custom expiry, client-go's `HasExpiredFunc`: called with
    /// `(event_time, last_update, max)`, returns whether the entry is stale.
    /// The same function decides in `next`, both checks and `gc` (where the
    /// event time is the clock's now). Default: `event − last_update > 2·max`.
    ///
    /// The contract: the function runs while the manager holds the key's
    /// shard lock (a write lock in `next`, `try_next` and `gc`, a read lock
    /// in the checks and views), so it must be quick and must not call the
    /// same manager: such a call panics with a message saying so, instead
    /// of deadlocking. A panic in the function reaches the caller of a
    /// direct call, and the manager stays usable; in background or
    /// amortised GC it is contained and counted in
    /// [`Stats::gc_panics`](crate::Stats::gc_panics).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{ClockInstant, MockClock, MockInstant};
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(50))
    ///     .clock(MockClock::new())
    ///     .expiry(|event: MockInstant, last: MockInstant, _max| {
    ///         event.saturating_duration_since(last) > Duration::from_secs(200)
    ///     })
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn expiry<F>(self, has_expired: F) -> BackoffBuilder<K, C, S, ClockFixed>
    where
        F: Fn(C::Instant, C::Instant, Duration) -> bool + Send + Sync + 'static,
    {
        BackoffBuilder {
            settings: self.settings,
            clock: self.clock,
            hasher: self.hasher,
            expiry: Some(Expiry::Custom(Arc::new(has_expired))),
            keys: PhantomData,
        }
    }

    /// Expiry after a fixed window: stale when `event − last_update >
    /// window`, whatever `max` is. The kubelet's CrashLoopBackOff uses 600 s.
    /// Cheaper than an equivalent [`expiry`](Self::expiry) closure.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .expire_after(Duration::from_secs(600))
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.expiry = Some(Expiry::after(window));
        self
    }

    /// The hasher for keys; changes the builder's hasher type. Default
    /// [`DefaultHashBuilder`] (seeded randomly per manager).
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::collections::hash_map::RandomState;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
    ///     .hasher(RandomState::new())
    ///     .build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn hasher<S2: BuildHasher + Clone>(self, hasher: S2) -> BackoffBuilder<K, C, S2, T> {
        BackoffBuilder {
            settings: self.settings,
            clock: self.clock,
            hasher,
            expiry: self.expiry,
            keys: PhantomData,
        }
    }

    /// Number of lock shards: a power of two from 2 to 65536. Default
    /// [`DEFAULT_SHARDS`] (1024).
    ///
    /// `gc` locks one shard at a time, so the longest a reader can wait on it
    /// is one shard's sweep: with 1,000,000 entries, 1024 shards keep reader
    /// p99.9 latency under 3 µs during continuous GC where 8 shards give
    /// over a millisecond (`docs/benchmarks.md`). Each shard costs 128 bytes
    /// even when empty; many tiny managers may want fewer.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let ok = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).shards(256).build();
    /// assert!(ok.is_ok());
    /// let bad = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).shards(100).build();
    /// assert_eq!(bad.unwrap_err().field(), "shards");
    /// ```
    pub fn shards(mut self, shards: usize) -> Self {
        self.settings.shards = Some(shards);
        self
    }

    /// Replace client-go's rule with any [`strategy`](crate::strategy): a
    /// new or expired entry gets the strategy's first delay, each further
    /// `next` its following one (given the attempt count and the previous
    /// backoff). A strategy that gives up keeps the last backoff; use
    /// [`Backoff::attempts`] to stop. `max` still sets the default expiry
    /// (`2·max`). Default: client-go's rule. Random draws use the builder's
    /// [`seed`](Self::seed), else the strategy's, else a random one.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use keyed_backoff::strategy::Linear;
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(10))
    ///     .clock(clock.clone())
    ///     .strategy(Linear::new(Duration::from_secs(1), Duration::from_secs(2)).build()?)
    ///     .build()?;
    /// let secs: Vec<u64> = (0..3).map(|_| b.next("k", clock.now()).as_secs()).collect();
    /// assert_eq!(secs, [1, 3, 5]);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn strategy<St: Step + Clone>(mut self, strategy: Strategy<St>) -> Self {
        let (step, seed) = strategy.into_parts();
        self.settings.strategy = Some((Box::new(step), seed));
        self
    }

    /// Opt-in amortised GC for users who run no GC task: every `every`-th
    /// `next` also runs [`Backoff::gc`] (one sweeper at a time; others skip
    /// it). The sweep locks one shard at a time, so readers are not stalled,
    /// but the calling thread pays for the whole sweep; prefer
    /// [`Backoff::spawn_gc`] for large maps. Default: off. `every` must be at
    /// least 1.
    ///
    /// dashmap offers no safe way to sweep one shard at a time, which is why
    /// a sweep covers the whole map.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use keyed_backoff::clock::{Clock, MockClock};
    /// use std::time::Duration;
    /// let clock = MockClock::new();
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(5))
    ///     .clock(clock.clone())
    ///     .amortized_gc(2)
    ///     .build()?;
    /// b.next("old", clock.now());
    /// clock.advance(Duration::from_secs(11));
    /// b.next("new", clock.now()); // the 2nd call sweeps: "old" is collected
    /// assert_eq!(b.len(), 1);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn amortized_gc(mut self, every: u32) -> Self {
        self.settings.amortized_gc = Some(every);
        self
    }

    /// Entries to make room for up front. Default 0.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60)).capacity(10_000).build()?;
    /// # let _ = b;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn capacity(mut self, entries: usize) -> Self {
        self.settings.capacity = entries;
        self
    }

    /// Validates the settings and builds the manager.
    ///
    /// Errors: `initial` or `max` above [`MAX_BACKOFF`] (about 52 days);
    /// `jitter` NaN, infinite or negative; `shards` not a power of two in
    /// 2..=65536.
    ///
    /// ```
    /// use keyed_backoff::Backoff;
    /// use std::time::Duration;
    /// let err = Backoff::<String>::builder(Duration::from_secs(1), Duration::MAX).build().unwrap_err();
    /// assert_eq!(err.field(), "max");
    /// ```
    pub fn build(self) -> Result<Backoff<K, C, S>, ConfigError>
    where
        K: Hash + Eq + Clone,
        S: BuildHasher + Clone,
    {
        let settings = self.settings;
        let initial = within_max_backoff("initial", settings.initial)?;
        let max = within_max_backoff("max", settings.max)?;
        let jitter = finite_at_least("jitter", settings.jitter, 0.0)?;
        let map = match settings.shards.unwrap_or(DEFAULT_SHARDS) {
            n if n.is_power_of_two() && (2..=65_536).contains(&n) => {
                DashMap::with_capacity_and_hasher_and_shard_amount(
                    settings.capacity,
                    self.hasher,
                    n,
                )
            }
            n => {
                return Err(ConfigError::new(
                    "shards",
                    "a power of two from 2 to 65536",
                    n,
                ));
            }
        };
        let (formula, strategy_seed) = match settings.strategy {
            Some(_) if jitter != 0.0 => {
                return Err(ConfigError::new(
                    "jitter",
                    "0 when a strategy is set (give the strategy its own jitter)",
                    jitter,
                ));
            }
            Some((step, seed)) => {
                check_attempt_limit(step.as_ref())?;
                (Formula::Strategy(step), seed)
            }
            None => (
                Formula::ClientGo(FactorJitter::new(initial, max).factor(jitter)),
                None,
            ),
        };
        if settings.amortized_gc == Some(0) {
            return Err(ConfigError::new("amortized_gc", "at least 1", 0));
        }
        let seed = settings.seed.or(strategy_seed).unwrap_or_else(rand::random);
        let epoch = self.clock.now();
        Ok(Backoff {
            store: Store::new(map, settings.amortized_gc),
            rule: Rule::new(formula, seed),
            clock: self.clock,
            epoch,
            initial,
            max,
            jitter,
            expiry: self.expiry.unwrap_or_else(|| Expiry::twice_max(max)),
        })
    }
}

/// The shard count used when [`BackoffBuilder::shards`] is not called.
///
/// ```
/// assert_eq!(keyed_backoff::DEFAULT_SHARDS, 1024);
/// ```
pub const DEFAULT_SHARDS: usize = 1024;

/// A strategy in the keyed manager must give at least one delay, and if it
/// gives up, do so within the attempts an entry can count
/// ([`MAX_ATTEMPTS`](crate::MAX_ATTEMPTS)); otherwise it would never give up.
fn check_attempt_limit(step: &dyn Step) -> Result<(), ConfigError> {
    let unit = &mut || 0.5;
    if step.delay(0, None, unit).is_none() {
        return Err(ConfigError::new(
            "strategy",
            "a strategy that gives at least one delay (max_attempts >= 1)",
            "max_attempts(0)",
        ));
    }
    let counted = crate::MAX_ATTEMPTS;
    let beyond = step.delay(counted, None, unit).is_some();
    if beyond && step.delay(u32::MAX, None, unit).is_none() {
        return Err(ConfigError::new(
            "strategy",
            format!("max_attempts at most {counted} (the attempts an entry counts), or no limit"),
            "a larger max_attempts",
        ));
    }
    Ok(())
}

fn within_max_backoff(field: &'static str, d: Duration) -> Result<Duration, ConfigError> {
    if d <= MAX_BACKOFF {
        Ok(d)
    } else {
        Err(ConfigError::new(
            field,
            format!("at most {MAX_BACKOFF:?} (2^52 - 1 ns, about 52 days)"),
            format!("{d:?}"),
        ))
    }
}
