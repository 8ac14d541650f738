//! Where an outage's state lives: [`OutageState`], implemented by
//! [`InProcess`] (this process alone) and by
//! [`Shared`](crate::Shared) (a fleet, through any
//! [`OutageStore`](crate::OutageStore)). The wrapper asks the same
//! questions of either; this module holds the questions and the
//! in-process answers.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, StdClock};
use keyed_backoff::{InBackoff, Level};

use crate::domains::{DomainStatus, Domains};
use crate::observe;
use crate::settings::OutageSettings;
use crate::state::{Asked, Ruling};
use crate::watch::{Tally, Watch};

/// Where an [`OutageAware`](crate::OutageAware)'s outage lives: in this
/// process ([`InProcess`], the default) or shared by a fleet through an
/// [`OutageStore`](crate::OutageStore) ([`Shared`](crate::Shared)). The
/// wrapper's decisions are the same over either. Implemented by those two
/// alone: to keep an outage somewhere else, implement
/// [`OutageStore`](crate::OutageStore).
pub trait OutageState: Send + Sync + sealed::Questions {}

impl<T: Send + Sync + sealed::Questions> OutageState for T {}

pub(crate) mod sealed {
    use super::*;

    /// What the wrapper asks of the outage's state. Times are on the
    /// state's own clock; `level` is the key's own level now.
    pub trait Questions {
        /// Whether every answer is ready at its first poll (the state is
        /// in this process).
        const AT_ONCE: bool = false;

        /// Whether an outage or its release is under way: the outage of
        /// everything, or of any domain.
        fn active(&self) -> impl Future<Output = bool> + Send;

        /// The wait the key would be told if it asked to run, changing
        /// nothing.
        fn peek<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            level: Option<Level>,
        ) -> impl Future<Output = Option<Duration>> + Send;

        /// What the key may do, asked by a caller about to run it or for a
        /// failure (in `domain` when the caller names one, else in the
        /// domain the key is remembered in); a parked key's wait is from
        /// now.
        fn ruling<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            asked: Asked,
            level: Option<Level>,
            domain: Option<&str>,
        ) -> impl Future<Output = Ruling<Option<Level>>> + Send;

        /// The outcome of a failure the key's own backoff was told: a
        /// failure it counted (fresh when it started the key's ladder) is
        /// told to the outage of everything and to `domain`'s. The outcome
        /// comes back as it went in.
        fn failed<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            outcome: Result<Level, InBackoff>,
            domain: Option<&str>,
        ) -> impl Future<Output = Result<Level, InBackoff>> + Send;

        /// A success of the key, told to the outage of everything and to
        /// `domain`'s, or the domain the key is remembered in.
        fn succeeded<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            domain: Option<&str>,
        ) -> impl Future<Output = ()> + Send;

        /// Every tracked domain's state (none where domains are not kept).
        fn domains(&self) -> Vec<DomainStatus> {
            Vec::new()
        }

        /// The figures as last known.
        fn tally(&self) -> Tally;
    }
}

/// An outage seen by this process alone: the default
/// [`OutageState`], timed on the clock `C`.
pub struct InProcess<C: Clock = StdClock> {
    watch: Watch<Option<Level>>,
    domains: Domains,
    clock: C,
    epoch: C::Instant,
}

impl<C: Clock> InProcess<C> {
    /// For validated `settings`, timed on `clock`.
    pub(crate) fn new(settings: OutageSettings, clock: C) -> Self {
        let seed = settings.seed.unwrap_or_else(rand::random);
        let epoch = clock.now();
        InProcess {
            watch: Watch::new(settings, seed),
            domains: Domains::new(settings, seed),
            clock,
            epoch,
        }
    }

