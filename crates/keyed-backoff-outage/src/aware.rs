//! [`OutageAware`]: outage awareness as a wrapper over any [`Gate`].

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::domains::DomainStatus;
use crate::holder::{InProcess, OutageState};
use crate::one::One;
use crate::parked::parked_failure;
use crate::settings::OutageSettings;
use crate::shared::Shared;
use crate::state::{Asked, Ruling};
use crate::status::OutageStatus;
use crate::store::OutageStore;
use keyed_backoff::Gate;
use keyed_backoff::Level;
use keyed_backoff::clock::{Clock, StdClock};
use keyed_backoff::{ConfigError, InBackoff};

/// A keyed backoff that tells a shared outage from keys failing on their
/// own: any [`Gate`] (the in-process [`Backoff`](keyed_backoff::Backoff), a store
/// shared by a fleet) wrapped with [`OutageSettings`], the outage kept in
/// this process ([`InProcess`], [`new`](OutageAware::new)) or shared by a
/// fleet through an [`OutageStore`] ([`Shared`],
/// [`shared`](OutageAware::shared)): the same decisions over either.
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
pub struct OutageAware<G, S = InProcess> {
    inner: G,
    state: S,
}

impl<G> OutageAware<G> {
    /// Wraps `inner`, with the outage kept in this process and timed on
    /// the [`StdClock`]. Fails with the first of `settings` out of range.
    pub fn new(inner: G, settings: OutageSettings) -> Result<Self, ConfigError> {
        Self::with_clock(inner, settings, StdClock)
    }
}

impl<G, C: Clock> OutageAware<G, InProcess<C>> {
    /// Wraps `inner`, with the outage kept in this process and timed on
    /// `clock` (the clock of the backoff under it, so that tests drive
    /// both).
    pub fn with_clock(inner: G, settings: OutageSettings, clock: C) -> Result<Self, ConfigError> {
        let settings = settings.validate()?;
        Ok(OutageAware {
            inner,
            state: InProcess::new(settings, clock),
        })
    }
}

impl<G, T: OutageStore> OutageAware<G, Shared<T>> {
    /// Wraps `inner`, with the outage shared by every replica on `store`
    /// (see [`Shared`]), timed on the [`StdClock`]. Fails with the first of
    /// `settings` out of range, or when neither `settings` nor the store
    /// give a [`seed`](OutageSettings::seed). Nothing is asked of the store
    /// until the first call.
    pub fn shared(inner: G, settings: OutageSettings, store: T) -> Result<Self, ConfigError> {
        Self::shared_with_clock(inner, settings, store, StdClock)
    }
}

impl<G, T: OutageStore, C: Clock> OutageAware<G, Shared<T, C>> {
    /// [`shared`](OutageAware::shared), timed on `clock`: the replica's own
    /// line, which paces its time alone while the store fails (the fleet's
    /// time is the store's).
    pub fn shared_with_clock(
        inner: G,
        settings: OutageSettings,
        store: T,
        clock: C,
    ) -> Result<Self, ConfigError> {
        let settings = settings.validate()?;
        Ok(OutageAware {
            inner,
            state: Shared::new(store, settings, clock)?,
        })
    }

    /// Whether this replica is going on alone now (see [`Shared::alone`]).
    pub fn alone(&self) -> bool {
        self.state.alone()
    }
}

impl<G, S: OutageState> OutageAware<G, S> {
    /// The keyed backoff under the wrapper.
    pub fn inner(&self) -> &G {
        &self.inner
    }

    /// Where the outage lives: [`InProcess`], or [`Shared`] with its store.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Whether an outage is under way now (for a fleet, in the state this
    /// replica last saw: it reads the state at every call during an
    /// outage, and outside one at every fresh failure and at least every
    /// 100 ms of claims and failures).
    pub fn in_outage(&self) -> bool {
        self.state.outages().tally().in_outage
    }

    /// Keys parked now: during an outage, or after it until they are let
    /// go (for a fleet, across the fleet, as last seen).
    pub fn parked(&self) -> usize {
        self.state.outages().tally().parked
    }

