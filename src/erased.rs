//! [`DynGate`]: the [`Gate`] contract behind a pointer, for an
//! integration that must not name the gate's type.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::entry::Level;
use crate::error::InBackoff;
use crate::gate::Gate;

/// Why a gate could not answer: its own error, boxed.
type BoxError = Box<dyn Error + Send + Sync>;

/// A [`DynGate`]'s answer: given at once by a gate that answers in process,
/// or to come from a gate across the network.
///
/// An answer given at once costs nothing: no allocation, no future. An
/// answer to come is a boxed future that owns what it needs (a handle on
/// the gate and a copy of the key), so it can be awaited later, stored in
/// a request's future, or left to finish in the background.
///
/// ```
/// use keyed_backoff::clock::MockClock;
/// use keyed_backoff::{Answer, Backoff, DynGate};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let backoff = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
///     .clock(MockClock::new())
///     .build()?;
/// let gate: Arc<dyn DynGate<String>> = Arc::new(Arc::new(backoff));
/// let key = "db".to_string();
/// // In process: every answer is there at once.
/// assert!(matches!(gate.fail(&key), Answer::Now(Ok(_))));
/// match gate.wait(&key) {
///     Answer::Now(wait) => assert_eq!(wait, Some(Duration::from_secs(1))),
///     Answer::Later(_) => unreachable!("the manager answers at once"),
/// }
/// # Ok::<(), keyed_backoff::ConfigError>(())
/// ```
pub enum Answer<T> {
    /// The answer, given at once.
    Now(T),
    /// The answer to come, or the gate's error (a store it could not
    /// reach, named in the error).
    Later(Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>),
}

impl<T> Answer<T> {
    /// The answer if it can be had without waiting: [`Now`](Answer::Now),
    /// or a [`Later`](Answer::Later) that is ready at its first poll. An
    /// answer still to come is given back (`Err`), polled once: await it
    /// with [`get`](Answer::get) or hand it to a runtime.
    pub fn try_now(self) -> Result<Result<T, BoxError>, Self> {
        match self {
            Answer::Now(answer) => Ok(Ok(answer)),
            Answer::Later(mut later) => match poll_once(later.as_mut()) {
                Some(answer) => Ok(answer),
                None => Err(Answer::Later(later)),
            },
        }
    }

    /// Waits for the answer.
    pub async fn get(self) -> Result<T, BoxError> {
        match self {
            Answer::Now(answer) => Ok(answer),
            Answer::Later(later) => later.await,
        }
    }

    /// The answer of `call`, a future that a gate answering at once
    /// completes at its first poll (the gate's own questions, composed by
    /// an integration). A future that is not ready is an error, not a
    /// wait: it broke the gate's promise to answer at once.
    pub fn at_once<E: Into<BoxError>>(call: impl Future<Output = Result<T, E>>) -> Self {
        match poll_once(std::pin::pin!(call)) {
            Some(Ok(answer)) => Answer::Now(answer),
            Some(Err(error)) => failed(error.into()),
            None => failed(NOT_AT_ONCE.into()),
        }
    }
}

impl<T> std::fmt::Debug for Answer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Answer::Now(_) => "Answer::Now(..)",
            Answer::Later(_) => "Answer::Later(..)",
        })
    }
}

const NOT_AT_ONCE: &str =
    "a gate that answers at once (Gate::ANSWERS_AT_ONCE) returned a future that was not ready";

/// An answer that is the error `error`.
fn failed<T>(error: BoxError) -> Answer<T> {
    Answer::Later(Box::pin(async move { Err(error) }))
}

