"""Prints field.sh's table: the crate's speed over each other target's.

Input lines are `<round> RESULT <target> <workload> <keys> <threads> <ns/op>`
and `<round> KEYS <keys> <key bytes> <fingerprint>`. A ratio is crate / other
in speed, that is the other's ns/op divided by the crate's, as the median
over rounds of the round's own ratio: 1.00x or more, the crate is at least
as fast.
"""

import statistics
import sys
from collections import defaultdict

OTHERS = ["client-go", "rwlock-port", "tuned-port", "governor"]
NAMES = {"next": "`next`", "mix": "90 % check, 10 % `next`", "read": "`is_in_backoff_since_update`"}


def main(path):
    times = defaultdict(dict)  # (workload, keys, threads, target) -> {round: ns}
    prints = defaultdict(set)
    for line in open(path):
        f = line.split()
        if f[1] == "KEYS":
            prints[f[2]].add((f[3], f[4]))
        elif f[1] == "RESULT":
            times[(f[3], int(f[4]), int(f[5]), f[2])][f[0]] = float(f[6])
    for keys, seen in sorted(prints.items()):
        if len(seen) != 1:
            sys.exit(f"the Go and Rust programs built different keys or picks at {keys} keys: {seen}")
    for threads in (1, 2):
        clock = "CPU time" if threads == 1 else "wall time, combined"
        print(f"\n{threads} thread{'s' if threads > 1 else ''} ({clock}): crate ns/op and crate / other in speed (other's ns/op / crate's; above 1.00x the crate is faster)")
        print("| workload | keys | crate ns/op | " + " | ".join(OTHERS) + " |")
        print("|---|---:|---:|" + "---:|" * len(OTHERS))
        for workload in ("next", "mix", "read"):
            for keys in (1000, 100000):
                mine = times.get((workload, keys, threads, "crate"), {})
                if not mine:
                    continue
                cells = []
                for other in OTHERS:
                    theirs = times.get((workload, keys, threads, other), {})
                    ratios = [theirs[r] / mine[r] for r in mine if r in theirs]
                    cells.append(f"{statistics.median(ratios):.2f}x" if ratios else "-")
                crate_ns = statistics.median(mine.values())
                print(f"| {NAMES[workload]} | {keys:,} | {crate_ns:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
