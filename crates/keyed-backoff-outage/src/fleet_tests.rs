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

/// A fleet's state kept as text in maps, as a store keeps it.
struct Texts {
    rules: FleetRules,
    state: Option<String>,
    entries: HashMap<u64, String>,
}

impl Texts {
    fn new(seed: u64) -> Self {
        Texts {
            rules: FleetRules::new(settings(), seed).unwrap(),
            state: None,
            entries: HashMap::new(),
        }
    }

    fn step(
        &mut self,
        key: u32,
        at: Duration,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> FleetStep {
        let rules = self.rules.clone();
        self.step_by(&rules, key, at, ask, level)
    }

    /// A step decided by `rules` (another replica's) on this text.
    fn step_by(
        &mut self,
        rules: &FleetRules,
        key: u32,
        at: Duration,
        ask: FleetAsk,
        level: Option<Advanced>,
    ) -> FleetStep {
        let hash = rules.hash(&key);
        let entry = self.entries.get(&hash).map(String::as_str);
        let step = rules
            .step(self.state.as_deref(), entry, hash, at, ask, level)
            .unwrap();
        if step.cleared {
            self.entries.clear();
        }
        match &step.entry {
            EntryChange::Keep => {}
            EntryChange::Put(text) => _ = self.entries.insert(hash, text.clone()),
            EntryChange::Remove => _ = self.entries.remove(&hash),
        }
        if let Some(state) = &step.state {
            self.state = Some(state.clone());
        }
        step
    }
}

/// The declaration of three keys newly failing at 0, by `rules`'s own
/// detector.
fn declared(rules: &FleetRules) -> Declared {
    let mut d = rules.detector();
    (0..3).find_map(|k| d.fresh(k, ms(0), k, 0)).unwrap()
}

fn level(key: u32) -> Option<Advanced> {
    (!key.is_multiple_of(3)).then(|| Advanced {
        backoff: ms(u64::from(key) * 10),
        attempts: key,
    })
}

/// The watch's answer as the fleet words it.
fn worded(ruling: Ruling<Option<Advanced>>, at: Duration) -> FleetRuling {
    match ruling {
        Ruling::Free => FleetRuling::Free,
        Ruling::Parked { until, counted } => FleetRuling::Parked {
            wait: until.saturating_sub(at),
            counted,
        },
        Ruling::Released { level } => FleetRuling::Released { level },
    }
}

#[test]
fn the_fleet_s_state_decides_as_the_watch_does() {
    let seed = 11;
    let watch: Watch<Option<Advanced>> = Watch::new(settings().validate().unwrap(), seed);
    let mut fleet = Texts::new(seed);
    let mut detector = fleet.rules.detector();
    let (mut events, mut fleet_events) = (Vec::new(), Vec::new());
    // Three keys newly fail at 1 s: an outage on both.
    for key in 100..103u32 {
        watch.failed(&key, true, ms(1_000), |e| events.push(e));
        let hash = fleet.rules.hash(&key);
        let total = u64::from(key - 100);
        if let Some(declared) = detector.fresh(hash, ms(1_000), total, 0) {
            let step = fleet.step(key, ms(1_000), FleetAsk::Begin(declared), None);
            fleet_events.extend(step.event);
        }
    }
    assert_eq!(fleet_events, events);
    assert!(
        fleet
            .step(0, ms(1_000), FleetAsk::Peek, None)
            .view
            .in_outage
    );
    // Keys claim and fail while the dependency is down (until 20 s), then
    // succeed; the release lets them go and ends.
    let (mut parked, mut released) = (0, 0);
    for i in 0..6_000u64 {
        let at = ms(1_000 + i * 7);
        let key = ((i * 37) % 60) as u32;
        let peeked = fleet.step(key, at, FleetAsk::Peek, level(key));
        let expected = watch.peek(&key, at, level(key));
        assert_eq!(
            peeked.ruling,
            expected.map_or(FleetRuling::Free, |wait| FleetRuling::Parked {
                wait,
                counted: false
            })
        );
        let claim = watch.rule(&key, at, Asked::Claim, level(key), |e| events.push(e));
        let step = fleet.step(key, at, FleetAsk::Claim, level(key));
        fleet_events.extend(step.event);
        assert_eq!(step.ruling, worded(claim, at), "claim of {key} at {at:?}");
        parked += usize::from(matches!(claim, Ruling::Parked { .. }));
        released += usize::from(matches!(claim, Ruling::Released { .. }));
        if claim != Ruling::Free && !matches!(claim, Ruling::Released { .. }) {
            continue;
        }
        if at < ms(20_000) {
            let fail = watch.rule(&key, at, Asked::Failure, level(key), |e| events.push(e));
            let step = fleet.step(key, at, FleetAsk::Failure, level(key));
            fleet_events.extend(step.event);
            assert_eq!(step.ruling, worded(fail, at), "failure of {key} at {at:?}");
        } else {
            watch.succeeded(&key, at, |e| events.push(e));
            let step = fleet.step(key, at, FleetAsk::Success, level(key));
            fleet_events.extend(step.event);
        }
        let tally = watch.tally();
        let view = fleet.step(key, at, FleetAsk::Peek, None).view;
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
    let view = fleet.rules.view(fleet.state.as_deref()).unwrap();
    assert_eq!((view.active, view.parked), (false, 0));
    assert!(fleet.entries.is_empty());
}

#[test]
fn replicas_on_one_state_share_the_probes_of_each_step() {
    // Two replicas (two rules, one seed) and 40 keys, all past their slot
    // at the end of step 0: two probes in all.
    let mut a = Texts::new(5);
    let b_rules = FleetRules::new(settings(), 5).unwrap();
    let declared = declared(&a.rules);
    a.step(0, ms(0), FleetAsk::Begin(declared), None);
    // A second declaration adopts the outage under way.
    let again = a.step(1, ms(10), FleetAsk::Begin(declared), None);
    assert_eq!((again.view.outages, again.event), (1, None));
    let goes = (0..40u32)
        .filter(|&key| {
            // Odd keys through replica b's rules, on the same text.
            let rules = if !key.is_multiple_of(2) {
                b_rules.clone()
            } else {
                a.rules.clone()
            };
            a.step_by(&rules, key, ms(999), FleetAsk::Claim, None)
                .ruling
                == FleetRuling::Free
        })
        .count();
    assert_eq!(goes, 2);
}

#[test]
fn damaged_text_is_an_error_never_a_guess() {
    let rules = FleetRules::new(settings(), 1).unwrap();
    for text in [
        "",
        "2 0 0 0 0 - N 0",
        "1 0 0 0 0 - X 0",
        "1 0 0 0 0 - N 3 1",
        "1 0 0 0 0 - N 0 extra",
    ] {
        let err = rules.view(Some(text)).unwrap_err();
        assert!(err.contains("an outage state of format 1"), "{err}");
    }
    assert!(rules.view(Some("1 0 0 0 0 - N 0")).is_ok());
    let err = rules
        .step(
            Some("1 0 0 0 0 - N 0"),
            Some("0 - x"),
            1,
            ms(0),
            FleetAsk::Claim,
            None,
        )
        .unwrap_err();
    assert!(err.contains("a parked key"), "{err}");
    // A release whose numbers make none: no time between two keys, or no
    // key a second.
    assert!(rules.view(Some("1 0 0 0 0 - R 4 0 0 1 0 0")).is_err());
    assert!(rules.view(Some("1 0 0 0 0 - R 4 5 1 0 9 0")).is_err());
    assert!(rules.view(Some("1 0 0 0 0 - R 4 5 1 1 9 0")).is_ok());
}

#[test]
fn a_step_writes_only_what_it_changed_and_an_outage_clears_the_parked_keys() {
    let mut fleet = Texts::new(3);
    assert_eq!(fleet.rules.settings().probes, Some(2));
    let declared = declared(&fleet.rules);
    // The outage begins: a new generation, so every key parked before it
    // is stale (the store drops them).
    let began = fleet.step(0, ms(0), FleetAsk::Begin(declared), None);
    assert!(began.cleared && began.state.is_some() && began.view.in_outage);
    // A key is parked: its entry is written.
    let parked = fleet.step(7, ms(10), FleetAsk::Claim, level(7));
    assert!(matches!(parked.ruling, FleetRuling::Parked { .. }));
    assert!(matches!(parked.entry, EntryChange::Put(_)), "{parked:?}");
    assert_eq!(fleet.step(0, ms(10), FleetAsk::Peek, None).view.parked, 1);
    // A peek writes nothing, even where a claim would.
    let peek = fleet.step(8, ms(20), FleetAsk::Peek, level(8));
    assert!(peek.state.is_none() && peek.entry == EntryChange::Keep && !peek.cleared);
    // The same claim again at the same time changes nothing, and writes
    // nothing.
    let again = fleet.step(7, ms(10), FleetAsk::Claim, level(7));
    assert_eq!(again.ruling, parked.ruling);
    assert!(
        again.state.is_none() && again.entry == EntryChange::Keep && !again.cleared,
        "{again:?}"
    );
    // A second declaration adopts the outage: no new generation.
    let adopted = fleet.step(1, ms(30), FleetAsk::Begin(declared), None);
    assert!(!adopted.cleared && adopted.event.is_none());
    assert_eq!(adopted.view.parked, 1);
}
