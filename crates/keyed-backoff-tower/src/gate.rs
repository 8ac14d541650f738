//! The keyed manager as the middleware sees it: whatever its clock and
//! hasher, one object that says how long a key must still wait and records
//! what happened to it.

use std::hash::{BuildHasher, Hash};
use std::sync::Arc;
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant};

/// What the middleware asks of a keyed manager. Object-safe, so that the
/// layer's type names neither the manager's clock nor its hasher.
pub(crate) trait Gate<K>: Send + Sync {
    /// The wait left before `key` may run, or `None` if it may run now.
    fn remaining(&self, key: &K) -> Option<Duration>;
    /// A failure for `key`: its backoff advances, at most once per window
    /// however many requests fail for it.
    fn failed(&self, key: &K);
    /// A success for `key`: once its window has passed, its backoff and
    /// any hold are forgotten. Within the window the success answers a
    /// request sent before the key's latest failure, and changes nothing.
    fn succeeded(&self, key: &K);
    /// `key` may not run for `wait` from now; a longer hold already in
    /// place is kept.
    fn hold(&self, key: &K, wait: Duration);
}

/// A shared manager as a [`Gate`]. A server's wait is the manager's own
/// per-key floor ([`Backoff::hold_until`]): its checks honour it, and its
/// backoff grows as it would without it.
pub(crate) struct Manager<K, C: Clock, S> {
    backoff: Arc<Backoff<K, C, S>>,
}

impl<K, C: Clock, S> Manager<K, C, S> {
    pub(crate) fn new(backoff: Arc<Backoff<K, C, S>>) -> Self {
        Manager { backoff }
    }
}

impl<K, C, S> Gate<K> for Manager<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn remaining(&self, key: &K) -> Option<Duration> {
        self.backoff.remaining(key, self.backoff.clock().now())
    }

    fn failed(&self, key: &K) {
        // In backoff already: another request advanced this window.
        let _ = self.backoff.try_next_now(key);
    }

    fn succeeded(&self, key: &K) {
        if self.remaining(key).is_none() {
            self.backoff.reset(key);
        }
    }

    fn hold(&self, key: &K, wait: Duration) {
        let until = self.backoff.clock().now().saturating_add(wait);
        self.backoff.hold_until(key, until);
    }
}
