//! Every type in the crate's public signatures is named from this crate
//! alone: a user who depends on `keyed-backoff-redis` only never needs a
//! path into `keyed_backoff` or `redis` of their own.

use std::time::Duration;

use keyed_backoff_redis::clock::{Clock, MockClock};
use keyed_backoff_redis::redis::aio::ConnectionManager;
use keyed_backoff_redis::{ConfigError, InBackoff};
use keyed_backoff_redis::{Event, RedisBackoff, Settings, StoreError};

use common::{connect, prefix, runtime, shared};

mod common;

/// The gate's refusal, typed through this crate's re-export.
async fn gate(
    store: &RedisBackoff<ConnectionManager>,
) -> Result<Result<Duration, InBackoff>, StoreError> {
    store.try_next("k", Event::now()).await
}

/// The builder's error, typed through this crate's re-export.
fn build(
    settings: Settings,
    prefix: &str,
    conn: ConnectionManager,
) -> Result<RedisBackoff<ConnectionManager>, ConfigError> {
    RedisBackoff::from_settings(settings)
        .prefix(prefix)
        .clock(MockClock::new())
        .build(conn)
}

#[test]
fn the_types_in_the_public_signatures_are_named_from_this_crate() {
    runtime().block_on(async {
        let conn = connect(&shared().url).await;
        let settings = Settings::new(Duration::from_secs(1), Duration::from_secs(60));
        let err: ConfigError = build(settings, "", conn.clone()).unwrap_err();
        assert_eq!(err.field(), "prefix");
        let store = build(settings, &prefix("imports"), conn).unwrap();
        assert_eq!(gate(&store).await.unwrap(), Ok(Duration::from_secs(1)));
        let refused: InBackoff = gate(&store).await.unwrap().unwrap_err();
        assert_eq!(refused.remaining, Duration::from_secs(1));
        let clock = MockClock::new();
        assert_eq!(Event::between(clock.now(), clock.now()), Event::now());
    });
}
