//! Port of `TestBorrowing` (`pkg/util/flowcontrol/borrowing_test.go:60`),
//! on a virtual clock, and the case of two busy levels of which one asks
//! for more than its seats.
//!
//! Kubernetes runs the test through its whole controller, whose
//! configuration always holds the mandatory `exempt` (no shares) and
//! `catch-all` (5 shares, rejecting) levels beside the test's two; the
//! port declares them too, as they take part in the division of seats.
//! Its client threads call again as soon as a call returns; here a refused
//! call (none is expected) would call again 1 ms later, so that virtual
//! time moves.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use fair_admission::{Admit, Apf, LevelId, LevelSpec, LimitResponse, Ticket};

/// Nanoseconds.
const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

/// Closed-loop clients: `threads[i]` threads at `levels[i]`, each calling
/// again as soon as its call of `exec` returns. Returns each level's
/// average number of requests executing between `from` and `to`, and each
/// level's seats (its limit) after every division of the seats.
fn closed_loop(
    apf: &mut Apf,
    levels: &[LevelId],
    threads: &[usize],
    exec: u64,
    (from, to): (u64, u64),
) -> (Vec<f64>, Vec<Vec<u32>>) {
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Event {
        Call(usize),
        Finish(Ticket),
    }
    let mut agenda = BinaryHeap::new();
    let mut seq = 0u64;
    let mut at = |agenda: &mut BinaryHeap<_>, t: u64, e: Event| {
        seq += 1;
        agenda.push(Reverse((t, seq, e)));
    };
    for (i, &n) in threads.iter().enumerate() {
        for _ in 0..n {
            at(&mut agenda, 0, Event::Call(i));
        }
    }
    let mut level_of: HashMap<Ticket, usize> = HashMap::new();
    let mut executing = vec![0u64; levels.len()];
    let mut integral = vec![0u128; levels.len()];
    let mut seats = vec![Vec::new(); levels.len()];
    let mut now = 0u64;
    let mut division = 10 * SECOND;
    loop {
        let next = agenda.peek().map(|Reverse((t, ..))| *t).unwrap_or(u64::MAX);
        let due = apf.next_event().map_or(u64::MAX, |d| d.as_nanos() as u64);
        let t = next.min(due).min(to);
        // Integrate what ran over [now, t] within [from, to].
        let (a, b) = (now.clamp(from, to), t.clamp(from, to));
        for (x, &n) in integral.iter_mut().zip(&executing) {
            *x += u128::from(n) * u128::from(b - a);
        }
        now = t;
        if now >= to {
            break;
        }
        let mut started = apf.advance_to(Duration::from_nanos(now));
        while now >= division {
            for (i, &l) in levels.iter().enumerate() {
                seats[i].push(apf.level_stats(l).unwrap().seats);
            }
            division += 10 * SECOND;
        }
        if next == now {
            let Reverse((_, _, e)) = agenda.pop().unwrap();
            match e {
                Event::Call(i) => {
                    let admission = apf.admit(levels[i], &i, 1);
                    started.extend(admission.dispatched);
                    match admission.admit {
                        Admit::Dispatched(t) | Admit::Queued(t) => {
                            level_of.insert(t, i);
                            if matches!(admission.admit, Admit::Dispatched(_)) {
                                started.push(t);
                            }
                        }
                        _ => at(&mut agenda, now + MS, Event::Call(i)),
                    }
                }
                Event::Finish(t) => {
                    let i = level_of.remove(&t).unwrap();
                    executing[i] -= 1;
                    started.extend(apf.complete(t).unwrap());
                    at(&mut agenda, now, Event::Call(i));
                }
            }
        }
        for t in started {
            executing[level_of[&t]] += 1;
            at(&mut agenda, now + exec, Event::Finish(t));
        }
    }
    let span = (to - from) as f64;
    let averages = integral.iter().map(|&x| x as f64 / span).collect();
    (averages, seats)
}

/// `TestBorrowing`'s two cases: 24 seats; two levels of 100 shares (12
/// seats each), 10 queues of 10, hands of 2; 24 clients at the first, 6 at
/// the second, each running 250 ms calls back to back for 25 s. From 10 s
/// to 25 s the first level delivers about 16 seats (15.5 to 16.1) and the
/// second about 6 (5.5 to 6.1): the first borrows up to what the second
/// may lend, or up to what it may borrow.
#[test]
fn test_borrowing() {
    let queuing = LimitResponse::Queue {
        queues: 10,
        queue_length_limit: 10,
        hand_size: 2,
    };
    for (name, [(lend0, borrow0), (lend1, borrow1)]) in [
        ("lendable-limited", [(50, 67), (33, 50)]),
        ("borrowing-limited", [(50, 33), (67, 50)]),
    ] {
        let level = |lend, borrow| {
            LevelSpec::limited(100, queuing)
                .lendable_percent(lend)
                .borrowing_limit_percent(borrow)
        };
        let mut apf = Apf::builder(24)
            .level("exempt", LevelSpec::exempt())
            .level("test-pl0", level(lend0, borrow0))
            .level("test-pl1", level(lend1, borrow1))
            .level("catch-all", LevelSpec::limited(5, LimitResponse::Reject))
            .build()
            .unwrap();
        let levels = ["test-pl0", "test-pl1"].map(|n| apf.level_id(n).unwrap());
        let window = (10 * SECOND, 25 * SECOND);
        let (averages, seats) = closed_loop(&mut apf, &levels, &[24, 6], 250 * MS, window);
        eprintln!("TestBorrowing/{name}: average concurrency {averages:?}, seats {seats:?}");
        assert!(
            (15.5..=16.1).contains(&averages[0]),
            "{name}: flow 0 got {averages:?}"
        );
        assert!(
            (5.5..=6.1).contains(&averages[1]),
            "{name}: flow 1 got {averages:?}"
        );
    }
}

