//! The keyed manager against its two baselines, measured in the same run:
//! `floor` (an unlocked `HashMap`, same semantics and hasher) and `rwlock`
//! (client-go's design: one `RwLock` over that map).
//!
//! Run everything: `cargo bench --bench keyed`
//! One group:      `cargo bench --bench keyed -- 'ops_1k/'`
//!
//! Two-thread cases use `iter_custom`: both threads run `iters` operations
//! and the reported time is wall time / (2·iters), so lower means more
//! combined throughput and the numbers compare directly with one thread.

mod common;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use common::{Floor, RwLockPort, kubelet_keys, populate_half_expired, visit_order};
use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock, MockInstant, StdClock};

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);
const ORDER_LEN: usize = 1 << 16;

#[derive(Clone, Copy, Debug)]
enum Op {
    Next,
    Get,
    SinceUpdate,
    Since,
    /// 90 % `is_in_backoff_since_update`, 10 % `next`.
    Mix,
}

const OPS: [(Op, &str); 5] = [
    (Op::Next, "next"),
    (Op::Get, "get"),
    (Op::SinceUpdate, "is_in_backoff_since_update"),
    (Op::Since, "is_in_backoff_since"),
    (Op::Mix, "mix_90r_10w"),
];

/// The operations a bench target answers, with `&self` (thread-safe targets).
trait Shared<C: Clock>: Sync {
    fn next(&self, k: &str, t: C::Instant) -> Duration;
    fn get(&self, k: &str) -> Duration;
    fn since_update(&self, k: &str, t: C::Instant) -> bool;
    fn since(&self, k: &str, t: C::Instant) -> bool;
}

impl<C: Clock> Shared<C> for Backoff<String, C> {
    fn next(&self, k: &str, t: C::Instant) -> Duration {
        Backoff::next(self, k, t)
    }
    fn get(&self, k: &str) -> Duration {
        Backoff::get(self, k)
    }
    fn since_update(&self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since_update(k, t)
    }
    fn since(&self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since(k, t)
    }
}

impl<C: Clock> Shared<C> for RwLockPort<C> {
    fn next(&self, k: &str, t: C::Instant) -> Duration {
        RwLockPort::next(self, k, t)
    }
    fn get(&self, k: &str) -> Duration {
        RwLockPort::get(self, k)
    }
    fn since_update(&self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since_update(k, t)
    }
    fn since(&self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since(k, t)
    }
}

/// The operations every bench target answers. The floor needs `&mut self`;
/// a thread-safe target takes part through a shared reference.
trait Target<C: Clock> {
    fn next(&mut self, k: &str, t: C::Instant) -> Duration;
    fn get(&mut self, k: &str) -> Duration;
    fn since_update(&mut self, k: &str, t: C::Instant) -> bool;
    fn since(&mut self, k: &str, t: C::Instant) -> bool;
}

impl<C: Clock> Target<C> for Floor<C> {
    fn next(&mut self, k: &str, t: C::Instant) -> Duration {
        Floor::next(self, k, t)
    }
    fn get(&mut self, k: &str) -> Duration {
        Floor::get(self, k)
    }
    fn since_update(&mut self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since_update(k, t)
    }
    fn since(&mut self, k: &str, t: C::Instant) -> bool {
        self.is_in_backoff_since(k, t)
    }
}

impl<C: Clock, T: Shared<C>> Target<C> for &T {
    fn next(&mut self, k: &str, t: C::Instant) -> Duration {
        Shared::next(*self, k, t)
    }
    fn get(&mut self, k: &str) -> Duration {
        Shared::get(*self, k)
    }
    fn since_update(&mut self, k: &str, t: C::Instant) -> bool {
        Shared::since_update(*self, k, t)
    }
    fn since(&mut self, k: &str, t: C::Instant) -> bool {
        Shared::since(*self, k, t)
    }
}

