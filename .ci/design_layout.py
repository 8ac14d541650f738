#!/usr/bin/env python3
"""Fail if the layout in docs/design.md and the files on disk disagree.

The layout is every fenced block of docs/design.md without an info string
(the workspace's and the core's). Each line that does not start with a
space is an entry: one or more paths, separated by single spaces, then
two spaces or more and a description; the indented lines below it
continue that description. A path ending in `/` is a directory.

Every path of an entry must exist, and every file a directory entry names
(a word ending in `.rs` in its description, relative to that directory)
must exist in it.

Every `.rs` file under `src/` and `crates/*/src/` (tracked, or new and not
ignored) must be covered, by this rule:

- a file listed as an entry of its own is covered;
- otherwise the deepest directory entry that contains it decides: when its
  description names `.rs` files, it covers exactly those (`src/outage/`
  names each of its files); when it names none, it covers every file below
  it, unless other entries of the layout lie below it (the root's `src/`
  is broken down into the core's entries, so a file there must be an
  entry of its own or under a directory entry of its own);
- a file under no directory entry is not covered.

So a new file of the core needs a line of its own, or a directory that
covers it; a new file of a companion crate is covered by the crate's line
(`crates/keyed-backoff-redis/`), which names no file.

Usage: python3 .ci/design_layout.py   (from anywhere; reads git's file list)
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = "docs/design.md"
NAMED = re.compile(r"(?<![\w/.])([\w/]+\.rs)\b")


def layout_entries(text):
    """(paths, description) of each entry of the page's layout blocks."""
    entries, inside, info = [], False, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if not inside:
                info = line.strip()[3:].strip()
            inside = not inside
            continue
        if not inside or info or not line.strip():
            continue
        if line[0].isspace():
            if entries:
                entries[-1][1].append(line.strip())
            continue
        head, _, rest = line.partition("  ")
        entries.append((head.split(" "), [rest.strip()]))
    return [(paths, " ".join(desc)) for paths, desc in entries]


def source_files():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout.decode()
    pattern = re.compile(r"^(src|crates/[^/]+/src)/.*\.rs$")
    return sorted(f for f in set(out.split("\0"))
                  if pattern.match(f) and os.path.isfile(os.path.join(ROOT, f)))


def main():
    text = open(os.path.join(ROOT, PAGE), encoding="utf-8").read()
    entries = layout_entries(text)
    errors = []
    files, dirs = set(), {}
    for paths, desc in entries:
        for path in paths:
            if not os.path.exists(os.path.join(ROOT, path)):
                errors.append(f"the layout lists {path}, which does not exist")
            if path.endswith("/"):
                named = set(NAMED.findall(desc))
                dirs[path] = named
                for name in sorted(named):
                    if not os.path.isfile(os.path.join(ROOT, path, name)):
                        errors.append(f"the layout's {path} names {name}, which is not in it")
            else:
                files.add(path)
    listed = set(files) | set(dirs)
    for f in source_files():
        if f in files:
            continue
        around = [d for d in dirs if f.startswith(d)]
        if not around:
            errors.append(f"{f} is in no entry of the layout")
            continue
        d = max(around, key=len)
        if dirs[d]:
            if os.path.relpath(f, d) not in dirs[d]:
                errors.append(f"{f}: the layout's {d} names its files, but not this one")
        elif any(p != d and p.startswith(d) for p in listed):
            errors.append(f"{f} is in no entry of the layout ({d} is broken down "
                          "into entries below it)")
    if errors:
        print("\n".join(f"{PAGE}: {e}" for e in errors))
        print(f"{len(errors)} disagreements between {PAGE}'s layout and the files on disk")
        sys.exit(1)
    print(f"{PAGE}'s layout: {len(entries)} entries, every path exists and covers "
          f"the {len(source_files())} source files of src/ and crates/*/src/")


if __name__ == "__main__":
    main()
