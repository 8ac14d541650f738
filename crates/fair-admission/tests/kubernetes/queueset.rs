//! Ports of the uniform scenarios of Kubernetes' queue set tests
//! (`pkg/util/flowcontrol/fairqueuing/queueset/queueset_test.go`), with
//! Kubernetes' parameters and tolerances, on a virtual clock. Each level
//! here has exactly the scenario's concurrency limit as its seats and the
//! default estimated service time, 3 ms.

use std::time::Duration;

use fair_admission::{Admit, Apf, LevelId, LevelSpec, LimitResponse};

use crate::scenario::{Client, Scenario, client, secs};

const SECOND: Duration = Duration::from_secs(1);

/// One queuing level of `limit` seats.
fn queuing(
    queues: usize,
    queue_length_limit: usize,
    hand_size: usize,
    limit: u32,
) -> (Apf, LevelId) {
    let response = LimitResponse::Queue {
        queues,
        queue_length_limit,
        hand_size,
    };
    level(limit, LevelSpec::limited(1, response))
}

fn level(seats: u32, spec: LevelSpec) -> (Apf, LevelId) {
    let apf = Apf::builder(seats).level("l", spec).build().unwrap();
    let level = apf.level_id("l").unwrap();
    (apf, level)
}

/// A scenario expecting every client within `margin` of its fair share
/// and every request served.
fn fair(
    apf: (Apf, LevelId),
    clients: Vec<Client>,
    limit: u32,
    eval: Duration,
    margin: f64,
) -> Scenario {
    Scenario {
        apf: apf.0,
        level: apf.1,
        clients,
        concurrency_limit: f64::from(limit),
        eval,
        expect_fair: vec![true],
        margin: vec![margin],
        expect_all_requests: true,
        expected_averages: None,
    }
}

/// `TestBaseline` (queueset_test.go:531): one client of one thread, one
/// seat: it holds the seat the whole time, exactly.
#[test]
fn test_baseline() {
    let clients = vec![client(1001001001, 1, 21, SECOND, 0)];
    fair(queuing(9, 8, 3, 1), clients, 1, 20 * SECOND, 0.0).exercise("TestBaseline");
}

/// `TestExampt` (queueset_test.go:568), with concurrency limits 0 and 2:
/// an exempt level runs everything, each request 3 seats wide, whatever
/// its limit.
#[test]
fn test_exempt() {
    for (seats, shares) in [(1, 0), (2, 1)] {
        let (apf, level) = level(seats, LevelSpec::exempt().shares(shares));
        let limit = apf.level_stats(level).unwrap().seats;
        let mut c = client(1001001001, 5, 20, SECOND, secs(1.0));
        c.initial_seats = 3;
        let mut s = fair((apf, level), vec![c], 1, 40 * SECOND, 0.000_000_01);
        s.expected_averages = Some(vec![7.5]);
        s.exercise(&format!("TestExampt/concurrency={limit}"));
    }
}

/// Think time (s), pad (s), final seats, concurrency, clients, and the
/// averages expected if not the fair ones.
type Separation = (f64, f64, u32, u32, usize, Option<Vec<f64>>);

/// `TestSeparations` (queueset_test.go:608): every combination of think
/// time, additional latency ("pad") with its final seats, concurrency and
/// one or two clients, over 24 s (a multiple of every period), with a
/// margin of zero.
#[test]
fn test_separations() {
    let flts = |v: &[f64]| Some(v.to_vec());
    let third = 1.0 / 3.0;
    #[rustfmt::skip]
    let cases: [Separation; 24] = [
        (1.0, 0.0, 1, 1, 1, None), (1.0, 0.0, 1, 2, 1, None), (1.0, 0.0, 2, 2, 1, None),
        (1.0, 0.0, 1, 1, 2, None), (1.0, 0.0, 1, 2, 2, None), (1.0, 0.0, 2, 2, 2, None),
        (0.0, 1.0, 1, 1, 1, flts(&[0.5])), (0.0, 1.0, 1, 2, 1, None),
        (0.0, 1.0, 2, 2, 1, flts(&[0.5])), (0.0, 1.0, 1, 1, 2, flts(&[0.25, 0.25])),
        (0.0, 1.0, 1, 2, 2, flts(&[0.5, 0.5])), (0.0, 1.0, 2, 2, 2, flts(&[0.25, 0.25])),
        (1.0, 0.5, 1, 1, 1, None), (1.0, 0.5, 1, 2, 1, None), (1.0, 0.5, 2, 2, 1, None),
        (1.0, 0.5, 1, 1, 2, flts(&[third, third])), (1.0, 0.5, 1, 2, 2, None),
        (1.0, 0.5, 2, 2, 2, flts(&[third, third])),
        (0.5, 1.0, 1, 1, 1, flts(&[0.5])), (0.5, 1.0, 1, 2, 1, None),
        (0.5, 1.0, 2, 2, 1, flts(&[0.5])), (0.5, 1.0, 1, 1, 2, flts(&[0.25, 0.25])),
        (0.5, 1.0, 1, 2, 2, flts(&[0.5, 0.5])), (0.5, 1.0, 2, 2, 2, flts(&[0.25, 0.25])),
    ];
    for (think, pad, final_seats, conc, n_clients, exp) in cases {
        let name = format!(
            "TestSeparations/think={think}s,finalSeats={final_seats},pad={pad}s,nClients={n_clients},conc={conc}"
        );
        let clients: Vec<Client> = [1001001001, 2002002002]
            .into_iter()
            .take(n_clients)
            .map(|hash| Client {
                final_seats,
                pad: secs(pad),
                ..client(hash, 1, 25, SECOND, secs(think))
            })
            .collect();
        let mut s = fair(queuing(9, 8, 3, conc), clients, conc, 24 * SECOND, 0.0);
        s.expected_averages = exp;
        s.exercise(&name);
    }
}

