//! The outage scenario every place an outage's state can live runs
//! (`keyed_backoff_testkit::outage`, also run in process and over a store
//! written in a test, in the outage crate's suite), here over Redis: three
//! replicas share the outage through a [`RedisOutageStore`] on one
//! redis-server, each key's own backoff in its replica's process, all on
//! one mock clock (the store's time line too).

use std::time::Duration;

use common::{prefix, runtime};
use keyed_backoff::Backoff;
use keyed_backoff::clock::MockClock;
use keyed_backoff_outage::OutageAware;
use keyed_backoff_redis::RedisBackoff;
use keyed_backoff_testkit::outage::{lifecycle, settings};

mod common;

#[test]
fn the_scenario_on_redis_shared_by_three_replicas() {
    let server = common::shared();
    runtime().block_on(async {
        let (clock, prefix) = (MockClock::new(), prefix("outage-states"));
        let mut fleet = Vec::new();
        for _ in 0..3 {
            let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
                .prefix(&prefix)
                .clock(clock.clone())
                .timeout(Duration::from_secs(2))
                .open(&server.url)
                .await
                .expect("store");
            let inner = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(60))
                .clock(clock.clone())
                .build()
                .expect("backoff");
            let outage = store.outage_store();
            let gate = OutageAware::shared_with_clock(inner, settings(), outage, clock.clone());
            fleet.push(gate.expect("settings"));
        }
        lifecycle("Redis, 3 replicas", &clock, &fleet).await;
    });
}
