//! Failing fast: a server that refuses connections (never started, killed)
//! is `Unavailable` at once (the operation did not run), never `TimedOut`;
//! a server that stops answering stays `TimedOut` (outcome unknown). The
//! store is the README's quick start, on the test's own redis-server.
//!
//! "At once" is judged by what the store decided, not by a stopwatch: with
//! an operation timeout of 30 s, far beyond anything a refused connection
//! takes however busy the machine, an operation that waited out its timeout
//! would be `TimedOut`, so `Unavailable` says it failed before it. How long
//! each call took is printed.

use std::time::{Duration, Instant};

use common::{prefix, runtime, until_ok};
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, StoreError, redis};
use keyed_backoff_testkit::redis_server::{Server, free_port};

mod common;

/// An operation timeout that no refused connection comes near.
const LONG: Duration = Duration::from_secs(30);

/// The README's quick start, on `url`, its operations timing out after
/// `timeout` (the README keeps the default, 250 ms).
async fn quick_start(
    url: &str,
    timeout: Duration,
) -> Result<RedisBackoff<ConnectionManager>, StoreError> {
    let backoff = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix("payments")
        .timeout(timeout)
        .open(url)
        .await
        .expect("valid settings and URL");
    let _first_answer = backoff.try_next("payments-api", Event::now()).await?;
    Ok(backoff)
}

/// Calls `next` on `store` until `until` holds, every call failing; each
/// failure and how long it took.
async fn failures(
    store: &RedisBackoff<ConnectionManager>,
    mut until: impl FnMut(usize) -> bool,
) -> Vec<(StoreError, Duration)> {
    let mut seen = Vec::new();
    while !until(seen.len()) {
        let sent = Instant::now();
        let err = store.next("payments-api", Event::now()).await.unwrap_err();
        seen.push((err, sent.elapsed()));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen
}

fn slowest(seen: &[(StoreError, Duration)]) -> Duration {
    seen.iter().map(|(_, took)| *took).max().unwrap_or_default()
}

#[test]
fn the_quick_start_against_a_closed_port_is_unavailable_not_timed_out() {
    let url = format!("redis://127.0.0.1:{}/", free_port());
    runtime().block_on(async {
        let started = Instant::now();
        let err = quick_start(&url, LONG).await.unwrap_err();
        let took = started.elapsed();
        eprintln!("closed port: {err} after {took:?}");
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        // The cause is redis-rs's own error: the connection was refused.
        let cause =
            std::error::Error::source(&err).and_then(|e| e.downcast_ref::<redis::RedisError>());
        assert!(
            cause.is_some_and(redis::RedisError::is_connection_refusal),
            "{cause:?}"
        );
    });
}

#[test]
fn a_killed_server_is_unavailable_until_it_is_back_never_timed_out() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    runtime().block_on(async {
        let store = quick_start(&server.url, LONG).await.unwrap();
        server.stop();
        let stopped = Instant::now();
        // Calls for a second of outage, and at least 20 of them however
        // slow the machine: each one refused at once.
        let down = failures(&store, |calls| {
            calls >= 20 && stopped.elapsed() >= Duration::from_secs(1)
        })
        .await;
        server.restart();
        // Back: the first call may still find the old connection gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut back = Vec::new();
        let attempts = loop {
            let sent = Instant::now();
            match store.attempts("payments-api").await {
                Ok(attempts) => break attempts,
                Err(err) => back.push((err, sent.elapsed())),
            }
            assert!(Instant::now() < deadline, "the store never answered again");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        eprintln!(
            "killed server: {} calls, {} more while it restarted, slowest {:?}",
            down.len(),
            back.len(),
            slowest(&down).max(slowest(&back))
        );
        for (err, took) in down.iter().chain(&back) {
            assert!(
                matches!(err, StoreError::Unavailable { .. }),
                "{err} after {took:?}"
            );
        }
        // A restarted server keeps nothing: the entry starts over.
        assert_eq!(attempts, 0);
    });
}

#[test]
fn a_paused_server_stays_outcome_unknown_until_it_answers() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    runtime().block_on(async {
        let store = quick_start(&server.url, Duration::from_millis(250))
            .await
            .unwrap();
        server.pause();
        let stalled = failures(&store, |calls| calls == 3).await;
        server.resume();
        let attempts = until_ok(|| store.attempts("payments-api")).await;
        eprintln!(
            "paused server: {:?}",
            stalled.iter().map(|(_, t)| t).collect::<Vec<_>>()
        );
        for (err, took) in &stalled {
            assert!(
                matches!(err, StoreError::TimedOut { .. }),
                "{err} after {took:?}"
            );
            assert!(err.outcome_unknown());
        }
        // The stalled calls ran when the server woke, or never did.
        assert!((1..=4).contains(&attempts), "{attempts}");
    });
}

#[test]
fn with_the_fail_fast_setup_a_dead_server_is_unavailable_not_timed_out() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let url = server.url.clone();
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        let conn = ConnectionManager::new_with_config(client, keyed_backoff_redis::fail_fast(LONG))
            .await
            .unwrap();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix("failfast"))
            .timeout(LONG)
            .build(conn)
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        server.stop();
        // Each operation fails as "did not run", without waiting out its
        // timeout (that would be `TimedOut`).
        for _ in 0..3 {
            let started = Instant::now();
            let err = store.next("k", Event::now()).await.unwrap_err();
            eprintln!(
                "dead server, fail_fast setup: {err} after {:?}",
                started.elapsed()
            );
            assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
            assert!(!err.outcome_unknown());
        }
    });
}
