//! Fleet-wide outage awareness, across OS processes: four replicas (this
//! test binary run again as children), 250 keys each, on one real
//! redis-server, the dependency down for 120 s of simulated time. The
//! parent moves every child's mock clock forward in lockstep and collects
//! each attempt that reached the dependency.
//!
//! - One outage is declared; at most `probes` attempts reach the
//!   dependency in each step of the ladder, across the four processes
//!   (once each process has learned of the outage: an attempt before
//!   then is counted apart, and must come within the phase's refresh of
//!   the declaration); no second of the recovery holds more than
//!   `release_rate` keys let go across them; every key's first success comes
//!   within 15 s of the dependency's return.
//! - With the redis-server killed during the outage, each process goes on
//!   alone: no key is released at once, which here means that while the
//!   dependency is down no process lets more than `probes` keys try in
//!   any step of the ladder, and once it is back no process lets more
//!   than `release_rate` keys go in any second.
//! - With the redis-server back (empty) 10 s after that, the processes
//!   come back to one outage: once all have reached Redis again, at most
//!   `probes` attempts per step across the four, and at most
//!   `release_rate` a second across them in the recovery.
//!
//! Its own harness (`harness = false`): a child is this binary with the
//! child's setup in its environment.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use keyed_backoff_testkit::outage;
use keyed_backoff_testkit::redis_server::Server;

#[path = "fleet_outage/child.rs"]
mod child;
#[path = "fleet_outage/domains.rs"]
mod domains;
#[path = "fleet_outage/rejoin.rs"]
mod rejoin;

const PROCESSES: usize = 4;
const KEYS: usize = 250;
const SECOND: u64 = 1_000_000_000;
/// The dependency goes down 30 s in (every key has run once) for 120 s.
const DOWN: (u64, u64) = (30 * SECOND, 150 * SECOND);
/// The least step of the simulated time.
const TICK: u64 = 10_000_000;
/// How long a replica trusts the phase it last read (the crate's bound).
const REFRESH: u64 = 100_000_000;

fn main() {
    if let Some(setup) = child::Setup::from_env() {
        child::run(setup);
        return;
    }
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if wanted("the_fleet_shares_one_outage") {
        the_fleet_shares_one_outage();
    }
    if wanted("redis_killed_during_the_outage") {
        redis_killed_during_the_outage();
    }
    if wanted("redis_back_during_the_outage") {
        rejoin::redis_back_during_the_outage();
    }
    if wanted("a_domain_down_is_one_outage_of_it_for_the_fleet") {
        domains::a_domain_down_is_one_outage_of_it_for_the_fleet();
    }
}

/// One attempt that reached the dependency.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    process: usize,
    key: usize,
    at: u64,
    ok: bool,
    /// Whether the process knew of the outage when it let the key try.
    informed: bool,
}

