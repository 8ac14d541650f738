//! A server's `Retry-After` holds its key, and only its key: as a floor
//! on the key's next wait (never shortening it), up to the layer's cap,
//! on 429 and 503, in seconds or as an HTTP date. Under tokio's paused
//! time, to the millisecond.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Log, manager};
use http::{Request, Response};
use keyed_backoff_tower::{KeyedBackoffLayer, RetryHttp, retry_after};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

type Get = Request<()>;

fn get(host: &str) -> Get {
    Request::get(format!("http://{host}/")).body(()).unwrap()
}

fn host(req: &Get) -> String {
    req.uri().host().unwrap_or_default().to_owned()
}

/// An upstream answering `busy`'s first request with `status` and
/// `Retry-After: value`, and everything else 200.
fn upstream(
    log: &Log,
    status: u16,
    value: String,
) -> BoxCloneService<Get, Response<()>, http::Error> {
    let log = log.clone();
    let answered = Arc::new(Mutex::new(false));
    BoxCloneService::new(tower::service_fn(move |req: Get| {
        let host = host(&req);
        log.record(&host);
        let first = host == "busy" && !std::mem::replace(&mut *answered.lock().unwrap(), true);
        let value = value.clone();
        async move {
            let response = match first {
                true => Response::builder()
                    .status(status)
                    .header("retry-after", value),
                false => Response::builder().status(200),
            };
            response.body(())
        }
    }))
}

/// Sends a request for `busy` (answered as `upstream` says), then another
/// at once; when did the second reach the upstream, and when did a request
/// for `calm`, sent 10 ms in?
/// With `cap: None`, the layer's default cap: 5 minutes.
async fn hold(status: u16, value: &str, cap: Option<Duration>) -> (Vec<u128>, Vec<u128>) {
    let log = Log::new();
    let mut layer = KeyedBackoffLayer::new(manager(), host)
        .retry_if(RetryHttp)
        .max_retries(0);
    if let Some(cap) = cap {
        layer = layer.max_retry_after(cap);
    }
    let service = layer.layer(upstream(&log, status, value.to_owned()));
    let first = service.clone().oneshot(get("busy")).await.unwrap();
    assert_eq!(first.status(), status);
    let second = tokio::spawn(service.clone().oneshot(get("busy")));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(service.oneshot(get("calm")).await.unwrap().status(), 200);
    assert_eq!(second.await.unwrap().unwrap().status(), 200);
    (log.calls("busy"), log.calls("calm"))
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_2_holds_its_key_2_s_and_no_other_key() {
    let (busy, calm) = hold(429, "2", Some(Duration::from_secs(60))).await;
    // The backoff alone would have let it go at 100 ms.
    assert_eq!(busy, [0, 2000]);
    assert_eq!(calm, [10]);
}

#[tokio::test(start_paused = true)]
async fn a_503_is_honoured_too_and_so_is_an_http_date() {
    let (busy, _) = hold(503, "1", Some(Duration::from_secs(60))).await;
    assert_eq!(busy, [0, 1000]);
    // A date 3 s ahead of the wall clock, to the second: between 2 and 3 s
    // (less the wall time this test takes to read it, a few microseconds).
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3));
    let (busy, _) = hold(429, &date, Some(Duration::from_secs(60))).await;
    assert!((1990..=3000).contains(&busy[1]), "{busy:?}");
}

#[tokio::test(start_paused = true)]
async fn the_cap_bounds_a_hold_and_a_short_hold_never_shortens_the_backoff() {
    let (busy, _) = hold(429, "120", Some(Duration::from_secs(5))).await;
    assert_eq!(busy, [0, 5000]);
    let (busy, _) = hold(429, "120", None).await;
    assert_eq!(busy, [0, 120_000], "under the default cap, 5 minutes");
    let (busy, _) = hold(429, "0", Some(Duration::from_secs(60))).await;
    assert_eq!(busy, [0, 100], "the key's own 100 ms backoff still holds");
}

