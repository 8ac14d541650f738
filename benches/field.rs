//! The crate against the field's baselines, with the keys, picks and
//! workloads of the client-go program in `benches/clientgo` (see
//! `benches/field.sh`, which runs both and prints the ratios).
//!
//! `cargo bench -p keyed-backoff-benches --bench field` times, per key count
//! (1,000 and 100,000) and workload (`next`; 90 % `is_in_backoff_since_update`
//! and every tenth call `next`; `is_in_backoff_since_update`), on one thread
//! and on two, interleaved round by round:
//!
//! - the crate as a user gets it: `Backoff::<String>::new(10 s, 300 s)`
//!   (the `StdClock`, no capacity hint, default shards);
//! - client-go's semantics ported plainly: `std::sync::RwLock<HashMap>`
//!   with the standard hasher and `Instant`s in the entries;
//! - the same port on `parking_lot` and foldhash with the crate's time
//!   representation (the "tuned port" of the other benches);
//! - governor's keyed limiter, `check_key` (on `next`, the other write).
//!
//! Each measurement is a run of about 0.4 s; one thread's is timed by its
//! CPU time, several threads' by the wall clock. `ROUNDS` rounds (default 5),
//! medians reported as `RESULT <target> <workload> <keys> <threads> <ns/op>`.
//! Arguments `<keys> <workload>` run that one pair only; `TARGETS` (a comma
//! list, see [`TARGETS`]) and `THREADS` (a comma list) choose the rest;
//! `RAW=1` also prints every round's time.
//!
//! `cargo bench -p keyed-backoff-benches --bench field -- gc` instead times
//! the default GC: 1,000,000 entries, half expired, no capacity hint,
//! `gc()` against the floor's `HashMap::retain` over the same keys
//! (`GC_ROUNDS`, default 5), then reader and writer latency during
//! continuous GC (`GC_SECONDS` each, default 2).

mod common;
#[path = "field/gc.rs"]
mod gc;
#[path = "field/inputs.rs"]
mod inputs;
#[path = "field/port.rs"]
mod port;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use common::{DashFloor, RwLockPort as TunedPort, median};
use cpu_time::ThreadTime;
use governor::{Quota, RateLimiter};
use inputs::{PICKS, fingerprint, kubelet_keys, pick_order};
use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, MockClock, QuantaClock, StdClock};
use port::PlainPort;

const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);
const RUN_FOR: Duration = Duration::from_millis(400);
const CHUNK: usize = 1024;

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    Next,
    Mix,
    Read,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Next, Workload::Mix, Workload::Read];
    fn name(self) -> &'static str {
        match self {
            Workload::Next => "next",
            Workload::Mix => "mix",
            Workload::Read => "read",
        }
    }
}

/// One target's two operations, as the workloads call them. Keys come as
/// `&String` because governor's `check_key` takes the key type itself.
#[allow(clippy::ptr_arg)]
trait Target: Sync {
    fn next(&self, key: &String);
    fn check(&self, key: &String) -> bool;
}

/// The crate with any clock: the event time is the clock's now, read by the
/// caller (for the `StdClock`, `Instant::now()`).
impl<C: Clock> Target for Backoff<String, C> {
    #[inline]
    fn next(&self, key: &String) {
        black_box(Backoff::next(self, key.as_str(), self.clock().now()));
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.is_in_backoff_since_update(key.as_str(), self.clock().now())
    }
}

/// The crate called with one clock read per `next`: `next_now`, which
/// reads the clock under the key's lock and takes it as the event time too.
struct NextNow(Backoff<String>);

impl Target for NextNow {
    #[inline]
    fn next(&self, key: &String) {
        black_box(self.0.next_now(key.as_str()));
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.0
            .is_in_backoff_since_update(key.as_str(), Instant::now())
    }
}

impl Target for DashFloor<StdClock> {
    #[inline]
    fn next(&self, key: &String) {
        black_box(DashFloor::next(self, key, Instant::now()));
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.is_in_backoff_since_update(key, Instant::now())
    }
}

impl Target for PlainPort {
    #[inline]
    fn next(&self, key: &String) {
        black_box(PlainPort::next(self, key, Instant::now()));
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.is_in_backoff_since_update(key, Instant::now())
    }
}

impl Target for TunedPort<StdClock> {
    #[inline]
    fn next(&self, key: &String) {
        black_box(TunedPort::next(self, key, Instant::now()));
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.is_in_backoff_since_update(key, Instant::now())
    }
}

type Keyed = governor::DefaultKeyedRateLimiter<String>;

