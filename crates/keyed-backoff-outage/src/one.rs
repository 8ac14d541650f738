//! [`One`]: one outage's state, wherever it lives (a watch in this
//! process, a fleet's state in its store), as the rule that composes the
//! outage of everything with the domains' asks it.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use keyed_backoff::Level;

use crate::state::{Asked, Ruling};
use crate::watch::Tally;

/// One outage's state, with no domains: the outage of everything, or of
/// one domain. Times are the state's own; a parked key's wait is from now.
pub trait One: Send + Sync + Sized {
    /// Whether every answer is ready at its first poll, and what
    /// [`seen_active`](Self::seen_active) says is the state itself (it is
    /// in this process).
    const AT_ONCE: bool;

    /// Whether an outage or its release is under way, as last seen,
    /// asking nothing.
    fn seen_active(&self) -> bool;

    /// Whether an outage or its release is under way (a fleet's state
    /// read again when the copy seen is old).
    fn active(&self) -> impl Future<Output = bool> + Send;

    /// The wait the key would be told if it asked to run, changing nothing.
    fn peek<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Option<Level>,
    ) -> impl Future<Output = Option<Duration>> + Send;

    /// What the key may do, `asked` by a caller about to run it or for a
    /// failure; `level` is its own level now.
    fn ruling<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        asked: Asked,
        level: Option<Level>,
    ) -> impl Future<Output = Ruling<Option<Level>>> + Send;

    /// A failure the key's own backoff counted at `level` (fresh when it
    /// started the ladder).
    fn failed<Q: Hash + Sync + ?Sized>(
        &self,
        key: &Q,
        level: Level,
    ) -> impl Future<Output = ()> + Send;

    /// A success of the key.
    fn succeeded<Q: Hash + Sync + ?Sized>(&self, key: &Q) -> impl Future<Output = ()> + Send;

    /// The figures as last known.
    fn tally(&self) -> Tally;

    /// The state of the domain `name` beside this one, its keys' slots
    /// drawn with `seed`, counted in `actives` while active where it can
    /// say so at once; `None` where no domain can be kept (its failures
    /// then count in the outage of everything alone).
    fn domain(&self, name: &str, seed: u64, actives: &Arc<AtomicUsize>) -> Option<Self>;
}
