//! tower's retry middleware with the per-key policy, under tokio's paused
//! time: each key's backoff doubles once per window whatever the number of
//! requests, other keys are not slowed, successes reset, budgets bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::budget::TokenBucket;
use keyed_backoff::clock::TokioClock;
use keyed_backoff_tower::{KeyedRetryPolicy, TowerBudget};
use tokio::time::Instant;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

#[derive(Clone, Debug)]
struct Get {
    host: &'static str,
}

/// Every call: (host, milliseconds since the start).
type Log = Arc<Mutex<Vec<(&'static str, u128)>>>;

/// A backend where `down` always fails, `up` always answers, and `flaky`
/// fails its first two calls.
fn backend(log: Log, start: Instant) -> BoxCloneService<Get, u16, &'static str> {
    let calls: Arc<Mutex<HashMap<&'static str, u32>>> = Arc::default();
    BoxCloneService::new(tower::service_fn(move |req: Get| {
        let log = Arc::clone(&log);
        let calls = Arc::clone(&calls);
        async move {
            log.lock()
                .unwrap()
                .push((req.host, start.elapsed().as_millis()));
            let n = {
                let mut calls = calls.lock().unwrap();
                let n = calls.entry(req.host).or_default();
                *n += 1;
                *n
            };
            match req.host {
                "up" => Ok(200),
                "flaky" if n > 2 => Ok(200),
                _ => Err("connection refused"),
            }
        }
    }))
}

/// The key: the request's host.
fn host(req: &Get) -> &'static str {
    req.host
}

fn manager() -> Arc<Backoff<&'static str, TokioClock>> {
    Arc::new(
        Backoff::<&'static str>::builder(Duration::from_millis(100), Duration::from_secs(10))
            .clock(TokioClock)
            .build()
            .unwrap(),
    )
}

fn calls_to(log: &Log, host: &str) -> Vec<u128> {
    let log = log.lock().unwrap();
    log.iter()
        .filter(|(h, _)| *h == host)
        .map(|(_, t)| *t)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn requests_for_a_failing_key_share_one_ladder_and_other_keys_are_not_slowed() {
    let start = Instant::now();
    let log = Log::default();
    let backoff = manager();
    let policy = KeyedRetryPolicy::new(Arc::clone(&backoff), host).max_retries(4);
    let service = ServiceBuilder::new()
        .retry(policy)
        .service(backend(Arc::clone(&log), start));

    let a = tokio::spawn(service.clone().oneshot(Get { host: "down" }));
    let b = tokio::spawn(service.clone().oneshot(Get { host: "down" }));
    // While they back off, a request for a healthy host answers at once.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let up = service.clone().oneshot(Get { host: "up" }).await;
    assert_eq!((up, start.elapsed().as_millis()), (Ok(200), 250));
    assert_eq!(a.await.unwrap(), Err("connection refused"));
    assert_eq!(b.await.unwrap(), Err("connection refused"));

    // Both requests run together, at 100, 200, 400 ms gaps: the key's
    // backoff advanced once per window, not once per failed request.
    assert_eq!(
        calls_to(&log, "down"),
        [0, 0, 100, 100, 300, 300, 700, 700, 1500, 1500]
    );
    assert_eq!(backoff.attempts("down"), 4);
    assert_eq!(backoff.attempts("up"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_success_resets_its_key() {
    let start = Instant::now();
    let log = Log::default();
    let backoff = manager();
    let policy = KeyedRetryPolicy::new(Arc::clone(&backoff), host);
    let service = ServiceBuilder::new()
        .retry(policy)
        .service(backend(Arc::clone(&log), start));
    assert_eq!(service.oneshot(Get { host: "flaky" }).await, Ok(200));
    assert_eq!(calls_to(&log, "flaky"), [0, 100, 300]);
    assert_eq!(backoff.attempts("flaky"), 0, "reset by the success");
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_retries_across_requests() {
    let start = Instant::now();
    let log = Log::default();
    let backoff = manager();
    // Retries while more than 2 of 4 tokens are left; each failure takes 1.
    let budget = Arc::new(TokenBucket::new(4.0, 0.1).unwrap());
    let policy = KeyedRetryPolicy::new(Arc::clone(&backoff), host)
        .max_retries(10)
        .budget(TowerBudget::new(Arc::clone(&budget)));
    let service = ServiceBuilder::new()
        .retry(policy)
        .service(backend(Arc::clone(&log), start));
    assert!(service.clone().oneshot(Get { host: "down" }).await.is_err());
    // One failure left 3 tokens (retry), the next 2 (stop).
    assert_eq!(calls_to(&log, "down"), [0, 100]);
    assert!(service.oneshot(Get { host: "down" }).await.is_err());
    // The budget is shared: the second request is not retried at all.
    assert_eq!(calls_to(&log, "down").len(), 3);
    assert_eq!(budget.tokens(), 1.0);
}
