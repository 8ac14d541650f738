//! Reader and writer latency while another thread runs `gc` continuously
//! over 1,000,000 entries (half of them expired at the start).
//!
//! Run: `cargo bench --bench gc_latency` (optionally `-- <seconds> <shards,...>`)
//!
//! For the crate at several shard counts and for the `RwLock<HashMap>`
//! baseline, one thread loops `gc` while another times individual calls on
//! random live keys: `is_in_backoff_since_update` (a reader), then `next` (a
//! writer). Prints p50, p99, p99.9 and max latency and how many GC passes
//! ran.

mod common;

use std::time::Duration;

use common::latency::measure;
use common::{RwLockPort, kubelet_keys, populate_half_expired as populate};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};

const N: usize = 1_000_000;
const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let seconds: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let shard_counts: Vec<Option<usize>> = match args.get(1) {
        Some(list) => list.split(',').map(|s| s.parse().ok()).collect(),
        None => vec![Some(8), None, Some(4096)],
    };
    let keys = kubelet_keys(N);
    let mut reports = Vec::new();

    for shards in shard_counts {
        let clock = MockClock::new();
        let mut builder = Backoff::<String>::builder(INITIAL, MAX)
            .clock(clock.clone())
            .capacity(N);
        if let Some(n) = shards {
            builder = builder.shards(n);
        }
        let b = builder.build().expect("valid");
        populate(&keys, &clock, &mut |k, t| {
            b.next(k, t);
        });
        let t = clock.now();
        let label = match shards {
            Some(n) => format!("crate, {n} shards"),
            None => "crate, default shards".to_string(),
        };
        let read = |k: &str| b.is_in_backoff_since_update(k, t);
        let write = |k: &str| !b.next(k, t).is_zero();
        for (op, f) in [
            ("read", &read as &(dyn Fn(&str) -> bool + Sync)),
            ("next", &write),
        ] {
            if shards.is_none() {
                reports.push(measure(
                    format!("{label}, {op}, no gc"),
                    &keys,
                    seconds,
                    f,
                    &|| 0,
                ));
            }
            reports.push(measure(
                format!("{label}, {op}"),
                &keys,
                seconds,
                f,
                &|| b.gc(),
            ));
        }
    }

    let clock = MockClock::new();
    let port = RwLockPort::new(INITIAL, MAX, clock.clone());
    populate(&keys, &clock, &mut |k, t| {
        port.next(k, t);
    });
    let t = clock.now();
    let read = |k: &str| port.is_in_backoff_since_update(k, t);
    let write = |k: &str| !port.next(k, t).is_zero();
    for (op, f) in [
        ("read", &read as &(dyn Fn(&str) -> bool + Sync)),
        ("next", &write),
    ] {
        reports.push(measure(
            format!("RwLock<HashMap>, {op}"),
            &keys,
            seconds,
            f,
            &|| port.gc(),
        ));
    }

    println!("latency during continuous gc over {N} entries ({seconds} s each)");
    println!(
        "{:<34} {:>10} {:>9} {:>9} {:>9} {:>10} {:>11} {:>9}",
        "target", "reads", "gc passes", "p50 ns", "p99 ns", "p99.9 ns", "max ns", ""
    );
    for r in reports {
        println!(
            "{:<34} {:>10} {:>9} {:>9} {:>9} {:>10} {:>11}",
            r.label, r.reads, r.gc_passes, r.p50, r.p99, r.p999, r.max
        );
    }
}
