//! The tower layer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::service::Fairness;
use super::shared::{Limits, Shared};
use crate::{Apf, Dump, LevelId, LevelStats};

/// A tower [`Layer`](tower_layer::Layer) that puts Kubernetes' API Priority
/// and Fairness in front of a service: each request is classified into a
/// priority level and a flow, admitted through an [`Apf`] (waiting in its
/// queue up to a time limit), and refused with [`Overloaded`](crate::Overloaded) when its
/// queue is full, its level has no seat, or its wait runs out. Time is
/// tokio's, so paused time drives it in tests.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
/// use tower_layer::Layer;
/// use tower_service::Service;
/// use std::time::Duration;
///
/// let apf = Apf::builder(100)
///     .level("workload", LevelSpec::limited(1, LimitResponse::Queue { queues: 64, queue_length_limit: 50, hand_size: 8 }))
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
    pub(crate) shared: Arc<Shared>,
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
    /// use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
    /// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let layer = FairnessLayer::new(apf, move |user: &String| Class::new(l, user.clone()));
    /// # let _ = layer;
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn new(apf: Apf, classify: Cl) -> Self {
        FairnessLayer {
            shared: Arc::new(Shared::new(apf)),
            classify: Arc::new(classify),
            limits: Limits {
                queue_wait: Duration::from_secs(15),
                retry_after: None,
            },
        }
    }

    /// How long a queued request may wait for a seat before it is refused
    /// with [`Rejected::TimedOut`](crate::Rejected::TimedOut).
    ///
    /// ```
    /// # use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
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

    /// A fixed wait for every refusal to advise ([`Overloaded::retry_after`](crate::Overloaded::retry_after)),
    /// instead of each level's adaptive one.
    ///
    /// ```
    /// # use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
    /// # let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
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
    /// # use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
    /// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()));
    /// assert_eq!(layer.level_stats(l).unwrap().seats, 10);
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn level_stats(&self, level: LevelId) -> Option<LevelStats> {
        self.shared.level_stats(level)
    }

    /// Every level, queue and request of the layer's [`Apf`] now (see
    /// [`Apf::dump`]; the `http` feature serves it as Kubernetes does).
    ///
    /// ```
    /// # use fair_admission::{Apf, Class, FairnessLayer, LevelSpec};
    /// let apf = Apf::builder(10).level("l", LevelSpec::exempt()).build()?;
    /// let l = apf.level_id("l").unwrap();
    /// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()));
    /// assert_eq!(layer.dump().levels[0].name, "l");
    /// # Ok::<(), fair_admission::ConfigError>(())
    /// ```
    pub fn dump(&self) -> Dump {
        self.shared.dump()
    }
}

impl<Cl> FairnessLayer<Cl> {
    /// The same layer's state, without its classifier.
    #[cfg(feature = "http")]
    pub(crate) fn without_classifier(&self) -> FairnessLayer<()> {
        FairnessLayer {
            shared: Arc::clone(&self.shared),
            classify: Arc::new(()),
            limits: self.limits,
        }
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
