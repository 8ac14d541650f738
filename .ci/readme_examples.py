#!/usr/bin/env python3
"""Build and run the examples of every published crate's README, and of the
pages of docs/, exactly as they are displayed, as a reader who copies the
page's `[dependencies]` block would: nothing else on hand.

Displayed text only. GitHub and crates.io show every line of a code block,
rustdoc's hidden lines (`# ` at the start of a line, or `#` alone) included,
and a reader who pastes one gets "expected one of `!` or `[`, found `#`".
So no README.md of the workspace and no page of docs/ may hold such a line
in a Rust block: a block whose info string says `rust`, or, in a published
crate's README (which rustdoc also compiles, through `include_str!`), a
block with no info string or with only rustdoc's attributes.

Every Rust block not marked `ignore` must be a complete program as shown
(an `fn main`). Each is written unchanged as an example of a scratch crate,
built (a warning fails it), and run, unless marked `no_run`: those are
built only (an example that needs a running service, a Redis or a
Kubernetes cluster, is `no_run`). `ignore` blocks are fragments of a
complete program the page names; they are neither built nor run. No other
attribute is accepted.

Dependencies: each published crate's README must hold a ```toml block with
a `[dependencies]` table (what its examples need, the crate itself first).
A page of docs/ uses its own such block if it has one, else the root
README's (the core alone). The scratch crate lives outside the repository
(so the repository's `.cargo/config.toml`, which names a Kubernetes version
for k8s-openapi, does not apply); its only dependencies are that table,
with the workspace's own crates taken from their paths (same features) and
checked to be at the version the page names. Builds share the repository's
target directory; the repository's Cargo.lock seeds each scratch crate's,
so dependencies resolve to the versions the workspace builds.

Usage: python3 .ci/readme_examples.py [PAGE...]
       (default: every published crate's README and every page of docs/)
"""

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# README -> the crate it presents.
READMES = {
    "README.md": "keyed-backoff",
    "crates/fair-admission/README.md": "fair-admission",
    "crates/keyed-backoff-redis/README.md": "keyed-backoff-redis",
    "crates/keyed-backoff-kube/README.md": "keyed-backoff-kube",
    "crates/keyed-backoff-tower/README.md": "keyed-backoff-tower",
    "crates/keyed-backoff-outage/README.md": "keyed-backoff-outage",
}
# The workspace crates a page may name.
WORKSPACE_CRATES = {
    "keyed-backoff": ".",
    "fair-admission": "crates/fair-admission",
    "keyed-backoff-redis": "crates/keyed-backoff-redis",
    "keyed-backoff-kube": "crates/keyed-backoff-kube",
    "keyed-backoff-tower": "crates/keyed-backoff-tower",
    "keyed-backoff-outage": "crates/keyed-backoff-outage",
}
# rustdoc's attributes of a code block, and those this script can honour.
RUSTDOC_ATTRIBUTES = re.compile(r"^(rust|ignore(-.*)?|no_run|should_panic|compile_fail|"
                                r"test_harness|standalone_crate|edition\d+|E\d+)$")
HONOURED = {"rust", "ignore", "no_run"}
RUN_TIMEOUT = 300


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return str(v)


def fenced_blocks(text):
    """(first line number, info string tokens, lines) of each fenced block,
    indented ones (in a list item) included, their indentation removed."""
    blocks, cur = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^( *)```(.*)$", line)
        if cur is None:
            if m:
                tokens = [t for t in re.split(r"[,\s]+", m.group(2).strip()) if t]
                cur = (n + 1, tokens, len(m.group(1)), [])
            continue
        if m and not m.group(2).strip():
            blocks.append((cur[0], cur[1], cur[3]))
            cur = None
            continue
        indent = cur[2]
        cur[3].append(line[indent:] if line[:indent].strip() == "" else line)
    return blocks


def is_rust(tokens, rustdoc_page):
    """Whether a block is Rust: `rust` said, or, on a page rustdoc compiles,
    what rustdoc takes for Rust (no info string, or only its attributes)."""
    if "rust" in tokens:
        return True
    return rustdoc_page and all(RUSTDOC_ATTRIBUTES.match(t) for t in tokens)


def hidden_lines(lines):
    """The lines rustdoc would hide (`# ...`, `#`) or unescape (`##...`)."""
    out = []
    for i, line in enumerate(lines):
        s = line.strip()
        if s == "#" or s.startswith("# ") or s.startswith("#\t") or s.startswith("##"):
            out.append((i, line))
    return out


