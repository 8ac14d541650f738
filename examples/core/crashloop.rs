//! A kubelet-style CrashLoopBackOff, simulated on a mock clock.
//!
//! 300 containers: most are healthy, some crash-loop forever, some crash a
//! few times and then run healthy for 15 minutes (long enough for the 10
//! minute reset window to forget them), and some belong to pods that are
//! deleted while crash-looping (their entries are left for GC). The sync loop
//! does what the kubelet does for an exited container: if it is still in
//! backoff since its finish time, refuse to restart; otherwise record the
//! failure with `next` and restart.
//!
//! Run: `cargo run --example crashloop`

use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};

const CONTAINERS: usize = 300;
const SIMULATED: Duration = Duration::from_secs(45 * 60);
const SYNC_PERIOD: Duration = Duration::from_secs(1);
const GC_PERIOD: Duration = Duration::from_secs(60);
const RESET_WINDOW: Duration = Duration::from_secs(600);
const INITIAL: Duration = Duration::from_secs(10);
const MAX: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// Never exits.
    Healthy,
    /// Runs 2 s, exits, forever.
    CrashLooping,
    /// Crashes 4 times, then runs 15 minutes, then crashes again.
    Flaky,
    /// Crash-loops until its pod is deleted 8 minutes in.
    Deleted,
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    Running {
        since: MockInstant,
    },
    Exited {
        at: MockInstant,
        refusal_shown: bool,
    },
    Gone,
}

struct Container {
    key: String,
    kind: Kind,
    state: State,
    restarts: u32,
    featured: bool,
}

impl Container {
    /// How long this container runs after its `restarts`-th start.
    fn run_time(&self) -> Option<Duration> {
        match self.kind {
            Kind::Healthy => None,
            Kind::CrashLooping | Kind::Deleted => Some(Duration::from_secs(2)),
            Kind::Flaky if self.restarts == 4 => Some(Duration::from_secs(15 * 60)),
            Kind::Flaky => Some(Duration::from_secs(2)),
        }
    }
}

fn kind_of(i: usize) -> Kind {
    match i % 10 {
        0 | 1 => Kind::CrashLooping,
        2 => Kind::Flaky,
        3 => Kind::Deleted,
        _ => Kind::Healthy,
    }
}

/// The kubelet's stable key: pod name, namespace, pod UID, container name
/// and a hash of the container spec.
fn stable_key(i: usize) -> String {
    let uid = format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        i * 7919,
        i % 65536,
        0x4000 | (i % 4096),
        0x8000 | (i % 4096),
        i * 104_729
    );
    format!(
        "pod-{i}_default_{uid}_app_{:08x}",
        (i as u32).wrapping_mul(2_654_435_761)
    )
}

fn mmss(d: Duration) -> String {
    format!("{:02}:{:02}", d.as_secs() / 60, d.as_secs() % 60)
}

