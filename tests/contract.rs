//! The [`Gate`] contract: on the in-process manager each call is the
//! inherent call it names, answered at once and never failing.

use std::time::Duration;

use keyed_backoff::clock::{Clock, MockClock};
use keyed_backoff::{Backoff, Gate, InBackoff, Level};
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
        let level = |b: &Backoff<String, MockClock>| Level {
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
    let level = Level {
        backoff: 4 * SEC,
        attempts: 3,
    };
    assert_eq!(now(gate.level(&k)), Some(level));
    // A live key is not put back anywhere else.
    now(gate.resume(
        &k,
        Level {
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
        Ok(Level {
            backoff: 8 * SEC,
            attempts: 4
        })
    );
    // A key that never failed is put back too.
    now(gate.resume(&"new".to_string(), level));
    assert_eq!(gate.attempts("new"), 3);
}

/// Tells one client-go trace to a manager through its inherent calls and
/// to another through the erased gate alone (`next` is the gate's failure
/// at the clock's now: `try_next_now`, counted unless the key is in
/// backoff), checking that every answer is the same; returns the number of
/// answers compared.
fn replay_through_the_erased_gate(path: &std::path::Path) -> usize {
    use keyed_backoff::{Answer, DynGate};
    use keyed_backoff_testkit::clientgo::{Trace, int, nanos};
    use std::sync::Arc;

    /// An in-process answer: always at once.
    fn at_once<T>(answer: Answer<T>) -> T {
        match answer {
            Answer::Now(answer) => answer,
            Answer::Later(_) => panic!("an in-process gate answered later"),
        }
    }
    let trace = Trace::read(path);
    let clock = MockClock::new();
    let bare = trace.manager(&clock);
    let inner = Arc::new(trace.manager(&clock));
    let erased: Arc<dyn DynGate<String>> = Arc::new(Arc::clone(&inner));
    assert!(erased.answers_at_once());
    let start = clock.now();
    let mut compared = 0;
    for (n, line) in &trace.lines {
        let op: serde_json::Value = serde_json::from_str(line).expect("op json");
        let whence = format!("{}:{}: {line}", path.display(), n + 1);
        let key = op["key"].as_str().unwrap_or("").to_string();
        let at =
            || keyed_backoff::clock::ClockInstant::offset_by_nanos(start, int(&op, "event_ns"));
        match op["op"].as_str().expect("op name") {
            "advance" => clock.advance(nanos(&op, "ns")),
            "next" => {
                let failed = at_once(erased.fail(&key)).map(|level| level.backoff);
                assert_eq!(bare.try_next_now(&key), failed, "{whence}");
            }
            "reset" | "delete" => {
                bare.reset(&key);
                at_once(erased.succeed(&key));
            }
            "get" => assert_eq!(bare.get(&key), inner.get(&key), "{whence}"),
            "in_since" => assert_eq!(
                bare.is_in_backoff_since(&key, at()),
                inner.is_in_backoff_since(&key, at()),
                "{whence}"
            ),
            "in_since_update" => assert_eq!(
                bare.is_in_backoff_since_update(&key, at()),
                inner.is_in_backoff_since_update(&key, at()),
                "{whence}"
            ),
            "gc" => assert_eq!(bare.gc(), inner.gc(), "{whence}"),
            "len" => assert_eq!(bare.len(), inner.len(), "{whence}"),
            other => panic!("{whence}: unknown op {other}"),
        }
        let wait = bare.remaining(&key, clock.now());
        assert_eq!(at_once(erased.wait(&key)), wait, "{whence}");
        assert_eq!(at_once(erased.claim(&key)), wait, "{whence}");
        let (level, standing) = (at_once(erased.level(&key)), at_once(erased.standing(&key)));
        let live = bare.entry(&key).filter(|view| !view.expired);
        assert_eq!(
            level.map(|l| (l.backoff, l.attempts)),
            live.map(|view| (view.backoff, view.attempts)),
            "{whence}"
        );
        assert_eq!(standing, (level, wait), "{whence}");
        compared += 1;
    }
    compared
}

#[test]
fn every_clientgo_trace_is_answered_alike_through_the_erased_gate() {
    let compared: usize = keyed_backoff_testkit::clientgo::traces()
        .iter()
        .map(|path| replay_through_the_erased_gate(path))
        .sum();
    assert!(compared > 5_000, "only {compared} answers compared");
}
