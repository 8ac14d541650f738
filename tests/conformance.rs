//! Replays every operation trace recorded from Kubernetes client-go's
//! `flowcontrol.Backoff` (tests/data/clientgo, format in its README) and
//! checks every result exactly, on the bare manager and through the outage
//! wrapper over it, which must change nothing when no outage is declared.

use std::path::Path;
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::{Backoff, Gate, OutageAware, OutageSettings};
use keyed_backoff_testkit::clientgo::{int, nanos, traces};
use keyed_backoff_testkit::ready;
use serde_json::Value;

type Aware = OutageAware<Backoff<String, MockClock>, MockClock>;

/// Builds the manager a trace's config line describes, on a fresh mock clock.
fn manager(config: &Value, clock: &MockClock) -> Backoff<String, MockClock> {
    let (initial, max) = (nanos(config, "initial_ns"), nanos(config, "max_ns"));
    let builder = keyed_backoff_testkit::builder(initial, max, clock);
    match config.get("expire_after_ns") {
        // client-go's HasExpiredFunc, written as a closure over instants.
        Some(window) => {
            let window = Duration::from_nanos(window.as_u64().expect("expire_after_ns"));
            builder
                .expiry(move |event: MockInstant, last: MockInstant, _max| {
                    event > last && event.saturating_duration_since(last) > window
                })
                .build()
        }
        None => builder.build(),
    }
    .expect("trace config is valid")
}

/// The outage wrapper with default settings over `backoff`.
fn aware(backoff: Backoff<String, MockClock>, clock: &MockClock) -> Aware {
    OutageAware::with_clock(backoff, OutageSettings::default(), clock.clone()).expect("valid")
}

/// A trace's operations (numbered lines after the config) and its config.
fn read(path: &Path) -> (Value, Vec<(usize, String)>) {
    let text = std::fs::read_to_string(path).expect("read trace");
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| (n, l.to_string()));
    let (_, first) = lines.next().expect("config line");
    let first: Value = serde_json::from_str(&first).expect("config json");
    (first["config"].clone(), lines.collect())
}

/// Replays one trace on the manager, which sits under an outage wrapper
/// that is told nothing unless `wrapped`; returns the number of results
/// checked. When `wrapped`, a `reset` is the contract's success told to the
/// wrapper, while client-go's `next` at an event time, which the contract
/// has no call for (its failure is the gate), and the reads go to the
/// manager under it; after every operation the wrapper must report the
/// key's wait as the manager does.
fn replay(path: &Path, wrapped: bool) -> usize {
    let (config, lines) = read(path);
    let clock = MockClock::new();
    let aware = aware(manager(&config, &clock), &clock);
    let backoff = aware.inner();
    let start = clock.now();
    let at = |v: &Value| start.offset_by_nanos(int(v, "event_ns"));
    let mut checked = 0;
    for (n, line) in &lines {
        let op: Value = serde_json::from_str(line).expect("op json");
        let whence = format!("{}:{}: {line}", path.display(), n + 1);
        let key = op["key"].as_str().unwrap_or("");
        match op["op"].as_str().expect("op name") {
            "advance" => clock.advance(nanos(&op, "ns")),
            "next" => {
                backoff.next(key, at(&op));
            }
            "get" => {
                assert_eq!(backoff.get(key), nanos(&op, "result_ns"), "{whence}");
                checked += 1;
            }
            "in_since" => {
                let want = op["result"].as_bool().expect("result");
                assert_eq!(backoff.is_in_backoff_since(key, at(&op)), want, "{whence}");
                checked += 1;
            }
            "in_since_update" => {
                let want = op["result"].as_bool().expect("result");
                assert_eq!(
                    backoff.is_in_backoff_since_update(key, at(&op)),
                    want,
                    "{whence}"
                );
                checked += 1;
            }
            "reset" | "delete" if wrapped => {
                let Ok(()) = ready(aware.succeed(&key.to_string()));
            }
            "reset" | "delete" => {
                backoff.reset(key);
            }
            "gc" => {
                backoff.gc();
            }
            "len" => {
                assert_eq!(backoff.len() as i64, int(&op, "result"), "{whence}");
                checked += 1;
            }
            other => panic!("{whence}: unknown op {other}"),
        }
        if wrapped {
            let key = key.to_string();
            let (Ok(seen), Ok(own)) = (ready(aware.wait(&key)), ready(backoff.wait(&key)));
            assert_eq!(seen, own, "{whence}");
        }
    }
    assert_eq!(aware.outages(), 0, "{}", path.display());
    checked
}

