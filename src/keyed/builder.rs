//! `BackoffBuilder`: every setting of a [`Backoff`], validated in one place.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;

use super::entry::MAX_BACKOFF;
use super::expiry::{Expiry, ExpiryFn};
use super::rule::{Formula, Rule};
use super::settings::{Settings, check_window};
use super::store::Store;
use super::{Backoff, DefaultHashBuilder};
use crate::clock::{Clock, DefaultClock};
use crate::error::ConfigError;
use crate::strategy::{FactorJitter, Step, Strategy};

/// Builds a [`Backoff`]; made by [`Backoff::builder`] (client-go's rule) or
/// [`Backoff::with_strategy`] (any other).
///
/// The rule is chosen once, by the constructor, and the type says which:
/// `R` is [`ClientGoRule`] or [`StrategyRule`]. Only client-go's rule has a
/// [`jitter`](Self::jitter) setting; a strategy carries its own.
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
pub struct BackoffBuilder<
    K,
    C: Clock = DefaultClock,
    S = DefaultHashBuilder,
    T = ClockOpen,
    R = ClientGoRule,
> {
    settings: BuilderSettings,
    clock: C,
    hasher: S,
    /// A custom expiry function; replaces `settings.window` when set.
    expiry: Option<ExpiryFn<C::Instant>>,
    types: Markers<K, T, R>,
}

impl<K, C: Clock, S, T, R> fmt::Debug for BackoffBuilder<K, C, S, T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.settings;
        let mut d = f.debug_struct("BackoffBuilder");
        match &s.rule {
            RuleSetting::ClientGo(rule) => d.field("rule", rule),
            RuleSetting::Strategy { step, .. } => d.field("strategy", step),
        };
        d.field("seed", &s.seed)
            .field("expire_after", &s.window)
            .field("custom_expiry", &self.expiry.is_some())
            .field("shards", &s.shards)
            .field("capacity", &s.capacity)
            .field("amortized_gc", &s.amortized_gc)
            .finish_non_exhaustive()
    }
}

/// The key type and the two type states, held without owning any.
type Markers<K, T, R> = PhantomData<fn() -> (K, T, R)>;

/// The settings whose types do not depend on the clock or the hasher, so a
/// builder that changes type carries them over as one value.
struct BuilderSettings {
    rule: RuleSetting,
    seed: Option<u64>,
    /// A fixed expiry window; `None`: twice the largest delay.
    window: Option<Duration>,
    shards: Option<usize>,
    capacity: usize,
    amortized_gc: Option<u32>,
}

/// The rule as chosen by the constructor.
enum RuleSetting {
    /// client-go's: `initial`, `max` and the jitter factor. Its `seed` and
    /// `expire_after` are always `None`: the builder holds them for every
    /// rule, and `build` puts them back before validating.
    ClientGo(Settings),
    /// Any strategy, with its own seed if it has one.
    Strategy {
        step: Box<dyn Step>,
        seed: Option<u64>,
    },
}

/// Rule state of a builder made by [`Backoff::builder`]: client-go's
/// doubling rule, whose jitter factor [`BackoffBuilder::jitter`] sets.
///
/// ```
/// use keyed_backoff::{Backoff, BackoffBuilder, ClientGoRule, ClockOpen};
/// let _b: BackoffBuilder<String, _, _, ClockOpen, ClientGoRule> =
///     Backoff::<String>::builder(std::time::Duration::from_secs(1), std::time::Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ClientGoRule;

/// Rule state of a builder made by [`Backoff::with_strategy`]: the
/// strategy decides every delay, so there is no `jitter` setting.
///
/// ```compile_fail
/// use keyed_backoff::Backoff;
/// use keyed_backoff::strategy::{Constant, Strategy};
/// use std::time::Duration;
/// let s = Strategy::new(Constant::new(Duration::from_secs(1))).unwrap();
/// let _ = Backoff::<String>::with_strategy(s).jitter(0.1); // error: no jitter here
/// ```
#[derive(Debug, Clone, Copy)]
pub struct StrategyRule;

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

