#!/usr/bin/env python3
"""Fail if a published crate's README disagrees with its manifest.

For each publishable member of the workspace, its README.md must

- state the crate's declared `rust-version` as "Minimum supported Rust
  version: X" (the first such statement counts; the root README's is the
  core's), and
- name every feature of its `[features]` table (but `default`, and the
  test-only ones in INTERNAL), each in backticks, on a line of a features
  table (`| `name` ...`) or on a line that says "feature".

And the root README must give a `cargo run ... --example NAME` command
for every example of the workspace's example packages (those under
`examples/`); `.ci/doc_refs.py` checks that each command resolves.

Usage: python3 .ci/readme_facts.py   (from anywhere)
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATED = re.compile(r"Minimum supported Rust version: \**(\d+(?:\.\d+)*)")
# (crate, feature): features that add nothing for users.
INTERNAL = {
    ("keyed-backoff-kube", "redis-tests"): "builds its own suite on a redis-server; no code",
}


def named(text, feature):
    """Whether `text` names `feature` on a features table's row or a line
    that says "feature"."""
    span = f"`{feature}`"
    for line in text.splitlines():
        if span in line and (line.lstrip().startswith(f"| {span}") or "feature" in line):
            return True
    return False


def main():
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    errors, checked = [], 0
    for pkg in meta["packages"]:
        if pkg.get("publish") == []:
            continue
        checked += 1
        readme = os.path.join(os.path.dirname(pkg["manifest_path"]), "README.md")
        page = os.path.relpath(readme, ROOT)
        if not os.path.exists(readme):
            errors.append(f"{pkg['name']}: no README.md")
            continue
        text = open(readme, encoding="utf-8").read()
        stated = STATED.search(text)
        if not stated or stated.group(1) != pkg.get("rust_version"):
            errors.append(f"{page}: states {'no MSRV' if not stated else 'an MSRV of ' + stated.group(1)}"
                          f"; {pkg['name']}'s rust-version is {pkg.get('rust_version')}")
        for feature in sorted(pkg["features"]):
            if feature == "default" or (pkg["name"], feature) in INTERNAL:
                continue
            if not named(text, feature):
                errors.append(f"{page}: does not list {pkg['name']}'s feature `{feature}`")
    root = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    run = set(re.findall(r"cargo run\b[^`\n]*--example\s+([\w-]+)", root))
    examples = 0
    for pkg in meta["packages"]:
        if not os.path.relpath(pkg["manifest_path"], ROOT).startswith("examples/"):
            continue
        for target in pkg["targets"]:
            if "example" in target["kind"]:
                examples += 1
                if target["name"] not in run:
                    errors.append(f"README.md: no `cargo run` command for the example "
                                  f"{target['name']} ({pkg['name']})")
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"{checked} published crates' READMEs state their MSRV and list their features; "
          f"the root README runs all {examples} examples")


if __name__ == "__main__":
    main()
