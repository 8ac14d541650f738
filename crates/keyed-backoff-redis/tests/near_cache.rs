//! The opt-in near cache: a storm of refused gates is answered in process
//! with the same answers Redis gives, and a reset through the store is seen
//! at once.

use std::time::Duration;

use common::{connect, prefix, runtime};
use keyed_backoff::clock::MockClock;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, redis};
use keyed_backoff_testkit::redis_server::Server;

mod common;

/// EVALSHA and EVAL calls the server has run so far.
async fn script_calls(conn: &mut ConnectionManager) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A storm of gates on keys in backoff over several windows, with and
/// without the near cache: the same grants and refusals, and with the cache
/// at least ten times fewer scripts sent to Redis.
#[test]
fn the_near_cache_answers_a_storm_of_refusals_locally_with_the_same_grants() {
    let server = Server::start();
    if !server.owned() {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let mut conn = connect(&server.url).await;
        let mut outcomes = Vec::new();
        let mut calls = Vec::new();
        for cached in [false, true] {
            let clock = MockClock::new();
            let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(8))
                .prefix(prefix("near"))
                .clock(clock.clone())
                .near_cache(cached)
                .build(conn.clone())
                .unwrap();
            let before = script_calls(&mut conn).await;
            let mut seen = Vec::new();
            // 5 keys, 200 gates each per 250 ms step, for 6 s.
            for _step in 0..24 {
                for k in 0..5 {
                    for _ in 0..200 {
                        let answer = store
                            .try_next(&format!("k{k}"), Event::now())
                            .await
                            .unwrap();
                        seen.push(answer.map_err(|w| w.remaining));
                    }
                }
                clock.advance(Duration::from_millis(250));
            }
            calls.push(script_calls(&mut conn).await - before);
            eprintln!("near cache {cached}: {} scripts", calls.last().unwrap());
            if cached {
                assert_eq!(store.stats().near_cache_hits + calls[1], 24 * 5 * 200);
            }
            outcomes.push(seen);
        }
        assert_eq!(outcomes[0], outcomes[1], "the cache changed an answer");
        let grants = outcomes[0].iter().filter(|a| a.is_ok()).count();
        assert!(grants >= 5 * 3, "{grants} grants");
        assert!(
            calls[0] >= 10 * calls[1],
            "scripts: {} without the cache, {} with",
            calls[0],
            calls[1]
        );

        // A reset through the store is seen at once.
        let clock = MockClock::new();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(8))
            .prefix(prefix("near-reset"))
            .clock(clock)
            .near_cache(true)
            .build(conn.clone())
            .unwrap();
        assert!(store.try_next("k", Event::now()).await.unwrap().is_ok());
        assert!(store.try_next("k", Event::now()).await.unwrap().is_err());
        store.reset("k").await.unwrap();
        assert!(store.try_next("k", Event::now()).await.unwrap().is_ok());
    });
}
