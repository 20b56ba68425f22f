#!/usr/bin/env bash
# `load fanout` against a fresh `serve-ref --group-commit` by one or more vaultbench builds:
# the generator's peak RSS (`/usr/bin/time -v`, enrolment included), the server's peak
# (`VmHWM`), the deliveries, and the command's own line of per-device figures. The figures
# of the book's scale chapter ("How much one generator holds") come from it.
#
#   scripts/fanout-rss.sh VB [VB...]
#
# Env: WAITERS (default 2000), PUSHERS (4), POSTS (5), INTERVAL (1s), WAIT (30s),
#      WORK (default a new dir under the system temp dir; kept).
# Needs GNU time (`apt-get install time`) and an open-file limit above twice the waiters.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/fanout-rss.sh VB [VB...]" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "fanout-rss: needs GNU time (apt-get install time)" >&2; exit 2; }
WAITERS=${WAITERS:-2000}
PUSHERS=${PUSHERS:-4}
POSTS=${POSTS:-5}
INTERVAL=${INTERVAL:-1s}
WAIT=${WAIT:-30s}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/fanout-rss.XXXXXX")}
echo "# fanout-rss $(date -u +%FT%TZ) on $(nproc) CPUs; $WAITERS waiters, $PUSHERS pushers x $POSTS posts; ulimit -n $(ulimit -n); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
for vb in "$@"; do
  i=$((i + 1))
  dir="$WORK/run-$i"
  rm -rf "$dir"; mkdir -p "$dir"
  "$vb" serve-ref --group-commit --data "$dir/data" >"$dir/server.out" 2>"$dir/server.err" &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    [ -s "$dir/server.out" ] && break
    sleep 0.1
  done
  url=$(grep -o 'http://[0-9.:]*' "$dir/server.out" | head -1)
  [ -n "$url" ] || { echo "serve-ref by $vb printed no address" >&2; exit 1; }
  /usr/bin/time -v -o "$dir/time.txt" "$vb" load fanout --url "$url" \
    --setup-token-file "$dir/data/setup-token" --state "$dir/state.json" \
    --waiters "$WAITERS" --pushers "$PUSHERS" --posts "$POSTS" --interval "$INTERVAL" \
    --wait "$WAIT" --server-pid "$server" --work-dir "$dir" >"$dir/fanout.txt" 2>&1 \
    || { echo "fanout by $vb failed:"; tail -3 "$dir/fanout.txt"; }
  hwm=$(awk '/VmHWM/{printf "%.1f", $2/1024}' "/proc/$server/status")
  kill "$server"; wait "$server" 2>/dev/null || true
  rss=$(awk -F': ' '/Maximum resident set size/{printf "%.1f", $2/1024}' "$dir/time.txt")
  cpu=$(awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.2f", u+s}' "$dir/time.txt")
  echo "$vb: generator peak RSS $rss MiB (CPU $cpu s), server peak RSS $hwm MiB"
  grep -E "deliveries|per 1,000|per held|enrol" "$dir/fanout.txt" | sed 's/^/  /'
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg); work dir $WORK"
