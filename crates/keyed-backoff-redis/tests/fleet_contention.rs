//! Every key in flight at once, over round trips as long as between zones:
//! three replicas (this test binary run again as children), 300 keys
//! each, every key a task of its own started at once (as kube-runtime's
//! unbounded default concurrency runs them), in real time, on one
//! redis-server reached through a proxy that holds each direction's bytes
//! 1 ms. The dependency is down until the outage is declared and every
//! key is parked, then back.
//!
//! - No call of the gate fails (a `TimedOut` above all: a claim that
//!   cannot get its turn written is a claim the controller cannot make).
//! - No second of the release lets more than `release_rate` keys go
//!   across the fleet (the probes that found the dependency back counted
//!   apart, as `docs/outage.md` says).
//! - Every key's first success comes within 15 s of the return.
//!
//! Real time is needed here (a real Redis, real round trips): the waits
//! are the ones the gate gives, and the parent polls with deadlines.
//!
//! `cargo test -p keyed-backoff-redis --test fleet_contention -- --nocapture`

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keyed_backoff_redis::redis;
use keyed_backoff_testkit::outage;
use keyed_backoff_testkit::proxy::Proxy;
use keyed_backoff_testkit::redis_server::Server;

#[path = "fleet_contention/child.rs"]
mod child;
mod common;

/// This test's name: a child runs it again, alone.
const NAME: &str = "every_key_in_flight_over_slow_round_trips";
const PROCESSES: usize = 3;
const KEYS: usize = 300;
/// Each direction's delay: a round trip 2 ms longer than loopback's.
const DELAY: Duration = Duration::from_millis(1);
const SECOND: u64 = 1_000_000_000;
/// The bound on the latest first success after the dependency's return.
const RECOVERY: u64 = 15 * SECOND;
/// A replica silent this long (it reports every 50 ms) is blocked.
const SILENT: Duration = Duration::from_secs(5);

/// A child process, killed and reaped when dropped.
struct Replica {
    child: Child,
    stdin: ChildStdin,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child's latest status line.
#[derive(Debug, Clone, Copy, Default)]
struct Status {
    in_outage: bool,
    parked: u64,
    outages: u64,
    succeeded: usize,
}

/// One attempt that reached the dependency.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    process: usize,
    key: usize,
    /// The earliest time the gate can have let it go (and given it its
    /// time in the release), and when the claim that let it go answered.
    earliest: u64,
    received: u64,
    ok: bool,
    informed: bool,
}

/// What a child said at the end.
#[derive(Debug, Default)]
struct Report {
    attempts: Vec<Attempt>,
    /// `(operation, kind)`: how many, and the first one's text.
    errors: BTreeMap<(String, String), (u64, String)>,
    trips: u64,
    calls: u64,
    /// Status samples (every 50 ms) at which a replica was alone.
    alone: u64,
    ended: usize,
}

struct Fleet {
    replicas: Vec<Replica>,
    lines: mpsc::Receiver<(usize, String)>,
    status: Vec<Status>,
    report: Report,
    /// Which replicas said all they saw.
    ended: Vec<bool>,
    /// When each replica's latest status came.
    heard: Vec<Option<Instant>>,
    started: Instant,
}