/// `TestUniformFlowsHandSize1` (queueset_test.go:681).
#[test]
fn test_uniform_flows_hand_size_1() {
    let clients = vec![
        client(1001001001, 8, 20, SECOND, secs(1.0) - 1),
        client(2002002002, 8, 20, SECOND, secs(1.0) - 1),
    ];
    fair(queuing(9, 8, 1, 4), clients, 4, 50 * SECOND, 0.01).exercise("TestUniformFlowsHandSize1");
}

/// `TestUniformFlowsHandSize3` (queueset_test.go:719).
#[test]
fn test_uniform_flows_hand_size_3() {
    let clients = vec![
        client(400900100100, 8, 30, SECOND, secs(1.0) - 1),
        client(300900200200, 8, 30, SECOND, secs(1.0) - 1),
    ];
    fair(queuing(8, 16, 3, 4), clients, 4, 60 * SECOND, 0.03).exercise("TestUniformFlowsHandSize3");
}

/// `TestDifferentFlowsExpectEqual` (queueset_test.go:756).
#[test]
fn test_different_flows_expect_equal() {
    let clients = vec![
        client(1001001001, 8, 20, SECOND, secs(1.0)),
        client(2002002002, 7, 30, SECOND, secs(0.5)),
    ];
    fair(queuing(9, 8, 1, 4), clients, 4, 40 * SECOND, 0.01).exercise("DiffFlowsExpectEqual");
}

/// `TestSeatSecondsRollover` (queueset_test.go:795): requests of 500
/// seats that run for a quarter of a year, over 40 quarters: the progress
/// meter is wound back (Kubernetes expects 8 times) and fairness holds.
#[test]
fn test_seat_seconds_rollover() {
    const QUARTER: Duration = Duration::from_secs(91 * 24 * 3600);
    let quarter = QUARTER.as_nanos() as i64;
    let clients = vec![
        Client {
            initial_seats: 500,
            ..client(1001001001, 8, 20, QUARTER, quarter)
        },
        Client {
            initial_seats: 500,
            ..client(2002002002, 7, 30, QUARTER, quarter / 2)
        },
    ];
    let outcome = fair(queuing(9, 8, 1, 2000), clients, 2000, 40 * QUARTER, 0.01)
        .exercise("TestSeatSecondsRollover");
    let level = outcome.apf.level_id("l").unwrap();
    assert_eq!(outcome.apf.level_stats(level).unwrap().epoch_advances, 8);
}

/// `TestDifferentFlowsExpectUnequal` (queueset_test.go:836).
#[test]
fn test_different_flows_expect_unequal() {
    let clients = vec![
        client(1001001001, 4, 20, SECOND, secs(1.0) - 1),
        client(2002002002, 2, 20, SECOND, secs(1.0) - 1),
    ];
    fair(queuing(9, 6, 1, 3), clients, 3, 20 * SECOND, 0.01).exercise("DiffFlowsExpectUnequal");
}

/// `TestDifferentWidths` (queueset_test.go:874): one-seat and two-seat
/// requests get equal seat time.
#[test]
fn test_different_widths() {
    let clients = vec![
        client(10010010010010, 13, 10, SECOND, secs(1.0) - 1),
        Client {
            initial_seats: 2,
            ..client(20020020020020, 7, 10, SECOND, secs(1.0) - 1)
        },
    ];
    fair(queuing(64, 13, 7, 6), clients, 6, 20 * SECOND, 0.155).exercise("TestDifferentWidths");
}

