//! Reading the client-go traces of the repository's `tests/data/clientgo`
//! (format in its README), shared by the suites that replay them.

use std::path::{Path, PathBuf};
use std::time::Duration;

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
