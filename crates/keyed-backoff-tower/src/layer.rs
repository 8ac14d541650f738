//! [`KeyedBackoffLayer`]: the middleware's configuration.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::budget::RetryBudget;
use tower::Layer;

use crate::policy::{Limits, Policy, RetryErrors};
use crate::replay::CloneRequest;
use crate::service::KeyedBackoff;

/// A tower layer that backs off per key: a function picks each request's
/// key (its host, tenant or shard), and the keys share one keyed-backoff
/// gate: the [`Backoff`](keyed_backoff::Backoff) manager, a wrapper over
/// it, or a store shared by a fleet.
///
/// - **Every attempt is gated**, the first one too: a request whose key is
///   in backoff waits until its window ends, or fails at once with
///   [`InBackoff`](keyed_backoff::InBackoff) and the wait left (see
///   [`max_wait`](Self::max_wait) and [`fail_fast`](Self::fail_fast)).
///   Requests for other keys go straight through.
/// - **Failures advance the key**, at most once per window however many
///   requests fail for it together; an `Ok` that is not a failure resets
///   it once its window has passed (one arriving within the window answers
///   a request sent before the latest failure, and leaves the window and
///   any hold in place). Which results are failures is the
///   [`Classify`](crate::Classify)'s choice ([`retry_if`](Self::retry_if)).
/// - **A server's wait is honoured**: a failure whose classifier reads a
///   wait from it (`RetryHttp` reads `Retry-After` on
///   429 and 503) holds its key at least that long, up to
///   [`max_retry_after`](Self::max_retry_after). The backoff's own growth
///   is unchanged.
/// - **Failed requests are retried** after their key's window, at most
///   [`max_retries`](Self::max_retries) times, while the
///   [`budget`](Self::budget) allows. A retry sends a copy of the request
///   ([`replay`](Self::replay)).
///
/// Defaults: every `Err` is a failure ([`RetryErrors`]): the layer serves
/// any service and cannot read its responses, so for HTTP a `429` is a
/// success until `.retry_if(RetryHttp)` (feature `http`) says otherwise;
/// 3 retries per request, of a clone of it ([`CloneRequest`]); no budget;
/// requests wait as long as their key's window lasts; a `Retry-After` is
/// honoured up to 5 minutes.
///
/// Waits sleep on tokio's timer for as long as the manager's clock says
/// is left, so the manager may run on any clock. Under tokio's paused
/// time (tests), use a clock that follows it, such as keyed-backoff's
/// `TokioClock` (its feature `tokio`).
///
/// The service's error is a [`BoxError`](crate::BoxError): the inner
/// service's error, or an `InBackoff` for a refused request.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), keyed_backoff_tower::BoxError> {
/// use keyed_backoff_tower::{Backoff, InBackoff, KeyedBackoffLayer};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::{Layer, ServiceExt};
///
/// // Requests are URLs; each host backs off on its own, from 1 s to 60 s.
/// let backoff = Arc::new(Backoff::<String>::new(Duration::from_secs(1), Duration::from_secs(60))?);
/// let host = |url: &&str| url.split('/').nth(2).unwrap_or_default().to_owned();
/// let layer = KeyedBackoffLayer::new(backoff, host).max_retries(0).fail_fast();
/// let service = layer.layer(tower::service_fn(|url: &'static str| async move {
///     if url.contains("down.example") { Err("connection refused") } else { Ok(200) }
/// }));
///
/// let down = "https://down.example/a";
/// assert!(service.clone().oneshot(down).await.is_err()); // reached the host: its key backs off 1 s
/// let refused = service.clone().oneshot(down).await.unwrap_err();
/// assert!(refused.downcast_ref::<InBackoff>().is_some()); // not sent: the host is in backoff
/// assert_eq!(service.oneshot("https://up.example/").await?, 200); // other hosts go through
/// # Ok(())
/// # }
/// ```
pub struct KeyedBackoffLayer<K, F, Cl = RetryErrors, Rp = CloneRequest> {
    policy: Policy<K, F, Cl, Rp>,
}

impl<K, F, Cl, Rp> Clone for KeyedBackoffLayer<K, F, Cl, Rp> {
    fn clone(&self) -> Self {
        KeyedBackoffLayer {
            policy: self.policy.clone(),
        }
    }
}

