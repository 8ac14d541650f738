//! The [`Gate`] contract: on the in-process manager each call is the
//! inherent call it names, answered at once and never failing.

use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Advanced, Backoff, Gate, InBackoff};
use keyed_backoff_testkit::{manager, ready};

const SEC: Duration = Duration::from_secs(1);

/// `call` answered at once by a gate that never fails.
fn now<T>(call: impl std::future::Future<Output = Result<T, std::convert::Infallible>>) -> T {
    let Ok(answer) = ready(call);
    answer
}

/// Two managers of 1 s doubling to 8 s on one clock: one driven through
/// the contract, one through its inherent calls.
fn twins(clock: &MockClock) -> (Backoff<String, MockClock>, Backoff<String, MockClock>) {
    (manager(SEC, 8 * SEC, clock), manager(SEC, 8 * SEC, clock))
}

#[test]
fn wait_claim_and_fail_are_remaining_and_the_gate() {
    let clock = MockClock::new();
    let (gate, own) = twins(&clock);
    let k = "k".to_string();
    for step in 0..12 {
        let wait = own.remaining(&k, clock.now());
        assert_eq!(now(Gate::wait(&gate, &k)), wait, "step {step}");
        assert_eq!(now(Gate::claim(&gate, &k)), wait, "step {step}");
        // The gate's answer, with the level it reached.
        let failed = now(Gate::fail(&gate, &k));
        let level = |b: &Backoff<String, MockClock>| Advanced {
            backoff: b.get(&k),
            attempts: b.attempts(&k),
        };
        match own.try_next_now(&k) {
            Ok(backoff) => {
                assert_eq!(failed, Ok(level(&own)), "step {step}");
                assert_eq!(failed.map(|l| l.backoff), Ok(backoff));
            }
            Err(InBackoff { remaining }) => {
                assert_eq!(failed, Err(InBackoff { remaining }), "step {step}")
            }
        }
        assert_eq!(level(&gate), level(&own), "step {step}");
        clock.advance(SEC * (step % 3) + SEC / 2);
    }
    assert_eq!(gate.attempts(&k), 4, "1, 2, 4, 8 s: four counted failures");
}

#[test]
fn succeed_is_reset_and_hold_is_a_floor_from_now() {
    let clock = MockClock::new();
    let (gate, own) = twins(&clock);
    let k = "k".to_string();
    now(gate.fail(&k)).unwrap();
    own.try_next_now(&k).unwrap();
    now(gate.hold(&k, 30 * SEC));
    own.hold_until(&k, clock.now() + 30 * SEC);
    // A shorter floor later does not shorten the longer one.
    clock.advance(SEC);
    now(gate.hold(&k, 5 * SEC));
    own.hold_until(&k, clock.now() + 5 * SEC);
    assert_eq!(now(gate.wait(&k)), Some(29 * SEC));
    assert_eq!(now(gate.wait(&k)), own.remaining(&k, clock.now()));
    assert_eq!(
        now(gate.fail(&k)),
        Err(InBackoff {
            remaining: 29 * SEC
        })
    );
    // A success forgets the backoff and the floor.
    now(gate.succeed(&k));
    assert!(own.reset(&k));
    for b in [&gate, &own] {
        assert_eq!(
            (b.len(), b.get(&k), b.remaining(&k, clock.now())),
            (0, Duration::ZERO, None)
        );
    }
    assert_eq!(now(gate.level(&k)), None);
    assert_eq!(now(gate.fail(&k)).map(|l| l.attempts), Ok(1));
}

#[test]
fn level_is_the_live_entry_and_resume_puts_a_forgotten_key_back() {
    let clock = MockClock::new();
    let gate = manager(SEC, 8 * SEC, &clock);
    let k = "k".to_string();
    assert_eq!(now(gate.level(&k)), None);
    for _ in 0..3 {
        now(gate.fail(&k)).unwrap();
        clock.advance(gate.get(&k));
    }
    let level = Advanced {
        backoff: 4 * SEC,
        attempts: 3,
    };
    assert_eq!(now(gate.level(&k)), Some(level));
    // A live key is not put back anywhere else.
    now(gate.resume(
        &k,
        Advanced {
            backoff: SEC,
            attempts: 1,
        },
    ));
    assert_eq!(now(gate.level(&k)), Some(level));
    // Past the expiry window (2 × 8 s) the entry is forgotten: no level,
    // though `get` still reports it until it is touched.
    clock.advance(17 * SEC);
    assert_eq!(now(gate.level(&k)), None);
    assert_eq!(gate.get(&k), 4 * SEC);
    // Put back, its backoff just over: it may run, and its next failure
    // climbs on from there instead of starting over.
    now(gate.resume(&k, level));
    assert_eq!(now(gate.level(&k)), Some(level));
    assert_eq!(now(gate.wait(&k)), None);
    assert_eq!(
        now(gate.fail(&k)),
        Ok(Advanced {
            backoff: 8 * SEC,
            attempts: 4
        })
    );
    // A key that never failed is put back too.
    now(gate.resume(&"new".to_string(), level));
    assert_eq!(gate.attempts("new"), 3);
}
