//! Redis restarted, paused or down: every failure is an error (never a
//! made-up answer) until Redis answers again, or the opt-in fallback
//! answers in process meanwhile.

use std::time::{Duration, Instant};

use common::{connect, prefix, runtime, store_on, until_ok};
use keyed_backoff::Backoff;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, StoreError, redis};
use keyed_backoff_testkit::redis_server::Server;

mod common;

fn fast_manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(200)))
        .set_response_timeout(Some(Duration::from_millis(500)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(100))
}

#[test]
fn a_restart_loses_entries_and_the_store_recovers() {
    let mut server = Server::start();
    if !server.owned() {
        return; // REDIS_URL: not ours to restart
    }
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(server.url.as_str()).unwrap();
        let conn = ConnectionManager::new_with_config(client, fast_manager_config())
            .await
            .unwrap();
        let store = store_on(conn, "restart");
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
        server.restart();
        // Some calls fail while the connection is re-established; each
        // fails with an error, never a made-up answer.
        let got = until_ok(|| store.next("k", Event::now())).await;
        // Without persistence the entry is gone: the ladder starts over.
        assert_eq!(got, Duration::from_secs(1));
    });
}

#[test]
fn a_paused_server_times_out_and_then_answers_again() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&server.url).await, "pause");
        store.next("k", Event::now()).await.unwrap();
        server.pause();
        let started = Instant::now();
        let err = store.next("k", Event::now()).await.unwrap_err();
        let took = started.elapsed();
        server.resume();
        eprintln!("paused server: {err} after {took:?}");
        // A timeout ended the call: the store does not wait for a server
        // that does not answer.
        assert!(matches!(err, StoreError::TimedOut { .. }), "{err}");
        assert!(err.outcome_unknown());
        // The stalled script ran once the server woke, or not at all: either
        // way the store answers again and the key moved at most once more.
        let attempts = until_ok(|| store.attempts("k")).await;
        assert!((1..=2).contains(&attempts), "{attempts}");
    });
}

#[test]
fn redis_down_at_start_is_an_error_not_a_hang() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let url = server.url.clone();
    server.stop();
    let rt = runtime();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        // Connecting eagerly fails at once…
        assert!(
            ConnectionManager::new_with_config(client.clone(), fast_manager_config())
                .await
                .is_err()
        );
        // …and a lazy connection makes every operation fail, by its
        // timeout at the latest. A hang fails the test after 30 s, however
        // busy the machine.
        let conn = ConnectionManager::new_lazy_with_config(client, fast_manager_config()).unwrap();
        let store = store_on(conn, "down");
        let err = tokio::time::timeout(Duration::from_secs(30), store.next("k", Event::now()))
            .await
            .expect("the operation hung")
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Unavailable { .. } | StoreError::TimedOut { .. }
            ),
            "{err}"
        );
    });
}

/// A store on `server` under `prefix` with the opt-in fallback, its
/// breaker open for `open_for` after Redis fails to answer in 200 ms.
async fn with_fallback(
    server: &Server,
    prefix: &str,
    open_for: Duration,
) -> RedisBackoff<ConnectionManager> {
    RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix(prefix)
        .timeout(Duration::from_millis(200))
        .fallback(open_for)
        .build(connect(&server.url).await)
        .unwrap()
}

/// While the breaker is open the fallback answers without asking Redis.
/// The breaker stays open for a minute, longer than any pause of a busy
/// machine between two calls, so the second call is made while it is
/// open; that it did not reach Redis is read in Redis once it answers
/// again (a script sent to the paused server would run then).
#[test]
fn an_open_breaker_answers_in_process_without_asking_redis() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let prefix = prefix("fallback-open");
        let store = with_fallback(&server, &prefix, Duration::from_secs(60)).await;
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        server.pause();
        // Redis does not answer: the call times out, the breaker opens and
        // the local manager answers, with a real backoff (never zero)…
        let first = store.next("k", Event::now()).await.unwrap();
        assert_eq!(
            first,
            Duration::from_secs(1),
            "the local ladder starts afresh"
        );
        // …and keeps answering while the breaker is open.
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
        assert_eq!(store.stats().fallback_answers, 2);
        server.resume();
        // Redis holds the first advance, and at most the one script the
        // timed-out call left behind: the open breaker sent it nothing.
        let observer = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix)
            .timeout(Duration::from_secs(10))
            .build(connect(&server.url).await)
            .unwrap();
        let attempts = until_ok(|| observer.attempts("k")).await;
        assert!((1..=2).contains(&attempts), "{attempts}");
        assert_eq!(store.stats().fallback_answers, 2);
    });
}

#[test]
fn the_opt_in_fallback_answers_while_redis_is_down_then_hands_back() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = with_fallback(&server, &prefix("fallback"), Duration::from_millis(300)).await;
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(store.stats().fallback_answers, 0);
        server.pause();
        // Redis does not answer: the local manager does, with a real backoff
        // (never zero).
        let first = store.next("k", Event::now()).await.unwrap();
        assert_eq!(
            first,
            Duration::from_secs(1),
            "the local ladder starts afresh"
        );
        assert_eq!(store.stats().fallback_answers, 1);
        server.resume();
        // Once the breaker closes, Redis answers again: its entry moved at
        // most once while paused (the timed-out script may have run).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let before = store.stats().fallback_answers;
            let attempts = store.attempts("k").await.unwrap();
            if store.stats().fallback_answers == before {
                assert!((1..=2).contains(&attempts), "{attempts}");
                break;
            }
            assert!(Instant::now() < deadline, "Redis never took over again");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn the_fallback_draws_its_jitter_from_the_stores_seed() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let (initial, max) = (Duration::from_secs(1), Duration::from_secs(60));
        let store = RedisBackoff::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .prefix(prefix("fallback-seed"))
            .timeout(Duration::from_millis(200))
            .fallback(Duration::from_secs(60))
            .build(connect(&server.url).await)
            .unwrap();
        server.pause();
        let mut answered = Vec::new();
        for _ in 0..6 {
            answered.push(store.next("k", Event::now()).await.unwrap());
        }
        server.resume();
        assert_eq!(store.stats().fallback_answers, 6);
        // The same settings in process: the same seed gives the same ladder.
        let local = Backoff::<String>::builder(initial, max)
            .jitter(0.5)
            .seed(7)
            .build()
            .unwrap();
        let now = std::time::Instant::now();
        let expected: Vec<Duration> = (0..6).map(|_| local.next("k", now)).collect();
        assert_eq!(answered, expected);
    });
}

#[test]
fn without_a_fallback_a_failure_is_an_error() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&server.url).await, "closed");
        store.next("k", Event::now()).await.unwrap();
        server.pause();
        let got = store.get("k").await;
        server.resume();
        assert!(matches!(got, Err(StoreError::TimedOut { .. })), "{got:?}");
        assert_eq!(store.stats().fallback_answers, 0);
    });
}
