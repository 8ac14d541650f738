//! Malformed and foreign entries: a typed error, never a zero backoff, and
//! the key left byte for byte as it was.

use std::time::Duration;

use common::{Store, connect, runtime, shared, store_on};
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{Event, OpId, StoreError, redis};

mod common;

#[test]
fn a_wrong_typed_key_is_reported_and_left_alone() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "wrongtype");
        let mut c = conn;
        let _: () = redis::cmd("SET")
            .arg(store.redis_key("k"))
            .arg("someone else's")
            .query_async(&mut c)
            .await
            .unwrap();
        for result in [
            store.next("k", Event::now()).await.map(drop),
            store.try_next("k", Event::now()).await.map(drop),
            store.get("k").await.map(drop),
        ] {
            match result {
                Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "k"),
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
        let kept: String = redis::cmd("GET")
            .arg(store.redis_key("k"))
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(kept, "someone else's");
    });
}

/// The key's exact serialized value and its time to live.
async fn snapshot_of(conn: &mut ConnectionManager, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query_async(conn).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap();
    (dump, ttl)
}

/// Every operation on `key` (an entry someone damaged) answers `Corrupt`,
/// and nothing is written: not the entry, not its time to live.
async fn every_operation_refuses(
    store: &Store,
    conn: &mut ConnectionManager,
    key: &str,
    case: &str,
) {
    let redis_key = store.redis_key(key);
    let before = snapshot_of(conn, &redis_key).await;
    let id = OpId::new();
    let results = [
        ("next", store.next(key, Event::now()).await.map(drop)),
        (
            "next_with",
            store.next_with(key, Event::now(), id).await.map(drop),
        ),
        (
            "try_next",
            store.try_next(key, Event::now()).await.map(drop),
        ),
        (
            "try_next_with",
            store.try_next_with(key, Event::now(), id).await.map(drop),
        ),
        ("get", store.get(key).await.map(drop)),
        ("attempts", store.attempts(key).await.map(drop)),
        (
            "remaining",
            store.remaining(key, Event::now()).await.map(drop),
        ),
        (
            "since",
            store.is_in_backoff_since(key, Event::now()).await.map(drop),
        ),
        (
            "since_update",
            store
                .is_in_backoff_since_update(key, Event::now())
                .await
                .map(drop),
        ),
        ("reset", store.reset(key).await.map(drop)),
        ("gc_key", store.gc_key(key).await.map(drop)),
    ];
    for (op, result) in results {
        match result {
            Err(StoreError::Corrupt { key: k, detail, .. }) => {
                assert_eq!(k, key, "{case}: {op}");
                assert!(!detail.is_empty(), "{case}: {op}");
            }
            other => panic!("{case}: {op} gave {other:?}, not Corrupt"),
        }
    }
    let after = snapshot_of(conn, &redis_key).await;
    assert_eq!(before.0, after.0, "{case}: the entry was rewritten");
    assert!(
        after.1 <= before.1 && after.1 > before.1 - 60_000,
        "{case}: TTL {before:?} -> {after:?}"
    );
}

/// For each case, `write(redis_key, case)` damages a fresh entry; then
/// every operation on it must refuse it and leave it as it was.
fn every_damaged_entry_refuses<T>(
    name: &str,
    cases: &[(&str, T)],
    write: impl Fn(&str, &T) -> redis::Pipeline,
) {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), name);
        let mut c = conn;
        for (i, (case, damage)) in cases.iter().enumerate() {
            let key = format!("case-{i}");
            let _: () = write(&store.redis_key(&key), damage)
                .query_async(&mut c)
                .await
                .unwrap();
            every_operation_refuses(&store, &mut c, &key, case).await;
        }
    });
}

#[test]
fn malformed_entries_are_corrupt_and_never_rewritten() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "non-numeric backoff",
            &[("b", "abc"), ("t", "1"), ("a", "1")],
        ),
        ("empty backoff", &[("b", ""), ("t", "1"), ("a", "1")]),
        ("negative backoff", &[("b", "-5"), ("t", "1"), ("a", "1")]),
        ("NaN backoff", &[("b", "nan"), ("t", "1"), ("a", "1")]),
        ("infinite backoff", &[("b", "inf"), ("t", "1"), ("a", "1")]),
        (
            "exponent backoff",
            &[("b", "1e300"), ("t", "1"), ("a", "1")],
        ),
        ("hex backoff", &[("b", "0x10"), ("t", "1"), ("a", "1")]),
        (
            "huge backoff",
            &[("b", "99999999999999999999"), ("t", "1"), ("a", "1")],
        ),
        (
            "fractional backoff",
            &[("b", "1.5"), ("t", "1"), ("a", "1")],
        ),
        ("missing backoff", &[("t", "1"), ("a", "1")]),
        (
            "non-numeric time",
            &[("b", "1000"), ("t", "soon"), ("a", "1")],
        ),
        ("missing time", &[("b", "1000"), ("a", "1")]),
        (
            "time far in the future",
            &[("b", "1000"), ("t", "99999999999999999999"), ("a", "1")],
        ),
        (
            "negative attempts",
            &[("b", "1000"), ("t", "1"), ("a", "-1")],
        ),
        (
            "too many attempts",
            &[("b", "1000"), ("t", "1"), ("a", "99999")],
        ),
        ("missing attempts", &[("b", "1000"), ("t", "1")]),
        (
            "malformed recent ids",
            &[("b", "1000"), ("t", "1"), ("a", "1"), ("r", "x,y")],
        ),
    ];
    every_damaged_entry_refuses("malformed", cases, |key, fields| {
        let mut write = redis::pipe();
        let hset = write.cmd("HSET").arg(key);
        for (f, v) in *fields {
            hset.arg(*f).arg(*v);
        }
        write.cmd("PEXPIRE").arg(key).arg(3_600_000);
        write
    });
}

