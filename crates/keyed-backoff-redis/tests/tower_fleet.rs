//! The tower layer (keyed-backoff-tower) over the store, shared by a
//! fleet: three clients, each with a Redis connection of its own (three
//! replicas), one upstream. A `429` with `Retry-After: 2` answered to one
//! client holds that key on all three for 2 s, and no other key. On a real
//! redis-server the test starts, so on real time: waits are checked
//! against the floor's end, with the time the calls took as the only
//! slack.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use keyed_backoff_redis::RedisBackoff;
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_testkit::redis_server::Server;
use keyed_backoff_tower::keyed_backoff::Gate;
use keyed_backoff_tower::{BoxError, InBackoff, KeyedBackoffLayer, RetryHttp};
use tokio::time::Instant;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

type Get = Request<()>;
type Client = BoxCloneService<Get, Response<()>, BoxError>;

fn get(host: &str) -> Get {
    Request::get(format!("http://{host}/")).body(()).unwrap()
}

fn host(req: &Get) -> String {
    req.uri().host().unwrap_or_default().to_owned()
}

/// When requests reached the upstream: (host, time since the start).
type Log = Arc<Mutex<Vec<(String, Duration)>>>;

/// The upstream: `busy`'s first request is answered 429 with
/// `Retry-After: 2`, everything else 200.
fn upstream(log: &Log, start: Instant) -> BoxCloneService<Get, Response<()>, http::Error> {
    let log = Arc::clone(log);
    let answered = Arc::new(Mutex::new(false));
    BoxCloneService::new(tower::service_fn(move |req: Get| {
        let host = host(&req);
        log.lock().unwrap().push((host.clone(), start.elapsed()));
        let first = host == "busy" && !std::mem::replace(&mut *answered.lock().unwrap(), true);
        async move {
            match first {
                true => Response::builder().status(429).header("retry-after", "2"),
                false => Response::builder().status(200),
            }
            .body(())
        }
    }))
}

async fn store(url: &str) -> RedisBackoff<ConnectionManager> {
    store_from(url, Duration::from_millis(100)).await
}

/// A replica's store on a connection of its own, its ladder from `initial`.
async fn store_from(url: &str, initial: Duration) -> RedisBackoff<ConnectionManager> {
    RedisBackoff::builder(initial, Duration::from_secs(10))
        .prefix("fleet")
        .open(url)
        .await
        .unwrap()
}

/// How far Redis' clock (`TIME`) and the test's may drift apart over the
/// test's few seconds.
const SKEW: Duration = Duration::from_millis(5);

