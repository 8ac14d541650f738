//! [`Gate`]: what an integration asks of a keyed backoff, whatever holds
//! the state.
//!
//! A middleware, a controller's reconcile wrapper or a wrapper that adds a
//! behaviour (outage awareness, in keyed-backoff-outage) needs four things of a keyed backoff: how
//! long a key must still wait, a failure, a success, and a floor (a
//! server's `Retry-After`). [`Backoff`](crate::Backoff) answers them in
//! process; a store shared by a fleet answers them over the network, where
//! a call is asynchronous and can fail. The trait is written for the second
//! kind, so that the first costs nothing: every method returns a future,
//! and `Backoff`'s futures are ready at once ([`std::future::Ready`]), its
//! error type [`Infallible`](std::convert::Infallible).

use std::future::Future;
use std::time::Duration;

use crate::entry::Level;
use crate::error::InBackoff;

/// What an integration asks of a keyed backoff: the contract between the
/// state (the in-process [`Backoff`](crate::Backoff), a shared store) and what uses it
/// (the tower layer, the kube crate, keyed-backoff-outage's `OutageAware`).
///
/// Every method returns a future and may fail with [`Error`](Self::Error):
/// a store across the network answers asynchronously and can be
/// unreachable. [`Backoff`](crate::Backoff) never fails ([`Infallible`](std::convert::Infallible)) and its futures
/// are ready at once, so a caller over it pays for neither.
///
/// | method | what it does | state |
/// |---|---|---|
/// | [`wait`](Self::wait) | the wait left before the key may run (its backoff or its floor) | reads |
/// | [`claim`](Self::claim) | the same question, by a caller about to run the key: a wrapper may count the run as the key's turn | may claim a turn |
/// | [`fail`](Self::fail) | a failure: the key's backoff advances, unless it is still waiting | advances at most once per backoff |
/// | [`succeed`](Self::succeed) | a success: the key starts over | removes |
/// | [`hold`](Self::hold) | a floor: the key may not run for a while | extends |
/// | [`level`](Self::level) | the key's level: backoff and failures counted | reads |
/// | [`standing`](Self::standing) | its level and its wait, read together | reads |
/// | [`resume`](Self::resume) | puts a key whose entry was forgotten back at a level | writes if missing |
///
/// The same verbs in the manager's own calls and in client-go's
/// `flowcontrol.Backoff`, for a reader who knows either:
///
/// | contract | [`Backoff`](crate::Backoff)'s own call | client-go |
/// |---|---|---|
/// | `wait`, `claim` | [`remaining(key, now)`](crate::Backoff::remaining) | `IsInBackOffSinceUpdate(id, now)`, as a wait rather than a yes or no |
/// | `fail` | [`try_next_now(key)`](crate::Backoff::try_next_now) | `Next(id, now)`, refused while the key waits (client-go counts every call) |
/// | `succeed` | [`reset(key)`](crate::Backoff::reset) | `Reset(id)` (and `DeleteEntry(id)`) |
/// | `hold` | [`hold_until(key, now + wait)`](crate::Backoff::hold_until) | none |
/// | `level` | [`entry(key)`](crate::Backoff::entry), unless expired | `Get(id)` reads the backoff alone, expired or not |
/// | `standing` | `entry` and `remaining` | none |
/// | `resume` | none: it exists for wrappers | none |
///
/// ```
/// use keyed_backoff::{Backoff, Gate, InBackoff};
/// use keyed_backoff::clock::MockClock;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = MockClock::new();
/// let b = Backoff::<String>::builder(Duration::from_secs(10), Duration::from_secs(300))
///     .clock(clock.clone())
///     .build()?;
/// let key = "api.example.com".to_string();
/// // Generic code sees only the contract: here, the in-process manager.
/// async fn failed<G: Gate<String>>(gate: &G, key: &String) -> Result<Option<Duration>, G::Error> {
///     Ok(gate.fail(key).await?.ok().map(|level| level.backoff))
/// }
/// assert_eq!(failed(&b, &key).await?, Some(Duration::from_secs(10)));
/// assert_eq!(failed(&b, &key).await?, None); // in backoff: not counted again
/// assert_eq!(b.wait(&key).await?, Some(Duration::from_secs(10)));
/// b.succeed(&key).await?;
/// assert_eq!(b.wait(&key).await?, None);
/// # Ok(())
/// # }
/// # futures_lite_block_on(run()).unwrap();
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let mut f = std::pin::pin!(f);
/// #     match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
/// #         std::task::Poll::Ready(v) => v,
/// #         std::task::Poll::Pending => unreachable!("the in-process manager is always ready"),
/// #     }
/// # }
/// ```
pub trait Gate<K>: Send + Sync {
    /// Why a call could not be answered ([`Infallible`](std::convert::Infallible) in process).
    type Error: std::error::Error + Send + Sync + 'static;

    /// Whether every future this gate returns is ready at its first poll:
    /// `true` for the in-process manager and for a wrapper over it whose
    /// own state is in process. An integration then asks in place, without
    /// a runtime and without allocating ([`DynGate`](crate::DynGate)
    /// answers [`Answer::Now`](crate::Answer::Now)). `false`, the default,
    /// promises nothing: a gate across the network.
    const ANSWERS_AT_ONCE: bool = false;

