//! Reproduces the AWS "Exponential Backoff And Jitter" simulation with the
//! crate's own strategies, and (with `--open`) shows that in an open system
//! a retry budget, not backoff, bounds the load.
//!
//! ```text
//! cargo run --release --example simulate -- [--clients 10,20,...] [--runs N] [--seed N]
//!                                           [--csv PATH] [--svg DIR] [--open]
//! ```
//!
//! Defaults: clients 10 to 190 step 10, 100 runs, seed 1. The CSV has one
//! row per clients × algorithm: `clients,algorithm,runs,time_mean,calls_mean`.

#[path = "sim/mod.rs"]
mod sim;

use std::fmt::Write as _;
use std::process::ExitCode;

use plotters::prelude::*;

struct Args {
    clients: Vec<usize>,
    runs: usize,
    seed: u64,
    csv: Option<String>,
    svg: Option<String>,
    open: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        clients: (1..=19).map(|i| i * 10).collect(),
        runs: 100,
        seed: 1,
        csv: None,
        svg: None,
        open: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--clients" => {
                args.clients = value("--clients")?
                    .split(',')
                    .map(|c| {
                        c.trim()
                            .parse::<usize>()
                            .map_err(|e| format!("--clients: {c:?}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
                if args.clients.iter().any(|&c| c == 0 || c > 100_000) {
                    return Err("--clients: each count must be in 1..=100000".into());
                }
            }
            "--runs" => {
                args.runs = value("--runs")?
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
                if args.runs == 0 {
                    return Err("--runs must be at least 1".into());
                }
            }
            "--seed" => {
                args.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--csv" => args.csv = Some(value("--csv")?),
            "--svg" => args.svg = Some(value("--svg")?),
            "--open" => args.open = true,
            "--bench" => {} // passed by `cargo bench` harnesses; ignore
            "-h" | "--help" => {
                return Err("usage: simulate [--clients 10,20,...] [--runs N] [--seed N] [--csv PATH] [--svg DIR] [--open]".into());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = if args.open {
        open(&args)
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

type Rows = Vec<(usize, &'static str, f64, f64)>;

fn closed(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let started = std::time::Instant::now();
    // Cells are independent and seeded on their own: run them on all cores.
    let cells: Vec<(usize, &'static str)> = args
        .clients
        .iter()
        .flat_map(|&c| sim::ALGORITHMS.iter().map(move |&a| (c, a)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(c, a)) = cells.get(i) else { break };
                    let (time, calls) = sim::closed_cell(c, a, args.runs, args.seed);
                    results
                        .lock()
                        .expect("results")
                        .push((i, (c, a, time, calls)));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    let rows: Rows = results.into_iter().map(|(_, r)| r).collect();

    let mut csv = String::from("clients,algorithm,runs,time_mean,calls_mean\n");
    for (c, a, time, calls) in &rows {
        writeln!(csv, "{c},{a},{},{time:.3},{calls:.3}", args.runs)?;
    }
    println!(
        "{:>7}  {:<14} {:>12} {:>12}",
        "clients", "algorithm", "time_mean", "calls_mean"
    );
    for (c, a, time, calls) in &rows {
        println!("{c:>7}  {a:<14} {time:>12.1} {calls:>12.1}");
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
            |r| r.3,
        )?;
        plot(
            &rows,
            &format!("{dir}/simulation_time.svg"),
            "Completion time per run (time units)",
            |r| r.2,
        )?;
        eprintln!("wrote {dir}/simulation_calls.svg and {dir}/simulation_time.svg");
    }
    Ok(())
}

/// One labelled line per series; shared by every plot here.
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

fn plot(
    rows: &Rows,
    path: &str,
    title: &str,
    value: fn(&(usize, &'static str, f64, f64)) -> f64,
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
