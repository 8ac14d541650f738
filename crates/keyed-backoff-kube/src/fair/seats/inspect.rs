//! What the seats report: the longest waits and the queues' dump.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Seats;
use crate::fair::stats::{FlowWait, Priority};

impl<R: Clone + Eq + Hash> Seats<R> {
    /// How long the oldest waiter has waited.
    pub(super) fn longest_wait(&self) -> Duration {
        self.waiters
            .first_key_value()
            .map_or(Duration::ZERO, |(_, w)| w.since.elapsed())
    }

    /// The longest wait of each flow with a reconcile waiting, longest
    /// first.
    pub(crate) fn longest_waits(&self) -> Vec<FlowWait> {
        let mut oldest: HashMap<(Priority, &Arc<str>), Instant> = HashMap::new();
        for w in self.waiters.values() {
            let since = oldest.entry((w.priority, &w.flow)).or_insert(w.since);
            *since = (*since).min(w.since);
        }
        let mut waits: Vec<FlowWait> = oldest
            .into_iter()
            .map(|((priority, flow), since)| FlowWait {
                flow: flow.to_string(),
                priority,
                waited: since.elapsed(),
            })
            .collect();
        waits.sort_by(|a, b| b.waited.cmp(&a.waited).then(a.flow.cmp(&b.flow)));
        waits
    }

    /// The `Apf`'s levels, queues and requests.
    pub(crate) fn dump(&self) -> fair_admission::Dump {
        self.apf.dump()
    }
}
