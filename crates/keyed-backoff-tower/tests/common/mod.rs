//! What the suites share: a manager on a clock that follows tokio's paused
//! time, and an upstream that logs when each request reached it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyed_backoff_tower::Backoff;
use keyed_backoff_tower::keyed_backoff::clock::{Clock, MockInstant};
use tokio::time::Instant;

/// A clock reading tokio's time since it was made, so that paused time
/// drives the manager; any `Clock` works with the layer.
#[derive(Debug, Clone, Copy)]
pub struct Tokio(Instant);

impl Tokio {
    /// The clock, from now.
    pub fn now() -> Self {
        Tokio(Instant::now())
    }
}

impl Clock for Tokio {
    type Instant = MockInstant;
    fn now(&self) -> MockInstant {
        MockInstant::from_nanos(i64::try_from(self.0.elapsed().as_nanos()).unwrap())
    }
}

/// A manager from 100 ms doubling to 10 s, on tokio's time.
pub fn manager<K: std::hash::Hash + Eq + Clone>() -> Arc<Backoff<K, Tokio>> {
    Arc::new(
        Backoff::<K>::builder(Duration::from_millis(100), Duration::from_secs(10))
            .clock(Tokio(Instant::now()))
            .build()
            .unwrap(),
    )
}

/// Every request that reached the upstream: (key, milliseconds since the
/// log was made).
#[derive(Clone)]
pub struct Log {
    start: Instant,
    calls: Arc<Mutex<Vec<(String, u128)>>>,
}

impl Log {
    pub fn new() -> Self {
        Log {
            start: Instant::now(),
            calls: Arc::default(),
        }
    }

    pub fn record(&self, key: &str) {
        let at = self.start.elapsed().as_millis();
        self.calls.lock().unwrap().push((key.to_owned(), at));
    }

    /// When requests for `key` reached the upstream, in milliseconds.
    pub fn calls(&self, key: &str) -> Vec<u128> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, t)| *t)
            .collect()
    }

    pub fn elapsed_ms(&self) -> u128 {
        self.start.elapsed().as_millis()
    }

    /// Sleeps until `ms` milliseconds after the log was made.
    pub async fn until(&self, ms: u64) {
        tokio::time::sleep_until(self.start + Duration::from_millis(ms)).await;
        assert_eq!(self.elapsed_ms(), u128::from(ms));
    }
}
