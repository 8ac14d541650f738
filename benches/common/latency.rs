//! Reader and writer latency while another thread runs `gc` continuously.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::visit_order;

/// Percentiles of one target's calls during continuous GC.
pub struct Report {
    pub label: String,
    pub reads: usize,
    pub gc_passes: usize,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Times `read` on random live keys (the odd half of `keys`) while another
/// thread loops `gc`, for `seconds`; a label containing "no gc" runs no GC.
pub fn measure(
    label: String,
    keys: &[String],
    seconds: f64,
    read: &(dyn Fn(&str) -> bool + Sync),
    gc: &(dyn Fn() -> usize + Sync),
) -> Report {
    // Readers only ask about live (odd) keys so every lookup finds an entry.
    let order: Vec<usize> = visit_order(keys.len() / 2, 1 << 20)
        .into_iter()
        .map(|i| 2 * i + 1)
        .collect();
    let done = AtomicBool::new(false);
    let passes = AtomicUsize::new(0);
    let with_gc = !label.contains("no gc");
    let mut samples: Vec<u64> = Vec::with_capacity(1 << 24);
    std::thread::scope(|s| {
        s.spawn(|| {
            while with_gc && !done.load(Ordering::Relaxed) {
                gc();
                passes.fetch_add(1, Ordering::Relaxed);
            }
        });
        let until = quanta::Instant::now() + Duration::from_secs_f64(seconds);
        let mut i = 0usize;
        loop {
            let key = &keys[order[i % order.len()]];
            let t = quanta::Instant::now();
            std::hint::black_box(read(key));
            let end = quanta::Instant::now();
            samples.push(end.duration_since(t).as_nanos() as u64);
            i += 1;
            // Checked on every read: a starved reader must not overrun.
            if end > until {
                break;
            }
        }
        done.store(true, Ordering::Relaxed);
    });
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    Report {
        label,
        reads: samples.len(),
        gc_passes: passes.load(Ordering::Relaxed),
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        max: *samples.last().expect("samples"),
    }
}
