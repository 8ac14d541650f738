//! Replays every operation trace recorded from Kubernetes client-go's
//! `flowcontrol.Backoff` (tests/data/clientgo, format in its README) and
//! checks every result exactly on the manager. (keyed-backoff-outage
//! replays them through its wrapper too.)

use std::path::Path;
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock};
use keyed_backoff_testkit::clientgo::{Trace, int, nanos, traces};
use serde_json::Value;

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
        let trace = Trace::read(path);
        let clock = MockClock::new();
        let backoff = trace.manager(&clock);
        checked += trace.replay(&clock, &backoff, |key| _ = backoff.reset(key), |_, _| {});
    }
    // Every trace must contribute checks; a silently empty replay would pass.
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
        let closure = Trace::read(&path).manager(&clock);
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
