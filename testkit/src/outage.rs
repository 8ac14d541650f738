//! One outage scenario, run over every place an outage's state can live
//! (in process, Redis, a store written in a test): the same wrapper must
//! give the same fleet-wide behaviour over each.
//!
//! A fleet of replicas, each a [`Gate`] with outage awareness, all on one
//! [`MockClock`], runs 60 keys (spread over the replicas) against a
//! dependency that is down from the start until [`BACK_AT`]. Each key runs
//! when due: it claims its turn, and if it may go it tries the dependency
//! and reports the outcome. [`lifecycle`] checks what the rules promise
//! across the whole fleet, wherever the state lives:
//!
//! - every replica sees the outage, and only one is declared;
//! - while the dependency is down, from the ladder's second step on, at
//!   most [`PROBES`] keys try it per step of the ladder (across the fleet);
//! - once it is back, at most [`RELEASE_RATE`] keys are let go in any
//!   second (the probes that end the outage counted apart), and every key
//!   has its first success within 15 s of the return;
//! - in the end nothing is parked.

use std::collections::HashMap;
use std::ops::Add;
use std::time::Duration;

use keyed_backoff::Gate;
use keyed_backoff::clock::{MockClock, MockInstant};
use keyed_backoff_outage::{OutageSettings, OutageStatus};

/// Keys in the fleet, spread over its replicas.
pub const KEYS: usize = 60;
/// Probes per step of the ladder.
pub const PROBES: usize = 2;
/// Keys let go a second after the outage.
pub const RELEASE_RATE: usize = 10;
/// The dependency is down from the start until then.
pub const BACK_AT: Duration = Duration::from_secs(20);
/// The run ends then.
const END: Duration = Duration::from_secs(40);
/// The least wait between two runs of a key.
const TICK: Duration = Duration::from_millis(10);
/// How long a key waits after a success before it runs again.
const RESYNC: Duration = Duration::from_secs(30);

/// The settings every replica uses: 3 keys newly failing declare an
/// outage, a ladder of 1 s doubling to 4 s, [`PROBES`] probes a step,
/// [`RELEASE_RATE`] keys a second, 2 successes in a row end it.
pub fn settings() -> OutageSettings {
    OutageSettings::new()
        .min_failing_keys(3)
        .ladder(Duration::from_secs(1), Duration::from_secs(4))
        .probes(Some(PROBES as u32))
        .release_rate(RELEASE_RATE as f64)
        .recovery_successes(2)
        .seed(7)
}

/// One attempt on the dependency.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    at: Duration,
    key: usize,
    ok: bool,
    /// The replica was still in the outage when the key went: a probe.
    probe: bool,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Seen {
    attempts: Vec<Attempt>,
    /// When the first replica saw the outage.
    pub began: Option<Duration>,
    /// Replicas that saw it.
    pub saw: Vec<bool>,
}

/// The step of the ladder of 1 s doubling to 4 s (the default, and
/// [`settings`]'s) that `elapsed` since the outage began falls in.
pub fn ladder_step(elapsed: Duration) -> u64 {
    match elapsed.as_secs() {
        0 => 0,
        1..=2 => 1,
        n => 2 + (n - 3) / 4,
    }
}

/// The most of `times` within any one `window` (sliding over them): for
/// a release's rate, the most keys let go in a second.
pub fn most_within<T: Copy + Ord + Add<Output = T>>(mut times: Vec<T>, window: T) -> usize {
    times.sort_unstable();
    (0..times.len())
        .map(|i| times[i..].partition_point(|t| *t < times[i] + window))
        .max()
        .unwrap_or(0)
}