    /// Outages of everything declared so far.
    pub fn outages(&self) -> u64 {
        self.state.outages().tally().outages
    }

    /// Every domain tracked now, by name: whether its outage is under way,
    /// the keys it parks, its outages so far.
    ///
    /// A domain is the dependency a failure came from, as the caller names
    /// it (a region, a webhook, a host): [`Gate::fail_in`]. It is
    /// [`Gate::fail`], and it also feeds the domain's own outage: an
    /// outage of one dependency is seen when the keys that use it fail,
    /// however many other keys go on succeeding. [`Gate::succeed_in`]
    /// names a success's domain. The key is remembered in the domain it
    /// was last named with (failing or succeeding) until a success names
    /// none, so that a caller asking to run it ([`Gate::claim`]) waits on
    /// that domain's outage too: a key whose successes name its domain
    /// waits on the domain's outage before it fails in it.
    ///
    /// A key obeys the outage of everything first: while that parks it,
    /// its domain is not asked. Otherwise its domain's outage rules it as
    /// the outage of everything would: parked on the domain's ladder,
    /// probing in turn, let go at the release rate. `docs/outage.md`
    /// states the rule. Domains are kept where the outage is: in process
    /// ([`InProcess`](crate::InProcess)), or shared by a fleet
    /// ([`Shared`](crate::Shared)) through the store's
    /// [`domain`](crate::OutageStore::domain).
    ///
    /// ```
    /// use keyed_backoff::clock::MockClock;
    /// use keyed_backoff::{Backoff, Gate};
    /// use keyed_backoff_outage::{OutageAware, OutageSettings};
    /// use std::time::Duration;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(v) => v, _ => unreachable!() }
    /// # }
    /// let clock = MockClock::new();
    /// let backoff = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let gate = OutageAware::with_clock(backoff, OutageSettings::new().min_failing_keys(3), clock)?;
    /// block_on(async {
    ///     // Three keys that use the EU region newly fail in it, while other
    ///     // keys keep succeeding: no outage of everything...
    ///     for key in ["a", "b", "c"] {
    ///         gate.fail_in(&key.to_string(), "eu").await?.ok();
    ///         for n in 0..10 {
    ///             gate.succeed(&format!("other-{n}")).await?;
    ///         }
    ///     }
    ///     assert!(!gate.in_outage());
    ///     // ...but an outage of the region.
    ///     assert!(gate.domains()[0].in_outage);
    ///     // A key of the region waits on its outage; another key does not.
    ///     assert!(gate.claim(&"a".to_string()).await?.is_some());
    ///     assert_eq!(gate.claim(&"other-1".to_string()).await?, None);
    ///     Ok::<_, std::convert::Infallible>(())
    /// })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn domains(&self) -> Vec<DomainStatus> {
        self.state.outages().domains()
    }
}

impl<G, S: OutageState> OutageAware<G, S> {
    /// During an outage, the key's own level, or its own wait (its backoff
    /// or its floor) when it has one: that answers first.
    async fn own<K: Sync>(&self, key: &K) -> Result<Result<Option<Level>, Duration>, G::Error>
    where
        G: Gate<K>,
    {
        let (level, own) = self.inner.standing(key).await?;
        Ok(own.map_or(Ok(level), Err))
    }
}

