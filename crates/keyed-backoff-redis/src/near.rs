//! The opt-in near cache: a refusal the store already knows the end of is
//! answered in process until that end, instead of by a round trip.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::builder::Now;

/// Past this many keys, expired deadlines are dropped (and, if that is not
/// enough, all of them: the cache only saves round trips).
const MAX_KEYS: usize = 100_000;

pub(crate) struct NearCache {
    /// Per key: until when (the store's time line, ns) it is known to be in
    /// backoff.
    until: Mutex<HashMap<String, i64>>,
    /// The local time line when the store reads Redis `TIME`.
    epoch: Instant,
    hits: AtomicU64,
}

impl NearCache {
    pub(crate) fn new() -> Self {
        NearCache {
            until: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            hits: AtomicU64::new(0),
        }
    }

    /// Now on the time line the deadlines are kept in: the caller's clock,
    /// or this process's monotonic clock standing in for Redis's.
    pub(crate) fn now(&self, now: &Now) -> i64 {
        match now {
            Now::Caller(f) => f(),
            Now::Redis => i64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(i64::MAX),
        }
    }

    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// The wait left at `at` if `key` is known to be in backoff then.
    pub(crate) fn refusal(&self, key: &str, at: i64) -> Option<u64> {
        let mut until = self.until.lock();
        let &end = until.get(key)?;
        if at < end {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return u64::try_from(i128::from(end) - i128::from(at)).ok();
        }
        until.remove(key);
        None
    }

    /// `key` is in backoff until `end` (never later than Redis says), as
    /// learnt at `known` (when the operation was sent, or its event).
    pub(crate) fn remember(&self, key: &str, end: i64, known: i64) {
        let mut until = self.until.lock();
        if until.len() >= MAX_KEYS {
            until.retain(|_, e| *e > known);
            if until.len() >= MAX_KEYS {
                until.clear();
            }
        }
        until.insert(key.to_owned(), end);
    }

    pub(crate) fn forget(&self, key: &str) {
        self.until.lock().remove(key);
    }
}
