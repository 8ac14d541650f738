//! The fleet's state decides as the in-process watch does: the same calls
//! on both give the same answers, through text written and read back at
//! every call.

use std::collections::HashMap;

use super::*;
use crate::watch::Watch;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn settings() -> OutageSettings {
    OutageSettings::new()
        .min_failing_keys(3)
        .ladder(ms(1_000), ms(4_000))
        .probes(Some(2))
        .release_rate(10.0)
        .recovery_successes(2)
}

/// A fleet's state kept as values in maps, as a store keeps it.
struct Values {
    rules: Rules,
    state: Option<SharedOutage>,
    entries: HashMap<u64, ParkedKey>,
}

/// One decision and what it changed.
#[derive(Debug)]
struct Step {
    ruling: Ruling<Option<Level>>,
    event: Option<Event>,
    view: View,
    written: Written,
}

impl Values {
    fn new(seed: u64) -> Self {
        Values {
            rules: Rules::new(settings().validate().unwrap(), seed),
            state: None,
            entries: HashMap::new(),
        }
    }

    fn step(&mut self, key: u32, at: Duration, call: Call, level: Option<Level>) -> Step {
        let rules = self.rules.clone();
        self.step_by(&rules, key, at, call, level)
    }

    /// A step decided by `rules` (another replica's) on these values.
    fn step_by(
        &mut self,
        rules: &Rules,
        key: u32,
        at: Duration,
        call: Call,
        level: Option<Level>,
    ) -> Step {
        let hash = rules.hash(&key);
        let entry = self.entries.get(&hash);
        let mut batch = rules.batch(self.state.as_ref(), [(hash, entry)]).unwrap();
        let (ruling, event) = rules.decide(&mut batch, hash, at, call, level);
        let written = batch.written();
        written.apply(&mut self.entries);
        if let Some(state) = &written.state {
            self.state = Some(state.clone());
        }
        Step {
            ruling,
            event,
            view: batch.view(),
            written,
        }
    }

    fn view(&self) -> View {
        self.rules.batch(self.state.as_ref(), []).unwrap().view()
    }
}

/// The declaration of three keys newly failing at 0, by `rules`'s own
/// detector.
fn declared(rules: &Rules) -> Counts {
    let mut d = rules.detector();
    (0..3).find_map(|k| d.fresh(k, ms(0), k, 0)).unwrap()
}

fn level(key: u32) -> Option<Level> {
    (!key.is_multiple_of(3)).then(|| Level {
        backoff: ms(u64::from(key) * 10),
        attempts: key,
    })
}

#[test]
fn the_fleet_s_state_decides_as_the_watch_does() {
    let seed = 11;
    let watch: Watch<Option<Level>> = Watch::new(settings().validate().unwrap(), seed);
    let mut fleet = Values::new(seed);
    let mut detector = fleet.rules.detector();
    let (mut events, mut fleet_events) = (Vec::new(), Vec::new());
    // Three keys newly fail at 1 s: an outage on both.
    for key in 100..103u32 {
        watch.failed(&key, true, ms(1_000), |e| events.push(e));
        let hash = fleet.rules.hash(&key);
        let total = u64::from(key - 100);
        if let Some(declared) = detector.fresh(hash, ms(1_000), total, 0) {
            let step = fleet.step(key, ms(1_000), Call::Begin(declared), None);
            fleet_events.extend(step.event);
        }
    }
    assert_eq!(fleet_events, events);
    assert!(fleet.step(0, ms(1_000), Call::Peek, None).view.in_outage);
    // Keys claim and fail while the dependency is down (until 20 s), then
    // succeed; the release lets them go and ends.
    let (mut parked, mut released) = (0, 0);
    for i in 0..6_000u64 {
        let at = ms(1_000 + i * 7);
        let key = ((i * 37) % 60) as u32;
        let peeked = fleet.step(key, at, Call::Peek, level(key));
        let expected = watch.peek(&key, at, level(key));
        assert_eq!(
            peeked.ruling,
            expected.map_or(Ruling::Free, |wait| Ruling::Parked {
                until: at + wait,
                counted: false
            })
        );
        let claim = watch.ruling(&key, at, Asked::Claim, level(key), |e| events.push(e));
        let step = fleet.step(key, at, Call::Rule(Asked::Claim), level(key));
        fleet_events.extend(step.event);
        assert_eq!(step.ruling, claim, "claim of {key} at {at:?}");
        parked += usize::from(matches!(claim, Ruling::Parked { .. }));
        released += usize::from(matches!(claim, Ruling::Released { .. }));
        if claim != Ruling::Free && !matches!(claim, Ruling::Released { .. }) {
            continue;
        }
        if at < ms(20_000) {
            let fail = watch.ruling(&key, at, Asked::Failure, level(key), |e| events.push(e));
            let step = fleet.step(key, at, Call::Rule(Asked::Failure), level(key));
            fleet_events.extend(step.event);
            assert_eq!(step.ruling, fail, "failure of {key} at {at:?}");
        } else {
            watch.succeeded(&key, at, |e| events.push(e));
            let step = fleet.step(key, at, Call::Success, level(key));
            fleet_events.extend(step.event);
        }
        let tally = watch.tally();
        let view = fleet.step(key, at, Call::Peek, None).view;
        assert_eq!(
            (view.in_outage, view.parked as usize, view.outages),
            (tally.in_outage, tally.parked, tally.outages)
        );
    }
    assert_eq!(fleet_events, events);
    // The run went through every phase.
    assert!(
        parked > 1_000 && released >= 50,
        "{parked} parked, {released} released"
    );
    assert!(
        matches!(
            events[..],
            [Event::Began(_), Event::Ended { .. }, Event::Released { .. }]
        ),
        "{events:?}"
    );
    // Settled: every parked entry is of an older generation.
    let view = fleet.view();
    assert_eq!((view.active, view.parked), (false, 0));
    assert!(fleet.entries.is_empty());
}

