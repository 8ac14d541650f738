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
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::task::{Context, Poll};
use std::time::Duration;

use keyed_backoff::Level;
use keyed_backoff::clock::{Clock, ClockInstant, StdClock};

use crate::observe;
use crate::one::One;
use crate::outages::Outages;
use crate::settings::OutageSettings;
use crate::state::{Asked, Event, Ruling};
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
    use crate::one::One;
    use crate::outages::Outages;

    /// What the wrapper asks of the outage's state: the questions of its
    /// [`Outages`], the outage of everything and each domain's, each a
    /// [`One`] of the state's kind.
    pub trait Questions {
        /// Where each outage lives.
        type One: One;

        /// The outages kept.
        fn outages(&self) -> &Outages<Self::One>;
    }
}

/// An outage seen by this process alone: the default
/// [`OutageState`], timed on the clock `C`.
pub struct InProcess<C: Clock = StdClock> {
    outages: Outages<Local<C>>,
}

impl<C: Clock> InProcess<C> {
    /// For validated `settings`, timed on `clock`.
    pub(crate) fn new(settings: OutageSettings, clock: C) -> Self {
        let seed = settings.seed.unwrap_or_else(rand::random);
        let everything = Local {
            watch: Watch::new(settings, seed),
            line: Arc::new(Line::new(clock)),
            name: None,
        };
        InProcess {
            outages: Outages::new(everything, settings.max_domains, seed),
        }
    }
}

impl<C: Clock> sealed::Questions for InProcess<C> {
    type One = Local<C>;

    #[inline]
    fn outages(&self) -> &Outages<Local<C>> {
        &self.outages
    }
}

/// A time line: durations since an instant of a clock, shared by the
/// outages of one state.
pub(crate) struct Line<C: Clock> {
    clock: C,
    epoch: C::Instant,
}

impl<C: Clock> Line<C> {
    pub(crate) fn new(clock: C) -> Self {
        let epoch = clock.now();
        Line { clock, epoch }
    }

    /// Now, on this line.
    #[inline]
    pub(crate) fn now(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.epoch)
    }
}

/// One outage in this process (of everything, or of the domain `name`):
/// a watch, answered at once, under its lock or with an atomic.
pub struct Local<C: Clock> {
    watch: Watch<Option<Level>>,
    line: Arc<Line<C>>,
    name: Option<Box<str>>,
}

impl<C: Clock> Local<C> {
    #[inline]
    fn now(&self) -> Duration {
        self.line.now()
    }

    fn tell(&self, event: Event) {
        observe::outage(self.name.as_deref(), event);
    }
}

impl<C: Clock> One for Local<C> {
    const AT_ONCE: bool = true;

    #[inline]
    fn seen_active(&self) -> bool {
        self.watch.active()
    }

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
        let ruling = self.watch.ruling(key, at, asked, level, |e| self.tell(e));
        done(ruling.waits_from(at))
    }

    #[inline]
    fn failed<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Level,
    ) -> impl Future<Output = ()> + Send {
        let fresh = level.attempts == 1;
        self.watch
            .failed(key, fresh, || self.now(), |e| self.tell(e));
        done(())
    }

    #[inline]
    fn succeeded<Q: Hash + Sync + ?Sized>(&self, key: &Q) -> impl Future<Output = ()> + Send {
        self.watch.succeeded(key, || self.now(), |e| self.tell(e));
        done(())
    }

    fn tally(&self) -> Tally {
        self.watch.tally()
    }

    fn domain(&self, name: &str, seed: u64, actives: &Arc<AtomicUsize>) -> Option<Self> {
        Some(Local {
            watch: Watch::counted(self.watch.settings(), seed, Some(Arc::clone(actives))),
            line: Arc::clone(&self.line),
            name: Some(name.into()),
        })
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
        let tally = self.outages.tally();
        f.debug_struct("InProcess")
            .field("in_outage", &tally.in_outage)
            .field("parked", &tally.parked)
            .finish_non_exhaustive()
    }
}