/// `future`'s output if one poll completes it. The one place in the
/// workspace where a future is polled without a runtime.
#[inline]
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Option<F::Output> {
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// `future`'s output if one poll completes it (for the workspace's test
/// kit and companion crates; not API).
#[doc(hidden)]
#[inline]
pub fn now<F: Future>(future: F) -> Option<F::Output> {
    poll_once(std::pin::pin!(future))
}

/// The [`Gate`] contract, object-safe: what an integration (a middleware,
/// a controller's wrapper) holds as `Arc<dyn DynGate<K>>`, so that its
/// types name neither the gate nor its clock, hasher or store.
///
/// Every gate that is cheap to clone is one: the manager in an `Arc`, a
/// wrapper in an `Arc`, a store's handle. A gate that
/// [answers at once](Gate::ANSWERS_AT_ONCE) (in process) answers
/// [`Answer::Now`], without allocating; any other answers
/// [`Answer::Later`], a boxed future owning a clone of the gate and of the
/// key.
///
/// The methods are [`Gate`]'s, with its meanings. A gate that is `Clone`
/// is both: with both traits in scope, name the one meant
/// (`Gate::fail(&gate, &key)`); through `Arc<dyn DynGate<K>>` there is only
/// one.
///
/// ```
/// use keyed_backoff::{Backoff, DynGate};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let backoff = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
/// let gate: Arc<dyn DynGate<String>> = Arc::new(Arc::clone(&backoff));
/// assert!(gate.answers_at_once());
/// let key = "db".to_string();
/// let level = gate.fail(&key).try_now().unwrap()?.unwrap();
/// assert_eq!(level.backoff, Duration::from_secs(1));
/// assert_eq!(backoff.attempts(&key), 1);
/// # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
/// ```
pub trait DynGate<K>: Send + Sync {
    /// Whether every answer is [`Answer::Now`] (or an error):
    /// [`Gate::ANSWERS_AT_ONCE`].
    fn answers_at_once(&self) -> bool;
    /// [`Gate::wait`].
    fn wait(&self, key: &K) -> Answer<Option<Duration>>;
    /// [`Gate::claim`].
    fn claim(&self, key: &K) -> Answer<Option<Duration>>;
    /// [`Gate::fail`].
    fn fail(&self, key: &K) -> Answer<Result<Level, InBackoff>>;
    /// [`Gate::succeed`].
    fn succeed(&self, key: &K) -> Answer<()>;
    /// [`Gate::fail_in`].
    fn fail_in(&self, key: &K, domain: &str) -> Answer<Result<Level, InBackoff>>;
    /// [`Gate::succeed_in`].
    fn succeed_in(&self, key: &K, domain: &str) -> Answer<()>;
    /// [`Gate::hold`].
    fn hold(&self, key: &K, wait: Duration) -> Answer<()>;
    /// [`Gate::level`].
    fn level(&self, key: &K) -> Answer<Option<Level>>;
    /// [`Gate::standing`].
    fn standing(&self, key: &K) -> Answer<(Option<Level>, Option<Duration>)>;
    /// [`Gate::resume`].
    fn resume(&self, key: &K, level: Level) -> Answer<()>;
}

/// One question of the contract, erased: answered in place by a gate that
/// answers at once, else a boxed future over clones of the gate and key.
macro_rules! erase {
    // With a name too (a domain): borrowed in place, owned by a future.
    ($gate:ident, $key:ident, $name:ident, |$g:ident, $k:ident, $n:ident| $call:expr) => {{
        if G::ANSWERS_AT_ONCE {
            let ($g, $k, $n) = ($gate, $key, $name);
            Answer::at_once($call)
        } else {
            let ($g, $k, $n) = ($gate.clone(), $key.clone(), $name.to_owned());
            Answer::Later(Box::pin(async move {
                let ($g, $k, $n) = (&$g, &$k, $n.as_str());
                $call.await.map_err(|e| Box::new(e) as BoxError)
            }))
        }
    }};
    ($gate:ident, $key:ident, |$g:ident, $k:ident| $call:expr) => {{
        if G::ANSWERS_AT_ONCE {
            let ($g, $k) = ($gate, $key);
            Answer::at_once($call)
        } else {
            let ($g, $k) = ($gate.clone(), $key.clone());
            Answer::Later(Box::pin(async move {
                let ($g, $k) = (&$g, &$k);
                $call.await.map_err(|e| Box::new(e) as BoxError)
            }))
        }
    }};
}

impl<K, G> DynGate<K> for G
where
    G: Gate<K> + Clone + 'static,
    K: Clone + Send + Sync + 'static,
{
    fn answers_at_once(&self) -> bool {
        G::ANSWERS_AT_ONCE
    }

    fn wait(&self, key: &K) -> Answer<Option<Duration>> {
        erase!(self, key, |g, k| Gate::wait(g, k))
    }

    fn claim(&self, key: &K) -> Answer<Option<Duration>> {
        erase!(self, key, |g, k| Gate::claim(g, k))
    }

    fn fail(&self, key: &K) -> Answer<Result<Level, InBackoff>> {
        erase!(self, key, |g, k| Gate::fail(g, k))
    }

    fn succeed(&self, key: &K) -> Answer<()> {
        erase!(self, key, |g, k| Gate::succeed(g, k))
    }

    fn fail_in(&self, key: &K, domain: &str) -> Answer<Result<Level, InBackoff>> {
        erase!(self, key, domain, |g, k, d| Gate::fail_in(g, k, d))
    }

    fn succeed_in(&self, key: &K, domain: &str) -> Answer<()> {
        erase!(self, key, domain, |g, k, d| Gate::succeed_in(g, k, d))
    }

    fn hold(&self, key: &K, wait: Duration) -> Answer<()> {
        erase!(self, key, |g, k| Gate::hold(g, k, wait))
    }

    fn level(&self, key: &K) -> Answer<Option<Level>> {
        erase!(self, key, |g, k| Gate::level(g, k))
    }

    fn standing(&self, key: &K) -> Answer<(Option<Level>, Option<Duration>)> {
        erase!(self, key, |g, k| Gate::standing(g, k))
    }

    fn resume(&self, key: &K, level: Level) -> Answer<()> {
        erase!(self, key, |g, k| Gate::resume(g, k, level))
    }
}
