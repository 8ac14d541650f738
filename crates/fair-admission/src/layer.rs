//! A tower layer that admits requests through an [`Apf`].

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Admit, Apf, LevelId, LevelStats, Rejected, Ticket, WorkEstimate};
use crate::observe::Observer;

/// An error boxed as tower middleware boxes them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where a request goes: its priority level, its flow (Kubernetes'
/// distinguisher: a user name, a namespace), and its width in seats.
///
/// ```
/// use fair_admission::{Apf, Class, LimitResponse};
/// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
/// let class = Class::new(apf.level_id("l").unwrap(), "alice");
/// assert_eq!(class.width, 1);
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Class {
    /// The priority level.
    pub level: LevelId,
    /// The flow schema that classified the request (empty if none): with
    /// the flow it identifies the flow, as in Kubernetes, so that two
    /// schemas sending the same user to one level keep separate flows.
    pub schema: String,
    /// The flow within the level (Kubernetes' flow distinguisher):
    /// requests of one flow share a hand of queues.
    pub flow: String,
    /// Seats the request occupies while it runs (at least 1).
    pub width: u32,
    /// How long its seats stay held after its response ends (work it
    /// leaves behind, such as events to watchers); zero by default.
    pub additional_latency: Duration,
}

impl Class {
    /// A request one seat wide of `flow` at `level`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice");
    /// assert_eq!((class.flow.as_str(), class.width), ("alice", 1));
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn new(level: LevelId, flow: impl Into<String>) -> Self {
        Class {
            level,
            schema: String::new(),
            flow: flow.into(),
            width: 1,
            additional_latency: Duration::ZERO,
        }
    }

    /// The same request, classified by the flow schema `name`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let class = Class::new(apf.level_id("l").unwrap(), "alice").schema("service-accounts");
    /// assert_eq!(class.schema, "service-accounts");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn schema(mut self, name: impl Into<String>) -> Self {
        self.schema = name.into();
        self
    }

    /// The same request, costing `estimate`: its width is the estimate's
    /// [`max_seats`](WorkEstimate::max_seats), and its seats stay held for
    /// the estimate's additional latency after its response ends.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse, WorkEstimate};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let write = Class::new(apf.level_id("l").unwrap(), "alice").work(WorkEstimate::mutating(250));
    /// assert_eq!(write.width, 10);
    /// assert_eq!(write.additional_latency.as_micros(), 12_500);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn work(mut self, estimate: WorkEstimate) -> Self {
        self.width = estimate.max_seats();
        self.additional_latency = estimate.additional_latency;
        self
    }

    /// What the flow is hashed as: (schema, distinguisher).
    pub(crate) fn flow_key(&self) -> (&str, &str) {
        (&self.schema, &self.flow)
    }

    /// The same request, `seats` seats wide (at least 1: a width of 0 is
    /// taken as 1, as the queue set does).
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let wide = Class::new(apf.level_id("l").unwrap(), "list-pods").width(4);
    /// assert_eq!(wide.width, 4);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn width(mut self, seats: u32) -> Self {
        self.width = seats.max(1);
        self
    }
}

/// The layer's refusal: answer it with HTTP 429 and a `Retry-After` header
/// of [`retry_after_secs`](Self::retry_after_secs), so that clients back off.
/// Services behind [`FairnessLayer`] fail with it boxed in a [`BoxError`].
///
/// ```
/// use fair_admission::{BoxError, Overloaded};
/// // In the HTTP layer's error handler:
/// fn status_and_retry_after(err: &BoxError) -> (u16, Option<u64>) {
///     match err.downcast_ref::<Overloaded>() {
///         Some(o) => (429, Some(o.retry_after_secs())),
///         None => (500, None),
///     }
/// }
/// # let _ = status_and_retry_after;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Overloaded {
    reason: Rejected,
    retry_after: Duration,
}

impl Overloaded {
    /// Why the request was refused.
    ///
    /// ```
    /// # use fair_admission::{Overloaded, Rejected};
    /// # fn f(o: Overloaded) -> bool {
    /// o.reason() == Rejected::QueueFull
    /// # }
    /// ```
    pub fn reason(&self) -> Rejected {
        self.reason
    }

