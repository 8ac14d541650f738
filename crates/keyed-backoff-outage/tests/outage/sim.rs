//! A controller over a fleet of keys, on a mock clock: each key's work is
//! tried against one dependency, a success resets the key and a failure
//! goes through the gate, and a key in backoff is not run at all (its run
//! is claimed first, and skipped and requeued at the wait left), as a
//! kube-runtime controller with `skip_while_in_backoff` does. Events run in
//! time order. The controller sees the manager only through the [`Gate`]
//! contract: the bare [`Backoff`], or [`OutageAware`] over it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, Gate, InBackoff};
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};
use keyed_backoff_testkit::ready;

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
    /// A run is skipped while the key is in backoff (the controller claims
    /// the key first); otherwise every requeue runs, unasked.
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
    /// When the wrapper was first seen out of an outage after being in one.
    pub ended: Option<Duration>,
    /// Outages the wrapper declared.
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

/// The manager a test drives: the bare backoff, or the outage wrapper over
/// it. Its calls are the [`Gate`]'s, answered at once (the in-process
/// manager's futures are ready when made), and the wrapper's counters.
pub enum Manager {
    /// Client-go's semantics alone.
    Bare(Box<Backoff<String, MockClock>>),
    /// Outage awareness over the same backoff.
    Aware(Box<OutageAware<Backoff<String, MockClock>, InProcess<MockClock>>>),
}

/// `$call` on whichever gate `$m` is, named `$g`, answered at once.
macro_rules! gate {
    ($m:expr, $g:ident => $call:expr) => {{
        let Ok(answer) = match $m {
            Manager::Bare($g) => ready($call),
            Manager::Aware($g) => ready($call),
        };
        answer
    }};
}

impl Manager {
    /// The backoff (under the wrapper, if there is one): its levels.
    pub fn backoff(&self) -> &Backoff<String, MockClock> {
        match self {
            Manager::Bare(b) => b,
            Manager::Aware(a) => a.inner(),
        }
    }

    /// A failure of `key` now ([`Gate::fail`]): its new backoff, or the
    /// wait left when it is not counted.
    pub fn fail(&self, key: &str) -> Result<Duration, InBackoff> {
        gate!(self, g => g.fail(&key.to_string())).map(|level| level.backoff)
    }

    /// The wait before `key` may run, asked by a caller that runs it at
    /// once when there is none ([`Gate::claim`]).
    pub fn claim(&self, key: &str) -> Option<Duration> {
        gate!(self, g => g.claim(&key.to_string()))
    }

    /// The wait before `key` may run, asked only to read it ([`Gate::wait`]).
    pub fn wait(&self, key: &str) -> Option<Duration> {
        gate!(self, g => g.wait(&key.to_string()))
    }

    /// A success of `key` ([`Gate::succeed`]).
    pub fn succeed(&self, key: &str) {
        gate!(self, g => g.succeed(&key.to_string()))
    }

    /// A floor: `key` may not run for `wait` ([`Gate::hold`]).
    pub fn hold(&self, key: &str, wait: Duration) {
        gate!(self, g => g.hold(&key.to_string(), wait))
    }

    /// Whether an outage is under way (never, without the wrapper).
    pub fn in_outage(&self) -> bool {
        matches!(self, Manager::Aware(a) if a.in_outage())
    }

    /// Keys the outage parks now.
    pub fn parked(&self) -> usize {
        match self {
            Manager::Bare(_) => 0,
            Manager::Aware(a) => a.parked(),
        }
    }

    /// Outages declared so far.
    pub fn outages(&self) -> u64 {
        match self {
            Manager::Bare(_) => 0,
            Manager::Aware(a) => a.outages(),
        }
    }
}

/// A manager of `initial` doubling to `max`, forgotten after `expire`, on
/// `clock`: wrapped with outage awareness when `outage` is given (its slots
/// drawn from the same seed as the jitter, 11).
pub fn manager(
    clock: &MockClock,
    (initial, max, expire): (Duration, Duration, Duration),
    outage: Option<OutageSettings>,
) -> Manager {
    let backoff = Backoff::<String>::builder(initial, max)
        .clock(clock.clone())
        .expire_after(expire)
        .seed(11)
        .build()
        .expect("valid settings");
    match outage {
        Some(settings) => Manager::Aware(Box::new(
            OutageAware::with_clock(backoff, settings.seed(11), clock.clone())
                .expect("valid outage settings"),
        )),
        None => Manager::Bare(Box::new(backoff)),
    }
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

/// Runs `fleet` through `manager`, whose clock is `clock`; the trace notes
/// when an outage ends.
pub fn run(fleet: &Fleet, manager: &Manager, clock: &MockClock) -> Trace {
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
    let backoff = manager.backoff();
    let mut in_outage = false;
    while let Some(Reverse((at, k))) = queue.pop() {
        if at > fleet.end {
            break;
        }
        clock.set(start + at);
        let key = names[k].as_str();
        // A controller that skips keys in backoff claims the key before
        // it runs it; one that does not, does not ask.
        if let Some(wait) = fleet.skips.then(|| manager.claim(key)).flatten() {
            queue.push(Reverse((at + wait, k)));
            continue;
        }
        let broken = fleet.broken_every > 0 && k % fleet.broken_every == 0;
        let ok = !broken && !fleet.down.contains(&at);
        trace.attempts.push(Attempt { at, key: k, ok });
        if ok {
            manager.succeed(key);
            if let Some(period) = fleet.period {
                queue.push(Reverse((at + period, k)));
            }
        } else {
            let attempts = backoff.attempts(key);
            let decision = manager.fail(key).map_err(|e| e.remaining);
            if backoff.attempts(key) != attempts {
                trace.own[k].push(backoff.get(key));
            }
            trace.gate.push((at, k, decision));
            let wait = decision.unwrap_or_else(|remaining| remaining);
            queue.push(Reverse((at + wait, k)));
        }
        // An outage begins at a failure and ends at a success: the
        // wrapper's state is read only when it may have changed.
        if in_outage == ok {
            in_outage = manager.in_outage();
            if ok && !in_outage && trace.ended.is_none() {
                trace.ended = Some(at);
            }
        }
    }
    trace.outages = manager.outages();
    trace
}

/// Runs `fleet` with a fresh manager of `rule`, with or without `outage`.
pub fn run_with(
    fleet: &Fleet,
    rule: (Duration, Duration, Duration),
    outage: Option<OutageSettings>,
) -> Trace {
    let clock = MockClock::new();
    run(fleet, &manager(&clock, rule, outage), &clock)
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
