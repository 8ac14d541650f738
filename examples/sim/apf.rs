//! Both halves of the contract in one open-loop model: a server that sheds
//! overload (first in, first out, or API Priority and Fairness) and clients
//! that retry on 429, with or without the keyed backoff (one key per flow).
//!
//! One elephant flow offers 10× the server's capacity and 20 mice together
//! offer 0.5×, all Poisson. The server has 10 seats and a mean service time
//! of 100 ms (exponential): 100 requests a second. Both servers hold at most
//! 3,200 waiting requests (APF: 64 queues of 50, hands of 8; FIFO: one queue
//! of 3,200) and refuse a request that waited 15 s. A client gives up 10 s
//! after it first sent a request; work finished after that is wasted.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock};

use fair_admission::{Admit, Apf, LevelId, LevelSpec, LimitResponse, Ticket};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

pub const SEATS: u32 = 10;
const SERVICE_MS: f64 = 100.0;
const CAPACITY: f64 = SEATS as f64 * 1000.0 / SERVICE_MS; // requests per second
const MICE: usize = 20;
const QUEUE_WAIT_MS: u64 = 15_000;
const CLIENT_TIMEOUT_MS: u64 = 30_000;
const MAX_ATTEMPTS: u32 = 3;
pub const DURATION_MS: u64 = 60_000;

/// The three set-ups compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// One FIFO queue; clients retry on 429 at once.
    Fifo,
    /// APF; clients retry on 429 at once.
    Apf,
    /// APF; clients back off per flow with the keyed manager.
    ApfBackoff,
}

impl Setup {
    pub const ALL: [Setup; 3] = [Setup::Fifo, Setup::Apf, Setup::ApfBackoff];

    pub fn label(self) -> &'static str {
        match self {
            Setup::Fifo => "FIFO",
            Setup::Apf => "APF",
            Setup::ApfBackoff => "APF + client backoff",
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct ApfRun {
    /// Share of the mice's requests that succeeded within the client timeout.
    pub mice_goodput: f64,
    /// 99th percentile latency of the mice's successful requests, seconds.
    pub mice_p99_s: f64,
    /// The elephant's requests served in time per second, over the time
    /// the flows send.
    pub elephant_rate: f64,
    /// Share of the elephant's requests that succeeded.
    pub elephant_goodput: f64,
    /// 429 answers per second.
    pub rejections_per_s: f64,
    /// Requests per second the clients' backoff failed fast, unsent.
    pub held_back_per_s: f64,
    /// Share of the seat time spent on requests whose client had given up.
    pub wasted: f64,
    /// Mice goodput per second of the run (for the plot).
    pub mice_goodput_by_second: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A new request of a flow (0 = the elephant).
    Arrive { flow: usize },
    /// A client sends (or resends) request `req`.
    Send { req: usize },
    /// The request holding the ticket finishes.
    Finish(Ticket),
    /// A waiting request hits the server's queue-wait limit.
    Expire(Ticket),
}

/// Events by time (ms), in the order they were scheduled on ties.
#[derive(Default)]
struct Agenda {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl Agenda {
    fn at(&mut self, ms: u64, e: Event) {
        self.seq += 1;
        self.heap.push(Reverse((ms, self.seq, e)));
    }

    fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|Reverse((ms, _, e))| (ms, e))
    }
}

struct Request {
    flow: usize,
    first_sent_ms: u64,
    attempts: u32,
}

/// An exponential draw with the given mean.
fn exp(rng: &mut SmallRng, mean: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() * mean
}

/// The server: one priority level, queuing by APF or in one FIFO queue.
fn server(setup: Setup) -> (Apf, LevelId) {
    let limit = match setup {
        Setup::Fifo => LimitResponse::Queue {
            queues: 1,
            queue_length_limit: 3_200,
            hand_size: 1,
        },
        Setup::Apf | Setup::ApfBackoff => LimitResponse::Queue {
            queues: 64,
            queue_length_limit: 50,
            hand_size: 8,
        },
    };
    let apf = Apf::builder(SEATS)
        .level("workload", LevelSpec::limited(1, limit))
        .build()
        .expect("valid settings");
    let level = apf.level_id("workload").expect("just added");
    (apf, level)
}

/// The requests behind tickets that left their queues for a seat.
fn dequeued(waiting: &mut HashMap<Ticket, usize>, tickets: Vec<Ticket>) -> Vec<(Ticket, usize)> {
    tickets
        .into_iter()
        .map(|t| (t, waiting.remove(&t).expect("a waiting request")))
        .collect()
}

/// Runs one set-up for [`DURATION_MS`] with seed `seed`.
pub fn apf_run(setup: Setup, seed: u64) -> ApfRun {
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut apf, level) = server(setup);
    let clock = MockClock::new();
    let mut clock_ms = 0;
    let backoff = Backoff::<usize>::builder(Duration::from_secs(1), Duration::from_secs(8))
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    let mean_gap_ms = |flow: usize| {
        let share = if flow == 0 { 10.0 } else { 0.5 / MICE as f64 };
        1000.0 / (share * CAPACITY)
    };
    let mut agenda = Agenda::default();
    for flow in 0..=MICE {
        agenda.at(
            exp(&mut rng, mean_gap_ms(flow)) as u64,
            Event::Arrive { flow },
        );
    }
    let mut requests: Vec<Request> = Vec::new();
    let mut running: HashMap<Ticket, (usize, u64)> = HashMap::new(); // → (request, start ms)
    let mut waiting: HashMap<Ticket, usize> = HashMap::new();
    let (mut busy_ms, mut wasted_ms, mut rejections) = (0u64, 0u64, 0u64);
    let mut elephant_in_window = 0u64;
    let mut mice_latencies: Vec<u64> = Vec::new();
    let seconds = (DURATION_MS / 1000) as usize;
    let (mut mice_ok_by_second, mut mice_by_second) = (vec![0u64; seconds], vec![0u64; seconds]);
    let (mut ok, mut offered, mut held_back) = ([0u64; 2], [0u64; 2], [0u64; 2]);
    let class = |flow: usize| usize::from(flow != 0);