fn main() -> Result<(), keyed_backoff::ConfigError> {
    let clock = MockClock::new();
    // The kubelet's CrashLoopBackOff settings.
    let backoff = Backoff::<String>::builder(INITIAL, MAX)
        .clock(clock.clone())
        .expire_after(RESET_WINDOW)
        .build()?;
    let start = clock.now();
    let elapsed = |t: MockInstant| mmss(t.saturating_duration_since(start));

    let mut featured_left = [Kind::CrashLooping, Kind::Flaky, Kind::Deleted].to_vec();
    let mut containers: Vec<Container> = (0..CONTAINERS)
        .map(|i| {
            let kind = kind_of(i);
            let featured = featured_left.first() == Some(&kind);
            if featured {
                featured_left.remove(0);
            }
            Container {
                key: stable_key(i),
                kind,
                state: State::Running { since: start },
                restarts: 0,
                featured,
            }
        })
        .collect();

    println!(
        "CrashLoopBackOff: initial 10 s, doubling to 300 s, reset after {} s healthy",
        RESET_WINDOW.as_secs()
    );
    let count = |kind: Kind| containers.iter().filter(|c| c.kind == kind).count();
    println!(
        "{CONTAINERS} containers: {} healthy, {} crash-looping, {} flaky (4 crashes, then 15 min healthy), {} in pods deleted at 8 min",
        count(Kind::Healthy),
        count(Kind::CrashLooping),
        count(Kind::Flaky),
        count(Kind::Deleted)
    );
    println!(
        "A container has a backoff entry from its first exit until GC forgets it (its pod deleted, or 10 min healthy): healthy containers never have one."
    );
    println!("Timeline of three of them (crash-looping, flaky, deleted pod):\n");
    for c in containers.iter().filter(|c| c.featured) {
        println!("  {:<13} {}", format!("{:?}", c.kind), c.key);
    }
    println!();

    let mut total_restarts = 0u64;
    let mut total_refusals = 0u64;
    let mut gc_removed = 0usize;
    while clock.now().saturating_duration_since(start) < SIMULATED {
        clock.advance(SYNC_PERIOD);
        let now = clock.now();
        let since_start = now.saturating_duration_since(start);

        for c in &mut containers {
            if c.kind == Kind::Deleted
                && since_start >= Duration::from_secs(8 * 60)
                && c.state != State::Gone
            {
                // The pod is deleted; nobody calls the backoff for it again.
                c.state = State::Gone;
                if c.featured {
                    println!(
                        "[{}] {:?}: pod deleted; its entry stays until GC",
                        elapsed(now),
                        c.kind
                    );
                }
            }
            if let State::Running { since } = c.state
                && let Some(run) = c.run_time()
                && now.saturating_duration_since(since) >= run
            {
                c.state = State::Exited {
                    at: now,
                    refusal_shown: false,
                };
            }
            let State::Exited { at, refusal_shown } = c.state else {
                continue;
            };
            // The kubelet's check, keyed on the container's finish time:
            // the wait left counted from the exit.
            if let Some(remaining) = backoff.remaining_since(&c.key, at) {
                total_refusals += 1;
                if c.featured && !refusal_shown {
                    let current = backoff.get(&c.key);
                    let ran = c.run_time().unwrap_or_default();
                    println!(
                        "[{}] {:?}: exited after running {} s; restart refused: back-off {} s counted from the exit, {} s remaining",
                        elapsed(now),
                        c.kind,
                        ran.as_secs(),
                        current.as_secs(),
                        remaining.as_secs()
                    );
                    c.state = State::Exited {
                        at,
                        refusal_shown: true,
                    };
                }
                continue;
            }
            let waited = now.saturating_duration_since(at);
            let ran = c.run_time().unwrap_or_default();
            let next = backoff.next(&c.key, at);
            c.restarts += 1;
            total_restarts += 1;
            if c.featured {
                let note = if ran > RESET_WINDOW && next == INITIAL {
                    format!(
                        " (it ran {} min healthy, past the reset window: back to the start)",
                        ran.as_secs() / 60
                    )
                } else {
                    String::new()
                };
                let when = if waited.is_zero() {
                    format!(
                        "exited after running {} s; restart #{} at once",
                        ran.as_secs(),
                        c.restarts
                    )
                } else {
                    format!(
                        "restart #{} after waiting {} s since the exit",
                        c.restarts,
                        waited.as_secs()
                    )
                };
                println!(
                    "[{}] {:?}: {when}; next back-off {} s{note}",
                    elapsed(now),
                    c.kind,
                    next.as_secs()
                );
            }
            c.state = State::Running { since: now };
        }

        if since_start.as_secs().is_multiple_of(GC_PERIOD.as_secs()) {
            let tracked: Vec<bool> = containers
                .iter()
                .map(|c| backoff.get(&c.key) > Duration::ZERO)
                .collect();
            let removed = backoff.gc();
            gc_removed += removed;
            if removed > 0 {
                let (mut deleted, mut recovered) = (0, 0);
                for (c, was) in containers.iter().zip(tracked) {
                    if was && backoff.get(&c.key).is_zero() {
                        if c.state == State::Gone {
                            deleted += 1
                        } else {
                            recovered += 1
                        }
                    }
                }
                println!(
                    "[{}] GC removed {removed} expired entries ({deleted} of deleted pods, {recovered} of containers healthy for 10 min); {} remain",
                    elapsed(now),
                    backoff.len()
                );
            }
        }
        if since_start.as_secs().is_multiple_of(5 * 60) {
            let waiting = containers
                .iter()
                .filter(|c| matches!(c.state, State::Exited { at, .. } if backoff.is_in_backoff_since(&c.key, at)))
                .count();
            println!(
                "[{}] -- {} entries (containers that have exited, not yet forgotten), {waiting} containers waiting in CrashLoopBackOff, {total_restarts} restarts so far",
                elapsed(now),
                backoff.len()
            );
        }
    }

    let live = containers.iter().filter(|c| c.state != State::Gone).count();
    let tracked_live = containers
        .iter()
        .filter(|c| c.state != State::Gone && backoff.get(&c.key) > Duration::ZERO)
        .count();
    println!("\nAfter {} simulated minutes:", SIMULATED.as_secs() / 60);
    println!("  containers alive:            {live} of {CONTAINERS}");
    println!(
        "  backoff entries held:        {} ({tracked_live} for live containers)",
        backoff.len()
    );
    println!("  restarts:                    {total_restarts}");
    println!(
        "  refused restart checks:      {total_refusals} (the sync loop re-checks every waiting container every {} s, so one back-off of 300 s is up to 300 refusals)",
        SYNC_PERIOD.as_secs()
    );
    println!("  entries removed by GC:       {gc_removed}");
    let leaked = containers
        .iter()
        .filter(|c| c.state == State::Gone && backoff.get(&c.key) > Duration::ZERO)
        .count();
    println!("  entries of deleted pods:     {leaked}");
    Ok(())
}
