//! A controller over a fleet of keys, on a mock clock: each key's work is
//! tried against one dependency, a success resets the key and a failure
//! goes through the gate, and a key in backoff is not run at all (its run
//! is skipped and requeued at the wait left), as a kube-runtime controller
//! with `skip_while_in_backoff` does. Events run in time order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, OutageSettings};

/// The keys and the dependency they share.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// How many keys.
    pub keys: usize,
    /// Every `broken_every`-th key (0, n, 2n…) fails on their own, whatever
    /// the dependency does; 0: none.
    pub broken_every: usize,
    /// When the dependency is down.
    pub down: Range<Duration>,
    /// After a success, the key's work comes again this much later (a
    /// periodic requeue); `None`: once done, a key is not run again.
    pub period: Option<Duration>,
    /// The keys' first runs are spread evenly over this.
    pub stagger: Duration,
    /// The run ends here.
    pub end: Duration,
    /// A run is skipped while the key is in backoff (the controller asks
    /// `remaining` first); otherwise every requeue runs.
    pub skips: bool,
}

/// One run that reached the dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    pub at: Duration,
    pub key: usize,
    pub ok: bool,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Trace {
    /// Every run that reached the dependency, in time order.
    pub attempts: Vec<Attempt>,
    /// Every gate decision: when, which key, the backoff or the refusal.
    pub gate: Vec<(Duration, usize, Result<Duration, Duration>)>,
    /// Per key, its own backoff after each failure that advanced its own
    /// ladder.
    pub own: Vec<Vec<Duration>>,
    /// When the manager was first seen out of an outage after being in one.
    pub ended: Option<Duration>,
    /// Outages the manager declared.
    pub outages: u64,
}

impl Trace {
    /// Runs that reached the dependency within `during`.
    pub fn attempts_in(&self, during: &Range<Duration>) -> usize {
        self.attempts
            .iter()
            .filter(|a| during.contains(&a.at))
            .count()
    }

    /// Each key's first success at or after `from`.
    pub fn first_successes(&self, keys: usize, from: Duration) -> Vec<Option<Duration>> {
        let mut first = vec![None; keys];
        for a in self.attempts.iter().filter(|a| a.ok && a.at >= from) {
            first[a.key].get_or_insert(a.at);
        }
        first
    }

    /// The most runs that reached the dependency in any one second
    /// (`[t, t + 1 s)`), among those at times `counted` accepts.
    pub fn busiest_second(&self, counted: impl Fn(Duration) -> bool) -> usize {
        let times: Vec<Duration> = self
            .attempts
            .iter()
            .map(|a| a.at)
            .filter(|t| counted(*t))
            .collect();
        let second = Duration::from_secs(1);
        (0..times.len())
            .map(|i| {
                times[i..]
                    .iter()
                    .take_while(|t| **t < times[i] + second)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

/// A manager of `initial` doubling to `max`, forgotten after `expire`, with
/// outage detection when `outage` is given, on `clock`.
pub fn manager(
    clock: &MockClock,
    (initial, max, expire): (Duration, Duration, Duration),
    outage: Option<OutageSettings>,
) -> Backoff<String, MockClock> {
    let builder = Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .expire_after(expire)
        .seed(11);
    match outage {
        Some(settings) => builder.outage(settings),
        None => builder,
    }
    .build()
    .expect("valid settings")
}

/// The kubelet's restart backoff: 10 s doubling to 300 s, reset after 600 s.
pub const KUBELET: (Duration, Duration, Duration) = (
    Duration::from_secs(10),
    Duration::from_secs(300),
    Duration::from_secs(600),
);

/// controller-runtime's per-item backoff: 5 ms doubling to 1000 s.
pub const CONTROLLER_RUNTIME: (Duration, Duration, Duration) = (
    Duration::from_millis(5),
    Duration::from_secs(1000),
    Duration::from_secs(2000),
);

/// Runs `fleet` through `backoff`, whose clock is `clock`; `watch`: the
/// manager detects outages, and the trace notes when one ends.
pub fn run(
    fleet: &Fleet,
    backoff: &Backoff<String, MockClock>,
    clock: &MockClock,
    watch: bool,
) -> Trace {
    let start = clock.now();
    let names: Vec<String> = (0..fleet.keys).map(|k| format!("object-{k}")).collect();
    let mut queue = BinaryHeap::new();
    for k in 0..fleet.keys {
        let offset = fleet.stagger.mul_f64(k as f64 / fleet.keys as f64);
        queue.push(Reverse((offset, k)));
    }
    let mut trace = Trace {
        own: vec![Vec::new(); fleet.keys],
        ..Trace::default()
    };
    let mut in_outage = false;
    while let Some(Reverse((at, k))) = queue.pop() {
        if at > fleet.end {
            break;
        }
        clock.set(start + at);
        let (key, now) = (names[k].as_str(), clock.now());
        if let Some(wait) = backoff.remaining(key, now).filter(|_| fleet.skips) {
            queue.push(Reverse((at + wait, k)));
            continue;
        }
        let broken = fleet.broken_every > 0 && k % fleet.broken_every == 0;
        let ok = !broken && !fleet.down.contains(&at);
        trace.attempts.push(Attempt { at, key: k, ok });
        if ok {
            backoff.reset(key);
            if let Some(period) = fleet.period {
                queue.push(Reverse((at + period, k)));
            }
        } else {
            let attempts = backoff.attempts(key);
            let decision = backoff.try_next(key, now).map_err(|e| e.remaining);
            if backoff.attempts(key) != attempts {
                trace.own[k].push(backoff.get(key));
            }
            trace.gate.push((at, k, decision));
            let wait = decision.unwrap_or_else(|remaining| remaining);
            queue.push(Reverse((at + wait, k)));
        }
        // An outage begins at a failure and ends at a success: the
        // manager's state is read only when it may have changed.
        if watch && in_outage == ok {
            in_outage = backoff.stats().in_outage;
            if ok && !in_outage && trace.ended.is_none() {
                trace.ended = Some(at);
            }
        }
    }
    trace.outages = backoff.stats().outages;
    trace
}

/// Runs `fleet` with a fresh manager of `rule`, with or without `outage`.
pub fn run_with(
    fleet: &Fleet,
    rule: (Duration, Duration, Duration),
    outage: Option<OutageSettings>,
) -> Trace {
    let clock = MockClock::new();
    let backoff = manager(&clock, rule, outage);
    run(fleet, &backoff, &clock, outage.is_some())
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
