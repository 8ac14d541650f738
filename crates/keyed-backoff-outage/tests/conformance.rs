//! Replays every operation trace recorded from Kubernetes client-go's
//! `flowcontrol.Backoff` (the repository's tests/data/clientgo, format in
//! its README) through the outage wrapper over the manager, which must
//! change nothing when no outage is declared.

use std::path::Path;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff::{Backoff, Gate};
use keyed_backoff_outage::{InProcess, OutageAware, OutageSettings};
use keyed_backoff_testkit::clientgo::{Trace, int, nanos, traces};
use keyed_backoff_testkit::ready;
use serde_json::Value;

type Aware = OutageAware<Backoff<String, MockClock>, InProcess<MockClock>>;

/// The outage wrapper with default settings over `backoff`.
fn aware(backoff: Backoff<String, MockClock>, clock: &MockClock) -> Aware {
    OutageAware::with_clock(backoff, OutageSettings::default(), clock.clone()).expect("valid")
}

/// Replays one trace on the manager under an outage wrapper: a `reset` is
/// the contract's success told to the wrapper, while client-go's `next` at
/// an event time, which the contract has no call for (its failure is the
/// gate), and the reads go to the manager under it; after every operation
/// the wrapper must report the key's wait as the manager does. Returns
/// the number of results checked.
fn replay(path: &Path) -> usize {
    let trace = Trace::read(path);
    let clock = MockClock::new();
    let aware = aware(trace.manager(&clock), &clock);
    let backoff = aware.inner();
    let checked = trace.replay(
        &clock,
        backoff,
        |key| {
            let Ok(()) = ready(aware.succeed(&key.to_string()));
        },
        |key, whence| {
            let key = key.to_string();
            let (Ok(seen), Ok(own)) = (ready(aware.wait(&key)), ready(backoff.wait(&key)));
            assert_eq!(seen, own, "{whence}");
        },
    );
    assert_eq!(aware.outages(), 0, "{}", path.display());
    checked
}

/// Tells one trace to the bare manager and to the outage wrapper over
/// another through the [`Gate`] alone (`next` is the gate at the clock's
/// now: a failure, counted unless the key is in backoff) and checks that
/// every answer is the same; returns the number of answers compared.
fn replay_through_the_gate(path: &Path) -> usize {
    let trace = Trace::read(path);
    let clock = MockClock::new();
    let bare = trace.manager(&clock);
    let aware = aware(trace.manager(&clock), &clock);
    let start = clock.now();
    let at = |v: &Value| start.offset_by_nanos(int(v, "event_ns"));
    let mut compared = 0;
    for (n, line) in &trace.lines {
        let op: Value = serde_json::from_str(line).expect("op json");
        let whence = format!("{}:{}: {line}", path.display(), n + 1);
        let key = op["key"].as_str().unwrap_or("").to_string();
        let inner = aware.inner();
        match op["op"].as_str().expect("op name") {
            "advance" => clock.advance(nanos(&op, "ns")),
            "next" => {
                let (Ok(a), Ok(b)) = (ready(bare.fail(&key)), ready(aware.fail(&key)));
                assert_eq!(a, b, "{whence}");
            }
            "reset" | "delete" => {
                let (Ok(()), Ok(())) = (ready(bare.succeed(&key)), ready(aware.succeed(&key)));
            }
            "get" => assert_eq!(bare.get(&key), inner.get(&key), "{whence}"),
            "in_since" => assert_eq!(
                bare.is_in_backoff_since(&key, at(&op)),
                inner.is_in_backoff_since(&key, at(&op)),
                "{whence}"
            ),
            "in_since_update" => assert_eq!(
                bare.is_in_backoff_since_update(&key, at(&op)),
                inner.is_in_backoff_since_update(&key, at(&op)),
                "{whence}"
            ),
            "gc" => assert_eq!(bare.gc(), inner.gc(), "{whence}"),
            "len" => assert_eq!(bare.len(), inner.len(), "{whence}"),
            other => panic!("{whence}: unknown op {other}"),
        }
        let (Ok(a), Ok(b)) = (ready(bare.wait(&key)), ready(aware.wait(&key)));
        assert_eq!(a, b, "{whence}");
        let (Ok(a), Ok(b)) = (ready(bare.level(&key)), ready(aware.level(&key)));
        assert_eq!(a, b, "{whence}");
        compared += 1;
    }
    assert_eq!(aware.outages(), 0, "{}", path.display());
    compared
}

#[test]
fn every_clientgo_trace_replays_exactly_through_the_outage_wrapper() {
    // A trace has at most six keys, fewer than an outage needs: the wrapper
    // sees every success (each `reset`) and must change nothing.
    let checked: usize = traces().iter().map(|path| replay(path)).sum();
    assert!(checked > 2_000, "only {checked} results checked");
}

#[test]
fn every_clientgo_trace_through_the_gate_is_answered_alike_with_and_without_the_wrapper() {
    // Every failure and success goes through the wrapper's watch here; no
    // trace declares an outage, so every answer must be the bare manager's.
    let compared: usize = traces().iter().map(|p| replay_through_the_gate(p)).sum();
    assert!(compared > 5_000, "only {compared} answers compared");
}
