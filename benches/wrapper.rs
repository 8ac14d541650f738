//! What outage awareness costs while no outage is under way: the keyed
//! manager alone against [`OutageAware`] over it, through the [`Gate`]
//! contract, at 1,000 keys on a mock clock, on one thread and on two.
//! And the manager's own methods against its `Gate` calls, to show that
//! the contract adds nothing.
//!
//! `cargo bench -p keyed-backoff-benches --bench wrapper` (defaults: 15
//! rounds; `ROUNDS=n` overrides). Each round runs every target of a table
//! once, a different one first each round; a ratio is the median over
//! rounds of the round's own ratio.
//!
//! - **fail, continuing**: `Gate::fail` of keys whose ladders go on. The
//!   managers start at a zero backoff, so every failure is counted (the
//!   key's backoff has passed: the gate's check, the advance, the write)
//!   while the clock stands still within a round; none starts a ladder.
//! - **fail, 1 in 4 fresh**: the same, but every fourth failure follows a
//!   success of its key (`Gate::succeed`, timed too), so it starts the
//!   key's ladder again: the outage detector hears of it under its lock.
//!   One outcome in five is a success, more than the one in ten that an
//!   outage allows, so none is declared (checked). The failures' clock
//!   moves on by more than the detection window before each round, so
//!   that the fresh failures of a round are not weighed against the
//!   millions of failures (and no success) of the rounds before: with the
//!   clock standing still, that would be an outage, and rightly.
//! - **wait** and **claim**: the check before running a key, half of the
//!   keys in backoff and half free.
//! - **`fail_in`**: the failure rows again through `Gate::fail_in`, each
//!   key in one of eight domains (a dependency the failure names), against
//!   the wrapper's `Gate::fail` (one domain, the outage of everything).
//!
//! On two threads each thread has its own half of the keys.

mod common;

use std::future::Future;
use std::time::Duration;

use common::rounds::{Row, env, per_call, report, two_threads};
use common::{kubelet_keys, visit_order};
use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, Gate};
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};

const KEYS: usize = 1_000;
const MAX: Duration = Duration::from_secs(300);

type Bare = Backoff<String, MockClock>;
type Wrapped = OutageAware<Bare, InProcess<MockClock>>;

/// The output of a future that is ready at once, as every call of the
/// in-process manager and of the wrapper over it is.
#[inline]
fn ready<F: Future>(f: F) -> F::Output {
    keyed_backoff::__private::now(f).expect("the in-process manager is always ready")
}

fn manager(initial: Duration, clock: &MockClock) -> Bare {
    Backoff::<String>::builder(initial, MAX)
        .clock(clock.clone())
        .capacity(KEYS)
        .build()
        .expect("valid")
}

/// `inner` wrapped with the default settings: detection on.
fn wrapped(inner: Bare, clock: &MockClock) -> Wrapped {
    OutageAware::with_clock(inner, OutageSettings::new().seed(1), clock.clone()).expect("valid")
}

/// `Gate::fail`'s answer as a number, so no call is optimised away.
fn failed<G: Gate<String>>(gate: &G, key: &String) -> u64 {
    match ready(gate.fail(key)) {
        Ok(Ok(level)) => u64::from(level.attempts),
        Ok(Err(refused)) => refused.remaining.as_nanos() as u64,
        Err(_) => u64::MAX,
    }
}

/// The domains failures name: a key's is fixed by its last byte.
const DOMAINS: [&str; 8] = [
    "eu-west", "eu-north", "us-east", "us-west", "ap-south", "ap-east", "webhook", "registry",
];

fn domain(key: &str) -> &'static str {
    DOMAINS[usize::from(key.as_bytes().last().copied().unwrap_or(0)) % DOMAINS.len()]
}

/// `Gate::fail_in`'s answer as a number, the key's domain named.
fn failed_in<G: Gate<String>>(gate: &G, key: &String) -> u64 {
    match ready(gate.fail_in(key, domain(key))) {
        Ok(Ok(level)) => u64::from(level.attempts),
        Ok(Err(refused)) => refused.remaining.as_nanos() as u64,
        Err(_) => u64::MAX,
    }
}

/// [`failed_some_fresh`], the failures and successes naming the key's
/// domain (as a middleware keyed by host names both).
fn failed_in_some_fresh<G: Gate<String>>(gate: &G, i: usize, key: &String) -> u64 {
    if i.is_multiple_of(4) {
        let _ = ready(gate.succeed_in(key, domain(key)));
    }
    failed_in(gate, key)
}

/// A failure, every fourth (by its number `i`) after a success of its
/// key: that one starts the key's ladder again.
fn failed_some_fresh<G: Gate<String>>(gate: &G, i: usize, key: &String) -> u64 {
    if i.is_multiple_of(4) {
        let _ = ready(gate.succeed(key));
    }
    failed(gate, key)
}

