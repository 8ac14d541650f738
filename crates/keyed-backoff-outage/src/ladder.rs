//! The shared ladder: during an outage every parked key waits on one ladder
//! of steps (from `initial` doubling to `max`, counted from the moment the
//! outage began) instead of climbing its own.
//!
//! Each key has one slot per step, drawn anew for every step (a key's draw
//! is a pure function of the key, the step and the manager's seed, so
//! asking twice gives the same slot): slots spread the keys evenly over the
//! step, so they never retry in lockstep. At its slot a key may try the
//! dependency once, if it is among the first `probes` keys of the step to
//! claim the turn; otherwise it waits for its slot in the next step.

use std::time::Duration;

use crate::parked::{Parked, Turn};
use crate::settings::OutageSettings;
use crate::store::SharedPhase;

/// Whole nanoseconds of `d`, saturating.
fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One step of the ladder, in time since the outage began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rung {
    /// 0 for the first step.
    pub(crate) index: u64,
    /// When it starts, after the outage began.
    pub(crate) start: Duration,
    /// How long it lasts.
    pub(crate) len: Duration,
}

impl Rung {
    /// Where in the step a key with draw `u` (in `[0, 1)`) has its slot.
    pub(crate) fn slot(self, u: f64) -> Duration {
        self.start
            .saturating_add(self.len.mul_f64(u.clamp(0.0, 1.0)).min(self.len))
    }
}

/// The ladder's shape: steps from `initial` doubling to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ladder {
    initial: u64,
    max: u64,
}

impl Ladder {
    /// The ladder of validated `settings` (`1 ms <= initial <= max`).
    pub(crate) fn new(settings: &OutageSettings) -> Self {
        Ladder {
            initial: ns(settings.initial).max(1),
            max: ns(settings.max).max(1),
        }
    }

    /// The longest step.
    pub(crate) fn max(&self) -> Duration {
        Duration::from_nanos(self.max)
    }

    /// The step under way `elapsed` after the outage began.
    pub(crate) fn rung_at(&self, elapsed: Duration) -> Rung {
        let elapsed = ns(elapsed);
        let (mut index, mut start, mut len) = (0u64, 0u64, self.initial.min(self.max));
        // Doubling: at most 64 steps before `len` reaches `max`.
        while len < self.max {
            if elapsed - start < len {
                return step(index, start, len);
            }
            start += len;
            index += 1;
            len = len.saturating_mul(2).min(self.max);
        }
        // Then every step is `max` long.
        let k = (elapsed - start) / len;
        step(index.saturating_add(k), start + k * len, len)
    }

    /// The step after `s`.
    pub(crate) fn after(&self, s: Rung) -> Rung {
        let len = ns(s.len).saturating_mul(2).min(self.max);
        step(
            s.index.saturating_add(1),
            ns(s.start).saturating_add(ns(s.len)),
            len,
        )
    }
}

fn step(index: u64, start: u64, len: u64) -> Rung {
    Rung {
        index,
        start: Duration::from_nanos(start),
        len: Duration::from_nanos(len),
    }
}

/// Who may try the dependency in each step: at most `limit` keys (every
/// key when `None`), the first to claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probes {
    limit: Option<u32>,
    step: u64,
    claimed: u32,
}

impl Probes {
    /// No claims yet, at most `limit` per step.
    pub(crate) fn new(limit: Option<u32>) -> Self {
        Probes {
            limit,
            step: 0,
            claimed: 0,
        }
    }

    /// Claims one of step `index`'s turns; false when they are all taken.
    pub(crate) fn claim(&mut self, index: u64) -> bool {
        let Some(limit) = self.limit else {
            return true;
        };
        if index != self.step {
            self.step = index;
            self.claimed = 0;
        }
        let free = self.claimed < limit;
        self.claimed += u32::from(free);
        free
    }
}

/// An outage under way: when it began, its ladder and its probes.
#[derive(Debug, Clone)]
pub(crate) struct Outage {
    began: Duration,
    ladder: Ladder,
    probes: Probes,
}

impl Outage {
    /// An outage that began at `began`, for validated `settings`.
    pub(crate) fn new(began: Duration, settings: &OutageSettings) -> Self {
        Outage {
            began,
            ladder: Ladder::new(settings),
            probes: Probes::new(settings.probes),
        }
    }

    /// The outage as the value a fleet shares, for [`restore`](Self::restore):
    /// when it began, the step of the latest probe claimed, and the claims in
    /// that step.
    pub(crate) fn shared(&self) -> SharedPhase {
        SharedPhase::Outage {
            began: self.began,
            probe_step: self.probes.step,
            probes_claimed: self.probes.claimed,
        }
    }

