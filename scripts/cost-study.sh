#!/usr/bin/env bash
# The measurements behind docs/cost-channel-study.md: per-phase instruction counts and
# per-phase syscall counts of the reference server under a fixed amount of load.
#
#   scripts/cost-study.sh MODE [busy] > result.txt
#
# MODE: native | callgrind | cg-sys | cachegrind | strace-c | strace-o | vg-syscalls | idle | push-strace
# busy: keep one core busy with `yes` during the run (killed afterwards).
# Needs a release build (cargo build --release) and valgrind + strace (Debian packages).
# Every child is killed and reaped on exit; every wait has a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?mode}
BUSY=${2:-}
N=${N:-500}
REF=target/release/obsync-refserver
VB=target/release/vaultbench
WORK=$(mktemp -d /tmp/cost-study.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ "$BUSY" = busy ]; then yes > /dev/null & PIDS+=($!); fi

now() { date +%s.%N; }
case "$MODE" in
  native)      WRAP=() ;;
  cg-sys) WRAP=(valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out.%p" --dump-instr=no --collect-systime=no --trace-syscalls=yes -v --log-file="$WORK/vg-sys.txt" ${VGEXTRA:-}) ;;
  callgrind|idle) WRAP=(valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out.%p" --dump-instr=no --collect-systime=no ${VGEXTRA:-}) ;;
  cachegrind)  WRAP=(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$WORK/cachegrind.out") ;;
  strace-c)    WRAP=(strace -f -c -o "$WORK/strace-c.txt") ;;
  strace-o|push-strace) WRAP=(strace -f -y -ttt -e trace=fsync,fdatasync,rename,renameat,renameat2,openat,mkdir,mkdirat,write,pwrite64,writev -o "$WORK/strace.txt") ;;
  vg-syscalls) WRAP=(valgrind --tool=none --trace-syscalls=yes --log-file="$WORK/vg-sys.txt") ;;
  *) echo "unknown mode $MODE" >&2; exit 2 ;;
esac

mkfifo "$WORK/out"
"${WRAP[@]}" "$REF" --data "$WORK/data" > "$WORK/out" 2> "$WORK/server.err" &
SPID=$!; PIDS+=($SPID)
exec 3< "$WORK/out"
read -r -t 120 LINE <&3 || { echo "server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }
PORT=$(echo "$LINE" | grep -oE '[0-9]+$')
T="http://127.0.0.1:$PORT"
START_READY=$(now)

# The server's own pid: under strace/valgrind the wrapper pid is the server for valgrind (same
# process), for strace the child.
if [ "$MODE" = strace-c ] || [ "$MODE" = strace-o ] || [ "$MODE" = push-strace ]; then
  SRV=$(pgrep -P "$SPID" | head -1)
else
  SRV=$SPID
fi

dump() { # dump NAME: callgrind dump, timed (cg-sys: straight through vgdb, without the perl wrapper)
  local t0 t1
  t0=$(now)
  if [ "$MODE" = cg-sys ]; then
    timeout 60 vgdb --pid="$SRV" dump "$1" > /dev/null
  else
    timeout 60 callgrind_control --dump="$1" "$SRV" > /dev/null
  fi
  t1=$(now)
  echo "dump $1 took_s $(echo "$t1 - $t0" | bc)"
}
mark() { echo "mark $1 $(now)"; }
# CPU ticks (utime+stime, all threads) of a pid: the server's own CPU, and the wrapper's.
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# Not under valgrind: the /metrics request would land in the measured phase's instructions.
metrics_fsyncs() { case "$MODE" in callgrind|cachegrind|idle|cg-sys) echo 0; return;; esac; curl -s "$T/metrics" | awk '/^obsync_fsyncs_total/ { s += $2 } END { print s + 0 }'; }

load() {
  "$VB" load --url "$T" --setup-token-file "$WORK/data/setup-token" --state "$WORK/state.json" \
    --route post-version --in-flight 1 --max-requests "$1" --duration 10m --json > "$WORK/load.json"
}

