//! The README's first example, over real HTTP: hyper's client through the
//! layer as the README configures it, against two servers on loopback, one
//! answering every request `429` with `Retry-After: 30`. The key is the
//! request's authority (loopback's host is the same for both servers).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use keyed_backoff_tower::keyed_backoff::clock::Clock;
use keyed_backoff_tower::{Backoff, BoxError, InBackoff, KeyedBackoffLayer, RetryHttp};
use tower::{Layer, ServiceExt};

/// A server answering every request `status` with `Retry-After: 30`,
/// counting the requests that reached it; it stops with the test's
/// runtime.
async fn serve(status: u16, reached: Arc<AtomicUsize>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let reached = Arc::clone(&reached);
            let service = hyper::service::service_fn(move |_req| {
                reached.fetch_add(1, Ordering::SeqCst);
                async move {
                    Response::builder()
                        .status(status)
                        .header("retry-after", "30")
                        .body(Empty::<Bytes>::new())
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_example_429_retry_after_holds_that_key_and_no_other() {
    let (busy_reached, calm_reached) = (Arc::default(), Arc::default());
    let busy = serve(429, Arc::clone(&busy_reached)).await;
    let calm = serve(200, Arc::clone(&calm_reached)).await;

    // The README's layer, keyed by authority instead of host.
    let backoff = Arc::new(
        Backoff::<String>::new(Duration::from_millis(100), Duration::from_secs(10)).unwrap(),
    );
    let authority = |req: &Request<Empty<Bytes>>| req.uri().authority().unwrap().to_string();
    let layer = KeyedBackoffLayer::new(Arc::clone(&backoff), authority)
        .retry_if(RetryHttp)
        .max_retry_after(Duration::from_secs(60))
        .fail_fast();
    let hyper = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = layer.layer(tower::service_fn(move |req| {
        let hyper = hyper.clone();
        async move {
            let response = hyper.request(req).await?;
            let status = response.status();
            let headers = response.headers().clone();
            response.into_body().collect().await?;
            let mut plain = Response::builder().status(status).body(())?;
            *plain.headers_mut() = headers;
            Ok::<_, BoxError>(plain)
        }
    }));
    let get = |addr: SocketAddr| {
        Request::get(format!("http://{addr}/"))
            .body(Empty::new())
            .unwrap()
    };

    let sent = std::time::Instant::now();
    let first = client.clone().oneshot(get(busy)).await.unwrap();
    assert_eq!(first.status(), 429);
    assert_eq!(busy_reached.load(Ordering::SeqCst), 1);

    // That key is held for the server's 30 s, far past the backoff's own
    // 100 ms: the next request is refused without reaching the server.
    // The hold began after `sent`, so what is left of it is at least 30 s
    // less the time since then, however slow the machine.
    let held = |remaining: Duration| {
        remaining <= Duration::from_secs(30)
            && remaining + sent.elapsed() >= Duration::from_secs(30)
    };
    let refused = client.clone().oneshot(get(busy)).await.unwrap_err();
    let refused = refused
        .downcast_ref::<InBackoff>()
        .expect("refused by the layer");
    assert!(held(refused.remaining), "{refused:?}");
    assert_eq!(busy_reached.load(Ordering::SeqCst), 1);
    let key = busy.to_string();
    let now = || backoff.clock().now();
    let remaining = backoff.remaining(&key, now());
    assert!(remaining.is_some_and(held), "{remaining:?}");
    assert_eq!(backoff.attempts(&key), 1);

    // No other key is.
    for _ in 0..3 {
        let ok = client.clone().oneshot(get(calm)).await.unwrap();
        assert_eq!(ok.status(), 200);
    }
    assert_eq!(calm_reached.load(Ordering::SeqCst), 3);
    assert_eq!(backoff.remaining(&calm.to_string(), now()), None);
    assert_eq!(backoff.attempts(&calm.to_string()), 0);
}
