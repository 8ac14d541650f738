//! The knobs of outage-aware backoff, checked in one place.

use std::time::Duration;

use keyed_backoff::ConfigError;

/// The shortest detection window and ladder step accepted: one millisecond.
const SHORTEST: Duration = Duration::from_millis(1);
/// The longest detection window accepted: one hour.
const LONGEST_WINDOW: Duration = Duration::from_secs(3600);
/// The longest step of the outage ladder accepted: ten minutes.
const LONGEST_STEP: Duration = Duration::from_secs(600);
/// The most keys an outage may need to see fail (the detector remembers
/// the time of each of the latest ones).
const MOST_KEYS: u32 = 100_000;
/// The most domains tracked at once.
const MOST_DOMAINS: u32 = 10_000;
/// The fastest release accepted: a million keys per second.
const FASTEST_RELEASE: f64 = 1_000_000.0;

/// When many keys failing at once count as one outage, how keys wait during
/// it, and how they are let go when it ends.
///
/// Outage awareness is a wrapper, [`OutageAware`](crate::OutageAware),
/// made with these settings over any keyed backoff; the backoff under it
/// keeps client-go's semantics exactly.
/// `docs/outage.md` explains the rule in full.
///
/// | setting | default | what it decides |
/// |---|---|---|
/// | [`detection_window`](Self::detection_window) | 30 s | the longest span of the fresh failures that declare an outage |
/// | [`min_failing_keys`](Self::min_failing_keys) | 20 | distinct keys that must newly fail within the detection window |
/// | [`max_success_ratio`](Self::max_success_ratio) | 0.1 | the largest share of successes that still looks like an outage |
/// | [`recovery_successes`](Self::recovery_successes) | 2 | successes in a row that end an outage |
/// | [`ladder`](Self::ladder) | 1 s doubling to 4 s | the one wait every parked key shares |
/// | [`probes`](Self::probes) | 3 per step | keys that may try the dependency per step of the ladder |
/// | [`release_rate`](Self::release_rate) | 200 keys/s | how fast parked keys are let go after recovery |
/// | [`max_domains`](Self::max_domains) | 64 | domains tracked at once, each with an outage of its own ([`OutageAware::domains`](crate::OutageAware::domains)) |
///
/// Why these defaults:
///
/// - **An outage is declared when at least 20 keys newly fail within 30 s
///   while at most one outcome in ten succeeds.** A key *newly* fails when
///   its failure starts its ladder (no entry, or an expired one), and keys
///   are told apart: a key that keeps failing for its own reason counts
///   once, so a few broken objects retrying on their ladders never add up
///   to an outage, however long they fail. Twenty keys is more than the handful of objects a bad
///   edit usually breaks, and few enough that a controller of a hundred
///   objects sees its outages. Thirty seconds is long enough for a
///   controller reconciling a key per second to collect twenty failures,
///   and the one-in-ten share lets an outage be seen even when a few keys
///   do not depend on what is down.
/// - **Two successes in a row end it**: one success can be a call that was
///   already on its way before the dependency failed; two in a row without
///   a failure between them are seldom a coincidence.
/// - **The ladder climbs from 1 s to 4 s and three keys probe per step**:
///   during an outage, the dependency sees about three attempts every four
///   seconds however many keys wait, and the first success comes at most
///   one step (4 s) after the dependency is back.
/// - **200 keys a second** lets a thousand parked keys go in five seconds
///   (client-go's workqueue limiter, ten a second, needs 100 s), while no
///   second sees more than 200 of them.
///
/// What the rule can mistake for an outage: twenty or more keys that start
/// failing on their own within the detection window while nothing else succeeds (a
/// quiet controller whose healthy objects are not being reconciled, and a
/// bad rollout that breaks many objects at once). Those keys then wait on
/// the short outage ladder instead of climbing their own, and the first
/// successes of any key end it.
///
/// ```
/// use keyed_backoff_outage::OutageSettings;
/// use std::time::Duration;
///
/// let settings = OutageSettings::new()
///     .min_failing_keys(50)
///     .release_rate(100.0)
///     .validate()?;
/// assert_eq!(settings, OutageSettings::default().min_failing_keys(50).release_rate(100.0));
///
/// let err = OutageSettings::new().ladder(Duration::from_secs(5), Duration::from_secs(1)).validate().unwrap_err();
/// assert_eq!(err.field(), "outage.initial");
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutageSettings {
    pub(crate) detection_window: Duration,
    pub(crate) min_failing_keys: u32,
    pub(crate) max_success_ratio: f64,
    pub(crate) recovery_successes: u32,
    pub(crate) initial: Duration,
    pub(crate) max: Duration,
    pub(crate) probes: Option<u32>,
    pub(crate) release_rate: f64,
    pub(crate) seed: Option<u64>,
    pub(crate) max_domains: u32,
}

