//! Reproduces the AWS "Exponential Backoff And Jitter" simulation with the
//! crate's own strategies, and (with `--open`) shows that in an open system
//! a retry budget, not backoff, bounds the load. With `--apf` it puts the
//! server's half next to the clients': one elephant flow at 10× capacity
//! and 20 mice at 0.5× against a FIFO server and an API Priority and
//! Fairness server, with clients that retry at once or back off per flow;
//! it fails unless APF gives the mice at least 95 % of their load and FIFO
//! less than half.
//!
//! ```text
//! cargo run --release --example simulate -- [--clients 10,20,...] [--runs N] [--seed N]
//!                                           [--csv PATH] [--svg DIR] [--open | --apf]
//! ```
//!
//! Defaults: clients 10 to 190 step 10, 100 runs, seed 1. The CSV has one
//! row per clients × algorithm:
//! `clients,algorithm,runs,time_mean,calls_mean,time_sd,calls_sd` (means and
//! per-run standard deviations).

use std::fmt::Write as _;
use std::process::ExitCode;

#[cfg(feature = "plots")]
use plotters::prelude::*;

#[path = "simulate/args.rs"]
mod args;

use args::{Args, parse};

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = if args.apf {
        apf(&args)
    } else if args.open {
        open(&args)
    } else if let Some(path) = &args.check {
        check(&args, path)
    } else {
        closed(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Rows = Vec<(usize, &'static str, sim::Cell)>;

fn closed(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = std::time::Instant::now();
    let cells: Vec<(usize, &'static str)> = args
        .clients
        .iter()
        .flat_map(|&c| sim::ALGORITHMS.iter().map(move |&a| (c, a)))
        .collect();
    let rows = run_cells(&cells, args.runs, args.seed);

    let mut csv = String::from("clients,algorithm,runs,time_mean,calls_mean,time_sd,calls_sd\n");
    for (c, a, r) in &rows {
        writeln!(
            csv,
            "{c},{a},{},{:.3},{:.3},{:.3},{:.3}",
            r.runs, r.time_mean, r.calls_mean, r.time_sd, r.calls_sd
        )?;
    }
    println!(
        "{:>7}  {:<14} {:>12} {:>12} {:>10} {:>10}",
        "clients", "algorithm", "time_mean", "calls_mean", "time_sd", "calls_sd"
    );
    for (c, a, r) in &rows {
        println!(
            "{c:>7}  {a:<14} {:>12.1} {:>12.1} {:>10.1} {:>10.1}",
            r.time_mean, r.calls_mean, r.time_sd, r.calls_sd
        );
    }
    eprintln!(
        "({} cells × {} runs in {:.1} s)",
        rows.len(),
        args.runs,
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.csv {
        std::fs::write(path, &csv)?;
        eprintln!("wrote {path}");
    }
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)?;
        plot(
            &rows,
            &format!("{dir}/simulation_calls.svg"),
            "Work: calls (writes) per run",
            |r| r.2.calls_mean,
        )?;
        plot(
            &rows,
            &format!("{dir}/simulation_time.svg"),
            "Completion time per run (time units)",
            |r| r.2.time_mean,
        )?;
        eprintln!("wrote {dir}/simulation_calls.svg and {dir}/simulation_time.svg");
    }
    Ok(())
}

/// Without the `plots` feature there is nothing to draw with.
#[cfg(not(feature = "plots"))]
fn line_chart(
    _: &str,
    _: &str,
    _: (&str, &str),
    _: std::ops::Range<f64>,
    _: std::ops::Range<f64>,
    _: &[(String, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error>> {
    Err("--svg needs the plots feature: cargo run --release --features plots --example simulate -- --svg DIR".into())
}

/// Runs each (clients, algorithm) cell, on all cores (cells are independent
/// and seeded on their own, so the order of work does not change results).
fn run_cells(cells: &[(usize, &'static str)], runs: usize, seed: u64) -> Rows {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(c, a)) = cells.get(i) else { break };
                    let cell = sim::closed_cell(c, a, runs, seed);
                    results.lock().expect("results").push((i, (c, a, cell)));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Compares every cell of a reference CSV (the original simulator's figures)
/// with ours; fails if any mean disagrees beyond 4 standard errors plus 3 %.
fn check(args: &Args, path: &str) -> Result<(), Box<dyn std::error::Error>> {
    let reference = sim::parse_cells(&std::fs::read_to_string(path)?)?;
    let mut cells = Vec::new();
    for (c, a, _) in &reference {
        let label = sim::ALGORITHMS
            .iter()
            .find(|x| **x == a.as_str())
            .ok_or_else(|| format!("{path}: unknown algorithm {a:?}"))?;
        cells.push((*c, *label));
    }
    let ours = run_cells(&cells, args.runs, args.seed);
    let mut failures = 0;
    for ((c, a, theirs), (_, _, mine)) in reference.iter().zip(&ours) {
        let verdict = sim::agrees(mine, theirs);
        println!(
            "{c:>4} {a:<12} calls {:>8.1} vs {:>8.1}   time {:>9.1} vs {:>9.1}   {}",
            mine.calls_mean,
            theirs.calls_mean,
            mine.time_mean,
            theirs.time_mean,
            match &verdict {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("DISAGREES: {e}"),
            }
        );
        failures += usize::from(verdict.is_err());
    }
    if failures > 0 {
        return Err(format!("{failures} of {} cells disagree with {path}", ours.len()).into());
    }
    println!("all {} cells agree with {path}", ours.len());
    Ok(())
}

/// One labelled line per series; shared by every plot here.
#[cfg(feature = "plots")]
fn line_chart(
    path: &str,
    title: &str,
    axes: (&str, &str),
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(axes.0)
        .y_desc(axes.1)
        .draw()?;
    for (i, (label, points)) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(
                points.clone(),
                Palette99::pick(i).stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 18, y)],
                    Palette99::pick(i).stroke_width(2),
                )
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One chart of `value` against clients, a line per algorithm.
fn plot(
    rows: &Rows,
    path: &str,
    title: &str,
    value: fn(&(usize, &'static str, sim::Cell)) -> f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let xmax = rows.iter().map(|r| r.0).max().unwrap_or(1) as f64;
    let ymax = rows.iter().map(value).fold(0.0, f64::max) * 1.05;
    let series: Vec<(String, Vec<(f64, f64)>)> = sim::ALGORITHMS
        .iter()
        .map(|a| {
            (
                a.to_string(),
                rows.iter()
                    .filter(|r| r.1 == *a)
                    .map(|r| (r.0 as f64, value(r)))
                    .collect(),
            )
        })
        .collect();
    line_chart(path, title, ("clients", ""), 0.0..xmax, 0.0..ymax, &series)
}

fn open(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let loads = [0.5, 0.8, 1.0, 1.2, 1.5, 2.0];
    let configs = [
        ("None", false),
        ("FullJitter", false),
        ("FullJitter", true),
        ("Exponential", true),
    ];
    let mut csv = String::from("load,algorithm,budget,offered,goodput,amplification\n");
    println!(
        "{:>5}  {:<12} {:<10} {:>8} {:>8} {:>14}",
        "load", "backoff", "budget", "offered", "goodput", "attempts/req"
    );
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (algorithm, budget) in configs {
        let label = format!("{algorithm}{}", if budget { " + 10% budget" } else { "" });
        let mut points = Vec::new();
        for load in loads {
            let r = sim::open_run(load, algorithm, budget, args.seed);
            let b = if budget { "tps 10%" } else { "none" };
            println!(
                "{load:>5.1}  {algorithm:<12} {b:<10} {:>8.3} {:>8.3} {:>14.3}",
                r.offered, r.goodput, r.amplification
            );
            writeln!(
                csv,
                "{load},{algorithm},{budget},{:.4},{:.4},{:.4}",
                r.offered, r.goodput, r.amplification
            )?;
            points.push((r.offered, r.amplification));
        }
        series.push((label, points));
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, &csv)?;
        eprintln!("wrote {path}");
    }
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)?;
        let path = format!("{dir}/simulation_open.svg");
        line_chart(
            &path,
            "Open system, 3 attempts max: attempts per request vs offered load",
            ("offered load (× capacity)", "amplification"),
            0.4..2.1,
            0.9..3.1,
            &series,
        )?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// Both halves of the contract: the server's fairness and the clients'
/// backoff, in one open-loop run per set-up.
fn apf(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    use sim::apf::{Setup, apf_run};
    println!(
        "| server, clients | mice goodput | mice p99 | elephant goodput | elephant served/s | 429s/s | failed fast in clients/s | wasted seat time |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut csv = String::from(
        "setup,mice_goodput,mice_p99_s,elephant_goodput,elephant_rate,rejections_per_s,held_back_per_s,wasted\n",
    );
    let mut runs = Vec::new();
    for setup in Setup::ALL {
        let r = apf_run(setup, args.seed);
        println!(
            "| {} | {:.1} % | {:.2} s | {:.1} % | {:.1} | {:.1} | {:.0} | {:.1} % |",
            setup.label(),
            100.0 * r.mice_goodput,
            r.mice_p99_s,
            100.0 * r.elephant_goodput,
            r.elephant_rate,
            r.rejections_per_s,
            r.held_back_per_s,
            100.0 * r.wasted
        );
        writeln!(
            csv,
            "{},{:.4},{:.3},{:.4},{:.2},{:.2},{:.1},{:.4}",
            setup.label(),
            r.mice_goodput,
            r.mice_p99_s,
            r.elephant_goodput,
            r.elephant_rate,
            r.rejections_per_s,
            r.held_back_per_s,
            r.wasted
        )?;
        runs.push((setup, r));
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, &csv)?;
        eprintln!("wrote {path}");
    }
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)?;
        let path = format!("{dir}/fairness_mice.svg");
        let series: Vec<(String, Vec<(f64, f64)>)> = runs
            .iter()
            .map(|(setup, r)| {
                let points = r
                    .mice_goodput_by_second
                    .iter()
                    .enumerate()
                    .map(|(s, g)| (s as f64, *g))
                    .collect();
                (setup.label().to_owned(), points)
            })
            .collect();
        line_chart(
            &path,
            "Mice goodput per second, elephant at 10x capacity",
            ("time (s)", "share of the mice's requests served"),
            0.0..60.0,
            0.0..1.05,
            &series,
        )?;
        eprintln!("wrote {path}");
    }
    let goodput = |s: Setup| {
        runs.iter()
            .find(|(x, _)| *x == s)
            .map_or(0.0, |(_, r)| r.mice_goodput)
    };
    if goodput(Setup::Apf) < 0.95 || goodput(Setup::ApfBackoff) < 0.95 {
        return Err("APF gave the mice less than 95 % of their load".into());
    }
    if goodput(Setup::Fifo) >= 0.5 {
        return Err("FIFO gave the mice half their load or more".into());
    }
    Ok(())
}
