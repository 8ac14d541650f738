//! The layer for `http` services (hyper, axum, tonic): an overloaded
//! request gets a `429 Too Many Requests` with `Retry-After` as its
//! response, and an admitted request's seat is held until its response
//! body has been sent, not just its headers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};

use crate::layer::{Call, Failure, Seat};
use crate::{Class, Fairness, FairnessLayer, Overloaded};

impl Overloaded {
    /// This refusal as an HTTP response: `429 Too Many Requests` with
    /// `Retry-After` in whole seconds and, as a `text/plain` body, why: the
    /// priority level and the reason (its queue full, its wait ran out, no
    /// free seat), as this error displays it (feature `http`). For a
    /// hand-written error handler; [`FairnessLayer::http`] answers with it
    /// by itself.
    ///
    /// ```
    /// use fair_admission::{LevelSpec, Apf, BoxError, Class, FairnessLayer, LimitResponse, Overloaded};
    /// use tower::{Layer, ServiceExt};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let apf = Apf::builder(1).level("all", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let level = apf.level_id("all").unwrap();
    /// let layer = FairnessLayer::new(apf, move |_: &()| Class::new(level, "me"));
    /// // A request that never finishes holds the only seat.
    /// let service = layer.layer(tower::service_fn(|()| std::future::pending::<Result<(), BoxError>>()));
    /// let _held = tokio::spawn(service.clone().oneshot(()));
    /// tokio::task::yield_now().await;
    /// let refused = service.oneshot(()).await.unwrap_err().downcast::<Overloaded>().unwrap();
    /// let response: http::Response<String> = refused.to_http_response();
    /// assert_eq!(response.status(), 429);
    /// assert_eq!(response.headers()["retry-after"], "1");
    /// assert_eq!(
    ///     response.body(),
    ///     "too many requests: priority level \"all\": the priority level has no free seat; retry after 1s"
    /// );
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn to_http_response<B: From<String>>(&self) -> Response<B> {
        self.response(B::from(self.to_string()))
    }

    /// The refusal's status and headers, with `body`.
    fn response<B>(&self, body: B) -> Response<B> {
        let mut response = Response::new(body);
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        let headers = response.headers_mut();
        headers.insert(RETRY_AFTER, HeaderValue::from(self.retry_after_secs()));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
        response
    }
}

impl<Cl> FairnessLayer<Cl> {
    /// The layer for `http` services (feature `http`): a refused request is
    /// answered `429 Too Many Requests` with `Retry-After` (so the
    /// service's error type is kept: an axum `Router` takes it with
    /// `.layer(..)` as it is), and an admitted request holds its seat until
    /// its response body has been sent to the end, fails, or is dropped.
    /// A streamed body (a large list, server-sent events, a watch) thus
    /// counts against the level for as long as it streams, as Kubernetes
    /// holds a seat for the whole handler.
    ///
    /// ```
    /// use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, LimitResponse};
    /// use http::{Request, Response};
    /// use tower::{Layer, ServiceExt};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let apf = Apf::builder(100).level("all", LevelSpec::limited(1, LimitResponse::Reject)).build()?;
    /// let level = apf.level_id("all").unwrap();
    /// let layer = FairnessLayer::new(apf, move |req: &Request<String>| {
    ///     Class::new(level, req.headers().get("x-user").map_or("", |v| v.to_str().unwrap_or("")))
    /// })
    /// .http();
    /// let service = layer.layer(tower::service_fn(|_req: Request<String>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
    /// }));
    /// let response = service.oneshot(Request::new(String::new())).await?;
    /// assert_eq!(response.status(), 200);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn http(self) -> HttpFairnessLayer<Cl> {
        HttpFairnessLayer { layer: self }
    }
}

/// [`FairnessLayer`] for `http` services; from [`FairnessLayer::http`].
///
/// ```
/// use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, HttpFairnessLayer, LimitResponse};
/// let apf = Apf::builder(10).level("all", LevelSpec::exempt()).build()?;
/// let level = apf.level_id("all").unwrap();
/// let layer: HttpFairnessLayer<_> =
///     FairnessLayer::new(apf, move |_: &http::Request<()>| Class::new(level, "")).http();
/// # let _ = layer;
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub struct HttpFairnessLayer<Cl> {
    layer: FairnessLayer<Cl>,
}

impl<Cl> Clone for HttpFairnessLayer<Cl> {
    fn clone(&self) -> Self {
        HttpFairnessLayer {
            layer: self.layer.clone(),
        }
    }
}

