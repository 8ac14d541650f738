//! The tower layer over three replicas of the store climbs the ladder that
//! one in-process manager climbs: every request, sent through whichever
//! replica, is answered as the same layer over one `Backoff` answers it
//! (sent or refused, and the same wait when refused), and each key's level
//! afterwards is the same. The in-process manager replays client-go's own
//! traces bit for bit (`tests/conformance.rs` in the core), so the fleet's
//! shared ladder is client-go's.
//!
//! Both sides read one mock clock: the store takes the caller's time, so
//! the test moves time forward by exactly the gaps it picks (at, and one
//! nanosecond around, each key's backoff and expiry), and never sleeps.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use keyed_backoff_redis::RedisBackoff;
use keyed_backoff_testkit::redis_server::Server;
use keyed_backoff_tower::keyed_backoff::Gate;
use keyed_backoff_tower::keyed_backoff::clock::MockClock;
use keyed_backoff_tower::{Backoff, BoxError, InBackoff, KeyedBackoffLayer, RetryHttp};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};

type Get = Request<()>;
type Client = BoxCloneService<Get, Response<()>, BoxError>;

const INITIAL: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(16);
const KEYS: [&str; 3] = ["a.example", "b.example", "c.example"];

fn host(req: &Get) -> String {
    req.uri().host().unwrap_or_default().to_owned()
}

/// An upstream answering every request with the status set in `status`.
fn upstream(status: &Arc<Mutex<u16>>) -> BoxCloneService<Get, Response<()>, http::Error> {
    let status = Arc::clone(status);
    BoxCloneService::new(tower::service_fn(move |_: Get| {
        let code = *status.lock().unwrap();
        async move { Response::builder().status(code).body(()) }
    }))
}

/// What a client saw: the upstream's status, or the layer's refusal with
/// the wait it told.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Sent(u16),
    Refused(Duration),
}

async fn send(client: &Client, key: &str) -> Seen {
    let req = Request::get(format!("http://{key}/")).body(()).unwrap();
    match client.clone().oneshot(req).await {
        Ok(response) => Seen::Sent(response.status().as_u16()),
        Err(e) => match e.downcast::<InBackoff>() {
            Ok(refused) => Seen::Refused(refused.remaining),
            Err(e) => panic!("neither sent nor refused: {e}"),
        },
    }
}

#[tokio::test]
async fn three_replicas_answer_every_request_as_one_manager() {
    let server = Server::start();
    let clock = MockClock::new();
    let status = Arc::new(Mutex::new(503u16));
    let mut replicas: Vec<Client> = Vec::new();
    let mut stores = Vec::new();
    for _ in 0..3 {
        let store = RedisBackoff::builder(INITIAL, MAX)
            .prefix("one-ladder")
            .clock(clock.clone())
            .open(&server.url)
            .await
            .unwrap();
        stores.push(store.clone());
        let over = KeyedBackoffLayer::new(store, host)
            .retry_if(RetryHttp)
            .max_retries(0)
            .fail_fast();
        replicas.push(BoxCloneService::new(over.layer(upstream(&status))));
    }
    let manager = Arc::new(
        Backoff::<String>::builder(INITIAL, MAX)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let one = KeyedBackoffLayer::new(Arc::clone(&manager), host)
        .retry_if(RetryHttp)
        .max_retries(0)
        .fail_fast();
    let one: Client = BoxCloneService::new(one.layer(upstream(&status)));

    // Seeded, so that a failure can be replayed.
    let mut draws = SmallRng::seed_from_u64(0x5eed);
    let (mut sent, mut refused, mut reset) = (0, 0, 0);
    for step in 0..1_000 {
        let key = KEYS[draws.random_range(0..3usize)];
        // The next request comes at the key's backoff's end, one
        // nanosecond either side of it, halfway through it, past its
        // expiry (2 * MAX), or at some other time.
        let wait = manager.wait(&key.to_string()).await.unwrap();
        let ns = Duration::from_nanos(1);
        let gap = match (draws.random_range(0..8), wait) {
            (0, Some(w)) => w,
            (1, Some(w)) => w.saturating_sub(ns),
            (2, Some(w)) => w + ns,
            (3 | 4, Some(w)) => w / 2,
            (5, _) => MAX * 2 + ns,
            _ => Duration::from_millis(draws.random_range(0..20_000)),
        };
        clock.advance(gap);
        *status.lock().unwrap() = if draws.random_range(0..8) == 0 {
            200
        } else {
            503
        };
        let replica = draws.random_range(0..3usize);
        let fleet = send(&replicas[replica], key).await;
        let alone = send(&one, key).await;
        assert_eq!(fleet, alone, "step {step}: {key} through replica {replica}");
        match alone {
            Seen::Sent(200) => reset += 1,
            Seen::Sent(_) => sent += 1,
            Seen::Refused(_) => refused += 1,
        }
        // Every replica reads the level the one manager holds.
        let expected = manager.level(&key.to_string()).await.unwrap();
        for (i, store) in stores.iter().enumerate() {
            let level = store.level(&key.to_string()).await.unwrap();
            assert_eq!(level, expected, "step {step}: {key}'s level on replica {i}");
        }
    }
    // The walk reached every kind of answer, often.
    assert!(
        sent > 100 && refused > 100 && reset > 20,
        "{sent} {refused} {reset}"
    );
}