#[test]
fn replicas_on_one_state_share_the_probes_of_each_step() {
    // Two replicas (two rules, one seed) and 40 keys, all past their slot
    // at the end of step 0: two probes in all.
    let mut a = Values::new(5);
    let b_rules = Rules::new(settings().validate().unwrap(), 5);
    let declared = declared(&a.rules);
    a.step(0, ms(0), Call::Begin(declared), None);
    // A second declaration adopts the outage under way.
    let again = a.step(1, ms(10), Call::Begin(declared), None);
    assert_eq!((again.view.outages, again.event), (1, None));
    let goes = (0..40u32)
        .filter(|&key| {
            // Odd keys through replica b's rules, on the same text.
            let rules = if !key.is_multiple_of(2) {
                b_rules.clone()
            } else {
                a.rules.clone()
            };
            a.step_by(&rules, key, ms(999), Call::Rule(Asked::Claim), None)
                .ruling
                == Ruling::Free
        })
        .count();
    assert_eq!(goes, 2);
}

#[test]
fn a_state_of_another_format_or_an_impossible_release_is_an_error_never_a_guess() {
    let rules = Rules::new(settings().validate().unwrap(), 1);
    let mut fleet = Values::new(1);
    fleet.step(0, ms(0), Call::Begin(declared(&rules)), None);
    let normal = fleet.state.clone().unwrap();
    assert!(rules.batch(Some(&normal), []).is_ok());
    let other = SharedOutage {
        format: SharedOutage::FORMAT + 1,
        ..normal.clone()
    };
    let err = rules.batch(Some(&other), []).unwrap_err();
    assert!(err.contains("an outage state of format 2, not 3"), "{err}");
    // A release whose numbers make none: no time between two keys, no key
    // a second, or more latest than a second holds.
    let release = |gap: u64, per_second: u64, latest: usize| SharedOutage {
        phase: SharedPhase::Release {
            next: ms(4),
            gap: ms(gap),
            per_second,
            until: ms(9),
            latest: vec![ms(0); latest],
        },
        ..normal.clone()
    };
    assert!(rules.batch(Some(&release(0, 1, 0)), []).is_err());
    assert!(rules.batch(Some(&release(5, 0, 0)), []).is_err());
    assert!(rules.batch(Some(&release(5, 1, 2)), []).is_err());
    assert!(rules.batch(Some(&release(5, 1, 1)), []).is_ok());
    // A parked key of another generation counts as absent.
    let hash = rules.hash(&7u32);
    let stale = ParkedKey {
        generation: normal.generation + 1,
        level: None,
        counted_in: Some(0),
        probe_in: None,
        release_at: None,
    };
    let batch = rules.batch(Some(&normal), [(hash, Some(&stale))]).unwrap();
    assert!(batch.home.get(hash).is_none());
}

#[test]
fn a_step_writes_only_what_it_changed_and_an_outage_clears_the_parked_keys() {
    let mut fleet = Values::new(3);
    assert_eq!(fleet.rules.settings.probes, Some(2));
    let declared = declared(&fleet.rules);
    // The outage begins: a new generation, so every key parked before it
    // is stale (the store drops them).
    let began = fleet.step(0, ms(0), Call::Begin(declared), None);
    assert!(began.written.cleared && began.written.state.is_some() && began.view.in_outage);
    // A key is parked: its entry is written.
    let parked = fleet.step(7, ms(10), Call::Rule(Asked::Claim), level(7));
    assert!(matches!(parked.ruling, Ruling::Parked { .. }));
    assert!(
        matches!(parked.written.parked[..], [(_, Some(_))]),
        "{parked:?}"
    );
    assert_eq!(fleet.step(0, ms(10), Call::Peek, None).view.parked, 1);
    // A peek writes nothing, even where a claim would.
    let peek = fleet.step(8, ms(20), Call::Peek, level(8));
    assert_eq!(
        peek.written,
        Written {
            state: None,
            parked: vec![],
            cleared: false
        }
    );
    // The same claim again at the same time changes nothing, and writes
    // nothing.
    let again = fleet.step(7, ms(10), Call::Rule(Asked::Claim), level(7));
    assert_eq!(again.ruling, parked.ruling);
    assert_eq!(
        again.written,
        Written {
            state: None,
            parked: vec![],
            cleared: false
        }
    );
    // A second declaration adopts the outage: no new generation.
    let adopted = fleet.step(1, ms(30), Call::Begin(declared), None);
    assert!(!adopted.written.cleared && adopted.event.is_none());
    assert_eq!(adopted.view.parked, 1);
}
