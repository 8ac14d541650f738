//! The watch: the detector, the outage under way or the release after it,
//! and the keys held, behind one lock. The manager tells it every outcome
//! and asks it about a key before answering for it; the watch decides with
//! the pure rules of its sibling modules and never touches the entries.
//!
//! Held keys are remembered by a 64-bit hash of the key (seeded), not by
//! the key: a query can hold a key it only borrows, and two keys whose
//! hashes collide would merely share their turns.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::detector::{Change, Counts, Detector, Outcome};
use super::held::{Held, Turn};
use super::ladder::Outage;
use super::release::Release;
use super::settings::OutageSettings;
use crate::draws::unit_at;

/// What the manager does with a key the watch was asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict<L> {
    /// Not held: the manager's own rules decide.
    Free,
    /// Held until this time; a failure reported now is `counted` when it
    /// was the key's turn (the gate advances it, without touching the
    /// entry), and out of turn otherwise (the gate refuses it).
    Held { until: Duration, counted: bool },
    /// Let go now, after the outage: the manager's own rules decide, with
    /// the key's own level as it stood when the outage first held it.
    Released { level: L },
}

/// Why the manager asks about a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// To answer a query (`remaining`, the checks).
    Query,
    /// Before writing a failure (`next`, the gate).
    Failure,
}

/// What a change of state was, for events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// An outage began, with the window's counts.
    Began(Counts),
    /// The outage ended after `lasted`, with `held` keys to let go.
    Ended { lasted: Duration, held: usize },
    /// The release is over: `released` keys were let go.
    Released { released: u64 },
}

/// Counters of the watch, for [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) in_outage: bool,
    pub(crate) held: usize,
    pub(crate) outages: u64,
}

enum Phase {
    Normal,
    Outage(Outage),
    Release(Release),
}

struct Inner<L> {
    detector: Detector,
    phase: Phase,
    held: HashMap<u64, Held<L>>,
    outages: u64,
    released: u64,
}

pub(crate) struct Watch<L> {
    settings: OutageSettings,
    hasher: foldhash::quality::FixedState,
    /// False while nothing is held: the manager's queries skip the lock.
    active: AtomicBool,
    inner: Mutex<Inner<L>>,
}

