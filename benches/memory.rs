//! Heap bytes per entry at 1,000,000 keys, not counting the keys' own
//! characters, measured with a counting global allocator.
//!
//! Run: `cargo bench --bench memory`

mod common;

use std::alloc::System;
use std::time::Duration;

use common::{Floor, kubelet_keys};
use dashmap::DashMap;
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const N: usize = 1_000_000;
const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);

/// Net heap growth while `fill` runs, minus the key characters, per entry.
fn per_entry<T>(label: &str, key_chars: usize, fill: impl FnOnce() -> T) {
    let region = Region::new(GLOBAL);
    let kept = fill();
    let s = region.change();
    // Reallocations are already in both totals.
    let net = s.bytes_allocated as i64 - s.bytes_deallocated as i64;
    let per = (net - key_chars as i64) as f64 / N as f64;
    println!("{label:<44} {per:>7.1} bytes/entry");
    drop(kept);
}

fn main() {
    let keys = kubelet_keys(N);
    let key_chars: usize = keys.iter().map(String::len).sum();
    println!(
        "{N} entries, keys of {} bytes on average (not counted)",
        key_chars / N
    );
    let clock = MockClock::new();
    per_entry("crate, Backoff<String>", key_chars, || {
        let b = Backoff::<String>::builder(INITIAL, MAX)
            .clock(clock.clone())
            .build()
            .expect("valid");
        for k in &keys {
            let _ = b.next(k.as_str(), clock.now());
        }
        b
    });
    per_entry("crate, Backoff<Box<str>>", key_chars, || {
        let b = Backoff::<Box<str>>::builder(INITIAL, MAX)
            .clock(clock.clone())
            .build()
            .expect("valid");
        for k in &keys {
            let _ = b.next(k.as_str(), clock.now());
        }
        b
    });
    per_entry(
        "crate, Backoff<Arc<str>> (+16 B Arc counts)",
        key_chars,
        || {
            let b = Backoff::<std::sync::Arc<str>>::builder(INITIAL, MAX)
                .clock(clock.clone())
                .build()
                .expect("valid");
            for k in &keys {
                let _ = b.next(k.as_str(), clock.now());
            }
            b
        },
    );
    per_entry("DashMap<String, (u64, u64)>", key_chars, || {
        let m: DashMap<String, (u64, u64), foldhash::fast::RandomState> = DashMap::default();
        for k in &keys {
            let _ = m.insert(k.to_owned(), (1, 2));
        }
        m
    });
    per_entry("floor: HashMap<String, {u64, i64}>", key_chars, || {
        let mut f = Floor::new(INITIAL, MAX, clock.clone());
        for k in &keys {
            let _ = f.next(k, clock.now());
        }
        f
    });
}
