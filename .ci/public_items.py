#!/usr/bin/env python3
"""Counts the core's public items and fails above the limit.

Builds the rustdoc JSON of `keyed-backoff` (all features), walks the public
modules from the crate root, follows re-exports, and lists every public item
a user can name by path: structs, enums, traits, functions, constants,
statics, type aliases and macros (modules are walked, not counted; methods
belong to their type). Items marked `#[doc(hidden)]`, and everything under
them, are left out: they are not API.

Usage: python3 .ci/public_items.py [--limit N] [--no-build]
"""

import argparse
import json
import os
import subprocess
import sys

COUNTED = {"struct", "enum", "trait", "function", "constant", "static",
           "type_alias", "macro", "union", "trait_alias"}


def build(root):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    subprocess.run(
        ["cargo", "rustdoc", "-q", "-p", "keyed-backoff", "--all-features", "--",
         "-Z", "unstable-options", "--output-format", "json"],
        cwd=root, env=env, check=True)


def target_dir(root):
    meta = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"],
                          cwd=root, capture_output=True, text=True, check=True)
    return json.loads(meta.stdout)["target_directory"]


def hidden(item):
    for a in item.get("attrs") or []:
        text = a if isinstance(a, str) else json.dumps(a)
        if "doc(hidden)" in text.replace(" ", "") or "doc_hidden" in text:
            return True
    return False


def kind_of(item):
    inner = item["inner"]
    return next(iter(inner)) if isinstance(inner, dict) else inner


def walk(doc):
    index = doc["index"]
    found = {}  # item id -> (path, kind); an item re-exported twice counts once
    seen = set()

    def visit(item_id, path):
        item = index.get(str(item_id))
        if item is None or item.get("crate_id") != 0 or hidden(item):
            return
        kind = kind_of(item)
        if kind == "module":
            key = ("module", item_id)
            if key in seen:
                return
            seen.add(key)
            for child in item["inner"]["module"]["items"]:
                child_item = index.get(str(child))
                if child_item is None or child_item.get("visibility") != "public":
                    continue
                if hidden(child_item):
                    continue
                if kind_of(child_item) == "use":
                    use = child_item["inner"]["use"]
                    target = use.get("id")
                    if target is None:
                        continue
                    if use.get("is_glob"):
                        visit(target, path)
                    else:
                        visit_named(target, path + [use["name"]])
                else:
                    visit_named(child, path + [child_item["name"]])
        elif kind in COUNTED:
            name = "::".join(path)
            old = found.get(item_id)
            if old is None or (name.count("::"), name) < (old[0].count("::"), old[0]):
                found[item_id] = (name, kind)

    def visit_named(item_id, path):
        item = index.get(str(item_id))
        if item is None or item.get("crate_id") != 0 or hidden(item):
            return
        if kind_of(item) == "module":
            visit(item_id, path)
        else:
            visit(item_id, path)

    visit(doc["root"], ["keyed_backoff"])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=41)
    parser.add_argument("--no-build", action="store_true")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not args.no_build:
        build(root)
    with open(os.path.join(target_dir(root), "doc", "keyed_backoff.json")) as f:
        doc = json.load(f)
    found = sorted(walk(doc).values(), key=lambda pk: (pk[0].count("::"), pk[0]))
    for path, kind in found:
        print(f"{kind:<11} {path}")
    n = len(found)
    print(f"{n} public items (limit {args.limit})")
    if n > args.limit:
        print(f"too many public items: {n} > {args.limit}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