def dependencies_block(text):
    """The page's `[dependencies]` table, parsed; None if it has none."""
    for _, tokens, lines in fenced_blocks(text):
        if tokens[:1] == ["toml"]:
            parsed = tomllib.loads("\n".join(lines) + "\n")
            if "dependencies" in parsed:
                return parsed["dependencies"]
    return None


def crate_version(name):
    with open(os.path.join(ROOT, WORKSPACE_CRATES[name], "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["package"]["version"]


def compatible(requirement, version):
    """Whether a caret requirement such as "0.1" admits `version`."""
    req = [int(x) for x in requirement.lstrip("^").split(".")]
    ver = [int(x) for x in version.split(".")]
    first = next((i for i, x in enumerate(req) if x != 0), len(req) - 1)
    return ver[:first + 1] == req[:first + 1] and ver[:len(req)] >= req


def scratch_manifest(page, package, crate, deps):
    errors, lines = [], []
    if next(iter(deps), None) != crate:
        errors.append(f"{page}: its [dependencies] block should name {crate} first")
    for name, spec in deps.items():
        if name in WORKSPACE_CRATES:
            spec = {"version": spec} if isinstance(spec, str) else dict(spec)
            have = crate_version(name)
            if not compatible(spec.get("version", "*").replace("*", "0"), have):
                errors.append(f"{page}: {name} = \"{spec.get('version')}\" does not admit "
                              f"the crate's version {have}")
            spec.pop("version", None)
            spec["path"] = os.path.join(ROOT, WORKSPACE_CRATES[name])
        lines.append(f"{name} = {toml_value(spec)}")
    # A warning in an example fails it: what readers copy should be clean.
    manifest = (f'[package]\nname = "{package}"\nversion = "0.0.0"\nedition = "2024"\n'
                f'publish = false\n\n[dependencies]\n' + "\n".join(lines) + "\n\n"
                f'[lints.rust]\nwarnings = "deny"\n\n[workspace]\n')
    return manifest, errors


def write_if_changed(path, text):
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)


def git_readmes():
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout.decode()
    return sorted(f for f in out.split("\0")
                  if (f == "README.md" or f.endswith("/README.md"))
                  and not f.startswith(("target/", "fuzz/target/")))


def doc_pages():
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def check_hidden(page, text):
    """Errors for rustdoc's hidden lines in the page's Rust blocks."""
    errors = []
    for start, tokens, lines in fenced_blocks(text):
        if is_rust(tokens, page in READMES):
            for i, line in hidden_lines(lines):
                errors.append(f"{page}:{start + i}: rustdoc's hidden line, shown to readers "
                              f"as is: {line.strip()}")
    return errors


def examples_of(page, text):
    """(name, line, lines, run) of each example to build; errors."""
    slug = re.sub(r"[^a-z0-9]+", "_", page.lower().removesuffix(".md")).strip("_")
    out, errors = [], []
    for start, tokens, lines in fenced_blocks(text):
        if not is_rust(tokens, page in READMES):
            continue
        unknown = [t for t in tokens if t not in HONOURED]
        if unknown:
            errors.append(f"{page}:{start}: attribute {', '.join(unknown)}: this check "
                          f"honours only {', '.join(sorted(HONOURED))}")
            continue
        if "ignore" in tokens:
            continue
        code = "\n".join(lines) + "\n"
        if not re.search(r"\bfn\s+main\s*\(", code):
            errors.append(f"{page}:{start}: not a complete program as shown (no `fn main`)")
            continue
        out.append((f"{slug}_l{start}", start, code, "no_run" not in tokens))
    return out, errors


def main():
    pages = sys.argv[1:] or list(READMES) + doc_pages()
    failed = []

    # No rustdoc hidden line in any README of the workspace or page of docs/.
    for page in sorted(set(git_readmes()) | set(doc_pages())):
        errors = check_hidden(page, open(os.path.join(ROOT, page), encoding="utf-8").read())
        if errors:
            print("\n".join(errors))
            failed.append(page)

    target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
    # One scratch directory per checkout, kept between runs (cargo rebuilds
    # only what changed).
    tag = hashlib.sha1(ROOT.encode()).hexdigest()[:8]
    base = os.path.join(tempfile.gettempdir(), f"keyed-backoff-page-examples-{tag}")
    env = {k: v for k, v in os.environ.items() if k != "K8S_OPENAPI_ENABLED_VERSION"}
    env["CARGO_TARGET_DIR"] = target
    root_text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    n_built = n_run = 0
    for page in pages:
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        examples, errors = examples_of(page, text)
        if not examples and not errors:
            continue
        crate = READMES.get(page, "keyed-backoff")
        deps = dependencies_block(text)
        if deps is None and page not in READMES:
            deps = dependencies_block(root_text)
        if deps is None:
            errors.append(f"{page}: no ```toml block with a [dependencies] table")
        else:
            package = "page-" + re.sub(r"[^a-z0-9]+", "-", page.lower().removesuffix(".md")).strip("-")
            manifest, more = scratch_manifest(page, package, crate, deps)
            errors += more
        if errors:
            print("\n".join(errors))
            failed.append(page)
            continue
        scratch = os.path.join(base, package)
        os.makedirs(os.path.join(scratch, "examples"), exist_ok=True)
        os.makedirs(os.path.join(scratch, "src"), exist_ok=True)
        write_if_changed(os.path.join(scratch, "Cargo.toml"), manifest)
        # Cargo wants a library or a binary beside the examples.
        write_if_changed(os.path.join(scratch, "src", "lib.rs"), "")
        wanted = {name + ".rs" for name, _, _, _ in examples}
        for old in os.listdir(os.path.join(scratch, "examples")):
            if old not in wanted:
                os.remove(os.path.join(scratch, "examples", old))
        for name, _, code, _ in examples:
            write_if_changed(os.path.join(scratch, "examples", name + ".rs"), code)
        if not os.path.exists(os.path.join(scratch, "Cargo.lock")):
            shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(scratch, "Cargo.lock"))
        start = time.monotonic()
        print(f"== {page}: {len(examples)} example{'s' if len(examples) > 1 else ''} as shown, "
              f"with only its [dependencies]", flush=True)
        build = subprocess.run(["cargo", "build", "--examples", "--quiet"], cwd=scratch, env=env)
        ok = build.returncode == 0
        n_built += len(examples) if ok else 0
        for name, line, _, run in examples if ok else []:
            if not run:
                continue
            binary = os.path.join(target, "debug", "examples", name)
            try:
                ran = subprocess.run([binary], cwd=scratch, env=env, capture_output=True,
                                     timeout=RUN_TIMEOUT)
                code, output = ran.returncode, ran.stdout + ran.stderr
            except subprocess.TimeoutExpired as e:
                code = f"nothing: no end within {RUN_TIMEOUT} s"
                output = (e.stdout or b"") + (e.stderr or b"")
            n_run += 1
            if code != 0:
                ok = False
                print(f"{page}:{line}: the example exits with {code}\n"
                      f"{output.decode(errors='replace')}")
        print(f"== {page}: {'ok' if ok else 'FAILED'} ({time.monotonic() - start:.0f} s)",
              flush=True)
        if not ok:
            failed.append(page)
    if failed:
        print(f"pages whose examples do not hold as shown: {', '.join(sorted(set(failed)))}")
        sys.exit(1)
    print(f"{n_built} examples built as shown ({n_run} run) with only their pages' "
          f"[dependencies]; no rustdoc hidden line in any README or page of docs/")


if __name__ == "__main__":
    main()