impl<Cl> fmt::Debug for HttpFairnessLayer<Cl> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpFairnessLayer")
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, Cl> tower_layer::Layer<S> for HttpFairnessLayer<Cl> {
    type Service = HttpFairness<S, Cl>;

    fn layer(&self, inner: S) -> HttpFairness<S, Cl> {
        HttpFairness {
            fairness: tower_layer::Layer::layer(&self.layer, inner),
        }
    }
}

/// The service [`HttpFairnessLayer`] makes.
///
/// ```
/// use fair_admission::{LevelSpec, Apf, Class, FairnessLayer, HttpFairness, LimitResponse};
/// use tower::Layer;
/// let apf = Apf::builder(10).level("all", LevelSpec::exempt()).build()?;
/// let level = apf.level_id("all").unwrap();
/// let layer = FairnessLayer::new(apf, move |_: &http::Request<()>| Class::new(level, "")).http();
/// let service = layer.layer(tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// # let _ = service;
/// # Ok::<(), fair_admission::ConfigError>(())
/// ```
pub struct HttpFairness<S, Cl> {
    fairness: Fairness<S, Cl>,
}

impl<S: Clone, Cl> Clone for HttpFairness<S, Cl> {
    fn clone(&self) -> Self {
        HttpFairness {
            fairness: self.fairness.clone(),
        }
    }
}

impl<S: fmt::Debug, Cl> fmt::Debug for HttpFairness<S, Cl> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpFairness")
            .field("fairness", &self.fairness)
            .finish()
    }
}

impl<S, Cl, ReqB, ResB> tower_service::Service<Request<ReqB>> for HttpFairness<S, Cl>
where
    S: tower_service::Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    ResB: Body + Default,
    ResB::Data: From<String>,
    Cl: Fn(&Request<ReqB>) -> Class,
{
    type Response = Response<SeatBody<ResB>>;
    type Error = S::Error;
    type Future = HttpResponseFuture<S, Request<ReqB>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        HttpResponseFuture {
            call: self.fairness.start(req),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of an [`HttpFairness`] call: admission (it may wait in
    /// its queue), then the inner service's response, whose body holds the
    /// seat; a refusal is a `429` response.
    pub struct HttpResponseFuture<S, Req>
    where
        S: tower_service::Service<Req>,
    {
        #[pin]
        call: Call<S, Req>,
    }
}

impl<S, ReqB, ResB> Future for HttpResponseFuture<S, Request<ReqB>>
where
    S: tower_service::Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: Body + Default,
    ResB::Data: From<String>,
{
    type Output = Result<Response<SeatBody<ResB>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match std::task::ready!(self.project().call.poll(cx)) {
            Ok((response, seat)) => Ok(response.map(|body| SeatBody::new(body, Some(seat), None))),
            Err(Failure::Refused(refused)) => {
                // The body says why: the service's own body type, empty,
                // with the text in front of it.
                let why = Some(ResB::Data::from(refused.to_string()));
                Ok(refused.response(SeatBody::new(ResB::default(), None, why)))
            }
            // An error drops the seat.
            Err(Failure::Service(e)) => Err(e),
        })
    }
}

impl<S: tower_service::Service<Req>, Req> fmt::Debug for HttpResponseFuture<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponseFuture").finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// A response body that holds its request's seat until the body ends
    /// (its last frame is read), fails, or is dropped (the client went
    /// away); from [`HttpFairness`]. It is the inner body in every other
    /// respect.
    ///
    /// ```
    /// use fair_admission::SeatBody;
    /// fn takes_a_body(_: impl http_body::Body) {}
    /// fn check(body: SeatBody<String>) { takes_a_body(body) }
    /// ```
    pub struct SeatBody<B>
    where
        B: Body,
    {
        #[pin]
        inner: B,
        seat: Option<Seat>,
        // A refusal's text, sent before the (empty) inner body.
        refusal: Option<B::Data>,
    }
}

impl<B: Body> SeatBody<B> {
    fn new(inner: B, seat: Option<Seat>, refusal: Option<B::Data>) -> Self {
        SeatBody {
            inner,
            seat,
            refusal,
        }
    }

    /// Whether the body still holds a seat (it has not ended yet, and it
    /// is the body of an admitted request, not of a 429).
    ///
    /// ```
    /// use fair_admission::SeatBody;
    /// fn still_running(body: &SeatBody<String>) -> bool { body.holds_seat() }
    /// ```
    pub fn holds_seat(&self) -> bool {
        self.seat.is_some()
    }
}

