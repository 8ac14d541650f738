//! The release: when an outage ends, the keys it parked are let go one at a
//! time at a bounded rate, in the order they ask, instead of all at once
//! or each at the end of its own long wait.
//!
//! A parked key asks again at least once every two steps of the outage
//! ladder; the first time it asks after the end, it is given the next free
//! time of the release: the later of now, one gap (`1 / rate`) after the
//! previous key's, and one second after the attempt `rate` places back.
//! The attempts counted include those that reached the dependency in the
//! last second of the outage (the probes that found it back), so no
//! one-second window of the recovery holds more than `rate` attempts. The
//! keys ask at times spread by the ladder's per-key slots, so the order is
//! a random one.

use std::collections::VecDeque;
use std::time::Duration;

use crate::parked::{Parked, Turn};
use crate::store::SharedPhase;

const SECOND: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Release {
    /// The earliest time the next key may be let go.
    next: Duration,
    /// The least time between two keys.
    gap: Duration,
    /// The most attempts in any one second: `rate` rounded down, at least 1.
    per_second: usize,
    /// The latest attempts (at most `per_second`), oldest first: the
    /// outage's last ones, then the keys let go.
    latest: VecDeque<Duration>,
    /// After this, no parked key is waiting any more.
    until: Duration,
}

impl Release {
    /// The release after an outage that ended at `ended`, of `parked` keys at
    /// `rate` keys per second (validated: `0 < rate <= 1e6`), whose ladder's
    /// longest step was `max_step`. `before` are the times, oldest first and
    /// none after `ended`, of the attempts the outage let through in its
    /// last second: they count against the release's first second.
    ///
    /// Every parked key asks within two steps of the end, and the last of
    /// them is let go at most `parked` gaps, and one for each attempt before,
    /// after that: past then, no key is parked.
    pub(crate) fn new(
        ended: Duration,
        rate: f64,
        parked: usize,
        max_step: Duration,
        before: impl IntoIterator<Item = Duration>,
    ) -> Self {
        // Rounded up, so that `rate` keys never fit in less than a second.
        let gap = Duration::from_nanos((1e9 / rate).ceil() as u64).max(Duration::from_nanos(1));
        let per_second = (rate.floor() as usize).max(1);
        let mut latest = VecDeque::new();
        for at in before {
            if at.saturating_add(SECOND) > ended {
                push_bounded(&mut latest, at, per_second);
            }
        }
        let waiting = parked.saturating_add(latest.len());
        let queue = gap.saturating_mul(u32::try_from(waiting).unwrap_or(u32::MAX));
        Release {
            next: ended,
            gap,
            per_second,
            latest,
            until: ended
                .saturating_add(max_step.saturating_mul(2))
                .saturating_add(queue),
        }
    }

    /// The release as the value a fleet shares, for [`restore`](Self::restore):
    /// the next free time, the gap, the most per second, the end, and the
    /// latest attempts.
    pub(crate) fn shared(&self) -> SharedPhase {
        SharedPhase::Release {
            next: self.next,
            gap: self.gap,
            per_second: u64::try_from(self.per_second).unwrap_or(u64::MAX),
            until: self.until,
            latest: self.latest.iter().copied().collect(),
        }
    }

    /// The release whose [`shared`](Self::shared) value holds these; `None`
    /// when they make no release.
    pub(crate) fn restore(
        next: Duration,
        gap: Duration,
        per_second: u64,
        until: Duration,
        latest: &[Duration],
    ) -> Option<Self> {
        let per_second = usize::try_from(per_second).ok().filter(|n| *n > 0)?;
        (latest.len() <= per_second && !gap.is_zero()).then(|| Release {
            next,
            gap,
            per_second,
            latest: latest.iter().copied().collect(),
            until,
        })
    }

    /// Whether the release is over at `at`: no key is parked any more.
    pub(crate) fn over(&self, at: Duration) -> bool {
        at > self.until
    }

    /// The next free time at or after `at`, taken.
    pub(crate) fn claim(&mut self, at: Duration) -> Duration {
        let mut slot = self.next.max(at);
        if self.latest.len() == self.per_second {
            // The attempt `per_second` places back must be a second old.
            slot = slot.max(self.latest[0].saturating_add(SECOND));
        }
        push_bounded(&mut self.latest, slot, self.per_second);
        self.next = slot.saturating_add(self.gap);
        slot
    }

