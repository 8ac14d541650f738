#!/usr/bin/env python3
"""Build and run every published crate's README examples as a reader who
copies its `[dependencies]` block would: nothing else on hand.

Each README must hold a ```toml block with a `[dependencies]` table (what
its examples need, the crate itself first). For each, this script makes a
scratch crate outside the repository (so the repository's
`.cargo/config.toml`, which names a Kubernetes version for k8s-openapi,
does not apply) whose only dependencies are that table, with the
workspace's own crates taken from their paths (same features) and checked
to be at the version the README names. The scratch crate's library is the
README itself (`#![doc = include_str!(..)]`), so `cargo test --doc` builds
and runs its ```rust blocks exactly as rustdoc would: hidden `# ` lines,
`no_run` built only, `ignore` skipped. Builds share the repository's target
directory; the repository's Cargo.lock seeds each scratch crate's, so
dependencies resolve to the versions the workspace builds.

Usage: python3 .ci/readme_examples.py [README...]   (default: every published crate's)
"""

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
# README -> the crate it presents; the workspace crates a README may name.
READMES = {
    "README.md": "keyed-backoff",
    "crates/fair-admission/README.md": "fair-admission",
    "crates/keyed-backoff-redis/README.md": "keyed-backoff-redis",
    "crates/keyed-backoff-kube/README.md": "keyed-backoff-kube",
    "crates/keyed-backoff-tower/README.md": "keyed-backoff-tower",
}
WORKSPACE_CRATES = {
    "keyed-backoff": ".",
    "fair-admission": "crates/fair-admission",
    "keyed-backoff-redis": "crates/keyed-backoff-redis",
    "keyed-backoff-kube": "crates/keyed-backoff-kube",
    "keyed-backoff-tower": "crates/keyed-backoff-tower",
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


def dependencies_block(readme, text):
    """The README's `[dependencies]` table, parsed."""
    for block in re.findall(r"^```toml\n(.*?)^```", text, re.S | re.M):
        parsed = tomllib.loads(block)
        if "dependencies" in parsed:
            return parsed["dependencies"]
    raise SystemExit(f"{readme}: no ```toml block with a [dependencies] table")


def crate_version(name):
    with open(os.path.join(ROOT, WORKSPACE_CRATES[name], "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["package"]["version"]


def compatible(requirement, version):
    """Whether a caret requirement such as "0.1" admits `version`."""
    req = [int(x) for x in requirement.lstrip("^").split(".")]
    ver = [int(x) for x in version.split(".")]
    first = next((i for i, x in enumerate(req) if x != 0), len(req) - 1)
    return ver[:first + 1] == req[:first + 1] and ver[:len(req)] >= req


def scratch_manifest(readme, crate, deps):
    errors, lines = [], []
    if next(iter(deps), None) != crate:
        errors.append(f"{readme}: its [dependencies] block should name {crate} first")
    for name, spec in deps.items():
        if name in WORKSPACE_CRATES:
            spec = {"version": spec} if isinstance(spec, str) else dict(spec)
            have = crate_version(name)
            if not compatible(spec.get("version", "*").replace("*", "0"), have):
                errors.append(f"{readme}: {name} = \"{spec.get('version')}\" does not admit "
                              f"the crate's version {have}")
            spec.pop("version", None)
            spec["path"] = os.path.join(ROOT, WORKSPACE_CRATES[name])
        lines.append(f"{name} = {toml_value(spec)}")
    slug = crate.replace("-", "_")
    manifest = (f'[package]\nname = "readme-{crate}"\nversion = "0.0.0"\nedition = "2024"\n'
                f'publish = false\n\n[lib]\nname = "readme_{slug}"\npath = "lib.rs"\n\n'
                f'[dependencies]\n' + "\n".join(lines) + "\n\n[workspace]\n")
    return manifest, errors


def write_if_changed(path, text):
    if not os.path.exists(path) or open(path).read() != text:
        with open(path, "w") as f:
            f.write(text)


def main():
    readmes = sys.argv[1:] or list(READMES)
    target = os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))
    # One scratch directory per checkout, kept between runs (cargo rebuilds
    # only what changed).
    tag = hashlib.sha1(ROOT.encode()).hexdigest()[:8]
    base = os.path.join(tempfile.gettempdir(), f"keyed-backoff-readme-examples-{tag}")
    env = {k: v for k, v in os.environ.items() if k != "K8S_OPENAPI_ENABLED_VERSION"}
    env["CARGO_TARGET_DIR"] = target
    failed = []
    for readme in readmes:
        crate = READMES[readme]
        text = open(os.path.join(ROOT, readme), encoding="utf-8").read()
        manifest, errors = scratch_manifest(readme, crate, dependencies_block(readme, text))
        if errors:
            print("\n".join(errors))
            failed.append(readme)
            continue
        scratch = os.path.join(base, crate)
        os.makedirs(scratch, exist_ok=True)
        write_if_changed(os.path.join(scratch, "Cargo.toml"), manifest)
        write_if_changed(os.path.join(scratch, "README.md"), text)
        write_if_changed(os.path.join(scratch, "lib.rs"),
                         '#![doc = include_str!("README.md")]\n')
        if not os.path.exists(os.path.join(scratch, "Cargo.lock")):
            shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(scratch, "Cargo.lock"))
        start = time.monotonic()
        print(f"== {readme}: its examples with only its [dependencies]", flush=True)
        run = subprocess.run(["cargo", "test", "--doc", "--quiet"], cwd=scratch, env=env)
        print(f"== {readme}: {'ok' if run.returncode == 0 else 'FAILED'} "
              f"({time.monotonic() - start:.0f} s)", flush=True)
        if run.returncode != 0:
            failed.append(readme)
    if failed:
        print(f"README examples that fail with only their [dependencies]: {', '.join(failed)}")
        sys.exit(1)
    print(f"{len(readmes)} READMEs' examples build and run with only their [dependencies] blocks")


if __name__ == "__main__":
    main()
