//! [`OutageAware`]: outage awareness as a wrapper over any [`Gate`].

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::observe;
use crate::parked::parked_failure;
use crate::settings::OutageSettings;
use crate::status::OutageStatus;
use crate::watch::{Asked, Ruling, Watch};
use keyed_backoff::Advanced;
use keyed_backoff::Gate;
use keyed_backoff::clock::{Clock, ClockInstant, StdClock};
use keyed_backoff::{ConfigError, InBackoff};

/// A keyed backoff that tells a shared outage from keys failing on their
/// own: any [`Gate`] (the in-process [`Backoff`](keyed_backoff::Backoff), a store
/// shared by a fleet) wrapped with [`OutageSettings`].
///
/// It implements [`Gate`] itself, so whatever takes a gate (the tower
/// layer, the kube crate) takes it too. What it adds, only through the
/// gate's own calls:
///
/// - **Detection**: when many keys newly fail within the detection window
///   while (almost) nothing succeeds, an outage is declared; successes in
///   a row end it.
/// - **Parking**: during an outage no key's own ladder climbs. Every key
///   a caller asks about ([`claim`](Gate::claim)) or reports failing
///   ([`fail`](Gate::fail)) is parked on one shared ladder, at a slot of
///   its own in each step, and only [`probes`](OutageSettings::probes)
///   keys per step may try the dependency.
/// - **Release**: once the outage ends, parked keys are let go at most
///   [`release_rate`](OutageSettings::release_rate) a second, each back
///   at its own level from before the outage (through
///   [`Gate::resume`] if its entry was forgotten meanwhile).
///
/// [`wait`](Gate::wait) only reads: it reports the wait a parked key (or
/// a key that would be parked) is given, and takes no turn. A key's own
/// wait, its backoff or its floor (`Retry-After`), always comes first: a
/// key that the backoff under it refuses is refused, on its turn too.
///
/// Outside an outage a success or a failure that continues a key's ladder
/// costs one atomic add; a failure that starts a ladder takes a short
/// lock. `docs/outage.md` explains the rule and its measurements.
///
/// ```
/// use keyed_backoff::{Backoff, Gate};
/// use keyed_backoff_outage::{OutageAware, OutageSettings};
/// use keyed_backoff::clock::{Clock, MockClock};
/// use std::time::Duration;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
/// # }
/// let clock = MockClock::new();
/// let backoff = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(clock.clone())
///     .build()?;
/// let gate = OutageAware::with_clock(backoff, OutageSettings::new().min_failing_keys(3), clock.clone())?;
/// block_on(async {
///     // Three keys newly fail while nothing succeeds: an outage.
///     for key in ["a", "b", "c"] {
///         assert!(gate.fail(&key.to_string()).await?.is_ok());
///     }
///     assert!(gate.in_outage());
///     // A key that has not failed waits on the outage's ladder too.
///     assert!(gate.wait(&"d".to_string()).await?.is_some());
///     // Two successes in a row end it.
///     gate.succeed(&"e".to_string()).await?;
///     gate.succeed(&"f".to_string()).await?;
///     assert!(!gate.in_outage());
///     Ok::<_, std::convert::Infallible>(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct OutageAware<G, C: Clock = StdClock> {
    inner: G,
    clock: C,
    epoch: C::Instant,
    watch: Watch<Option<Advanced>>,
}

impl<G> OutageAware<G> {
    /// Wraps `inner`, timing the outage on the [`StdClock`]. Fails with
    /// the first of `settings` out of range.
    pub fn new(inner: G, settings: OutageSettings) -> Result<Self, ConfigError> {
        Self::with_clock(inner, settings, StdClock)
    }
}

impl<G, C: Clock> OutageAware<G, C> {
    /// Wraps `inner`, timing the outage on `clock` (the clock of the
    /// backoff under it, so that tests drive both).
    pub fn with_clock(inner: G, settings: OutageSettings, clock: C) -> Result<Self, ConfigError> {
        let settings = settings.validate()?;
        let seed = settings.seed.unwrap_or_else(rand::random);
        let epoch = clock.now();
        Ok(OutageAware {
            inner,
            clock,
            epoch,
            watch: Watch::new(settings, seed),
        })
    }