    /// How long the client should wait before retrying.
    ///
    /// ```
    /// # use fair_admission::Overloaded;
    /// # fn f(o: Overloaded) -> std::time::Duration {
    /// o.retry_after()
    /// # }
    /// ```
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, rounded up and
    /// at least 1: the value of the `Retry-After` header.
    ///
    /// ```
    /// # use fair_admission::Overloaded;
    /// # fn f(o: Overloaded) -> String {
    /// o.retry_after_secs().to_string()
    /// # }
    /// ```
    pub fn retry_after_secs(&self) -> u64 {
        let d = self.retry_after;
        (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
    }
}

impl fmt::Display for Overloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "too many requests: {}; retry after {}s",
            self.reason,
            self.retry_after_secs()
        )
    }
}

impl std::error::Error for Overloaded {}

/// State shared by the layer and every service it makes.
pub(crate) struct Shared {
    state: Mutex<State>,
    observer: Observer,
}

/// The layer's time limits, copied into each service it makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    queue_wait: Duration,
    /// A fixed `Retry-After`, or `None` for each level's adaptive one.
    retry_after: Option<Duration>,
}

struct State {
    apf: Apf,
    /// Queued requests, woken when dispatched.
    waiters: HashMap<Ticket, oneshot::Sender<()>>,
    /// The start of the `Apf`'s clock.
    origin: Instant,
}

impl State {
    /// Gives the `Apf` the time `now` (read by the caller, which needs it
    /// anyway), waking what a reallocation of seats dispatched. Returns
    /// whether seats were reallocated (then every level's limit may have
    /// moved).
    fn advance(&mut self, now: Instant) -> bool {
        let before = self.apf.last_reallocation();
        let dispatched = self.apf.advance(now.saturating_duration_since(self.origin));
        self.wake(dispatched);
        self.apf.last_reallocation() != before
    }

    /// When seats are next reallocated, if any level lends.
    fn next_reallocation(&self) -> Option<Instant> {
        let at = self.apf.next_reallocation()?;
        Some(self.origin.checked_add(at).unwrap_or_else(far_future))
    }

    /// The refusal of a request of `level` for `reason`: the `Retry-After`
    /// is the level's adaptive one unless the layer fixes it.
    fn overloaded(&self, limits: Limits, level: LevelId, reason: Rejected) -> Overloaded {
        let retry_after = limits
            .retry_after
            .or_else(|| self.apf.retry_after(level))
            .unwrap_or(Duration::from_secs(1));
        Overloaded {
            reason,
            retry_after,
        }
    }

    fn wake(&mut self, dispatched: Vec<Ticket>) {
        for ticket in dispatched {
            if let Some(tx) = self.waiters.remove(&ticket) {
                // A waiter that went away completes its own ticket (see
                // `Waiting::drop`), so a failed send needs nothing here.
                let _ = tx.send(());
            }
        }
    }
}

