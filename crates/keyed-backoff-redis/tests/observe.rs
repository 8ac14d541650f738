//! What an operator sees when Redis goes away and comes back: `tracing`
//! events and `metrics` counters, against a real redis-server this test
//! starts (and pauses) on loopback.

use std::time::{Duration, Instant};

use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
use keyed_backoff_testkit::events::Events;
use keyed_backoff_testkit::metrics::Metrics;
use keyed_backoff_testkit::redis_server::Server;
use redis::aio::ConnectionManager;
use tracing::Level;

/// Runs `work` on a runtime of its own with the test kit's recorders,
/// and returns its output with what they recorded.
fn observed<T>(work: impl std::future::Future<Output = T>) -> (T, Metrics, Events) {
    let (metrics, events) = (Metrics::new(), Events::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let output = metrics.record(|| events.record(|| rt.block_on(work)));
    (output, metrics, events)
}

#[test]
fn an_outage_opens_the_breaker_and_recovery_closes_it_in_events_and_metrics() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let timeout = Duration::from_millis(200);
    let open_for = Duration::from_secs(1);
    let (while_open, recorder, events) = observed(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let conn = ConnectionManager::new(client).await.unwrap();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(format!("observe-{:x}", rand::random::<u32>()))
            .timeout(timeout)
            .fallback(open_for)
            .build(conn.clone())
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        server.pause();
        let paused = Instant::now();
        store.next("k", Event::now()).await.unwrap(); // times out: breaker opens
        store.next("k", Event::now()).await.unwrap(); // answered while open
        // The breaker opened when the first call's timeout ran out, no
        // sooner than `timeout` after the pause, for `open_for`: a second
        // call over by then was asked while it was open.
        let while_open = paused.elapsed() < timeout + open_for;
        server.resume();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let before = store.stats().fallback_answers;
            store.get("k").await.unwrap();
            if store.stats().fallback_answers == before {
                break; // Redis answered
            }
            assert!(Instant::now() < deadline, "Redis never took over again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A key that is not ours: an error event, and the error.
        let mut c = conn;
        let _: () = redis::cmd("SET")
            .arg(store.redis_key("x"))
            .arg("v")
            .query_async(&mut c)
            .await
            .unwrap();
        assert!(matches!(
            store.get("x").await,
            Err(StoreError::Corrupt { .. })
        ));
        while_open
    });

    let seen: Vec<(Level, String)> = events
        .seen()
        .into_iter()
        .map(|e| (e.level, e.message))
        .collect();
    let position = |needle: &str| seen.iter().position(|(_, m)| m.contains(needle));
    let opened = position("breaker opened").expect("an event when the breaker opens");
    let closed = position("breaker closed").expect("an event when it closes");
    assert!(opened < closed, "{seen:?}");
    // Once per recovery, not on every answer after it.
    let closings = seen.iter().filter(|(_, m)| m.contains("breaker closed"));
    assert_eq!(closings.count(), 1, "{seen:?}");
    assert_eq!(seen[opened].0, Level::WARN);
    // The timed-out call is Redis becoming unreachable: reported once,
    // and the call itself at DEBUG.
    assert_eq!(
        seen.iter()
            .filter(|(l, m)| *l == Level::WARN && m.starts_with("Redis unreachable"))
            .count(),
        1,
        "{seen:?}"
    );
    assert!(!seen.iter().any(|(_, m)| m == "store error"), "{seen:?}");
    assert!(
        seen.iter()
            .any(|(l, m)| *l == Level::ERROR && m == "entry is not ours"),
        "{seen:?}"
    );
    assert!(
        seen.iter().filter(|(_, m)| m.contains("fallback")).count() >= 2,
        "{seen:?}"
    );

    let metrics = recorder.samples();
    let counter = |name: &str, labels: &[(&str, &str)]| metrics.counter(name, labels);
    assert!(
        counter(
            "keyed_backoff_redis_operations_total",
            &[("op", "next"), ("result", "ok")]
        ) >= 1
    );
    // One call timed out; the one asked while the breaker was open never
    // reached Redis. (On a machine too busy to make the second call within
    // the breaker's second it asked Redis, and timed out too.)
    let timed_out = counter(
        "keyed_backoff_redis_operations_total",
        &[("result", "timed_out")],
    );
    match while_open {
        true => assert_eq!(timed_out, 1),
        false => assert!((1..=2).contains(&timed_out), "{timed_out}"),
    }
    assert_eq!(
        counter(
            "keyed_backoff_redis_operations_total",
            &[("result", "corrupt")]
        ),
        1
    );
    assert_eq!(counter("keyed_backoff_redis_breaker_trips_total", &[]), 1);
    assert!(
        counter(
            "keyed_backoff_redis_fallback_answers_total",
            &[("op", "next")]
        ) >= 2
    );
    let open = metrics.gauge("keyed_backoff_redis_breaker_open", &[]);
    assert!(matches!(open, Some(g) if g == 0.0), "{open:?}");
    assert!(
        !metrics
            .histogram("keyed_backoff_redis_operation_duration_seconds", &[])
            .is_empty()
    );
}

#[test]
fn a_killed_server_is_reported_once_when_calls_start_failing_and_once_when_it_answers_again() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let (failed, recorder, events) = observed(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let conn = ConnectionManager::new(client).await.unwrap();
        // No fallback: every call while the server is down fails.
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(format!("unreachable-{:x}", rand::random::<u32>()))
            .timeout(Duration::from_millis(200))
            .build(conn)
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        server.stop();
        let mut failed = 0;
        for _ in 0..5 {
            let err = store.next("k", Event::now()).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    StoreError::Unavailable { .. } | StoreError::TimedOut { .. }
                ),
                "{err:?}"
            );
            failed += 1;
        }
        server.restart();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.get("k").await.is_err() {
            failed += 1;
            assert!(Instant::now() < deadline, "Redis never answered again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        failed
    });

    let seen: Vec<(Level, String)> = events
        .seen()
        .into_iter()
        .map(|e| (e.level, e.message))
        .collect();
    let count = |level: Level, prefix: &str| {
        seen.iter()
            .filter(|(l, m)| *l == level && m.starts_with(prefix))
            .count()
    };
    assert_eq!(count(Level::WARN, "Redis unreachable"), 1, "{seen:?}");
    assert_eq!(count(Level::INFO, "Redis answers again"), 1, "{seen:?}");
    assert_eq!(count(Level::WARN, "store error"), 0, "{seen:?}");
    assert_eq!(
        count(Level::DEBUG, "store error while Redis is unreachable"),
        failed,
        "{seen:?}"
    );
    let metrics = recorder.samples();
    assert_eq!(
        metrics.counter("keyed_backoff_redis_unreachable_total", &[]),
        1
    );
    let gauge = metrics.gauge("keyed_backoff_redis_unreachable", &[]);
    assert!(matches!(gauge, Some(g) if g == 0.0), "{gauge:?}");
}