#[tokio::test(start_paused = true)]
async fn the_default_cap_is_5_minutes_whatever_the_gate() {
    // A gate states no `max` of its own: a hold is capped at 5 minutes,
    // here over a manager whose own backoff stops at 10 s.
    let log = Log::new();
    let service = KeyedBackoffLayer::new(manager(), host)
        .retry_if(RetryHttp)
        .max_retries(0)
        .layer(upstream(&log, 429, "3600".to_owned()));
    assert_eq!(
        service.clone().oneshot(get("busy")).await.unwrap().status(),
        429
    );
    assert_eq!(service.oneshot(get("busy")).await.unwrap().status(), 200);
    assert_eq!(log.calls("busy"), [0, 300_000]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_on_another_status_is_not_a_hold() {
    // 502 is retried (a failure: 100 ms backoff) but its header not read.
    let (busy, _) = hold(502, "5", Some(Duration::from_secs(60))).await;
    assert_eq!(busy, [0, 100]);
}

#[tokio::test(start_paused = true)]
async fn a_held_request_is_retried_after_the_hold_and_its_success_resets_the_key() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .retry_if(RetryHttp)
        .layer(upstream(&log, 429, "2".to_owned()));
    assert_eq!(service.oneshot(get("busy")).await.unwrap().status(), 200);
    assert_eq!(log.calls("busy"), [0, 2000]);
    assert_eq!(backoff.attempts("busy"), 0);
}

/// A success that arrives while its key is held answered a request sent
/// before the hold: the hold stands.
#[tokio::test(start_paused = true)]
async fn a_success_from_before_a_hold_does_not_lift_it() {
    let log = Log::new();
    let backoff = manager();
    // The first request answers 200 after 50 ms; the second, 429 with
    // `Retry-After: 2` at once; the rest 200 at once.
    let calls = Arc::new(Mutex::new(0));
    let upstream = {
        let log = log.clone();
        tower::service_fn(move |req: Get| {
            log.record(&host(&req));
            let n = {
                let mut calls = calls.lock().unwrap();
                *calls += 1;
                *calls
            };
            async move {
                let (status, latency) = match n {
                    1 => (200, 50),
                    2 => (429, 0),
                    _ => (200, 0),
                };
                tokio::time::sleep(Duration::from_millis(latency)).await;
                let response = Response::builder()
                    .status(status)
                    .header("retry-after", "2");
                response.body(())
            }
        })
    };
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .retry_if(RetryHttp)
        .max_retries(0)
        .layer(upstream);
    let slow = tokio::spawn(service.clone().oneshot(get("busy")));
    log.until(10).await;
    assert_eq!(
        service.clone().oneshot(get("busy")).await.unwrap().status(),
        429
    );
    assert_eq!(slow.await.unwrap().unwrap().status(), 200);
    assert_eq!(log.elapsed_ms(), 50);
    assert_eq!(service.oneshot(get("busy")).await.unwrap().status(), 200);
    assert_eq!(log.calls("busy"), [0, 10, 2010]);
    assert_eq!(
        backoff.attempts("busy"),
        0,
        "reset by the success after the hold"
    );
}

#[test]
fn retry_after_values_parse_as_http_defines_them() {
    let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
    let parse = |v: &str| retry_after::parse(v, now);
    assert_eq!(parse("0"), Some(Duration::ZERO));
    assert_eq!(parse(" 7\t"), Some(Duration::from_secs(7)));
    assert_eq!(
        parse("99999999999999999999999"),
        Some(Duration::from_secs(u64::MAX))
    );
    // The three date forms, one second ahead.
    for date in [
        "Sun, 06 Nov 1994 08:49:38 GMT",
        "Sunday, 06-Nov-94 08:49:38 GMT",
        "Sun Nov  6 08:49:38 1994",
    ] {
        assert_eq!(parse(date), Some(Duration::from_secs(1)), "{date}");
    }
    assert_eq!(parse("Sun, 06 Nov 1994 08:49:00 GMT"), Some(Duration::ZERO));
    for bad in ["", "-1", "1.5", "2 s", "tomorrow"] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
}
