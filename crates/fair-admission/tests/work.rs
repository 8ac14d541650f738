//! Work estimates through the layer under tokio's paused time: a write with
//! many watchers holds its seats after its response, for the events it left
//! behind, and a LIST of many objects takes many seats.
#![cfg(feature = "tower")]

use std::time::Duration;

use fair_admission::{
    Apf, BoxError, Class, FairnessLayer, LevelId, LevelSpec, LimitResponse, ObjectStats,
    Overloaded, Rejected, RequestInfo, WorkEstimate, WorkEstimator,
};
use tower::{Layer, ServiceExt, service_fn};

const MS: Duration = Duration::from_millis(1);

/// A request: its name and its estimate.
type Req = (&'static str, WorkEstimate);

/// A layer over a 10 ms handler, with one rejecting level of `seats` seats
/// that classifies each request by its estimate.
fn server(
    seats: u32,
) -> (
    FairnessLayer<impl Fn(&Req) -> Class + use<>>,
    impl tower::Service<Req, Response = (), Error = BoxError, Future: Send> + Clone + Send + 'static,
    LevelId,
) {
    let apf = Apf::builder(seats)
        .level("l", LevelSpec::limited(1, LimitResponse::Reject))
        .build()
        .unwrap();
    let l = apf.level_id("l").unwrap();
    let layer = FairnessLayer::new(apf, move |(name, work): &Req| {
        Class::new(l, *name).work(*work)
    });
    let service = layer.layer(service_fn(|_: Req| async {
        tokio::time::sleep(10 * MS).await;
        Ok::<(), BoxError>(())
    }));
    (layer, service, l)
}

#[tokio::test(start_paused = true)]
async fn seats_are_held_for_the_additional_latency_after_the_response() {
    let (layer, service, l) = server(4);
    let refused = |r: Result<(), BoxError>| {
        r.unwrap_err()
            .downcast_ref::<Overloaded>()
            .map(Overloaded::reason)
    };
    // 35 watchers: 4 seats held 5 ms after the 10 ms handler.
    let write = WorkEstimate::mutating(35);
    assert_eq!(write.max_seats(), 4);
    service.clone().oneshot(("write", write)).await.unwrap();
    assert_eq!(layer.level_stats(l).unwrap().seats_in_use, 4);
    let one = WorkEstimate::seats(1);
    let at_14ms = {
        tokio::time::sleep(4 * MS).await;
        service.clone().oneshot(("read", one)).await
    };
    assert_eq!(refused(at_14ms), Some(Rejected::NoSeat));
    tokio::time::sleep(MS).await;
    // The release runs on its own task, at the same instant.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        layer.level_stats(l).unwrap().seats_in_use,
        0,
        "freed at 15 ms"
    );
    service.clone().oneshot(("read", one)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_large_list_takes_the_seats_its_objects_call_for() {
    let (layer, service, l) = server(10);
    let pods = RequestInfo {
        verb: "list",
        resource: "pods",
        ..RequestInfo::default()
    };
    let stored = ObjectStats::Known {
        count: 300,
        average_size: 2_000,
    };
    let list = WorkEstimator::default().list(&pods, None, stored);
    // 300 objects of 2 kB read from storage: 6 seats of 100 kB. Two of
    // them do not fit in 10 seats.
    assert_eq!(list.max_seats(), 6);
    let first = tokio::spawn(service.clone().oneshot(("list-1", list)));
    tokio::task::yield_now().await;
    assert_eq!(layer.level_stats(l).unwrap().seats_in_use, 6);
    let second = service.clone().oneshot(("list-2", list)).await;
    let why = second
        .unwrap_err()
        .downcast_ref::<Overloaded>()
        .map(Overloaded::reason);
    assert_eq!(why, Some(Rejected::NoSeat));
    first.await.unwrap().unwrap();
}
