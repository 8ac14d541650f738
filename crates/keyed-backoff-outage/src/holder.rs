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

        /// Whether an outage or its release is under way.
        fn active(&self) -> impl Future<Output = bool> + Send;

        /// The wait the key would be told if it asked to run, changing
        /// nothing.
        fn peek<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            level: Option<Level>,
        ) -> impl Future<Output = Option<Duration>> + Send;

        /// What the key may do, asked by a caller about to run it or for a
        /// failure; a parked key's wait is from now.
        fn ruling<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            asked: Asked,
            level: Option<Level>,
        ) -> impl Future<Output = Ruling<Option<Level>>> + Send;

        /// The outcome of a failure the key's own backoff was told: a
        /// failure it counted (fresh when it started the key's ladder) is
        /// told to the outage. The outcome comes back as it went in.
        fn failed<Q: Hash + Sync + ?Sized>(
            &self,
            key: &Q,
            outcome: Result<Level, InBackoff>,
        ) -> impl Future<Output = Result<Level, InBackoff>> + Send;

        /// A success of the key.
        fn succeeded<Q: Hash + Sync + ?Sized>(&self, key: &Q) -> impl Future<Output = ()> + Send;

        /// The figures as last known.
        fn tally(&self) -> Tally;
    }
}

/// An outage seen by this process alone: the default
/// [`OutageState`], timed on the clock `C`.
pub struct InProcess<C: Clock = StdClock> {
    watch: Watch<Option<Level>>,
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
            clock,
            epoch,
        }
    }

    /// Now, on the outage's time line.
    #[inline]
    fn now(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.epoch)
    }
}

/// Answered at once, under the watch's lock or with an atomic.
impl<C: Clock> sealed::Questions for InProcess<C> {
    const AT_ONCE: bool = true;

    #[inline]
    fn active(&self) -> impl Future<Output = bool> + Send {
        done(self.watch.active())
    }

    fn peek<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Option<Level>,
    ) -> impl Future<Output = Option<Duration>> + Send {
        done(self.watch.peek(key, self.now(), level))
    }

    fn ruling<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        asked: Asked,
        level: Option<Level>,
    ) -> impl Future<Output = Ruling<Option<Level>>> + Send {
        let at = self.now();
        let ruling = self.watch.ruling(key, at, asked, level, observe::outage);
        done(ruling.waits_from(at))
    }

    #[inline]
    fn failed<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        outcome: Result<Level, InBackoff>,
    ) -> impl Future<Output = Result<Level, InBackoff>> + Send {
        if let Ok(level) = outcome {
            let fresh = level.attempts == 1;
            self.watch
                .failed(key, fresh, || self.now(), observe::outage);
        }
        done(outcome)
    }

    #[inline]
    fn succeeded<Q: Hash + Sync + ?Sized>(&self, key: &Q) -> impl Future<Output = ()> + Send {
        self.watch.succeeded(key, || self.now(), observe::outage);
        done(())
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