impl<K, F, Cl, Rp> fmt::Debug for KeyedBackoffLayer<K, F, Cl, Rp> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBackoffLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<K, F> KeyedBackoffLayer<K, F> {
    /// A layer over `gate`, keying each request with `key`, with the
    /// defaults above: any gate of the core's contract,
    /// [`Gate`](keyed_backoff::Gate), that is cheap to clone. The manager
    /// in an `Arc` (on any clock and hasher), a wrapper in an `Arc` (such as
    /// keyed-backoff-outage's `OutageAware`), or a store shared by a fleet
    /// (keyed-backoff-redis's `RedisBackoff`, keyed by `String`).
    ///
    /// A gate that answers at once (in process:
    /// [`Gate::ANSWERS_AT_ONCE`](keyed_backoff::Gate::ANSWERS_AT_ONCE)) is
    /// asked in place, and a request allocates nothing for its answers; a
    /// store's answers are awaited by the request's future, one boxed
    /// future per question. When the gate cannot answer whether a key may
    /// run (the store is unreachable), the request fails with the gate's
    /// error and is not sent; when it cannot record an attempt's result,
    /// the result is returned as it is, without a retry.
    ///
    /// A server's `Retry-After` is kept by the gate itself, so over a
    /// shared store it holds the key for every replica; it is capped at
    /// [`max_retry_after`](Self::max_retry_after), 5 minutes unless set.
    ///
    /// ```
    /// use keyed_backoff_tower::{Backoff, KeyedBackoffLayer};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<u32>::new(Duration::from_millis(10), Duration::from_secs(1))?);
    /// let layer = KeyedBackoffLayer::new(backoff, |tenant: &u32| *tenant);
    /// # let _ = layer;
    /// # Ok::<(), keyed_backoff_tower::ConfigError>(())
    /// ```
    pub fn new<G>(gate: G, key: F) -> Self
    where
        G: keyed_backoff::Gate<K> + Clone + 'static,
        K: Clone + Send + Sync + 'static,
    {
        KeyedBackoffLayer {
            policy: Policy {
                gate: Arc::new(gate),
                key: Arc::new(key),
                domain: None,
                classify: Arc::new(RetryErrors),
                replay: Arc::new(CloneRequest),
                budget: None,
                limits: Limits {
                    max_retries: 3,
                    max_wait: Duration::MAX,
                    max_retry_after: MAX_RETRY_AFTER,
                },
            },
        }
    }
}

/// The cap on a server's `Retry-After` unless
/// [`max_retry_after`](KeyedBackoffLayer::max_retry_after) sets one.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

impl<K, F, Cl, Rp> KeyedBackoffLayer<K, F, Cl, Rp> {
    /// Classify results with `classify` instead of treating every `Err` as
    /// a failure: `RetryHttp`, a closure, or any
    /// [`Classify`](crate::Classify).
    pub fn retry_if<Cl2>(self, classify: Cl2) -> KeyedBackoffLayer<K, F, Cl2, Rp> {
        self.with(|_, replay| (Arc::new(classify), replay))
    }

    /// Copy requests for retries with `replay` instead of `Clone`:
    /// [`NoReplay`](crate::NoReplay) for requests that cannot be copied
    /// (they are gated, never retried), or a closure.
    ///
    /// ```
    /// use keyed_backoff_tower::{Backoff, KeyedBackoffLayer, NoReplay};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// // A proxy's requests stream their bodies: gate them, never retry.
    /// struct Streamed { host: String }
    /// let backoff = Arc::new(Backoff::<String>::new(Duration::from_millis(100), Duration::from_secs(10))?);
    /// let layer = KeyedBackoffLayer::new(backoff, |req: &Streamed| req.host.clone()).replay(NoReplay);
    /// # let _ = layer;
    /// # Ok::<(), keyed_backoff_tower::ConfigError>(())
    /// ```
    pub fn replay<Rp2>(self, replay: Rp2) -> KeyedBackoffLayer<K, F, Cl, Rp2> {
        self.with(|classify, _| (classify, Arc::new(replay)))
    }

    /// The same layer with the classifier and the replay `swap` returns.
    fn with<Cl2, Rp2>(
        self,
        swap: impl FnOnce(Arc<Cl>, Arc<Rp>) -> (Arc<Cl2>, Arc<Rp2>),
    ) -> KeyedBackoffLayer<K, F, Cl2, Rp2> {
        let Policy {
            gate,
            key,
            domain,
            classify,
            replay,
            budget,
            limits,
        } = self.policy;
        let (classify, replay) = swap(classify, replay);
        let policy = Policy {
            gate,
            key,
            domain,
            classify,
            replay,
            budget,
            limits,
        };
        KeyedBackoffLayer { policy }
    }

