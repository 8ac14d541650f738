#!/usr/bin/env python3
"""Fail if the outage's own files call a key that an outage keeps back
anything but "parked".

docs/design.md's vocabulary: a key an outage keeps back is *parked*, never
"held"; a *hold* is a key's floor (a server's `Retry-After`: `hold_until`,
`Gate::hold`), another concept. The outage's own files speak only of the
first, so in them the words "held" and "unheld", and "hold back" in any
form, are errors (a comment, a doc, an error message alike). Elsewhere
"held" may name a floor, and is not checked.

The outage's files: src/outage/, the Redis crate's src/fleet/ and
src/outage.lua, and docs/outage.md.

Usage: python3 .ci/vocabulary.py   (from anywhere)
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTAGE_FILES = ["crates/keyed-backoff-outage/src", "crates/keyed-backoff-redis/src/fleet",
                "crates/keyed-backoff-redis/src/outage.lua", "docs/outage.md",
                "crates/keyed-backoff-kube/src"]
WRONG = re.compile(r"\b(un)?held\b|\bhold(s|ing)? back\b", re.I)


def files():
    for path in OUTAGE_FILES:
        full = os.path.join(ROOT, path)
        if os.path.isfile(full):
            yield path
            continue
        if not os.path.isdir(full):
            sys.exit(f"{path} is gone: update OUTAGE_FILES in {os.path.relpath(__file__, ROOT)}")
        for d, _, names in os.walk(full):
            for n in sorted(names):
                if n.endswith((".rs", ".lua", ".md")):
                    yield os.path.relpath(os.path.join(d, n), ROOT)


def main():
    errors, n = [], 0
    for path in files():
        n += 1
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                for m in WRONG.finditer(line):
                    errors.append(f"{path}:{i}: \"{m.group(0)}\" for a key an outage keeps "
                                  f"back: say parked (a hold is a Retry-After floor)")
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"{n} files of the outage call the keys it keeps back parked")


if __name__ == "__main__":
    main()
