//! Reading the client-go traces of the repository's `tests/data/clientgo`
//! (format in its README), shared by the suites that replay them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keyed_backoff::Backoff;
use keyed_backoff::clock::{Clock, ClockInstant, MockClock, MockInstant};
use serde_json::Value;

/// Every trace file, sorted.
pub fn traces() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/clientgo");
    let mut found = Vec::new();
    for dir in ["generated", "hand", "probes", "extra"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|x| x == "jsonl") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// An integer field of a trace line.
pub fn int(v: &Value, field: &str) -> i64 {
    v[field]
        .as_i64()
        .unwrap_or_else(|| panic!("missing integer field {field} in {v}"))
}

/// A non-negative nanosecond field of a trace line.
pub fn nanos(v: &Value, field: &str) -> Duration {
    Duration::from_nanos(u64::try_from(int(v, field)).expect("non-negative duration"))
}

/// One trace: its config line and its operations (numbered lines).
pub struct Trace {
    /// The file it was read from.
    pub path: PathBuf,
    /// The `config` object of its first line.
    pub config: Value,
    /// Its operations, with their (0-based) line numbers.
    pub lines: Vec<(usize, String)>,
}

impl Trace {
    /// Reads the trace at `path`.
    pub fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).expect("read trace");
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| (n, l.to_string()));
        let (_, first) = lines.next().expect("config line");
        let first: Value = serde_json::from_str(&first).expect("config json");
        Trace {
            path: path.to_path_buf(),
            config: first["config"].clone(),
            lines: lines.collect(),
        }
    }

    /// The manager the config line describes, on `clock`.
    pub fn manager(&self, clock: &MockClock) -> Backoff<String, MockClock> {
        let config = &self.config;
        let (initial, max) = (nanos(config, "initial_ns"), nanos(config, "max_ns"));
        let builder = crate::builder(initial, max, clock);
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

    /// Replays the trace on `backoff` (built by [`manager`](Self::manager)
    /// on `clock`) and checks every result exactly; returns the number of
    /// results checked. `reset` makes a `reset` or `delete` of a key (the
    /// manager's own, or a wrapper's success); `after` is called with the
    /// key and where in the trace, after every operation.
    pub fn replay(
        &self,
        clock: &MockClock,
        backoff: &Backoff<String, MockClock>,
        mut reset: impl FnMut(&str),
        mut after: impl FnMut(&str, &str),
    ) -> usize {
        let start = clock.now();
        let at = |v: &Value| start.offset_by_nanos(int(v, "event_ns"));
        let mut checked = 0;
        for (n, line) in &self.lines {
            let op: Value = serde_json::from_str(line).expect("op json");
            let whence = format!("{}:{}: {line}", self.path.display(), n + 1);
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
                    let got = backoff.is_in_backoff_since_update(key, at(&op));
                    assert_eq!(got, want, "{whence}");
                    checked += 1;
                }
                "reset" | "delete" => reset(key),
                "gc" => {
                    backoff.gc();
                }
                "len" => {
                    assert_eq!(backoff.len() as i64, int(&op, "result"), "{whence}");
                    checked += 1;
                }
                other => panic!("{whence}: unknown op {other}"),
            }
            after(key, &whence);
        }
        checked
    }
}