    /// At most `n` retries per request, after its first attempt.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.policy.limits.max_retries = n;
        self
    }

    /// Bound retries by `budget`, shared by every request through this
    /// layer (and any other holder of the same `Arc`): one of
    /// keyed-backoff's budgets, such as a `TokenBucket`. Each request is
    /// reported to it, each attempt's outcome too (a failure or not), and
    /// it is asked before each retry. A refused retry is reported (a
    /// `tracing` event and the metric `keyed_backoff_tower_retries_denied_total`
    /// with `reason="budget"`) and the request returns its last result.
    ///
    /// ```
    /// use keyed_backoff_tower::{Backoff, KeyedBackoffLayer};
    /// use keyed_backoff_tower::keyed_backoff::budget::TokenBucket;
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// let backoff = Arc::new(Backoff::<String>::new(Duration::from_millis(100), Duration::from_secs(10))?);
    /// // gRPC's throttling: a failure takes a token, a success returns a
    /// // tenth; retries stop while half the bucket or less is left.
    /// let bucket = Arc::new(TokenBucket::new(100.0, 0.1)?);
    /// let layer = KeyedBackoffLayer::new(backoff, |host: &String| host.clone()).budget(Arc::clone(&bucket));
    /// # let _ = layer;
    /// # Ok::<(), keyed_backoff_tower::ConfigError>(())
    /// ```
    pub fn budget(mut self, budget: impl RetryBudget + 'static) -> Self {
        self.policy.budget = Some(Arc::new(budget));
        self
    }

    /// The longest a request waits for its key: a request whose key's
    /// window ends later is refused at once with
    /// [`InBackoff`](keyed_backoff::InBackoff), and a failed request whose
    /// retry would wait longer returns its result instead. A wait once
    /// started lasts until the key may run, even if another failure
    /// extends the window meanwhile.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.policy.limits.max_wait = wait;
        self
    }

    /// Never wait: `max_wait(Duration::ZERO)`. A request whose key is in
    /// backoff fails at once with the wait left, and a failed request is
    /// retried only if its key is not in backoff.
    pub fn fail_fast(self) -> Self {
        self.max_wait(Duration::ZERO)
    }

    /// Names the dependency a key's requests go to (a region, an upstream
    /// host), so that a gate with outage awareness sees that dependency's
    /// outage alone ([`Gate::fail_in`](keyed_backoff::Gate::fail_in)): its
    /// keys parked on their own ladder while every other key goes on. Both
    /// failures and successes name it, so a dependency whose keys mostly
    /// succeed is never taken for one that is down, and a key that has
    /// succeeded waits on its dependency's outage from its first request
    /// in it, without reaching the dependency to learn. Keyed by host, the key
    /// is its own domain: `.domain(|host: &String| Some(host.as_str()))`.
    /// A gate that keeps no domains ignores the name.
    ///
    /// ```
    /// use keyed_backoff_tower::{Backoff, KeyedBackoffLayer};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// // Any gate; over keyed-backoff-outage's `OutageAware` (in an `Arc`)
    /// // each region has an outage of its own.
    /// let gate = Arc::new(Backoff::<(String, u32)>::new(Duration::from_millis(10), Duration::from_secs(1))?);
    /// // Keyed by (region, tenant); the region names the dependency.
    /// let layer = KeyedBackoffLayer::new(gate, |req: &(String, u32)| req.clone())
    ///     .domain(|(region, _): &(String, u32)| Some(region.as_str()));
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn domain(
        mut self,
        domain: impl for<'a> Fn(&'a K) -> Option<&'a str> + Send + Sync + 'static,
    ) -> Self {
        self.policy.domain = Some(Arc::new(domain));
        self
    }

    /// The longest a server's `Retry-After` may hold a key; a longer one
    /// holds it this long. Unless set: 5 minutes, whatever the gate (a
    /// gate states no `max`).
    pub fn max_retry_after(mut self, cap: Duration) -> Self {
        self.policy.limits.max_retry_after = cap;
        self
    }
}

impl<S, K, F, Cl, Rp> Layer<S> for KeyedBackoffLayer<K, F, Cl, Rp> {
    type Service = KeyedBackoff<S, K, F, Cl, Rp>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedBackoff::new(inner, Arc::new(self.policy.clone()))
    }
}
