//! A mocked API server for one namespaced resource in `default`: it lists
//! the objects it holds, streams scheduled watch events, and hands any
//! other request (a status patch) to the test.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::{Client, Resource};
use serde::Serialize;
use tokio::time::Instant;

type Body = UnsyncBoxBody<Bytes, Infallible>;
type Handle = tower_test::mock::Handle<Request<kube::client::Body>, Response<Body>>;

/// The test's answer to a request that is neither the list nor the watch:
/// from its method and path, a status and a JSON body.
type Other = Box<dyn FnMut(&Method, &str) -> (StatusCode, serde_json::Value) + Send>;

/// What the mocked API server holds: the objects its list returns, watch
/// events to send at given times after the start, and the answer to other
/// requests.
pub struct ApiServer<K> {
    pub objects: Vec<K>,
    pub events: Vec<(Duration, &'static str, K)>,
    other: Option<Other>,
    /// The namespace it serves, or every namespace.
    namespace: Option<&'static str>,
}

impl<K> ApiServer<K>
where
    K: Resource<DynamicType = ()> + Serialize + Send + 'static,
{
    pub fn new(objects: Vec<K>) -> Self {
        Self {
            objects,
            events: Vec::new(),
            other: None,
            namespace: Some("default"),
        }
    }

    /// Serves the objects of every namespace (for `Api::all`), not only
    /// `default`'s.
    pub fn cluster_wide(mut self) -> Self {
        self.namespace = None;
        self
    }

    /// Adds an event of `kind` (`ADDED`, `MODIFIED`, `DELETED`) at `at`.
    pub fn event(mut self, at: Duration, kind: &'static str, object: K) -> Self {
        self.events.push((at, kind, object));
        self
    }

    /// Answers requests other than the list and the watch with `other`
    /// (without it, such a request fails the test).
    pub fn answering(
        mut self,
        other: impl FnMut(&Method, &str) -> (StatusCode, serde_json::Value) + Send + 'static,
    ) -> Self {
        self.other = Some(Box::new(other));
        self
    }

    /// A client whose every request this server answers, from a task that
    /// runs until the test ends.
    pub fn client(self) -> Client {
        let (service, handle) =
            tower_test::mock::pair::<Request<kube::client::Body>, Response<Body>>();
        tokio::spawn(self.serve(handle));
        Client::new(service, "default")
    }

    async fn serve(mut self, mut handle: Handle) {
        let t0 = Instant::now();
        let collection = K::url_path(&(), self.namespace);
        let mut events = Some(std::mem::take(&mut self.events));
        while let Some((request, respond)) = handle.next_request().await {
            let path = request.uri().path().to_owned();
            let query = request.uri().query().unwrap_or_default().to_owned();
            if path != collection {
                let other = self
                    .other
                    .as_mut()
                    .unwrap_or_else(|| panic!("unexpected request {}", request.uri()));
                let (status, body) = other(request.method(), &path);
                let mut response = Response::new(json(&body));
                *response.status_mut() = status;
                respond.send_response(response);
            } else if query.contains("watch=true") {
                let scheduled = events.take().unwrap_or_default();
                respond.send_response(Response::new(watch(t0, scheduled)));
            } else {
                let list = serde_json::json!({
                    "apiVersion": K::api_version(&()),
                    "kind": format!("{}List", K::kind(&())),
                    "metadata": { "resourceVersion": "1" },
                    "items": self.objects,
                });
                respond.send_response(Response::new(json(&list)));
            }
        }
    }
}

fn json(value: &serde_json::Value) -> Body {
    Full::new(Bytes::from(serde_json::to_vec(value).unwrap())).boxed_unsync()
}

/// A watch stream sending each event at its time after `t0`, then staying
/// open for the rest of the test.
fn watch<K: Serialize + Send + 'static>(
    t0: Instant,
    scheduled: Vec<(Duration, &'static str, K)>,
) -> Body {
    let (tx, rx) = mpsc::unbounded::<Result<http_body::Frame<Bytes>, Infallible>>();
    tokio::spawn(async move {
        for (at, kind, object) in scheduled {
            tokio::time::sleep_until(t0 + at).await;
            let event = serde_json::json!({ "type": kind, "object": object });
            let mut line = serde_json::to_vec(&event).unwrap();
            line.push(b'\n');
            tx.unbounded_send(Ok(http_body::Frame::data(Bytes::from(line))))
                .unwrap();
        }
        std::future::pending::<()>().await;
        drop(tx);
    });
    StreamBody::new(rx).boxed_unsync()
}
