//! What the Redis suites share: a server, a runtime, stores on it, and
//! client-go's traces replayed on a store.

// Each suite uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff_redis::redis;
use keyed_backoff_redis::redis::aio::{ConnectionLike, ConnectionManager};
use keyed_backoff_redis::redis::{Cmd, Pipeline, RedisFuture};
use keyed_backoff_redis::{Event, RedisBackoff, StoreError};
use keyed_backoff_testkit::clientgo::{int, nanos};
use keyed_backoff_testkit::redis_server::Server;
use serde_json::Value;

pub type Store = RedisBackoff<ConnectionManager>;

/// One server for the tests that do not disturb it. A `static` is never
/// dropped: the server's watchdog stops it, and removes its directory,
/// when the test binary exits (see `keyed_backoff_testkit::redis_server`).
pub fn shared() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(Server::start)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub async fn connect(url: &str) -> ConnectionManager {
    let client = redis::Client::open(url).expect("url");
    ConnectionManager::new(client).await.expect("connect")
}

/// A prefix no other test uses.
pub fn prefix(name: &str) -> String {
    format!("test-{name}-{:x}", rand::random::<u32>())
}

pub fn store_on(conn: ConnectionManager, name: &str) -> Store {
    RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix(prefix(name))
        .timeout(Duration::from_millis(300))
        .build(conn)
        .unwrap()
}

/// Polls `op` until it succeeds, failing after a deadline.
pub async fn until_ok<T, F, Fut>(mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match op().await {
            Ok(v) => return v,
            Err(e) => assert!(Instant::now() < deadline, "never recovered: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------
// client-go's traces, replayed on the store under a mock clock

/// Replays one client-go trace on a store over `conn` (any connection: a
/// single server's or a cluster's) with keys under `prefix`; the number of
/// results checked.
pub async fn replay<C>(path: &Path, conn: &C, prefix: &str) -> usize
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let text = std::fs::read_to_string(path).expect("read trace");
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let config: Value = serde_json::from_str(lines.next().expect("config").1).expect("json");
    let config = &config["config"];
    let clock = MockClock::new();
    let mut builder = RedisBackoff::builder(nanos(config, "initial_ns"), nanos(config, "max_ns"))
        .clock(clock.clone())
        .prefix(prefix);
    if let Some(w) = config.get("expire_after_ns").and_then(Value::as_u64) {
        builder = builder.expire_after(Duration::from_nanos(w));
    }
    let store = builder.build(conn.clone()).expect("valid config");
    let start = clock.now();
    let event =
        |op: &Value| Event::between(start.offset_by_nanos(int(op, "event_ns")), clock.now());
    let mut keys = BTreeSet::new();
    let mut checked = 0;
    for (n, line) in lines {
        let op: Value = serde_json::from_str(line).expect("op json");
        let whence = format!("{}:{}: {line}", path.display(), n + 1);
        let key = op["key"].as_str().unwrap_or("").to_string();
        match op["op"].as_str().expect("op") {
            "advance" => clock.advance(nanos(&op, "ns")),
            "next" => {
                keys.insert(key.clone());
                store.next(&key, event(&op)).await.expect("next");
            }
            "get" => {
                assert_eq!(
                    store.get(&key).await.expect("get"),
                    nanos(&op, "result_ns"),
                    "{whence}"
                );
                checked += 1;
            }
            "in_since" => {
                let got = store
                    .is_in_backoff_since(&key, event(&op))
                    .await
                    .expect("since");
                assert_eq!(got, op["result"].as_bool().expect("result"), "{whence}");
                checked += 1;
            }
            "in_since_update" => {
                let got = store
                    .is_in_backoff_since_update(&key, event(&op))
                    .await
                    .expect("update");
                assert_eq!(got, op["result"].as_bool().expect("result"), "{whence}");
                checked += 1;
            }
            "reset" | "delete" => {
                store.reset(&key).await.expect("reset");
            }
            // Redis expires entries by itself; the trace's explicit GC is
            // the same rule applied to every key now.
            "gc" => {
                for k in &keys {
                    store.gc_key(k).await.expect("gc_key");
                }
            }
            "len" => {
                let mut c = conn.clone();
                let mut live = 0;
                for k in &keys {
                    let exists: bool = redis::cmd("EXISTS")
                        .arg(store.redis_key(k))
                        .query_async(&mut c)
                        .await
                        .expect("exists");
                    live += i64::from(exists);
                }
                assert_eq!(live, int(&op, "result"), "{whence}");
                checked += 1;
            }
            other => panic!("{whence}: unknown op {other}"),
        }
    }
    checked
}

/// A connection that counts its round trips (a pipeline is one).
#[derive(Clone)]
pub struct Counted {
    inner: ConnectionManager,
    trips: Arc<AtomicU64>,
}

impl Counted {
    pub fn new(inner: ConnectionManager) -> Self {
        Counted {
            inner,
            trips: Arc::default(),
        }
    }

    /// The round trips so far, on every clone.
    pub fn trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }
}

impl ConnectionLike for Counted {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        self.inner.req_packed_commands(pipeline, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}