impl Shared {
    /// Admits a request, waiting in its queue up to `limits.queue_wait`.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        class: Class,
        limits: Limits,
    ) -> Result<Seat, Overloaded> {
        let arrived = Instant::now();
        let level = class.level;
        let (ticket, rx) = {
            let mut state = self.state.lock();
            self.advance(&mut state, arrived);
            let admitted = state.apf.admit(class.level, &class.flow_key(), class.width);
            self.observer.level(&state.apf, level);
            match admitted {
                Admit::Dispatched(ticket) => {
                    self.observer.waited(level, arrived, arrived, true);
                    return Ok(self.seat(ticket, &class, arrived));
                }
                Admit::Rejected(reason) => {
                    self.observer.rejected(&class, reason);
                    return Err(state.overloaded(limits, level, reason));
                }
                Admit::Queued(ticket) => {
                    let (tx, rx) = oneshot::channel();
                    state.waiters.insert(ticket, tx);
                    (ticket, rx)
                }
            }
        };
        let mut waiting = Waiting {
            shared: Arc::clone(self),
            ticket,
            level,
            armed: true,
        };
        // The wait ends when the request is dispatched or its time is up;
        // meanwhile it wakes at each reallocation of seats between levels,
        // so that borrowed seats reach a level whose requests are all
        // waiting, however quiet the server is otherwise.
        let deadline = arrived
            .checked_add(limits.queue_wait)
            .unwrap_or_else(far_future);
        let mut rx = rx;
        let dispatched = loop {
            let wake_at = match self.state.lock().next_reallocation() {
                Some(at) => at.min(deadline),
                None => deadline,
            };
            // A runtime built without `enable_time` panics when a timer is
            // made; refuse the request instead (dropping `waiting` gives
            // its place up).
            let rx = &mut rx;
            let Ok(timed) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                tokio::time::timeout_at(wake_at, rx)
            })) else {
                drop(waiting);
                self.observer.rejected(&class, Rejected::NoTimer);
                let state = self.state.lock();
                return Err(state.overloaded(limits, level, Rejected::NoTimer));
            };
            match timed.await {
                Ok(woken) => break woken.is_ok(),
                Err(_) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    let mut state = self.state.lock();
                    self.advance(&mut state, now);
                }
            }
        };
        waiting.armed = false;
        let now = Instant::now();
        if dispatched {
            self.observer.waited(level, arrived, now, true);
            return Ok(self.seat(ticket, &class, now));
        }
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        match state.apf.cancel(ticket) {
            Some(dispatched) => {
                state.waiters.remove(&ticket);
                state.wake(dispatched);
                self.observer.level(&state.apf, level);
                self.observer.waited(level, arrived, now, false);
                self.observer.rejected(&class, Rejected::TimedOut);
                Err(state.overloaded(limits, level, Rejected::TimedOut))
            }
            // Dispatched at the moment the wait ran out: the seat is ours.
            None => Ok(self.seat(ticket, &class, now)),
        }
    }

    /// Gives the `Apf` the time; after a reallocation of seats, every
    /// level's gauges are brought up to date.
    fn advance(&self, state: &mut State, now: Instant) {
        if state.advance(now) {
            for level in state.apf.level_ids() {
                self.observer.level(&state.apf, level);
            }
        }
    }

    fn seat(self: &Arc<Self>, ticket: Ticket, class: &Class, started: Instant) -> Seat {
        Seat {
            shared: Arc::clone(self),
            ticket,
            level: class.level,
            started,
            linger: class.additional_latency,
        }
    }

    /// Frees a finished request's seats at `now`, charging it the time it
    /// held them.
    fn release(&self, ticket: Ticket, level: LevelId, held: Duration, now: Instant) {
        let mut state = self.state.lock();
        self.advance(&mut state, now);
        let dispatched = state.apf.complete(ticket, held).unwrap_or_default();
        state.wake(dispatched);
        self.observer.level(&state.apf, level);
    }
}

/// An instant no wait reaches (about 30 years ahead, as tokio's own
/// "never" is).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// A queued request's place; if its future is dropped while it waits, the
/// place is given up (or, if it was just dispatched, the seat is released).
struct Waiting {
    shared: Arc<Shared>,
    ticket: Ticket,
    level: LevelId,
    armed: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.shared.state.lock();
        self.shared.advance(&mut state, Instant::now());
        state.waiters.remove(&self.ticket);
        let dispatched = match state.apf.cancel(self.ticket) {
            Some(dispatched) => dispatched,
            None => state
                .apf
                .complete(self.ticket, Duration::ZERO)
                .unwrap_or_default(),
        };
        state.wake(dispatched);
        self.shared.observer.level(&state.apf, self.level);
    }
}

