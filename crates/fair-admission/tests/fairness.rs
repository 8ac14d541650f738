//! API Priority and Fairness: the crush probabilities Kubernetes publishes,
//! and fair queuing between flows, driven by a small discrete-event loop.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

mod apf;

use apf::{distinct_flows, queuing};
use fair_admission::{
    Admit, Apf, LevelId, LevelSpec, LimitResponse, Rejected, Ticket, crush_probability,
};

/// Rows of the table in Kubernetes' documentation: (hand, queues) and the
/// probabilities for 1, 4 and 16 elephants.
const PUBLISHED: [(usize, usize, [f64; 3]); 3] = [
    (
        12,
        32,
        [
            4.428838398950118e-09,
            0.11431348830099144,
            0.9935089607656024,
        ],
    ),
    (
        8,
        64,
        [
            2.25929199850899e-10,
            0.0004886697053040446,
            0.35935114681123076,
        ],
    ),
    (
        6,
        1024,
        [
            6.337324016514285e-16,
            8.09060164312957e-11,
            4.517408062903668e-07,
        ],
    ),
];

#[test]
fn crush_probability_reproduces_the_published_table() {
    for (hand, deck, expected) in PUBLISHED {
        for (elephants, want) in [1, 4, 16].into_iter().zip(expected) {
            let got = crush_probability(deck, hand, elephants);
            assert!(
                ((got - want) / want).abs() < 1e-12,
                "hand {hand}, deck {deck}, {elephants} elephants: {got} vs {want}"
            );
        }
    }
}

#[test]
fn more_elephants_crush_more_mice_and_larger_decks_fewer() {
    let mut last = 0.0;
    for e in 1..40 {
        let p = crush_probability(64, 8, e);
        assert!(p > last && p <= 1.0, "{e}: {p}");
        last = p;
    }
    assert!(crush_probability(128, 8, 4) < crush_probability(64, 8, 4));
}

/// A request in the event loop: its flow and width, and when it arrives.
struct Req {
    at_ms: u64,
    flow: String,
    width: u32,
}

/// What happened to each request, by flow: start times (ms) of dispatched
/// requests, and the number rejected.
#[derive(Default, Debug)]
struct Outcome {
    started: HashMap<String, Vec<u64>>,
    rejected: HashMap<String, usize>,
}

/// Runs `reqs` through `apf` at `level`; every request runs `service_ms`.
fn run(
    apf: &mut Apf,
    level: LevelId,
    mut reqs: Vec<Req>,
    service_ms: u64,
    until_ms: u64,
) -> Outcome {
    reqs.sort_by_key(|r| r.at_ms);
    let mut out = Outcome::default();
    let mut flow_of: HashMap<Ticket, String> = HashMap::new();
    let mut ends: BTreeMap<u64, Vec<Ticket>> = BTreeMap::new();
    let mut next = reqs.into_iter().peekable();
    let start = |t: Ticket,
                 now: u64,
                 flow_of: &HashMap<Ticket, String>,
                 ends: &mut BTreeMap<u64, Vec<Ticket>>,
                 out: &mut Outcome| {
        out.started
            .entry(flow_of[&t].clone())
            .or_default()
            .push(now);
        ends.entry(now + service_ms).or_default().push(t);
    };
    for now in 0..until_ms {
        apf.advance_to(Duration::from_millis(now));
        if let Some(done) = ends.remove(&now) {
            for t in done {
                let dispatched = apf.complete(t).expect("executing");
                for d in dispatched {
                    start(d, now, &flow_of, &mut ends, &mut out);
                }
            }
        }
        while next.peek().is_some_and(|r| r.at_ms == now) {
            let r = next.next().unwrap();
            let admission = apf.admit(level, r.flow.as_str(), r.width);
            match admission.admit {
                Admit::Dispatched(t) => {
                    flow_of.insert(t, r.flow.clone());
                    start(t, now, &flow_of, &mut ends, &mut out);
                }
                Admit::Queued(t) => {
                    flow_of.insert(t, r.flow.clone());
                }
                _ => *out.rejected.entry(r.flow).or_default() += 1,
            }
            for d in admission.dispatched {
                start(d, now, &flow_of, &mut ends, &mut out);
            }
        }
    }
    out
}

fn burst(flow: &str, n: usize, width: u32) -> impl Iterator<Item = Req> + '_ {
    (0..n).map(move |_| Req {
        at_ms: 0,
        flow: flow.to_owned(),
        width,
    })
}

#[test]
fn backlogged_flows_get_equal_seat_time_and_a_light_flow_gets_all_it_asks() {
    let (mut apf, level) = queuing(1, 64, 1, 100);
    let names = distinct_flows(&apf, level, 3);
    let (a, b, light) = (&names[0], &names[1], &names[2]);
    let mut reqs: Vec<Req> = burst(a, 60, 1).chain(burst(b, 60, 1)).collect();
    // The light flow asks once every 5 s, a tenth of a seat.
    reqs.extend((0..10).map(|i| Req {
        at_ms: 500 + i * 5_000,
        flow: light.clone(),
        width: 1,
    }));
    let out = run(&mut apf, level, reqs, 1_000, 50_000);
    let (na, nb) = (out.started[a].len(), out.started[b].len());
    // 50 seat-seconds: the light flow's 10, the rest split evenly.
    assert_eq!(out.started[light].len(), 10);
    assert!(na.abs_diff(nb) <= 1, "{na} vs {nb}");
    assert_eq!(na + nb + 10, 50);
    // The light flow never waits behind the backlogs: before it runs, the
    // request holding the seat finishes and at most one request of each
    // backlogged flow runs (fair queuing's virtual clock gives a queue that
    // has waited since before the light request came its turn first).
    for (i, &s) in out.started[light].iter().enumerate() {
        let arrived = 500 + i as u64 * 5_000;
        assert!(
            s - arrived <= 2_000,
            "request {i} waited {} ms",
            s - arrived
        );
    }
}

