#!/usr/bin/env bash
# Gate trial with real recordings: K recordings of a scenario (default `small`) per condition
# (quiet, cpu, fsync), judged by the default gate with the in-sample channels, interleaved so
# every condition meets the same background; then, per condition, M recordings with every bound
# loosened, whose route-load put-chunk p50 shows what the contender did to the measured work.
#
# Usage: scripts/gate-trial.sh [K] [OUT_DIR]
# Env:   VB            vaultbench binary (default target/release/vaultbench)
#        TARGET        the target to record (default ref; e.g. apache-webdav with
#                      SCENARIO=small-webdav, or any command line)
#        SCENARIO      scenario to record (default small)
#        KEYS          the latency keys the loosened recordings report per condition (default
#                      the put-chunk p50s; for WebDAV e.g. "route.put-file.c1.p50_us
#                      route.get-file.c1.p50_us")
#        SAMPLES       counted samples per recording (default 3; one warm-up runs first)
#        M             loosened recordings per condition for the put-chunk figures (default 3)
#        CONDITIONS    space-separated subset of "quiet cpu fsync" (default all three)
#        FSYNC_THREADS threads of the fsync contender, each storing small files durably like a
#                      server's request handler (default 4)
#        WORK          directory for data dirs and the fsync contender (default a temp dir)
#        RECORD_ARGS   more arguments for every gated recording (e.g. "--pre-check 0s", to see
#                      the in-sample channels refuse a contender the pre-check would have)
#
# Output: OUT_DIR/trial.tsv (one line per recording: condition, round, outcome, exit code,
# background cores before, machine busy cores during, the refusal's failures) and
# OUT_DIR/summary.txt (accepted of K per condition; put-chunk p50 per condition and its change
# against quiet). Background cores are measured from /proc/stat for 2 s before each recording,
# with no contender running: on a shared machine they say how quiet "quiet" was.
set -euo pipefail

K=${1:-20}
OUT=${2:-gate-trial-$(date -u +%Y%m%dT%H%M%SZ)}
VB=${VB:-target/release/vaultbench}
SCENARIO=${SCENARIO:-small}
TARGET=${TARGET:-ref}
KEYS=${KEYS:-"route.put-chunk.c1.p50_us route.put-chunk.c4.p50_us"}
SAMPLES=${SAMPLES:-3}
M=${M:-3}
CONDITIONS=${CONDITIONS:-"quiet cpu fsync"}
read -r -a RECORD_ARGS <<<"${RECORD_ARGS:-}"
FSYNC_THREADS=${FSYNC_THREADS:-4}

[ -x "$VB" ] || { echo "gate-trial: $VB is not an executable (build with cargo build --release, or set VB)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gate-trial-work.XXXXXX")}
mkdir -p "$WORK"

PIDS=()
stop_contenders() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
trap stop_contenders EXIT INT TERM

start_contender() {
    case "$1" in
        quiet) ;;
        cpu)
            for _ in $(seq "$(nproc)"); do
                "$VB" calibrate --burn cpu --burn-seconds 3600 >/dev/null &
                PIDS+=($!)
            done ;;
        fsync)
            "$VB" calibrate --burn fsync --burn-threads "$FSYNC_THREADS" --work-dir "$WORK" \
                --burn-seconds 3600 >/dev/null &
            PIDS+=($!) ;;
        *) echo "gate-trial: unknown condition $1" >&2; exit 2 ;;
    esac
    # Let the contenders reach steady state before the recording starts.
    sleep 0.5
}

# busy and total jiffies of all CPUs (user nice system irq softirq steal; iowait is idle).
jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9+$10+$11; exit}' /proc/stat; }
# cores busy between two `jiffies` readings.
cores() {
    local nc
    nc=$(nproc)
    awk -v a="$1" -v b="$2" -v nc="$nc" 'BEGIN{split(a,x," "); split(b,y," "); t=y[2]-x[2]; if (t>0) printf "%.2f", (y[1]-x[1])/t*nc; else print "nan"}'
}

