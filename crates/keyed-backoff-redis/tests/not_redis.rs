//! A URL that points at something other than Redis (an HTTP server on the
//! port): the store reports the server, never the caller's key, and the
//! fallback answers in its place as it does for an unreachable store.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, RedisBackoff, StoreError, redis};
use keyed_backoff_testkit::redis_server::free_port;

mod common;

/// An HTTP server on a free loopback port that answers every request with
/// a 400, as a web server does to Redis's commands, and closes.
fn http_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                if stream.read(&mut buf).is_ok_and(|n| n > 0) {
                    let _ = stream.write_all(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            });
        }
    });
    addr
}

/// The quick start's store on `addr`, with the fallback when asked.
async fn store_on(addr: SocketAddr, fallback: bool) -> RedisBackoff<ConnectionManager> {
    let mut builder = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .prefix("payments")
        // Long: an error that comes back is not the timeout's.
        .timeout(Duration::from_secs(30));
    if fallback {
        builder = builder.fallback(Duration::from_secs(5));
    }
    builder.open(&format!("redis://{addr}/")).await.unwrap()
}

#[test]
fn a_server_that_is_not_redis_is_named_and_no_key_is_blamed() {
    let addr = http_server();
    common::runtime().block_on(async {
        let store = store_on(addr, false).await;
        for _ in 0..2 {
            let err = store.next("payments-api", Event::now()).await.unwrap_err();
            eprintln!("{err}");
            let StoreError::Protocol { address, .. } = &err else {
                panic!("{err:?}");
            };
            assert_eq!(address.as_str(), addr.to_string());
            let text = err.to_string();
            assert!(text.contains(&addr.to_string()), "{text}");
            assert!(!text.contains("payments-api"), "{text}");
            assert!(err.is_unreachable());
            assert!(err.outcome_unknown());
        }
    });
}

#[test]
fn the_fallback_answers_for_a_server_that_is_not_redis() {
    let addr = http_server();
    common::runtime().block_on(async {
        let store = store_on(addr, true).await;
        assert_eq!(
            store.next("payments-api", Event::now()).await.unwrap(),
            Duration::from_secs(1)
        );
        // The breaker is open: the fallback keeps the key's backoff.
        assert_eq!(
            store.next("payments-api", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
        assert_eq!(store.stats().fallback_answers, 2);
    });
}

#[test]
fn a_refused_connection_names_the_address() {
    let port = free_port();
    common::runtime().block_on(async {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let store = store_on(addr, false).await;
        let err = store.next("payments-api", Event::now()).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    });
}

#[test]
fn a_built_store_names_the_address_it_was_given() {
    let port = free_port();
    common::runtime().block_on(async {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let conn = ConnectionManager::new_lazy_with_config(
            client,
            keyed_backoff_redis::fail_fast(Duration::from_secs(30)),
        )
        .unwrap();
        let store = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .address("sessions-redis")
            .build(conn.clone())
            .unwrap();
        let err = store.next("k", Event::now()).await.unwrap_err();
        assert!(err.to_string().contains("at sessions-redis "), "{err}");
        let err = RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
            .address("")
            .build(conn)
            .unwrap_err();
        assert_eq!(err.field(), "address");
    });
}
