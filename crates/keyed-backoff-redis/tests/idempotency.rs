//! Operation ids: a retry after an unknown outcome gets its first answer,
//! whatever other replicas did to the key in between.

use std::time::Duration;

use common::{connect, runtime, shared, store_on};
use keyed_backoff_redis::{Event, OpId};

mod common;

#[test]
fn an_operation_id_makes_a_retry_safe() {
    let rt = runtime();
    rt.block_on(async {
        let store = store_on(connect(&shared().url).await, "opid");
        let id = OpId::new();
        let first = store.next_with("k", Event::now(), id).await.unwrap();
        let again = store.next_with("k", Event::now(), id).await.unwrap();
        assert_eq!(
            (first, again),
            (Duration::from_secs(1), Duration::from_secs(1))
        );
        assert_eq!(store.attempts("k").await.unwrap(), 1);
        assert_eq!(
            store.next("k", Event::now()).await.unwrap(),
            Duration::from_secs(2)
        );
    });
}

#[test]
fn a_retried_operation_id_counts_once_whatever_ran_in_between() {
    let rt = runtime();
    rt.block_on(async {
        let conn = connect(&shared().url).await;
        let a = store_on(conn.clone(), "retry-interleaved");
        let b = a.clone();
        let id = OpId::new();
        // Replica A advances (and, say, never hears the answer); replica B
        // advances too; A retries with its id: its first answer, no third
        // advance.
        let first = a.next_with("k", Event::now(), id).await.unwrap();
        let other = b.next("k", Event::now()).await.unwrap();
        let retried = a.next_with("k", Event::now(), id).await.unwrap();
        assert_eq!(
            (first, other, retried),
            (
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(1)
            )
        );
        assert_eq!(a.attempts("k").await.unwrap(), 2);

        // The gate's refusal is remembered too.
        let gate_id = OpId::new();
        let refused = a.try_next_with("k", Event::now(), gate_id).await.unwrap();
        assert!(refused.is_err(), "{refused:?}");
        let again = a.try_next_with("k", Event::now(), gate_id).await.unwrap();
        assert_eq!(again, refused);
        assert_eq!(a.attempts("k").await.unwrap(), 2);
    });
}