/// Runs the fleet `replicas` (every one on `clock`) through the outage
/// and checks the promises above; `name` says which state it ran on.
/// Returns what it saw, for more checks.
pub async fn lifecycle<G>(name: &str, clock: &MockClock, replicas: &[G]) -> Seen
where
    G: Gate<String> + OutageStatus,
{
    let n = replicas.len();
    let mut seen = Seen {
        saw: vec![false; n],
        ..Seen::default()
    };
    // The first runs spread over the first second.
    let mut due: Vec<Duration> = (0..KEYS)
        .map(|k| Duration::from_secs(1) * k as u32 / KEYS as u32)
        .collect();
    let mut now = Duration::ZERO;
    while now < END {
        clock.set(MockInstant::from_nanos(now.as_nanos() as i64));
        let mut order: Vec<usize> = (0..KEYS).filter(|&k| due[k] <= now).collect();
        order.sort_by_key(|&k| due[k]);
        for k in order {
            let gate = &replicas[k % n];
            let key = format!("key-{k}");
            let claimed = gate.claim(&key).await.expect("a claim");
            if let Some(wait) = claimed {
                due[k] = now + wait.max(TICK);
                continue;
            }
            let probe = gate.in_outage();
            let up = now >= BACK_AT;
            seen.attempts.push(Attempt {
                at: now,
                key: k,
                ok: up,
                probe,
            });
            due[k] = now
                + match up {
                    true => {
                        gate.succeed(&key).await.expect("a success");
                        RESYNC
                    }
                    false => match gate.fail(&key).await.expect("a failure") {
                        Ok(level) => level.backoff,
                        Err(refused) => refused.remaining,
                    },
                }
                .max(TICK);
        }
        for (r, gate) in replicas.iter().enumerate() {
            if gate.in_outage() {
                seen.saw[r] = true;
                seen.began.get_or_insert(now);
            }
        }
        // Straight to the next key due: each runs at the time it was told.
        let next = due.iter().copied().min().unwrap_or(END);
        now = next.max(now + Duration::from_nanos(1)).min(END);
    }
    // The release is over: a call on each replica settles it, if that
    // replica has not seen it end yet.
    for (r, gate) in replicas.iter().enumerate() {
        let after = gate.claim(&format!("after-{r}")).await.expect("a claim");
        assert_eq!(
            after, None,
            "{name}: a key parked after the outage's release"
        );
    }
    check(name, replicas, &seen);
    seen
}

fn check<G: OutageStatus>(name: &str, replicas: &[G], seen: &Seen) {
    let began = seen
        .began
        .unwrap_or_else(|| panic!("{name}: no outage was declared"));
    assert!(
        seen.saw.iter().all(|s| *s),
        "{name}: not every replica saw the outage: {:?}",
        seen.saw
    );
    let outages: Vec<u64> = replicas.iter().map(|g| g.outages()).collect();
    assert!(
        outages.iter().all(|o| *o == 1),
        "{name}: outages {outages:?}"
    );
    // From the ladder's second step on (every replica knows by then).
    let mut per_step: HashMap<u64, usize> = HashMap::new();
    let down = seen.attempts.iter().filter(|a| !a.ok && a.at >= began);
    for a in down.filter(|a| a.at - began >= Duration::from_secs(1)) {
        *per_step.entry(ladder_step(a.at - began)).or_default() += 1;
    }
    let most_per_step = per_step.values().copied().max().unwrap_or(0);
    let after = || seen.attempts.iter().filter(|a| a.at >= BACK_AT);
    let window = BACK_AT + Duration::from_secs(15);
    let let_go = after().filter(|a| !a.probe && a.at < window).map(|a| a.at);
    let per_second = most_within(let_go.collect(), Duration::from_secs(1));
    let mut first: HashMap<usize, Duration> = HashMap::new();
    for a in after().filter(|a| a.ok) {
        first.entry(a.key).or_insert(a.at - BACK_AT);
    }
    let latest = first.values().copied().max().unwrap_or_default();
    let parked: Vec<usize> = replicas.iter().map(|g| g.parked()).collect();
    println!(
        "{name}: outage seen {:.2} s in by {} replica(s); at most {most_per_step} attempts in a \
         ladder step (probes {PROBES}, steps {:?}); after the return at most {per_second} keys let \
         go in a second (release rate {RELEASE_RATE}); the latest first success {:.2} s after the \
         return, {} of {KEYS} keys with one; parked at the end {parked:?}",
        began.as_secs_f64(),
        replicas.len(),
        per_step.len(),
        latest.as_secs_f64(),
        first.len(),
    );
    assert!(per_step.len() >= 3, "{name}: the outage ran {per_step:?}");
    assert!(
        most_per_step <= PROBES,
        "{name}: {most_per_step} attempts in one step"
    );
    assert!(
        per_second <= RELEASE_RATE,
        "{name}: {per_second} keys let go in a second"
    );
    assert_eq!(first.len(), KEYS, "{name}: keys without a first success");
    assert!(
        latest <= Duration::from_secs(15),
        "{name}: a first success {latest:?} after the return"
    );
    assert!(
        parked.iter().all(|p| *p == 0),
        "{name}: still parked {parked:?}"
    );
}
