#!/usr/bin/env python3
"""Turns criterion's saved results (target/criterion) into the markdown
tables of docs/benchmarks.md: per benchmark the median and the min-max of
the per-iteration sample means, and the ratio against the floor and the
RwLock<HashMap> baseline measured in the same run.

Usage: python3 benches/report.py [target/criterion]
"""
import json
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"


def load(*parts):
    """Median and min-max of one benchmark, from its criterion directory."""
    base = os.path.join(root, *parts, "new")
    try:
        est = json.load(open(os.path.join(base, "estimates.json")))
        sample = json.load(open(os.path.join(base, "sample.json")))
    except FileNotFoundError:
        return None
    per_iter = [t / n for t, n in zip(sample["times"], sample["iters"])]
    return est["median"]["point_estimate"], min(per_iter), max(per_iter)


def fmt(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"


def table(group, benches, variants):
    rows = [f"| operation | " + " | ".join(variants) + " | crate ÷ floor | crate ÷ rwlock |",
            "|---|" + "---:|" * (len(variants) + 2)]
    for bench in benches:
        got = {v: load(group, f"{bench}_{v}") for v in variants}
        if not any(got.values()):
            continue
        cells = [f"{fmt(got[v][0])} ({fmt(got[v][1])}–{fmt(got[v][2])})" if got[v] else "—" for v in variants]
        crate = got.get("crate")
        floor = got.get("floor")
        rw = got.get("rwlock")
        r_floor = f"{crate[0] / floor[0]:.2f}×" if crate and floor else "—"
        r_rw = f"{crate[0] / rw[0]:.2f}×" if crate and rw else "—"
        rows.append(f"| `{bench}` | " + " | ".join(cells) + f" | {r_floor} | {r_rw} |")
    return "\n".join(rows)


ops = ["next", "get", "is_in_backoff_since_update", "is_in_backoff_since", "mix_90r_10w"]
single = ["crate", "crate_16shards", "floor", "rwlock"]
double = ["crate", "crate_16shards", "rwlock"]
for group, benches, variants in [
    ("ops_1k", ops, single),
    ("ops_1k_2threads", ops, double),
    ("ops_1m", ops, single),
    ("ops_1m_2threads", ops, double),
    ("ops_1k_stdclock", ["next", "is_in_backoff_since"], ["crate", "crate_16shards", "floor", "rwlock"]),
    ("hot_8keys_2threads", ["next", "mix_90r_10w"], ["crate", "crate_16shards", "rwlock"]),
]:
    print(f"### {group}\n")
    print(table(group, benches, variants))
    print()

print("### gc_1m_half_expired\n")
print("| target | median (min–max) | ÷ floor |\n|---|---:|---:|")
floor = load("gc_1m_half_expired", "floor")
for t in ["crate", "floor", "rwlock"]:
    m = load("gc_1m_half_expired", t)
    if m:
        print(f"| {t} | {fmt(m[0])} ({fmt(m[1])}–{fmt(m[2])}) | {m[0] / floor[0]:.2f}× |")
print()
print("### clock_now\n")
print("| clock | median (min–max) |\n|---|---:|")
for c in ["std", "quanta", "system", "mock"]:
    m = load(f"clock_now_{c}")
    if m:
        print(f"| {c} | {fmt(m[0])} ({fmt(m[1])}–{fmt(m[2])}) |")