/// A child process, killed and reaped when dropped.
struct Replica {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a child said after a time step: of the outage watched (of
/// everything, or of the domain down when keys name theirs).
#[derive(Debug, Clone, Copy, Default)]
struct Status {
    in_outage: bool,
    alone: bool,
    outages: u64,
    next: u64,
    /// The outages of everything.
    everything_outages: u64,
    /// The outages of the domain that stays up.
    up_outages: u64,
}

struct Fleet {
    replicas: Vec<Replica>,
    attempts: Vec<Attempt>,
    /// When each process first saw the outage.
    learned: Vec<Option<u64>>,
    /// When each process first went on alone.
    alone_since: Vec<Option<u64>>,
    last: Vec<Status>,
}

impl Fleet {
    fn start(server: &Server, prefix: &str, fallback: bool) -> Fleet {
        Fleet::start_with(server, prefix, PROCESSES, fallback, false)
    }

    /// `processes` children; with `domains`, their keys name their
    /// dependency.
    fn start_with(
        server: &Server,
        prefix: &str,
        processes: usize,
        fallback: bool,
        domains: bool,
    ) -> Fleet {
        let exe = std::env::current_exe().expect("the test binary");
        let replicas = (0..processes)
            .map(|index| {
                let setup = child::Setup {
                    index,
                    url: server.url.clone(),
                    prefix: prefix.to_string(),
                    keys: KEYS,
                    down: DOWN,
                    resync: Duration::from_secs(30),
                    fallback,
                    domains,
                };
                let mut child = Command::new(&exe)
                    .envs(setup.env())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("a child process");
                let stdin = child.stdin.take().expect("stdin");
                let stdout = BufReader::new(child.stdout.take().expect("stdout"));
                Replica {
                    child,
                    stdin,
                    stdout,
                }
            })
            .collect();
        Fleet {
            replicas,
            attempts: Vec::new(),
            learned: vec![None; processes],
            alone_since: vec![None; processes],
            last: vec![Status::default(); processes],
        }
    }

    /// Moves every child to `now`; the earliest time a key is due next.
    fn step(&mut self, now: u64) -> u64 {
        for r in &mut self.replicas {
            writeln!(r.stdin, "{now}").expect("a child's stdin");
            r.stdin.flush().expect("a child's stdin");
        }
        for (process, r) in self.replicas.iter_mut().enumerate() {
            loop {
                let mut line = String::new();
                let read = r.stdout.read_line(&mut line).expect("a child's stdout");
                assert!(read > 0, "replica {process} exited");
                let w: Vec<u64> = line
                    .split_whitespace()
                    .skip(1)
                    .map(|n| n.parse().unwrap())
                    .collect();
                if line.starts_with("A ") {
                    self.attempts.push(Attempt {
                        process,
                        key: w[0] as usize,
                        at: w[1],
                        ok: w[2] == 1,
                        informed: w[3] == 1,
                    });
                } else if line.starts_with("D ") {
                    let status = Status {
                        in_outage: w[0] == 1,
                        alone: w[1] == 1,
                        outages: w[2],
                        next: w[4],
                        everything_outages: w[5],
                        up_outages: w[6],
                    };
                    if status.in_outage && self.learned[process].is_none() {
                        self.learned[process] = Some(now);
                    }
                    if status.alone && self.alone_since[process].is_none() {
                        self.alone_since[process] = Some(now);
                    }
                    self.last[process] = status;
                    break;
                }
            }
        }
        self.last.iter().map(|s| s.next).min().unwrap_or(u64::MAX)
    }

    /// Runs the simulated time up to `until`, calling `at_each` after each
    /// step; `at_each` may move the fleet on itself, to the time it
    /// returns, where the next step is made.
    fn run(
        &mut self,
        mut now: u64,
        until: u64,
        mut at_each: impl FnMut(&mut Fleet, u64) -> Option<u64>,
    ) -> u64 {
        while now < until {
            let next = self.step(now);
            now = match at_each(self, now) {
                Some(moved) => moved,
                None => (now + TICK).max(next).min(until),
            };
        }
        now
    }

    /// When the outage began: the first time a process saw it (the one
    /// that declared it saw it at once).
    fn began(&self) -> u64 {
        self.learned
            .iter()
            .flatten()
            .copied()
            .min()
            .expect("an outage was declared")
    }
}

/// The ladder's step (1 s doubling to 4 s) of `elapsed` nanoseconds.
fn ladder_step(elapsed: u64) -> u64 {
    outage::ladder_step(Duration::from_nanos(elapsed))
}

/// The most attempts in one step of the ladder, over `attempts` during
/// the outage, grouped by `by`.
fn most_per_step(attempts: &[&Attempt], began: u64, by: impl Fn(&Attempt) -> usize) -> usize {
    let mut per: HashMap<(usize, u64), usize> = HashMap::new();
    for a in attempts {
        *per.entry((by(a), ladder_step(a.at - began))).or_default() += 1;
    }
    per.values().copied().max().unwrap_or(0)
}

/// Attempts per step of the ladder, for a failure's message.
fn steps(attempts: &[&Attempt], began: u64) -> BTreeMap<u64, Vec<(usize, u64)>> {
    let mut per: BTreeMap<u64, Vec<(usize, u64)>> = BTreeMap::new();
    for a in attempts {
        per.entry(ladder_step(a.at - began))
            .or_default()
            .push((a.process, a.at - began));
    }
    per
}

/// The most of `times` (nanoseconds) within any one second.
fn most_per_second(times: Vec<u64>) -> usize {
    outage::most_within(times, SECOND)
}

/// The attempts of the keys `of` picks during the outage that began at
/// `began`: until the dependency's return, and after it the probes that
/// end the outage.
struct During<'a> {
    all: Vec<&'a Attempt>,
    /// Those made once their process knew of the outage.
    informed: Vec<&'a Attempt>,
    /// How many were made before their process knew of it.
    strays: usize,
    /// The most of `informed` in one step of the ladder, across the fleet.
    per_step: usize,
    /// The latest of the strays, after the outage began (ns).
    late: u64,
}

impl<'a> During<'a> {
    fn of(attempts: &'a [Attempt], began: u64, of: impl Fn(&Attempt) -> bool) -> Self {
        let all: Vec<&Attempt> = attempts
            .iter()
            .filter(|a| of(a) && a.at >= began && (a.at < DOWN.1 || a.informed))
            .collect();
        let (informed, strays): (Vec<&Attempt>, Vec<&Attempt>) =
            all.iter().partition(|a| a.informed);
        let late = strays.iter().map(|a| a.at - began).max().unwrap_or(0);
        let per_step = most_per_step(&informed, began, |_| 0);
        During {
            strays: strays.len(),
            all,
            informed,
            per_step,
            late,
        }
    }

