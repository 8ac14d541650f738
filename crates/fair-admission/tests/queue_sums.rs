//! A queue's sums of the work waiting in it, as the dump shows them: they
//! follow the requests that leave it, dispatched or cancelled, and a new
//! request joins the queue of its hand with the least work waiting, as in
//! Kubernetes' queue set; a dispatched request's final seats beyond the
//! limit are lowered to it.

use fair_admission::{Admit, Apf, LevelSpec, LimitResponse, WorkEstimate};

/// The one queue's row of the dump: (pending, seats in use, initial seats
/// sum, max seats sum).
fn queue(apf: &Apf) -> (String, String, String, String) {
    let table = apf.dump().queues();
    let row: Vec<String> = table
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|c| c.trim().to_owned())
        .collect();
    (
        row[2].clone(),
        row[4].clone(),
        row[6].clone(),
        row[7].clone(),
    )
}

#[test]
fn a_queues_sums_drop_when_a_request_is_dispatched_or_cancelled() {
    let queuing = LimitResponse::Queue {
        queues: 1,
        queue_length_limit: 10,
        hand_size: 1,
    };
    let mut apf = Apf::builder(1)
        .level("workload", LevelSpec::limited(1, queuing))
        .build()
        .unwrap();
    let level = apf.level_id("workload").unwrap();
    let Admit::Dispatched(alice) = apf.admit(level, &"alice", 1).admit else {
        panic!("a free seat")
    };
    let Admit::Queued(_bob) = apf.admit(level, &"bob", 1).admit else {
        panic!("no seat left")
    };
    let Admit::Queued(carol) = apf.admit(level, &"carol", 1).admit else {
        panic!("no seat left")
    };
    assert_eq!(
        queue(&apf),
        ("2".into(), "1".into(), "2".into(), "2".into())
    );

    // Alice's seat goes to Bob: he leaves the queue.
    let dispatched = apf.complete(alice).expect("alice was running");
    assert_eq!(dispatched.len(), 1);
    // Alice's seat is freed, Bob's taken.
    assert_eq!(
        queue(&apf),
        ("1".into(), "1".into(), "1".into(), "1".into())
    );

    // Carol gives up waiting.
    assert!(apf.cancel(carol));
    assert_eq!(
        queue(&apf),
        ("0".into(), "1".into(), "0".into(), "0".into())
    );
}

/// The queue index of each waiting request, by flow, from the dump.
fn queue_of(apf: &Apf) -> std::collections::HashMap<String, String> {
    let table = apf.dump().requests();
    table
        .lines()
        .skip(1)
        .map(|l| {
            l.split(',')
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|r| r[3] != "-1")
        .map(|r| (r[4].clone(), r[2].clone()))
        .collect()
}

#[test]
fn a_request_joins_the_queue_of_its_hand_with_the_least_work_waiting() {
    // Two queues, a hand of both: every request chooses between them,
    // starting one card further along the hand each time, and joins the
    // one with the least work waiting (the first one seen on a tie).
    let queuing = LimitResponse::Queue {
        queues: 2,
        queue_length_limit: 10,
        hand_size: 2,
    };
    let mut apf = Apf::builder(2)
        .level("workload", LevelSpec::limited(1, queuing))
        .build()
        .unwrap();
    let level = apf.level_id("workload").unwrap();
    let Admit::Dispatched(_running) = apf.admit(level, &"running", WorkEstimate::seats(2)).admit
    else {
        panic!("two free seats")
    };
    // r1 and r4 are twice the work of the others.
    for (flow, seats) in [
        ("r1", 2),
        ("r2", 1),
        ("r3", 1),
        ("r4", 2),
        ("r5", 1),
        ("r6", 1),
    ] {
        let Admit::Queued(ticket) = apf.admit(level, &flow, WorkEstimate::seats(seats)).admit
        else {
            panic!("no seat left")
        };
        apf.name_flow(ticket, "workload", flow);
    }
    let queue = queue_of(&apf);
    // r2 avoids r1's queue (2 units waiting against none), and r3 joins
    // r2's (1 unit against 2).
    assert_ne!(queue["r1"], queue["r2"], "{queue:?}");
    assert_eq!(queue["r3"], queue["r2"], "{queue:?}");
    // Whichever queue r4 joined on the tie, the other then has less work:
    // r5 and r6 join the lighter one.
    let lighter = if queue["r4"] == queue["r1"] {
        &queue["r2"]
    } else {
        &queue["r1"]
    };
    assert_eq!(&queue["r5"], lighter, "{queue:?}");
    assert_eq!(&queue["r6"], lighter, "{queue:?}");
}

#[test]
fn final_seats_beyond_the_limit_are_lowered_to_it_keeping_the_final_work() {
    let queuing = LimitResponse::Queue {
        queues: 1,
        queue_length_limit: 10,
        hand_size: 1,
    };
    let mut apf = Apf::builder(2)
        .level("workload", LevelSpec::limited(1, queuing))
        .build()
        .unwrap();
    let level = apf.level_id("workload").unwrap();
    let mut write = WorkEstimate::seats(1);
    write.final_seats = 5;
    write.additional_latency = std::time::Duration::from_millis(10);
    let Admit::Dispatched(ticket) = apf.admit(level, &"writer", write).admit else {
        panic!("a free seat")
    };
    apf.name_flow(ticket, "workload", "writer");
    let table = apf.dump().requests();
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    // 5 seats for 10 ms become the level's 2 seats for 25 ms.
    assert_eq!(row[7..9], ["2", "25ms"], "{table}");
}
