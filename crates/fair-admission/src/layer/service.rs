//! The service the layer wraps around an inner service.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::future::{Acquire, Call, ResponseFuture};
use super::shared::{Limits, Shared};
use super::{BoxError, Class};

/// The service [`FairnessLayer`](crate::FairnessLayer) wraps around an inner service.
///
/// ```
/// use fair_admission::{LevelSpec, Apf, Class, Fairness, FairnessLayer, LimitResponse};
/// use tower_layer::Layer;
/// let apf = Apf::builder(10).level("l", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
/// let l = apf.level_id("l").unwrap();
/// let layer = FairnessLayer::new(apf, move |u: &String| Class::new(l, u.clone()));
/// let service: Fairness<(), _> = layer.layer(());
/// # let _ = service;
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub struct Fairness<S, Cl> {
    pub(crate) inner: S,
    pub(crate) shared: Arc<Shared>,
    pub(crate) classify: Arc<Cl>,
    pub(crate) limits: Limits,
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

impl<S: Clone, Cl> Fairness<S, Cl> {
    /// Classifies `req` and takes the inner service for it: a clone takes
    /// its place, and the one that was (possibly) made ready goes with the
    /// request.
    pub(crate) fn start<Req>(&mut self, req: Req) -> Call<S, Req>
    where
        S: tower_service::Service<Req>,
        Cl: Fn(&Req) -> Class,
    {
        let class = (self.classify)(&req);
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let acquire = Acquire::new(Arc::clone(&self.shared), class, self.limits);
        Call::new(acquire, inner, req)
    }
}

impl<S, Cl, Req> tower_service::Service<Req> for Fairness<S, Cl>
where
    S: tower_service::Service<Req> + Clone,
    S::Error: Into<BoxError>,
    Cl: Fn(&Req) -> Class,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Req>;

    /// Always ready: admission happens per request, when its future is
    /// first polled, and the inner service's readiness is awaited once the
    /// request has its seat.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        ResponseFuture::new(self.start(req))
    }
}
