#!/usr/bin/env bash
# `load pull --protocol couchdb` of an honest pouchdb-server database of a large vault
# (default `vault100k`), by one or more vaultbench builds: each pull's wall time and peak RSS
# (`/usr/bin/time -v`), and whether the pulled tree is the vault, byte for byte. The figures
# in the book's measured chapter ("A CouchDB pull of vault100k") come from it.
#
#   scripts/couch-pull-rss.sh VB [VB...]
#
# Env: PROFILE   vault profile (default vault100k)
#      BACKEND   pouchdb-server backend: leveldb (default) or memory
#      WORK      work dir (default a new one under /tmp; kept, it holds the vault and the db)
#      PUSH_VB   the build that pushes the vault (default the last VB)
#      KEEP_DB   1: pull from the database a previous run left in WORK (no push)
#
# Needs pouchdb-server (`npm ci --prefix tools/pouchdb`) and GNU time (`apt-get install
# time`). The vault is generated, pushed once into a fresh database with `load push`, then
# pulled by each build in turn into a fresh folder; each pull must exit 0 and its tree must
# equal the vault's (`vault verify`). Long: vault100k is 1,167,567 documents through CouchDB.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/couch-pull-rss.sh VB [VB...]" >&2; exit 2; }
for vb in "$@"; do
  [ -x "$vb" ] || { echo "couch-pull-rss: $vb is not an executable" >&2; exit 2; }
done
PROFILE=${PROFILE:-vault100k}
BACKEND=${BACKEND:-leveldb}
WORK=${WORK:-$(mktemp -d /tmp/couch-pull-rss.XXXXXX)}
PUSH_VB=${PUSH_VB:-${!#}}
[ -x /usr/bin/time ] || { echo "couch-pull-rss: needs GNU time (apt-get install time)" >&2; exit 2; }
SERVER=$PWD/tools/pouchdb/node_modules/.bin/pouchdb-server
[ -x "$SERVER" ] || SERVER=$(command -v pouchdb-server || true)
[ -n "$SERVER" ] || { echo "couch-pull-rss: no pouchdb-server (npm ci --prefix tools/pouchdb)" >&2; exit 2; }
mkdir -p "$WORK"

echo "# couch-pull-rss $(date -u +%FT%TZ) on $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB; $PROFILE, pouchdb-server $BACKEND; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -d "$WORK/vault" ]; then
  "$PUSH_VB" vault gen "$PROFILE" --out "$WORK/vault" >/dev/null
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
[ "${KEEP_DB:-0}" = 1 ] && [ -d "$WORK/db" ] && [ "$BACKEND" = leveldb ] || KEEP_DB=0
[ "$KEEP_DB" = 1 ] || { rm -rf "$WORK/db"; mkdir -p "$WORK/db"; }
store=(--dir "$WORK/db"); [ "$BACKEND" = memory ] && store=(--in-memory)
# In its data dir: pouchdb-server keeps a log.txt in its working directory, and dies when
# that file goes.
(cd "$WORK/db" && exec "$SERVER" --host 127.0.0.1 --port "$port" "${store[@]}" \
  --config "$WORK/db/config.json" --no-stdout-logs >"$WORK/server.log" 2>&1) &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/" >/dev/null && break
  sleep 0.2
done
url="http://127.0.0.1:$port/vault"

t0=$(date +%s)
[ "$KEEP_DB" = 1 ] && echo "pulling from the database already in $WORK/db" || "$PUSH_VB" load push --protocol couchdb --url "$url" --vault "$WORK/vault" \
  --transfer-timeout 6h >"$WORK/push.txt" 2>&1 || { cat "$WORK/push.txt" >&2; exit 1; }
[ "$KEEP_DB" = 1 ] || echo "push by $PUSH_VB: $(( $(date +%s) - t0 )) s; $(head -1 "$WORK/push.txt")"

i=0
for vb in "$@"; do
  i=$((i + 1))
  out="$WORK/pull-$i"
  rm -rf "$out"
  # The old build has no --transfer-timeout; the new one's default (1 h) might not hold a
  # pull on a busy machine.
  # Older builds name the server --target.
  extra=()
  "$vb" load pull --help | grep -q -- --transfer-timeout && extra=(--transfer-timeout 6h)
  at=--url
  "$vb" load pull --help | grep -q -- '--url <' || at=--target
  /usr/bin/time -v -o "$WORK/time-$i.txt" "$vb" load pull --protocol couchdb "$at" "$url" \
    --vault "$out" "${extra[@]}" >"$WORK/pull-$i.txt" 2>&1 \
    || { echo "pull by $vb failed:"; tail -3 "$WORK/pull-$i.txt"; continue; }
  rss=$(awk -F': ' '/Maximum resident set size/{printf "%.1f", $2/1024}' "$WORK/time-$i.txt")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$WORK/time-$i.txt")
  same=identical
  "$PUSH_VB" vault verify --profile "$PROFILE" "$out" >/dev/null 2>&1 || same=DIFFERS
  echo "pull by $vb: peak RSS $rss MiB, wall $wall, tree $same; $(head -1 "$WORK/pull-$i.txt")"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg); work dir $WORK"