    while let Some((now, event)) = agenda.pop() {
        clock.advance(Duration::from_millis(now - clock_ms));
        clock_ms = now;
        // Requests that get a seat now: (ticket, request).
        let mut dispatched = dequeued(&mut waiting, apf.advance(Duration::from_millis(now)));
        // A refused attempt: retry (after the flow's backoff, if the clients
        // back off) while attempts and the client's patience last.
        let mut refused = |req: usize, requests: &mut Vec<Request>, agenda: &mut Agenda| {
            rejections += 1;
            let r = &requests[req];
            if r.attempts >= MAX_ATTEMPTS {
                return;
            }
            let delay = match setup {
                Setup::ApfBackoff => backoff.next(&r.flow, clock.now()).as_millis() as u64,
                _ => 0,
            };
            agenda.at(now + delay, Event::Send { req });
        };
        match event {
            Event::Arrive { flow } => {
                if now >= DURATION_MS {
                    continue;
                }
                agenda.at(
                    now + (exp(&mut rng, mean_gap_ms(flow)) as u64).max(1),
                    Event::Arrive { flow },
                );
                offered[class(flow)] += 1;
                if flow != 0 {
                    mice_by_second[(now / 1000) as usize] += 1;
                }
                requests.push(Request {
                    flow,
                    first_sent_ms: now,
                    attempts: 0,
                });
                agenda.at(
                    now,
                    Event::Send {
                        req: requests.len() - 1,
                    },
                );
            }
            Event::Send { req } => {
                let r = &mut requests[req];
                if now >= r.first_sent_ms + CLIENT_TIMEOUT_MS {
                    continue; // the client gave up
                }
                if setup == Setup::ApfBackoff && backoff.remaining(&r.flow, clock.now()).is_some() {
                    // The flow's gate: while it backs off, its requests fail
                    // fast in the client and cost the server nothing.
                    held_back[class(r.flow)] += 1;
                    continue;
                }
                r.attempts += 1;
                let flow = r.flow;
                let admission = apf.admit(level, &flow, 1);
                dispatched.extend(dequeued(&mut waiting, admission.dispatched));
                match admission.admit {
                    Admit::Dispatched(t) => dispatched.push((t, req)),
                    Admit::Queued(t) => {
                        waiting.insert(t, req);
                        agenda.at(now + QUEUE_WAIT_MS, Event::Expire(t));
                    }
                    // Rejected, or any refusal a later version adds.
                    _ => refused(req, &mut requests, &mut agenda),
                }
            }
            Event::Finish(ticket) => {
                let (req, started) = running.remove(&ticket).expect("running");
                let r = &requests[req];
                let ran = now - started;
                busy_ms += ran;
                if now <= r.first_sent_ms + CLIENT_TIMEOUT_MS {
                    ok[class(r.flow)] += 1;
                    if r.flow == 0 && now < DURATION_MS {
                        elephant_in_window += 1;
                    }
                    if r.flow != 0 {
                        mice_latencies.push(now - r.first_sent_ms);
                        mice_ok_by_second[(r.first_sent_ms / 1000) as usize] += 1;
                    }
                } else {
                    wasted_ms += ran;
                }
                let from_queues = apf.complete(ticket).expect("a running ticket");
                dispatched.extend(dequeued(&mut waiting, from_queues));
            }
            Event::Expire(ticket) => {
                if apf.cancel(ticket) {
                    let req = waiting.remove(&ticket).expect("a waiting request");
                    refused(req, &mut requests, &mut agenda);
                }
            }
        }
        for (t, req) in dispatched {
            let service = exp(&mut rng, SERVICE_MS).ceil().max(1.0) as u64;
            running.insert(t, (req, now));
            agenda.at(now + service, Event::Finish(t));
        }
    }

    mice_latencies.sort_unstable();
    let p99 = mice_latencies
        .get(mice_latencies.len() * 99 / 100)
        .copied()
        .unwrap_or(0);
    let secs = DURATION_MS as f64 / 1000.0;
    ApfRun {
        mice_goodput: ok[1] as f64 / offered[1].max(1) as f64,
        mice_p99_s: p99 as f64 / 1000.0,
        elephant_rate: elephant_in_window as f64 / secs,
        elephant_goodput: ok[0] as f64 / offered[0].max(1) as f64,
        rejections_per_s: rejections as f64 / secs,
        held_back_per_s: (held_back[0] + held_back[1]) as f64 / secs,
        wasted: wasted_ms as f64 / busy_ms.max(1) as f64,
        mice_goodput_by_second: mice_ok_by_second
            .iter()
            .zip(&mice_by_second)
            .map(|(&ok, &all)| ok as f64 / all.max(1) as f64)
            .collect(),
    }
}
