#!/usr/bin/env python3
"""Fail if a README or a page of docs/ prints a cargo command that would not
resolve as printed, or cites a repository path that does not exist.

Commands: every `cargo ...` in a fenced block or an inline code span (a span
may wrap across lines). Each is checked against `cargo metadata` of the
workspace, as if typed at the repository root (after any `cd DIR &&`):
the packages it names (`-p`) exist; without `-p` the workspace's default
members are the packages; the `--example`, `--bench`, `--test` and `--bin`
targets it names exist in those packages, and the features it turns on
(`--features`, `--all-features`, the defaults) include each such target's
required features; every feature it names exists. `cargo fuzz run T` needs
`fuzz/fuzz_targets/T.rs`; `cargo mutants -f GLOB` needs a file matching
GLOB, and the `--test` names after its `--` must exist. `cargo install`
and commands of other tools are not checked.

Paths: every token that starts like a repository path (`src/`, `tests/`,
`docs/`, `crates/`, `testkit/`, `benches/`, `examples/`, `fuzz/`, `.ci/`,
`.cargo/`, `plots/`) and every relative link target must name a file or
directory (a glob must match one). A link target is looked up relative to
the page's directory, as Markdown resolves it. A token in a page of `docs/`
or in the root README is looked up relative to the repository root only,
where a reader of the repository finds it: "the Redis crate's
`tests/fail_fast.rs`" fails, `crates/keyed-backoff-redis/tests/fail_fast.rs`
holds. A token in a workspace member's README (shown on crates.io, where
the crate is the whole tree) is looked up relative to that crate, then to
the root; in any other README, relative to its directory, then to the root.
Paths of other projects are listed in EXTERNAL with the page citing them.

Usage: python3 .ci/doc_refs.py   (from anywhere; reads git's file list)
"""

import glob
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (page, path): paths a page cites that are not this repository's.
EXTERNAL = {
    ("crates/keyed-backoff-redis/README.md", "src/main.rs"): "the reader's own application",
    ("docs/simulation.md", "src/backoff_simulator.py"): "awslabs/aws-arch-backoff-simulator's",
    ("tests/data/aws_simulator/README.md", "src/backoff_simulator.py"): "the same simulator's",
}