impl<B: Body + fmt::Debug> fmt::Debug for SeatBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeatBody")
            .field("inner", &self.inner)
            .field("holds_seat", &self.seat.is_some())
            .finish()
    }
}

impl<B: Body> Body for SeatBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        if let Some(refusal) = this.refusal.take() {
            return Poll::Ready(Some(Ok(Frame::data(refusal))));
        }
        let polled = this.inner.poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // Sent, or failed: the seat is free now, not when the
            // connection gets around to dropping the body.
            this.seat.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.refusal.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let Some(refusal) = &self.refusal else {
            return self.inner.size_hint();
        };
        let text = refusal.remaining() as u64;
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(text));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(text));
        }
        hint
    }
}

impl<Cl> FairnessLayer<Cl> {
    /// A service that serves the layer's [dump](FairnessLayer::dump) as
    /// Kubernetes' API server serves its own (feature `http`): a request
    /// whose path ends in `/dump_priority_levels`, `/dump_queues` or
    /// `/dump_requests` gets that table as `text/plain`; the index (a path
    /// ending in `/api_priority_and_fairness`, with or without its slash,
    /// or the root, where a router nests the service under that prefix)
    /// lists the three; any other path gets `404` with the same list.
    /// Route `/debug/api_priority_and_fairness/` to it, behind whatever
    /// guards your debug endpoints.
    ///
    /// ```
    /// use fair_admission::{Apf, Class, FairnessLayer, LevelSpec};
    /// use tower::ServiceExt;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let apf = Apf::builder(10).level("exempt", LevelSpec::exempt()).build()?;
    /// let level = apf.level_id("exempt").unwrap();
    /// let layer = FairnessLayer::new(apf, move |_: &()| Class::new(level, ""));
    /// let request = http::Request::get("/debug/api_priority_and_fairness/dump_priority_levels")
    ///     .body(())?;
    /// let response = layer.debug_service().oneshot(request).await?;
    /// assert_eq!(response.status(), 200);
    /// assert!(response.body().starts_with("PriorityLevelName,"));
    /// let index = http::Request::get("/debug/api_priority_and_fairness/").body(())?;
    /// let response = layer.debug_service().oneshot(index).await?;
    /// assert!(response.body().contains("dump_queues"));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "http")))]
    pub fn debug_service(&self) -> DebugService {
        DebugService {
            layer: self.without_classifier(),
        }
    }
}

/// The content type of every text the layer answers with.
const TEXT: &str = "text/plain; charset=utf-8";

/// The endpoints, for the index and for a path that is none of them.
fn index(path: &str) -> String {
    let base = match path.rsplit_once('/') {
        Some((base, "api_priority_and_fairness")) => format!("{base}/api_priority_and_fairness"),
        Some((base, _)) => base.to_owned(),
        None => String::new(),
    };
    let mut text =
        String::from("API Priority and Fairness: the layer's levels, queues and requests\n");
    for (endpoint, what) in [
        ("dump_priority_levels", "one row per priority level"),
        ("dump_queues", "one row per queue"),
        ("dump_requests", "one row per request waiting or executing"),
    ] {
        text.push_str(&format!("{base}/{endpoint}: {what}\n"));
    }
    text
}

/// Serves a [`FairnessLayer`]'s dump like Kubernetes' debug endpoints;
/// from [`FairnessLayer::debug_service`].
#[derive(Clone, Debug)]
pub struct DebugService {
    layer: FairnessLayer<()>,
}

impl<B> tower_service::Service<Request<B>> for DebugService {
    type Response = Response<String>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Response<String>, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let path = req.uri().path().trim_end_matches('/');
        let (status, body) = match path.rsplit('/').next() {
            Some("dump_priority_levels") => (StatusCode::OK, self.layer.dump().priority_levels()),
            Some("dump_queues") => (StatusCode::OK, self.layer.dump().queues()),
            Some("dump_requests") => (StatusCode::OK, self.layer.dump().requests()),
            // Nested under its prefix, the index is the root.
            Some("api_priority_and_fairness" | "") => (StatusCode::OK, index(path)),
            _ => (
                StatusCode::NOT_FOUND,
                format!("no such endpoint: {path}\n\n{}", index(path)),
            ),
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        let text = HeaderValue::from_static(TEXT);
        response.headers_mut().insert(CONTENT_TYPE, text);
        std::future::ready(Ok(response))
    }
}