LOOSE="$OUT/loose-gate.toml"
cat >"$LOOSE" <<'EOF'
# Every bound loosened: these recordings are kept for the put-chunk figures only.
[cpu_ms]
max_cv = 1000
max_over_median = 1000
reference_tolerance = 1000
[io_ms]
max_cv = 1000
max_over_median = 1000
reference_tolerance = 1000
[rtt_ms]
max_cv = 1000
max_over_median = 1000
reference_tolerance = 1000
[server_run_delay]
max_share = 1000
[generator_run_delay]
max_share = 1000
[psi_cpu_some]
max_share = 1000
[psi_io_some]
max_share = 1000
[steal]
max_share = 1000
[foreign_cpu]
max_share = 1000
[foreign_io]
max_share = 1000000
EOF

record() { # condition round gate-args... -> prints exit code; stderr kept in OUT
    local cond=$1 round=$2 kind=$3
    shift 3
    local dir="$OUT/$kind/$cond/$round"
    mkdir -p "$dir"
    set +e
    "$VB" record "$SCENARIO" --target "$TARGET" --samples "$SAMPLES" --out "$dir" --work-dir "$WORK" "${RECORD_ARGS[@]}" "$@" \
        >"$dir/stdout" 2>"$dir/stderr"
    local rc=$?
    set -e
    echo "$rc"
}

printf 'condition\tround\toutcome\texit\tbackground_cores\tbusy_cores_during\tfailures\n' >"$OUT/trial.tsv"
for round in $(seq "$K"); do
    for cond in $CONDITIONS; do
        j0=$(jiffies); sleep 2; j1=$(jiffies)
        background=$(cores "$j0" "$j1")
        start_contender "$cond"
        j0=$(jiffies)
        rc=$(record "$cond" "$round" gated)
        j1=$(jiffies)
        stop_contenders
        during=$(cores "$j0" "$j1")
        case "$rc" in 0) outcome=accepted ;; 3) outcome=refused ;; *) outcome=error ;; esac
        failures=$(sed -n 's/.*no recording written[^:]*: \(.*\)\. \(judged against\|no reference for\).*/\1/p; s/.*nothing written: \(.*\)\. \(judged against\|no reference for\).*/\1/p; s/.*a sample failed, nothing written: \(.*\)/sample failed: \1/p' \
            "$OUT/gated/$cond/$round/stderr" | head -1 | tr '\t' ' ')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cond" "$round" "$outcome" "$rc" "$background" "$during" "$failures" >>"$OUT/trial.tsv"
        echo "gate-trial: $cond round $round: $outcome (background $background cores, busy $during during) $failures" >&2
    done
done

for round in $(seq "$M"); do
    for cond in $CONDITIONS; do
        start_contender "$cond"
        rc=$(record "$cond" "$round" loose --gate-config "$LOOSE")
        stop_contenders
        [ "$rc" = 0 ] || echo "gate-trial: loosened recording $cond $round exited $rc (see $OUT/loose/$cond/$round/stderr)" >&2
    done
done

python3 - "$OUT" "$SCENARIO" "$CONDITIONS" "$KEYS" <<'EOF'
import json, os, statistics, sys
out, scenario, conditions, keys = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "trial.tsv"))][1:]
lines = []
for c in conditions:
    mine = [r for r in rows if r[0] == c]
    acc = sum(r[2] == "accepted" for r in mine)
    err = sum(r[2] == "error" for r in mine)
    bg = [float(r[4]) for r in mine if r[4] != "nan"]
    lines.append(f"{c}: {acc} of {len(mine)} accepted ({len(mine) - acc - err} refused, {err} errors); "
                 f"background before each recording: median {statistics.median(bg) if bg else float('nan'):.2f} cores, max {max(bg) if bg else float('nan'):.2f}")
p50 = {}
for c in conditions:
    for key in keys:
        vals = []
        d = os.path.join(out, "loose", c)
        for r in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            f = os.path.join(d, r, f"{scenario}.json")
            if os.path.exists(f):
                m = json.load(open(f))["metrics"].get(key)
                if m:
                    vals.append(m["value"])
        if vals:
            p50[(c, key)] = statistics.median(vals)
            lines.append(f"{c}: {key} median of {len(vals)} loosened recordings {p50[(c, key)]:.0f} µs ({', '.join(f'{v:.0f}' for v in vals)})")
for c in conditions:
    for key in keys:
        if c != "quiet" and (c, key) in p50 and ("quiet", key) in p50:
            lines.append(f"{c}: {key} {100 * (p50[(c, key)] / p50[('quiet', key)] - 1):+.0f} % against quiet")
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
