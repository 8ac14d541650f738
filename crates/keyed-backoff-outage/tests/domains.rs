//! Outages per domain, in process: a dependency that only some keys use
//! goes down while the others keep succeeding. Its outage is declared and
//! no other; its keys are parked, probe and are let go on its own ladder;
//! the other keys are never parked; domains are bounded.

use std::time::Duration;

use keyed_backoff::clock::MockClock;
use keyed_backoff::{Backoff, Gate};
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};
use keyed_backoff_testkit::ready;

type Aware = OutageAware<Backoff<String, MockClock>, InProcess<MockClock>>;

const MS: Duration = Duration::from_millis(1);

fn aware(clock: &MockClock, settings: OutageSettings) -> Aware {
    let backoff = Backoff::builder(Duration::from_secs(1), Duration::from_secs(60))
        .clock(clock.clone())
        .build()
        .unwrap();
    OutageAware::with_clock(backoff, settings.seed(7), clock.clone()).unwrap()
}

fn key(domain: &str, n: usize) -> String {
    format!("{domain}-{n}")
}

fn fail_in(gate: &Aware, key: &str, domain: &str) -> bool {
    let Ok(outcome) = ready(gate.fail_in(&key.to_string(), domain));
    outcome.is_ok()
}

fn claim(gate: &Aware, key: &str) -> Option<Duration> {
    let Ok(wait) = ready(gate.claim(&key.to_string()));
    wait
}

fn succeed(gate: &Aware, key: &str) {
    let Ok(()) = ready(gate.succeed(&key.to_string()));
}

fn succeed_in(gate: &Aware, key: &str, domain: &str) {
    let Ok(()) = ready(gate.succeed_in(&key.to_string(), domain));
}

/// How many of eu's 30 keys a claim finds waiting.
fn eu_waiting(gate: &Aware) -> usize {
    (0..30)
        .filter(|&n| claim(gate, &key("eu", n)).is_some())
        .count()
}

fn in_outage(gate: &Aware, domain: &str) -> bool {
    gate.domains()
        .iter()
        .any(|status| status.name == domain && status.in_outage)
}

/// 30 keys of `eu` newly fail, one every 10 ms, while 70 other keys
/// succeed between them: the outage of `eu` and no other. Once it is
/// declared (at the twentieth), a failure in `eu` is parked, not counted,
/// unless it is a probe's turn.
fn eu_goes_down(gate: &Aware, clock: &MockClock) {
    let mut counted = 0;
    for n in 0..30 {
        counted += usize::from(fail_in(gate, &key("eu", n), "eu"));
        for m in 0..3 {
            succeed(gate, &key("other", (n * 3 + m) % 70));
        }
        clock.advance(10 * MS);
    }
    // Twenty declare it; after that a failure counts only on a probe's turn.
    assert!((20..=23).contains(&counted), "{counted} failures counted");
}

#[test]
fn a_dependency_some_keys_use_is_seen_down_while_the_others_succeed() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"), "{:?}", gate.domains());
    assert!(!gate.in_outage(), "no outage of everything");
    assert_eq!(gate.outages(), 0);
    // The keys of the region wait on its ladder, the others never.
    clock.advance(Duration::from_secs(1));
    let waiting = eu_waiting(&gate);
    assert!(waiting >= 27, "at most the probes go: {waiting} of 30 wait");
    for m in 0..70 {
        assert_eq!(claim(&gate, &key("other", m)), None, "other-{m} is parked");
    }
    // A key failing in the region now is parked, not counted on its ladder.
    clock.advance(Duration::from_secs(5));
    let counted = (0..30)
        .filter(|&n| fail_in(&gate, &key("eu", n), "eu"))
        .count();
    assert!(
        counted <= 3,
        "{counted} failures counted during the outage: only probes'"
    );
}

#[test]
fn a_domain_recovers_when_its_keys_succeed_and_lets_them_go() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"));
    // The region is back: the keys whose turn comes succeed.
    let mut ended_after = None;
    for step in 0..60 {
        clock.advance(Duration::from_secs(1));
        for n in 0..30 {
            if claim(&gate, &key("eu", n)).is_none() {
                succeed(&gate, &key("eu", n));
            }
        }
        if !in_outage(&gate, "eu") {
            ended_after = Some(step + 1);
            break;
        }
    }
    let ended_after = ended_after.expect("the outage of eu ended");
    assert!(ended_after <= 5, "ended {ended_after} s after the return");
    // Then every key of the region goes within the release.
    clock.advance(Duration::from_secs(2));
    for n in 0..30 {
        assert_eq!(claim(&gate, &key("eu", n)), None, "eu-{n} still waits");
    }
}

