//! The keyed manager as the middleware sees it: whatever its clock and
//! hasher, one object that says how long a key must still wait and records
//! what happened to it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, PoisonError};
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

/// A shared manager as a [`Gate`].
pub(crate) struct Manager<K, C: Clock, S> {
    backoff: Arc<Backoff<K, C, S>>,
    holds: Holds<K, C::Instant>,
}

impl<K, C: Clock, S> Manager<K, C, S> {
    pub(crate) fn new(backoff: Arc<Backoff<K, C, S>>) -> Self {
        Manager {
            backoff,
            holds: Holds::default(),
        }
    }
}

impl<K, C, S> Gate<K> for Manager<K, C, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock,
    S: BuildHasher + Clone + Send + Sync + 'static,
{
    fn remaining(&self, key: &K) -> Option<Duration> {
        let now = self.backoff.clock().now();
        let backoff = self.backoff.remaining(key, now);
        let held = self.holds.remaining(key, now);
        backoff.max(held)
    }

    fn failed(&self, key: &K) {
        // In backoff already: another request advanced this window.
        let _ = self.backoff.try_next_now(key);
    }

    fn succeeded(&self, key: &K) {
        if self.remaining(key).is_none() {
            self.backoff.reset(key);
            self.holds.clear(key);
        }
    }

    fn hold(&self, key: &K, wait: Duration) {
        let now = self.backoff.clock().now();
        self.holds
            .hold_until(key.clone(), now.saturating_add(wait), now);
    }
}

/// Holds kept beside the manager, with the meaning of the core's
/// `Backoff::hold_until(key, until)`: the key may not run before `until`;
/// a later call extends the hold, an earlier one never shortens it; a
/// success clears it; the backoff's growth is untouched.
struct Holds<K, I> {
    inner: Mutex<HoldMap<K, I>>,
}

struct HoldMap<K, I> {
    until: HashMap<K, I>,
    /// The size at which lapsed holds are next swept.
    sweep_at: usize,
}

impl<K, I> Default for Holds<K, I> {
    fn default() -> Self {
        Holds {
            inner: Mutex::new(HoldMap {
                until: HashMap::new(),
                sweep_at: SWEEP_FROM,
            }),
        }
    }
}

/// Below this many holds, lapsed ones are dropped only when looked up.
const SWEEP_FROM: usize = 64;

impl<K: Hash + Eq, I: ClockInstant> Holds<K, I> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HoldMap<K, I>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn hold_until(&self, key: K, until: I, now: I) {
        let mut map = self.lock();
        let held = map.until.entry(key).or_insert(until);
        *held = (*held).max(until);
        // Amortised: a sweep costs the map's size, and the next one waits
        // until the map has doubled from what the sweep left.
        if map.until.len() >= map.sweep_at {
            map.until.retain(|_, until| *until > now);
            map.sweep_at = SWEEP_FROM.max(2 * map.until.len());
        }
    }

    fn remaining(&self, key: &K, now: I) -> Option<Duration> {
        let mut map = self.lock();
        let until = *map.until.get(key)?;
        if until > now {
            Some(until.saturating_duration_since(now))
        } else {
            map.until.remove(key);
            None
        }
    }

    fn clear(&self, key: &K) {
        self.lock().until.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyed_backoff::clock::MockInstant;

    fn at(ms: i64) -> MockInstant {
        MockInstant::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn a_hold_extends_never_shortens_and_lapses() {
        let holds = Holds::<&str, MockInstant>::default();
        holds.hold_until("k", at(2000), at(0));
        holds.hold_until("k", at(1000), at(0));
        assert_eq!(
            holds.remaining(&"k", at(500)),
            Some(Duration::from_millis(1500))
        );
        holds.hold_until("k", at(3000), at(500));
        assert_eq!(
            holds.remaining(&"k", at(500)),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(holds.remaining(&"other", at(500)), None);
        assert_eq!(holds.remaining(&"k", at(3000)), None);
        assert!(holds.lock().until.is_empty(), "a lapsed hold is dropped");
    }

    #[test]
    fn lapsed_holds_are_swept_as_the_map_grows() {
        let holds = Holds::<u32, MockInstant>::default();
        for k in 0..SWEEP_FROM as u32 - 1 {
            holds.hold_until(k, at(10), at(0));
        }
        // The 64th hold, made once the others have lapsed, sweeps them.
        holds.hold_until(1000, at(100), at(50));
        assert_eq!(holds.lock().until.len(), 1);
        assert_eq!(holds.lock().sweep_at, SWEEP_FROM);
    }
}
