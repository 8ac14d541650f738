//! Replays every operation trace recorded from Kubernetes client-go's
//! `flowcontrol.Backoff` (tests/data/clientgo, format in its README) and
//! checks every result exactly.

use std::path::Path;
use std::time::Duration;

use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use keyed_backoff::{Backoff, OutageSettings};
use keyed_backoff_testkit::clientgo::{int, nanos, traces};
use serde_json::Value;

/// Builds the manager a trace's config line describes, on a fresh mock clock,
/// with outage detection when `outage` is given.
fn manager(
    config: &Value,
    clock: &MockClock,
    outage: Option<OutageSettings>,
) -> Backoff<String, MockClock> {
    let (initial, max) = (nanos(config, "initial_ns"), nanos(config, "max_ns"));
    let builder = keyed_backoff_testkit::builder(initial, max, clock);
    let builder = match outage {
        Some(settings) => builder.outage(settings),
        None => builder,
    };
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

/// Replays one trace; returns the number of results checked.
fn replay(path: &Path, outage: Option<OutageSettings>) -> usize {
    let text = std::fs::read_to_string(path).expect("read trace");
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().expect("config line");
    let first: Value = serde_json::from_str(first).expect("config json");
    let clock = MockClock::new();
    let backoff = manager(&first["config"], &clock, outage);
    let start = clock.now();
    let at = |v: &Value| start.offset_by_nanos(int(v, "event_ns"));
    let mut checked = 0;
    for (n, line) in lines {
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
    }
    if outage.is_some() {
        assert_eq!(backoff.stats().outages, 0, "{}", path.display());
    }
    checked
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
        checked += replay(path, None);
    }
    // Every trace must contribute checks; a silently empty replay would pass.
    assert!(checked > 2_000, "only {checked} results checked");
}

#[test]
fn every_clientgo_trace_replays_exactly_with_outage_detection_on_and_no_outage() {
    // A trace has at most six keys, fewer than an outage needs: detection
    // watches every failure and success (each `reset` counts as one) and
    // must change nothing.
    let checked: usize = traces()
        .iter()
        .map(|path| replay(path, Some(OutageSettings::default())))
        .sum();
    assert!(checked > 2_000, "only {checked} results checked");
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
        let closure = manager(config, &clock, None);
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