    /// The outage whose [`shared`](Self::shared) value holds these, for
    /// validated `settings`.
    pub(crate) fn restore(
        settings: &OutageSettings,
        began: Duration,
        step: u64,
        claimed: u32,
    ) -> Self {
        let mut outage = Outage::new(began, settings);
        outage.probes.step = step;
        outage.probes.claimed = claimed;
        outage
    }

    /// When it began.
    pub(crate) fn began(&self) -> Duration {
        self.began
    }

    /// The ladder's longest step.
    pub(crate) fn max_step(&self) -> Duration {
        self.ladder.max()
    }

    /// What `parked` may do at `at`; `draw(step)` is the key's draw in
    /// `[0, 1)` for that step. At or after its slot, if it has not tried in
    /// this step, it claims one of the step's probe turns (once per step)
    /// and may go; otherwise it waits for its slot, or for its slot in the
    /// next step.
    pub(crate) fn turn<L>(
        &mut self,
        parked: &mut Parked<L>,
        at: Duration,
        draw: impl Fn(u64) -> f64,
    ) -> Turn {
        self.decide(parked, at, &draw).0
    }

    /// `parked` tried the dependency at `at` and failed. On its turn (see
    /// [`turn`](Self::turn)) the failure counts: `Ok` with its slot in the
    /// next step, which it waits for. Out of turn, `Err` with the time its
    /// turn comes.
    pub(crate) fn failed<L>(
        &mut self,
        parked: &mut Parked<L>,
        at: Duration,
        draw: impl Fn(u64) -> f64,
    ) -> Result<Duration, Duration> {
        match self.decide(parked, at, &draw) {
            (Turn::Go, step) => {
                parked.counted_in = Some(step.index);
                Ok(self.slot(self.ladder.after(step), &draw))
            }
            (Turn::Wait(until), _) => Err(until),
        }
    }

    /// The turn, and the step under way at `at`.
    fn decide<L>(
        &mut self,
        parked: &mut Parked<L>,
        at: Duration,
        draw: &dyn Fn(u64) -> f64,
    ) -> (Turn, Rung) {
        let step = self.ladder.rung_at(at.saturating_sub(self.began));
        let next = self.slot(self.ladder.after(step), draw);
        if parked.counted_in == Some(step.index) {
            return (Turn::Wait(next), step);
        }
        let slot = self.slot(step, draw);
        if at < slot {
            return (Turn::Wait(slot), step);
        }
        if parked.probe_in == Some(step.index) || self.probes.claim(step.index) {
            parked.probe_in = Some(step.index);
            return (Turn::Go, step);
        }
        (Turn::Wait(next), step)
    }

