//! Instruction counts per operation, for `valgrind --tool=callgrind`, which
//! counts the same on a busy machine as on an idle one (timings on two
//! shared cores drift by tens of percent between runs).
//!
//! `cargo bench -p keyed-backoff-benches --bench instructions --no-run`
//! builds it; `benches/instructions.sh` runs every (target, op) pair twice,
//! with `N` and `2·N` operations, and reports the difference divided by `N`:
//! the cost of one operation with setup and teardown cancelled out.
//!
//! Usage: `instructions <crate|crate16|floor|rwlock|dashfloor> <next|since_update> <ops>`

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{DashFloor, Floor, RwLockPort, kubelet_keys, visit_order};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);
const KEYS: usize = 1_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, op, ops] = args.as_slice() else {
        eprintln!(
            "usage: instructions <crate|crate16|floor|rwlock|dashfloor> <next|since_update> <ops>"
        );
        std::process::exit(2);
    };
    let ops: usize = ops.parse().expect("ops: a count");
    let next = match op.as_str() {
        "next" => true,
        "since_update" => false,
        other => panic!("op: next or since_update, not {other}"),
    };
    let keys = kubelet_keys(KEYS);
    let order = visit_order(KEYS, 1 << 16);
    let clock = MockClock::new();
    let t0 = clock.now();
    let key = |i: usize| keys[order[i % order.len()]].as_str();
    // Fills the map, then runs the measured operations. `op(k, true)` is
    // `next`, `op(k, false)` the read; every target pays the same dynamic
    // call.
    let drive = |op: &mut dyn FnMut(&str, bool) -> u64| {
        for k in &keys {
            op(k, true);
        }
        let mut acc = 0u64;
        for i in 0..ops {
            acc += op(key(i), next);
        }
        black_box(acc);
    };
    match target.as_str() {
        "crate" | "crate16" => {
            let mut b = Backoff::<String>::builder(INITIAL, MAX)
                .clock(clock.clone())
                .capacity(KEYS);
            if target == "crate16" {
                b = b.shards(16);
            }
            let b = b.build().expect("valid");
            drive(&mut |k, next| {
                if next {
                    b.next(k, t0).as_nanos() as u64
                } else {
                    u64::from(b.is_in_backoff_since_update(k, t0))
                }
            });
        }
        "floor" => {
            let mut f = Floor::new(INITIAL, MAX, clock.clone());
            drive(&mut |k, next| {
                if next {
                    f.next(k, t0).as_nanos() as u64
                } else {
                    u64::from(f.is_in_backoff_since_update(k, t0))
                }
            });
        }
        "rwlock" => {
            let f = RwLockPort::new(INITIAL, MAX, clock.clone());
            drive(&mut |k, next| {
                if next {
                    f.next(k, t0).as_nanos() as u64
                } else {
                    u64::from(f.is_in_backoff_since_update(k, t0))
                }
            });
        }
        "dashfloor" => {
            let f = DashFloor::new(INITIAL, MAX, clock.clone(), 64);
            drive(&mut |k, next| {
                if next {
                    f.next(k, t0).as_nanos() as u64
                } else {
                    u64::from(f.is_in_backoff_since_update(k, t0))
                }
            });
        }
        other => panic!("target: crate, crate16, floor, rwlock or dashfloor, not {other}"),
    }
}