/// Tells one trace to the bare manager and to the outage wrapper over
/// another through the [`Gate`] alone (`next` is the gate at the clock's
/// now: a failure, counted unless the key is in backoff) and checks that
/// every answer is the same; returns the number of answers compared.
fn replay_through_the_gate(path: &Path) -> usize {
    let (config, lines) = read(path);
    let clock = MockClock::new();
    let bare = manager(&config, &clock);
    let aware = aware(manager(&config, &clock), &clock);
    let start = clock.now();
    let at = |v: &Value| start.offset_by_nanos(int(v, "event_ns"));
    let mut compared = 0;
    for (n, line) in &lines {
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
fn every_clientgo_trace_replays_exactly() {
    let paths = traces();
    assert_eq!(
        paths.len(),
        61,
        "expected 40 generated + 9 hand + 8 probes + 4 extra traces"
    );
    let mut checked = 0;
    for path in &paths {
        checked += replay(path, false);
    }
    // Every trace must contribute checks; a silently empty replay would pass.
    assert!(checked > 2_000, "only {checked} results checked");
}

#[test]
fn every_clientgo_trace_replays_exactly_through_the_outage_wrapper() {
    // A trace has at most six keys, fewer than an outage needs: the wrapper
    // sees every success (each `reset`) and must change nothing.
    let checked: usize = traces().iter().map(|path| replay(path, true)).sum();
    assert!(checked > 2_000, "only {checked} results checked");
}

#[test]
fn every_clientgo_trace_through_the_gate_is_answered_alike_with_and_without_the_wrapper() {
    // Every failure and success goes through the wrapper's watch here; no
    // trace declares an outage, so every answer must be the bare manager's.
    let compared: usize = traces().iter().map(|p| replay_through_the_gate(p)).sum();
    assert!(compared > 5_000, "only {compared} answers compared");
}

#[test]
fn fixed_window_expiry_matches_the_closure_on_extra_traces() {
    // The extra traces use a custom expiry; replaying them through
    // `expire_after` must give the same results as the closure.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/clientgo/extra");
    for entry in std::fs::read_dir(root).expect("extra dir") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read");
        let config: Value =
            serde_json::from_str(text.lines().next().expect("config")).expect("json");
        let config = &config["config"];
        let Some(window) = config.get("expire_after_ns").and_then(Value::as_u64) else {
            continue;
        };
        let clock = MockClock::new();
        let fixed =
            Backoff::<String>::builder(nanos(config, "initial_ns"), nanos(config, "max_ns"))
                .clock(clock.clone())
                .expire_after(Duration::from_nanos(window))
                .build()
                .expect("valid");
        let closure = manager(config, &clock);
        let start = clock.now();
        for line in text.lines().skip(1) {
            let op: Value = serde_json::from_str(line).expect("op");
            let key = op["key"].as_str().unwrap_or("");
            match op["op"].as_str().expect("op") {
                "advance" => clock.advance(nanos(&op, "ns")),
                "next" => {
                    let t = start.offset_by_nanos(int(&op, "event_ns"));
                    assert_eq!(fixed.next(key, t), closure.next(key, t), "{line}");
                }
                "gc" => assert_eq!(fixed.gc(), closure.gc(), "{line}"),
                _ => {}
            }
        }
    }
}
