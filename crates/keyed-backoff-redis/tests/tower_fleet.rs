//! The tower layer (keyed-backoff-tower) over the store, shared by a
//! fleet: three clients, each with a Redis connection of its own (three
//! replicas), one upstream. A `429` with `Retry-After: 2` answered to one
//! client holds that key on all three for 2 s, and no other key. On a real
//! redis-server the test starts, on Redis' time: each wait a replica is
//! told is checked against when it asked, with the time the calls took as
//! the only slack, so a slow machine widens the bounds and never breaks
//! them. Failures that climb the shared ladder are counted on a mock
//! clock that all three replicas read, so that its windows end when the
//! test moves it, not when the machine gets round to asking.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use keyed_backoff_redis::RedisBackoff;
use keyed_backoff_redis::clock::MockClock;
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

/// A replica's store on a connection of its own, its ladder from 100 ms,
/// on Redis' time. Its operations may take 10 s: a busy machine's slow
/// answer is not what the suite tests.
async fn store(url: &str) -> RedisBackoff<ConnectionManager> {
    RedisBackoff::builder(Duration::from_millis(100), Duration::from_secs(10))
        .prefix("fleet")
        .timeout(Duration::from_secs(10))
        .open(url)
        .await
        .unwrap()
}

/// A replica's store as [`store`] makes it, its ladder from `initial`, on
/// `clock` (every replica's clock is a clone of one mock clock, not moved
/// between their builds: one time line for the fleet).
async fn store_on_clock(
    url: &str,
    initial: Duration,
    clock: &MockClock,
) -> RedisBackoff<ConnectionManager> {
    RedisBackoff::builder(initial, Duration::from_secs(10))
        .prefix(format!("fleet-ladder-{:x}", std::process::id()))
        .clock(clock.clone())
        .timeout(Duration::from_secs(10))
        .open(url)
        .await
        .unwrap()
}

/// How far Redis' clock (`TIME`) and the test's may drift apart over the
/// test's few seconds.
const SKEW: Duration = Duration::from_millis(5);

/// The times of one 429 (since the test's start): its request `sent`, its
/// answer `answered`. The layer set the hold between the two, so it ends
/// between `sent + floor` and `answered + floor`.
struct Hold {
    sent: Duration,
    answered: Duration,
    floor: Duration,
}

impl Hold {
    /// Checks `wait`, what replica `i` was told when it asked at `asked`
    /// and had its answer at `replied`: Redis reckoned it between the two,
    /// so it is at least the rest of the floor at `replied` (counted from
    /// `sent`) and at most the rest at `asked` (counted from `answered`).
    fn check(&self, i: usize, wait: Duration, asked: Duration, replied: Duration) {
        assert!(wait <= self.floor, "replica {i}: {wait:?}");
        assert!(
            replied + wait + SKEW >= self.sent + self.floor,
            "replica {i}: {wait:?} at {replied:?}, the 429 sent at {:?}",
            self.sent
        );
        assert!(
            asked + wait <= self.answered + self.floor + SKEW,
            "replica {i}: {wait:?} at {asked:?}, the 429 answered at {:?}",
            self.answered
        );
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
        let layer = KeyedBackoffLayer::new(store(&server.url).await, host)
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
    let hold = Hold {
        sent,
        answered,
        floor,
    };
    // One failure, counted once for the fleet: the shared ladder's first step.
    let observer = store(&server.url).await;
    let level = observer.level(&"busy".to_string()).await.unwrap().unwrap();
    assert_eq!(
        (level.backoff, level.attempts),
        (Duration::from_millis(100), 1)
    );

    // Every replica sends any other key at once (a layer that fails fast
    // refuses a held key rather than wait), then refuses `busy` for what
    // is left of the 2 s: the other key went while the hold was on. A
    // replica that asks only after the hold ended (a machine too busy to
    // ask within 2 s) sends it, and no earlier than the hold's end.
    let mut gone = [false; 3];
    for (i, client) in clients.iter().enumerate() {
        let other = format!("calm-{i}");
        assert_eq!(
            client.clone().oneshot(get(&other)).await.unwrap().status(),
            200
        );
        let asked = start.elapsed();
        let answer = client.clone().oneshot(get("busy")).await;
        let replied = start.elapsed();
        match answer {
            Ok(response) => {
                assert_eq!(response.status(), 200);
                assert!(
                    replied + SKEW >= sent + floor,
                    "replica {i} sent at {replied:?}"
                );
                gone[i] = true;
            }
            Err(e) => {
                let wait = e.downcast::<InBackoff>().expect("refused by the layer");
                hold.check(i, wait.remaining, asked, replied);
            }
        }
    }

    // Each replica asks again until it may send, told each time a wait
    // that ends with the hold: none sends before 2 s after the 429 was
    // sent. (The first one's success resets the key for the others.)
    let deadline = start + Duration::from_secs(10);
    for (i, client) in clients.iter().enumerate() {
        if gone[i] {
            continue;
        }
        let went = loop {
            let asked = start.elapsed();
            match client.clone().oneshot(get("busy")).await {
                Ok(response) => {
                    assert_eq!(response.status(), 200);
                    break start.elapsed();
                }
                Err(e) => {
                    let wait = e.downcast::<InBackoff>().expect("refused").remaining;
                    hold.check(i, wait, asked, start.elapsed());
                }
            }
            assert!(
                Instant::now() < deadline,
                "replica {i}: the hold never ended"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(went + SKEW >= sent + floor, "replica {i} sent at {went:?}");
    }

    // The upstream saw `busy` once during the hold, then once per replica;
    // each other key once.
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
    }
    // The success reset the key for the fleet.
    assert_eq!(observer.level(&"busy".to_string()).await.unwrap(), None);
}

/// Failures seen by all three replicas advance the shared ladder as one
/// manager's would: requests sent together, by every replica, to a key
/// out of backoff may all fail, and the key advances once; while it is in
/// backoff no replica sends it; the backoff doubles each window. The
/// replicas read one mock clock: a window lasts until the test moves the
/// clock past it, however long the requests take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_seen_by_three_replicas_climb_one_shared_ladder() {
    let server = Server::start();
    let clock = MockClock::new();
    let reached = Arc::new(Mutex::new(0u32));
    let down = {
        let reached = Arc::clone(&reached);
        BoxCloneService::new(tower::service_fn(move |_: Get| {
            *reached.lock().unwrap() += 1;
            async { Response::builder().status(503).body(()) }
        }))
    };
    let mut clients: Vec<Client> = Vec::new();
    let initial = Duration::from_millis(300);
    for _ in 0..3 {
        let store = store_on_clock(&server.url, initial, &clock).await;
        let layer = KeyedBackoffLayer::new(store, host)
            .retry_if(RetryHttp)
            .max_retries(0)
            .fail_fast();
        clients.push(BoxCloneService::new(layer.layer(down.clone())));
    }
    let observer = store_on_clock(&server.url, initial, &clock).await;
    let key = "down".to_string();
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
        // The window ends with its backoff, not a moment earlier.
        let last = Duration::from_millis(1);
        clock.advance(level.backoff - last);
        assert_eq!(observer.wait(&key).await.unwrap(), Some(last));
        clock.advance(last);
        assert_eq!(observer.wait(&key).await.unwrap(), None);
    }
}
