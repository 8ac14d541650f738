//! Borrowing between priority levels, through the layer under tokio's
//! paused time: a level with idle seats lends them to a saturated level at
//! the next reallocation, and gets them back when its own demand returns.
#![cfg(feature = "tower")]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fair_admission::{Apf, BoxError, Class, FairnessLayer, LevelId, LevelSpec, LimitResponse};
use tokio::sync::Semaphore;
use tower::{Layer, ServiceExt, service_fn};

/// A request: (level index, flow).
type Req = (usize, String);

const QUEUE: LimitResponse = LimitResponse::Queue {
    queues: 64,
    queue_length_limit: 50,
    hand_size: 8,
};

/// Lets spawned requests run up to where they wait (no time passes).
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_level_lends_its_seats_and_takes_them_back_when_busy() {
    // 20 seats: "busy" and "lender" hold 10 each; the lender may lend half.
    let apf = Apf::builder(20)
        .level("busy", LevelSpec::limited(1, QUEUE))
        .level("lender", LevelSpec::limited(1, QUEUE).lendable_percent(50))
        .build()
        .unwrap();
    let levels: [LevelId; 2] = ["busy", "lender"].map(|n| apf.level_id(n).unwrap());
    let layer = FairnessLayer::new(apf, move |(level, flow): &Req| {
        Class::new(levels[*level], flow.clone())
    })
    .queue_wait(Duration::from_secs(60));
    // Requests run until the test ends; each level counts its running ones.
    let running: Arc<[AtomicUsize; 2]> = Arc::default();
    let never = Arc::new(Semaphore::new(0));
    let service = layer.layer(service_fn({
        let running = Arc::clone(&running);
        move |(level, _): Req| {
            let (running, never) = (Arc::clone(&running), Arc::clone(&never));
            async move {
                running[level].fetch_add(1, Ordering::SeqCst);
                let _ = never.acquire().await;
                Ok::<(), BoxError>(())
            }
        }
    }));
    let send = |level: usize, n: usize| {
        for i in 0..n {
            tokio::spawn(service.clone().oneshot((level, format!("flow-{i}"))));
        }
    };
    let seats = |l: LevelId| layer.level_stats(l).unwrap().seats;
    let running_now = |l: usize| running[l].load(Ordering::SeqCst);

    // As Kubernetes does, the seats are divided once at the start, with
    // no demand seen yet: each level's target is its lower bound (busy 10,
    // the lender 5), scaled to the 20 seats: 13 and 7.
    // t = 0: "busy" gets 20 requests; 13 run, 7 wait. The lender is idle.
    send(0, 20);
    settle().await;
    assert_eq!(
        (running_now(0), seats(levels[0]), seats(levels[1])),
        (13, 13, 7)
    );

    // Nothing completes; at the first reallocation (10 s) demand was 20
    // seats at "busy" and 0 at the lender, which keeps 5 (10 less 50 %):
    // 20 f + max(5, 0 f) = 20 gives f = 0.75, so "busy" gets 15.
    tokio::time::advance(Duration::from_millis(9_999)).await;
    settle().await;
    assert_eq!(running_now(0), 13, "no reallocation before the period ends");
    tokio::time::advance(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!((seats(levels[0]), seats(levels[1])), (15, 5));
    assert_eq!(
        running_now(0),
        15,
        "2 more borrowed seats run 2 waiting requests"
    );

    // t = 10 s: the lender's demand returns, 20 requests; 5 run at once.
    send(1, 20);
    settle().await;
    assert_eq!(running_now(1), 5);

    // At 20 s both levels wanted 20 seats over the period (busy: 15 run,
    // 5 wait; lender: 5 run, 15 wait): f = 0.5, 10 seats each. The lender
    // runs 5 more at once; "busy" keeps its 15 running but starts no more.
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!((seats(levels[0]), seats(levels[1])), (10, 10));
    assert_eq!((running_now(0), running_now(1)), (15, 10));
}

#[tokio::test(start_paused = true)]
async fn levels_that_lend_nothing_keep_their_nominal_seats() {
    let apf = Apf::builder(20)
        .level("busy", LevelSpec::limited(1, QUEUE))
        .level("idle", LevelSpec::limited(1, QUEUE))
        .build()
        .unwrap();
    let busy = apf.level_id("busy").unwrap();
    let layer = FairnessLayer::new(apf, move |flow: &String| Class::new(busy, flow.clone()))
        .queue_wait(Duration::from_secs(60));
    let never = Arc::new(Semaphore::new(0));
    let service = layer.layer(service_fn(move |_: String| {
        let never = Arc::clone(&never);
        async move {
            let _ = never.acquire().await;
            Ok::<(), BoxError>(())
        }
    }));
    for i in 0..20 {
        tokio::spawn(service.clone().oneshot(format!("flow-{i}")));
    }
    settle().await;
    tokio::time::advance(Duration::from_secs(30)).await;
    settle().await;
    let stats = layer.level_stats(busy).unwrap();
    assert_eq!(
        (stats.seats, stats.seats_in_use, stats.waiting),
        (10, 10, 10)
    );
}
