#!/usr/bin/env python3
"""Runs every published crate's doc tests (its README's examples among them)
as a user who depends on that crate alone would build them.

`cargo test --doc` hands doc tests every dev-dependency of the crate, and
turns on the features those dev-dependencies ask of shared dependencies
(tokio's `test-util`, say): an example can pass there and fail to compile
for a user. So this script copies the repository's files (tracked and
untracked, not ignored) into a scratch workspace, replaces each published
crate's dev-dependencies with what a user's application has beside it,
tokio for `#[tokio::main]`:

    tokio = { version = "1", features = ["macros", "rt", "rt-multi-thread", "time", "test-util"] }

(`test-util` for the examples that run on tokio's paused clock, as a user's
tests do), and for the kube crate what an operator has anyway (kube,
k8s-openapi, serde, schemars) and the Redis store its README's
`[dependencies]` names for a shared store, and for fair-admission tower,

and runs `cargo test --doc -p CRATE --all-features` there, one crate at a
time (so no crate's features leak into another's). Crates a companion
re-exports (`redis`, `keyed_backoff`) are reached through the re-export,
as a user would. k8s-openapi's Kubernetes version comes from the
repository's `.cargo/config.toml`, as for any build of the kube crate.

The scratch workspace lives under `$CARGO_TARGET_DIR/doctests-alone`
(default `target/doctests-alone`) and builds into the repository's target
directory: only what the users' features change is built again.

Usage: python3 .ci/doctests_alone.py [CRATE...]   (default: every published crate)
"""

import os
import shutil
import subprocess
import sys
import time
import tomllib

CRATES = {
    "keyed-backoff": ".",
    "fair-admission": "crates/fair-admission",
    "keyed-backoff-redis": "crates/keyed-backoff-redis",
    "keyed-backoff-kube": "crates/keyed-backoff-kube",
    "keyed-backoff-tower": "crates/keyed-backoff-tower",
    "keyed-backoff-outage": "crates/keyed-backoff-outage",
}
USER_DEV_DEPENDENCIES = (
    '[dev-dependencies]\n'
    'tokio = { version = "1", features = ["macros", "rt", "rt-multi-thread", "time", "test-util"] }\n'
)
# What a user of a crate has beside it anyway, kept from the crate's own
# dev-dependencies: an operator depends on kube (with its derive and
# runtime), k8s-openapi, serde and schemars to write a custom resource,
# and keyed-backoff-redis where its replicas share a store (the README's
# `[dependencies]` names it); a server that stacks fair admission's layer
# has tower.
USER_ALSO_HAS = {
    "fair-admission": ["tower"],
    "keyed-backoff-kube": ["kube", "k8s-openapi", "serde", "serde_json", "schemars", "futures",
                           "keyed-backoff-redis"],
}


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


def repo_files(root):
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(root, f))]


def sync(root, files, dest, replaced):
    """Mirrors `files` into `dest`, keeping modification times, so that cargo
    rebuilds only what changed since the last run; the files in `replaced`
    get the text given there instead."""
    wanted = set(files)
    for f in files:
        src, dst = os.path.join(root, f), os.path.join(dest, f)
        if f in replaced:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.exists(dst) or open(dst).read() != replaced[f]:
                with open(dst, "w") as out:
                    out.write(replaced[f])
            continue
        s = os.stat(src)
        try:
            d = os.stat(dst)
            if d.st_size == s.st_size and d.st_mtime_ns == s.st_mtime_ns:
                continue
        except FileNotFoundError:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    for dirpath, _, names in os.walk(dest):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, dest)
            if rel not in wanted and rel != "Cargo.lock":
                os.remove(path)


def is_dev_table(name):
    parts = [p.strip().strip('"') for p in name.split(".")]
    if parts[0] in ("dev-dependencies", "dev_dependencies"):
        return True
    # [target.'cfg(..)'.dev-dependencies] and [target.x.dev-dependencies.foo]
    return parts[0] == "target" and any(p in ("dev-dependencies", "dev_dependencies") for p in parts[2:])


def without_dev_dependencies(manifest):
    """The manifest's text without its dev-dependency tables."""
    kept, skipping = [], False
    for line in manifest.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            skipping = is_dev_table(stripped[1:stripped.index("]")])
        elif stripped.startswith("[["):
            skipping = False
        if not skipping:
            kept.append(line)
    return "".join(kept)


def strip_dev(parsed):
    parsed = dict(parsed)
    parsed.pop("dev-dependencies", None)
    parsed.pop("dev_dependencies", None)
    if "target" in parsed:
        parsed["target"] = {
            cfg: {k: v for k, v in table.items() if k not in ("dev-dependencies", "dev_dependencies")}
            for cfg, table in parsed["target"].items()}
    return parsed


def user_manifest(manifest, crate):
    """`manifest` with the dev-dependencies a user's application has. Checked:
    everything else must parse to exactly what it was."""
    before = tomllib.loads(manifest)
    also = {name: spec for name, spec in before.get("dev-dependencies", {}).items()
            if name in USER_ALSO_HAS.get(crate, [])}
    extra = "".join(f"{name} = {toml_value(spec)}\n" for name, spec in also.items())
    text = without_dev_dependencies(manifest).rstrip("\n") + "\n\n" + USER_DEV_DEPENDENCIES + extra
    after = tomllib.loads(text)
    if strip_dev(before) != strip_dev(after) or after["dev-dependencies"].keys() != {"tokio", *also}:
        raise SystemExit("doctests_alone.py: could not replace the dev-dependencies of a manifest "
                         "without changing the rest; rewrite it with one [dev-dependencies] table")
    return text


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = sys.argv[1:] or list(CRATES)
    unknown = [c for c in crates if c not in CRATES]
    if unknown:
        raise SystemExit(f"unknown crates {unknown}; published: {list(CRATES)}")
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    base = os.path.join(os.path.abspath(target), "doctests-alone")
    scratch = os.path.join(base, "workspace")
    manifests = {}
    for crate, path in CRATES.items():
        with open(os.path.join(root, path, "Cargo.toml")) as f:
            manifests[os.path.normpath(os.path.join(path, "Cargo.toml"))] = user_manifest(f.read(), crate)
    sync(root, repo_files(root), scratch, manifests)
    # The repository's own target directory: dependencies built with the same
    # features are reused, those a dev-dependency changed are built once more.
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.abspath(target))
    failed = []
    for crate in crates:
        start = time.monotonic()
        print(f"== doc tests of {crate} with only it and tokio as dependencies", flush=True)
        run = subprocess.run(["cargo", "test", "--doc", "-p", crate, "--all-features"],
                             cwd=scratch, env=env)
        print(f"== {crate}: {'ok' if run.returncode == 0 else 'FAILED'} "
              f"({time.monotonic() - start:.0f} s)", flush=True)
        if run.returncode != 0:
            failed.append(crate)
    if failed:
        print(f"doc tests that fail for a user depending on the crate alone: {', '.join(failed)}")
        sys.exit(1)
    print(f"{len(crates)} crates' doc tests pass with only the crate (and tokio) as dependencies")


if __name__ == "__main__":
    main()
