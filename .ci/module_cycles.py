#!/usr/bin/env python3
"""Fails if the modules of a crate depend on each other in a cycle.

For every `.rs` file under SRC (a crate's `src/`), the module it defines and
the modules it names through `crate::…` and `super::…` paths (in code, not
in comments) are edges of a graph. A module re-exporting its own children
(`pub use child::Item`) is the facade pattern, not a dependency, and is not
counted. Prints every cycle found and exits 1 if there is one.

Usage: python3 .ci/module_cycles.py src [crates/*/src ...]
"""

import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def reexports(root_text, modules):
    """`crate::Name` paths name an item the crate root re-exports: map each
    such name to the module it comes from."""
    out = {}
    code = strip_comments(root_text)
    for m in re.finditer(r"pub\s+use\s+(?:crate::|self::)?([\w:]+?)(?:::\{([^}]*)\}|::(\w+))\s*;", code):
        path = tuple(m.group(1).split("::"))
        names = [n.strip().split(" as ")[-1].strip() for n in (m.group(2) or m.group(3)).split(",")]
        while path and path not in modules:
            path = path[:-1]
        if path:
            for n in names:
                if n:
                    out[n] = path
    return out


def references(mod, text, modules, root_items=None):
    root_items = root_items or {}
    found = set()
    code = strip_comments(text)
    # `pub use child::…` / `pub use self::child::…` re-export a child.
    code = re.sub(r"pub(\(crate\))?\s+use\s+(self::)?\w+::[^;]*;",
                  lambda m: "" if not m.group(0).split("use", 1)[1].strip().startswith(("crate::", "super::")) else m.group(0),
                  code)
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", code):
        head, tail = m.group(1), m.group(2).strip(":").split("::")
        base = () if head == "crate" else mod[:-1]
        if head == "super":
            # super::super::… climbs further.
            while tail and tail[0] == "super":
                base, tail = base[:-1], tail[1:]
        path = base
        target = base
        if head == "crate" and tail and (tail[0],) not in modules and tail[0] in root_items:
            target = root_items[tail[0]]
            tail = []
        for part in tail:
            path = path + (part,)
            if path in modules:
                target = path
            else:
                break
        if target != mod and target and not (mod[:len(target)] == target and head == "super" and False):
            found.add(target)
    # `use` groups: crate::{a, b::C}
    for m in re.finditer(r"\bcrate::\{([^}]*)\}", code):
        for part in m.group(1).split(","):
            name = part.strip().split("::")[0]
            if (name,) in modules and (name,) != mod:
                found.add((name,))
            elif name in root_items and root_items[name] != mod:
                found.add(root_items[name])
    return found


def cycles(graph):
    out, index, low, stack, on = [], {}, {}, [], set()
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            strong(v)
    return out


def check(root):
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(dirpath, n)
                files[module_of(root, p)] = p
    modules = set(files)
    root_items = {}
    if () in files:
        with open(files[()]) as f:
            root_items = reexports(f.read(), modules)
    graph = {}
    for mod, path in files.items():
        with open(path) as f:
            refs = references(mod, f.read(), modules, root_items)
        # A child naming its ancestor's own items (a trait in `mod.rs`) and
        # an ancestor naming its child are the module tree, not a cycle:
        # only edges between modules neither of which contains the other.
        graph[mod] = {r for r in refs
                      if r[:len(mod)] != mod and mod[:len(r)] != r}
    found = cycles(graph)
    for comp in found:
        names = ["::".join(m) or "crate" for m in comp]
        print(f"{root}: cycle between {', '.join(sorted(names))}")
        for m in comp:
            for r in sorted(graph[m]):
                if r in comp:
                    print(f"    {'::'.join(m)} -> {'::'.join(r)}")
    return not found


def main():
    roots = sys.argv[1:] or ["src"]
    ok = all([check(r) for r in roots])
    if ok:
        print(f"no module cycles in {', '.join(roots)}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