case "$MODE" in
  idle)
    dump start
    sleep 1; dump idle1s
    sleep 10; dump idle10s
    sleep 1; dump idle1s-b
    ;;
  push-strace)
    "$VB" vault gen small --out "$WORK/vault" > /dev/null
    m0=$(metrics_fsyncs)
    mark push-start; P0=$(now)
    "$VB" load push --url "$T" --setup-token-file "$WORK/data/setup-token" --state "$WORK/state.json" \
      --vault "$WORK/vault" --json > "$WORK/push.json"
    P1=$(now); mark push-end
    echo "metrics fsyncs during push $(( $(metrics_fsyncs) - m0 ))"
    ;;
  *)
    # Warm-up phase: enrolment and a few posts (so the measured phase has no first-time costs).
    load 20
    case "$MODE" in callgrind|cg-sys) dump warmup;; esac
    c0=$(ticks "$SRV"); w0=$(ticks "$SPID"); m0=$(metrics_fsyncs)
    mark post-start
    t0=$(now); P0=$t0; load "$N"; t1=$(now); P1=$t1
    mark post-end
    c1=$(ticks "$SRV"); w1=$(ticks "$SPID")
    echo "metrics fsyncs during post $(( $(metrics_fsyncs) - m0 ))"
    echo "load_wall_s $(echo "$t1 - $t0" | bc)"
    echo "server_cpu_ticks $((c1 - c0)) wrapper_cpu_ticks $((w1 - w0))"
    case "$MODE" in callgrind|cg-sys) dump post;; esac
    ;;
esac

if [ "$MODE" = push-strace ] || [ "$MODE" = strace-o ] || [ "$MODE" = strace-c ]; then
  curl -s "$T/metrics" > "$WORK/metrics.txt" || true
  grep fsync "$WORK/metrics.txt" || true
fi
kill -INT "$SRV" 2>/dev/null || true
for _ in $(seq 1 600); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
kill "$SPID" 2>/dev/null || true
wait "$SPID" 2>/dev/null || true

case "$MODE" in
  callgrind|idle|cg-sys)
    for f in "$WORK"/cg.out.*; do
      [ -n "${KEEP:-}" ] && cp "$f" "$KEEP/"
      echo "$(basename "$f") $(grep -m1 '^desc: Trigger' "$f" | tr -d '\n') totals $(grep -E '^(totals|summary):' "$f" | head -1)"
    done
    if [ "$MODE" = cg-sys ]; then
    [ -n "${KEEP:-}" ] && cp "$WORK/vg-sys.txt" "$KEEP/"
    # Each vgdb session ends with this line in valgrind's log: it marks a dump, in order with
    # the traced syscalls. Phase 1 = before the first dump (warm-up), phase 2 = the posts.
    awk '/Remote side has terminated connection/ { ph++ } /^SYSCALL\[/ && !/^SYSCALL\[[0-9,]+\]\([0-9]+\) \.\.\./ { n=$2; if (n ~ /^sys_/) c[ph" "n]++ } END { for (k in c) print "vg_phase_syscall", k, c[k] }' "$WORK/vg-sys.txt" | sort -k2,2n -k3 | grep -E ' (sys_fsync|sys_fdatasync|sys_rename|sys_renameat2?|sys_openat|sys_mkdir|sys_write|sys_writev|sys_pwrite64) ' 
    fi ;;
  cachegrind) grep -E '^summary:' "$WORK/cachegrind.out" ;;
  strace-c) cat "$WORK/strace-c.txt" ;;
  strace-o|push-strace)
    echo "strace lines $(wc -l < "$WORK/strace.txt")"
    awk '{ s=$3; sub(/\(.*/, "", s); c[s]++ } END { for (k in c) print "syscall", k, c[k] }' "$WORK/strace.txt" | sort
    # The same, only for calls that started inside the measured phase (a resumed call's
    # `<... resumed>` line is not counted: its start line was).
    awk -v a="$P0" -v b="$P1" '$2 >= a && $2 <= b && $3 !~ /^</ { s=$3; sub(/\(.*/, "", s); c[s]++ } END { for (k in c) print "phase_syscall", k, c[k] }' "$WORK/strace.txt" | sort
    # Writes to regular files only (`-y` shows the fd's path; sockets and eventfds show
    # `socket:[..]` and `anon_inode:[..]`): the timing-independent part of `write`.
    awk -v a="$P0" -v b="$P1" '$2 >= a && $2 <= b && $3 ~ /^(write|writev|pwrite64)\([0-9]+<\// { n++ } END { print "phase_file_writes", n + 0 }' "$WORK/strace.txt" ;;
  vg-syscalls)
    grep -oE 'SYSCALL\[[0-9]+,[0-9]+\]\(\s*[0-9]+\) [a-z_0-9]+' "$WORK/vg-sys.txt" | awk '{print $2}' | sort | uniq -c | sort -rn | head -20 ;;
esac