impl<L: Copy> Watch<L> {
    /// A watch for validated `settings`; `seed` draws the keys' slots.
    pub(crate) fn new(settings: OutageSettings, seed: u64) -> Self {
        Watch {
            settings,
            hasher: foldhash::quality::FixedState::with_seed(seed),
            active: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                detector: Detector::new(&settings),
                phase: Phase::Normal,
                held: HashMap::new(),
                outages: 0,
                released: 0,
            }),
        }
    }

    /// Whether an outage or a release is under way (a relaxed read: a
    /// caller that races a change sees it at its next call).
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// A failure of `key` the manager wrote at `at`; `fresh` when it
    /// started the key's ladder.
    pub(crate) fn failed<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        fresh: bool,
        at: Duration,
        mut events: impl FnMut(Event),
    ) {
        let outcome = match fresh {
            true => Outcome::Fresh(self.hasher.hash_one(key)),
            false => Outcome::Failure,
        };
        let began = {
            let mut inner = self.inner.lock();
            let inner = &mut *inner;
            let began = inner.detector.record(outcome, at) == Some(Change::Began);
            began.then(|| {
                self.begin(inner, at);
                Event::Began(inner.detector.declared())
            })
        };
        // Events are told with the lock released.
        began.into_iter().for_each(&mut events);
    }

    /// A success of `key` at `at`: it is no longer held, and it may end
    /// the outage.
    pub(crate) fn succeeded<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        mut events: impl FnMut(Event),
    ) {
        let ended = {
            let mut inner = self.inner.lock();
            let inner = &mut *inner;
            if self.active() {
                inner.held.remove(&self.hasher.hash_one(key));
            }
            match (inner.detector.record(Outcome::Success, at), &inner.phase) {
                (Some(Change::Ended), Phase::Outage(outage)) => {
                    let (lasted, held) = (at.saturating_sub(outage.began()), inner.held.len());
                    let rate = self.settings.release_rate;
                    let release = Release::new(at, rate, held, outage.max_step());
                    inner.phase = Phase::Release(release);
                    Some(Event::Ended { lasted, held })
                }
                _ => None,
            }
        };
        ended.into_iter().for_each(&mut events);
    }

    /// The watch's counters now.
    pub(crate) fn tally(&self) -> Tally {
        let inner = self.inner.lock();
        Tally {
            in_outage: matches!(inner.phase, Phase::Outage(_)),
            held: inner.held.len(),
            outages: inner.outages,
        }
    }

    /// What `key` may do at `at`, `asked` before answering a query or
    /// before writing a failure. During an outage the key is held (`level`
    /// gives its own level the first time); during the release it takes
    /// its time to go. For a failure, `Free` means the manager writes it
    /// and then calls [`failed`](Self::failed).
    pub(crate) fn verdict<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        asked: Asked,
        level: impl FnOnce() -> L,
        mut events: impl FnMut(Event),
    ) -> Verdict<L> {
        if !self.active() {
            return Verdict::Free;
        }
        let (verdict, event) = self.decide(key, at, asked == Asked::Failure, level);
        event.into_iter().for_each(&mut events);
        verdict
    }

    /// [`verdict`](Self::verdict), and the event it causes.
    fn decide<Q: Hash + ?Sized>(
        &self,
        key: &Q,
        at: Duration,
        failure: bool,
        level: impl FnOnce() -> L,
    ) -> (Verdict<L>, Option<Event>) {
        let mut inner = self.inner.lock();
        let inner = &mut *inner;
        if failure && matches!(inner.phase, Phase::Outage(_)) {
            // Any failure seen during an outage breaks a run of successes.
            inner.detector.record(Outcome::Failure, at);
        }
        let hash = self.hasher.hash_one(key);
        let verdict = match &mut inner.phase {
            Phase::Normal => Verdict::Free,
            Phase::Outage(outage) => {
                let held = inner.held.entry(hash).or_insert_with(|| Held::new(level()));
                let draw = |step: u64| unit_at(hash, step);
                let turn = match failure {
                    true => outage.failed(held, at, draw),
                    false => match outage.turn(held, at, draw) {
                        Turn::Go => return (Verdict::Free, None),
                        Turn::Wait(until) => Err(until),
                    },
                };
                let (Ok(until) | Err(until)) = turn;
                Verdict::Held {
                    until,
                    counted: turn.is_ok(),
                }
            }
            Phase::Release(release) => {
                if release.over(at) {
                    let released = inner.released;
                    self.settle(inner);
                    return (Verdict::Free, Some(Event::Released { released }));
                }
                let Some(held) = inner.held.get_mut(&hash) else {
                    return (Verdict::Free, None);
                };
                inner.released += u64::from(held.release_at.is_none());
                match release.turn(held, at) {
                    Turn::Go => Verdict::Released { level: held.level },
                    Turn::Wait(until) => Verdict::Held {
                        until,
                        counted: false,
                    },
                }
            }
        };
        (verdict, None)
    }

    /// An outage begins at `at`. Keys still waiting to be let go from an
    /// earlier one keep the level they had then; the others are forgotten.
    fn begin(&self, inner: &mut Inner<L>, at: Duration) {
        inner
            .held
            .retain(|_, h| h.release_at.is_none_or(|go| go > at));
        for h in inner.held.values_mut() {
            *h = Held::new(h.level);
        }
        inner.phase = Phase::Outage(Outage::new(at, &self.settings));
        inner.outages += 1;
        self.active.store(true, Ordering::Relaxed);
    }

    /// The release is over: nothing is held any more.
    fn settle(&self, inner: &mut Inner<L>) {
        inner.phase = Phase::Normal;
        inner.held = HashMap::new();
        inner.released = 0;
        self.active.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// 3 keys declare an outage; 1 s → 4 s ladder, 2 probes, 10 keys/s.
    fn watch() -> Watch<Option<u32>> {
        let settings = OutageSettings::new()
            .min_failing_keys(3)
            .ladder(ms(1_000), ms(4_000))
            .probes(Some(2))
            .release_rate(10.0)
            .recovery_successes(1);
        Watch::new(settings, 7)
    }

    /// Declares an outage at 1 s; returns the events seen.
    fn declare(w: &Watch<Option<u32>>) -> Vec<Event> {
        let mut seen = Vec::new();
        for k in 100..103u32 {
            w.failed(&k, true, ms(1_000), |e| seen.push(e));
        }
        seen
    }

    fn until(v: Verdict<Option<u32>>) -> Duration {
        match v {
            Verdict::Held { until, .. } => until,
            other => panic!("not held: {other:?}"),
        }
    }

    #[test]
    fn nothing_is_held_until_an_outage_is_declared() {
        let w = watch();
        assert_eq!(
            w.verdict(&1, ms(0), Asked::Query, || None, |_| {}),
            Verdict::Free
        );
        w.failed(&200, true, ms(0), |_| {});
        // The same key again is not a second key.
        w.failed(&200, true, ms(0), |_| {});
        assert!(!w.active());
        let seen = declare(&w);
        assert!(matches!(seen[..], [Event::Began(c)] if c.fresh_failures == 3));
        assert!(w.active());
        let t = w.tally();
        assert_eq!((t.in_outage, t.held, t.outages), (true, 0, 1));
    }

    #[test]
    fn during_an_outage_few_keys_go_and_the_rest_wait_on_the_ladder() {
        let w = watch();
        declare(&w);
        // At the end of step 0 ([1 s, 2 s)) every key's slot has passed.
        let at = ms(1_999);
        let verdicts: Vec<_> = (0..100u32)
            .map(|k| w.verdict(&k, at, Asked::Query, || Some(k), |_| {}))
            .collect();
        assert_eq!(verdicts.iter().filter(|v| **v == Verdict::Free).count(), 2);
        let waits: Vec<Duration> = verdicts
            .into_iter()
            .filter(|v| *v != Verdict::Free)
            .map(until)
            .collect();
        // The others wait for their slot in step 1, [2 s, 4 s), spread out.
        assert!(waits.iter().all(|u| (ms(2_000)..ms(4_000)).contains(u)));
        let early = waits.iter().filter(|u| **u < ms(3_000)).count();
        assert!((30..70).contains(&early), "{early} of 98 in the first half");
        assert_eq!(w.tally().held, 100);
        // A failure on the key's turn counts; out of turn it does not.
        let probe = (0..100u32)
            .find(|k| w.verdict(k, at, Asked::Query, || None, |_| {}) == Verdict::Free)
            .unwrap();
        let v = w.verdict(&probe, at, Asked::Failure, || None, |_| {});
        assert!(matches!(v, Verdict::Held { counted: true, until } if until >= ms(2_000)));
        let v = w.verdict(&probe, at, Asked::Failure, || None, |_| {});
        assert!(matches!(v, Verdict::Held { counted: false, .. }));
    }

    #[test]
    fn after_the_outage_keys_go_one_gap_apart_at_their_own_level() {
        let w = watch();
        declare(&w);
        for k in 0..20u32 {
            w.verdict(&k, ms(1_500), Asked::Query, || Some(k * 10), |_| {});
        }
        let mut seen = Vec::new();
        w.succeeded(&999, ms(5_000), |e| seen.push(e));
        assert_eq!(
            seen,
            [Event::Ended {
                lasted: ms(4_000),
                held: 20
            }]
        );
        // All ask at 5 s: one goes now, the others 100 ms apart.
        let mut times = Vec::new();
        for k in 0..20u32 {
            match w.verdict(&k, ms(5_000), Asked::Query, || unreachable!(), |_| {}) {
                Verdict::Released { level } => {
                    assert_eq!(level, Some(k * 10));
                    times.push(ms(5_000));
                }
                v => times.push(until(v)),
            }
        }
        times.sort();
        let gaps: Vec<Duration> = times.windows(2).map(|p| p[1] - p[0]).collect();
        assert!(gaps.iter().all(|g| *g == ms(100)), "{gaps:?}");
        // Each key goes at its time, with the level it had.
        let last = *times.last().unwrap();
        let gone = (0..20u32)
            .filter(|k| {
                matches!(
                    w.verdict(k, last, Asked::Query, || None, |_| {}),
                    Verdict::Released { .. }
                )
            })
            .count();
        assert_eq!(gone, 20);
        // A key that was never held is free.
        assert_eq!(
            w.verdict(&500, ms(5_000), Asked::Query, || None, |_| {}),
            Verdict::Free
        );
        // The release is over two steps and the queue after the end.
        let over = ms(5_000 + 8_000 + 20 * 100 + 1);
        let mut seen = Vec::new();
        assert_eq!(
            w.verdict(&1, over, Asked::Query, || None, |e| seen.push(e)),
            Verdict::Free
        );
        assert_eq!(seen, [Event::Released { released: 20 }]);
        assert!(!w.active());
        assert_eq!(
            w.tally(),
            Tally {
                in_outage: false,
                held: 0,
                outages: 1
            }
        );
    }

    #[test]
    fn a_new_outage_during_the_release_keeps_the_levels_of_keys_still_waiting() {
        let w = watch();
        declare(&w);
        for k in 0..3u32 {
            w.verdict(&k, ms(1_500), Asked::Query, || Some(k), |_| {});
        }
        w.succeeded(&999, ms(5_000), |_| {});
        // Key 0 goes at 5 s, key 1 is told 5.1 s, key 2 has not asked.
        assert!(matches!(
            w.verdict(&0, ms(5_000), Asked::Query, || None, |_| {}),
            Verdict::Released { .. }
        ));
        assert_eq!(
            until(w.verdict(&1, ms(5_000), Asked::Query, || None, |_| {})),
            ms(5_100)
        );
        for k in 300..303u32 {
            w.failed(&k, true, ms(5_050), |_| {});
        }
        assert!(w.tally().in_outage);
        // Key 0 was let go: held anew at its level now. Keys 1 and 2 were
        // still waiting: they keep their first level.
        w.verdict(&0, ms(5_060), Asked::Query, || Some(100), |_| {});
        w.verdict(&1, ms(5_060), Asked::Query, || Some(101), |_| {});
        w.verdict(&2, ms(5_060), Asked::Query, || Some(102), |_| {});
        w.succeeded(&999, ms(9_000), |_| {});
        for k in 0..3u32 {
            w.verdict(&k, ms(9_000), Asked::Query, || None, |_| {});
        }
        let levels: Vec<_> = (0..3u32)
            .map(
                |k| match w.verdict(&k, ms(9_200), Asked::Query, || None, |_| {}) {
                    Verdict::Released { level } => level,
                    v => panic!("{v:?}"),
                },
            )
            .collect();
        assert_eq!(levels, [Some(100), Some(1), Some(2)]);
    }

    #[test]
    fn a_success_lets_its_key_go_and_failures_break_a_run_of_successes() {
        let settings = OutageSettings::new()
            .min_failing_keys(3)
            .recovery_successes(2);
        let w: Watch<()> = Watch::new(settings, 1);
        for k in 0..3u32 {
            w.failed(&k, true, ms(0), |_| {});
        }
        w.verdict(&1, ms(10), Asked::Query, || (), |_| {});
        assert_eq!(w.tally().held, 1);
        w.succeeded(&1, ms(20), |_| {});
        assert_eq!(w.tally().held, 0);
        // A failure between two successes: the outage goes on.
        w.verdict(&2, ms(30), Asked::Failure, || (), |_| {});
        w.succeeded(&3, ms(40), |_| {});
        assert!(w.tally().in_outage);
        w.succeeded(&4, ms(50), |_| {});
        assert!(!w.tally().in_outage);
    }
}
