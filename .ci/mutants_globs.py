#!/usr/bin/env python3
"""Fail if a glob in .cargo/mutants.toml matches no file: a scope naming
files that moved away silently examines nothing.

cargo-mutants reads each glob relative to the repository's root; one
without a `/` matches a file of that name in any directory.

Usage: python3 .ci/mutants_globs.py
"""
import glob
import os
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

with open(os.path.join(ROOT, ".cargo", "mutants.toml"), "rb") as f:
    config = tomllib.load(f)
empty, counts = [], []
for key in ("examine_globs", "exclude_globs"):
    for pattern in config.get(key, []):
        anywhere = pattern if "/" in pattern else "**/" + pattern
        files = [p for p in glob.glob(os.path.join(ROOT, anywhere), recursive=True)
                 if os.path.isfile(p) and "/target/" not in p]
        (counts if files else empty).append(f"{key}: {pattern} ({len(files)} files)")
if empty:
    print("globs in .cargo/mutants.toml that match no file:\n" + "\n".join(empty))
    sys.exit(1)
print("every glob in .cargo/mutants.toml matches files: " + "; ".join(counts))