#[test]
fn two_domains_down_at_overlapping_times_have_two_outages() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    for n in 0..30 {
        fail_in(&gate, &key("eu", n), "eu");
        if n >= 10 {
            fail_in(&gate, &key("us", n), "us");
        }
        for m in 0..3 {
            succeed(&gate, &key("other", (n * 3 + m) % 40));
        }
        clock.advance(10 * MS);
    }
    assert!(
        in_outage(&gate, "eu") && in_outage(&gate, "us"),
        "{:?}",
        gate.domains()
    );
    assert!(!gate.in_outage());
    // eu comes back; us stays down.
    for _ in 0..10 {
        clock.advance(Duration::from_secs(1));
        for n in 0..30 {
            if claim(&gate, &key("eu", n)).is_none() {
                succeed(&gate, &key("eu", n));
            }
            if claim(&gate, &key("us", n)).is_none() {
                fail_in(&gate, &key("us", n), "us");
            }
        }
    }
    assert!(!in_outage(&gate, "eu"), "eu recovered on its own");
    assert!(in_outage(&gate, "us"), "us is still down");
}

#[test]
fn a_domain_whose_successes_are_named_is_not_taken_for_one_down() {
    // Thirty keys fail in the webhook's domain for reasons of their own
    // while the webhook answers every other key: named successes show it.
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    for n in 0..30 {
        fail_in(&gate, &key("bad", n), "webhook");
        for m in 0..3 {
            succeed_in(&gate, &key("good", (n * 3 + m) % 70), "webhook");
        }
        clock.advance(10 * MS);
    }
    assert!(!in_outage(&gate, "webhook"), "{:?}", gate.domains());
    assert!(!gate.in_outage());
}

#[test]
fn everything_down_parks_every_key_whatever_its_domain() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    for n in 0..30 {
        fail_in(&gate, &key("eu", n), "eu");
        fail_in(&gate, &key("other", n), "us");
        clock.advance(10 * MS);
    }
    assert!(
        gate.in_outage(),
        "every key fails: the outage of everything"
    );
    clock.advance(Duration::from_secs(1));
    let free = (0..30)
        .filter(|&n| claim(&gate, &key("fresh", n)).is_none())
        .count();
    assert!(
        free <= 3,
        "{free} keys that never failed go during the outage of everything"
    );
}

#[test]
fn the_domains_tracked_are_bounded_however_many_are_named() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new().max_domains(8));
    for n in 0..10_000 {
        fail_in(&gate, &format!("key-{n}"), &format!("host-{n}"));
        succeed(&gate, &format!("key-{n}"));
        clock.advance(MS);
    }
    assert_eq!(gate.domains().len(), 8);
}

#[test]
fn at_the_cap_a_new_domain_waits_for_one_without_an_outage() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new().max_domains(1));
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"));
    // The one domain tracked is in an outage: `us` is not tracked.
    fail_in(&gate, "us-0", "us");
    let names: Vec<String> = gate.domains().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["eu"]);
    assert_eq!(
        claim(&gate, "us-0"),
        Some(Duration::from_secs(1)),
        "its own backoff"
    );
}

#[cfg(feature = "metrics")]
#[test]
fn a_domains_outage_is_counted_under_its_name_and_not_as_one_of_everything() {
    let metrics = keyed_backoff_testkit::metrics::Metrics::new();
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    metrics.record(|| eu_goes_down(&gate, &clock));
    let now = metrics.samples();
    assert_eq!(
        now.counter("keyed_backoff_outages_total", &[("domain", "eu")]),
        1
    );
    // Every outage counted is the domain's: none without the label.
    let unlabelled = now
        .matching("keyed_backoff_outages_total", &[])
        .filter(|sample| sample.labels.is_empty())
        .count();
    assert_eq!(unlabelled, 0);
    assert_eq!(
        now.gauge("keyed_backoff_outage_active", &[("domain", "eu")]),
        Some(1.0)
    );
}