impl Fleet {
    fn start(url: &str, prefix: &str) -> Fleet {
        let exe = std::env::current_exe().expect("the test binary");
        let (tx, lines) = mpsc::channel();
        let replicas = (0..PROCESSES)
            .map(|index| {
                let setup = child::Setup {
                    index,
                    url: url.to_string(),
                    prefix: prefix.to_string(),
                    keys: KEYS,
                };
                let (var, value) = setup.env();
                let mut child = Command::new(&exe)
                    .args([NAME, "--exact", "--nocapture"])
                    .env(var, value)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .expect("a child process");
                let stdin = child.stdin.take().expect("stdin");
                let stdout = BufReader::new(child.stdout.take().expect("stdout"));
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for line in stdout.lines() {
                        let Ok(line) = line else { break };
                        if line.starts_with('@') && tx.send((index, line)).is_err() {
                            break;
                        }
                    }
                    let _ = tx.send((index, "@EOF".to_string()));
                });
                Replica { child, stdin }
            })
            .collect();
        Fleet {
            replicas,
            lines,
            status: vec![Status::default(); PROCESSES],
            report: Report::default(),
            ended: vec![false; PROCESSES],
            heard: vec![None; PROCESSES],
            started: Instant::now(),
        }
    }

    fn tell(&mut self, line: &str) {
        for r in &mut self.replicas {
            // A child that exited is seen by its reader.
            let _ = writeln!(r.stdin, "{line}").and_then(|()| r.stdin.flush());
        }
    }

    /// Reads the children's lines until `done` holds or `limit` passes;
    /// whether it held. Panics when a replica that has not ended sends no
    /// status for [`SILENT`]: its runtime is blocked.
    fn until(&mut self, limit: Duration, done: impl Fn(&Fleet) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while !done(self) {
            let now = Instant::now();
            for (p, heard) in self.heard.iter().enumerate() {
                // Before its first status, the time it takes to start.
                let (since, most) = match heard {
                    Some(heard) => (*heard, SILENT),
                    None => (self.started, SILENT * 4),
                };
                let silent = now.saturating_duration_since(since);
                assert!(
                    self.ended[p] || silent < most,
                    "replica {p} sent no status for {silent:?}: its runtime is blocked"
                );
            }
            if now >= deadline {
                return false;
            }
            let left = (deadline - now).min(Duration::from_millis(500));
            if let Ok((process, line)) = self.lines.recv_timeout(left) {
                self.read(process, &line);
            }
        }
        true
    }

    fn read(&mut self, process: usize, line: &str) {
        let w: Vec<&str> = line.split(' ').collect();
        let n = |i: usize| w[i].parse::<u64>().expect("a number");
        match w[0] {
            "@S" => {
                self.heard[process] = Some(Instant::now());
                self.status[process] = Status {
                    in_outage: n(1) == 1,
                    parked: n(3),
                    outages: n(4),
                    succeeded: n(5) as usize,
                };
            }
            "@A" => self.report.attempts.push(Attempt {
                process,
                key: n(1) as usize,
                earliest: n(2),
                received: n(3),
                ok: n(4) == 1,
                informed: n(5) == 1,
            }),
            "@E" => {
                let slot = self
                    .report
                    .errors
                    .entry((w[1].to_string(), w[2].to_string()))
                    .or_insert_with(|| (0, w[4..].join(" ")));
                slot.0 += n(3);
            }
            "@T" => {
                self.report.trips += n(1);
                self.report.calls += n(2);
                self.report.alone += n(3);
            }
            "@END" => {
                self.ended[process] = true;
                self.report.ended += 1;
            }
            "@EOF" => assert!(self.ended[process], "replica {process} exited early"),
            _ => panic!("a line from replica {process}: {line}"),
        }
    }
}

/// The most of `times` (nanoseconds) within any one second.
fn most_per_second(times: Vec<u64>) -> usize {
    outage::most_within(times, SECOND)
}

