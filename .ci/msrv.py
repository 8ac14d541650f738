#!/usr/bin/env python3
"""Fails if any normal or build dependency (all features, every platform) of a
publishable workspace crate declares a newer `rust-version` than the crate's
own. Dev-dependencies are not checked: they never reach users.

Usage: python3 .ci/msrv.py [--msrv X.Y]   (--msrv overrides the declared
value, to show that the check fails when it should)
"""
import json
import subprocess
import sys


def version(v):
    return tuple(int(x) for x in (v.split(".") + ["0", "0"])[:3])


override = None
if len(sys.argv) == 3 and sys.argv[1] == "--msrv":
    override = sys.argv[2]
elif len(sys.argv) != 1:
    sys.exit(__doc__)

meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}

failures = 0
for member in meta["workspace_members"]:
    pkg = packages[member]
    if pkg.get("publish") == []:
        continue  # benches and other internal crates
    ours = override or pkg.get("rust_version")
    if not ours:
        print(f"{pkg['name']}: no rust-version declared")
        failures += 1
        continue
    seen, stack = set(), [member]
    while stack:
        for dep in nodes[stack.pop()]["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            if kinds & {None, "build"} and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                stack.append(dep["pkg"])
    newer = sorted(
        (packages[d]["name"], packages[d]["version"], packages[d]["rust_version"])
        for d in seen
        if packages[d].get("rust_version")
        and version(packages[d]["rust_version"]) > version(ours)
    )
    for name, ver, needs in newer:
        print(f"{pkg['name']} (rust-version {ours}): {name} {ver} needs Rust {needs}")
    failures += len(newer)
    if not newer:
        print(f"{pkg['name']}: {len(seen)} dependencies, none needs more than Rust {ours}")
sys.exit(1 if failures else 0)