/// `TestTooWide` (queueset_test.go:911): four flows of two-seat requests
/// and one of seven-seat requests, on six seats: the seven-seat requests
/// run alone and still get about their share.
#[test]
fn test_too_wide() {
    let wide = |hash, seats| Client {
        initial_seats: seats,
        ..client(hash, 15, 21, SECOND, secs(1.0) - 1)
    };
    let clients = vec![
        wide(40040040040040, 2),
        wide(50050050050050, 2),
        wide(60060060060060, 2),
        wide(70070070070070, 2),
        wide(90090090090090, 7),
    ];
    fair(queuing(64, 35, 7, 6), clients, 6, 400 * SECOND, 0.35).exercise("TestTooWide");
}

/// `TestWindup` (queueset_test.go:964), both of its cases: a flow that
/// cannot use its share in the first half and can in the second; fair in
/// the first half, and in the second within 26 % ("upper-bound") but not
/// within 10 % ("lower-bound") of fair.
#[test]
fn test_windup() {
    for (margin, expect_fair, name) in [(0.26, true, "upper-bound"), (0.1, false, "lower-bound")] {
        let clients = vec![
            client(1001001001, 2, 40, SECOND, -1),
            Client {
                split: true,
                ..client(2002002002, 2, 40, SECOND, -1)
            },
        ];
        let mut s = fair(queuing(9, 6, 1, 3), clients, 3, 40 * SECOND, 0.01);
        s.expect_fair = vec![true, expect_fair];
        s.margin = vec![0.01, margin];
        s.exercise(&format!("TestWindup/{name}"));
    }
}

/// `TestDifferentFlowsWithoutQueuing` (queueset_test.go:1012): a level
/// that refuses instead of queuing is not fair, and refuses requests.
#[test]
fn test_different_flows_without_queuing() {
    let clients = vec![
        client(1001001001, 6, 10, SECOND, secs(0.057)),
        client(2002002002, 4, 15, SECOND, secs(0.75)),
    ];
    let apf = level(4, LevelSpec::limited(1, LimitResponse::Reject));
    let mut s = fair(apf, clients, 4, 13 * SECOND, 0.2);
    s.expect_fair = vec![false];
    s.expect_all_requests = false;
    s.exercise("TestDifferentFlowsWithoutQueuing");
}

/// `TestContextCancel` (queueset_test.go:1062): one seat; the first
/// request runs while a second waits in its queue, and the second's caller
/// gives up a second later. The second never runs, the first completes,
/// and the level ends idle. (Kubernetes' caller cancels a context the
/// waiting request watches; here the caller cancels its ticket.)
#[test]
fn test_context_cancel() {
    let (mut apf, level) = queuing(11, 11, 1, 1);
    let Admit::Dispatched(first) = apf.admit_hashed(level, 1, 1).admit else {
        panic!("the first request runs")
    };
    let second = apf.admit_hashed(level, 2, 1);
    let Admit::Queued(second) = second.admit else {
        panic!("the second waits: {second:?}")
    };
    assert_eq!(apf.level_stats(level).unwrap().waiting, 1);
    apf.advance_to(SECOND);
    assert!(apf.cancel(second), "it was still waiting");
    assert_eq!(apf.complete(first), Some(vec![]), "nothing else runs");
    let stats = apf.level_stats(level).unwrap();
    assert_eq!(
        (
            stats.executing,
            stats.waiting,
            stats.dispatched,
            stats.cancelled
        ),
        (0, 0, 1, 1)
    );
    assert_eq!(apf.complete(second), None, "the second never ran");
}

/// `TestTotalRequestsExecutingWithPanic` (queueset_test.go:1170): a
/// request whose handler panics while it executes no longer counts as
/// executing. Kubernetes' queue set is told by a deferred call; here the
/// layer's seat is released as the panic unwinds through the request.
#[cfg(feature = "tower")]
#[tokio::test]
async fn test_total_requests_executing_with_panic() {
    use fair_admission::{BoxError, Class, FairnessLayer};
    use tower::{Layer, ServiceExt, service_fn};

    let (apf, level) = level(1, LevelSpec::limited(1, LimitResponse::Reject));
    assert_eq!(apf.level_stats(level).unwrap().executing, 0);
    let layer = FairnessLayer::new(apf, move |_: &()| Class::new(level, "one"));
    let observer = layer.clone();
    let service = layer.layer(service_fn(move |()| {
        let executing = observer.level_stats(level).unwrap().executing;
        async move {
            assert_eq!(executing, 1, "it counts as executing while it runs");
            panic!("the handler panics");
            #[allow(unreachable_code)]
            Ok::<(), BoxError>(())
        }
    }));
    let ran = tokio::spawn(service.oneshot(())).await;
    assert!(ran.unwrap_err().is_panic());
    let stats = layer.level_stats(level).unwrap();
    assert_eq!((stats.executing, stats.seats_in_use), (0, 0));
}