fn waited<G: Gate<String>>(gate: &G, key: &String) -> u64 {
    ready(gate.wait(key)).map_or(u64::MAX, |w| w.map_or(0, |d| d.as_nanos() as u64))
}

fn claimed<G: Gate<String>>(gate: &G, key: &String) -> u64 {
    ready(gate.claim(key)).map_or(u64::MAX, |w| w.map_or(0, |d| d.as_nanos() as u64))
}

/// The manager's own gate, as `Gate::fail` calls it.
fn bare_try_next_now(bare: &Bare, key: &str) -> u64 {
    let next = bare.try_next_now(key);
    next.map_or(1, |d| d.as_nanos() as u64)
}

/// The manager's own wait, as `Gate::wait` calls it.
fn bare_remaining(bare: &Bare, key: &str) -> u64 {
    let wait = bare.remaining(key, bare.clock().now());
    wait.map_or(0, |d| d.as_nanos() as u64)
}

/// How a table's targets are timed: on one thread over every key, or on
/// two, each over its own half.
#[derive(Clone, Copy)]
enum Threads<'a> {
    One(&'a [&'a String]),
    Two([&'a [&'a String]; 2]),
}

impl Threads<'_> {
    fn time(self, op: impl Fn(usize, &String) -> u64 + Sync) -> f64 {
        match self {
            Threads::One(order) => per_call(order, op),
            Threads::Two(orders) => two_threads(orders, op),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Threads::One(_) => "one thread",
            Threads::Two(_) => "two threads (ns per call of combined throughput)",
        }
    }
}

/// A table's target: its name and one timing of it.
type Target<'a> = (&'static str, Box<dyn Fn() -> f64 + 'a>);