/// The most keys let go that certainly fell within one second: the gate
/// let each go, and gave it its time in the release, between the earliest
/// time recorded with it and the answer of the claim that let it go, so a
/// second holding every one of those spans held at least that many.
/// (Counting the answers alone, the claims' round trips and the runtime's
/// scheduling, a few milliseconds, could move keys given times just past
/// a second into its count.)
fn most_certainly_per_second(attempts: &[&Attempt]) -> usize {
    attempts
        .iter()
        .map(|first| {
            let end = first.earliest + SECOND;
            attempts
                .iter()
                .filter(|a| a.earliest >= first.earliest && a.received < end)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The median round trip of a `PING` through `url`, in microseconds.
fn ping_us(url: &str) -> u64 {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("a connection through the proxy");
    let mut rtts: Vec<u64> = (0..21)
        .map(|_| {
            let sent = Instant::now();
            let pong: String = redis::cmd("PING").query(&mut conn).expect("PING");
            assert_eq!(pong, "PONG");
            sent.elapsed().as_micros() as u64
        })
        .collect();
    rtts.sort_unstable();
    rtts[rtts.len() / 2]
}

#[test]
fn every_key_in_flight_over_slow_round_trips() {
    if let Some(setup) = child::Setup::from_env() {
        child::run(setup);
        return;
    }
    let started = Instant::now();
    let server = Server::with_args(Vec::new());
    let target = SocketAddr::from((Ipv4Addr::LOCALHOST, server.port()));
    let proxy = Proxy::start(target, DELAY);
    let url = format!("redis://127.0.0.1:{}/", proxy.port());
    let loopback_us = ping_us(&server.url);
    let proxied_us = ping_us(&url);
    let prefix = format!("fleet-contention-{:x}", rand::random::<u32>());
    let mut fleet = Fleet::start(&url, &prefix);
    let all = PROCESSES * KEYS;
    let total = all as u64;

    // The dependency is down: the first runs fail, an outage is declared
    // and every key is parked.
    let parked = fleet.until(Duration::from_secs(20), |f| {
        let parked = f.status.iter().map(|s| s.parked).max().unwrap_or(0);
        f.status.iter().all(|s| s.in_outage) && parked >= total
    });
    let parked_after = started.elapsed();
    let most_parked = fleet.status.iter().map(|s| s.parked).max().unwrap_or(0);
    let outages: Vec<u64> = fleet.status.iter().map(|s| s.outages).collect();

    // The dependency is back.
    let up_at = child::epoch_ns();
    fleet.tell(&format!("UP {up_at}"));
    let back = Instant::now();
    fleet.until(Duration::from_nanos(RECOVERY + 5 * SECOND), |f| {
        f.status.iter().map(|s| s.succeeded).sum::<usize>() >= all
    });
    fleet.tell("Q");
    let reported = fleet.until(Duration::from_secs(10), |f| f.report.ended == PROCESSES);
    assert!(reported, "the replicas did not report");
    let recovery_wall = back.elapsed();
    let connections = proxy.connections();
    let report = std::mem::take(&mut fleet.report);
    // The children gone, then the proxy, then the server.
    drop(fleet);
    drop(proxy);
    drop(server);

    let failed: u64 = report.errors.values().map(|(n, _)| n).sum();
    let timed_out: u64 = report
        .errors
        .iter()
        .filter(|((_, kind), _)| kind.starts_with("TimedOut"))
        .map(|(_, (n, _))| n)
        .sum();
    let claims_failed: u64 = report
        .errors
        .iter()
        .filter(|((op, _), _)| op == "claim")
        .map(|(_, (n, _))| n)
        .sum();
    // The release: keys let go after the return by a replica that no
    // longer saw the outage; the probes that ended it are the outage's.
    let after: Vec<&Attempt> = report
        .attempts
        .iter()
        .filter(|a| a.received >= up_at)
        .collect();
    let released: Vec<&Attempt> = after.iter().copied().filter(|a| !a.informed).collect();
    let probes = after.len() - released.len();
    let per_second = most_per_second(released.iter().map(|a| a.received).collect());
    let certainly = most_certainly_per_second(&released);
    let mut first: HashMap<(usize, usize), u64> = HashMap::new();
    for a in after.iter().filter(|a| a.ok) {
        let at = first.entry((a.process, a.key)).or_insert(a.received);
        *at = (*at).min(a.received);
    }
    let never = all - first.len();
    let latest = first.values().map(|t| t - up_at).max().unwrap_or(0);
    let during = report.attempts.len() - after.len();
    // Keys let go in each half second after the return, for the message.
    let mut halves: Vec<usize> = Vec::new();
    for a in &released {
        let half = ((a.received - up_at) / (SECOND / 2)) as usize;
        halves.resize(halves.len().max(half + 1), 0);
        halves[half] += 1;
    }
    println!(
        "contention: {PROCESSES} processes x {KEYS} keys, every key in flight; a PING's round \
         trip {:.2} ms through the proxy ({:.2} ms on loopback), {connections} connections \
         through it; outage declared ({outages:?} seen per process) and {most_parked} of \
         {total} keys parked {:.1} s in{}; {during} attempts while the dependency was down; \
         {} gate calls, {} round trips ({:.2} a call); {failed} calls failed, {claims_failed} \
         of them claims, {timed_out} with TimedOut: {:?}; a replica alone at {} status samples \
         (every 50 ms); after the return: {probes} probes, {} keys let go, at most \
         {per_second} in a second by their answers, {certainly} certainly within one (release \
         rate {}), by half second {halves:?}; the latest first success {:.3} s after the \
         return, {never} keys without one; recovery {:.1} s and {:.1} s in all of wall time",
        proxied_us as f64 / 1e3,
        loopback_us as f64 / 1e3,
        parked_after.as_secs_f64(),
        if parked {
            ""
        } else {
            " (not all by the deadline)"
        },
        report.calls,
        report.trips,
        report.trips as f64 / report.calls.max(1) as f64,
        report.errors,
        report.alone,
        released.len(),
        child::RELEASE_RATE,
        latest as f64 / 1e9,
        recovery_wall.as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    assert!(connections >= PROCESSES, "the replicas bypassed the proxy");
    assert_eq!(failed, 0, "calls of the gate failed: {:?}", report.errors);
    assert!(parked, "only {most_parked} of {total} keys were parked");
    assert!(
        certainly <= child::RELEASE_RATE,
        "{certainly} keys let go within one second"
    );
    assert_eq!(never, 0, "{never} keys never succeeded after the return");
    assert!(
        latest <= RECOVERY,
        "a first success {latest} ns after the return"
    );
}