impl Target for Keyed {
    #[inline]
    fn next(&self, key: &String) {
        black_box(self.check_key(key).is_ok());
    }
    #[inline]
    fn check(&self, key: &String) -> bool {
        self.check_key(key).is_ok()
    }
}

/// Calls `workload` from position `from` of the pick order until `RUN_FOR`
/// has passed; the calls made, the wall time and this thread's CPU time.
#[inline(never)]
fn run<T: Target>(
    t: &T,
    keys: &[String],
    order: &[u32],
    w: Workload,
    from: usize,
) -> (usize, Duration, Duration) {
    let cpu = ThreadTime::now();
    let start = Instant::now();
    let (mut ops, mut hits) = (0usize, 0usize);
    loop {
        for j in 0..CHUNK {
            let i = from + ops + j;
            let key = &keys[order[i % PICKS] as usize];
            match w {
                Workload::Next => t.next(key),
                Workload::Mix if i.is_multiple_of(10) => t.next(key),
                Workload::Mix | Workload::Read => hits += usize::from(t.check(key)),
            }
        }
        ops += CHUNK;
        let took = start.elapsed();
        if took >= RUN_FOR {
            black_box(hits);
            return (ops, took, cpu.elapsed());
        }
    }
}

/// Nanoseconds per call of `w` on `threads` threads at once: on one thread,
/// the thread's CPU time per call (time the scheduler gave to other
/// processes on a shared machine is not counted; `FIELD_CLOCK=wall` counts
/// it); on several, the wall time over all their calls (combined
/// throughput).
fn timed<T: Target>(t: &T, keys: &[String], order: &[u32], w: Workload, threads: usize) -> f64 {
    let runs: Vec<(usize, Duration, Duration)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|th| s.spawn(move || run(t, keys, order, w, th * 7919)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let ops: usize = runs.iter().map(|r| r.0).sum();
    let took = if threads == 1 && std::env::var("FIELD_CLOCK").map_or(true, |c| c != "wall") {
        runs[0].2
    } else {
        runs.iter().map(|r| r.1).max().expect("a run")
    };
    took.as_nanos() as f64 / ops as f64
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn crate_default() -> Backoff<String> {
    Backoff::<String>::new(INITIAL, MAX).expect("valid settings")
}

fn governor() -> Keyed {
    let quota = Quota::per_second(NonZeroU32::new(1_000_000).expect("non-zero"));
    RateLimiter::keyed(quota)
}

/// The targets by name, each timed by `sample` on a fresh, populated
/// instance. The first four are the report's; the rest take the crate's
/// cost apart for diagnosis (`TARGETS=crate,crate-mock,... field ...`).
const TARGETS: [&str; 13] = [
    "crate",
    "rwlock-port",
    "tuned-port",
    "governor",
    "crate-mock",
    "crate-quanta",
    "crate-s8",
    "crate-s64",
    "crate-cap",
    "dash-floor",
    "dash-floor-s8",
    "crate-mock-s8",
    "crate-next-now",
];

/// What is done with a target: generic, so that every target's calls are
/// direct and inlined into the loop, as the Go program's are.
trait Visit {
    type Out;
    fn visit<T: Target>(&mut self, t: &T) -> Self::Out;
}

/// `f.visit(target)` on the target `name`, made and populated with `keys`
/// (`next` on each, as the Go program starts each round).
fn with_target<V: Visit>(name: &str, keys: &[String], f: &mut V) -> V::Out {
    fn go<T: Target, V: Visit>(t: T, keys: &[String], f: &mut V) -> V::Out {
        for k in keys {
            t.next(k);
        }
        f.visit(&t)
    }
    let n = keys.len();
    let crate_with = |shards: Option<usize>, capacity: usize| {
        let b = Backoff::<String>::builder(INITIAL, MAX).capacity(capacity);
        match shards {
            Some(s) => b.shards(s),
            None => b,
        }
        .build()
        .expect("valid settings")
    };
    let mock = |shards: usize| {
        Backoff::<String>::builder(INITIAL, MAX)
            .clock(MockClock::new())
            .shards(shards)
            .build()
            .expect("valid settings")
    };
    match name {
        "crate" => go(crate_default(), keys, f),
        "crate-next-now" => go(NextNow(crate_default()), keys, f),
        "rwlock-port" => go(PlainPort::new(INITIAL, MAX), keys, f),
        "tuned-port" => go(TunedPort::new(INITIAL, MAX, StdClock), keys, f),
        "governor" => go(governor(), keys, f),
        "crate-mock" => go(mock(1024), keys, f),
        "crate-mock-s8" => go(mock(8), keys, f),
        "crate-quanta" => go(
            Backoff::<String>::builder(INITIAL, MAX)
                .clock(QuantaClock)
                .build()
                .expect("valid settings"),
            keys,
            f,
        ),
        "crate-s8" => go(crate_with(Some(8), 0), keys, f),
        "crate-s64" => go(crate_with(Some(64), 0), keys, f),
        "crate-cap" => go(crate_with(None, n), keys, f),
        "dash-floor" => go(DashFloor::new(INITIAL, MAX, StdClock, 1024), keys, f),
        "dash-floor-s8" => go(DashFloor::new(INITIAL, MAX, StdClock, 8), keys, f),
        other => panic!("no target {other}; one of {TARGETS:?}"),
    }
}

/// `THREADS` (a comma list), by default one thread and two.
fn thread_counts() -> Vec<usize> {
    std::env::var("THREADS").map_or(vec![1, 2], |list| {
        list.split(',')
            .map(|t| t.parse().expect("THREADS: a comma list of counts"))
            .collect()
    })
}

fn field(only: Option<(usize, &str)>) {
    let rounds = env("ROUNDS", 5);
    let chosen = std::env::var("TARGETS").unwrap_or_else(|_| TARGETS[..4].join(","));
    let chosen: Vec<&str> = chosen.split(',').collect();
    let sizes = only.map_or(vec![1_000, 100_000], |(n, _)| vec![n]);
    for n in sizes {
        let (keys, order) = (kubelet_keys(n), pick_order(n));
        println!(
            "KEYS {n} {} {:016x}",
            keys[0].len(),
            fingerprint(&keys, &order)
        );
        for w in Workload::ALL {
            if only.is_some_and(|(_, name)| name != w.name()) {
                continue;
            }
            for threads in thread_counts() {
                let mut samples = vec![Vec::new(); chosen.len()];
                for _ in 0..rounds {
                    for (name, s) in chosen.iter().zip(&mut samples) {
                        // governor's keyed check is a write: timed on `next`.
                        if *name != "governor" || w == Workload::Next {
                            let mut timing = Timing {
                                keys: &keys,
                                order: &order,
                                w,
                                threads,
                            };
                            s.push(with_target(name, &keys, &mut timing));
                        }
                    }
                }
                if std::env::var_os("RAW").is_some() {
                    for (name, s) in chosen.iter().zip(&samples) {
                        println!("SAMPLES {name} {} {n} {threads} {s:.2?}", w.name());
                    }
                }
                for (name, s) in chosen.iter().zip(samples) {
                    if !s.is_empty() {
                        println!("RESULT {name} {} {n} {threads} {:.2}", w.name(), median(s));
                    }
                }
            }
        }
    }
}

/// `ops` calls of `w` on one target after populating it, untimed: for
/// `valgrind --tool=callgrind`, run with `ops` and `2·ops` and subtract.
fn count(name: &str, w: Workload, n: usize, ops: usize) {
    struct Counting<'a> {
        keys: &'a [String],
        order: &'a [u32],
        w: Workload,
        ops: usize,
    }
    impl Visit for Counting<'_> {
        type Out = ();
        fn visit<T: Target>(&mut self, t: &T) {
            let mut hits = 0usize;
            for i in 0..self.ops {
                let key = &self.keys[self.order[i % PICKS] as usize];
                match self.w {
                    Workload::Next => t.next(key),
                    Workload::Mix if i.is_multiple_of(10) => t.next(key),
                    Workload::Mix | Workload::Read => hits += usize::from(t.check(key)),
                }
            }
            black_box(hits);
        }
    }
    let (keys, order) = (kubelet_keys(n), pick_order(n));
    let mut counting = Counting {
        keys: &keys,
        order: &order,
        w,
        ops,
    };
    with_target(name, &keys, &mut counting);
}

/// Times one workload on a target: [`timed`] as a [`Visit`].
struct Timing<'a> {
    keys: &'a [String],
    order: &'a [u32],
    w: Workload,
    threads: usize,
}

impl Visit for Timing<'_> {
    type Out = f64;
    fn visit<T: Target>(&mut self, t: &T) -> f64 {
        timed(t, self.keys, self.order, self.w, self.threads)
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    match args.as_slice() {
        [gc_arg] if gc_arg == "gc" => gc::gc(),
        [n, workload] => field(Some((n.parse().expect("<keys> <workload>"), workload))),
        [c, target, workload, n, ops] if c == "count" => {
            let w = Workload::ALL
                .into_iter()
                .find(|w| w.name() == workload)
                .expect("workload: next, mix or read");
            count(
                target,
                w,
                n.parse().expect("keys"),
                ops.parse().expect("ops"),
            );
        }
        _ => field(None),
    }
}