/// Seats held by a running request, released (with the time it ran) when
/// it finishes, fails, or is dropped.
pub(crate) struct Seat {
    shared: Arc<Shared>,
    ticket: Ticket,
    level: LevelId,
    started: Instant,
    /// How long the seats stay held once the request is done.
    linger: Duration,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let (ticket, level) = (self.ticket, self.level);
        let now = Instant::now();
        let held = now
            .saturating_duration_since(self.started)
            .saturating_add(self.linger);
        if !self.linger.is_zero() {
            // Held on for the work the request left behind, on a timer of
            // the runtime it ran on. Without a runtime with timers, the
            // seats are freed now rather than never.
            let timer = tokio::runtime::Handle::try_current().ok().and_then(|rt| {
                let linger = self.linger;
                std::panic::catch_unwind(|| {
                    let _entered = rt.enter();
                    (rt.clone(), tokio::time::sleep(linger))
                })
                .ok()
            });
            if let Some((rt, sleep)) = timer {
                let shared = Arc::clone(&self.shared);
                rt.spawn(async move {
                    sleep.await;
                    shared.release(ticket, level, held, Instant::now());
                });
                return;
            }
        }
        self.shared.release(ticket, level, held, now);
    }
}

/// A tower [`Layer`](tower_layer::Layer) that puts Kubernetes' API Priority
/// and Fairness in front of a service: each request is classified into a
/// priority level and a flow, admitted through an [`Apf`] (waiting in its
/// queue up to a time limit), and refused with [`Overloaded`] when its
/// queue is full, its level has no seat, or its wait runs out. Time is
/// tokio's, so paused time drives it in tests.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use fair_admission::{Apf, Class, FairnessLayer, LimitResponse};
/// use tower_layer::Layer;
/// use tower_service::Service;
/// use std::time::Duration;
///
/// let apf = Apf::builder(100)
///     .level("workload", 1, LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 })
///     .build()?;
/// let workload = apf.level_id("workload").unwrap();
/// // Requests are (user, path) here; the user is the flow.
/// let layer = FairnessLayer::new(apf, move |req: &(String, String)| Class::new(workload, req.0.clone()))
///     .queue_wait(Duration::from_secs(15));
/// # #[derive(Clone)] struct Echo;
/// # impl Service<(String, String)> for Echo {
/// #     type Response = String; type Error = std::convert::Infallible;
/// #     type Future = std::future::Ready<Result<String, std::convert::Infallible>>;
/// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> { std::task::Poll::Ready(Ok(())) }
/// #     fn call(&mut self, req: (String, String)) -> Self::Future { std::future::ready(Ok(req.1)) }
/// # }
/// let mut service = layer.layer(Echo);
/// let answer = service.call(("alice".into(), "/api/v1/pods".into())).await.unwrap();
/// assert_eq!(answer, "/api/v1/pods");
/// # Ok::<(), fair_admission::ConfigError>(())
/// # }).unwrap();
/// ```
pub struct FairnessLayer<Cl> {
    shared: Arc<Shared>,
    classify: Arc<Cl>,
    limits: Limits,
}

impl<Cl> Clone for FairnessLayer<Cl> {
    fn clone(&self) -> Self {
        FairnessLayer {
            shared: Arc::clone(&self.shared),
            classify: Arc::clone(&self.classify),
            limits: self.limits,
        }
    }
}

impl<Cl> fmt::Debug for FairnessLayer<Cl> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairnessLayer")
            .field("queue_wait", &self.limits.queue_wait)
            .field("retry_after", &self.limits.retry_after)
            .finish_non_exhaustive()
    }
}

