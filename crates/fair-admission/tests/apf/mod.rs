//! Shared by the fairness tests: one queuing priority level, and flows that
//! each have a queue of their own.

use std::time::Duration;

use fair_admission::{Apf, LevelId, LevelSpec, LimitResponse};

/// A server of `seats` seats with one level, "workload", that queues in
/// `queues` queues of `limit`, hands of `hand`; service estimated at 1 s.
pub fn queuing(seats: u32, queues: usize, hand: usize, limit: usize) -> (Apf, LevelId) {
    let apf = Apf::builder(seats)
        .level(
            "workload",
            LevelSpec::limited(
                1,
                LimitResponse::Queue {
                    queues,
                    queue_length_limit: limit,
                    hand_size: hand,
                },
            ),
        )
        .estimated_service(Duration::from_secs(1))
        .build()
        .unwrap();
    let level = apf.level_id("workload").unwrap();
    (apf, level)
}

/// `n` flow names whose first queues differ: with hands of one queue, each
/// flow has a queue of its own.
pub fn distinct_flows(apf: &Apf, level: LevelId, n: usize) -> Vec<String> {
    let mut queues = Vec::new();
    (0..)
        .map(|i| format!("flow-{i}"))
        .filter(|name| {
            let q = apf.hand(level, name.as_str()).unwrap().next().unwrap();
            let fresh = !queues.contains(&q);
            queues.push(q);
            fresh
        })
        .take(n)
        .collect()
}
