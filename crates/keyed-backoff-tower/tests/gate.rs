//! The first attempt is gated too: a request whose key is in backoff does
//! not reach the upstream before the key's window ends (or fails at once,
//! when the layer may not wait that long), and other keys are not slowed.
//! Under tokio's paused time, to the millisecond.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Log, manager};
use keyed_backoff_tower::{Backoff, BoxError, ConfigError, InBackoff, KeyedBackoffLayer};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

/// An upstream where the host `down` always fails and any other answers.
fn upstream(log: &Log) -> BoxCloneService<&'static str, u16, &'static str> {
    slow_upstream(log, Duration::ZERO)
}

/// The same, answering `latency` after a request arrives.
fn slow_upstream(log: &Log, latency: Duration) -> BoxCloneService<&'static str, u16, &'static str> {
    let log = log.clone();
    BoxCloneService::new(tower::service_fn(move |host: &'static str| {
        log.record(host);
        async move {
            tokio::time::sleep(latency).await;
            if host == "down" {
                Err("connection refused")
            } else {
                Ok(200)
            }
        }
    }))
}

fn host(req: &&'static str) -> &'static str {
    req
}

fn refusal(error: BoxError) -> InBackoff {
    *error.downcast::<InBackoff>().expect("refused by the layer")
}

#[tokio::test(start_paused = true)]
async fn a_request_for_a_key_in_backoff_waits_for_its_window_and_others_go_through() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .max_retries(0)
        .layer(upstream(&log));

    // The key fails at 0 ms: in backoff for 100 ms.
    assert!(service.clone().oneshot("down").await.is_err());
    log.until(30).await;
    let waiting = tokio::spawn(service.clone().oneshot("down"));
    // Meanwhile another key is answered at once.
    assert_eq!(service.clone().oneshot("up").await.unwrap(), 200);
    assert_eq!(log.calls("up"), [30]);
    // The waiting request reaches the upstream when the window ends, not
    // before, and returns the upstream's own error.
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(error.to_string(), "connection refused");
    assert_eq!(log.calls("down"), [0, 100]);
    assert_eq!(backoff.attempts("down"), 2);
}

#[tokio::test(start_paused = true)]
async fn requests_waiting_on_one_key_go_together_and_advance_it_once() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .max_retries(0)
        .layer(slow_upstream(&log, Duration::from_millis(10)));
    // The key fails at 10 ms: in backoff until 110 ms.
    assert!(service.clone().oneshot("down").await.is_err());
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(service.clone().oneshot("down")))
        .collect();
    for w in waiting {
        assert!(w.await.unwrap().is_err());
    }
    assert_eq!(log.calls("down"), [0, 110, 110, 110]);
    // Three failures in one window advance the key once.
    assert_eq!(backoff.attempts("down"), 2);
}

#[tokio::test(start_paused = true)]
async fn fail_fast_refuses_with_the_wait_left_and_sends_nothing() {
    let log = Log::new();
    let service = KeyedBackoffLayer::new(manager(), host)
        .max_retries(0)
        .fail_fast()
        .layer(upstream(&log));
    assert!(service.clone().oneshot("down").await.is_err());
    log.until(30).await;
    let refused = refusal(service.clone().oneshot("down").await.unwrap_err());
    assert_eq!(refused.remaining, Duration::from_millis(70));
    assert_eq!(log.calls("down"), [0]);
    // Once the window has passed, the key is tried again.
    log.until(100).await;
    assert!(service.oneshot("down").await.is_err());
    assert_eq!(log.calls("down"), [0, 100]);
}

#[tokio::test(start_paused = true)]
async fn max_wait_waits_for_a_window_that_ends_soon_enough_and_refuses_a_longer_one() {
    let log = Log::new();
    let service = KeyedBackoffLayer::new(manager(), host)
        .max_retries(0)
        .max_wait(Duration::from_millis(50))
        .layer(upstream(&log));
    assert!(service.clone().oneshot("down").await.is_err());
    log.until(30).await;
    // 70 ms left: more than 50.
    let refused = refusal(service.clone().oneshot("down").await.unwrap_err());
    assert_eq!(refused.remaining, Duration::from_millis(70));
    log.until(60).await;
    // 40 ms left: it waits, and is sent at 100 ms.
    assert!(service.oneshot("down").await.is_err());
    assert_eq!(log.calls("down"), [0, 100]);
}

#[tokio::test(start_paused = true)]
async fn a_wait_follows_a_window_extended_meanwhile() {
    let log = Log::new();
    let backoff = manager();
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), host)
        .max_retries(0)
        .layer(upstream(&log));
    assert!(service.clone().oneshot("down").await.is_err());
    let waiting = tokio::spawn(service.oneshot("down"));
    log.until(99).await;
    // Another user of the manager records a failure just before the window
    // ends: the key now waits 200 ms from here.
    assert_eq!(backoff.next_now(&"down"), Duration::from_millis(200));
    assert!(waiting.await.unwrap().is_err());
    assert_eq!(log.calls("down"), [0, 299]);
}

/// The manager of `Backoff::new` (the OS clock, the default hasher) is
/// accepted as it is; here in real time, with nothing waited for. The wait
/// a refusal reports is checked against the time since just before the
/// failure, so a slow machine cannot break the bound.
#[tokio::test]
async fn a_manager_on_the_default_clock_works_as_it_is() -> Result<(), ConfigError> {
    let backoff: Arc<Backoff<String>> = Arc::new(Backoff::new(
        Duration::from_secs(10),
        Duration::from_secs(60),
    )?);
    let service = KeyedBackoffLayer::new(Arc::clone(&backoff), |host: &String| host.clone())
        .max_retries(0)
        .fail_fast()
        .layer(tower::service_fn(|host: String| async move {
            if host == "down" {
                Err("refused")
            } else {
                Ok(())
            }
        }));
    let failed = std::time::Instant::now();
    assert!(service.clone().oneshot("down".to_owned()).await.is_err());
    let refused = refusal(
        service
            .clone()
            .oneshot("down".to_owned())
            .await
            .unwrap_err(),
    );
    // The rest of the failure's 10 s window at the refusal: no less than
    // 10 s less the time since just before the failure.
    assert!(refused.remaining <= Duration::from_secs(10));
    assert!(
        refused.remaining + failed.elapsed() >= Duration::from_secs(10),
        "{refused:?} after {:?}",
        failed.elapsed()
    );
    assert!(service.oneshot("up".to_owned()).await.is_ok());
    assert_eq!(backoff.attempts("down"), 1);
    Ok(())
}
