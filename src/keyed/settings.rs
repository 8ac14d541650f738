//! client-go's rule as a value: `initial`, `max`, `jitter`, `seed` and the
//! expiry window, checked in one place.
//!
//! Every builder of the rule (the in-process [`BackoffBuilder`](super::BackoffBuilder),
//! the Redis store's, the kube crate's) keeps a [`Settings`] and calls
//! [`Settings::validate`] when it builds, so a value refused by one is
//! refused by all, with the same field name and range.

use std::time::Duration;

#[cfg(doc)]
use super::entry::MAX_BACKOFF;
use crate::error::{ConfigError, finite_at_least, within_max_backoff};

/// client-go's rule as given: doubling from `initial` to `max`, optional
/// jitter, a jitter seed and an expiry window. Nothing is checked until
/// [`validate`](Self::validate).
///
/// Defaults: no jitter, a random seed, client-go's expiry window (`2·max`).
///
/// ```
/// use keyed_backoff::Settings;
/// use std::time::Duration;
///
/// let kubelet = Settings::new(Duration::from_secs(10), Duration::from_secs(300))
///     .expire_after(Duration::from_secs(600));
/// let valid = kubelet.validate()?;
/// assert_eq!(valid.window(), Duration::from_secs(600));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub(super) initial: Duration,
    pub(super) max: Duration,
    pub(super) jitter: f64,
    pub(super) seed: Option<u64>,
    pub(super) expire_after: Option<Duration>,
}

impl Settings {
    /// `initial` doubling to `max`, no jitter, a random seed, the default
    /// expiry window.
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let s = Settings::new(Duration::from_millis(5), Duration::from_secs(1000));
    /// assert_eq!(s.validate()?.window(), Duration::from_secs(2000));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn new(initial: Duration, max: Duration) -> Self {
        Settings {
            initial,
            max,
            jitter: 0.0,
            seed: None,
            expire_after: None,
        }
    }

    /// client-go's `maxJitterFactor`: each step adds `U[0,1) · jitter ·
    /// previous backoff` before the cap. Default `0.0`; must be finite and
    /// `>= 0`.
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let err = Settings::new(Duration::from_secs(1), Duration::from_secs(2))
    ///     .jitter(-1.0)
    ///     .validate()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "jitter");
    /// ```
    pub fn jitter(mut self, factor: f64) -> Self {
        self.jitter = factor;
        self
    }

    /// The seed of the jitter draws, for reproducible runs. Default: random.
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(2)).seed(7);
    /// assert_eq!(s.validate()?.seed(), Some(7));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Forget an entry once `window` has passed since its last update.
    /// Default `2·max` (client-go's). At most [`MAX_BACKOFF`].
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let err = Settings::new(Duration::from_secs(1), Duration::from_secs(2))
    ///     .expire_after(Duration::MAX)
    ///     .validate()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "expire_after");
    /// ```
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.expire_after = Some(window);
        self
    }

    /// Checks every value, naming the first one out of range: `initial`,
    /// `max` and `expire_after` at most [`MAX_BACKOFF`] (about 52 days),
    /// `jitter` a finite number `>= 0`. `initial > max` is allowed, as in
    /// client-go (the first backoff is `initial`, uncapped).
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let err = Settings::new(Duration::MAX, Duration::from_secs(2)).validate().unwrap_err();
    /// assert_eq!(err.field(), "initial");
    /// assert!(err.to_string().contains("52 days"));
    /// ```
    pub fn validate(self) -> Result<ValidSettings, ConfigError> {
        let initial = within_max_backoff("initial", self.initial)?;
        let max = within_max_backoff("max", self.max)?;
        let jitter = finite_at_least("jitter", self.jitter, 0.0)?;
        let expire_after = check_window(self.expire_after)?;
        Ok(ValidSettings(Settings {
            initial,
            max,
            jitter,
            seed: self.seed,
            expire_after,
        }))
    }
}

/// [`Settings`] that passed [`Settings::validate`]: every value is in range.
///
/// ```
/// use keyed_backoff::Settings;
/// use std::time::Duration;
/// let s = Settings::new(Duration::from_secs(10), Duration::from_secs(300)).jitter(0.1).validate()?;
/// assert_eq!((s.initial(), s.max(), s.jitter()), (Duration::from_secs(10), Duration::from_secs(300), 0.1));
/// assert_eq!(s.expire_after(), None);
/// assert_eq!(s.window(), Duration::from_secs(600));
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidSettings(Settings);

impl ValidSettings {
    /// The first backoff.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).validate()?;
    /// assert_eq!(s.initial(), Duration::from_secs(1));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn initial(&self) -> Duration {
        self.0.initial
    }

    /// The cap.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).validate()?;
    /// assert_eq!(s.max(), Duration::from_secs(8));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn max(&self) -> Duration {
        self.0.max
    }

    /// The jitter factor.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).validate()?;
    /// assert_eq!(s.jitter(), 0.0);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn jitter(&self) -> f64 {
        self.0.jitter
    }

    /// The seed, if one was given.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).validate()?;
    /// assert_eq!(s.seed(), None);
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn seed(&self) -> Option<u64> {
        self.0.seed
    }

    /// The expiry window, if one was set.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8))
    ///     .expire_after(Duration::from_secs(60))
    ///     .validate()?;
    /// assert_eq!(s.expire_after(), Some(Duration::from_secs(60)));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn expire_after(&self) -> Option<Duration> {
        self.0.expire_after
    }

    /// The expiry window in force: the one set, else `2·max`.
    ///
    /// ```
    /// # use keyed_backoff::Settings; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).validate()?;
    /// assert_eq!(s.window(), Duration::from_secs(16));
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn window(&self) -> Duration {
        self.0.expire_after.unwrap_or(self.0.max.saturating_mul(2))
    }

    /// The settings as given, to hand to another builder (the Redis store's
    /// in-process fallback uses the same values, seed included).
    ///
    /// ```
    /// # use keyed_backoff::{Backoff, Settings}; use std::time::Duration;
    /// let s = Settings::new(Duration::from_secs(1), Duration::from_secs(8)).seed(3).validate()?;
    /// let local = Backoff::<String>::from_settings(s.settings()).build()?;
    /// # let _ = local;
    /// # Ok::<(), keyed_backoff::ConfigError>(())
    /// ```
    pub fn settings(&self) -> Settings {
        self.0
    }
}

/// The expiry window, if set, checked as [`Settings::validate`] checks it
/// (whatever rule the manager follows).
pub(super) fn check_window(window: Option<Duration>) -> Result<Option<Duration>, ConfigError> {
    window
        .map(|w| within_max_backoff("expire_after", w))
        .transpose()
}