/// A request refused by the layer: the wait left.
fn refused(answer: Result<Response<()>, BoxError>) -> Duration {
    match answer {
        Err(e) => {
            e.downcast::<InBackoff>()
                .expect("refused by the layer")
                .remaining
        }
        Ok(r) => panic!("sent, answered {}", r.status()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_to_one_replica_holds_its_key_on_all_three_for_2_s_and_no_other_key() {
    let server = Server::start();
    let start = Instant::now();
    let log = Log::default();
    let upstream = upstream(&log, start);
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..3 {
        // Each replica: a store on its own connection, the layer over it;
        // a held key is refused at once, so that its wait can be read.
        let layer = KeyedBackoffLayer::over(store(&server.url).await, host)
            .retry_if(RetryHttp)
            .max_retries(0)
            .fail_fast();
        clients.push(BoxCloneService::new(layer.layer(upstream.clone())));
    }
    let floor = Duration::from_secs(2);

    let sent = start.elapsed();
    let first = clients[0].clone().oneshot(get("busy")).await.unwrap();
    assert_eq!(first.status(), 429);
    let answered = start.elapsed();
    // One failure, counted once for the fleet: the shared ladder's first step.
    let observer = store(&server.url).await;
    let level = observer.level(&"busy".to_string()).await.unwrap().unwrap();
    assert_eq!(
        (level.backoff, level.attempts),
        (Duration::from_millis(100), 1)
    );

    // Every replica refuses `busy`, for what is left of the 2 s, and sends
    // any other key at once.
    for (i, client) in clients.iter().enumerate() {
        // Asked of Redis before the reply, so at most that long after the
        // 429 was sent: the wait is at least the rest of the 2 s.
        let wait = refused(client.clone().oneshot(get("busy")).await);
        let replied = start.elapsed();
        assert!(wait <= floor, "replica {i}: {wait:?}");
        assert!(
            wait + (replied - sent) + SKEW >= floor,
            "replica {i}: {wait:?} at {replied:?}"
        );
        let other = format!("calm-{i}");
        assert_eq!(
            client.clone().oneshot(get(&other)).await.unwrap().status(),
            200
        );
    }

    // Each replica asks again until it may send: none before 2 s after the
    // 429 was sent, each within the time the calls took after 2 s after it
    // was answered.
    let deadline = start + Duration::from_secs(10);
    for (i, client) in clients.iter().enumerate() {
        let went = loop {
            match client.clone().oneshot(get("busy")).await {
                Ok(response) => {
                    assert_eq!(response.status(), 200);
                    break start.elapsed();
                }
                Err(e) => {
                    let wait = e.downcast::<InBackoff>().expect("refused").remaining;
                    assert!(wait <= floor);
                }
            }
            assert!(
                Instant::now() < deadline,
                "replica {i}: the hold never ended"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(went + SKEW >= sent + floor, "replica {i} sent at {went:?}");
        assert!(
            went < answered + floor + Duration::from_millis(500),
            "replica {i}: {went:?}"
        );
    }

    // The upstream saw `busy` once during the hold, then once per replica;
    // each other key once, at once.
    let calls = log.lock().unwrap().clone();
    let busy: Vec<Duration> = calls
        .iter()
        .filter(|(h, _)| h == "busy")
        .map(|c| c.1)
        .collect();
    assert_eq!(busy.len(), 4, "{calls:?}");
    assert!(
        busy[1..].iter().all(|&t| t + SKEW >= sent + floor),
        "{busy:?}"
    );
    for i in 0..3 {
        let other = format!("calm-{i}");
        let at: Vec<_> = calls
            .iter()
            .filter(|(h, _)| *h == other)
            .map(|c| c.1)
            .collect();
        assert_eq!(at.len(), 1, "{other}: {calls:?}");
        assert!(at[0] < sent + floor, "{other} waited: {at:?}");
    }
    // The success reset the key for the fleet.
    assert_eq!(observer.level(&"busy".to_string()).await.unwrap(), None);
}

/// Failures seen by all three replicas advance the shared ladder as one
/// manager's would: requests sent together, by every replica, to a key
/// out of backoff may all fail, and the key advances once; while it is in
/// backoff no replica sends it; the backoff doubles each window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_seen_by_three_replicas_climb_one_shared_ladder() {
    let server = Server::start();
    let reached = Arc::new(Mutex::new(0u32));
    let down = {
        let reached = Arc::clone(&reached);
        BoxCloneService::new(tower::service_fn(move |_: Get| {
            *reached.lock().unwrap() += 1;
            async { Response::builder().status(503).body(()) }
        }))
    };
    let mut clients: Vec<Client> = Vec::new();
    // Windows long enough to check within them on a busy machine.
    let initial = Duration::from_millis(300);
    for _ in 0..3 {
        let layer = KeyedBackoffLayer::over(store_from(&server.url, initial).await, host)
            .retry_if(RetryHttp)
            .max_retries(0)
            .fail_fast();
        clients.push(BoxCloneService::new(layer.layer(down.clone())));
    }
    let observer = store_from(&server.url, initial).await;
    let key = "down".to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    for window in 0..3u32 {
        // Every replica sends three requests at once.
        let mut sent = Vec::new();
        for client in &clients {
            for _ in 0..3 {
                sent.push(tokio::spawn(client.clone().oneshot(get("down"))));
            }
        }
        let mut answered = 0;
        for request in sent {
            match request.await.unwrap() {
                Ok(response) => {
                    assert_eq!(response.status(), 503);
                    answered += 1;
                }
                Err(e) => assert!(e.downcast_ref::<InBackoff>().is_some(), "{e}"),
            }
        }
        assert!(
            answered >= 1,
            "window {window}: nothing reached the upstream"
        );
        let level = observer.level(&key).await.unwrap().unwrap();
        assert_eq!(level.attempts, window + 1, "{answered} failures, one step");
        assert_eq!(level.backoff, initial * (1 << window));
        // In backoff: refused by every replica, unsent.
        let before = *reached.lock().unwrap();
        for client in &clients {
            let refused = client.clone().oneshot(get("down")).await.unwrap_err();
            assert!(refused.downcast_ref::<InBackoff>().is_some(), "{refused}");
        }
        assert_eq!(*reached.lock().unwrap(), before);
        // Wait out the window, asking the store.
        while observer.wait(&key).await.unwrap().is_some() {
            assert!(Instant::now() < deadline, "window {window} never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
