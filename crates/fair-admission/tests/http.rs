//! The `http` layer in front of a real hyper server on loopback: streamed
//! response bodies hold their seats to the end, and overloaded requests get
//! a 429 with `Retry-After`. Nothing here waits for time: bodies stream as
//! the test releases their chunks.
#![cfg(feature = "http")]

mod loopback;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use fair_admission::{Apf, Class, FairnessLayer, LevelSpec, LimitResponse};
use http::{Request, Response, StatusCode};

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc};
use tower::Layer;

/// Counts bodies being streamed; one is counted from its handler's start to
/// the moment its last chunk has been handed over (or it is dropped).
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

struct Streaming(Arc<InFlight>);

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Each admitted response's chunk gate, in the order the handler ran.
type Gates = Arc<std::sync::Mutex<Vec<Arc<Semaphore>>>>;

/// Serves on a free loopback port; every admitted response streams three
/// chunks, each released by one permit of its gate.
async fn serve(seats: u32, in_flight: Arc<InFlight>, gates: Gates) -> std::net::SocketAddr {
    let apf = Apf::builder(seats)
        .level("all", LevelSpec::limited(1, LimitResponse::Reject))
        .build()
        .unwrap();
    let level = apf.level_id("all").unwrap();
    let layer = FairnessLayer::new(apf, move |_: &Request<hyper::body::Incoming>| {
        Class::new(level, "everyone")
    })
    .retry_after(Duration::from_secs(3))
    .http();
    let handler = tower::service_fn(move |_req: Request<hyper::body::Incoming>| {
        let in_flight = Arc::clone(&in_flight);
        let chunks = Arc::new(Semaphore::new(0));
        gates.lock().unwrap().push(Arc::clone(&chunks));
        async move {
            let n = in_flight.now.fetch_add(1, Ordering::SeqCst) + 1;
            in_flight.most.fetch_max(n, Ordering::SeqCst);
            let guard = Streaming(in_flight);
            let (tx, rx) = mpsc::channel::<Bytes>(1);
            tokio::spawn(async move {
                for i in 0..3 {
                    chunks.acquire().await.unwrap().forget();
                    if tx.send(Bytes::from(format!("chunk {i}\n"))).await.is_err() {
                        break;
                    }
                }
                drop(guard);
            });
            Ok::<_, Infallible>(Response::new(BodyExt::boxed(Chunks(rx))))
        }
    });
    loopback::serve(layer.layer(handler)).await
}

/// A body streaming what arrives on a channel, until it closes.
struct Chunks(mpsc::Receiver<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(http_body::Frame::data(c))))
    }
}

/// Sends one GET on its own connection; returns the status, `Retry-After`,
/// and the response (its body not yet read).
async fn get(addr: std::net::SocketAddr) -> Response<hyper::body::Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get("/").body(Empty::<Bytes>::new()).unwrap();
    sender.send_request(req).await.unwrap()
}

#[tokio::test]
async fn a_streamed_body_holds_its_seat_until_it_ends() {
    let in_flight = Arc::new(InFlight::default());
    let gates = Gates::default();
    let addr = serve(2, Arc::clone(&in_flight), Arc::clone(&gates)).await;
    let release = |i: usize| gates.lock().unwrap()[i].add_permits(3);

    // Two requests get the two seats and start streaming.
    let mut streaming = vec![get(addr).await, get(addr).await];
    for r in &streaming {
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Their headers are out, but their bodies are not: three more requests
    // find no seat and are told when to come back.
    for _ in 0..3 {
        let refused = get(addr).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["retry-after"], "3");
    }
    assert_eq!(in_flight.most.load(Ordering::SeqCst), 2);

    // One body ends: its seat comes back, and a new request gets it.
    release(0);
    let first = streaming
        .remove(0)
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(first, "chunk 0\nchunk 1\nchunk 2\n");
    let next = until_ok(addr).await;
    streaming.push(next);
    assert_eq!(
        in_flight.most.load(Ordering::SeqCst),
        2,
        "never more bodies than seats"
    );

    // The rest end; nothing was ever streamed beyond the two seats.
    release(1);
    release(2);
    for r in streaming {
        r.into_body().collect().await.unwrap();
    }
    assert_eq!(in_flight.most.load(Ordering::SeqCst), 2);
}

/// A GET that may race the server's release of a seat: retried until it
/// is admitted, with a deadline (no sleeping on a clock).
async fn until_ok(addr: std::net::SocketAddr) -> Response<hyper::body::Incoming> {
    for _ in 0..1_000 {
        let r = get(addr).await;
        if r.status() == StatusCode::OK {
            return r;
        }
        tokio::task::yield_now().await;
    }
    panic!("no seat came back after a body ended");
}
