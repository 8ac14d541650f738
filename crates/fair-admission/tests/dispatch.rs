//! Every request a call dispatches is reported to the caller, whichever
//! call it was: a request dispatched while another is admitted is not left
//! holding seats nobody knows about.

use std::collections::HashSet;
use std::time::Duration;

use fair_admission::{Admit, Apf, LevelSpec, LimitResponse};

#[test]
fn a_request_dispatched_while_another_is_admitted_is_reported() {
    // 6 seats, one level of 8 queues 10 long, hands of 1, u64 flows.
    let queuing = LimitResponse::Queue {
        queues: 8,
        queue_length_limit: 10,
        hand_size: 1,
    };
    let mut apf = Apf::builder(6)
        .level("l", LevelSpec::limited(1, queuing))
        .build()
        .unwrap();
    let l = apf.level_id("l").unwrap();
    let mut reported = HashSet::new();
    let Admit::Dispatched(t0) = apf.admit(l, &2u64, 6).admit else {
        panic!("the first request runs at once")
    };
    apf.advance_to(Duration::from_millis(127));
    reported.extend(apf.complete(t0).unwrap());
    let mut admit = |apf: &mut Apf, flow: u64, width: u32| {
        let admission = apf.admit(l, &flow, width);
        if let Admit::Dispatched(t) = admission.admit {
            reported.insert(t);
        }
        reported.extend(admission.dispatched);
        admission.admit
    };
    assert!(matches!(admit(&mut apf, 2, 3), Admit::Dispatched(_)));
    assert!(matches!(admit(&mut apf, 5, 4), Admit::Queued(_)));
    let Admit::Queued(t3) = admit(&mut apf, 2, 1) else {
        panic!("waits behind the 4-seat request")
    };
    assert!(matches!(admit(&mut apf, 2, 1), Admit::Queued(_)));
    assert!(matches!(admit(&mut apf, 3, 2), Admit::Dispatched(_)));
    let stats = apf.level_stats(l).unwrap();
    // 3 + 2 seats, and T3's one: T3 was dispatched by the last call.
    assert_eq!((stats.seats_in_use, stats.waiting), (6, 2));
    assert!(
        reported.contains(&t3),
        "T3 holds a seat but no call reported it dispatched"
    );
}
