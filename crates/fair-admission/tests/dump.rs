//! The dump of levels, queues and requests, with the columns of
//! Kubernetes' `/debug/api_priority_and_fairness/dump_*` endpoints.

use std::time::Duration;

use fair_admission::{Admit, Apf, LevelSpec, LimitResponse, WorkEstimate};

/// A line's cells, as the tables separate them.
fn cells(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

#[test]
fn the_dump_lists_every_level_queue_and_request_with_kubernetes_columns() {
    let queuing = LimitResponse::Queue {
        queues: 4,
        queue_length_limit: 10,
        hand_size: 1,
    };
    let mut apf = Apf::builder(2)
        .level("exempt", LevelSpec::exempt())
        .level("workload", LevelSpec::limited(1, queuing))
        .level("catch-all", LevelSpec::limited(1, LimitResponse::Reject))
        .build()
        .unwrap();
    let [exempt, workload, catch_all] =
        ["exempt", "workload", "catch-all"].map(|n| apf.level_id(n).unwrap());
    let Admit::Dispatched(system) = apf.admit(exempt, &"kubelet", 1).admit else {
        panic!()
    };
    apf.name_flow(system, "exempt", "kubelet");
    let mut write = WorkEstimate::seats(1);
    write.final_seats = 1;
    write.additional_latency = Duration::from_millis(5);
    let Admit::Dispatched(running) = apf.admit(workload, &"alice", write).admit else {
        panic!()
    };
    apf.name_flow(running, "service-accounts", "alice");
    apf.advance_to(Duration::from_millis(1_500));
    let Admit::Queued(waiting) = apf.admit(workload, &"bob", 1).admit else {
        panic!()
    };
    apf.name_flow(waiting, "service-accounts", "bob");
    assert!(matches!(
        apf.admit(catch_all, &"x", 1).admit,
        Admit::Dispatched(_)
    ));
    assert!(matches!(
        apf.admit(catch_all, &"y", 1).admit,
        Admit::Rejected(_)
    ));

    let dump = apf.dump();
    let levels = dump.priority_levels();
    let lines: Vec<&str> = levels.lines().collect();
    assert_eq!(
        cells(lines[0]),
        [
            "PriorityLevelName",
            "ActiveQueues",
            "IsIdle",
            "IsQuiescing",
            "WaitingRequests",
            "ExecutingRequests",
            "DispatchedRequests",
            "RejectedRequests",
            "TimedoutRequests",
            "CancelledRequests"
        ]
    );
    // Sorted by name, as Kubernetes sorts them.
    assert_eq!(
        cells(lines[1]),
        [
            "catch-all",
            "0",
            "false",
            "false",
            "0",
            "1",
            "1",
            "1",
            "0",
            "0"
        ]
    );
    assert_eq!(
        cells(lines[2]),
        [
            "exempt", "0", "false", "false", "0", "1", "1", "0", "0", "0"
        ]
    );
    assert_eq!(
        cells(lines[3]),
        [
            "workload", "1", "false", "false", "1", "1", "1", "0", "0", "0"
        ]
    );
    assert_eq!(lines.len(), 4);

    let queues = dump.queues();
    let lines: Vec<&str> = queues.lines().collect();
    assert_eq!(
        cells(lines[0]),
        [
            "PriorityLevelName",
            "Index",
            "PendingRequests",
            "ExecutingRequests",
            "SeatsInUse",
            "NextDispatchR",
            "InitialSeatsSum",
            "MaxSeatsSum",
            "TotalWorkSum"
        ]
    );
    // Every queue of the queuing level, and only those.
    assert_eq!(lines.len(), 1 + 4);
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| cells(l)).collect();
    assert!(rows.iter().all(|r| r[0] == "workload"));
    let busy: Vec<&Vec<&str>> = rows.iter().filter(|r| r[2] != "0" || r[3] != "0").collect();
    assert_eq!(busy.len(), 2, "{queues}");
    // Bob waits: one seat of 3 ms of estimated work.
    assert!(
        rows.iter()
            .any(|r| r[2] == "1" && r[6] == "1" && r[7] == "1" && r[8] == "0.00300000ss")
    );

    let requests = dump.requests();
    let lines: Vec<&str> = requests.lines().collect();
    assert_eq!(
        cells(lines[0]),
        [
            "PriorityLevelName",
            "FlowSchemaName",
            "QueueIndex",
            "RequestIndexInQueue",
            "FlowDistingsher",
            "ArriveTime",
            "InitialSeats",
            "FinalSeats",
            "AdditionalLatency",
            "StartTime"
        ]
    );
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| cells(l)).collect();
    assert_eq!(rows.len(), 4, "{requests}");
    let row = |who: &str| rows.iter().find(|r| r[4] == who).unwrap();
    assert_eq!(row("kubelet")[..4], ["exempt", "exempt", "-1", "-1"]);
    let alice = row("alice");
    assert_eq!(
        (alice[0], alice[1], alice[3]),
        ("workload", "service-accounts", "-1")
    );
    assert_eq!(alice[5..], ["0s", "1", "1", "5ms", "0s"]);
    let bob = row("bob");
    assert_eq!((bob[3], bob[5], bob[9]), ("0", "1.5s", ""));
    assert_ne!(bob[2], "-1");
    // The unnamed request of the rejecting level is listed too.
    assert!(rows.iter().any(|r| r[0] == "catch-all" && r[2] == "-1"));
}

/// With the `http` feature the layer serves the dump at Kubernetes' paths.
#[cfg(feature = "http")]
#[tokio::test]
async fn the_debug_service_serves_the_three_tables_at_kubernetes_paths() {
    use fair_admission::{Class, FairnessLayer};
    use tower::ServiceExt;

    let apf = Apf::builder(10)
        .level("exempt", LevelSpec::exempt())
        .build()
        .unwrap();
    let level = apf.level_id("exempt").unwrap();
    let layer = FairnessLayer::new(apf, move |_: &()| Class::new(level, ""));
    let get = |path: &str| {
        let request = http::Request::get(path).body(()).unwrap();
        layer.debug_service().oneshot(request)
    };
    let base = "/debug/api_priority_and_fairness";
    for (path, header) in [
        ("dump_priority_levels", "PriorityLevelName, ActiveQueues,"),
        ("dump_queues", "PriorityLevelName, Index,"),
        ("dump_requests", "PriorityLevelName, FlowSchemaName,"),
    ] {
        let response = get(&format!("{base}/{path}")).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; charset=utf-8"
        );
        let first = response.body().lines().next().unwrap().replace(",  ", ", ");
        assert!(
            cells(&first)
                .join(", ")
                .starts_with(header.trim_end_matches(',')),
            "{path}: {first}"
        );
    }
    let endpoints = [
        format!("{base}/dump_priority_levels"),
        format!("{base}/dump_queues"),
        format!("{base}/dump_requests"),
    ];
    // The index lists the endpoints, with or without its slash.
    for index in [format!("{base}/"), base.to_owned()] {
        let response = get(&index).await.unwrap();
        assert_eq!(response.status(), 200, "{index}");
        for endpoint in &endpoints {
            assert!(
                response.body().contains(endpoint.as_str()),
                "{index}: {}",
                response.body()
            );
        }
    }
    // Any other path is not found, and says what is there.
    let response = get(&format!("{base}/dump_nothing")).await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(
        response.body().contains("dump_nothing"),
        "{}",
        response.body()
    );
    for endpoint in &endpoints {
        assert!(
            response.body().contains(endpoint.as_str()),
            "{}",
            response.body()
        );
    }
}