/// One operation of `op`'s kind (call number `i`, for the mix) on any target.
#[inline(always)]
fn run_op<C: Clock, T: Target<C>>(target: &mut T, op: Op, i: usize, key: &str, t: C::Instant) {
    match op {
        Op::Next => {
            black_box(target.next(key, t));
        }
        Op::Get => {
            black_box(target.get(key));
        }
        Op::SinceUpdate => {
            black_box(target.since_update(key, t));
        }
        Op::Since => {
            black_box(target.since(key, t));
        }
        Op::Mix if i.is_multiple_of(10) => {
            black_box(target.next(key, t));
        }
        Op::Mix => {
            black_box(target.since_update(key, t));
        }
    }
}

#[inline(always)]
fn shared_op<C: Clock, T: Shared<C>>(target: &T, op: Op, i: usize, key: &str, t: C::Instant) {
    run_op(&mut &*target, op, i, key, t);
}

struct Fixture<C: Clock> {
    keys: Vec<String>,
    order: Vec<usize>,
    t0: C::Instant,
    crate_: Backoff<String, C>,
    /// The crate tuned for a small map: 16 shards instead of 1024.
    crate_16: Backoff<String, C>,
    rwlock: RwLockPort<C>,
    floor: Floor<C>,
}

fn fixture<C: Clock + Clone>(n: usize, clock: C) -> Fixture<C> {
    let keys = kubelet_keys(n);
    let crate_ = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .capacity(n)
        .build()
        .expect("valid");
    let crate_16 = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .capacity(n)
        .shards(16)
        .build()
        .expect("valid");
    let rwlock = RwLockPort::new(INITIAL, MAX, clock.clone());
    let mut floor = Floor::new(INITIAL, MAX, clock.clone());
    let t0 = clock.now();
    for k in &keys {
        crate_.next(k.as_str(), t0);
        crate_16.next(k.as_str(), t0);
        rwlock.next(k, t0);
        floor.next(k, t0);
    }
    Fixture {
        order: visit_order(n, ORDER_LEN),
        keys,
        t0,
        crate_,
        crate_16,
        rwlock,
        floor,
    }
}

fn one_thread<C: Clock>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    f: &mut Fixture<C>,
    op: Op,
    name: &str,
) {
    let Fixture {
        keys,
        order,
        t0,
        crate_,
        crate_16,
        rwlock,
        floor,
    } = f;
    let t0 = *t0;
    let mut i = 0usize;
    g.bench_function(format!("{name}/crate"), |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            shared_op(crate_, op, i, &keys[order[i % ORDER_LEN]], t0);
        })
    });
    g.bench_function(format!("{name}/crate_16shards"), |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            shared_op(crate_16, op, i, &keys[order[i % ORDER_LEN]], t0);
        })
    });
    g.bench_function(format!("{name}/floor"), |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            run_op(floor, op, i, &keys[order[i % ORDER_LEN]], t0);
        })
    });
    g.bench_function(format!("{name}/rwlock"), |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            shared_op(rwlock, op, i, &keys[order[i % ORDER_LEN]], t0);
        })
    });
}