    /// The keyed backoff under the wrapper.
    pub fn inner(&self) -> &G {
        &self.inner
    }

    /// Whether an outage is under way now.
    pub fn in_outage(&self) -> bool {
        self.watch.tally().in_outage
    }

    /// Keys parked now: during an outage, or after it until they are let
    /// go.
    pub fn parked(&self) -> usize {
        self.watch.tally().parked
    }

    /// Outages declared so far.
    pub fn outages(&self) -> u64 {
        self.watch.tally().outages
    }

    /// Now, on the outage's time line.
    fn now(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.epoch)
    }
}

impl<K, G, C> Gate<K> for OutageAware<G, C>
where
    K: Hash + Sync,
    G: Gate<K>,
    C: Clock,
{
    type Error = G::Error;

    async fn wait(&self, key: &K) -> Result<Option<Duration>, G::Error> {
        let own = self.inner.wait(key).await?;
        if own.is_some() || !self.watch.active() {
            return Ok(own);
        }
        let level = self.inner.level(key).await?;
        Ok(self.watch.peek(key, self.now(), level))
    }

    async fn claim(&self, key: &K) -> Result<Option<Duration>, G::Error> {
        let own = self.inner.claim(key).await?;
        if own.is_some() || !self.watch.active() {
            return Ok(own);
        }
        let level = self.inner.level(key).await?;
        let at = self.now();
        Ok(
            match self
                .watch
                .rule(key, at, Asked::Claim, level, observe::outage)
            {
                Ruling::Parked { until, .. } => Some(until.saturating_sub(at)),
                Ruling::Free | Ruling::Released { .. } => None,
            },
        )
    }

    async fn fail(&self, key: &K) -> Result<Result<Advanced, InBackoff>, G::Error> {
        if self.watch.active() {
            let level = self.inner.level(key).await?;
            let at = self.now();
            match self
                .watch
                .rule(key, at, Asked::Failure, level, observe::outage)
            {
                Ruling::Parked { until, counted } => {
                    // The key's own wait (its backoff or its floor) is
                    // asked of the backoff under the wrapper, the one
                    // place that decides it.
                    let own = self.inner.wait(key).await?;
                    let wait = until.saturating_sub(at);
                    return Ok(parked_failure(own, wait, counted, level));
                }
                Ruling::Released { level: Some(level) } => self.inner.resume(key, level).await?,
                Ruling::Released { level: None } | Ruling::Free => {}
            }
        }
        let outcome = self.inner.fail(key).await?;
        if let Ok(level) = outcome {
            let fresh = level.attempts == 1;
            self.watch
                .failed(key, fresh, || self.now(), observe::outage);
        }
        Ok(outcome)
    }

    async fn succeed(&self, key: &K) -> Result<(), G::Error> {
        self.inner.succeed(key).await?;
        self.watch.succeeded(key, || self.now(), observe::outage);
        Ok(())
    }

    async fn hold(&self, key: &K, wait: Duration) -> Result<(), G::Error> {
        self.inner.hold(key, wait).await
    }

    async fn level(&self, key: &K) -> Result<Option<Advanced>, G::Error> {
        self.inner.level(key).await
    }

    async fn resume(&self, key: &K, level: Advanced) -> Result<(), G::Error> {
        self.inner.resume(key, level).await
    }
}

impl<G: Send + Sync, C: Clock> OutageStatus for OutageAware<G, C> {
    fn in_outage(&self) -> bool {
        OutageAware::in_outage(self)
    }

    fn parked(&self) -> usize {
        OutageAware::parked(self)
    }

    fn outages(&self) -> u64 {
        OutageAware::outages(self)
    }
}

impl<G: fmt::Debug, C: Clock> fmt::Debug for OutageAware<G, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tally = self.watch.tally();
        f.debug_struct("OutageAware")
            .field("inner", &self.inner)
            .field("in_outage", &tally.in_outage)
            .field("parked", &tally.parked)
            .finish_non_exhaustive()
    }
}
