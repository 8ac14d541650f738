//! The store on a Redis Cluster of the test's own on loopback (3 masters,
//! one replica each): client-go's traces replay on it, and a fleet's
//! traffic runs through a resharding of a slot (keys answering ASK, then
//! MOVED), a replica's takeover of its master, and a master killed and
//! replaced by the cluster itself, with every advance counted exactly once.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff_redis::OutageSettings;
use keyed_backoff_redis::clock::MockClock;
use keyed_backoff_redis::keyed_backoff::Gate;
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

    // The fleet's outage state lives in one slot (one hash tag): two
    // replicas on the cluster share one outage and its probes. They read
    // one mock clock, which stands still: every claim below falls in the
    // ladder's first step, however long the machine takes to make them.
    let clock = MockClock::new();
    let replica = || {
        RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .prefix("fleet")
            .clock(clock.clone())
            .timeout(Duration::from_secs(1))
            .build(conn.clone())
            .unwrap()
            .outage_aware(OutageSettings::new().min_failing_keys(3).probes(Some(2)))
            .unwrap()
    };
    let (a, b) = (replica(), replica());
    for key in ["down-1", "down-2", "down-3"] {
        assert!(a.fail(&key.to_string()).await.unwrap().is_ok());
    }
    assert!(a.in_outage());
    let mut goes = 0;
    for k in 0..20 {
        let gate = if k % 2 == 0 { &a } else { &b };
        // Within the ladder's first step: at most its 2 probes go.
        goes += usize::from(gate.claim(&format!("key-{k}")).await.unwrap().is_none());
    }
    assert!(goes <= 2, "{goes} keys went");
    assert!(b.in_outage());
    assert_eq!((a.outages(), b.outages()), (1, 1));
}

const TASKS: usize = 4;
/// Keys of each task in the slot under test (one hash tag), and elsewhere.
const HOT: usize = 5;
const COLD: usize = 10;

/// What a fleet's traffic told its callers: the advances acknowledged per
/// key, and the calls that failed and were retried.
struct Told {
    acked: HashMap<String, u32>,
    retries: usize,
}

/// Runs `TASKS` tasks advancing their keys through `store` (each advance
/// retried under its id until answered) while `control` runs off the
/// runtime; `control` is handed a function that blocks until `n` more
/// advances are acknowledged. Stops the traffic when `control` returns.
async fn traffic<T: Send + 'static>(
    store: &Store,
    control: impl FnOnce(&dyn Fn(usize)) -> T + Send + 'static,
) -> (Told, T) {
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
    let progress = move |n: usize| {
        let target = ok.load(Ordering::SeqCst) + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while ok.load(Ordering::SeqCst) < target {
            assert!(Instant::now() < deadline, "traffic stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let out = tokio::task::spawn_blocking(move || control(&progress))
        .await
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    let acked = std::mem::take(&mut *acked.lock());
    assert_eq!(acked.len(), TASKS * (HOT + COLD));
    let told = Told {
        acked,
        retries: retries.load(Ordering::SeqCst),
    };
    (told, out)
}

/// Every key's attempt count equals the advances acknowledged on it.
async fn each_advance_counted_once(store: &Store, cluster: &Cluster, told: &Told) {
    let mut wrong = Vec::new();
    for (key, acked) in &told.acked {
        let held = store.attempts(key).await.unwrap();
        if held != *acked {
            let slot: u16 = cluster.nodes[cluster.any_running()]
                .command(&["CLUSTER", "KEYSLOT", &store.redis_key(key)])
                .unwrap();
            wrong.push(format!(
                "{key} (slot {slot}, node {}): {held} attempts, {acked} acknowledged",
                cluster.master_of_slot(slot)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

type Store = RedisBackoff<ClusterConnection>;

/// A cluster of the test's own, a store on it (waiting for one replica
/// when `durable`), and the slot of the hash tag `{hot}`.
async fn fleet_on_a_cluster(durable: bool) -> (Cluster, Store, u16) {
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let builder = RedisBackoff::builder(Duration::from_millis(1), Duration::from_secs(3600))
        .prefix("fleet")
        .timeout(Duration::from_secs(2));
    let builder = if durable {
        builder.wait_for_replicas(1, Duration::from_millis(500))
    } else {
        builder
    };
    let store = builder.build(connect(&cluster).await).unwrap();
    let hot_slot: u16 = cluster.nodes[0]
        .command(&["CLUSTER", "KEYSLOT", &store.redis_key("{hot}")])
        .unwrap();
    (cluster, store, hot_slot)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_through_a_resharding_and_a_failover_counts_every_advance_once() {
    let (cluster, store, hot_slot) = fleet_on_a_cluster(false).await;
    let (told, (cluster, moved_to)) = traffic(&store, move |progress| {
        let c = cluster;
        progress(300);
        // Reshard the hot slot to another master, traffic running between
        // the batches of keys it moves.
        let from = c.master_of_slot(hot_slot);
        let to = (0..c.nodes.len())
            .find(|&n| n != from && is_master(&c, n))
            .unwrap();
        c.migrate_slot(hot_slot, to, || progress(10));
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
        progress(300);
        // Its new master's replica takes over.
        let new_master = c.failover(to);
        assert_eq!(c.master_of_slot(hot_slot), new_master);
        progress(300);
        (c, new_master)
    })
    .await;
    each_advance_counted_once(&store, &cluster, &told).await;
    eprintln!(
        "{} advances, {} retries; slot {hot_slot} resharded, then served by node {moved_to} after the failover",
        told.acked.values().sum::<u32>(),
        told.retries
    );
}

/// A master is killed outright; the cluster promotes its replica by itself,
/// and the killed node comes back as the new master's replica. Waiting for
/// one replica before each acknowledgement, nothing acknowledged is lost,
/// and a retry of an advance whose answer was lost counts once whichever
/// node ran it. (On a healthy link the replica is rarely more than a few
/// writes behind, so without `WAIT` this run usually loses nothing either:
/// the loss `WAIT` prevents is shown by `tests/failover.rs`, where the
/// replica is cut off first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_a_killed_master_loses_no_acknowledged_advance() {
    let (cluster, store, hot_slot) = fleet_on_a_cluster(true).await;
    let (told, (cluster, (promoted, took_over, rejoined))) = traffic(&store, move |progress| {
        let mut c = cluster;
        progress(600);
        let master = c.master_of_slot(hot_slot);
        let killed = Instant::now();
        let promoted = c.crash(master);
        let took_over = killed.elapsed();
        assert_eq!(c.master_of_slot(hot_slot), promoted);
        // The promoted master has no replica: its writes cannot be
        // acknowledged (they fail, and are retried) until the killed node
        // comes back, empty, as its replica.
        c.rejoin(master);
        let rejoined = killed.elapsed();
        assert_eq!(c.replica_of(promoted), master);
        progress(600);
        (c, (promoted, took_over, rejoined))
    })
    .await;
    each_advance_counted_once(&store, &cluster, &told).await;
    assert!(told.retries > 0, "no call failed while the master was down");
    eprintln!(
        "{} advances, {} retries; slot {hot_slot}'s master killed, node {promoted} promoted \
         after {took_over:.1?}, a replica back after {rejoined:.1?}",
        told.acked.values().sum::<u32>(),
        told.retries
    );
}

fn is_master(cluster: &Cluster, node: usize) -> bool {
    cluster.nodes[node]
        .command::<String>(&["INFO", "replication"])
        .is_ok_and(|info| info.lines().any(|l| l.trim() == "role:master"))
}
