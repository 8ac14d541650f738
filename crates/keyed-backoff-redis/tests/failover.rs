//! A master killed while a fleet's traffic runs, its replica promoted: what
//! the fleet was told survives, or not, depending on `wait_for_replicas`.
//!
//! Each run starts its own master and replica on loopback. Tasks advance
//! keys they alone own and count the advances acknowledged to them. The
//! replica then loses its link to the master (it is pointed at a port where
//! no one listens: it keeps its data and falls behind, as a partitioned or
//! slow replica does), more traffic runs, the master is killed, and the
//! replica is promoted. An acknowledged advance is lost when
//! a key's attempt count on the new master is below the number of its
//! advances the tasks were told about.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keyed_backoff_redis::redis;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, StoreError, fail_fast};
use keyed_backoff_testkit::redis_server::{Server, free_port, poll_until};
use parking_lot::Mutex;

const TASKS: usize = 4;
const KEYS_PER_TASK: usize = 25;
/// Long enough that no operation times out on a busy machine while the
/// master is healthy: an unknown outcome then comes from `WAIT` alone.
const TIMEOUT: Duration = Duration::from_secs(5);
const WAIT: Duration = Duration::from_millis(100);

struct Run {
    /// Advances acknowledged to the tasks.
    acked: usize,
    /// Of those, the ones the promoted replica does not hold.
    lost: usize,
    /// Operations that failed with an unknown outcome before the master
    /// died (not replicated in time, or timed out).
    unknown: usize,
    /// Median latency of an acknowledged advance while the replica kept up.
    p50: Duration,
}

async fn store(url: &str, wait: bool) -> RedisBackoff<ConnectionManager> {
    let client = redis::Client::open(url).unwrap();
    let conn = ConnectionManager::new_with_config(client, fail_fast(TIMEOUT))
        .await
        .unwrap();
    let builder = RedisBackoff::builder(Duration::from_millis(1), Duration::from_secs(3600))
        .prefix("failover")
        .timeout(TIMEOUT);
    let builder = if wait {
        builder.wait_for_replicas(1, WAIT)
    } else {
        builder
    };
    builder.build(conn).unwrap()
}

/// Polls `done` every millisecond until it holds, for at most 30 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn failover(wait: bool) -> Option<Run> {
    let mut master = Server::start();
    if !master.owned() {
        eprintln!("REDIS_URL is set: the failover runs need servers of their own; skipped");
        return None;
    }
    let replica = Server::replica_of(&master);
    let on_master = store(&master.url, wait).await;

    let acked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let (ops, ok, unknown) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (lagging, stop) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = on_master.clone();
        let (acked, latencies) = (Arc::clone(&acked), Arc::clone(&latencies));
        let (ops, ok, unknown) = (Arc::clone(&ops), Arc::clone(&ok), Arc::clone(&unknown));
        let (lagging, stop) = (Arc::clone(&lagging), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let key = format!("t{task}-k{}", i % KEYS_PER_TASK);
                i += 1;
                let sent = Instant::now();
                match store.next(&key, Event::now()).await {
                    Ok(_) => {
                        *acked.lock().entry(key).or_default() += 1;
                        ok.fetch_add(1, Ordering::SeqCst);
                        if !lagging.load(Ordering::SeqCst) {
                            latencies.lock().push(sent.elapsed());
                        }
                    }
                    // Not acknowledged, the outcome unknown: too few
                    // replicas in time, or queued behind another
                    // operation's WAIT on the shared connection.
                    Err(e) if e.outcome_unknown() && !stop.load(Ordering::SeqCst) => {
                        if let StoreError::NotReplicated { acked, wanted, .. } = e {
                            assert_eq!((acked, wanted), (0, 1));
                        }
                        unknown.fetch_add(1, Ordering::SeqCst);
                    }
                    // The master is gone: nothing more is acknowledged.
                    Err(_) => {}
                }
                ops.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }

    until("traffic with a healthy replica", || {
        ok.load(Ordering::SeqCst) >= 1_000
    })
    .await;
    // The replica falls behind; the master goes on answering.
    lagging.store(true, Ordering::SeqCst);
    let _: String = replica
        .command(&["REPLICAOF", "127.0.0.1", &free_port().to_string()])
        .unwrap();
    replica.wait_for("master_link_status:down");
    let mark = ops.load(Ordering::SeqCst);
    until("traffic while the replica lags", || {
        ops.load(Ordering::SeqCst) >= mark + 40
    })
    .await;
    master.stop();
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    replica.promote();

    let on_replica = store(&replica.url, false).await;
    let acked = std::mem::take(&mut *acked.lock());
    let mut lost = 0;
    for (key, told) in &acked {
        let held = on_replica.attempts(key).await.unwrap() as usize;
        lost += told.saturating_sub(held);
    }
    let mut latencies = std::mem::take(&mut *latencies.lock());
    latencies.sort();
    let run = Run {
        acked: acked.values().sum(),
        lost,
        unknown: unknown.load(Ordering::SeqCst),
        p50: latencies[latencies.len() / 2],
    };
    eprintln!(
        "wait_for_replicas {}: {} advances acknowledged, {} lost in the failover, {} failed with an unknown outcome; p50 {:?} with the replica in sync",
        if wait { "1" } else { "off" },
        run.acked,
        run.lost,
        run.unknown,
        run.p50
    );
    Some(run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_for_one_replica_a_killed_master_loses_no_acknowledged_advance() {
    let Some(run) = failover(true).await else {
        return;
    };
    assert!(run.acked >= 1_000);
    assert_eq!(run.lost, 0, "acknowledged advances lost");
    // While the replica was cut off no write was acknowledged: each waited
    // for it, then failed with an unknown outcome (not replicated, or timed
    // out queued behind another WAIT on the shared connection).
    assert!(run.unknown > 0);
}

/// The control: without `WAIT`, everything acknowledged while the replica
/// lagged is gone after the failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_wait_a_killed_master_loses_what_the_lagging_replica_missed() {
    let Some(run) = failover(false).await else {
        return;
    };
    assert_eq!(run.unknown, 0);
    assert!(run.lost >= 20, "{} lost", run.lost);
}

/// A replica's full sync and a `SAVE` write snapshots: they land in each
/// server's own directory, never in the one the tests run in (a snapshot
/// there would end up in the repository and in the package).
#[test]
fn snapshots_stay_in_each_servers_own_directory() {
    let master = Server::start();
    if !master.owned() {
        return;
    }
    let replica = Server::replica_of(&master);
    for server in [&master, &replica] {
        // The replica's full sync may still be writing the master's
        // snapshot in the background: poll until `SAVE` is let through.
        poll_until("SAVE let through", Duration::from_secs(10), || match server
            .command::<String>(&["SAVE"])
        {
            Ok(_) => true,
            Err(e) if e.to_string().contains("save already in progress") => false,
            Err(e) => panic!("SAVE: {e}"),
        });
        let dir = server.dir().expect("an owned server's directory");
        assert!(dir.join("dump.rdb").is_file(), "{}", dir.display());
    }
    let here = std::env::current_dir().unwrap();
    assert!(!here.join("dump.rdb").exists(), "{}", here.display());
}