/// Entries are strings, "backoff,last update,attempts[;records]": the same
/// damage written in that form is refused the same way.
#[test]
fn malformed_string_entries_are_corrupt_and_never_rewritten() {
    let cases: &[(&str, &str)] = &[
        ("empty value", ""),
        ("one field", "1000"),
        ("two fields", "1000,1"),
        ("non-numeric backoff", "abc,1,1"),
        ("empty backoff", ",1,1"),
        ("negative backoff", "-5,1,1"),
        ("NaN backoff", "nan,1,1"),
        ("infinite backoff", "inf,1,1"),
        ("exponent backoff", "1e300,1,1"),
        ("huge backoff", "99999999999999999999,1,1"),
        ("fractional backoff", "1.5,1,1"),
        ("non-numeric time", "1000,soon,1"),
        ("time far in the future", "1000,99999999999999999999,1"),
        ("negative attempts", "1000,1,-1"),
        ("too many attempts", "1000,1,99999"),
        ("a fourth field", "1000,1,1,7"),
        ("trailing garbage", "1000,1,1x"),
        ("malformed record", "1000,1,1;x,y"),
        ("empty record", "1000,1,1;"),
        ("a record without attempts", "1000,1,1;5,1,1000"),
        ("five records", "1000,1,1;1,0,5;2,0,5;3,0,5;4,0,5;5,0,5"),
        (
            "a record with a huge backoff",
            "1000,1,1;5,1,99999999999999999999,1",
        ),
        (
            "a record with a huge wait",
            "1000,1,1;5,0,99999999999999999999",
        ),
        ("a record with too many attempts", "1000,1,1;5,1,1000,99999"),
        (
            "a record with a huge id",
            "1000,1,1;999999999999999999999999,0,5",
        ),
    ];
    every_damaged_entry_refuses("malformed-string", cases, |key, value| {
        let mut write = redis::pipe();
        write
            .cmd("SET")
            .arg(key)
            .arg(*value)
            .arg("PX")
            .arg(3_600_000);
        write
    });
}

/// An entry an earlier version wrote as a hash is read, advanced from
/// where it was, and rewritten as a string.
#[test]
fn an_entry_of_the_earlier_hash_layout_is_read_and_rewritten() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "legacy");
        let mut c = conn;
        let key = store.redis_key("k");
        let now_us: (String, String) = redis::cmd("TIME").query_async(&mut c).await.unwrap();
        let now_us = format!("{}{:0>6}", now_us.0, now_us.1);
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg(&["b", "2000000000", "t", now_us.as_str(), "a", "2", "o", "77"])
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(store.attempts("k").await.unwrap(), 2);
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(4)
        );
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut c)
            .await
            .unwrap();
        assert_eq!(kind, "string");
        assert_eq!(store.attempts("k").await.unwrap(), 3);
    });
}

#[test]
fn foreign_keys_of_every_type_are_corrupt_and_left_alone() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let store = store_on(conn.clone(), "foreign");
        let mut c = conn;
        let writes: [(&str, redis::Cmd); 4] = [
            (
                "string",
                redis::cmd("SET").arg(store.redis_key("s")).arg("x").clone(),
            ),
            (
                "list",
                redis::cmd("RPUSH")
                    .arg(store.redis_key("l"))
                    .arg("x")
                    .clone(),
            ),
            (
                "set",
                redis::cmd("SADD")
                    .arg(store.redis_key("e"))
                    .arg("x")
                    .clone(),
            ),
            (
                "zset",
                redis::cmd("ZADD")
                    .arg(store.redis_key("z"))
                    .arg(1)
                    .arg("x")
                    .clone(),
            ),
        ];
        for ((case, cmd), key) in writes.into_iter().zip(["s", "l", "e", "z"]) {
            let _: () = cmd.query_async(&mut c).await.unwrap();
            every_operation_refuses(&store, &mut c, key, case).await;
        }
    });
}
