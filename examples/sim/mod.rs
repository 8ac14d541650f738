//! The simulation models behind `examples/simulate.rs`, shared with the
//! tests beside it (`examples/tests`).
//!
//! Closed model: Marc Brooker's "Exponential Backoff And Jitter" (AWS
//! Architecture Blog, 2015; awslabs/aws-arch-backoff-simulator). Open model:
//! Poisson arrivals against a fixed-capacity server, with and without a
//! retry budget.

pub mod apf;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use keyed_backoff::budget::{RetryBudget, TpsBudget};
use keyed_backoff::clock::MockClock;
use keyed_backoff::strategy::{
    Decorrelated, EqualJitter, Exponential, FactorJitter, FullJitter, Step,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

/// One simulated time unit is one millisecond of strategy delay.
const UNIT: Duration = Duration::from_millis(1);
pub const BASE: f64 = 5.0;
pub const CAP: f64 = 2000.0;

/// The algorithms of the AWS article (labels as there) and two of ours.
pub const ALGORITHMS: [&str; 7] = [
    "None",
    "Exponential",
    "FullJitter",
    "EqualJitter",
    "Decorr",
    "DecorrBounded",
    "ClientGo",
];

/// The strategy for an algorithm label, built from the crate's `strategy`
/// module with base 5 and cap 2000 time units. `None` is no backoff.
pub fn strategy(label: &str) -> Option<Box<dyn Step>> {
    let (base, cap) = (UNIT.mul_f64(BASE), UNIT.mul_f64(CAP));
    Some(match label {
        "None" => return None,
        "Exponential" => Box::new(Exponential::new(base, 2.0).max(cap)),
        "FullJitter" => Box::new(FullJitter::new(base, cap)),
        "EqualJitter" => Box::new(EqualJitter::new(base, cap)),
        "Decorr" => Box::new(Decorrelated::new(base, cap)),
        "DecorrBounded" => Box::new(Decorrelated::new(base, cap).bounded()),
        // client-go's strategy with jitter factor 1: doubling plus up to 100 %.
        "ClientGo" => Box::new(FactorJitter::new(base, cap).jitter(1.0)),
        other => panic!("unknown algorithm {other}"),
    })
}

/// The wait before retry `attempt`: the strategy's delay, or zero with no
/// strategy (or once it gives up).
fn backoff(
    step: Option<&dyn Step>,
    attempt: u32,
    previous: Option<Duration>,
    rng: &mut SmallRng,
) -> Duration {
    step.and_then(|s| s.delay(attempt, previous, &mut || rng.random::<f64>()))
        .unwrap_or(Duration::ZERO)
}

/// Result of one closed-model run.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub time: f64,
    pub calls: u64,
}

/// Means and per-run standard deviations of one (clients, algorithm) cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub runs: usize,
    pub time_mean: f64,
    pub calls_mean: f64,
    pub time_sd: f64,
    pub calls_sd: f64,
}