    /// Now, on the outage's time line.
    #[inline]
    fn now(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.epoch)
    }

    /// A fresh failure of `key` (it started the key's ladder) named with
    /// the domain `name`: told to that domain's outage, the key
    /// remembered in it.
    #[inline(never)]
    fn failed_in<Q: Hash + ?Sized>(&self, key: &Q, name: &str) {
        // One reading of the clock: a fresh failure needs it anyway.
        let at = self.now();
        let Some(domain) = self.domains.named(name, || at) else {
            return;
        };
        let events = |event| observe::domain_outage(&domain.name, event);
        domain.watch.failed(key, true, at, events);
        self.domains.used(&domain, at);
        self.domains.remember(self.domains.hash(key), &domain);
    }

    /// A success of `key`: told to the outage of the domain `name`, or of
    /// the domain the key is remembered in, which forgets it.
    #[inline(never)]
    fn succeeded_in<Q: Hash + ?Sized>(&self, key: &Q, name: Option<&str>) {
        let hash = self.domains.hash(key);
        let domain = match name {
            Some(name) => self.domains.named(name, || self.now()),
            None => self.domains.remembered(hash),
        };
        if let Some(domain) = domain {
            let events = |event| observe::domain_outage(&domain.name, event);
            domain.watch.succeeded(key, || self.now(), events);
        }
        self.domains.forget(hash);
    }
}

/// Answered at once, under the watch's lock or with an atomic.
impl<C: Clock> sealed::Questions for InProcess<C> {
    const AT_ONCE: bool = true;

    #[inline]
    fn active(&self) -> impl Future<Output = bool> + Send {
        done(self.watch.active() || self.domains.any_active())
    }

    fn peek<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Option<Level>,
    ) -> impl Future<Output = Option<Duration>> + Send {
        let at = self.now();
        let everything = self.watch.peek(key, at, level);
        let domain = self.domains.of(key);
        let own = domain.and_then(|domain| domain.watch.peek(key, at, level));
        done(everything.max(own))
    }

    fn ruling<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        asked: Asked,
        level: Option<Level>,
        domain: Option<&str>,
    ) -> impl Future<Output = Ruling<Option<Level>>> + Send {
        let at = self.now();
        let everything = self.watch.ruling(key, at, asked, level, observe::outage);
        if let Ruling::Parked { .. } = everything {
            return done(everything.waits_from(at));
        }
        let domain = match domain {
            // A key failing in a domain belongs to it, parked or not.
            Some(name) => self.domains.named(name, || at).inspect(|domain| {
                self.domains.remember(self.domains.hash(key), domain);
            }),
            None => self.domains.of(key),
        };
        let own = domain.map_or(Ruling::Free, |domain| {
            let events = |event| observe::domain_outage(&domain.name, event);
            domain.watch.ruling(key, at, asked, level, events)
        });
        done(match (everything, own) {
            (_, Ruling::Parked { .. }) | (Ruling::Free, _) => own.waits_from(at),
            (Ruling::Released { .. }, _) => everything,
            (Ruling::Parked { .. }, _) => unreachable!("answered above"),
        })
    }

    #[inline]
    fn failed<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        outcome: Result<Level, InBackoff>,
        domain: Option<&str>,
    ) -> impl Future<Output = Result<Level, InBackoff>> + Send {
        if let Ok(level) = outcome {
            let fresh = level.attempts == 1;
            self.watch
                .failed(key, fresh, || self.now(), observe::outage);
            // A domain hears of the failures that start its keys' ladders
            // (and of their successes): a failure that goes on with a
            // key's ladder counts in the outage of everything alone.
            if let (true, Some(name)) = (fresh, domain) {
                self.failed_in(key, name);
            }
        }
        done(outcome)
    }

    #[inline]
    fn succeeded<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        domain: Option<&str>,
    ) -> impl Future<Output = ()> + Send {
        self.watch.succeeded(key, || self.now(), observe::outage);
        if domain.is_some() || self.domains.any_remembered() {
            self.succeeded_in(key, domain);
        }
        done(())
    }

    fn domains(&self) -> Vec<DomainStatus> {
        self.domains.statuses()
    }

    fn tally(&self) -> Tally {
        self.watch.tally()
    }
}

/// An answer known at once, as a future: ready at its first poll, and at
/// every poll after (its value is `Copy`), so that awaiting it leaves no
/// check behind in the wrapper's code once inlined.
struct Done<T>(T);

impl<T: Copy + Unpin> Future for Done<T> {
    type Output = T;

    #[inline]
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<T> {
        Poll::Ready(self.0)
    }
}

#[inline]
fn done<T: Copy + Unpin>(value: T) -> Done<T> {
    Done(value)
}

impl<C: Clock> fmt::Debug for InProcess<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tally = self.watch.tally();
        f.debug_struct("InProcess")
            .field("in_outage", &tally.in_outage)
            .field("parked", &tally.parked)
            .finish_non_exhaustive()
    }
}