/// Two levels of 12 of 24 seats, each lending half: one asks for 40 seats,
/// the other for 12, and both are busy. Kubernetes keeps 12 and 12: a
/// level's seats never fall below its demand, up to its nominal seats.
#[test]
fn a_level_using_all_its_seats_lends_none_to_a_busier_one() {
    let queuing = LimitResponse::Queue {
        queues: 64,
        queue_length_limit: 50,
        hand_size: 8,
    };
    let level = LevelSpec::limited(1, queuing).lendable_percent(50);
    let mut apf = Apf::builder(24)
        .level("busier", level)
        .level("busy", level)
        .build()
        .unwrap();
    let levels = ["busier", "busy"].map(|n| apf.level_id(n).unwrap());
    let window = (10 * SECOND, 40 * SECOND);
    let (averages, seats) = closed_loop(&mut apf, &levels, &[40, 12], 250 * MS, window);
    assert_eq!(seats, [[12, 12, 12], [12, 12, 12]]);
    assert_eq!(averages, [12.0, 12.0]);
}

/// `TestUpdateBorrowing` (`pkg/util/flowcontrol/exempt_borrowing_test.go:33`),
/// through an `Apf` and real requests instead of set demand figures:
/// Kubernetes' exempt level (no shares, lends nothing), `workload-high`
/// (40 shares, lends 50 %), `workload-low` (100 shares, lends 90 %) and
/// `catch-all` (5 shares, rejecting) on 6 seats per share, 870 seats. The
/// exempt level's seats follow its demand and are taken off the others,
/// which keep their minimums, then share what is left. (Kubernetes also
/// sets the catch-all level's demand; a rejecting level cannot have more
/// demand than seats here, which changes nothing: it lends nothing, so its
/// seats stay at its nominal 30 throughout.)
#[test]
fn test_update_borrowing() {
    let queuing = LimitResponse::Queue {
        queues: 128,
        queue_length_limit: 50,
        hand_size: 6,
    };
    let server = (40 + 100 + 5) * 6;
    let mut apf = Apf::builder(server)
        .level(
            "workload-high",
            LevelSpec::limited(40, queuing).lendable_percent(50),
        )
        .level("exempt", LevelSpec::exempt())
        .level(
            "workload-low",
            LevelSpec::limited(100, queuing).lendable_percent(90),
        )
        .level("catch-all", LevelSpec::limited(5, LimitResponse::Reject))
        .build()
        .unwrap();
    let [high, exempt, mid, low] =
        ["workload-high", "exempt", "workload-low", "catch-all"].map(|n| apf.level_id(n).unwrap());
    let seats = |apf: &Apf| [exempt, high, mid, low].map(|l| apf.level_stats(l).unwrap().seats);
    let nominal = [high, mid, low].map(|l| apf.level_stats(l).unwrap().nominal_seats);
    assert_eq!(nominal, [240, 600, 30]);
    let period = |n: u64| Duration::from_secs(10 * n);
    // Scenario 1: every level asks for 970 seats.
    let demand = server + 100;
    let mut exempt_running = Vec::new();
    let mut mid_requests = Vec::new();
    for i in 0..demand {
        let t = apf.admit(exempt, &i, 1).admit;
        exempt_running.push(t);
        let _ = apf.admit(high, &i, 1);
        if let Admit::Dispatched(t) | Admit::Queued(t) = apf.admit(mid, &i, 1).admit {
            mid_requests.push(t);
        }
    }
    apf.advance_to(period(1));
    assert_eq!(seats(&apf), [970, 120, 60, 30], "scenario 1");
    // Scenario 2: the exempt level's demand falls to what the others leave
    // once each is halfway between its minimum and its nominal seats.
    let (exp_high, exp_mid, exp_low) = ((240 + 120) / 2, (600 + 60) / 2, 30);
    let exp_exempt = server - (exp_high + exp_mid + exp_low);
    for t in exempt_running.drain(exp_exempt as usize..) {
        let Admit::Dispatched(t) = t else { panic!() };
        apf.complete(t).unwrap();
    }
    apf.advance_to(period(2));
    apf.advance_to(period(3));
    assert_eq!(
        seats(&apf),
        [exp_exempt, exp_high, exp_mid, exp_low],
        "scenario 2"
    );
    // Scenario 3: `workload-low` asks for one seat; the exempt level for
    // what the others need at their nominal seats (it at its minimum).
    let exp_exempt = server - (240 + 60 + 30);
    let extra = exp_exempt as usize - exempt_running.len();
    for i in 0..extra {
        let _ = apf.admit(exempt, &i, 1);
    }
    for &t in &mid_requests[1..] {
        if !apf.cancel(t) {
            apf.complete(t).unwrap();
        }
    }
    let mid_stats = apf.level_stats(mid).unwrap();
    assert_eq!(mid_stats.seats_in_use + mid_stats.seats_waiting, 1);
    apf.advance_to(period(4));
    apf.advance_to(period(5));
    assert_eq!(seats(&apf), [exp_exempt, 240, 60, 30], "scenario 3");
}
