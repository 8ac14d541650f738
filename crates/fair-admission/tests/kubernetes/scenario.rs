//! Kubernetes' `uniformScenario` (`queueset_test.go:120–520`) on this
//! crate's [`Apf`], on a virtual clock: clients of threads that each
//! alternate a synchronous call and "thinking", the seats each client holds
//! integrated over the evaluation period and compared with the max-min fair
//! allocation of their demands.
//!
//! Go runs the events of one instant on goroutines in any order; here they
//! run in the order they were scheduled. Like Kubernetes' test, a thread
//! whose request is refused stops. `SCENARIO_DEBUG=1` prints each
//! scenario's measured averages.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use fair_admission::{Admit, Apf, LevelId, Ticket, WorkEstimate};

/// One client: `threads` threads of `calls` calls each (Kubernetes'
/// `uniformClient`).
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub hash: u64,
    pub threads: usize,
    pub calls: usize,
    /// Nanoseconds a call executes.
    pub exec: i64,
    /// Nanoseconds between the end of a call's execution and the next
    /// call (may be negative: the next call is sent before it ends).
    pub think: i64,
    pub initial_seats: u32,
    pub final_seats: u32,
    /// Nanoseconds the final seats stay held after the execution.
    pub pad: i64,
    /// Half the threads start at half the evaluation period.
    pub split: bool,
}

/// `newUniformClient`: one seat, nothing after the call.
pub fn client(hash: u64, threads: usize, calls: usize, exec: Duration, think: i64) -> Client {
    Client {
        hash,
        threads,
        calls,
        exec: exec.as_nanos() as i64,
        think,
        initial_seats: 1,
        final_seats: 1,
        pad: 0,
        split: false,
    }
}

/// Seconds as nanoseconds, for `think` and `pad`.
pub fn secs(s: f64) -> i64 {
    (s * 1e9).round() as i64
}

/// A scenario: the level it runs on and what it expects (Kubernetes'
/// `uniformScenario`).
pub struct Scenario {
    pub apf: Apf,
    pub level: LevelId,
    pub clients: Vec<Client>,
    pub concurrency_limit: f64,
    pub eval: Duration,
    /// Per evaluation (two for a split scenario): whether the averages are
    /// within the margin of the fair ones, and the margin.
    pub expect_fair: Vec<bool>,
    pub margin: Vec<f64>,
    pub expect_all_requests: bool,
    /// Replaces the max-min fair allocation as the expected averages.
    pub expected_averages: Option<Vec<f64>>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Per evaluation, each client's average seats executing.
    pub averages: Vec<Vec<f64>>,
    /// Per evaluation, the expected averages.
    pub expected: Vec<Vec<f64>>,
    pub failed: usize,
    /// Time averages of the seat demand the level reported and of the
    /// demand the clients made, over the whole run.
    pub demand: (f64, f64),
    pub apf: Apf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Call {
        client: usize,
        thread: usize,
        k: usize,
    },
    Finish(Ticket),
    /// The client's demand for a call's seats ends (Kubernetes'
    /// `returnSeatDemand`).
    Return {
        client: usize,
    },
}

struct Run {
    apf: Apf,
    level: LevelId,
    clients: Vec<Client>,
    agenda: BinaryHeap<Reverse<(i64, u64, Event)>>,
    seq: u64,
    now: i64,
    calls: HashMap<Ticket, (usize, usize, usize)>,
    /// Seats executing per client, and their integral (seat-nanoseconds,
    /// exact) since the last evaluation.
    executing: Vec<i128>,
    integral: Vec<i128>,
    since: i64,
    /// The clients' seat demand and the level's, and their integrals.
    demand: (i128, i128),
    demand_integral: (i128, i128),
    failed: usize,
    calls_of: Vec<usize>,
}

impl Run {
    fn at(&mut self, t: i64, e: Event) {
        self.seq += 1;
        self.agenda.push(Reverse((t, self.seq, e)));
    }

