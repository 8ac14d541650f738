#!/usr/bin/env python3
"""Fail if a published crate's package holds a file that is not source, docs,
test data or a license (a database dump, a build product, an editor file),
or lacks its LICENSE.

Run from the repository root: python3 .ci/package_files.py
"""
import re
import subprocess
import sys

CRATES = ["keyed-backoff", "fair-admission", "keyed-backoff-redis",
          "keyed-backoff-kube", "keyed-backoff-tower", "keyed-backoff-outage"]
ALLOWED = [
    r".*\.(rs|lua|md)",                       # source and docs
    r"(.*/)?Cargo\.toml(\.orig)?", r"Cargo\.lock",
    r"LICENSE(-[A-Z]+)?", r"\.cargo_vcs_info\.json",
    r"tests/data/.*\.(jsonl|csv)",            # recorded traces the tests replay
    r"tests/.*\.proptest-regressions",        # proptest's pinned failures
    r"docs/[^/]+\.(csv|svg)",                 # data the docs show
]
pattern = re.compile("|".join(f"(?:{a})" for a in ALLOWED) + r"\Z")

bad = []
for crate in CRATES:
    out = subprocess.run(["cargo", "package", "--list", "--allow-dirty", "-p", crate],
                         check=True, capture_output=True, text=True).stdout
    bad += [f"{crate}: {f}" for f in out.split() if not pattern.match(f)]
    if "LICENSE" not in out.split():
        bad.append(f"{crate}: no LICENSE (link the repository's: ln -s ../../LICENSE)")
if bad:
    print("packages hold files that are not source, docs, test data or a license, or lack a LICENSE:")
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(CRATES)} packages hold only source, docs, test data and licenses, a LICENSE each")