    /// The outage's bounds: at most `probes` attempts in a step of the
    /// ladder across the fleet once each process knew of it, and none
    /// made later than the phase's refresh after it began by a process
    /// that did not know.
    fn bounded(&self, began: u64) {
        assert!(
            self.per_step <= child::PROBES,
            "{} attempts in a step: {:?}",
            self.per_step,
            steps(&self.informed, began)
        );
        assert!(
            self.late <= REFRESH + TICK,
            "an attempt {} ns after the outage began",
            self.late
        );
    }
}

/// The recovery's bounds: at most `release_rate` keys let go in any second
/// (`per_second`, the most seen), and every key's first success within
/// 15 s of the dependency's return (`latest`, the latest seen).
fn recovered(per_second: usize, latest: u64) {
    assert!(
        per_second <= child::RELEASE_RATE,
        "{per_second} keys let go in a second"
    );
    assert!(
        latest <= 15 * SECOND,
        "a first success {latest} ns after the return"
    );
}

/// When the keys of `attempts` (those `of` picks) were let go after the
/// outage: their attempts after the dependency's return by a process
/// that no longer saw the outage (the probes that ended it are the
/// outage's, counted in its steps).
fn released(attempts: &[Attempt], of: impl Fn(&Attempt) -> bool) -> Vec<u64> {
    attempts
        .iter()
        .filter(|a| a.at >= DOWN.1 && !a.informed && of(a))
        .map(|a| a.at)
        .collect()
}

/// The latest first success of any key after the dependency's return,
/// after it; panics if a key has none.
fn latest_first_success(attempts: &[Attempt], keys: impl Iterator<Item = (usize, usize)>) -> u64 {
    let mut first: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    for a in attempts.iter().filter(|a| a.ok && a.at >= DOWN.1) {
        first.entry((a.process, a.key)).or_insert(a.at);
    }
    keys.map(|k| {
        first
            .get(&k)
            .unwrap_or_else(|| panic!("key {k:?} never succeeded"))
            - DOWN.1
    })
    .max()
    .unwrap_or(0)
}

/// Kills `server` (once: `killed` is when) when the outage has gone on
/// 30 s by `now`.
fn kill_30_s_in(fleet: &Fleet, server: &mut Server, now: u64, killed: &mut Option<u64>) {
    let began = fleet.learned.iter().flatten().min().copied();
    if killed.is_none() && began.is_some_and(|b| now >= b + 30 * SECOND) {
        server.stop();
        *killed = Some(now);
    }
}

fn prefix(name: &str) -> String {
    format!("fleet-{name}-{:x}", rand::random::<u32>())
}

fn the_fleet_shares_one_outage() {
    let started = Instant::now();
    let server = Server::with_args(Vec::new());
    let mut fleet = Fleet::start(&server, &prefix("shares"), false);
    fleet.run(0, DOWN.1 + 30 * SECOND, |_, _| None);
    let began = fleet.began();
    // Redis answered every call: no process ever went on alone.
    assert_eq!(fleet.alone_since, [None; PROCESSES]);
    let outages: Vec<u64> = fleet.last.iter().map(|s| s.outages).collect();
    assert_eq!(outages, [1; PROCESSES], "one outage, seen by every process");
    assert!(
        (DOWN.0..DOWN.0 + 30 * SECOND).contains(&began),
        "began at {began}"
    );
    let during = During::of(&fleet.attempts, began, |_| true);
    let (probes, per_step, late) = (child::PROBES, during.per_step, during.late);
    let with_strays = most_per_step(&during.all, began, |_| 0);
    let per_second = most_per_second(released(&fleet.attempts, |_| true));
    let keys = (0..PROCESSES).flat_map(|p| (0..KEYS).map(move |k| (p, k)));
    let latest = latest_first_success(&fleet.attempts, keys);
    println!(
        "fleet: outage began {:.3} s after the dependency went down; at most {per_step} attempts per \
         ladder step across {PROCESSES} processes (probes {probes}), {} before a process learned of it \
         (the latest {:.3} s after it began; {with_strays} in a step counting them); at most {per_second} keys let go in a second of the \
         recovery (release rate {}); the latest first success {:.3} s after the return; {:.1} s of wall time",
        (began - DOWN.0) as f64 / 1e9,
        during.strays,
        late as f64 / 1e9,
        child::RELEASE_RATE,
        latest as f64 / 1e9,
        started.elapsed().as_secs_f64(),
    );
    during.bounded(began);
    recovered(per_second, latest);
}

fn redis_killed_during_the_outage() {
    let started = Instant::now();
    let mut server = Server::with_args(Vec::new());
    let mut fleet = Fleet::start(&server, &prefix("killed"), true);
    // Until the outage has gone on 30 s: then Redis dies.
    let mut killed_at = None;
    let now = fleet.run(0, DOWN.1, |fleet, now| {
        kill_30_s_in(fleet, &mut server, now, &mut killed_at);
        None
    });
    let killed = killed_at.expect("Redis was killed during the outage");
    fleet.run(now, DOWN.1 + 30 * SECOND, |_, _| None);
    let began = fleet.began();
    let probes = child::PROBES;
    // Each process went on alone, its keys still parked.
    for (p, since) in fleet.alone_since.iter().enumerate() {
        let since = since.unwrap_or_else(|| panic!("replica {p} never went on alone"));
        assert!(
            since >= killed,
            "replica {p} alone at {since}, before the kill"
        );
    }
    let after: Vec<&Attempt> = fleet
        .attempts
        .iter()
        .filter(|a| (killed..DOWN.1).contains(&a.at))
        .collect();
    assert!(
        after.iter().all(|a| a.informed),
        "an attempt by a process that forgot the outage"
    );
    let per_process = most_per_step(&after, began, |a| a.process);
    let across = most_per_step(&after, began, |_| 0);
    let mut per_second = 0;
    for p in 0..PROCESSES {
        let times = released(&fleet.attempts, |a| a.process == p);
        per_second = per_second.max(most_per_second(times));
    }
    let keys = (0..PROCESSES).flat_map(|p| (0..KEYS).map(move |k| (p, k)));
    let latest = latest_first_success(&fleet.attempts, keys);
    println!(
        "Redis killed {:.3} s into the outage: every process alone; at most {per_process} attempts per \
         ladder step in one process ({across} across them; probes {probes}) while the dependency was down; \
         at most {per_second} keys let go in a second of one process's recovery (release rate {}); the latest \
         first success {:.3} s after the return; {:.1} s of wall time",
        (killed - began) as f64 / 1e9,
        child::RELEASE_RATE,
        latest as f64 / 1e9,
        started.elapsed().as_secs_f64(),
    );
    assert!(
        per_process <= probes,
        "{per_process} attempts in a step of one process"
    );
    recovered(per_second, latest);
}
