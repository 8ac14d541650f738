//! One call for a key's level and wait answers as the two calls do, in
//! every state an entry can be in.

use std::time::Duration;

use keyed_backoff::Gate;
use keyed_backoff::clock::MockClock;
use keyed_backoff_testkit::redis_server::Server;

use crate::RedisBackoff;

#[test]
fn a_keys_standing_is_its_level_and_its_wait() {
    let server = Server::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let clock = MockClock::new();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(8))
            .prefix(format!("standing-{:x}", rand::random::<u32>()))
            .clock(clock.clone())
            .open(&server.url)
            .await
            .unwrap();
        let key = |k: &str| k.to_string();
        // A ladder, a floor alone, and a floor over a ladder; then their
        // waits pass (1.5 s), then the ladders expire (20 s, past twice the
        // longest backoff).
        store.fail(&key("ladder")).await.unwrap().unwrap();
        store
            .hold(&key("held"), Duration::from_secs(30))
            .await
            .unwrap();
        store.fail(&key("both")).await.unwrap().unwrap();
        store
            .hold(&key("both"), Duration::from_secs(5))
            .await
            .unwrap();
        let mut shapes = std::collections::BTreeSet::new();
        for step in [0, 1_500, 18_500] {
            clock.advance(Duration::from_millis(step));
            for k in ["none", "ladder", "held", "both"] {
                let two = (
                    Gate::level(&store, &key(k)).await.unwrap(),
                    Gate::wait(&store, &key(k)).await.unwrap(),
                );
                let one = Gate::standing(&store, &key(k)).await.unwrap();
                assert_eq!(one, two, "{k} after {step} ms more");
                shapes.insert((one.0.is_some(), one.1.is_some()));
            }
        }
        // A level with a wait and without one, a wait alone, and neither.
        assert_eq!(shapes.len(), 4, "{shapes:?}");
    });
}