#[test]
fn a_request_twice_as_wide_is_served_half_as_often() {
    let (mut apf, level) = queuing(2, 64, 1, 100);
    let names = distinct_flows(&apf, level, 2);
    let reqs = burst(&names[0], 60, 2)
        .chain(burst(&names[1], 60, 1))
        .collect();
    let out = run(&mut apf, level, reqs, 1_000, 40_000);
    let (wide, narrow) = (out.started[&names[0]].len(), out.started[&names[1]].len());
    // Equal seat-seconds: 2·wide ≈ narrow, over 80 seat-seconds.
    assert!(
        (2 * wide).abs_diff(narrow) <= 2,
        "wide {wide}, narrow {narrow}"
    );
    assert!(2 * wide + narrow >= 78);
}

#[test]
fn an_elephant_fills_only_its_hand_and_a_mouse_overtakes_its_backlog() {
    let (mut apf, level) = queuing(4, 64, 8, 50);
    let mut reqs: Vec<Req> = burst("elephant", 1_000, 1).collect();
    reqs.push(Req {
        at_ms: 100,
        flow: "mouse".into(),
        width: 1,
    });
    let out = run(&mut apf, level, reqs, 1_000, 3_000);
    // 4 run at once, 8 queues of 50 hold 400: the other 596 are refused.
    assert_eq!(out.rejected["elephant"], 596);
    assert_eq!(out.rejected.get("mouse"), None);
    // The mouse arrived at 0.1 s behind 400 waiting elephant requests. Its
    // queue competes with each of the elephant's 8 queues as an equal, so
    // at most one round (one request from each elephant queue) goes first,
    // not the 400.
    let mouse = out.started["mouse"][0];
    let ahead = out.started["elephant"]
        .iter()
        .filter(|&&s| s > 100 && s <= mouse)
        .count();
    assert!(
        ahead <= 8,
        "{ahead} elephant requests started before the mouse at {mouse} ms"
    );
    assert!(mouse <= 2_000, "{mouse}");
}

#[test]
fn cancelling_a_waiting_request_frees_its_place_and_counts_it_rejected() {
    let (mut apf, level) = queuing(1, 4, 1, 1);
    let Admit::Dispatched(running) = apf.admit(level, "a", 1).admit else {
        panic!()
    };
    let Admit::Queued(waiting) = apf.admit(level, "a", 1).admit else {
        panic!()
    };
    assert_eq!(
        apf.admit(level, "a", 1).admit,
        Admit::Rejected(Rejected::QueueFull)
    );
    assert!(apf.cancel(waiting));
    assert!(!apf.cancel(waiting));
    let Admit::Queued(again) = apf.admit(level, "a", 1).admit else {
        panic!()
    };
    apf.advance_to(Duration::from_millis(10));
    assert_eq!(apf.complete(running), Some(vec![again]));
    let stats = apf.level_stats(level).unwrap();
    assert_eq!(
        (
            stats.dispatched,
            stats.rejected,
            stats.waiting,
            stats.seats_in_use
        ),
        (2, 2, 0, 1)
    );
}

#[test]
fn levels_share_the_seats_and_an_exempt_level_bypasses_them() {
    let mut apf = Apf::builder(3)
        .level("system", LevelSpec::exempt())
        .level("a", LevelSpec::limited(1, LimitResponse::Reject))
        .level("b", LevelSpec::limited(2, LimitResponse::Reject))
        .build()
        .unwrap();
    let (system, a, b) = ["system", "a", "b"]
        .map(|n| apf.level_id(n).unwrap())
        .into();
    // a: ceil(3·1/3) = 1 seat; b: 2 seats.
    assert!(matches!(apf.admit(a, "x", 1).admit, Admit::Dispatched(_)));
    assert_eq!(
        apf.admit(a, "x", 1).admit,
        Admit::Rejected(Rejected::NoSeat)
    );
    // A request wider than the level runs alone, with all its seats, as
    // Kubernetes runs it.
    let Admit::Dispatched(wide) = apf.admit(b, "y", 9).admit else {
        panic!()
    };
    assert_eq!(apf.level_stats(b).unwrap().seats_in_use, 9);
    assert_eq!(
        apf.admit(b, "y", 1).admit,
        Admit::Rejected(Rejected::NoSeat)
    );
    apf.complete(wide).unwrap();
    assert!(matches!(apf.admit(b, "y", 1).admit, Admit::Dispatched(_)));
    for _ in 0..100 {
        assert!(matches!(
            apf.admit(system, "kube-system", 5).admit,
            Admit::Dispatched(_)
        ));
    }
}

#[test]
fn bad_configurations_are_refused_by_field() {
    let queue = |queues, queue_length_limit, hand_size| LimitResponse::Queue {
        queues,
        queue_length_limit,
        hand_size,
    };
    let field = |limit| {
        Apf::builder(10)
            .level("l", LevelSpec::limited(1, limit))
            .build()
            .unwrap_err()
            .field()
    };
    assert_eq!(field(queue(0, 50, 1)), "queues");
    assert_eq!(field(queue(1 << 27, 50, 1)), "queues");
    assert_eq!(field(queue(64, 0, 8)), "queue_length_limit");
    assert_eq!(field(queue(64, 50, 0)), "hand_size");
    assert_eq!(field(queue(64, 50, 11)), "hand_size");
    let estimate = Apf::builder(10)
        .estimated_service(Duration::ZERO)
        .level("e", LevelSpec::exempt())
        .build()
        .unwrap_err();
    assert_eq!(estimate.field(), "estimated_service");
}