/// Runs `op` on `threads` threads, `iters` times each; returns the span from
/// the first worker's start to the last worker's end, divided by `threads`
/// (time per operation of combined throughput). Timestamps are taken inside
/// the workers: with more threads than cores, a coordinating thread may be
/// descheduled and read the clock late.
fn threaded<C: Clock, T: Shared<C>>(
    target: &T,
    keys: &[String],
    order: &[usize],
    t0: C::Instant,
    op: Op,
    threads: usize,
    iters: u64,
) -> Duration {
    let start_line = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|th| {
                let start_line = &start_line;
                s.spawn(move || {
                    start_line.wait();
                    let started = Instant::now();
                    let mut i = th * 7919;
                    for _ in 0..iters {
                        i = i.wrapping_add(1);
                        shared_op(target, op, i, &keys[order[i % ORDER_LEN]], t0);
                    }
                    (started, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let first = spans.iter().map(|s| s.0).min().expect("workers");
    let last = spans.iter().map(|s| s.1).max().expect("workers");
    last.duration_since(first) / threads as u32
}

fn two_threads<C: Clock>(g: &mut BenchmarkGroup<'_, WallTime>, f: &Fixture<C>, op: Op, name: &str) {
    let (keys, order, t0) = (&f.keys, &f.order, f.t0);
    g.bench_function(format!("{name}/crate"), |b| {
        b.iter_custom(|iters| threaded(&f.crate_, keys, order, t0, op, 2, iters))
    });
    g.bench_function(format!("{name}/crate_16shards"), |b| {
        b.iter_custom(|iters| threaded(&f.crate_16, keys, order, t0, op, 2, iters))
    });
    g.bench_function(format!("{name}/rwlock"), |b| {
        b.iter_custom(|iters| threaded(&f.rwlock, keys, order, t0, op, 2, iters))
    });
}

fn ops(c: &mut Criterion) {
    for (n, label) in [(1_000, "1k"), (1_000_000, "1m")] {
        let mut f = fixture(n, MockClock::new());
        let mut g = c.benchmark_group(format!("ops_{label}"));
        for (op, name) in OPS {
            one_thread(&mut g, &mut f, op, name);
        }
        g.finish();
        let mut g = c.benchmark_group(format!("ops_{label}_2threads"));
        for (op, name) in OPS {
            two_threads(&mut g, &f, op, name);
        }
        g.finish();
    }
}

/// The same calls with the default (OS monotonic) clock on both sides.
fn std_clock(c: &mut Criterion) {
    let mut f = fixture(1_000, StdClock);
    let mut g = c.benchmark_group("ops_1k_stdclock");
    for (op, name) in [(Op::Next, "next"), (Op::Since, "is_in_backoff_since")] {
        one_thread(&mut g, &mut f, op, name);
    }
    g.finish();
}

/// Two threads hammering the same 8 keys.
fn hot_keys(c: &mut Criterion) {
    let f = fixture(8, MockClock::new());
    let order: Vec<usize> = (0..ORDER_LEN).map(|i| i % 8).collect();
    let mut g = c.benchmark_group("hot_8keys_2threads");
    for (op, name) in [(Op::Next, "next"), (Op::Mix, "mix_90r_10w")] {
        g.bench_function(format!("{name}/crate"), |b| {
            b.iter_custom(|iters| threaded(&f.crate_, &f.keys, &order, f.t0, op, 2, iters))
        });
        g.bench_function(format!("{name}/rwlock"), |b| {
            b.iter_custom(|iters| threaded(&f.rwlock, &f.keys, &order, f.t0, op, 2, iters))
        });
    }
    g.finish();
}

/// `gc` over 1,000,000 entries of which half have expired. Each sample builds
/// fresh maps (not timed) and times one collection.
fn gc(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let keys = kubelet_keys(N);
    let clock = MockClock::new();
    // Even keys were last updated at 0; odd ones 601 s later. GC runs at
    // 1,201 s: past 2·max = 600 s for the even half only.
    let populate =
        |apply: &mut dyn FnMut(&str, MockInstant)| populate_half_expired(&keys, &clock, apply);
    let mut g = c.benchmark_group("gc_1m_half_expired");
    g.sample_size(10);
    g.bench_function("crate", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                clock.set(MockInstant::ZERO);
                let m = Backoff::<String>::builder(INITIAL, MAX)
                    .clock(clock.clone())
                    .build()
                    .expect("valid");
                populate(&mut |k, t| {
                    m.next(k, t);
                });
                let start = Instant::now();
                assert_eq!(black_box(m.gc()), N / 2);
                total += start.elapsed();
            }
            total
        })
    });
    g.bench_function("floor", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                clock.set(MockInstant::ZERO);
                let mut m = Floor::new(INITIAL, MAX, clock.clone());
                populate(&mut |k, t| {
                    m.next(k, t);
                });
                let start = Instant::now();
                assert_eq!(black_box(m.gc()), N / 2);
                total += start.elapsed();
            }
            total
        })
    });
    g.bench_function("rwlock", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                clock.set(MockInstant::ZERO);
                let m = RwLockPort::new(INITIAL, MAX, clock.clone());
                populate(&mut |k, t| {
                    m.next(k, t);
                });
                let start = Instant::now();
                assert_eq!(black_box(m.gc()), N / 2);
                total += start.elapsed();
            }
            total
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = ops, std_clock, hot_keys, gc
}
criterion_main!(benches);
