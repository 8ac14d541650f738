//! A partial outage across a fleet: three processes on one Redis, each
//! with 250 keys, half naming a dependency that goes down (`db`) and half
//! one that stays up (`queue`). The fleet must share one outage of `db`
//! (the same bounds as an outage of everything, over `db`'s keys alone),
//! declare none of everything or of `queue`, and leave `queue`'s keys
//! running on their own schedule throughout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use keyed_backoff_testkit::redis_server::Server;

use super::child::{self, UP_DOMAIN, domain_of};
use super::{
    Attempt, DOWN, During, Fleet, KEYS, SECOND, TICK, latest_first_success, most_per_second,
    prefix, recovered, released,
};

const PROCESSES: usize = 3;

pub fn a_domain_down_is_one_outage_of_it_for_the_fleet() {
    let started = Instant::now();
    let server = Server::with_args(Vec::new());
    let mut fleet = Fleet::start_with(&server, &prefix("domains"), PROCESSES, false, true);
    fleet.run(0, DOWN.1 + 30 * SECOND, |_, _| None);
    assert_eq!(fleet.alone_since, [None; PROCESSES], "Redis answered");
    // One outage of the domain down, seen by all three; none of
    // everything, none of the domain up.
    let seen: Vec<(u64, u64, u64)> = fleet
        .last
        .iter()
        .map(|s| (s.outages, s.everything_outages, s.up_outages))
        .collect();
    assert_eq!(
        seen,
        [(1, 0, 0); PROCESSES],
        "(db, everything, queue) outages"
    );
    assert!(
        fleet.learned.iter().all(Option::is_some),
        "a process never saw the outage of db: {:?}",
        fleet.learned
    );
    let began = fleet.began();
    assert!(
        (DOWN.0..DOWN.0 + 30 * SECOND).contains(&began),
        "began at {began}"
    );
    let down = |a: &Attempt| domain_of(a.key) != UP_DOMAIN;
    // The domain down's attempts during its outage, bounded as in an
    // outage of everything: at most `probes` a step across the fleet once
    // each process knew of it, and none long after it began before a
    // process knew. Its keys were named with it when they succeeded, so
    // their first run in its outage waits on it.
    let during = During::of(&fleet.attempts, began, down);
    let per_second = most_per_second(released(&fleet.attempts, down));
    let keys = (0..PROCESSES).flat_map(|p| {
        (0..KEYS)
            .filter(|&k| domain_of(k) != UP_DOMAIN)
            .map(move |k| (p, k))
    });
    let latest = latest_first_success(&fleet.attempts, keys);
    // The domain up's keys: never failed, never kept back: each ran every
    // resync (30 s, give or take the simulated time's step).
    let mut runs: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
    for a in fleet.attempts.iter().filter(|a| !down(a)) {
        assert!(a.ok, "a key of the domain up failed: {a:?}");
        runs.entry((a.process, a.key)).or_default().push(a.at);
    }
    assert_eq!(
        runs.len(),
        PROCESSES * KEYS / 2,
        "every key of the domain up ran"
    );
    let longest = runs
        .values()
        .flat_map(|at| at.windows(2).map(|w| w[1] - w[0]))
        .max()
        .unwrap_or(0);
    println!(
        "fleet, a domain down: its outage began {:.3} s after it went down; at most {} of its \
         attempts per ladder step across {PROCESSES} processes (probes {}), {} before a process \
         learned of it (the latest {:.3} s after it began); at most {per_second} of its keys let go in a second (release rate {}); its \
         latest first success {:.3} s after the return; the other domain's longest gap between runs \
         {:.3} s; {:.1} s of wall time",
        (began - DOWN.0) as f64 / 1e9,
        during.per_step,
        child::PROBES,
        during.strays,
        during.late as f64 / 1e9,
        child::RELEASE_RATE,
        latest as f64 / 1e9,
        longest as f64 / 1e9,
        started.elapsed().as_secs_f64(),
    );
    during.bounded(began);
    recovered(per_second, latest);
    assert!(
        longest <= Duration::from_secs(30).as_nanos() as u64 + TICK,
        "a key of the domain up waited {longest} ns between runs"
    );
}