/// An event time, totally ordered (times are never NaN).
struct At(f64);
impl PartialEq for At {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for At {}
impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The four messages of one attempt, named by where they arrive.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Message {
    /// Client → server: the server reads the current version.
    ReadRequest,
    /// Server → client, carrying the version read.
    ReadReply,
    /// Client → server, carrying that version: the call.
    WriteRequest,
    /// Server → client: success or failure.
    WriteReply,
}

/// One run of the AWS model: `clients` clients contend on one versioned
/// row. Every message (read request, read reply, write request, write reply)
/// takes its own `|Normal(10, 2)|` network hop. The server reads the version
/// when a read request arrives; the write request (a call) succeeds only if
/// the version it carries is still current, which then increments. On a
/// failed write reply a client adds 1 to its attempt count and its next
/// read request arrives one hop plus `backoff(attempt)` later; on success it
/// is done. All clients start at 0; the run's time is the time of its last
/// event (the last successful write reply).
pub fn closed_run(clients: usize, step: Option<&dyn Step>, rng: &mut SmallRng) -> Run {
    let net = Normal::new(10.0, 2.0).expect("valid normal");
    let hop = |rng: &mut SmallRng| -> f64 { Distribution::<f64>::sample(&net, rng).abs() };
    let mut version = 0u64;
    // Per client: the version carried by its messages, its attempt count and
    // its previous backoff (for decorrelated jitter).
    let mut carried = vec![0u64; clients];
    let mut succeeded = vec![false; clients];
    let mut attempt = vec![0u32; clients];
    let mut previous: Vec<Option<Duration>> = vec![None; clients];
    let mut events: BinaryHeap<Reverse<(At, Message, usize)>> = BinaryHeap::new();
    for c in 0..clients {
        events.push(Reverse((At(hop(rng)), Message::ReadRequest, c)));
    }
    let (mut calls, mut last) = (0u64, 0.0f64);
    while let Some(Reverse((At(t), message, c))) = events.pop() {
        last = t;
        let next = match message {
            Message::ReadRequest => {
                carried[c] = version;
                Message::ReadReply
            }
            Message::ReadReply => Message::WriteRequest,
            Message::WriteRequest => {
                calls += 1;
                succeeded[c] = carried[c] == version;
                if succeeded[c] {
                    version += 1;
                }
                Message::WriteReply
            }
            Message::WriteReply => {
                if succeeded[c] {
                    continue; // this client is done
                }
                attempt[c] += 1;
                let h = hop(rng);
                let d = backoff(step, attempt[c], previous[c], rng);
                previous[c] = Some(d);
                let wait = d.as_secs_f64() / UNIT.as_secs_f64();
                events.push(Reverse((At(t + h + wait), Message::ReadRequest, c)));
                continue;
            }
        };
        events.push(Reverse((At(t + hop(rng)), next, c)));
    }
    Run { time: last, calls }
}

/// Mean and sample standard deviation.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
}

/// `runs` runs of `clients` clients with `algorithm`, fresh clients and
/// server each run, seeded from `seed`, `clients` and the algorithm's
/// position, so each cell is reproducible on its own.
pub fn closed_cell(clients: usize, algorithm: &str, runs: usize, seed: u64) -> Cell {
    let step = strategy(algorithm);
    let index = ALGORITHMS
        .iter()
        .position(|a| *a == algorithm)
        .expect("known algorithm") as u64;
    let mut rng = SmallRng::seed_from_u64(seed ^ (clients as u64) << 16 ^ index << 40);
    let (mut times, mut calls) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for _ in 0..runs {
        let r = closed_run(clients, step.as_deref(), &mut rng);
        times.push(r.time);
        calls.push(r.calls as f64);
    }
    let (time_mean, time_sd) = mean_sd(&times);
    let (calls_mean, calls_sd) = mean_sd(&calls);
    Cell {
        runs,
        time_mean,
        calls_mean,
        time_sd,
        calls_sd,
    }
}

/// The algorithms of the original simulator, in its labels.
pub const ORIGINAL: [&str; 5] = ["Exponential", "Decorr", "EqualJitter", "FullJitter", "None"];

/// Parses a CSV in this simulator's format
/// (`clients,algorithm,runs,time_mean,calls_mean,time_sd,calls_sd`).
pub fn parse_cells(text: &str) -> Result<Vec<(usize, String, Cell)>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| format!("line {}: {what}: {line:?}", i + 1);
        if f.len() != 7 {
            return Err(bad("expected 7 fields"));
        }
        let num = |k: usize| f[k].parse::<f64>().map_err(|_| bad("not a number"));
        rows.push((
            f[0].parse().map_err(|_| bad("clients"))?,
            f[1].to_string(),
            Cell {
                runs: f[2].parse().map_err(|_| bad("runs"))?,
                time_mean: num(3)?,
                calls_mean: num(4)?,
                time_sd: num(5)?,
                calls_sd: num(6)?,
            },
        ));
    }
    Ok(rows)
}

