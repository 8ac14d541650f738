//! `BackoffBuilder`: every setting of a [`Backoff`](crate::Backoff),
//! validated in one place.

use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;

use crate::clock::{Clock, StdClock};
use crate::entry::{MAX_ATTEMPTS, MAX_BACKOFF};
use crate::error::ConfigError;
use crate::expiry::{Expiry, ExpiryFn};
use crate::gc::Amortized;
use crate::growth::{Formula, Growth};
use crate::hold::Holds;
use crate::settings::{Settings, check_window};
use crate::store::Store;
use crate::strategy::{FactorJitter, Step, Strategy};

/// The hasher used when none is chosen: foldhash's fast hasher, seeded
/// randomly per manager so keys from untrusted input cannot be crafted to
/// collide.
pub(crate) type DefaultHashBuilder = foldhash::fast::RandomState;

/// The shard count used when neither [`BackoffBuilder::shards`] nor
/// [`BackoffBuilder::capacity`] is called.
const DEFAULT_SHARDS: usize = 1024;

/// The most shards a capacity hint picks by default.
const MAX_SIZED_SHARDS: usize = 16_384;

/// Builds a [`Backoff`](crate::Backoff); made by
/// [`Backoff::builder`](crate::Backoff::builder) or
/// [`Backoff::from_settings`](crate::Backoff::from_settings) (client-go's
/// rule) or [`Backoff::with_strategy`](crate::Backoff::with_strategy) (any
/// other).
///
/// Defaults: no jitter (`0.0`), the [`StdClock`], client-go's expiry
/// (`event − last_update > 2·max`), a random jitter seed, the
/// foldhash's fast hasher seeded at random per manager (so keys from
/// untrusted input cannot be crafted to collide), and 1024 shards (about 64 entries per shard,
/// from 64 to 16384, when a [`capacity`](Self::capacity) is given).
/// [`build`](Self::build) checks every value and returns a [`ConfigError`]
/// naming the first one out of range, or the first setting that does not
/// apply: [`jitter`](Self::jitter) with a strategy (which carries its own),
/// or a [`clock`](Self::clock) after a custom [`expiry`](Self::expiry)
/// (which is written for the clock's instant type: set the clock first).
///
/// ```
/// use keyed_backoff::Backoff;
/// use keyed_backoff::clock::{ClockInstant, MockClock, MockInstant};
/// use std::time::Duration;
///
/// // The kubelet's CrashLoopBackOff: 10 s doubling to 300 s, forgotten
/// // after 600 s without a restart.
/// let crashloop = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(MockClock::new())
///     .expire_after(Duration::from_secs(600))
///     .build()?;
/// # let _ = crashloop;
///
/// // A custom expiry is written for the clock's instant: clock first.
/// let custom = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(50))
///     .clock(MockClock::new())
///     .expiry(|event: MockInstant, last: MockInstant, _max| {
///         event.saturating_duration_since(last) > Duration::from_secs(200)
///     })
///     .build()?;
/// # let _ = custom;
/// let late_clock = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(2))
///     .expiry(|_, _, _| false)
///     .clock(MockClock::new())
///     .build();
/// assert_eq!(late_clock.unwrap_err().field(), "clock");
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until .build() is called"]
pub struct BackoffBuilder<K, C: Clock = StdClock, S = DefaultHashBuilder> {
    growth: GrowthSetting,
    clock: C,
    hasher: S,
    /// A custom expiry function; replaces the window when set.
    expiry: Option<ExpiryFn<C::Instant>>,
    shards: Option<usize>,
    capacity: usize,
    amortized_gc: Option<u32>,
    /// The first setting that does not apply, reported by `build`.
    misuse: Option<ConfigError>,
    key: PhantomData<fn() -> K>,
}

/// How the backoff grows, as the constructor chose it.
enum GrowthSetting {
    /// client-go's settings, whole.
    ClientGo(Settings),
    /// Any strategy, with the builder's seed and window.
    Strategy {
        step: Box<dyn Step>,
        strategy_seed: Option<u64>,
        seed: Option<u64>,
        window: Option<Duration>,
    },
}

impl<K, C: Clock, S> fmt::Debug for BackoffBuilder<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("BackoffBuilder");
        match &self.growth {
            GrowthSetting::ClientGo(settings) => d.field("settings", settings),
            GrowthSetting::Strategy {
                step, seed, window, ..
            } => d
                .field("strategy", step)
                .field("seed", seed)
                .field("expire_after", window),
        };
        d.field("custom_expiry", &self.expiry.is_some())
            .field("shards", &self.shards)
            .field("capacity", &self.capacity)
            .field("amortized_gc", &self.amortized_gc)
            .finish_non_exhaustive()
    }
}