impl<Cl> FairnessLayer<Cl> {
    /// A layer admitting through `apf`, classifying each request with
    /// `classify`. Defaults: a queued request waits at most 15 s (a quarter
    /// of the API server's 60 s request timeout, as Kubernetes does), and
    /// refusals advise each level's adaptive `Retry-After`
    /// ([`Apf::retry_after`]: from 1 s, doubling up to 32 s while the level
    /// keeps refusing, as Kubernetes does).
    ///
    /// ```
    /// use fair_admission::{Apf, Class, FairnessLayer, LimitResponse};
    /// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let layer = FairnessLayer::new(apf, move |user: &String| Class::new(l, user.clone()));
    /// # let _ = layer;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn new(apf: Apf, classify: Cl) -> Self {
        FairnessLayer {
            shared: Arc::new(Shared {
                observer: Observer::new(&apf),
                state: Mutex::new(State {
                    apf,
                    waiters: HashMap::new(),
                    origin: Instant::now(),
                }),
            }),
            classify: Arc::new(classify),
            limits: Limits {
                queue_wait: Duration::from_secs(15),
                retry_after: None,
            },
        }
    }

    /// How long a queued request may wait for a seat before it is refused
    /// with [`Rejected::TimedOut`].
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, FairnessLayer, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// # let l = apf.level_id("l").unwrap();
    /// use std::time::Duration;
    /// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()))
    ///     .queue_wait(Duration::from_secs(5));
    /// # let _ = layer;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn queue_wait(mut self, wait: Duration) -> Self {
        self.limits.queue_wait = wait;
        self
    }

    /// A fixed wait for every refusal to advise ([`Overloaded::retry_after`]),
    /// instead of each level's adaptive one.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, FairnessLayer, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// # let l = apf.level_id("l").unwrap();
    /// use std::time::Duration;
    /// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()))
    ///     .retry_after(Duration::from_secs(2));
    /// # let _ = layer;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn retry_after(mut self, wait: Duration) -> Self {
        self.limits.retry_after = Some(wait);
        self
    }

    /// The counts of `level` across every service the layer made, or
    /// `None` if the level belongs to another `Apf`.
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, FairnessLayer, LimitResponse};
    /// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()));
    /// assert_eq!(layer.level_stats(l).unwrap().seats, 10);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_stats(&self, level: LevelId) -> Option<LevelStats> {
        self.shared.state.lock().apf.level_stats(level)
    }
}

impl<S, Cl> tower_layer::Layer<S> for FairnessLayer<Cl> {
    type Service = Fairness<S, Cl>;

    fn layer(&self, inner: S) -> Fairness<S, Cl> {
        Fairness {
            inner,
            shared: Arc::clone(&self.shared),
            classify: Arc::clone(&self.classify),
            limits: self.limits,
        }
    }
}

/// The service [`FairnessLayer`] wraps around an inner service.
///
/// ```
/// use fair_admission::{Apf, Class, Fairness, FairnessLayer, LimitResponse};
/// use tower_layer::Layer;
/// let apf = Apf::builder(10).level("l", 1, LimitResponse::Reject).build()?;
/// let l = apf.level_id("l").unwrap();
/// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()));
/// let service: Fairness<(), _> = layer.layer(());
/// # let _ = service;
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub struct Fairness<S, Cl> {
    inner: S,
    shared: Arc<Shared>,
    classify: Arc<Cl>,
    limits: Limits,
}

impl<S: Clone, Cl> Clone for Fairness<S, Cl> {
    fn clone(&self) -> Self {
        Fairness {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            classify: Arc::clone(&self.classify),
            limits: self.limits,
        }
    }
}

impl<S: fmt::Debug, Cl> fmt::Debug for Fairness<S, Cl> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fairness")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// One request's share of a [`Fairness`] service: its class and the inner
/// service that goes with it.
pub(crate) struct Call<S> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared>,
    pub(crate) class: Class,
    pub(crate) limits: Limits,
}

impl<S: Clone, Cl> Fairness<S, Cl> {
    /// Classifies `req` and takes the inner service for it: a clone takes
    /// its place, and the one that was (possibly) made ready goes with the
    /// request.
    pub(crate) fn start<Req>(&mut self, req: &Req) -> Call<S>
    where
        Cl: Fn(&Req) -> Class,
    {
        let class = (self.classify)(req);
        let clone = self.inner.clone();
        Call {
            inner: std::mem::replace(&mut self.inner, clone),
            shared: Arc::clone(&self.shared),
            class,
            limits: self.limits,
        }
    }
}

impl<S, Cl, Req> tower_service::Service<Req> for Fairness<S, Cl>
where
    S: tower_service::Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    Req: Send + 'static,
    Cl: Fn(&Req) -> Class,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    /// Always ready: admission happens per request, in `call`, and the
    /// inner service's readiness is awaited once the request has its seat.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let Call {
            mut inner,
            shared,
            class,
            limits,
        } = self.start(&req);
        Box::pin(async move {
            let seat = shared.acquire(class, limits).await?;
            std::future::poll_fn(|cx| inner.poll_ready(cx))
                .await
                .map_err(Into::into)?;
            let response = inner.call(req).await.map_err(Into::into);
            drop(seat);
            response
        })
    }
}