impl<K, G, S> Gate<K> for OutageAware<G, S>
where
    K: Hash + Sync,
    G: Gate<K>,
    S: OutageState,
{
    type Error = G::Error;
    const ANSWERS_AT_ONCE: bool = G::ANSWERS_AT_ONCE && <S::One as One>::AT_ONCE;

    async fn wait(&self, key: &K) -> Result<Option<Duration>, G::Error> {
        let outages = self.state.outages();
        if !outages.active(key, None).await {
            return self.inner.wait(key).await;
        }
        Ok(match self.own(key).await? {
            Err(own) => Some(own),
            Ok(level) => outages.peek(key, level).await,
        })
    }

    /// During an outage the key's own wait and level are read together
    /// ([`Gate::standing`]): the claim of a gate whose claim is its wait.
    async fn claim(&self, key: &K) -> Result<Option<Duration>, G::Error> {
        let outages = self.state.outages();
        if !outages.active(key, None).await {
            return self.inner.claim(key).await;
        }
        Ok(match self.own(key).await? {
            Err(own) => Some(own),
            Ok(level) => match outages.ruling(key, Asked::Claim, level, None).await {
                Ruling::Parked { until: wait, .. } => Some(wait),
                Ruling::Free | Ruling::Released { .. } => None,
            },
        })
    }

    async fn fail(&self, key: &K) -> Result<Result<Level, InBackoff>, G::Error> {
        self.failed(key, None).await
    }

    async fn succeed(&self, key: &K) -> Result<(), G::Error> {
        self.succeeded(key, None).await
    }

    /// [`fail`](Gate::fail), counted in `domain`'s own outage too
    /// ([`OutageAware::domains`]).
    async fn fail_in(&self, key: &K, domain: &str) -> Result<Result<Level, InBackoff>, G::Error> {
        self.failed(key, Some(domain)).await
    }

    /// [`succeed`](Gate::succeed), counted in `domain`'s own outage too.
    async fn succeed_in(&self, key: &K, domain: &str) -> Result<(), G::Error> {
        self.succeeded(key, Some(domain)).await
    }

    async fn hold(&self, key: &K, wait: Duration) -> Result<(), G::Error> {
        self.inner.hold(key, wait).await
    }

    async fn level(&self, key: &K) -> Result<Option<Level>, G::Error> {
        self.inner.level(key).await
    }

    async fn standing(&self, key: &K) -> Result<(Option<Level>, Option<Duration>), G::Error> {
        let (level, own) = self.inner.standing(key).await?;
        let outages = self.state.outages();
        if own.is_some() || !outages.active(key, None).await {
            return Ok((level, own));
        }
        Ok((level, outages.peek(key, level).await))
    }

    async fn resume(&self, key: &K, level: Level) -> Result<(), G::Error> {
        self.inner.resume(key, level).await
    }
}

impl<G, S: OutageState> OutageAware<G, S> {
    /// A failure of `key`, in `domain` when the caller names one.
    #[inline]
    async fn failed<K>(
        &self,
        key: &K,
        domain: Option<&str>,
    ) -> Result<Result<Level, InBackoff>, G::Error>
    where
        K: Hash + Sync,
        G: Gate<K>,
    {
        let outages = self.state.outages();
        if outages.active(key, domain).await {
            // The key's own wait (its backoff or its floor) is asked of the
            // backoff under the wrapper, the one place that decides it.
            let (level, own) = self.inner.standing(key).await?;
            match outages.ruling(key, Asked::Failure, level, domain).await {
                Ruling::Parked {
                    until: wait,
                    counted,
                } => {
                    return Ok(parked_failure(own, wait, counted, level));
                }
                Ruling::Released { level: Some(level) } => self.inner.resume(key, level).await?,
                Ruling::Released { level: None } | Ruling::Free => {}
            }
        }
        let outcome = self.inner.fail(key).await?;
        Ok(outages.failed(key, outcome, domain).await)
    }

    /// A success of `key`, in `domain` when the caller names one.
    #[inline]
    async fn succeeded<K>(&self, key: &K, domain: Option<&str>) -> Result<(), G::Error>
    where
        K: Hash + Sync,
        G: Gate<K>,
    {
        self.inner.succeed(key).await?;
        self.state.outages().succeeded(key, domain).await;
        Ok(())
    }
}

impl<G: Send + Sync, S: OutageState> OutageStatus for OutageAware<G, S> {
    fn in_outage(&self) -> bool {
        OutageAware::in_outage(self)
    }

    fn parked(&self) -> usize {
        OutageAware::parked(self)
    }

    fn outages(&self) -> u64 {
        OutageAware::outages(self)
    }

    fn domains(&self) -> Vec<DomainStatus> {
        OutageAware::domains(self)
    }
}

impl<G: fmt::Debug, S: fmt::Debug> fmt::Debug for OutageAware<G, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutageAware")
            .field("inner", &self.inner)
            .field("state", &self.state)
            .finish()
    }
}