impl<K, R> BackoffBuilder<K, DefaultClock, DefaultHashBuilder, ClockOpen, R> {
    fn with_rule(rule: RuleSetting) -> Self {
        BackoffBuilder {
            settings: BuilderSettings {
                rule,
                seed: None,
                window: None,
                shards: None,
                capacity: 0,
                amortized_gc: None,
            },
            clock: DefaultClock::default(),
            hasher: DefaultHashBuilder::default(),
            expiry: None,
            types: PhantomData,
        }
    }
}

impl<K> BackoffBuilder<K> {
    /// client-go's rule from `settings`: its seed and window become the
    /// builder's, checked by [`build`](Self::build) with the rest.
    pub(crate) fn client_go(settings: Settings) -> Self {
        // The seed and the window are the builder's, whatever the rule: move
        // them out, so that the rule keeps only `initial`, `max`, `jitter`
        // and nothing is held twice.
        let rule = Settings {
            seed: None,
            expire_after: None,
            ..settings
        };
        let mut builder = Self::with_rule(RuleSetting::ClientGo(rule));
        builder.settings.seed = settings.seed;
        builder.settings.window = settings.expire_after;
        builder
    }
}

impl<K> BackoffBuilder<K, DefaultClock, DefaultHashBuilder, ClockOpen, StrategyRule> {
    pub(crate) fn strategy<St: Step + Clone>(strategy: Strategy<St>) -> Self {
        let seed = strategy.seed_value();
        Self::with_rule(RuleSetting::Strategy {
            step: Box::new(strategy),
            seed,
        })
    }
}

impl<K, C: Clock, S, R> BackoffBuilder<K, C, S, ClockOpen, R> {
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
    pub fn clock<C2: Clock>(self, clock: C2) -> BackoffBuilder<K, C2, S, ClockOpen, R> {
        // A fixed window is a setting and carries over; a custom expiry
        // cannot be set yet (`expiry` moves the builder to `ClockFixed`).
        BackoffBuilder {
            settings: self.settings,
            clock,
            hasher: self.hasher,
            expiry: None,
            types: PhantomData,
        }
    }
}

impl<K, C: Clock, S, T> BackoffBuilder<K, C, S, T, ClientGoRule> {
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
        if let RuleSetting::ClientGo(settings) = &mut self.settings.rule {
            settings.jitter = factor;
        }
        self
    }
}