/// A built manager's parts, for [`Backoff`](crate::Backoff) to assemble.
pub(crate) struct Parts<K, C: Clock, S> {
    pub(crate) store: Store<K, S>,
    pub(crate) clock: C,
    pub(crate) epoch: C::Instant,
    pub(crate) max: Duration,
    pub(crate) growth: Growth,
    pub(crate) expiry: Expiry<C::Instant>,
    pub(crate) amortized: Option<Amortized>,
    pub(crate) holds: Holds<K, S>,
}

impl<K> BackoffBuilder<K> {
    fn with_growth(growth: GrowthSetting) -> Self {
        BackoffBuilder {
            growth,
            clock: StdClock,
            hasher: DefaultHashBuilder::default(),
            expiry: None,
            shards: None,
            capacity: 0,
            amortized_gc: None,
            misuse: None,
            key: PhantomData,
        }
    }

    /// client-go's settings from `settings`, checked by `build` with the rest.
    pub(crate) fn client_go(settings: Settings) -> Self {
        Self::with_growth(GrowthSetting::ClientGo(settings))
    }

    /// Any strategy's rule.
    pub(crate) fn strategy<St: Step + Clone>(strategy: Strategy<St>) -> Self {
        Self::with_growth(GrowthSetting::Strategy {
            strategy_seed: strategy.seed_value(),
            step: Box::new(strategy),
            seed: None,
            window: None,
        })
    }
}

impl<K, C: Clock, S> BackoffBuilder<K, C, S> {
    /// The clock to read; changes the builder's clock type. Set it before a
    /// custom [`expiry`](Self::expiry).
    pub fn clock<C2: Clock>(self, clock: C2) -> BackoffBuilder<K, C2, S> {
        let misuse = self.misuse.or_else(|| {
            self.expiry.is_some().then(|| {
                ConfigError::new(
                    "clock",
                    "set before .expiry(..), which is written for the clock's instant type",
                    "a clock set after the expiry",
                )
            })
        });
        BackoffBuilder {
            growth: self.growth,
            clock,
            hasher: self.hasher,
            expiry: None,
            shards: self.shards,
            capacity: self.capacity,
            amortized_gc: self.amortized_gc,
            misuse,
            key: PhantomData,
        }
    }

    /// client-go's `maxJitterFactor`: each step adds `U[0,1) · jitter ·
    /// previous backoff` before the cap. client-go's strategy only: a strategy
    /// carries its own jitter.
    pub fn jitter(mut self, jitter: f64) -> Self {
        match &mut self.growth {
            GrowthSetting::ClientGo(settings) => *settings = settings.jitter(jitter),
            GrowthSetting::Strategy { .. } => {
                self.misuse.get_or_insert_with(|| {
                    ConfigError::new(
                        "jitter",
                        "client-go's strategy only (a strategy carries its own jitter)",
                        jitter,
                    )
                });
            }
        }
        self
    }