/// Times every target once a round, the first of each round in turn,
/// and prints each one's median and ratios to the `bases`.
fn table(title: &str, rounds: usize, targets: Vec<Target>, bases: &[usize]) {
    let mut rows: Vec<Row> = targets.iter().map(|(name, _)| Row::new(name)).collect();
    for round in 0..rounds {
        for t in (0..targets.len()).map(|t| (t + round) % targets.len()) {
            rows[t].rounds.push(targets[t].1());
        }
    }
    report(title, &rows, bases);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench` asks the harness for its list
    }
    let rounds = env("ROUNDS", 15);
    let keys = kubelet_keys(KEYS);
    let order: Vec<&String> = visit_order(KEYS, 1 << 16)
        .into_iter()
        .map(|i| &keys[i])
        .collect();
    // Each thread's half: keys 0, 1, 4, 5, … and 2, 3, 6, 7, …, so that
    // each has as many keys in backoff as free for the checks.
    let halves: [Vec<&String>; 2] = [0, 1].map(|th| {
        visit_order(KEYS / 2, 1 << 16)
            .into_iter()
            .map(|i| &keys[i / 2 * 4 + i % 2 + 2 * th])
            .collect()
    });
    let clock = MockClock::new();
    let failures_clock = MockClock::new();
    let past_the_window = || failures_clock.advance(Duration::from_secs(31));

    // Failures: a zero backoff, so that every failure is counted.
    // Checks: client-go's 10 s doubling; half of the keys failed 10 s ago
    // (free now), the other half just now (in backoff). Each wrapped
    // manager's keys start their ladders before it is wrapped: a thousand
    // keys newly failing with nothing succeeding is an outage.
    let initial = Duration::from_secs(10);
    let [bare_f, inner_f, inner_d] = [0; 3].map(|_| manager(Duration::ZERO, &failures_clock));
    let [bare_c, inner_c] = [0; 2].map(|_| manager(initial, &clock));
    for (i, k) in keys.iter().enumerate() {
        if i % 2 == 0 {
            failed(&bare_c, k);
            failed(&inner_c, k);
        }
    }
    clock.advance(initial);
    for (i, k) in keys.iter().enumerate() {
        failed(&bare_f, k);
        failed(&inner_f, k);
        failed(&inner_d, k);
        if i % 2 == 1 {
            failed(&bare_c, k);
            failed(&inner_c, k);
        }
    }
    let wrapped_f = wrapped(inner_f, &failures_clock);
    let wrapped_d = wrapped(inner_d, &failures_clock);
    let wrapped_c = wrapped(inner_c, &clock);
    assert_eq!(ready(bare_c.wait(&keys[0])), Ok(None));
    assert!(ready(bare_c.wait(&keys[1])).expect("ready").is_some());

    // `wrapper count <bare|wrapped> <fail|fresh|fail_in|fresh_in|wait|claim> <calls>` (or
    // `count bare <try_next_now|remaining> <calls>`): the calls alone,
    // untimed, for `valgrind --tool=callgrind` (the same count on a busy
    // machine as on an idle one).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, target, op, calls] = args.as_slice()
        && mode == "count"
    {
        let calls: usize = calls.parse().expect("calls: a count");
        let bare = target == "bare";
        let mut acc = 0u64;
        for (i, k) in order.iter().cycle().take(calls).enumerate() {
            acc = acc.wrapping_add(match (op.as_str(), bare) {
                ("fail", true) => failed(&bare_f, k),
                ("fail", false) => failed(&wrapped_f, k),
                ("fresh", true) => failed_some_fresh(&bare_f, i, k),
                ("fresh", false) => failed_some_fresh(&wrapped_f, i, k),
                ("fail_in", false) => failed_in(&wrapped_d, k),
                ("fresh_in", false) => failed_in_some_fresh(&wrapped_d, i, k),
                ("wait", true) => waited(&bare_c, k),
                ("wait", false) => waited(&wrapped_c, k),
                ("claim", true) => claimed(&bare_c, k),
                ("claim", false) => claimed(&wrapped_c, k),
                // The manager's own methods that its Gate calls are.
                ("try_next_now", true) => bare_try_next_now(&bare_f, k),
                ("remaining", true) => bare_remaining(&bare_c, k),
                _ => panic!("count <bare|wrapped> <fail|fresh|fail_in|fresh_in|wait|claim> <calls>, or count bare <try_next_now|remaining> <calls>"),
            });
        }
        std::hint::black_box(acc);
        assert!(!wrapped_f.in_outage());
        return;
    }

    for threads in [Threads::One(&order), Threads::Two([&halves[0], &halves[1]])] {
        let one = matches!(threads, Threads::One(_));
        let label = threads.label();
        // Every failure's timing starts past the detection window.
        let mut targets: Vec<Target> = vec![
            (
                "bare Gate::fail",
                Box::new(|| {
                    past_the_window();
                    threads.time(|_, k| failed(&bare_f, k))
                }),
            ),
            (
                "OutageAware",
                Box::new(|| {
                    past_the_window();
                    threads.time(|_, k| failed(&wrapped_f, k))
                }),
            ),
        ];
        targets.push((
            "OutageAware fail_in, 8 domains",
            Box::new(|| {
                past_the_window();
                threads.time(|_, k| failed_in(&wrapped_d, k))
            }),
        ));
        if one {
            targets.push((
                "bare try_next_now",
                Box::new(|| {
                    past_the_window();
                    threads.time(|_, k| bare_try_next_now(&bare_f, k))
                }),
            ));
        }
        table(
            &format!("fail, continuing, {label}"),
            rounds,
            targets,
            &[0, 1],
        );

        let targets: Vec<Target> = vec![
            (
                "bare",
                Box::new(|| {
                    past_the_window();
                    threads.time(|i, k| failed_some_fresh(&bare_f, i, k))
                }),
            ),
            (
                "OutageAware",
                Box::new(|| {
                    past_the_window();
                    threads.time(|i, k| failed_some_fresh(&wrapped_f, i, k))
                }),
            ),
            (
                "OutageAware fail_in, 8 domains",
                Box::new(|| {
                    past_the_window();
                    threads.time(|i, k| failed_in_some_fresh(&wrapped_d, i, k))
                }),
            ),
        ];
        let title = format!("fail, 1 in 4 fresh (after a success), {label}");
        table(&title, rounds, targets, &[0, 1]);

        let mut targets: Vec<Target> = vec![
            (
                "bare Gate::wait",
                Box::new(|| threads.time(|_, k| waited(&bare_c, k))),
            ),
            (
                "OutageAware wait",
                Box::new(|| threads.time(|_, k| waited(&wrapped_c, k))),
            ),
            (
                "bare Gate::claim",
                Box::new(|| threads.time(|_, k| claimed(&bare_c, k))),
            ),
            (
                "OutageAware claim",
                Box::new(|| threads.time(|_, k| claimed(&wrapped_c, k))),
            ),
        ];
        if one {
            targets.push((
                "bare remaining",
                Box::new(|| threads.time(|_, k| bare_remaining(&bare_c, k))),
            ));
        }
        let title = format!("wait and claim, half in backoff, {label}");
        table(&title, rounds, targets, &[0, 2]);
    }
    assert!(!wrapped_f.in_outage() && wrapped_f.outages() == 0);
    assert!(!wrapped_d.in_outage() && wrapped_d.outages() == 0);
    assert!(
        wrapped_d.domains().iter().all(|d| d.outages == 0),
        "{:?}",
        wrapped_d.domains()
    );
    assert!(!wrapped_c.in_outage() && wrapped_c.outages() == 0);
}
