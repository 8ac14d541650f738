//! client-go's `Backoff` ported the way a user would write it.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// client-go's `Backoff` as a user would port it: one lock around a map.
pub struct PlainPort {
    map: RwLock<HashMap<String, PlainEntry>>,
    initial: Duration,
    max: Duration,
}

struct PlainEntry {
    backoff: Duration,
    last_update: Instant,
}

impl PlainPort {
    pub fn new(initial: Duration, max: Duration) -> Self {
        PlainPort {
            map: RwLock::new(HashMap::new()),
            initial,
            max,
        }
    }

    fn has_expired(&self, event: Instant, last_update: Instant) -> bool {
        event.saturating_duration_since(last_update) > self.max * 2
    }

    pub fn next(&self, id: &str, event: Instant) -> Duration {
        let mut map = self.map.write().unwrap();
        let now = Instant::now();
        if let Some(e) = map.get_mut(id)
            && !self.has_expired(event, e.last_update)
        {
            e.backoff = (e.backoff * 2).min(self.max);
            e.last_update = now;
            return e.backoff;
        }
        let entry = PlainEntry {
            backoff: self.initial,
            last_update: now,
        };
        map.insert(id.to_string(), entry);
        self.initial
    }

    pub fn is_in_backoff_since_update(&self, id: &str, event: Instant) -> bool {
        let map = self.map.read().unwrap();
        let Some(e) = map.get(id) else {
            return false;
        };
        if self.has_expired(event, e.last_update) {
            return false;
        }
        event.saturating_duration_since(e.last_update) < e.backoff || event < e.last_update
    }
}