    /// What `parked` may do at `at`: the first time it asks, it takes its
    /// time to go; it waits until then and goes after.
    pub(crate) fn turn<L>(&mut self, parked: &mut Parked<L>, at: Duration) -> Turn {
        let go = *parked.release_at.get_or_insert_with(|| self.claim(at));
        if at < go { Turn::Wait(go) } else { Turn::Go }
    }

    /// The least time between two keys.
    #[cfg(test)]
    pub(crate) fn gap(&self) -> Duration {
        self.gap
    }
}

/// Appends `at` to `latest`, keeping only the last `most` times.
pub(crate) fn push_bounded(latest: &mut VecDeque<Duration>, at: Duration, most: usize) {
    latest.push_back(at);
    if latest.len() > most {
        latest.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn keys_go_in_the_order_they_ask_one_gap_apart() {
        let mut r = Release::new(ms(1_000), 10.0, 3, ms(4_000), []);
        assert_eq!(r.gap(), ms(100));
        let mut keys: Vec<Parked<()>> = (0..3).map(|_| Parked::new(())).collect();
        // Three keys ask at once: 1.0 s, 1.1 s, 1.2 s.
        let turns: Vec<Turn> = keys.iter_mut().map(|k| r.turn(k, ms(1_000))).collect();
        assert_eq!(
            turns,
            [Turn::Go, Turn::Wait(ms(1_100)), Turn::Wait(ms(1_200))]
        );
        // Asking again keeps the time taken.
        assert_eq!(r.turn(&mut keys[2], ms(1_150)), Turn::Wait(ms(1_200)));
        assert_eq!(r.turn(&mut keys[2], ms(1_200)), Turn::Go);
        // A key asking after the queue has drained goes at once.
        let mut late = Parked::new(());
        assert_eq!(r.turn(&mut late, ms(5_000)), Turn::Go);
        assert_eq!(r.claim(ms(5_000)), ms(5_100));
    }

    #[test]
    fn no_second_lets_more_than_the_rate_go() {
        // 1,000 keys asking in a burst at 0 s and another at 2 s, at 7 per
        // second (a gap that does not divide a second evenly).
        let mut r = Release::new(Duration::ZERO, 7.0, 1_000, ms(4_000), []);
        let mut times: Vec<Duration> = (0..1_000)
            .map(|n| {
                let at = if n < 500 { Duration::ZERO } else { ms(2_000) };
                r.claim(at)
            })
            .collect();
        times.sort();
        for (i, t) in times.iter().enumerate() {
            let in_second = times[i..]
                .iter()
                .take_while(|u| **u < *t + ms(1_000))
                .count();
            assert!(in_second <= 7, "{in_second} keys in the second from {t:?}");
        }
        // The release lasts two steps and one gap past the last key's time
        // (it would have lasted that long had every key asked at once).
        let last = *times.last().unwrap();
        assert!(!r.over(last + ms(8_000) + r.gap()));
        assert!(r.over(last + ms(8_000) + r.gap() + Duration::from_nanos(1)));
    }

    #[test]
    fn attempts_in_the_outage_s_last_second_count_against_the_first() {
        // Rate 4: probes at 9.5 s and twice at 10 s (the end) leave room for
        // one key at 10 s; the next go a second after each probe, one gap apart.
        let before = [ms(8_000), ms(9_500), ms(10_000), ms(10_000)];
        let mut r = Release::new(ms(10_000), 4.0, 10, ms(4_000), before);
        let times: Vec<Duration> = (0..4).map(|_| r.claim(ms(10_000))).collect();
        assert_eq!(times, [ms(10_000), ms(10_500), ms(11_000), ms(11_250)]);
        // Then one gap apart again.
        assert_eq!(r.claim(ms(10_000)), ms(11_500));
    }

    #[test]
    fn the_release_is_over_after_two_steps_and_the_queue() {
        let r = Release::new(ms(10_000), 100.0, 50, ms(4_000), []);
        // 10 s + 2·4 s + 50·10 ms.
        assert!(!r.over(ms(18_500)));
        assert!(r.over(ms(18_501)));
        // Extreme inputs saturate.
        let r = Release::new(Duration::MAX, 1e-3, usize::MAX, Duration::MAX, []);
        assert!(!r.over(Duration::MAX));
    }
}