PATH_START = r"(?:src|tests|docs|crates|testkit|benches|examples|fuzz|\.ci|\.cargo|plots)/"
PATH_TOKEN = re.compile(r"(?<![\w/.:@-])(" + PATH_START + r"[\w.*{},/-]*)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
REPO_URL = re.compile(r"github\.com/keyed-backoff/keyed-backoff/(?:blob|tree)/[^/]+/([^)\s#`]+)")


def pages():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout.decode()
    files = [f for f in out.split("\0") if f]
    return sorted(f for f in files
                  if (f == "README.md" or f.endswith("/README.md") or
                      (f.startswith("docs/") and f.endswith(".md")))
                  and not f.startswith(("target/", "fuzz/target/")))


def metadata():
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    meta = json.loads(out)
    packages = {}
    for p in meta["packages"]:
        packages[p["name"]] = {
            "dir": os.path.relpath(os.path.dirname(p["manifest_path"]), ROOT),
            "features": p["features"],
            "targets": [(k, t["name"], t.get("required-features") or [])
                        for t in p["targets"] for k in t["kind"]],
        }
    ids = {p["id"]: p["name"] for p in meta["packages"]}
    defaults = [ids[i] for i in meta.get("workspace_default_members") or []] or list(packages)
    return packages, defaults


# -- extracting commands ----------------------------------------------------

def fenced_blocks(text):
    """(block text, lines outside any fence) of a markdown page."""
    blocks, prose, inside, cur = [], [], False, []
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if inside:
                blocks.append("\n".join(cur))
                cur = []
            inside = not inside
            prose.append("")
            continue
        (cur if inside else prose).append(line)
    return blocks, "\n".join(prose)


def commands(text):
    """Every shell command line of a page: fenced blocks' lines (joined on
    a trailing backslash, without a `$ ` prompt or a trailing comment) and
    inline code spans."""
    blocks, prose = fenced_blocks(text)
    found = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("$ "):
                line = line[2:]
            found.append(line)
    for span in re.findall(r"`([^`]+)`", prose):
        found.append(" ".join(span.split()))
    return [c for c in found if re.search(r"(^|[\s;&|(])cargo\s", c)]


def segments(line):
    """The cargo invocations of one command line, each with the directory
    (relative to the root) a preceding `cd` moved to."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return []
    out, cur, cwd = [], [], "."
    for tok in tokens + [";"]:
        if tok in (";", "&&", "||", "|", "(", ")", "&"):
            if cur:
                if cur[0] == "cd" and len(cur) > 1:
                    cwd = os.path.normpath(os.path.join(cwd, cur[1]))
                elif "cargo" in cur:
                    words = cur[cur.index("cargo"):]
                    out.append((cwd, [w for w in words if not w.startswith("#")]))
            cur = []
        elif tok.startswith("#"):
            cur.append("#")  # a comment: the rest of the line is dropped below
        else:
            cur.append(tok)
    return [(cwd, w[:w.index("#")] if "#" in w else w) for cwd, w in out]


# -- checking a cargo command -----------------------------------------------

def enabled_features(pkg, named, all_features, no_default):
    feats = pkg["features"]
    if all_features:
        return set(feats)
    todo = list(named) + ([] if no_default or "default" not in feats else ["default"])
    on = set()
    while todo:
        f = todo.pop()
        if f in on:
            continue
        on.add(f)
        todo += [g for g in feats.get(f, []) if not g.startswith("dep:") and "/" not in g]
    return on


def check_cargo(cwd, words, packages, defaults):
    """What is wrong with `cargo WORDS` run in `cwd`; an empty list if
    nothing."""
    if len(words) < 2:
        return []
    sub, args = words[1], words[2:]
    rest = []
    if "--" in args:
        rest = args[args.index("--") + 1:]
        args = args[:args.index("--")]
    if sub == "fuzz":
        if len(args) >= 2 and args[0] == "run":
            target = next((a for a in args[1:] if not a.startswith("-") and
                           a not in ("none", "address", "memory", "thread", "leak")), None)
            fuzz_dir = cwd if os.path.isdir(os.path.join(ROOT, cwd, "fuzz_targets")) else "fuzz"
            if target and not os.path.isfile(os.path.join(ROOT, fuzz_dir, "fuzz_targets", target + ".rs")):
                return [f"no fuzz target {target} ({fuzz_dir}/fuzz_targets/{target}.rs)"]
        return []
    if sub not in ("build", "test", "run", "bench", "check", "clippy", "doc", "mutants",
                   "tree", "package", "rustc", "rustdoc", "fmt", "r", "t", "b", "c"):
        return []
    opts = {"p": [], "features": [], "example": [], "bench": [], "test": [], "bin": [], "file": []}
    flags = set()
    takes = {"-p": "p", "--package": "p", "-F": "features", "--features": "features",
             "--example": "example", "--bench": "bench", "--test": "test", "--bin": "bin",
             "-f": "file", "--file": "file"}
    i = 0
    while i < len(args):
        a = args[i]
        key, val = a, None
        if a.startswith("--") and "=" in a:
            key, val = a.split("=", 1)
        if key in takes:
            if val is None:
                i += 1
                val = args[i] if i < len(args) else ""
            opts[takes[key]].append(val)
        else:
            flags.add(a)
        i += 1
    errors = []
    for p in opts["p"]:
        if p not in packages:
            errors.append(f"no package {p}")
    if errors:
        return errors
    if cwd != ".":
        return errors  # run elsewhere (another workspace): only its packages checked
    if sub == "mutants":
        for pattern in opts["file"]:
            if not glob.glob(os.path.join(ROOT, pattern), recursive=True):
                errors.append(f"-f {pattern} matches no file")
        owners = {owner_of(f, packages) for f in opts["file"]} or {"keyed-backoff"}
        for name in option_values(rest, "--test"):
            if not any(t == ("test", name) for o in owners for t in kinds(packages[o])):
                errors.append(f"no test {name} in {', '.join(sorted(owners))}")
        return errors
    selected = opts["p"] or (list(packages) if "--workspace" in flags else defaults)
    named = [f for spec in opts["features"] for f in re.split(r"[ ,]+", spec) if f]
    plain = [f for f in named if "/" not in f]
    for f in named:
        if "/" in f:
            pkg, feat = f.split("/", 1)
            if pkg in packages and feat not in packages[pkg]["features"]:
                errors.append(f"no feature {feat} in {pkg}")
    for f in plain:
        if not any(f in packages[p]["features"] for p in selected):
            errors.append(f"no feature {f} in {', '.join(selected)}")
    for kind in ("example", "bench", "test", "bin"):
        for name in opts[kind]:
            owners = [p for p in selected if (kind, name) in kinds(packages[p])]
            if not owners:
                hint = [p for p in packages if (kind, name) in kinds(packages[p])]
                errors.append(f"no {kind} {name} in {', '.join(selected)}"
                              + (f" (it is in {hint[0]}: add -p {hint[0]})" if hint else ""))
                continue
            for p in owners:
                own = [f.split("/", 1)[1] for f in named if f.startswith(p + "/")]
                on = enabled_features(packages[p], plain + own, "--all-features" in flags,
                                      "--no-default-features" in flags)
                req = next(r for k, n, r in packages[p]["targets"] if (k, n) == (kind, name))
                missing = [r for r in req if r not in on]
                if missing:
                    errors.append(f"{kind} {name} of {p} needs --features {','.join(missing)}")
    return errors


def kinds(pkg):
    return {(k, n) for k, n, _ in pkg["targets"]}


def option_values(args, flag):
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def owner_of(path, packages):
    best = "keyed-backoff"
    for name, p in packages.items():
        d = p["dir"]
        if d != "." and path.startswith(d + "/") and len(d) > len(packages[best]["dir"]):
            best = name
    return best


# -- checking paths ---------------------------------------------------------

def exists(base, path):
    full = os.path.normpath(os.path.join(ROOT, base, path))
    if any(c in path for c in "*{"):
        pattern = re.sub(r"\{[^}]*\}", "*", full)
        return bool(glob.glob(pattern, recursive=True))
    return os.path.exists(full)


def path_errors(page, text, packages):
    here = os.path.dirname(page) or "."
    crate = next((p["dir"] for p in packages.values()
                  if p["dir"] != "." and page == p["dir"] + "/README.md"), None)
    if page == "README.md" or page.startswith("docs/"):
        bases = ["."]
    else:
        bases = [crate or here, "."]
    errors = []
    cited = set()
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:|^#|^mailto:", target):
            continue
        target = target.split("#")[0]
        if target and not exists(here, target):
            errors.append(f"links to {target}, which does not exist (relative to {here}/)")
    for path in REPO_URL.findall(text):
        if not exists(".", path):
            errors.append(f"links to the repository's {path}, which does not exist")
    # Link targets were checked above, relative to the page.
    for token in PATH_TOKEN.findall(LINK.sub("]()", text)):
        token = re.split(r":\d", token)[0].rstrip(".,;:")
        if token in cited or (page, token) in EXTERNAL or "..." in token:
            continue
        cited.add(token)
        if not any(exists(b, token) for b in bases):
            errors.append(f"cites {token}, which does not exist")
    return errors


def main():
    packages, defaults = metadata()
    failures, n_cmds, n_pages = [], 0, 0
    for page in pages():
        n_pages += 1
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        for line in commands(text):
            for cwd, words in segments(line):
                n_cmds += 1
                for e in check_cargo(cwd, words, packages, defaults):
                    failures.append(f"{page}: `{' '.join(words)}`: {e}")
        failures += [f"{page}: {e}" for e in path_errors(page, text, packages)]
    if failures:
        print("\n".join(failures))
        print(f"{len(failures)} commands or paths in the docs do not hold as printed")
        sys.exit(1)
    print(f"{n_cmds} cargo commands and every cited path in {n_pages} pages hold as printed")


if __name__ == "__main__":
    main()
