//! What the builder takes and where entries live: settings out of range
//! are refused naming the field, keys never share an entry, entries expire
//! in Redis by themselves, and the script survives a `SCRIPT FLUSH`.

use std::time::Duration;

use common::{Store, connect, prefix, runtime, shared, store_on};
use keyed_backoff_redis::{Event, RedisBackoff, redis};

mod common;

#[test]
fn bad_settings_are_refused_with_the_field() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let b = || RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60));
        let field = |r: Result<Store, keyed_backoff::ConfigError>| r.unwrap_err().field();
        assert_eq!(field(b().jitter(f64::NAN).build(conn.clone())), "jitter");
        assert_eq!(field(b().prefix("").build(conn.clone())), "prefix");
        assert_eq!(
            field(b().timeout(Duration::ZERO).build(conn.clone())),
            "timeout"
        );
        assert_eq!(
            field(
                b().expire_after(Duration::from_secs(100 * 86_400))
                    .build(conn.clone())
            ),
            "expire_after"
        );
        for replicas in [0, 101] {
            assert_eq!(
                field(
                    b().wait_for_replicas(replicas, Duration::from_millis(10))
                        .build(conn.clone())
                ),
                "wait_for_replicas.replicas"
            );
        }
        // The wait must end before the operation's own timeout (250 ms).
        for wait in [Duration::ZERO, Duration::from_millis(250), Duration::MAX] {
            let err = b()
                .wait_for_replicas(1, wait)
                .build(conn.clone())
                .unwrap_err();
            assert_eq!(err.field(), "wait_for_replicas.timeout");
            assert!(err.to_string().contains("250ms"), "{err}");
        }
        assert!(
            b().wait_for_replicas(100, Duration::from_millis(249))
                .build(conn.clone())
                .is_ok()
        );
        let big = RedisBackoff::builder(Duration::from_secs(1), Duration::MAX);
        assert_eq!(field(big.build(conn)), "max");
    });
}

#[test]
fn prefixes_and_keys_never_share_an_entry() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let base = prefix("escape");
        let build = |p: String| {
            RedisBackoff::builder(Duration::from_secs(1), Duration::from_secs(60))
                .prefix(p)
                .build(conn.clone())
                .unwrap()
        };
        let short = build(base.clone());
        let long = build(format!("{base}:b"));
        assert_ne!(short.redis_key("b:c"), long.redis_key("c"));
        short.next("b:c", Event::now()).await.unwrap();
        assert_eq!(long.attempts("c").await.unwrap(), 0);
        assert_eq!(short.attempts("b:c").await.unwrap(), 1);
        // A key with the escape character itself stays distinct too.
        assert_ne!(short.redis_key("b%3Ac"), short.redis_key("b:c"));
    });
}

#[test]
fn entries_expire_in_redis_after_the_window_plus_max() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = RedisBackoff::builder(Duration::from_secs(10), Duration::from_secs(300))
            .expire_after(Duration::from_secs(600))
            .prefix(prefix("ttl"))
            .build(conn.clone())
            .unwrap();
        store.next("k", Event::now()).await.unwrap();
        let mut c = conn;
        let ttl: i64 = redis::cmd("PTTL")
            .arg(store.redis_key("k"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert!((899_000..=900_000).contains(&ttl), "{ttl}");
    });
}

#[test]
fn script_flush_is_survived() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "flush");
        store.next("k", Event::now()).await.unwrap();
        let mut c = conn;
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
    });
}
