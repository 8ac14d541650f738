//! The interleaved benches' harness: targets run in turn within each round,
//! and a ratio is the median over rounds of the round's own ratio, so drift
//! on a shared machine moves both sides of each ratio together.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

/// Calls of the operation per timing.
pub const OPS: usize = 400_000;

/// `name` from the environment as a count, or `default`.
pub fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Nanoseconds per call of `op` over the visiting order; `op` is given the
/// call's number and its key.
pub fn per_call<T: Copy>(order: &[T], mut op: impl FnMut(usize, T) -> u64) -> f64 {
    let start = Instant::now();
    let mut acc = 0u64;
    for i in 0..OPS {
        acc = acc.wrapping_add(op(i, order[i % order.len()]));
    }
    black_box(acc);
    start.elapsed().as_nanos() as f64 / OPS as f64
}

/// Nanoseconds per call of combined throughput, `op` on two threads, the
/// first thread over `orders[0]`, the second over `orders[1]`: the span
/// from the first worker's start to the last one's end, over both threads'
/// calls.
pub fn two_threads<T: Copy + Sync>(orders: [&[T]; 2], op: impl Fn(usize, T) -> u64 + Sync) -> f64 {
    let line = Barrier::new(2);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let workers: Vec<_> = orders
            .into_iter()
            .map(|order| {
                let (line, op) = (&line, &op);
                s.spawn(move || {
                    line.wait();
                    let start = Instant::now();
                    let mut acc = 0u64;
                    for i in 0..OPS {
                        acc = acc.wrapping_add(op(i, order[i % order.len()]));
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

/// One target's timings, a value per round.
pub struct Row {
    pub name: &'static str,
    pub rounds: Vec<f64>,
}

impl Row {
    pub fn new(name: &'static str) -> Self {
        Row {
            name,
            rounds: Vec::new(),
        }
    }
}

/// Prints each target's median and each one's median ratio to every row
/// of `bases`.
pub fn report(title: &str, rows: &[Row], bases: &[usize]) {
    println!("\n{title}");
    for row in rows {
        let mut line = format!(
            "  {:<22} median {:>8.1} ns",
            row.name,
            median(row.rounds.clone())
        );
        for &b in bases {
            let base = &rows[b];
            if !std::ptr::eq(base, row) {
                let ratios = row
                    .rounds
                    .iter()
                    .zip(&base.rounds)
                    .map(|(t, b)| t / b)
                    .collect();
                line += &format!("   {:.2}x {}", median(ratios), base.name);
            }
        }
        println!("{line}");
    }
}