    /// The wait left before `key` may run, or `None` if it may run now.
    /// Changes nothing.
    fn wait(&self, key: &K) -> impl Future<Output = Result<Option<Duration>, Self::Error>> + Send;

    /// [`wait`](Self::wait), asked by a caller that runs `key` at once
    /// when the answer is `None`: a wrapper that lets only some keys go
    /// (an outage's probes) counts that run as the key's turn. A plain
    /// backoff answers as `wait` does.
    fn claim(&self, key: &K) -> impl Future<Output = Result<Option<Duration>, Self::Error>> + Send {
        self.wait(key)
    }

    /// A failure of `key` now: if the key may run, its backoff advances
    /// and its new level is returned; if it is still waiting (its backoff
    /// or its floor), the failure is not counted and the wait left is
    /// returned. At most one failure is counted per backoff, however many
    /// callers report one.
    fn fail(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, Self::Error>> + Send;

    /// A success of `key`: its backoff and floor are forgotten, so its
    /// next failure starts over.
    fn succeed(&self, key: &K) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// [`fail`](Self::fail), naming the dependency that failed (a region,
    /// a webhook, a host): a gate that sees outages per dependency (the
    /// outage wrapper of keyed-backoff-outage) counts the failure in that
    /// domain's outage too. A gate that keeps no domains ignores the name.
    fn fail_in(
        &self,
        key: &K,
        domain: &str,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, Self::Error>> + Send {
        let _ = domain;
        self.fail(key)
    }

    /// [`succeed`](Self::succeed), naming the dependency that answered,
    /// as [`fail_in`](Self::fail_in) names one that failed.
    fn succeed_in(
        &self,
        key: &K,
        domain: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let _ = domain;
        self.succeed(key)
    }

    /// A floor under `key`'s wait: it may not run for `wait` from now,
    /// whatever its backoff says. A longer floor already in place is kept;
    /// the backoff grows as it would without one.
    fn hold(&self, key: &K, wait: Duration)
    -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// `key`'s level, or `None` when it has no live entry (never failed,
    /// reset, or forgotten after its expiry window). Changes nothing.
    fn level(&self, key: &K) -> impl Future<Output = Result<Option<Level>, Self::Error>> + Send;

    /// `key`'s [`level`](Gate::level) and its [`wait`](Gate::wait), read
    /// together: a store that answers both in one round trip overrides it
    /// (the default asks one, then the other). Changes nothing.
    fn standing(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<(Option<Level>, Option<Duration>), Self::Error>> + Send
    where
        K: Sync,
    {
        async move { Ok((self.level(key).await?, self.wait(key).await?)) }
    }

    /// Puts `key` back at `level`, its backoff just over now, unless it
    /// has a live entry: its next failure climbs from there. The one hook
    /// a wrapper needs to hold a key back for a long time (longer than
    /// the expiry window) without making it start its ladder over.
    fn resume(&self, key: &K, level: Level)
    -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// A shared gate: the manager in an `Arc`, as a middleware and a
/// background GC task hold it.
impl<K, G: Gate<K> + ?Sized> Gate<K> for std::sync::Arc<G> {
    type Error = G::Error;
    const ANSWERS_AT_ONCE: bool = G::ANSWERS_AT_ONCE;

    #[inline]
    fn wait(&self, key: &K) -> impl Future<Output = Result<Option<Duration>, G::Error>> + Send {
        (**self).wait(key)
    }

    #[inline]
    fn claim(&self, key: &K) -> impl Future<Output = Result<Option<Duration>, G::Error>> + Send {
        (**self).claim(key)
    }

    #[inline]
    fn fail(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, G::Error>> + Send {
        (**self).fail(key)
    }

    #[inline]
    fn succeed(&self, key: &K) -> impl Future<Output = Result<(), G::Error>> + Send {
        (**self).succeed(key)
    }

    fn fail_in(
        &self,
        key: &K,
        domain: &str,
    ) -> impl Future<Output = Result<Result<Level, InBackoff>, G::Error>> + Send {
        (**self).fail_in(key, domain)
    }

    fn succeed_in(
        &self,
        key: &K,
        domain: &str,
    ) -> impl Future<Output = Result<(), G::Error>> + Send {
        (**self).succeed_in(key, domain)
    }

    fn hold(&self, key: &K, wait: Duration) -> impl Future<Output = Result<(), G::Error>> + Send {
        (**self).hold(key, wait)
    }

    fn level(&self, key: &K) -> impl Future<Output = Result<Option<Level>, G::Error>> + Send {
        (**self).level(key)
    }

    fn standing(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<(Option<Level>, Option<Duration>), G::Error>> + Send
    where
        K: Sync,
    {
        (**self).standing(key)
    }

    fn resume(&self, key: &K, level: Level) -> impl Future<Output = Result<(), G::Error>> + Send {
        (**self).resume(key, level)
    }
}
