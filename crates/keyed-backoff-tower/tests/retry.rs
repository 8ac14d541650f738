//! Retries through the layer, under tokio's paused time: every request for
//! a failing key climbs one ladder (the key advances once per window
//! however many requests fail), other keys are not slowed, a success
//! resets, and retries are bounded per request and by a shared budget.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Log, manager};
use keyed_backoff_tower::keyed_backoff::budget::TokenBucket;
use keyed_backoff_tower::{KeyedBackoffLayer, NoReplay};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

/// An upstream where `down` always fails, `up` always answers, and
/// `flaky` fails its first two calls.
fn upstream(log: &Log) -> BoxCloneService<&'static str, u16, &'static str> {
    slow_upstream(log, Duration::ZERO)
}

/// The same, answering `latency` after a request arrives.
fn slow_upstream(log: &Log, latency: Duration) -> BoxCloneService<&'static str, u16, &'static str> {
    let log = log.clone();
    let calls: Arc<Mutex<HashMap<&'static str, u32>>> = Arc::default();
    BoxCloneService::new(tower::service_fn(move |host: &'static str| {
        log.record(host);
        let n = {
            let mut calls = calls.lock().unwrap();
            let n = calls.entry(host).or_default();
            *n += 1;
            *n
        };
        async move {
            tokio::time::sleep(latency).await;
            match host {
                "up" => Ok(200),
                "flaky" if n > 2 => Ok(200),
                _ => Err("connection refused"),
            }
        }
    }))
}

fn host(req: &&'static str) -> &'static str {
    req
}

#[tokio::test(start_paused = true)]
async fn requests_for_a_failing_key_share_one_ladder_and_other_keys_are_not_slowed() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .max_retries(4)
        .layer(slow_upstream(&log, Duration::from_millis(10)));

    // Two requests fail together (each attempt answers in 10 ms).
    let a = tokio::spawn(service.clone().oneshot("down"));
    let b = tokio::spawn(service.clone().oneshot("down"));
    // While they back off, a request for a healthy host answers at once.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let up = service.clone().oneshot("up").await;
    assert_eq!((up.unwrap(), log.elapsed_ms()), (200, 260));
    assert_eq!(
        a.await.unwrap().unwrap_err().to_string(),
        "connection refused"
    );
    assert!(b.await.unwrap().is_err());

    // Both requests run together, 100, 200, 400, 800 ms after each
    // failure: the key advanced once per window, not once per failed
    // request.
    assert_eq!(
        log.calls("down"),
        [0, 0, 110, 110, 320, 320, 730, 730, 1540, 1540]
    );
    // Five windows failed, the last one too: the next request will wait.
    assert_eq!(backoff.attempts("down"), 5);
    assert_eq!(backoff.attempts("up"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_success_resets_its_key() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host).layer(upstream(&log));
    assert_eq!(service.oneshot("flaky").await.unwrap(), 200);
    assert_eq!(log.calls("flaky"), [0, 100, 300]);
    assert_eq!(backoff.attempts("flaky"), 0, "reset by the success");
}

#[tokio::test(start_paused = true)]
async fn a_request_makes_at_most_max_retries_retries() {
    let log = Log::new();
    let service = KeyedBackoffLayer::new(manager(), host)
        .max_retries(2)
        .layer(upstream(&log));
    assert!(service.oneshot("down").await.is_err());
    assert_eq!(log.calls("down"), [0, 100, 300]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_would_wait_longer_than_max_wait_is_not_made() {
    let log = Log::new();
    let service = KeyedBackoffLayer::new(manager(), host)
        .max_retries(10)
        .max_wait(Duration::from_millis(150))
        .layer(upstream(&log));
    // Retried after 100 ms; the next window, 200 ms, is too long.
    assert!(service.oneshot("down").await.is_err());
    assert_eq!(log.calls("down"), [0, 100]);
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_retries_across_requests_and_keys() {
    let log = Log::new();
    // Retries while more than 2 of 4 tokens are left; each failure takes 1.
    let budget = Arc::new(TokenBucket::new(4.0, 0.1).unwrap());
    let service = KeyedBackoffLayer::new(manager(), host)
        .max_retries(10)
        .budget(Arc::clone(&budget))
        .layer(upstream(&log));
    assert!(service.clone().oneshot("down").await.is_err());
    // One failure left 3 tokens (retry), the next 2 (stop).
    assert_eq!(log.calls("down"), [0, 100]);
    // The budget is shared: a request for another failing key fails once
    // (1 token left) and is not retried at all.
    assert!(service.clone().oneshot("flaky").await.is_err());
    assert_eq!(log.calls("flaky"), [100]);
    assert_eq!(budget.tokens(), 1.0);
    // Successes refill it, a tenth of a token each, up to the brim.
    for _ in 0..30 {
        service.clone().oneshot("up").await.unwrap();
    }
    assert_eq!(budget.tokens(), 4.0);
    // `flaky` waits out its window (to 200 ms), fails (3 tokens: retry),
    // waits its next one (200 ms) and answers.
    assert_eq!(service.oneshot("flaky").await.unwrap(), 200);
    assert_eq!(log.calls("flaky"), [100, 200, 400]);
}

/// A request that cannot be cloned (a streamed body, say).
struct Streamed(&'static str);

#[tokio::test(start_paused = true)]
async fn a_request_that_cannot_be_copied_is_gated_but_never_retried() {
    let log = Log::new();
    let upstream = {
        let log = log.clone();
        tower::service_fn(move |req: Streamed| {
            log.record(req.0);
            async { Err::<(), _>("connection refused") }
        })
    };
    let service = KeyedBackoffLayer::new(manager(), |req: &Streamed| req.0)
        .replay(NoReplay)
        .layer(upstream);
    assert!(service.clone().oneshot(Streamed("down")).await.is_err());
    assert_eq!(log.calls("down"), [0], "not retried");
    assert!(service.oneshot(Streamed("down")).await.is_err());
    assert_eq!(log.calls("down"), [0, 100], "gated");
}
