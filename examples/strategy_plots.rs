//! Draws the delay distribution per attempt of every strategy, and the
//! steady-state distribution of AWS decorrelated jitter against the bounded
//! variant, as SVG files for `docs/strategies.md`.
//!
//! Run: `cargo run --release -p keyed-backoff-examples --features plots --example strategy_plots -- docs/plots`

use std::time::Duration;

use keyed_backoff::strategy::{
    Decorrelated, EqualJitter, Exponential, FactorJitter, FullJitter, Linear, Step, WaitBackoff,
};
use plotters::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The published schemes of the core examples, plotted beside the library's.
#[path = "core/published_schemes/schemes.rs"]
#[allow(dead_code)]
mod schemes;

use schemes::{Cenkalti, Ethernet, GoogleCloud, Hadoop};

const ATTEMPTS: u32 = 14;
const RUNS: usize = 4_000;

/// Per attempt: (p5, p50, p95) of the delay in seconds, over `RUNS` sequences.
fn percentiles(step: &dyn Step, seed: u64) -> Vec<Option<(f64, f64, f64)>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut per_attempt: Vec<Vec<f64>> = vec![Vec::new(); ATTEMPTS as usize];
    for _ in 0..RUNS {
        let mut previous = None;
        for n in 0..ATTEMPTS {
            let Some(d) = step.delay(n, previous, &mut || rng.random::<f64>()) else {
                break;
            };
            per_attempt[n as usize].push(d.as_secs_f64());
            previous = Some(d);
        }
    }
    per_attempt
        .into_iter()
        .map(|mut xs| {
            if xs.is_empty() {
                return None;
            }
            xs.sort_by(f64::total_cmp);
            let at = |q: f64| xs[((xs.len() - 1) as f64 * q) as usize];
            Some((at(0.05), at(0.5), at(0.95)))
        })
        .collect()
}

fn panels(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let ms = Duration::from_millis(1);
    let strategies: Vec<(&str, Box<dyn Step>)> = vec![
        (
            "Exponential 5ms x2, cap 2s",
            Box::new(Exponential::new(5 * ms, 2.0).max(2000 * ms)),
        ),
        (
            "Linear 100ms +100ms",
            Box::new(Linear::new(100 * ms, 100 * ms)),
        ),
        (
            "FullJitter 5ms, cap 2s",
            Box::new(FullJitter::new(5 * ms, 2000 * ms)),
        ),
        (
            "EqualJitter 5ms, cap 2s",
            Box::new(EqualJitter::new(5 * ms, 2000 * ms)),
        ),
        (
            "Decorrelated (AWS) 5ms, cap 2s",
            Box::new(Decorrelated::new(5 * ms, 2000 * ms)),
        ),
        (
            "Decorrelated bounded",
            Box::new(Decorrelated::new(5 * ms, 2000 * ms).bounded()),
        ),
        (
            "client-go 10ms x2 +0.5 jitter, cap 2s",
            Box::new(FactorJitter::new(10 * ms, 2000 * ms).jitter(0.5)),
        ),
        (
            "apimachinery 10ms x2, j 0.1, 8 steps",
            Box::new(
                WaitBackoff::new(10 * ms)
                    .multiplier(2.0)
                    .jitter(0.1)
                    .steps(8),
            ),
        ),
        (
            "Ethernet, slot 51.2us",
            Box::new(Ethernet::new(Duration::from_nanos(51_200))),
        ),
        (
            "Hadoop 100ms, cap 10s",
            Box::new(Hadoop::new(100 * ms, 20).max(Duration::from_secs(10))),
        ),
        ("Google Cloud, max 32s", Box::new(GoogleCloud::new())),
        ("cenkalti defaults", Box::new(Cenkalti::new())),
    ];
    let path = format!("{dir}/strategies.svg");
    let root = SVGBackend::new(&path, (1500, 1100)).into_drawing_area();
    root.fill(&WHITE)?;
    let cells = root.split_evenly((3, 4));
    for (i, ((name, step), cell)) in strategies.iter().zip(cells.iter()).enumerate() {
        let stats = percentiles(step.as_ref(), i as u64);
        let ymax = stats
            .iter()
            .flatten()
            .map(|s| s.2)
            .fold(0.0, f64::max)
            .max(1e-6)
            * 1.1;
        let mut chart = ChartBuilder::on(cell)
            .caption(*name, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(25)
            .y_label_area_size(50)
            .build_cartesian_2d(0u32..ATTEMPTS, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("delay #")
            .y_desc("seconds")
            .label_style(("sans-serif", 11))
            .draw()?;
        let points = |pick: fn(&(f64, f64, f64)) -> f64| -> Vec<(u32, f64)> {
            stats
                .iter()
                .enumerate()
                .filter_map(|(n, s)| s.as_ref().map(|s| (n as u32, pick(s))))
                .collect()
        };
        chart.draw_series(LineSeries::new(points(|s| s.0), BLUE.mix(0.5)))?;
        chart.draw_series(LineSeries::new(points(|s| s.1), BLUE.stroke_width(2)))?;
        chart.draw_series(LineSeries::new(points(|s| s.2), BLUE.mix(0.5)))?;
    }
    root.present()?;
    println!("wrote {path} (lines: 5th, 50th and 95th percentile of {RUNS} sequences)");
    Ok(())
}

/// Histogram of delay #30 for AWS decorrelated jitter and the bounded variant.
fn decorrelated_histogram(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let (base, cap) = (Duration::from_millis(5), Duration::from_millis(2000));
    let path = format!("{dir}/decorrelated_steady_state.svg");
    let root = SVGBackend::new(&path, (1000, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let halves = root.split_evenly((1, 2));
    for (variant, half) in [("AWS decorrelated", false), ("bounded variant", true)]
        .into_iter()
        .zip(halves.iter())
    {
        let step = if variant.1 {
            Decorrelated::new(base, cap).bounded()
        } else {
            Decorrelated::new(base, cap)
        };
        let mut rng = SmallRng::seed_from_u64(30);
        let mut bins = [0u32; 20];
        let runs = 20_000;
        let mut at_cap = 0;
        for _ in 0..runs {
            let mut prev = None;
            let mut d = Duration::ZERO;
            for n in 0..30 {
                d = step
                    .delay(n, prev, &mut || rng.random::<f64>())
                    .expect("never gives up");
                prev = Some(d);
            }
            at_cap += u32::from(d == cap);
            let bin = ((d.as_secs_f64() / cap.as_secs_f64()) * 20.0) as usize;
            bins[bin.min(19)] += 1;
        }
        let share = f64::from(at_cap) / runs as f64 * 100.0;
        let ymax = f64::from(*bins.iter().max().expect("bins")) / runs as f64 * 110.0;
        let mut chart = ChartBuilder::on(half)
            .caption(
                format!("{}: delay #30 ({share:.1}% exactly at cap)", variant.0),
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(0.0..2.0f64, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("% of runs")
            .draw()?;
        chart.draw_series(bins.iter().enumerate().map(|(i, &c)| {
            let x0 = i as f64 * 0.1;
            Rectangle::new(
                [(x0, 0.0), (x0 + 0.1, f64::from(c) / runs as f64 * 100.0)],
                BLUE.mix(0.6).filled(),
            )
        }))?;
        println!("{}: {share:.1}% of delay #30 exactly at the cap", variant.0);
    }
    root.present()?;
    println!("wrote {path}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "docs/plots".to_string());
    std::fs::create_dir_all(&dir)?;
    panels(&dir)?;
    decorrelated_histogram(&dir)
}
