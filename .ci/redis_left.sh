#!/usr/bin/env bash
# Fails if a test suite left a redis-server or a server's temporary
# directory behind: `snapshot FILE` records what runs now, `check FILE`
# compares against it, waiting up to 10 s (a test binary's servers are
# killed by their watchdogs just after the binary exits). The machine's
# own server on port 6379 is not counted.
set -euo pipefail
servers() { pgrep -a -x redis-server | grep -v -E '[:.]6379( |$)' | sed 's/^[0-9]* //' || true; }
count() { echo "$(servers | grep -c . || true) $(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'keyed-backoff-redis-*' | wc -l)"; }
case "${1:-}" in
  snapshot) count > "$2" ;;
  check)
    read -r servers_before dirs_before < "$2"
    for _ in $(seq 100); do
      read -r servers_now dirs_now <<< "$(count)"
      if [ "$servers_now" -le "$servers_before" ] && [ "$dirs_now" -le "$dirs_before" ]; then
        echo "no redis-server or server directory left behind ($servers_now servers, $dirs_now directories; $servers_before and $dirs_before before)"
        exit 0
      fi
      sleep 0.1
    done
    before="$servers_before $dirs_before"
    echo "a suite left redis-servers or their directories behind (servers, directories: before $before, now $(count)):" >&2
    servers >&2
    find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'keyed-backoff-redis-*' >&2
    exit 1 ;;
  *) echo "usage: $0 snapshot|check FILE" >&2; exit 2 ;;
esac
