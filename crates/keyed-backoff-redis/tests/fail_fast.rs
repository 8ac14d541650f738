//! With the fail-fast connection setup, a server that refuses connections
//! is `Unavailable` (the operation did not run) within the timeout, never
//! `TimedOut` (outcome unknown).

use std::time::{Duration, Instant};

use common::{prefix, runtime};
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, StoreError, redis};
use keyed_backoff_testkit::redis_server::Server;

mod common;

#[test]
fn with_the_fail_fast_setup_a_dead_server_is_unavailable_not_timed_out() {
    let mut server = Server::start();
    if !server.owned() {
        return;
    }
    let url = server.url.clone();
    let rt = runtime();
    rt.block_on(async {
        let timeout = Duration::from_millis(300);
        let client = redis::Client::open(url.as_str()).unwrap();
        let conn =
            ConnectionManager::new_with_config(client, keyed_backoff_redis::fail_fast(timeout))
                .await
                .unwrap();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix(prefix("failfast"))
            .timeout(timeout)
            .build(conn)
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        server.stop();
        // Each operation fails within its timeout, as "did not run".
        for _ in 0..3 {
            let started = Instant::now();
            let err = store.next("k", Event::now()).await.unwrap_err();
            assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
            assert!(!err.outcome_unknown());
            assert!(
                started.elapsed() <= timeout + Duration::from_millis(200),
                "{:?}",
                started.elapsed()
            );
        }
    });
}
