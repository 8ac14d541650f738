//! Memory stays bounded under key churn with periodic `gc`, and comes back
//! after `shrink_to_fit`. Measured with a counting global allocator (this
//! test binary only).

use std::alloc::System;
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The allocator's counters are process-wide: tests in this file run one at
/// a time so each measures only itself.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn live_bytes(region: &Region<'_, System>) -> i64 {
    let s = region.change();
    // Reallocations are already in both totals (stats_alloc adds growth to
    // `bytes_allocated` and shrinkage to `bytes_deallocated`).
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// 2,000,000 distinct keys, 2,000 per simulated second, with `gc` every
/// 10 s: the live set is at most the keys of the last `2·max + 10 s`.
#[test]
fn churning_millions_of_keys_with_periodic_gc_stays_bounded() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(30))
        .clock(clock.clone())
        .build()
        .expect("valid");
    let region = Region::new(GLOBAL);
    let (per_second, seconds) = (2_000u64, 1_000u64);
    let bound = per_second as usize * (60 + 10 + 1);
    let mut peak_len = 0;
    let mut peak_bytes = 0;
    let mut key = String::new();
    for s in 0..seconds {
        for i in 0..per_second {
            key.clear();
            use std::fmt::Write;
            write!(key, "pod-{s}-{i}_ns_uid_container").expect("write to string");
            b.next(key.as_str(), clock.now());
        }
        clock.advance(Duration::from_secs(1));
        if s % 10 == 9 {
            b.gc();
        }
        peak_len = peak_len.max(b.len());
        peak_bytes = peak_bytes.max(live_bytes(&region));
    }
    assert!(peak_len <= bound, "{peak_len} entries > bound {bound}");
    // The heap never grows past what the bounded live set needs (generously:
    // 400 bytes per allowed entry, keys included).
    assert!(peak_bytes < bound as i64 * 400, "peak {peak_bytes} bytes");
    println!(
        "2,000,000 keys churned: peak {peak_len} entries (bound {bound}), peak heap {peak_bytes} B"
    );
}

#[test]
fn shrink_to_fit_gives_memory_back_after_a_large_gc() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(Duration::from_secs(1), Duration::from_secs(30))
        .clock(clock.clone())
        .build()
        .expect("valid");
    let region = Region::new(GLOBAL);
    for i in 0..200_000 {
        b.next(format!("obj-{i}").as_str(), clock.now());
    }
    let full = live_bytes(&region);
    clock.advance(Duration::from_secs(61));
    b.next("survivor", clock.now());
    assert_eq!(b.gc(), 200_000);
    let after_gc = live_bytes(&region);
    b.shrink_to_fit();
    let after_shrink = live_bytes(&region);
    assert_eq!(b.len(), 1);
    // gc frees the keys (short here); shrinking frees the tables.
    assert!(after_gc < full, "{after_gc} vs {full}");
    assert!(
        after_shrink < full / 5,
        "after shrink {after_shrink} of {full}"
    );
    println!(
        "200,000 entries: {full} B; after gc {after_gc} B; after shrink_to_fit {after_shrink} B"
    );
    assert_eq!(b.get("survivor"), Duration::from_secs(1));
}
