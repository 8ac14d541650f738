//! Four workers retry against one failing downstream, first each with its
//! own in-process backoff, then sharing one backoff per key in Redis.
//!
//! ```text
//! cargo run -p keyed-backoff-examples --features fleet --example fleet
//! ```
//!
//! Needs a Redis: `REDIS_URL`, default `redis://127.0.0.1:6379/`. Time is
//! simulated (a mock clock drives both the workers and the store), so the
//! half hour below takes well under a second; every backoff decision is a
//! real call to Redis.

use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff::{Backoff, InBackoff};
use keyed_backoff_redis::{Event, RedisBackoff, redis};

const WORKERS: usize = 4;
const RUN: Duration = Duration::from_secs(30 * 60);
const INITIAL: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(60);
/// The downstream that every worker calls: it is down for the whole run.
const KEY: &str = "payments-api";

/// Whose backoff a worker asks before it calls the downstream.
enum Gate {
    /// One in-process manager per worker (what N replicas do today).
    PerProcess(Vec<Backoff<String, MockClock>>),
    /// One store shared by all workers.
    Shared(RedisBackoff<redis::aio::ConnectionManager>),
}

impl Gate {
    /// `Ok(delay)`: the worker calls the downstream, fails, and waits
    /// `delay`. `Err(wait)`: another worker already counted this failure.
    async fn attempt(&self, worker: usize) -> Result<Duration, InBackoff> {
        match self {
            Gate::PerProcess(managers) => managers[worker].try_next_now(KEY),
            Gate::Shared(store) => store
                .try_next(KEY, Event::now())
                .await
                .expect("Redis answers (set REDIS_URL)"),
        }
    }
}

/// Runs the workers in simulated time; returns the downstream's requests.
async fn run(gate: &Gate, clock: &MockClock) -> usize {
    let start = clock.now();
    let mut wake = [start; WORKERS];
    let mut requests = 0;
    loop {
        let (worker, at) = wake
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .expect("workers");
        if at.saturating_duration_since(start) >= RUN {
            return requests;
        }
        clock.set(at);
        wake[worker] = match gate.attempt(worker).await {
            Ok(delay) => {
                requests += 1; // the call goes out, and fails
                at + delay
            }
            Err(InBackoff { remaining }) => at + remaining,
        };
    }
}

fn main() {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let clock = MockClock::new();
        let managers = (0..WORKERS)
            .map(|_| {
                Backoff::<String>::builder(INITIAL, MAX)
                    .clock(clock.clone())
                    .build()
                    .expect("valid")
            })
            .collect();
        let alone = run(&Gate::PerProcess(managers), &clock).await;

        // `open` fails fast: with no Redis at `url` the first operation is
        // `StoreError::Unavailable` at once.
        let clock = MockClock::new();
        let store = RedisBackoff::builder(INITIAL, MAX)
            .clock(clock.clone())
            .prefix(format!("fleet-example-{:x}", rand::random::<u32>()))
            .open(&url)
            .await
            .expect("REDIS_URL is a Redis URL");
        let shared = run(&Gate::Shared(store), &clock).await;

        let minutes = RUN.as_secs_f64() / 60.0;
        println!("{WORKERS} workers, a downstream down for {minutes:.0} min, backoff {INITIAL:?} doubling to {MAX:?}");
        println!("{:<28} {:>10} {:>12}", "backoff", "requests", "per minute");
        for (label, n) in [("per process", alone), ("shared in Redis", shared)] {
            println!("{label:<28} {n:>10} {:>12.1}", n as f64 / minutes);
        }
        println!(
            "the shared store cut the downstream's load {:.2}x (the fleet has {WORKERS} workers)",
            alone as f64 / shared as f64
        );
    });
}
