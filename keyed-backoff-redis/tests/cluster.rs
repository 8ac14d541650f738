//! The store on a Redis Cluster of the test's own on loopback (3 masters,
//! one replica each): client-go's traces replay on it, and a fleet's
//! traffic runs through a resharding of a slot (keys answering ASK, then
//! MOVED) and a replica's takeover of its master, with every advance
//! counted exactly once.
#![cfg(feature = "cluster")]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff_redis::redis::cluster::ClusterClient;
use keyed_backoff_redis::redis::cluster_async::ClusterConnection;
use keyed_backoff_redis::{Event, OpId, RedisBackoff};
use keyed_backoff_testkit::clientgo::traces;
use keyed_backoff_testkit::redis_cluster::Cluster;
use parking_lot::Mutex;

async fn connect(cluster: &Cluster) -> ClusterConnection {
    ClusterClient::builder(cluster.urls())
        .connection_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_secs(1))
        .build()
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("cluster connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_clientgo_trace_replays_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let conn = connect(&cluster).await;
    let paths = traces();
    assert_eq!(paths.len(), 61);
    let mut checked = 0;
    for (n, path) in paths.iter().enumerate() {
        checked += common::replay(path, &conn, &format!("trace-{n}")).await;
    }
    assert!(checked > 2_000, "only {checked} results checked");

    // Waiting for replicas works on a cluster too: the key's master's own.
    let durable = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix("durable")
        .timeout(Duration::from_secs(1))
        .wait_for_replicas(1, Duration::from_millis(500))
        .build(conn.clone())
        .unwrap();
    for key in ["a", "b", "c", "{x}d"] {
        assert_eq!(
            durable.next(key, Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
    }
}

const TASKS: usize = 4;
/// Keys of each task in the slot that moves (one hash tag), and elsewhere.
const HOT: usize = 5;
const COLD: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_through_a_resharding_and_a_failover_counts_every_advance_once() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(|| Cluster::start(3))
            .await
            .unwrap(),
    );
    let store = RedisBackoff::builder(Duration::from_millis(1), Duration::from_secs(3600))
        .prefix("fleet")
        .timeout(Duration::from_secs(2))
        .build(connect(&cluster).await)
        .unwrap();
    let hot_slot: u16 = cluster.nodes[0]
        .command(&["CLUSTER", "KEYSLOT", &store.redis_key("{hot}")])
        .unwrap();

    let acked: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let (ok, retries) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let keys: Vec<String> = (0..HOT)
            .map(|i| format!("{{hot}}t{task}-{i}"))
            .chain((0..COLD).map(|i| format!("t{task}-{i}")))
            .collect();
        let (store, acked, ok, retries, stop) = (
            store.clone(),
            Arc::clone(&acked),
            Arc::clone(&ok),
            Arc::clone(&retries),
            Arc::clone(&stop),
        );
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let key = &keys[i % keys.len()];
                i += 1;
                // One advance, retried under its id until it is answered:
                // a retry after a lost answer must not count twice.
                let id = OpId::new();
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    match store.next_with(key, Event::now(), id).await {
                        Ok(_) => break,
                        Err(e) => {
                            assert!(Instant::now() < deadline, "{key}: still failing: {e}");
                            retries.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                *acked.lock().entry(key.clone()).or_default() += 1;
                ok.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }

    // Blocks (off the runtime) until `n` more advances are acknowledged.
    let progress = {
        let ok = Arc::clone(&ok);
        move |n: usize| {
            let target = ok.load(Ordering::SeqCst) + n;
            let deadline = Instant::now() + Duration::from_secs(30);
            while ok.load(Ordering::SeqCst) < target {
                assert!(Instant::now() < deadline, "traffic stalled");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let (c, p) = (Arc::clone(&cluster), progress.clone());
    let moved_to = tokio::task::spawn_blocking(move || {
        p(300);
        // Reshard the hot slot to another master, traffic running between
        // the batches of keys it moves.
        let from = c.master_of_slot(hot_slot);
        let to = (0..c.nodes.len())
            .find(|&n| n != from && c.master_of_slot(hot_slot) != n && is_master(&c, n))
            .unwrap();
        c.migrate_slot(hot_slot, to, || p(10));
        assert_eq!(c.master_of_slot(hot_slot), to);
        // Traffic went through the migration: the new master was sent
        // ASKING (the redirection of a key already moved).
        let stats: String = c.nodes[to].command(&["INFO", "commandstats"]).unwrap();
        let asking = stats
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_asking:calls="))
            .and_then(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(asking > 0, "no request was redirected with ASK");
        p(300);
        // Its new master's replica takes over.
        let new_master = c.failover(to);
        assert_eq!(c.master_of_slot(hot_slot), new_master);
        p(300);
        new_master
    })
    .await
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }

    let acked = std::mem::take(&mut *acked.lock());
    assert_eq!(acked.len(), TASKS * (HOT + COLD));
    let mut wrong = Vec::new();
    for (key, told) in &acked {
        let held = store.attempts(key).await.unwrap();
        if held != *told {
            let slot: u16 = cluster.nodes[moved_to]
                .command(&["CLUSTER", "KEYSLOT", &store.redis_key(key)])
                .unwrap();
            wrong.push(format!(
                "{key} (slot {slot}, node {}): {held} attempts, {told} acknowledged",
                cluster.master_of_slot(slot)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    eprintln!(
        "{} advances, {} retries; slot {hot_slot} resharded, then served by node {moved_to} after the failover",
        acked.values().sum::<u32>(),
        retries.load(Ordering::SeqCst)
    );
}

fn is_master(cluster: &Cluster, node: usize) -> bool {
    cluster.nodes[node]
        .command::<String>(&["INFO", "replication"])
        .is_ok_and(|info| info.lines().any(|l| l.trim() == "role:master"))
}
