//! An outage wrapper over a wrapper is still a [`Gate`] that honours the
//! floor of the manager under both.

use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Gate, InBackoff};
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};
use keyed_backoff_testkit::{manager, ready};

const SEC: Duration = Duration::from_secs(1);

/// `call` answered at once by a gate that never fails.
fn now<T>(call: impl std::future::Future<Output = Result<T, std::convert::Infallible>>) -> T {
    let Ok(answer) = ready(call);
    answer
}

/// Outage awareness over `inner`: three keys newly failing declare an
/// outage; slots drawn from `seed`.
fn wrapped<G>(inner: G, clock: &MockClock, seed: u64) -> OutageAware<G, InProcess<MockClock>> {
    let settings = OutageSettings::new().min_failing_keys(3).seed(seed);
    OutageAware::with_clock(inner, settings, clock.clone()).expect("valid settings")
}

#[test]
fn a_wrapper_over_a_wrapper_honours_the_floor_of_the_manager_under_both() {
    let clock = MockClock::new();
    let backoff = manager(10 * SEC, 300 * SEC, &clock);
    let gate = wrapped(wrapped(backoff, &clock, 1), &clock, 2);
    let (inner, manager) = (gate.inner(), gate.inner().inner());
    // Outside an outage the two wrappers answer as the manager does.
    assert_eq!(
        now(gate.fail(&"failing-0".to_string())).map(|l| l.backoff),
        Ok(10 * SEC)
    );
    assert_eq!(now(gate.wait(&"failing-0".to_string())), Some(10 * SEC));
    assert_eq!(manager.attempts("failing-0"), 1);
    // Failures told to the outer wrapper reach the inner one: both declare.
    for k in 1..3 {
        now(gate.fail(&format!("failing-{k}"))).unwrap();
    }
    assert!(gate.in_outage() && inner.in_outage());
    // A floor of 60 s, through the outer wrapper for one key and on the
    // manager itself for another: the outage's steps are at most 4 s, yet
    // both wrappers report the floor.
    let (asked, direct) = ("asked".to_string(), "direct".to_string());
    now(gate.hold(&asked, 60 * SEC));
    manager.hold_until("direct", clock.now() + 60 * SEC);
    for key in [&asked, &direct] {
        assert_eq!(now(gate.claim(key)), Some(60 * SEC), "{key}");
        assert_eq!(now(inner.wait(key)), Some(60 * SEC), "{key}");
    }
    // At the end of the ladder's first step a slot has come for every key
    // and probe turns are free, yet the floor refuses the failure, and
    // neither ladder of the key moves.
    clock.advance(SEC - Duration::from_millis(1));
    for key in [&asked, &direct] {
        let left = 60 * SEC - (SEC - Duration::from_millis(1));
        assert_eq!(
            now(gate.fail(key)),
            Err(InBackoff { remaining: left }),
            "{key}"
        );
        assert_eq!(manager.attempts(key), 0, "{key}");
    }
    // After the outage (two successes through the outer wrapper end both),
    // the floor still holds.
    now(gate.succeed(&"ok-a".to_string()));
    now(gate.succeed(&"ok-b".to_string()));
    assert!(!gate.in_outage() && !inner.in_outage());
    clock.advance(10 * SEC);
    let left = 60 * SEC - (11 * SEC - Duration::from_millis(1));
    assert_eq!(now(gate.claim(&asked)), Some(left));
    assert_eq!(now(gate.fail(&direct)), Err(InBackoff { remaining: left }));
}