#[test]
fn at_the_cap_the_domain_idle_longest_goes_and_the_others_keep_their_keys() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new().max_domains(3));
    eu_goes_down(&gate, &clock);
    // Two quiet domains: `old` named first, `new` a second later; then a
    // key of `old` newly fails a minute on, so `new` is the one idle
    // longest (a domain is used when its keys newly fail).
    fail_in(&gate, "old-0", "old");
    clock.advance(Duration::from_secs(1));
    fail_in(&gate, "new-0", "new");
    clock.advance(Duration::from_secs(60));
    fail_in(&gate, "old-1", "old");
    clock.advance(Duration::from_secs(1));
    // A fourth takes the place of the one idle longest.
    fail_in(&gate, "next-0", "next");
    let names: Vec<String> = gate.domains().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["eu", "next", "old"]);
    // The keys remembered in the domains kept are still theirs.
    let waiting = eu_waiting(&gate);
    assert!(
        waiting >= 27,
        "{waiting} of 30 eu keys still wait on its outage"
    );
}

#[test]
fn a_key_that_succeeds_leaves_its_domain() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    // `mover` fails in eu, then succeeds: no longer one of eu's keys.
    fail_in(&gate, "mover", "eu");
    clock.advance(Duration::from_secs(2));
    succeed(&gate, "mover");
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"));
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        claim(&gate, "mover"),
        None,
        "a key that left eu is parked by its outage"
    );
}

#[test]
fn a_key_whose_success_names_its_domain_waits_on_its_outage_before_failing_in_it() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    // `steady` has only ever succeeded, in eu; `moved` failed in eu, then
    // succeeded in us.
    succeed_in(&gate, "steady", "eu");
    fail_in(&gate, "moved", "eu");
    clock.advance(Duration::from_secs(2));
    succeed_in(&gate, "moved", "us");
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"));
    clock.advance(Duration::from_secs(1));
    // Its first run in eu's outage waits on it: it never reaches the
    // dependency to learn that it is down.
    assert!(
        claim(&gate, "steady").is_some(),
        "a key named with eu on success runs into eu's outage"
    );
    assert_eq!(claim(&gate, "moved"), None, "a key now of us is not parked");
}

#[test]
fn the_keys_remembered_are_bounded_and_learned_again_past_the_cap() {
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    // 2^20 keys named with eu on success fill the memory of keys...
    for n in 0..1 << 20 {
        succeed_in(&gate, &key("early", n), "eu");
    }
    // ...so that the keys of eu that then fail start it afresh.
    eu_goes_down(&gate, &clock);
    assert!(in_outage(&gate, "eu"));
    clock.advance(Duration::from_secs(1));
    let early = (0..100)
        .filter(|&n| claim(&gate, &key("early", n)).is_some())
        .count();
    assert_eq!(early, 0, "keys named before the cap are forgotten");
    let waiting = eu_waiting(&gate);
    assert!(waiting >= 27, "{waiting} of 30 eu keys wait on its outage");
}

#[test]
fn a_domain_weighs_its_keys_fresh_failures_not_their_ladders() {
    // Thirty keys of the webhook newly fail, six of its keys succeed: one
    // outcome in six a success, no outage of it. Twenty of the thirty
    // fail on and on meanwhile (their ladders going on): those failures
    // count in the outage of everything alone (which sees other keys
    // succeed), not against the webhook's successes.
    let clock = MockClock::new();
    let gate = aware(&clock, OutageSettings::new());
    for n in 0..20 {
        fail_in(&gate, &key("bad", n), "webhook");
        for m in 0..5 {
            succeed(&gate, &key("other", n * 5 + m));
        }
        if n % 5 == 0 {
            succeed_in(&gate, &key("good", n), "webhook");
        }
    }
    for wait in [1_100, 2_100, 4_100] {
        clock.advance(wait * MS);
        for n in 0..20 {
            assert!(fail_in(&gate, &key("bad", n), "webhook"), "counted");
        }
    }
    for n in 20..30 {
        fail_in(&gate, &key("bad", n), "webhook");
        if n % 5 == 0 {
            succeed_in(&gate, &key("good", n), "webhook");
        }
    }
    let webhook = gate.domains();
    assert!(
        webhook.iter().all(|d| d.outages == 0),
        "no outage of the webhook: {webhook:?}"
    );
    assert!(!gate.in_outage());
}
