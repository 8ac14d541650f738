//! The Redis store's operations beside a plain `GET` on the same connection,
//! beside the floor of any script (`EVALSHA` of a script that only returns,
//! with the store's key and arguments) and beside the floor of any script
//! that does what `next` must (reads Redis `TIME`, `GET`s the key and `SET`s
//! it with a time to live), measured in the same run, from 1 and from 8
//! concurrent tasks.
//!
//! `cargo bench -p keyed-backoff-benches --features redis --bench redis_store`
//! (`REDIS_URL`, default `redis://127.0.0.1:6379/`; optionally `-- <seconds>`).
//!
//! Each round runs every operation for a slice of the time, in turn, so
//! drift on a shared machine hits all of them alike; the report gives
//! ops/s, p50 and p99 per operation and the ratio of each median to the
//! `GET`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keyed_backoff_redis::redis;
use keyed_backoff_redis::{Event, RedisBackoff};
use redis::aio::ConnectionManager;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Get,
    EmptyScript,
    ReadWriteScript,
    Next,
    TryNext,
}

const OPS: [(Op, &str); 5] = [
    (Op::Get, "GET"),
    (Op::EmptyScript, "script"),
    (Op::ReadWriteScript, "TIME+GET+SET"),
    (Op::Next, "next"),
    (Op::TryNext, "try_next"),
];
const KEYS: usize = 1_000;

/// The floor of any script: one that only returns.
static EMPTY: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new("return 1"));
/// The least a `next` does: the server's time, one read, one write.
static READ_WRITE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "local t = redis.call('TIME') \
         local v = redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], t[1] .. t[2], 'PX', ARGV[8]) \
         return {1, 1, 1}",
    )
});

async fn one(
    store: &RedisBackoff<ConnectionManager>,
    conn: &mut ConnectionManager,
    op: Op,
    i: usize,
) {
    let key = format!("k{}", i % KEYS);
    match op {
        Op::Get => {
            let _: Option<String> = redis::cmd("GET")
                .arg(store.redis_key(&format!("get-{key}")))
                .query_async(conn)
                .await
                .expect("GET");
        }
        Op::EmptyScript | Op::ReadWriteScript => {
            // Sent the way the store sends its own: EVALSHA built in place
            // (both scripts are loaded before the run).
            let (script, key) = match op {
                Op::EmptyScript => (&*EMPTY, format!("get-{key}")),
                _ => (&*READ_WRITE, format!("floor-{key}")),
            };
            let _: redis::Value = redis::cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(1)
                .arg(store.redis_key(&key))
                .arg("next")
                .arg("")
                .arg(0)
                .arg(1_000_000)
                .arg(50_000_000)
                .arg("0")
                .arg(100_000_000)
                .arg(150)
                .arg("")
                .query_async(conn)
                .await
                .expect("script");
        }
        Op::Next => {
            store.next(&key, Event::now()).await.expect("next");
        }
        Op::TryNext => {
            let _ = store.try_next(&key, Event::now()).await.expect("try_next");
        }
    }
}

/// Runs `op` from `tasks` tasks for `slice`; returns per-call latencies (ns)
/// and the calls completed.
async fn slice(
    store: &Arc<RedisBackoff<ConnectionManager>>,
    conn: &ConnectionManager,
    op: Op,
    tasks: usize,
    slice: Duration,
) -> Vec<u64> {
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = Arc::clone(store);
        let mut conn = conn.clone();
        handles.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let until = Instant::now() + slice;
            let mut i = t * 7_919;
            while Instant::now() < until {
                let start = Instant::now();
                one(&store, &mut conn, op, i).await;
                samples.push(start.elapsed().as_nanos() as u64);
                i += 1;
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.expect("task"));
    }
    all
}

fn main() {
    let seconds: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(6.0);
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).expect("REDIS_URL");
        let conn = ConnectionManager::new(client)
            .await
            .expect("a Redis at REDIS_URL");
        let store = Arc::new(
            RedisBackoff::builder(Duration::from_millis(1), Duration::from_millis(50))
                .prefix(format!("bench-{}", std::process::id()))
                .timeout(Duration::from_secs(2))
                .build(conn.clone())
                .expect("valid"),
        );
        let mut c = conn.clone();
        for script in [&*EMPTY, &*READ_WRITE] {
            let _: String = script.load_async(&mut c).await.expect("SCRIPT LOAD");
        }
        // The store loads its own on its first call.
        store.next("warm-up", Event::now()).await.expect("next");
        for i in 0..KEYS {
            let _: () = redis::cmd("SET")
                .arg(store.redis_key(&format!("get-k{i}")))
                .arg("1:2:3")
                .arg("PX")
                .arg(600_000)
                .query_async(&mut c)
                .await
                .expect("SET");
        }
        println!(
            "Redis store against a plain GET on the same connection ({seconds} s per task count)"
        );
        println!(
            "{:<6} {:<12} {:>10} {:>9} {:>9} {:>12}",
            "tasks", "op", "ops/s", "p50 µs", "p99 µs", "p50 ÷ GET"
        );
        for tasks in [1, 8] {
            let rounds = 10;
            let per = Duration::from_secs_f64(seconds / (rounds * OPS.len()) as f64);
            let mut samples: Vec<Vec<u64>> = vec![Vec::new(); OPS.len()];
            let mut busy = vec![Duration::ZERO; OPS.len()];
            for _ in 0..rounds {
                for (n, (op, _)) in OPS.iter().enumerate() {
                    let started = Instant::now();
                    samples[n].extend(slice(&store, &conn, *op, tasks, per).await);
                    busy[n] += started.elapsed();
                }
            }
            let mut get_p50 = 0.0;
            for (n, (_, name)) in OPS.iter().enumerate() {
                let s = &mut samples[n];
                s.sort_unstable();
                let at = |q: f64| s[((s.len() as f64 * q) as usize).min(s.len() - 1)] as f64 / 1e3;
                let (p50, p99) = (at(0.5), at(0.99));
                if n == 0 {
                    get_p50 = p50;
                }
                println!(
                    "{tasks:<6} {name:<12} {:>10.0} {p50:>9.1} {p99:>9.1} {:>11.2}x",
                    s.len() as f64 / busy[n].as_secs_f64(),
                    p50 / get_p50
                );
            }
        }
    });
}
