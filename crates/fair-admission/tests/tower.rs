//! The fairness layer on a tower service under tokio's paused time: fair
//! shares between flows, 429-style refusals when a queue is full or a wait
//! runs out, and nothing held by a request that went away.
#![cfg(feature = "tower")]

use std::sync::Arc;
use std::time::Duration;

use fair_admission::{BoxError, Class, FairnessLayer, Overloaded, Rejected};
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt, service_fn};

mod apf;

use apf::{distinct_flows, queuing};

const SEC: Duration = Duration::from_secs(1);

/// A request: the flow (user) that sends it.
type Req = String;

/// A service that works `work` per request and logs (flow, finish time).
type Log = Arc<Mutex<Vec<(String, Duration)>>>;

fn layered(
    layer: &FairnessLayer<impl Fn(&Req) -> Class + Send + Sync + 'static>,
    work: Duration,
    log: &Log,
    t0: Instant,
) -> impl Service<Req, Response = (), Error = BoxError, Future: Send> + Clone + Send + 'static {
    let log = Arc::clone(log);
    let inner = service_fn(move |flow: Req| {
        let log = Arc::clone(&log);
        async move {
            tokio::time::sleep(work).await;
            log.lock().push((flow, t0.elapsed()));
            Ok::<(), BoxError>(())
        }
    });
    layer.layer(inner)
}

#[tokio::test(start_paused = true)]
async fn two_backlogged_flows_alternate_and_a_light_flow_is_served_promptly() {
    let (apf, level) = queuing(1, 64, 1, 100);
    let flows = distinct_flows(&apf, level, 3);
    let layer = FairnessLayer::new(apf, move |user: &Req| Class::new(level, user.clone()))
        .queue_wait(120 * SEC);
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let service = layered(&layer, SEC, &log, t0);
    let mut tasks = Vec::new();
    for flow in &flows[..2] {
        for _ in 0..20 {
            tasks.push(tokio::spawn(service.clone().oneshot(flow.clone())));
        }
    }
    // The light flow sends one request every 4 s.
    let light = flows[2].clone();
    let mut light_waits = Vec::new();
    for _ in 0..5 {
        tokio::time::sleep(4 * SEC).await;
        let sent = Instant::now();
        service.clone().oneshot(light.clone()).await.unwrap();
        light_waits.push(sent.elapsed());
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // 1 s of work each, behind at most the one running and one of each
    // backlogged flow (fair queuing's virtual clock owes a queue that
    // waited since before the light request came its turn first).
    assert!(light_waits.iter().all(|w| *w <= 3 * SEC), "{light_waits:?}");
    let log = log.lock();
    // Until the backlogs drain, the two heavy flows take turns.
    let heavy: Vec<&str> = log
        .iter()
        .filter(|(f, _)| f != &light)
        .map(|(f, _)| f.as_str())
        .take(30)
        .collect();
    let firsts = heavy.iter().take(30).filter(|f| **f == flows[0]).count();
    assert!((14..=16).contains(&firsts), "{firsts} of 30: {heavy:?}");
    assert_eq!(log.len(), 45);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_refused_at_once_with_retry_after() {
    let (apf, level) = queuing(1, 64, 1, 2);
    let layer = FairnessLayer::new(apf, move |user: &Req| Class::new(level, user.clone()))
        .retry_after(Duration::from_millis(1_500))
        .queue_wait(60 * SEC);
    let log: Log = Arc::default();
    let service = layered(&layer, 10 * SEC, &log, Instant::now());
    // One runs, two wait, the fourth finds the queue full.
    let held: Vec<_> = (0..3)
        .map(|_| tokio::spawn(service.clone().oneshot("bulk".to_owned())))
        .collect();
    tokio::task::yield_now().await;
    let started = Instant::now();
    let err = service
        .clone()
        .oneshot("bulk".to_owned())
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    let overloaded = err
        .downcast_ref::<Overloaded>()
        .expect("an Overloaded error");
    assert_eq!(overloaded.reason(), Rejected::QueueFull);
    assert_eq!(overloaded.retry_after_secs(), 2);
    let stats = layer.level_stats(level).unwrap();
    assert_eq!(
        (stats.seats_in_use, stats.waiting, stats.rejected),
        (1, 2, 1)
    );
    for h in held {
        h.await.unwrap().unwrap();
    }
    assert_eq!(log.lock().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_request_that_waits_too_long_is_refused_when_its_wait_runs_out() {
    let (apf, level) = queuing(1, 64, 1, 10);
    let layer = FairnessLayer::new(apf, move |user: &Req| Class::new(level, user.clone()))
        .queue_wait(3 * SEC);
    let log: Log = Arc::default();
    let service = layered(&layer, 10 * SEC, &log, Instant::now());
    let running = tokio::spawn(service.clone().oneshot("slow".to_owned()));
    tokio::task::yield_now().await;
    let started = Instant::now();
    let err = service
        .clone()
        .oneshot("slow".to_owned())
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), 3 * SEC);
    assert_eq!(
        err.downcast_ref::<Overloaded>().unwrap().reason(),
        Rejected::TimedOut
    );
    running.await.unwrap().unwrap();
    let stats = layer.level_stats(level).unwrap();
    assert_eq!(
        (
            stats.seats_in_use,
            stats.waiting,
            stats.dispatched,
            stats.rejected
        ),
        (0, 0, 1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_goes_away_gives_up_its_place_and_its_seat() {
    let (apf, level) = queuing(1, 64, 1, 10);
    let layer = FairnessLayer::new(apf, move |user: &Req| Class::new(level, user.clone()));
    let log: Log = Arc::default();
    let service = layered(&layer, 10 * SEC, &log, Instant::now());
    let running = tokio::spawn(service.clone().oneshot("a".to_owned()));
    let waiting = tokio::spawn(service.clone().oneshot("a".to_owned()));
    tokio::task::yield_now().await;
    assert_eq!(layer.level_stats(level).unwrap().waiting, 1);
    waiting.abort();
    let _ = waiting.await;
    assert_eq!(layer.level_stats(level).unwrap().waiting, 0);
    // Dropping the running request releases its seat at once.
    running.abort();
    let _ = running.await;
    assert_eq!(layer.level_stats(level).unwrap().seats_in_use, 0);
    let started = Instant::now();
    service.clone().oneshot("b".to_owned()).await.unwrap();
    assert_eq!(started.elapsed(), 10 * SEC);
}
