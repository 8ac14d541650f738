//! The sums a queue keeps of its waiting requests (the dump's
//! `InitialSeatsSum` and `MaxSeatsSum`) follow the requests that leave it,
//! dispatched or cancelled, as Kubernetes' queue set keeps them.

use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};

/// The one queue's row of the dump: (pending, initial seats sum, max seats sum).
fn queue(apf: &Apf) -> (String, String, String) {
    let table = apf.dump().queues();
    let row: Vec<String> = table
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|c| c.trim().to_owned())
        .collect();
    (row[2].clone(), row[6].clone(), row[7].clone())
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
    assert_eq!(queue(&apf), ("2".into(), "2".into(), "2".into()));

    // Alice's seat goes to Bob: he leaves the queue.
    let dispatched = apf.complete(alice).expect("alice was running");
    assert_eq!(dispatched.len(), 1);
    assert_eq!(queue(&apf), ("1".into(), "1".into(), "1".into()));

    // Carol gives up waiting.
    assert!(apf.cancel(carol));
    assert_eq!(queue(&apf), ("0".into(), "0".into(), "0".into()));
}
