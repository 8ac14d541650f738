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
use std::time::{Duration, Instant};

use common::rounds::{Row, env, per_call, report, two_threads};
use common::{DashFloor, Floor, RwLockPort, kubelet_keys, populate_half_expired, visit_order};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock, MockInstant};

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);
const KEYS: usize = 1_000;

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
                per_call(&order, |_, k| {
                    if write {
                        crate_.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(crate_.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |_, k| {
                    if write {
                        crate_16.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(crate_16.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |_, k| {
                    if write {
                        floor.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(floor.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |_, k| {
                    if write {
                        rwlock.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(rwlock.is_in_backoff_since_update(k, t0))
                    }
                }),
                per_call(&order, |_, k| {
                    if write {
                        dash.next(k, t0).as_nanos() as u64
                    } else {
                        u64::from(dash.is_in_backoff_since_update(k, t0))
                    }
                }),
            ];
            for (row, v) in rows.iter_mut().zip(r) {
                row.rounds.push(v);
            }
        }
        report(title, &rows, &[2, 3]);
    }
    let mut rows = [
        Row::new("crate"),
        Row::new("crate_16shards"),
        Row::new("rwlock"),
    ];
    // The second thread starts 7,919 keys further along the same order.
    let mut ahead = order.clone();
    ahead.rotate_left(7919);
    let orders = [&order[..], &ahead[..]];
    for _ in 0..rounds {
        let c = two_threads(orders, |_, k| crate_.next(k, t0).as_nanos() as u64);
        let c16 = two_threads(orders, |_, k| crate_16.next(k, t0).as_nanos() as u64);
        let p = two_threads(orders, |_, k| rwlock.next(k, t0).as_nanos() as u64);
        rows[0].rounds.push(c);
        rows[1].rounds.push(c16);
        rows[2].rounds.push(p);
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
        rows[0].rounds.push(sized);
        rows[1].rounds.push(default);
        rows[2].rounds.push(r);
    }
    report(
        "gc of 1,000,000 entries, half expired (ns per sweep)",
        &rows,
        &[2],
    );
}
