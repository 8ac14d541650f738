//! client-go's settings as a value: `initial`, `max`, `jitter`, `seed` and the
//! expiry window, checked in one place.
//!
//! Every builder of the rule (the in-process
//! [`BackoffBuilder`](crate::BackoffBuilder), the Redis store's, the kube
//! crate's) keeps a [`Settings`] and calls [`Settings::validate`] when it
//! builds, so a value refused by one is refused by all, with the same field
//! name and range.

use std::time::Duration;

use crate::entry::MAX_BACKOFF;
use crate::error::{ConfigError, finite_at_least};

/// client-go's settings: doubling from `initial` to `max`, optional jitter, a
/// jitter seed and an expiry window.
///
/// Defaults: no jitter (`0.0`), a random seed, client-go's expiry window
/// (`expire_after` = `2·max`). Nothing is checked until
/// [`validate`](Self::validate), which every builder taking a `Settings`
/// calls: `initial`, `max` and `expire_after` at most [`MAX_BACKOFF`](crate::Settings::MAX_BACKOFF)
/// (about 52 days), `expire_after` above zero, `jitter` a finite number
/// `>= 0`. `initial > max` is allowed, as in client-go (the first backoff
/// is `initial`, uncapped, then `max`), and so are `initial` 0 and `max` 0,
/// which never wait: client-go's recorded traces use both.
///
/// ```
/// use keyed_backoff::{Backoff, Settings};
/// use std::time::{Duration, Instant};
///
/// // The kubelet's CrashLoopBackOff: 10 s doubling to 300 s, forgotten
/// // after 600 s without a restart.
/// let kubelet = Settings::new(Duration::from_secs(10), Duration::from_secs(300))
///     .expire_after(Duration::from_secs(600));
/// let restarts = Backoff::<String>::from_settings(kubelet).build()?;
/// assert_eq!(restarts.next("pod-a", Instant::now()), Duration::from_secs(10));
///
/// let err = Settings::new(Duration::from_secs(1), Duration::from_secs(2))
///     .jitter(-1.0)
///     .validate()
///     .unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    initial: Duration,
    max: Duration,
    jitter: f64,
    seed: Option<u64>,
    expire_after: Option<Duration>,
}

impl Settings {
    /// The largest backoff an entry can hold: 2^52 − 1 ns, about 52 days.
    ///
    /// Builders refuse an `initial`, `max` or `expire_after` above it; a
    /// jittered first value above it is clamped to it.
    ///
    /// ```
    /// use keyed_backoff::{Backoff, Settings};
    /// use std::time::Duration;
    /// let over = Settings::MAX_BACKOFF + Duration::from_nanos(1);
    /// assert_eq!(Backoff::<String>::new(over, over).unwrap_err().field(), "initial");
    /// ```
    pub const MAX_BACKOFF: Duration = MAX_BACKOFF;

    /// The largest attempt count an entry reports (4095); further attempts
    /// saturate here.
    pub const MAX_ATTEMPTS: u32 = crate::entry::MAX_ATTEMPTS;

    /// `initial` doubling to `max`, every other value at its default.
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
    /// previous backoff` before the cap.
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// The seed of the jitter draws, for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Forget an entry once `window` has passed since its last update.
    pub fn expire_after(mut self, window: Duration) -> Self {
        self.expire_after = Some(window);
        self
    }

    /// These settings if every value is in range, else an error naming the
    /// first one that is not.
    ///
    /// ```
    /// use keyed_backoff::Settings;
    /// use std::time::Duration;
    /// let err = Settings::new(Duration::MAX, Duration::from_secs(2)).validate().unwrap_err();
    /// assert_eq!(err.field(), "initial");
    /// assert!(err.to_string().contains("52 days"));
    /// ```
    pub fn validate(self) -> Result<Settings, ConfigError> {
        within_max_backoff("initial", self.initial)?;
        within_max_backoff("max", self.max)?;
        finite_at_least("jitter", self.jitter, 0.0)?;
        check_window(self.expire_after)?;
        Ok(self)
    }

    /// Every value resolved: the expiry window in force (`2·max` unless
    /// set).
    pub(crate) fn resolved(&self) -> Resolved {
        Resolved {
            initial: self.initial,
            max: self.max,
            jitter: self.jitter,
            seed: self.seed,
            expire_after: self.expire_after.unwrap_or(self.max.saturating_mul(2)),
        }
    }

