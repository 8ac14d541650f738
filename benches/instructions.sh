#!/usr/bin/env bash
# Instructions per operation at 1,000 keys, from callgrind: each pair runs
# with N and 2N operations and the difference is divided by N.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -q -p keyed-backoff-benches --bench instructions --no-run 2>/dev/null
bin=$(ls -t target/release/deps/instructions-* | grep -v '\.d$' | head -1)
N=${N:-200000}
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '%-14s %-8s %10s %10s\n' op target instr/op ratio
for op in next since_update; do
  floor=""
  for target in floor crate crate16 rwlock dashfloor; do
    a=$(count "$target" "$op" "$N")
    b=$(count "$target" "$op" $((2 * N)))
    per=$(( (b - a) / N ))
    [ -z "$floor" ] && floor=$per
    printf '%-14s %-8s %10d %10s\n' "$op" "$target" "$per" "$(python3 -c "print(f'{$per/$floor:.2f}')")"
  done
done
