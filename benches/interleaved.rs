//! The targets of `docs/benchmarks.md`, as ratios measured in one run with
//! the targets interleaved: each round runs every target once, in turn, and
//! a ratio is the median over rounds of the round's own ratio, so drift on a
//! shared machine moves both sides of each ratio together.
//!
//! `cargo bench -p keyed-backoff-benches --bench interleaved` (defaults: 15
//! rounds; `ROUNDS=n` overrides; `GC_ROUNDS=n` for the 1,000,000-entry GC,
//! default 5).
//!
//! At 1,000 keys on a mock clock: `next` and `is_in_backoff_since_update`
//! per call on one thread (the crate, the crate with 16 shards, the
//! unlocked floor, the `RwLock` port), and on two threads (combined
//! throughput, crate and port). Then `gc` of 1,000,000 entries, half of
//! them expired, against the floor's `HashMap::retain`.

mod common;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use common::{
    DashFloor, Floor, RwLockPort, kubelet_keys, median, populate_half_expired, visit_order,
};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock, MockInstant};

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);
const KEYS: usize = 1_000;
const OPS: usize = 400_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Nanoseconds per call of `op` over the visiting order.
fn per_call(order: &[&str], mut op: impl FnMut(&str) -> u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    for i in 0..OPS {
        acc = acc.wrapping_add(op(order[i % order.len()]));
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / OPS as f64
}

/// Nanoseconds per call of combined throughput, `op` on two threads.
fn two_threads(order: &[&str], op: impl Fn(&str) -> u64 + Sync) -> f64 {
    let line = Barrier::new(2);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|th| {
                let (line, op) = (&line, &op);
                s.spawn(move || {
                    line.wait();
                    let start = Instant::now();
                    let mut acc = 0u64;
                    for i in 0..OPS {
                        acc = acc.wrapping_add(op(order[(i + th * 7919) % order.len()]));
                    }
                    black_box(acc);
                    (start, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let first = spans.iter().map(|s| s.0).min().expect("two");
    let last = spans.iter().map(|s| s.1).max().expect("two");
    last.duration_since(first).as_nanos() as f64 / (2 * OPS) as f64
}

struct Row {
    name: &'static str,
    rounds: Vec<Vec<f64>>,
}

impl Row {
    fn new(name: &'static str) -> Self {
        Row {
            name,
            rounds: Vec::new(),
        }
    }
}

/// Prints each target's median and each one's median ratio to `base`.
fn report(title: &str, rows: &[Row], bases: &[usize]) {
    println!("\n{title}");
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let n = rows[0].rounds.len();
    for (t, name) in names.iter().enumerate() {
        let times: Vec<f64> = rows[t].rounds.iter().map(|r| r[0]).collect();
        let mut line = format!("  {name:<16} median {:>8.1} ns", median(times));
        for &b in bases {
            if b != t {
                let ratios: Vec<f64> = (0..n)
                    .map(|i| rows[t].rounds[i][0] / rows[b].rounds[i][0])
                    .collect();
                line += &format!("   {:.2}x {}", median(ratios), names[b]);
            }
        }
        println!("{line}");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench` asks the harness for its list
    }
    let rounds = env("ROUNDS", 15);
    let keys = kubelet_keys(KEYS);
    let order: Vec<&str> = visit_order(KEYS, 1 << 16)
        .into_iter()
        .map(|i| keys[i].as_str())
        .collect();
    let clock = MockClock::new();
    let t0 = clock.now();
    let crate_ = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .capacity(KEYS)
        .build()
        .expect("valid");
    let crate_16 = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .capacity(KEYS)
        .shards(env("SHARDS", 16))
        .build()
        .expect("valid");
    let mut floor = Floor::new(INITIAL, MAX, clock.clone());
    let dash = DashFloor::new(INITIAL, MAX, clock.clone(), env("SHARDS", 16));
    let rwlock = RwLockPort::new(INITIAL, MAX, clock.clone());
    for k in &keys {
        crate_.next(k.as_str(), t0);
        crate_16.next(k.as_str(), t0);
        floor.next(k, t0);
        rwlock.next(k, t0);
        dash.next(k, t0);
    }
    for (title, write) in [
        ("next, 1,000 keys, one thread", true),
        ("is_in_backoff_since_update, 1,000 keys, one thread", false),
    ] {
        let mut rows = [
            Row::new("crate"),
            Row::new("crate_16shards"),
            Row::new("floor"),
            Row::new("rwlock"),
            Row::new("dashmap_floor"),
        ];
        for _ in 0..rounds {
            let r = [
                per_call(&order, |k| {
                    if write {
                        crate_.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(crate_.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |k| {
                    if write {
                        crate_16.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(crate_16.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |k| {
                    if write {
                        floor.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(floor.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |k| {
                    if write {
                        rwlock.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(rwlock.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |k| {
                    if write {
                        dash.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(dash.is_in_backoff_since_update(k, t0))
                    }
                }),
            ];
            for (row, v) in rows.iter_mut().zip(r) {
                row.rounds.push(vec![v]);
            }
        }
        report(title, &rows, &[2, 3]);
    }
    let mut rows = [
        Row::new("crate"),
        Row::new("crate_16shards"),
        Row::new("rwlock"),
    ];
    for _ in 0..rounds {
        let c = two_threads(&order, |k| crate_.next(k, t0).as_nanos() as u64);
        let c16 = two_threads(&order, |k| crate_16.next(k, t0).as_nanos() as u64);
        let p = two_threads(&order, |k| rwlock.next(k, t0).as_nanos() as u64);
        rows[0].rounds.push(vec![c]);
        rows[1].rounds.push(vec![c16]);
        rows[2].rounds.push(vec![p]);
    }
    report(
        "next, 1,000 keys, two threads (ns per call of combined throughput; port/crate = throughput ratio)",
        &rows,
        &[2],
    );

    // GC of 1,000,000 entries, half expired.
    let big = kubelet_keys(1_000_000);
    let gc_clock = MockClock::new();
    let mut rows = [
        Row::new("crate, capacity"),
        Row::new("crate, 1024 shards"),
        Row::new("floor retain"),
    ];
    let sweep = |m: Backoff<String, MockClock>| {
        populate_half_expired(&big, &gc_clock, &mut |k, t: MockInstant| {
            m.next(k, t);
        });
        let start = Instant::now();
        assert_eq!(black_box(m.gc()), 500_000);
        start.elapsed().as_nanos() as f64
    };
    for _ in 0..env("GC_ROUNDS", 5) {
        let builder = || Backoff::<String>::builder(INITIAL, MAX).clock(gc_clock.clone());
        let sized = sweep(builder().capacity(big.len()).build().expect("valid"));
        let default = sweep(builder().build().expect("valid"));
        let mut f = Floor::new(INITIAL, MAX, gc_clock.clone());
        populate_half_expired(&big, &gc_clock, &mut |k, t| {
            f.next(k, t);
        });
        let start = Instant::now();
        assert_eq!(black_box(f.gc()), 500_000);
        let r = start.elapsed().as_nanos() as f64;
        rows[0].rounds.push(vec![sized]);
        rows[1].rounds.push(vec![default]);
        rows[2].rounds.push(vec![r]);
    }
    report(
        "gc of 1,000,000 entries, half expired (ns per sweep)",
        &rows,
        &[2],
    );
}
