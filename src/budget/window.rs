//! Counters over a sliding time window.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::ClockInstant;

/// Slots per window.
pub(super) const SLOTS: u32 = 10;

/// Counters over a sliding window of `SLOTS` equal slots; the last slot is
/// the current one. Shared by [`TpsBudget`] and [`AdaptiveThrottle`].
#[derive(Debug)]
pub(super) struct Window<I, T> {
    slot_len: Duration,
    pub(super) slots: VecDeque<T>,
    current_start: Option<I>,
}

impl<I: ClockInstant, T: Default + Copy> Window<I, T> {
    pub(super) fn new(span: Duration) -> Self {
        Window {
            slot_len: (span / SLOTS).max(Duration::from_nanos(1)),
            slots: VecDeque::from(vec![T::default(); SLOTS as usize]),
            current_start: None,
        }
    }

    /// Moves the window to `now`, dropping slots older than its span.
    pub(super) fn roll(&mut self, now: I) {
        let start = *self.current_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        let steps = (elapsed.as_nanos() / self.slot_len.as_nanos()).min(u128::from(SLOTS)) as u32;
        for _ in 0..steps {
            self.slots.pop_front();
            self.slots.push_back(T::default());
        }
        if steps == SLOTS {
            self.current_start = Some(now);
        } else if steps > 0 {
            self.current_start = Some(start.saturating_add(self.slot_len * steps));
        }
    }

    pub(super) fn current(&mut self) -> &mut T {
        self.slots.back_mut().expect("a window always has slots")
    }
}