/// Whether two cells' means agree within 4 standard errors of their
/// difference plus 3 % of the reference; the error names what disagrees.
pub fn agrees(ours: &Cell, reference: &Cell) -> Result<(), String> {
    let check = |what: &str, a: f64, a_sd: f64, b: f64, b_sd: f64| {
        let se = (a_sd * a_sd / ours.runs as f64 + b_sd * b_sd / reference.runs as f64).sqrt();
        let allowed = 4.0 * se + 0.03 * b.abs();
        if (a - b).abs() <= allowed {
            Ok(())
        } else {
            Err(format!(
                "{what}: ours {a:.1} vs reference {b:.1} (allowed ±{allowed:.1})"
            ))
        }
    };
    check(
        "calls",
        ours.calls_mean,
        ours.calls_sd,
        reference.calls_mean,
        reference.calls_sd,
    )?;
    check(
        "time",
        ours.time_mean,
        ours.time_sd,
        reference.time_mean,
        reference.time_sd,
    )
}

/// Result of one open-model run.
#[derive(Debug, Clone, Copy)]
pub struct OpenRun {
    /// New requests per unit of server capacity.
    pub offered: f64,
    /// Successful requests per unit of capacity.
    pub goodput: f64,
    /// Attempts per request.
    pub amplification: f64,
}

/// Open model: new requests arrive as a Poisson process at `load` × the
/// server's capacity (100 requests per time unit) for 2,000 units. Each time
/// unit the server accepts up to its capacity, in random order, and fails
/// the rest. A failed request retries after its strategy's delay (at least
/// one unit), up to 3 attempts in all, and, with `budget`, only while a 10 %
/// retry budget (`TpsBudget`) allows.
pub fn open_run(load: f64, algorithm: &str, budget: bool, seed: u64) -> OpenRun {
    const CAPACITY: usize = 100;
    const UNITS: usize = 2_000;
    const MAX_ATTEMPTS: u32 = 3;
    let step = strategy(algorithm);
    let mut rng = SmallRng::seed_from_u64(seed);
    let clock = MockClock::new();
    let tps = TpsBudget::new(Duration::from_secs(10), 0, 0.1)
        .expect("valid")
        .clock(clock.clone());
    // (attempt number, previous delay) per pending attempt, by time unit.
    let mut schedule: Vec<Vec<(u32, Option<Duration>)>> = vec![Vec::new(); UNITS + 4_000];
    let (mut requests, mut attempts, mut successes) = (0u64, 0u64, 0u64);
    for now in 0..schedule.len() {
        if now < UNITS {
            // Poisson arrivals: exponential gaps with mean 1 / (load · capacity).
            let mut t = 0.0;
            loop {
                t += -(1.0 - rng.random::<f64>()).ln() / (load * CAPACITY as f64);
                if t >= 1.0 {
                    break;
                }
                requests += 1;
                if budget {
                    tps.on_request();
                }
                schedule[now].push((1, None));
            }
        }
        let mut batch = std::mem::take(&mut schedule[now]);
        if batch.is_empty() {
            clock.advance(UNIT);
            continue;
        }
        // The server takes up to CAPACITY of this unit's attempts, at random.
        for i in (1..batch.len()).rev() {
            let j = (rng.random::<f64>() * (i + 1) as f64) as usize;
            batch.swap(i, j.min(i));
        }
        for (k, (attempt, previous)) in batch.into_iter().enumerate() {
            attempts += 1;
            if k < CAPACITY {
                successes += 1;
                continue;
            }
            if attempt >= MAX_ATTEMPTS || (budget && !tps.try_retry()) {
                continue;
            }
            let delay = backoff(step.as_deref(), attempt, previous, &mut rng);
            let units = ((delay.as_secs_f64() / UNIT.as_secs_f64()).ceil() as usize).max(1);
            if let Some(slot) = schedule.get_mut(now + units) {
                slot.push((attempt + 1, Some(delay)));
            }
        }
        clock.advance(UNIT);
    }
    let capacity_total = (CAPACITY * UNITS) as f64;
    OpenRun {
        offered: requests as f64 / capacity_total,
        goodput: successes as f64 / capacity_total,
        amplification: attempts as f64 / requests.max(1) as f64,
    }
}
