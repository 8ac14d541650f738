//! Redis restarted, empty, during the outage: the processes that went on
//! alone come back to one outage, which one of them writes back.

use std::time::{Duration, Instant};

use keyed_backoff_testkit::redis_server::{Server, poll_until};

use super::{
    Attempt, DOWN, Fleet, KEYS, PROCESSES, SECOND, TICK, child, kill_30_s_in, ladder_step,
    latest_first_success, most_per_second, most_per_step, prefix, recovered, released, steps,
};

/// Redis dies 30 s into the outage and comes back, empty, 10 s later.
/// Once every process has reached it again, the fleet lets at most
/// `probes` keys try in any step of the ladder across all four processes
/// (not `probes` each, as while they were alone), and at most
/// `release_rate` keys a second across them once the dependency is back.
pub fn redis_back_during_the_outage() {
    let started = Instant::now();
    let mut server = Server::with_args(Vec::new());
    let name = prefix("back");
    let mut fleet = Fleet::start(&server, &name, true);
    let (mut killed, mut rejoined) = (None, None);
    fleet.run(0, DOWN.1 + 30 * SECOND, |fleet, now| {
        kill_30_s_in(fleet, &mut server, now, &mut killed);
        if let Some(r) = rejoined {
            let alone = fleet.last.iter().position(|s| s.alone);
            assert!(
                alone.is_none(),
                "replica {alone:?} alone again at {}",
                now - r
            );
        } else if killed.is_some_and(|k| now >= k + 10 * SECOND) {
            server.restart();
            let back = rejoin(fleet, &server, &name, now);
            rejoined = Some(back);
            return Some(back);
        }
        None
    });
    let (killed, rejoined) = (killed.expect("killed"), rejoined.expect("rejoined"));
    let began = fleet.began();
    assert!(rejoined < DOWN.1, "rejoined after the dependency's return");
    let outages: Vec<u64> = fleet.last.iter().map(|s| s.outages).collect();
    assert_eq!(outages, [1; PROCESSES], "one outage, seen by every process");
    // Attempts in the steps of the ladder that began after every process
    // had rejoined.
    let first_step = ladder_step(rejoined - began) + 1;
    let shared: Vec<&Attempt> = fleet
        .attempts
        .iter()
        .filter(|a| a.at >= began && (a.at < DOWN.1 || a.informed))
        .filter(|a| ladder_step(a.at - began) >= first_step)
        .collect();
    let alone: Vec<&Attempt> = fleet
        .attempts
        .iter()
        .filter(|a| (killed..rejoined).contains(&a.at))
        .collect();
    let probes = child::PROBES;
    let per_step = most_per_step(&shared, began, |_| 0);
    let alone_per_step = most_per_step(&alone, began, |_| 0);
    let per_second = most_per_second(released(&fleet.attempts, |_| true));
    let keys = (0..PROCESSES).flat_map(|p| (0..KEYS).map(move |k| (p, k)));
    let latest = latest_first_success(&fleet.attempts, keys);
    println!(
        "Redis back {:.3} s into the outage (killed {:.3} s in): every process rejoined {:.3} s later; \
         at most {alone_per_step} attempts in a ladder step across the processes while alone, \
         {per_step} once rejoined (probes {probes}, {} attempts in {} steps); at most {per_second} \
         keys let go in a second of the recovery (release rate {}); the latest first success {:.3} s \
         after the return; {:.1} s of wall time",
        (rejoined - began) as f64 / 1e9,
        (killed - began) as f64 / 1e9,
        (rejoined - killed) as f64 / 1e9 - 10.0,
        shared.len(),
        ladder_step(DOWN.1 - began) + 1 - first_step,
        child::RELEASE_RATE,
        latest as f64 / 1e9,
        started.elapsed().as_secs_f64(),
    );
    assert!(!shared.is_empty(), "no attempt after the rejoin");
    assert!(
        per_step <= probes,
        "{per_step} attempts in a step after the rejoin: {:?}",
        steps(&shared, began)
    );
    recovered(per_second, latest);
}

/// Moves the simulated time on by a millisecond at a time (the processes'
/// parked keys keep coming due, so each asks Redis every few
/// milliseconds) until the outage is back in Redis and no process has
/// been alone for 100 ms of it (each waits a second of real time alone
/// before it asks Redis again, and goes on alone another second if that
/// call fails): the simulated time at which all are back.
fn rejoin(fleet: &mut Fleet, server: &Server, name: &str, mut now: u64) -> u64 {
    let state = format!("{{{name}:outage}}:state");
    let mut together = 0;
    poll_until(
        "every process back on Redis",
        Duration::from_secs(30),
        || {
            now += TICK / 10;
            fleet.step(now);
            let written: bool = server.command(&["EXISTS", &state]).unwrap_or(false);
            together = match written && fleet.last.iter().all(|s| !s.alone) {
                true => together + 1,
                false => 0,
            };
            together >= 100
        },
    );
    now
}