    /// Moves the clocks to `t`, integrating what held until then.
    fn clock(&mut self, t: i64) {
        if t <= self.now {
            return;
        }
        let dt = i128::from(t - self.now);
        for (i, x) in self.integral.iter_mut().enumerate() {
            *x += self.executing[i] * dt;
        }
        self.demand_integral.0 += self.demand.0 * dt;
        self.demand_integral.1 += self.demand.1 * dt;
        self.now = t;
        let dispatched = self.apf.advance_to(Duration::from_nanos(t as u64));
        self.started(dispatched);
    }

    fn started(&mut self, tickets: Vec<Ticket>) {
        for t in tickets {
            let (i, j, k) = self.calls[&t];
            let c = self.clients[i];
            self.executing[i] += i128::from(c.initial_seats);
            self.at(
                self.now + c.exec + c.think,
                Event::Call {
                    client: i,
                    thread: j,
                    k: k + 1,
                },
            );
            self.at(self.now + c.exec, Event::Finish(t));
        }
    }

    fn call(&mut self, i: usize, j: usize, k: usize) {
        if k >= self.calls_of[i * 1000 + j] {
            return;
        }
        let c = self.clients[i];
        self.demand.0 += i128::from(c.initial_seats.max(c.final_seats));
        let mut work = WorkEstimate::default();
        work.initial_seats = c.initial_seats;
        work.final_seats = c.final_seats;
        work.additional_latency = Duration::from_nanos(c.pad as u64);
        let admission = self.apf.admit_hashed(self.level, c.hash, work);
        match admission.admit {
            Admit::Dispatched(t) | Admit::Queued(t) => {
                self.calls.insert(t, (i, j, k));
                if k.is_multiple_of(100) {
                    // Kubernetes' `insistRequestFromUser`: the dump lists
                    // the request, by the name its caller gave it.
                    let user = format!("{i}:{j}:{k}");
                    self.apf.name_flow(t, &format!("client{i}"), &user);
                    let dump = self.apf.dump();
                    let listed = dump.levels.iter().flat_map(|l| &l.requests);
                    assert!(
                        listed.into_iter().any(|r| r.flow_distinguisher == user),
                        "request {user} is not in the dump"
                    );
                }
                if matches!(admission.admit, Admit::Dispatched(_)) {
                    self.started(vec![t]);
                }
            }
            _ => {
                self.failed += 1;
                self.demand.0 -= i128::from(c.initial_seats.max(c.final_seats));
            }
        }
        self.started(admission.dispatched);
    }

    fn finish(&mut self, t: Ticket) {
        let (i, ..) = self.calls[&t];
        let c = self.clients[i];
        self.executing[i] -= i128::from(c.initial_seats);
        self.at(self.now + c.pad, Event::Return { client: i });
        let dispatched = self.apf.complete(t).expect("executing");
        self.started(dispatched);
    }

    /// Runs every event up to and including `until`.
    fn run(&mut self, until: i64) {
        loop {
            let next = self.agenda.peek().map(|Reverse((t, ..))| *t);
            let linger = self.apf.next_event().map(|d| d.as_nanos() as i64);
            match (next, linger) {
                (_, Some(l)) if l <= until && next.is_none_or(|n| l < n) => self.clock(l),
                (Some(n), _) if n <= until => {
                    self.clock(n);
                    let Reverse((_, _, e)) = self.agenda.pop().expect("peeked");
                    match e {
                        Event::Call { client, thread, k } => self.call(client, thread, k),
                        Event::Finish(t) => self.finish(t),
                        Event::Return { client } => {
                            let c = self.clients[client];
                            self.demand.0 -= i128::from(c.initial_seats.max(c.final_seats));
                        }
                    }
                }
                _ => break,
            }
            let stats = self.apf.level_stats(self.level).expect("our level");
            self.demand.1 = i128::from(stats.seats_in_use + stats.seats_waiting);
        }
        self.clock(until);
    }

    /// Each client's average seats executing since the last evaluation.
    fn evaluate(&mut self) -> Vec<f64> {
        let span = (self.now - self.since) as f64;
        self.since = self.now;
        self.integral
            .iter_mut()
            .map(|x| std::mem::take(x) as f64 / span)
            .collect()
    }
}