    /// The window if one was set.
    pub(crate) fn window(&self) -> Option<Duration> {
        self.expire_after
    }

    /// The seed if one was set.
    pub(crate) fn seed_value(&self) -> Option<u64> {
        self.seed
    }
}

/// [`Settings`] with every value resolved, as a store that restates the
/// rule (the Redis store's script) needs them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    /// The first backoff.
    pub initial: Duration,
    /// The cap.
    pub max: Duration,
    /// client-go's `maxJitterFactor`.
    pub jitter: f64,
    /// The seed, if one was given.
    pub seed: Option<u64>,
    /// The expiry window in force.
    pub expire_after: Duration,
}

/// `d` if it is at most [`MAX_BACKOFF`](crate::Settings::MAX_BACKOFF) (the largest backoff an entry
/// holds), else an error naming `field`.
pub(crate) fn within_max_backoff(
    field: &'static str,
    d: Duration,
) -> Result<Duration, ConfigError> {
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

/// The expiry window, if set, checked as [`Settings::validate`] checks it
/// (whatever rule the manager follows): a zero window would forget every
/// entry at once, so that no backoff ever grew.
pub(crate) fn check_window(window: Option<Duration>) -> Result<Option<Duration>, ConfigError> {
    match window {
        Some(w) if w.is_zero() => Err(ConfigError::new(
            "expire_after",
            "greater than zero (a zero window forgets every entry at once)",
            "0ns",
        )),
        Some(w) => within_max_backoff("expire_after", w).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn the_window_is_twice_max_unless_set() {
        let s = Settings::new(5 * SEC / 1000, 1000 * SEC)
            .validate()
            .unwrap();
        assert_eq!(s.resolved().expire_after, 2000 * SEC);
        let s = Settings::new(SEC, 8 * SEC).validate().unwrap();
        assert_eq!(s.resolved().expire_after, 16 * SEC);
        let kubelet = Settings::new(10 * SEC, 300 * SEC).expire_after(600 * SEC);
        assert_eq!(
            kubelet.validate().unwrap().resolved().expire_after,
            600 * SEC
        );
        assert_eq!(kubelet.window(), Some(600 * SEC));
        assert_eq!(Settings::new(SEC, 8 * SEC).window(), None);
    }

    #[test]
    fn values_read_back_as_given() {
        let s = Settings::new(10 * SEC, 300 * SEC)
            .jitter(0.1)
            .validate()
            .unwrap();
        let r = s.resolved();
        assert_eq!((r.initial, r.max, r.jitter), (10 * SEC, 300 * SEC, 0.1));
        assert_eq!((r.seed, s.window()), (None, None));
        let seeded = Settings::new(SEC, 2 * SEC).seed(7).validate().unwrap();
        assert_eq!(seeded.resolved().seed, Some(7));
        assert_eq!(Settings::new(SEC, 8 * SEC).resolved().jitter, 0.0);
    }

    #[test]
    fn each_value_out_of_range_is_named() {
        let field = |s: Settings| s.validate().unwrap_err().field();
        assert_eq!(field(Settings::new(SEC, 2 * SEC).jitter(-1.0)), "jitter");
        assert_eq!(
            field(Settings::new(SEC, 2 * SEC).expire_after(Duration::MAX)),
            "expire_after"
        );
        assert_eq!(field(Settings::new(Duration::MAX, 2 * SEC)), "initial");
        assert_eq!(field(Settings::new(SEC, Duration::MAX)), "max");
        let zero = Settings::new(SEC, 2 * SEC).expire_after(Duration::ZERO);
        assert_eq!(field(zero), "expire_after");
        assert!(zero.validate().unwrap_err().to_string().contains("at once"));
        // The smallest window, and client-go's configurations that never
        // wait, are kept.
        assert!(
            Settings::new(SEC, 2 * SEC)
                .expire_after(Duration::from_nanos(1))
                .validate()
                .is_ok()
        );
        assert!(
            Settings::new(Duration::ZERO, Duration::ZERO)
                .validate()
                .is_ok()
        );
        assert!(Settings::new(Duration::ZERO, 8 * SEC).validate().is_ok());
    }
}