impl Default for OutageSettings {
    fn default() -> Self {
        OutageSettings {
            detection_window: Duration::from_secs(30),
            min_failing_keys: 20,
            max_success_ratio: 0.1,
            recovery_successes: 2,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(4),
            probes: Some(3),
            release_rate: 200.0,
            seed: None,
            max_domains: 64,
        }
    }
}

impl OutageSettings {
    /// The defaults (see the table above).
    pub fn new() -> Self {
        Self::default()
    }

    /// The longest time the latest `min_failing_keys` fresh failures may
    /// be spread over and still declare an outage: 1 ms to 1 h.
    pub fn detection_window(mut self, window: Duration) -> Self {
        self.detection_window = window;
        self
    }

    /// How many keys must newly fail within the detection window: 2 to 100,000.
    pub fn min_failing_keys(mut self, keys: u32) -> Self {
        self.min_failing_keys = keys;
        self
    }

    /// The largest share of successes, among the outcomes since the first
    /// of the latest `min_failing_keys` fresh failures, that still counts
    /// as an outage: at least 0 and below 1.
    pub fn max_success_ratio(mut self, ratio: f64) -> Self {
        self.max_success_ratio = ratio;
        self
    }

    /// How many successes in a row, with no counted failure between them,
    /// end an outage: at least 1.
    pub fn recovery_successes(mut self, successes: u32) -> Self {
        self.recovery_successes = successes;
        self
    }

    /// The shared ladder parked keys wait on: steps from `initial` doubling
    /// to `max`. `initial` at least 1 ms and at most `max`; `max` at most
    /// 10 minutes (a parked key checks back at least once every two steps, so
    /// this bounds how late it learns the outage is over).
    pub fn ladder(mut self, initial: Duration, max: Duration) -> Self {
        self.initial = initial;
        self.max = max;
        self
    }

    /// How many parked keys may try the dependency per step of the ladder:
    /// `Some(n)` with `n >= 1`, or `None` for every parked key once per step.
    /// Only callers that ask before they try (the gate, `remaining`,
    /// `is_in_backoff_since`) are kept back; a key that tries anyway is
    /// told to wait for the next step.
    pub fn probes(mut self, probes: Option<u32>) -> Self {
        self.probes = probes;
        self
    }

    /// How many parked keys per second are let go after an outage: above 0,
    /// at most 1,000,000. Keys are let go one at a time in the order they
    /// ask, never more than this many in any second; the attempts the
    /// outage let through in its last second (the probes that found the
    /// dependency back) count against the release's first.
    pub fn release_rate(mut self, keys_per_second: f64) -> Self {
        self.release_rate = keys_per_second;
        self
    }

    /// The seed that spreads the keys' slots over each step of the ladder:
    /// a fixed seed gives every run the same slots (tests, simulations).
    /// Random by default for an [`OutageAware`](crate::OutageAware); a
    /// fleet's outage in keyed-backoff-redis (`RedisBackoff::outage_aware`)
    /// derives it from the store's prefix instead, so that every replica
    /// on that prefix places each key's slots alike.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The most domains tracked at once (1 to 10,000), each with an outage
    /// of its own: the dependencies failures name
    /// ([`OutageAware::domains`](crate::OutageAware::domains)). At the cap,
    /// a new domain takes the place of the one idle longest with no outage
    /// under way; if every tracked domain has one, the new domain is not
    /// tracked and its failures count in the outage of everything alone.
    pub fn max_domains(mut self, domains: u32) -> Self {
        self.max_domains = domains;
        self
    }