    /// The time of a key's slot in `step`.
    fn slot(&self, step: Rung, draw: &dyn Fn(u64) -> f64) -> Duration {
        self.began.saturating_add(step.slot(draw(step.index)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ladder(initial_ms: u64, max_ms: u64) -> Ladder {
        Ladder::new(&OutageSettings::new().ladder(
            Duration::from_millis(initial_ms),
            Duration::from_millis(max_ms),
        ))
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn steps_double_then_repeat_at_the_cap() {
        let l = ladder(1_000, 4_000);
        // Steps: [0,1) [1,3) [3,7) [7,11) [11,15) …
        let starts: Vec<_> = [0, 999, 1_000, 2_999, 3_000, 6_999, 7_000, 10_999, 11_000]
            .iter()
            .map(|&t| {
                let s = l.rung_at(ms(t));
                (s.index, s.start, s.len)
            })
            .collect();
        assert_eq!(
            starts,
            [
                (0, ms(0), ms(1_000)),
                (0, ms(0), ms(1_000)),
                (1, ms(1_000), ms(2_000)),
                (1, ms(1_000), ms(2_000)),
                (2, ms(3_000), ms(4_000)),
                (2, ms(3_000), ms(4_000)),
                (3, ms(7_000), ms(4_000)),
                (3, ms(7_000), ms(4_000)),
                (4, ms(11_000), ms(4_000)),
            ]
        );
        // After the cap, step n starts at 3 s + (n − 2)·4 s.
        let s = l.rung_at(ms(3_000 + 4_000 * 1_000 + 1));
        assert_eq!((s.index, s.start), (1_002, ms(3_000 + 4_000 * 1_000)));
    }

    #[test]
    fn after_is_the_step_that_follows() {
        let l = ladder(250, 1_000);
        let mut s = l.rung_at(Duration::ZERO);
        for _ in 0..50 {
            let next = l.after(s);
            assert_eq!(next, l.rung_at(s.start + s.len), "after {s:?}");
            assert_eq!(
                l.rung_at(next.start + next.len - Duration::from_nanos(1)),
                next
            );
            s = next;
        }
        assert_eq!(s.len, l.max());
    }

    #[test]
    fn equal_initial_and_max_and_huge_times_hold() {
        let l = ladder(5, 5);
        assert_eq!(l.rung_at(ms(12)).index, 2);
        let far = l.rung_at(Duration::MAX);
        assert!(far.start <= Duration::MAX && far.len == ms(5));
        assert!(l.after(far).start >= far.start);
    }

    #[test]
    fn slots_spread_over_the_step() {
        let s = step(3, 7_000_000_000, 4_000_000_000);
        assert_eq!(s.slot(0.0), ms(7_000));
        assert_eq!(s.slot(0.5), ms(9_000));
        assert!(s.slot(0.999_999) < ms(11_000));
        // Out-of-range draws are clamped into the step.
        assert_eq!(s.slot(2.0), ms(11_000));
        assert_eq!(s.slot(-1.0), ms(7_000));
    }

    #[test]
    fn probes_allow_the_first_claims_of_each_step() {
        let mut p = Probes::new(Some(2));
        assert_eq!([p.claim(0), p.claim(0), p.claim(0)], [true, true, false]);
        assert_eq!([p.claim(1), p.claim(1), p.claim(1)], [true, true, false]);
        let mut all = Probes::new(None);
        assert!((0..1_000).all(|_| all.claim(0)));
    }

    /// An outage at 100 s on a 1 s → 4 s ladder with `probes` per step.
    fn outage(probes: Option<u32>) -> Outage {
        let settings = OutageSettings::new()
            .ladder(ms(1_000), ms(4_000))
            .probes(probes);
        Outage::new(ms(100_000), &settings)
    }

    #[test]
    fn a_key_waits_for_its_slot_then_tries_once_per_step() {
        let mut o = outage(None);
        let mut k = Parked::new(());
        let half = |_| 0.5;
        // Rung 0 is [100 s, 101 s): slot at 100.5 s.
        assert_eq!(o.turn(&mut k, ms(100_000), half), Turn::Wait(ms(100_500)));
        assert_eq!(o.failed(&mut k, ms(100_200), half), Err(ms(100_500)));
        assert_eq!(o.turn(&mut k, ms(100_500), half), Turn::Go);
        // Asking again changes nothing; failing counts once, then waits for
        // step 1 ([101 s, 103 s), slot at 102 s).
        assert_eq!(o.turn(&mut k, ms(100_600), half), Turn::Go);
        assert_eq!(o.failed(&mut k, ms(100_700), half), Ok(ms(102_000)));
        assert_eq!(o.turn(&mut k, ms(100_800), half), Turn::Wait(ms(102_000)));
        assert_eq!(o.failed(&mut k, ms(100_900), half), Err(ms(102_000)));
        assert_eq!(o.turn(&mut k, ms(101_500), half), Turn::Wait(ms(102_000)));
        assert_eq!(o.failed(&mut k, ms(102_000), half), Ok(ms(105_000)));
    }

    #[test]
    fn a_key_that_tries_without_asking_is_counted_on_its_turn() {
        let mut o = outage(Some(1));
        let mut k = Parked::new(());
        // Past its slot in step 0 and a probe turn is free: counted.
        assert_eq!(o.failed(&mut k, ms(100_900), |_| 0.0), Ok(ms(101_000)));
    }

    #[test]
    fn only_the_first_probes_of_a_step_go() {
        let mut o = outage(Some(2));
        let draw = |key: u64| move |step: u64| ((key * 7 + step * 3) % 10) as f64 / 10.0;
        let mut keys: Vec<Parked<u64>> = (0..10).map(Parked::new).collect();
        // At the end of step 0 every slot has passed; two keys may go.
        let at = ms(100_999);
        let turns: Vec<Turn> = keys
            .iter_mut()
            .map(|k| {
                let key = k.level;
                o.turn(k, at, draw(key))
            })
            .collect();
        assert_eq!(turns.iter().filter(|t| **t == Turn::Go).count(), 2);
        // The others wait for their slot in step 1, spread over [101 s, 103 s).
        let mut waits: Vec<Duration> = turns
            .iter()
            .filter_map(|t| match t {
                Turn::Wait(until) => Some(*until),
                Turn::Go => None,
            })
            .collect();
        waits.sort();
        waits.dedup();
        assert!(waits.len() >= 4, "{waits:?}");
        assert!(waits.iter().all(|w| (ms(101_000)..ms(103_000)).contains(w)));
        // A key that claimed a turn keeps it for the step; the probes of
        // step 1 are claimed anew.
        let probe = keys.iter().position(|k| k.probe_in == Some(0)).unwrap();
        let key = keys[probe].level;
        assert_eq!(o.turn(&mut keys[probe], at, draw(key)), Turn::Go);
        let step1 = ms(102_999);
        let goes = keys
            .iter_mut()
            .map(|k| {
                let key = k.level;
                o.turn(k, step1, draw(key))
            })
            .filter(|t| *t == Turn::Go)
            .count();
        assert_eq!(goes, 2);
    }
}
