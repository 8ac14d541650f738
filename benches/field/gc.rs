//! The default GC against the floor's `HashMap::retain`, and reader and
//! writer latency while it runs (`cargo bench -p keyed-backoff-benches
//! --bench field -- gc`).

use cpu_time::ThreadTime;
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};

use super::common::latency::{self, Report};
use super::common::{Floor, median, populate_half_expired};
use super::inputs::kubelet_keys;
use super::{INITIAL, MAX, env};

const GC_KEYS: usize = 1_000_000;

/// The default GC against the floor's `retain` (each timed by the calling
/// thread's CPU time), then latency during GC.
/// The crate as a user gets it (on a mock clock), `keys` in it, half of
/// them expired; and its clock.
fn half_expired(keys: &[String]) -> (Backoff<String, MockClock>, MockClock) {
    let clock = MockClock::new();
    let b = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    populate_half_expired(keys, &clock, &mut |k, t| {
        b.next(k, t);
    });
    (b, clock)
}

pub fn gc() {
    let rounds = env("GC_ROUNDS", 5);
    let keys = kubelet_keys(GC_KEYS);
    let (mut crate_ms, mut floor_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (b, _) = half_expired(&keys);
        let start = ThreadTime::now();
        let removed = b.gc();
        let crate_took = start.elapsed();
        drop(b);
        let clock = MockClock::new();
        let mut floor = Floor::new(INITIAL, MAX, clock.clone());
        populate_half_expired(&keys, &clock, &mut |k, t| {
            floor.next(k, t);
        });
        let start = ThreadTime::now();
        let floor_removed = floor.gc();
        let floor_took = start.elapsed();
        assert_eq!((removed, floor_removed), (GC_KEYS / 2, GC_KEYS / 2));
        crate_ms.push(crate_took.as_secs_f64() * 1e3);
        floor_ms.push(floor_took.as_secs_f64() * 1e3);
        ratios.push(crate_took.as_secs_f64() / floor_took.as_secs_f64());
    }
    println!(
        "GC {GC_KEYS} crate_ms={:.1} floor_ms={:.1} ratio={:.2}",
        median(crate_ms),
        median(floor_ms),
        median(ratios)
    );

    let seconds = env("GC_SECONDS", 2) as f64;
    let (b, clock) = half_expired(&keys);
    let t = clock.now();
    let read = |k: &str| b.is_in_backoff_since_update(k, t);
    let write = |k: &str| !b.next(k, t).is_zero();
    let reports: Vec<Report> = vec![
        latency::measure(
            "crate, default, read".into(),
            &keys,
            seconds,
            &read,
            &|| b.gc(),
        ),
        latency::measure(
            "crate, default, next".into(),
            &keys,
            seconds,
            &write,
            &|| b.gc(),
        ),
    ];
    for r in reports {
        println!(
            "LATENCY {} p50={} p99={} p99.9={} max={} gc_passes={}",
            r.label.replace(' ', ""),
            r.p50,
            r.p99,
            r.p999,
            r.max,
            r.gc_passes
        );
    }
}