impl Scenario {
    /// Runs the scenario to its end and checks it as Kubernetes'
    /// `exercise` does; panics with the measurements if a check fails.
    pub fn exercise(self, name: &str) -> Outcome {
        let mut run = Run {
            apf: self.apf,
            level: self.level,
            clients: self.clients.clone(),
            agenda: BinaryHeap::new(),
            seq: 0,
            now: 0,
            calls: HashMap::new(),
            executing: vec![0; self.clients.len()],
            integral: vec![0; self.clients.len()],
            since: 0,
            demand: (0, 0),
            demand_integral: (0, 0),
            failed: 0,
            calls_of: vec![0; self.clients.len() * 1000],
        };
        let eval = self.eval.as_nanos() as i64;
        let split = self.clients.iter().any(|c| c.split);
        for (i, c) in self.clients.iter().enumerate() {
            for j in 0..c.threads {
                let mut delay = (90 * j + 20 * i) as i64;
                let mut calls = c.calls;
                if c.split && j >= c.threads / 2 {
                    delay += eval / 2;
                    calls /= 2;
                }
                run.calls_of[i * 1000 + j] = calls;
                run.at(
                    delay,
                    Event::Call {
                        client: i,
                        thread: j,
                        k: 0,
                    },
                );
            }
        }
        let mut outcome = Outcome {
            averages: Vec::new(),
            expected: Vec::new(),
            failed: 0,
            demand: (0.0, 0.0),
            apf: run.apf.clone(),
        };
        let ends: Vec<(i64, bool)> = if split {
            vec![(eval / 2, false), (eval, true)]
        } else {
            vec![(eval, true)]
        };
        for (n, &(end, last)) in ends.iter().enumerate() {
            run.run(end);
            let averages = run.evaluate();
            if std::env::var_os("SCENARIO_DEBUG").is_some() {
                eprintln!("{name} {n}: {averages:?} failed {}", run.failed);
            }
            let demands: Vec<f64> = self
                .clients
                .iter()
                .map(|c| {
                    let threads = if c.split && !last {
                        c.threads / 2
                    } else {
                        c.threads
                    };
                    threads as f64 * f64::from(c.initial_seats) * c.exec as f64
                        / (c.think + c.exec) as f64
                })
                .collect();
            let expected = self
                .expected_averages
                .clone()
                .unwrap_or_else(|| fair_alloc(&demands, self.concurrency_limit));
            for (i, (&got, &want)) in averages.iter().zip(&expected).enumerate() {
                let fair = if want > 0.0 {
                    ((got - want) / want).abs() <= self.margin[n]
                } else {
                    got.abs() <= self.margin[n]
                };
                assert_eq!(
                    fair, self.expect_fair[n],
                    "{name}: client {i}, evaluation {n}: got an average of {got} seats, \
                     fair is {want}, margin {}, expected fair: {}",
                    self.margin[n], self.expect_fair[n]
                );
            }
            outcome.averages.push(averages);
            outcome.expected.push(expected);
        }
        run.run(i64::MAX / 2);
        let span = run.now as f64;
        outcome.demand = (
            run.demand_integral.1 as f64 / span,
            run.demand_integral.0 as f64 / span,
        );
        outcome.failed = run.failed;
        assert_eq!(
            run.failed == 0,
            self.expect_all_requests,
            "{name}: {} requests refused",
            run.failed
        );
        assert_eq!(
            run.demand_integral.0, run.demand_integral.1,
            "{name}: the level's seat demand over time differs from the clients'"
        );
        outcome.apf = run.apf;
        outcome
    }
}

/// The max-min fair allocation of `capacity` to `demands` (Kubernetes'
/// `fairAlloc`, `queueset_test.go:51`).
pub fn fair_alloc(demands: &[f64], mut capacity: f64) -> Vec<f64> {
    let count = demands.len();
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by(|&a, &b| demands[a].total_cmp(&demands[b]));
    let mut alloc = vec![0.0; count];
    let (mut next, mut previous) = (0, 0.0);
    while next < count {
        let demand = demands[order[next]];
        if demand > 0.0 {
            let bite = (count - next) as f64 * (demand - previous);
            if bite > capacity {
                break;
            }
            previous = demand;
            alloc[order[next]] = demand;
            capacity -= bite;
        }
        next += 1;
    }
    for &i in &order[next..] {
        alloc[i] = previous + capacity / (count - next) as f64;
    }
    alloc
}
