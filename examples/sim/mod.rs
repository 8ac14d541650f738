//! The simulation models behind `examples/simulate.rs`, shared with
//! `tests/simulation_shape.rs`.
//!
//! Closed model: Marc Brooker's "Exponential Backoff And Jitter" (AWS
//! Architecture Blog, 2015; awslabs/aws-arch-backoff-simulator). Open model:
//! Poisson arrivals against a fixed-capacity server, with and without a
//! retry budget.

#![allow(dead_code)] // the test uses only part of it

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
        "Exponential" => Box::new(Exponential::new(base, 2.0).cap(cap)),
        "FullJitter" => Box::new(FullJitter::new(base, cap)),
        "EqualJitter" => Box::new(EqualJitter::new(base, cap)),
        "Decorr" => Box::new(Decorrelated::new(base, cap)),
        "DecorrBounded" => Box::new(Decorrelated::new(base, cap).bounded()),
        // client-go's rule with jitter factor 1: doubling plus up to 100 %.
        "ClientGo" => Box::new(FactorJitter::new(base, cap).factor(1.0)),
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

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    Read,
    Write,
}

/// One run of the AWS model: `clients` clients contend on one versioned
/// row. Each reads (and gets the current version), then after one network
/// hop writes with that version; the write (a call) succeeds only if the
/// version is still current, which then increments. A failed client adds 1
/// to its attempt count and reads again after one hop plus
/// `backoff(attempt)`. Every hop is `|Normal(10, 2)|`. All start at 0; the
/// run's time is the time of its last event.
pub fn closed_run(clients: usize, step: Option<&dyn Step>, rng: &mut SmallRng) -> Run {
    let hop = Normal::new(10.0, 2.0).expect("valid normal");
    let mut version = 0u64;
    let mut read_version = vec![0u64; clients];
    let mut attempt = vec![0u32; clients];
    let mut previous: Vec<Option<Duration>> = vec![None; clients];
    let mut events: BinaryHeap<Reverse<(At, Action, usize)>> = (0..clients)
        .map(|c| Reverse((At(0.0), Action::Read, c)))
        .collect();
    let (mut calls, mut last) = (0u64, 0.0f64);
    while let Some(Reverse((At(t), action, c))) = events.pop() {
        last = t;
        match action {
            Action::Read => {
                read_version[c] = version;
                let h: f64 = hop.sample(rng);
                events.push(Reverse((At(t + h.abs()), Action::Write, c)));
            }
            Action::Write => {
                calls += 1;
                if read_version[c] == version {
                    version += 1; // success: this client is done
                    continue;
                }
                attempt[c] += 1;
                let d = backoff(step, attempt[c], previous[c], rng);
                previous[c] = Some(d);
                let backoff = d.as_secs_f64() / UNIT.as_secs_f64();
                let h: f64 = hop.sample(rng);
                events.push(Reverse((At(t + h.abs() + backoff), Action::Read, c)));
            }
        }
    }
    Run { time: last, calls }
}

/// Mean time and calls over `runs` runs, seeded from `seed`, `clients` and
/// the algorithm's position, so each cell is reproducible on its own.
pub fn closed_cell(clients: usize, algorithm: &str, runs: usize, seed: u64) -> (f64, f64) {
    let step = strategy(algorithm);
    let index = ALGORITHMS
        .iter()
        .position(|a| *a == algorithm)
        .expect("known algorithm") as u64;
    let mut rng = SmallRng::seed_from_u64(seed ^ (clients as u64) << 16 ^ index << 40);
    let (mut time, mut calls) = (0.0, 0.0);
    for _ in 0..runs {
        let r = closed_run(clients, step.as_deref(), &mut rng);
        time += r.time;
        calls += r.calls as f64;
    }
    (time / runs as f64, calls / runs as f64)
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
