//! What one clock read costs, for each provided clock.
//!
//! `next` and `is_in_backoff_since` read the clock once per call; this is
//! that price. Run: `cargo bench --bench clocks`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keyed_backoff::clock::{Clock, MockClock, QuantaClock, StdClock, SystemClock};

fn read<C: Clock>(c: &mut Criterion, name: &str, clock: C) {
    c.bench_function(&format!("clock_now/{name}"), |b| {
        b.iter(|| black_box(black_box(&clock).now()))
    });
}

fn clocks(c: &mut Criterion) {
    read(c, "std", StdClock);
    read(c, "quanta", QuantaClock);
    read(c, "system", SystemClock);
    read(c, "mock", MockClock::new());
}

criterion_group!(benches, clocks);
criterion_main!(benches);