    /// Seed for the jitter draws, for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        match &mut self.growth {
            GrowthSetting::ClientGo(settings) => *settings = settings.seed(seed),
            GrowthSetting::Strategy { seed: s, .. } => *s = Some(seed),
        }
        self
    }

    /// A custom expiry, client-go's `HasExpiredFunc`: called with
    /// `(event_time, last_update, max)`, returns whether the entry is stale.
    /// The same function decides in `next`, both checks and `gc` (where the
    /// event time is the clock's now).
    ///
    /// The contract: the function runs while the manager holds the key's
    /// shard lock (a write lock in `next`, `try_next` and `gc`, a read lock
    /// in the checks and views), so it must be quick and must not call the
    /// same manager: such a call panics with a message saying so, instead
    /// of deadlocking. A panic in the function reaches the caller of a
    /// direct call, and the manager stays usable; in background or
    /// amortised GC it is contained and counted in
    /// [`Stats::gc_panics`](crate::Stats::gc_panics).
    pub fn expiry<F>(mut self, has_expired: F) -> Self
    where
        F: Fn(C::Instant, C::Instant, Duration) -> bool + Send + Sync + 'static,
    {
        self.expiry = Some(Arc::new(has_expired));
        self
    }

    /// Expiry after a fixed window: stale when `event − last_update >
    /// window`, whatever `max` is. Cheaper than an equivalent
    /// [`expiry`](Self::expiry) closure, which it replaces.
    pub fn expire_after(mut self, window: Duration) -> Self {
        match &mut self.growth {
            GrowthSetting::ClientGo(settings) => *settings = settings.expire_after(window),
            GrowthSetting::Strategy { window: w, .. } => *w = Some(window),
        }
        self.expiry = None;
        self
    }

    /// The hasher for keys; changes the builder's hasher type.
    pub fn hasher<S2: BuildHasher + Clone>(self, hasher: S2) -> BackoffBuilder<K, C, S2> {
        BackoffBuilder {
            growth: self.growth,
            clock: self.clock,
            hasher,
            expiry: self.expiry,
            shards: self.shards,
            capacity: self.capacity,
            amortized_gc: self.amortized_gc,
            misuse: self.misuse,
            key: PhantomData,
        }
    }

    /// Number of lock shards: a power of two from 2 to 65536.
    ///
    /// `gc` locks one shard at a time, so more shards mean shorter waits
    /// for readers during a sweep of a large map; every shard is a lock and
    /// a table of its own (128 bytes even when empty), so a small map
    /// spread over many shards touches more memory per call.
    /// `docs/benchmarks.md` measures both sides.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// Opt-in amortised GC for users who run no GC task: every `every`-th
    /// write (`next`, `try_next`) also runs [`Backoff::gc`](crate::Backoff::gc)
    /// (one sweeper at a time; others skip it). `every` must be at least 1.
    ///
    /// The sweep locks one shard at a time, so readers are not stalled, but
    /// the calling thread pays for the whole sweep; prefer
    /// [`Backoff::spawn_gc`](crate::Backoff::spawn_gc) for large maps.
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
        self.amortized_gc = Some(every);
        self
    }

    /// Entries to make room for up front, which also sizes the default
    /// number of [`shards`](Self::shards).
    pub fn capacity(mut self, entries: usize) -> Self {
        self.capacity = entries;
        self
    }

    /// Checks every setting and makes the manager's parts.
    pub(crate) fn into_parts(self) -> Result<Parts<K, C, S>, ConfigError>
    where
        K: Hash + Eq + Clone,
        S: BuildHasher + Clone,
    {
        if let Some(misuse) = self.misuse {
            return Err(misuse);
        }
        let shards = self.shards.unwrap_or_else(|| default_shards(self.capacity));
        if !(shards.is_power_of_two() && (2..=65_536).contains(&shards)) {
            return Err(ConfigError::new(
                "shards",
                "a power of two from 2 to 65536",
                shards,
            ));
        }
        let (formula, max, seed, window) = match self.growth {
            GrowthSetting::ClientGo(settings) => {
                let rule = settings.validate()?.resolved();
                let formula = FactorJitter::new(rule.initial, rule.max).jitter(rule.jitter);
                (
                    Formula::ClientGo(formula),
                    rule.max,
                    settings.seed_value(),
                    settings.window(),
                )
            }
            GrowthSetting::Strategy {
                step,
                strategy_seed,
                seed,
                window,
            } => {
                check_attempt_limit(step.as_ref())?;
                let window = check_window(window)?;
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
                (
                    Formula::Strategy(step),
                    max.min(MAX_BACKOFF),
                    seed.or(strategy_seed),
                    window,
                )
            }
        };
        let amortized = match self.amortized_gc {
            Some(0) => return Err(ConfigError::new("amortized_gc", "at least 1", 0)),
            every => every.map(Amortized::new),
        };
        let holds = Holds::new(self.hasher.clone(), shards);
        let map =
            DashMap::with_capacity_and_hasher_and_shard_amount(self.capacity, self.hasher, shards);
        let seed = seed.unwrap_or_else(rand::random);
        let epoch = self.clock.now();
        let expiry = match (self.expiry, window) {
            (Some(expired), _) => Expiry::Custom {
                expired,
                epoch,
                max,
            },
            (None, Some(window)) => Expiry::after(window),
            (None, None) => Expiry::twice_max(max),
        };
        Ok(Parts {
            store: Store::new(map, shards),
            clock: self.clock,
            epoch,
            max,
            growth: Growth::new(formula, seed),
            expiry,
            amortized,
            holds,
        })
    }
}

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
/// ([`MAX_ATTEMPTS`](crate::Settings::MAX_ATTEMPTS)); otherwise it would never give up.
fn check_attempt_limit(step: &dyn Step) -> Result<(), ConfigError> {
    let unit = &mut || 0.5;
    if step.delay(0, None, unit).is_none() {
        return Err(ConfigError::new(
            "strategy",
            "a strategy that gives at least one delay (max_attempts >= 1)",
            "max_attempts(0)",
        ));
    }
    let beyond = step.delay(MAX_ATTEMPTS, None, unit).is_some();
    if beyond && step.delay(u32::MAX, None, unit).is_none() {
        return Err(ConfigError::new(
            "strategy",
            format!(
                "max_attempts at most {MAX_ATTEMPTS} (the attempts an entry counts), or no limit"
            ),
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
        assert_eq!(DEFAULT_SHARDS, 1024);
        assert_eq!(default_shards(0), DEFAULT_SHARDS);
        assert_eq!(default_shards(1), 64);
        assert_eq!(default_shards(1_000), 64);
        assert_eq!(default_shards(10_000), 256);
        assert_eq!(default_shards(65_536), 1024);
        assert_eq!(default_shards(1_000_000), 16_384);
        assert_eq!(default_shards(usize::MAX), 16_384);
    }
}