impl<K, C: Clock, S, T, R> BackoffBuilder<K, C, S, T, R> {
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
    pub fn expiry<F>(mut self, has_expired: F) -> BackoffBuilder<K, C, S, ClockFixed, R>
    where
        F: Fn(C::Instant, C::Instant, Duration) -> bool + Send + Sync + 'static,
    {
        self.settings.window = None;
        BackoffBuilder {
            settings: self.settings,
            clock: self.clock,
            hasher: self.hasher,
            expiry: Some(Arc::new(has_expired)),
            types: PhantomData,
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
        self.settings.window = Some(window);
        self.expiry = None;
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
    pub fn hasher<S2: BuildHasher + Clone>(self, hasher: S2) -> BackoffBuilder<K, C, S2, T, R> {
        BackoffBuilder {
            settings: self.settings,
            clock: self.clock,
            hasher,
            expiry: self.expiry,
            types: PhantomData,
        }
    }

    /// Number of lock shards: a power of two from 2 to 65536. Default: sized
    /// for the [`capacity`](Self::capacity) given, about 64 entries per
    /// shard, from 64 to 16384; without a capacity, [`DEFAULT_SHARDS`]
    /// (1024).
    ///
    /// `gc` locks one shard at a time, so the longest a reader can wait on it
    /// is one shard's sweep: with 1,000,000 entries, 1024 shards keep reader
    /// p99.9 latency under 3 µs during continuous GC where 8 shards give
    /// over a millisecond (`docs/benchmarks.md`). Shards of at most 128
    /// entries on average are swept in place, several times faster than
    /// larger ones, which are swept key by key. But every shard is a lock
    /// and a table of its own, so a small map spread over many shards touches
    /// more memory per call: at 1,000 keys, `next` costs about a fifth more
    /// with 1024 shards than with 16. Each shard costs 128 bytes even when
    /// empty.
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

    /// Entries to make room for up front, which also sizes the default
    /// number of [`shards`](Self::shards). Default 0.
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
    /// 2..=65536; a strategy that gives no delay, or gives up only beyond
    /// [`MAX_ATTEMPTS`](crate::MAX_ATTEMPTS); a strategy with unbounded
    /// delays and no [`expire_after`](Self::expire_after) window.
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
        let shards = settings
            .shards
            .unwrap_or_else(|| default_shards(settings.capacity));
        let map = match shards {
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
        let (formula, max, strategy_seed, window) = match settings.rule {
            RuleSetting::ClientGo(rule) => {
                let valid = Settings {
                    seed: settings.seed,
                    expire_after: settings.window,
                    ..rule
                }
                .validate()?;
                let (max, window) = (valid.max(), valid.expire_after());
                let rule = FactorJitter::new(valid.initial(), max).factor(valid.jitter());
                (Formula::ClientGo(rule), max, None, window)
            }
            RuleSetting::Strategy { step, seed } => {
                check_attempt_limit(step.as_ref())?;
                let window = check_window(settings.window)?;
                let max = step.max_delay();
                if max > MAX_BACKOFF && window.is_none() && self.expiry.is_none() {
                    return Err(ConfigError::new(
                        "expire_after",
                        format!(
                            "a window, for a strategy whose delays are unbounded or above {MAX_BACKOFF:?} (the default, 2 x the largest delay, would keep entries forever)"
                        ),
                        format!("max_delay {max:?}"),
                    ));
                }
                (Formula::Strategy(step), max.min(MAX_BACKOFF), seed, window)
            }
        };
        if settings.amortized_gc == Some(0) {
            return Err(ConfigError::new("amortized_gc", "at least 1", 0));
        }
        let seed = settings.seed.or(strategy_seed).unwrap_or_else(rand::random);
        let epoch = self.clock.now();
        Ok(Backoff {
            store: Store::new(map, shards, settings.amortized_gc),
            rule: Rule::new(formula, seed),
            clock: self.clock,
            epoch,
            max,
            expiry: match (self.expiry, window) {
                (Some(custom), _) => Expiry::Custom(custom),
                (None, Some(window)) => Expiry::after(window),
                (None, None) => Expiry::twice_max(max),
            },
        })
    }
}

/// The shard count used when [`BackoffBuilder::shards`] is not called.
///
/// ```
/// assert_eq!(keyed_backoff::DEFAULT_SHARDS, 1024);
/// ```
pub const DEFAULT_SHARDS: usize = 1024;

/// The most shards a capacity hint picks by default.
const MAX_SIZED_SHARDS: usize = 16_384;

/// The shard count for a map expected to hold `capacity` entries: about 64
/// per shard, from 64 (so two threads rarely meet on one lock) to
/// [`MAX_SIZED_SHARDS`]; [`DEFAULT_SHARDS`] without a capacity.
fn default_shards(capacity: usize) -> usize {
    if capacity == 0 {
        return DEFAULT_SHARDS;
    }
    (capacity / 64)
        .checked_next_power_of_two()
        .unwrap_or(MAX_SIZED_SHARDS)
        .clamp(64, MAX_SIZED_SHARDS)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_shard_count_follows_the_capacity() {
        assert_eq!(default_shards(0), DEFAULT_SHARDS);
        assert_eq!(default_shards(1), 64);
        assert_eq!(default_shards(1_000), 64);
        assert_eq!(default_shards(10_000), 256);
        assert_eq!(default_shards(65_536), 1024);
        assert_eq!(default_shards(1_000_000), 16_384);
        assert_eq!(default_shards(usize::MAX), 16_384);
    }
}