    /// Checks every value, naming the first one out of range (field names
    /// are prefixed with `outage.`).
    ///
    /// ```
    /// use keyed_backoff_outage::OutageSettings;
    /// let err = OutageSettings::new().max_success_ratio(1.0).validate().unwrap_err();
    /// assert_eq!(err.field(), "outage.max_success_ratio");
    /// assert_eq!(err.to_string(), "invalid outage.max_success_ratio: must be a finite number >= 0 and < 1, got 1");
    /// ```
    pub fn validate(self) -> Result<Self, ConfigError> {
        let window = self.detection_window;
        if !(SHORTEST..=LONGEST_WINDOW).contains(&window) {
            return Err(ConfigError::new(
                "outage.detection_window",
                "between 1ms and 1h",
                format!("{window:?}"),
            ));
        }
        if !(2..=MOST_KEYS).contains(&self.min_failing_keys) {
            return Err(ConfigError::new(
                "outage.min_failing_keys",
                "between 2 and 100000",
                self.min_failing_keys,
            ));
        }
        let ratio = self.max_success_ratio;
        if !(ratio.is_finite() && (0.0..1.0).contains(&ratio)) {
            return Err(ConfigError::new(
                "outage.max_success_ratio",
                "a finite number >= 0 and < 1",
                ratio,
            ));
        }
        if self.recovery_successes < 1 {
            return Err(ConfigError::new(
                "outage.recovery_successes",
                "at least 1",
                self.recovery_successes,
            ));
        }
        let (initial, max) = (self.initial, self.max);
        if !(SHORTEST..=LONGEST_STEP).contains(&max) {
            return Err(ConfigError::new(
                "outage.max",
                "between 1ms and 10m",
                format!("{max:?}"),
            ));
        }
        if !(SHORTEST..=max).contains(&initial) {
            return Err(ConfigError::new(
                "outage.initial",
                format!("between 1ms and outage.max ({max:?})"),
                format!("{initial:?}"),
            ));
        }
        if self.probes == Some(0) {
            return Err(ConfigError::new(
                "outage.probes",
                "at least 1, or None for every parked key",
                0,
            ));
        }
        if !(1..=MOST_DOMAINS).contains(&self.max_domains) {
            return Err(ConfigError::new(
                "outage.max_domains",
                "between 1 and 10000",
                self.max_domains,
            ));
        }
        let rate = self.release_rate;
        if !(rate.is_finite() && rate > 0.0 && rate <= FASTEST_RELEASE) {
            return Err(ConfigError::new(
                "outage.release_rate",
                "a finite number > 0 and <= 1000000 keys per second",
                rate,
            ));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(s: OutageSettings) -> &'static str {
        s.validate().expect_err("out of range").field()
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(OutageSettings::new().validate(), Ok(OutageSettings::new()));
    }

    #[test]
    fn every_field_is_checked_at_its_bounds() {
        let s = OutageSettings::new;
        let ms = Duration::from_millis;
        // Window: 1 ms ..= 1 h.
        assert!(s().detection_window(ms(1)).validate().is_ok());
        assert!(
            s().detection_window(Duration::from_secs(3600))
                .validate()
                .is_ok()
        );
        assert_eq!(
            field(s().detection_window(Duration::from_micros(999))),
            "outage.detection_window"
        );
        assert_eq!(
            field(s().detection_window(Duration::from_secs(3601))),
            "outage.detection_window"
        );
        // Keys: at least 2.
        assert!(s().min_failing_keys(2).validate().is_ok());
        assert!(s().min_failing_keys(100_000).validate().is_ok());
        assert_eq!(field(s().min_failing_keys(1)), "outage.min_failing_keys");
        assert_eq!(
            field(s().min_failing_keys(100_001)),
            "outage.min_failing_keys"
        );
        // Ratio: [0, 1), finite.
        assert!(s().max_success_ratio(0.0).validate().is_ok());
        for bad in [1.0, -0.1, f64::NAN, f64::INFINITY] {
            assert_eq!(
                field(s().max_success_ratio(bad)),
                "outage.max_success_ratio"
            );
        }
        // Successes: at least 1.
        assert!(s().recovery_successes(1).validate().is_ok());
        assert_eq!(
            field(s().recovery_successes(0)),
            "outage.recovery_successes"
        );
        // Ladder: 1 ms <= initial <= max <= 10 min.
        assert!(s().ladder(ms(1), ms(1)).validate().is_ok());
        assert!(
            s().ladder(ms(1), Duration::from_secs(600))
                .validate()
                .is_ok()
        );
        assert_eq!(
            field(s().ladder(ms(1), Duration::from_secs(601))),
            "outage.max"
        );
        assert_eq!(field(s().ladder(Duration::ZERO, ms(10))), "outage.initial");
        assert_eq!(field(s().ladder(ms(11), ms(10))), "outage.initial");
        assert_eq!(field(s().ladder(ms(1), Duration::ZERO)), "outage.max");
        // Probes: None or at least 1.
        assert!(s().probes(None).validate().is_ok());
        assert!(s().probes(Some(1)).validate().is_ok());
        assert_eq!(field(s().probes(Some(0))), "outage.probes");
        // Release rate: (0, 1e6], finite.
        assert!(s().release_rate(1e6).validate().is_ok());
        assert!(s().release_rate(0.01).validate().is_ok());
        for bad in [0.0, -1.0, 1e6 + 1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(field(s().release_rate(bad)), "outage.release_rate");
        }
        // Domains: 1 to 10,000.
        assert!(s().max_domains(1).validate().is_ok());
        assert!(s().max_domains(10_000).validate().is_ok());
        assert_eq!(field(s().max_domains(0)), "outage.max_domains");
        assert_eq!(field(s().max_domains(10_001)), "outage.max_domains");
    }

    #[test]
    fn messages_name_the_range_and_the_value() {
        let err = OutageSettings::new()
            .ladder(Duration::from_secs(2), Duration::from_secs(1))
            .validate()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid outage.initial: must be between 1ms and outage.max (1s), got 2s"
        );
    }
}
