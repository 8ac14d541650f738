//! The opt-in near cache: a refusal the store already knows the end of is
//! answered in process until that end, instead of by a round trip. It wraps
//! one call (to Redis, or to the fallback).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::StoreError;
use crate::fallback::Answer;
use crate::protocol::{Op, Reply, Request, TimeSource};

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

    /// How many gates it answered without a round trip.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// The request: answered here when it is a gate (without
    /// an operation id) on a key known to be in backoff, else by `inner`,
    /// whose advances and refusals are remembered; a reset forgets the key
    /// first. `inner` is not started when the answer is known here.
    pub(crate) async fn around(
        &self,
        time: &TimeSource,
        request: Request<'_>,
        inner: impl Future<Output = Result<Answer, StoreError>>,
    ) -> Result<Reply, StoreError> {
        let Request {
            op, key, event, id, ..
        } = request;
        match op {
            Op::Next | Op::TryNext => {}
            Op::Reset => {
                self.forget(key);
                return inner.await.map(|a| a.reply);
            }
            _ => return inner.await.map(|a| a.reply),
        }
        let sent = self.now(time);
        let at = sent.saturating_sub(event.age_nanos());
        // A refusal whose end is known is answered here. Not for an
        // operation id: its retry must get its first answer from Redis.
        if op == Op::TryNext
            && id.is_none()
            && let Some(remaining_ns) = self.refusal(key, at)
        {
            return Ok(Reply::Refused { remaining_ns });
        }
        let answer = inner.await?;
        // The fallback's answers are this process's alone: not remembered.
        if !answer.local {
            match answer.reply {
                Reply::Level { backoff_ns, .. } => self.remember(key, sent, backoff_ns),
                Reply::Refused { remaining_ns } => self.remember(key, at, remaining_ns),
                _ => {}
            }
        }
        Ok(answer.reply)
    }

    /// Now on the time line the deadlines are kept in: the caller's clock,
    /// or this process's monotonic clock standing in for Redis's.
    fn now(&self, time: &TimeSource) -> i64 {
        match time {
            TimeSource::Caller(now) => now(),
            TimeSource::Redis => i64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(i64::MAX),
        }
    }

    /// The wait left at `at` if `key` is known to be in backoff then.
    fn refusal(&self, key: &str, at: i64) -> Option<u64> {
        let mut until = self.until.lock();
        let &end = until.get(key)?;
        if at < end {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return u64::try_from(i128::from(end) - i128::from(at)).ok();
        }
        until.remove(key);
        None
    }

    /// `key` is in backoff for `wait_ns` from `from` (never later than Redis
    /// says): when the operation was sent, or its event.
    fn remember(&self, key: &str, from: i64, wait_ns: u64) {
        let end = from.saturating_add_unsigned(wait_ns);
        let mut until = self.until.lock();
        if until.len() >= MAX_KEYS {
            until.retain(|_, e| *e > from);
            if until.len() >= MAX_KEYS {
                until.clear();
            }
        }
        until.insert(key.to_owned(), end);
    }

    fn forget(&self, key: &str) {
        self.until.lock().remove(key);
    }
}
