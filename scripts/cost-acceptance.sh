#!/usr/bin/env bash
# Acceptance of the cost channel: prints what it measured.
#
#   scripts/cost-acceptance.sh [STEP...] > result.txt
#
# STEPS (all by default, in this order):
#   calibrate  N for --inject-work that adds 2 % to route.post-version.c1 instructions/request
#   ab2        RUNS x `ab --cost` ref vs ref --inject-work N at R=$ROUNDS, one core kept busy
#   aa         RUNS x `ab --cost --aa` at R=$ROUNDS, one core kept busy
#   cpu        A/A CV of route.post-version.c1.server.cpu_us_per_request (quiet) and whether
#              a 5 % --inject-work change is detected at R=6
#   wall       `record small` wall time with and without --cost
# Environment: RUNS (default 10), ROUNDS (default 3, the acceptance's R; an odd count runs one order
# once more, drawn from the order seed), POSTS (default 2000, the study's
# per-route floor for a 2 % call within ±0.5 points), N (skip calibrate), FIRST (first run's
# order seed, default 1: runs use seeds FIRST..FIRST+RUNS-1, so a series can be continued).
# Needs a release build (cargo build --release) and valgrind + strace (Debian packages).
# Every child is killed and reaped on exit; every wait has a deadline (the sample timeout).
set -euo pipefail
cd "$(dirname "$0")/.."
VB=${VB:-target/release/vaultbench}
RUNS=${RUNS:-10}
FIRST=${FIRST:-1}
ROUNDS=${ROUNDS:-3}
POSTS=${POSTS:-2000}
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(calibrate ab2 aa cpu wall)
WORK=$(mktemp -d /tmp/cost-acceptance.XXXXXX)
BUSY_PID=""
export VAULTBENCH_CACHE="$WORK/cache" XDG_DATA_HOME="$WORK/data" VAULTBENCH_LOCK="$WORK/lock"
busy_on() { yes > /dev/null & BUSY_PID=$!; }
busy_off() {
  if [ -n "$BUSY_PID" ]; then kill "$BUSY_PID" 2>/dev/null || true; wait "$BUSY_PID" 2>/dev/null || true; BUSY_PID=""; fi
}
cleanup() { busy_off; rm -rf "$WORK"; }
trap cleanup EXIT

# Loose gate: these runs measure the cost channel, not the calibration gate.
cat > "$WORK/gate.toml" <<EOF
[cpu_ms]
max_cv = 1000.0
max_over_median = 1000.0
reference_tolerance = 1000.0
[io_ms]
max_cv = 1000.0
max_over_median = 1000.0
reference_tolerance = 1000.0
[rtt_ms]
max_cv = 1000.0
max_over_median = 1000.0
reference_tolerance = 1000.0
[server_run_delay]
max_share = 1000.0
[generator_run_delay]
max_share = 1000.0
[psi_cpu_some]
max_share = 1000.0
[psi_io_some]
max_share = 1000.0
[steal]
max_share = 1000.0
[foreign_cpu]
max_share = 1000
[foreign_io]
max_share = 1000000
EOF
cat > "$WORK/posts.toml" <<EOF
name = "posts"
doc = "cost acceptance: signed version posts at 1 in flight, fixed work"
profile = "small"
samples = 1
devices = 4
[[phase]]
kind = "cold_start"
[[phase]]
kind = "route_load"
routes = ["post-version"]
in_flight = [1]
requests = $POSTS
EOF
KEY=route.post-version.c1.server.instructions_per_request
CPUKEY=route.post-version.c1.server.cpu_us_per_request
COMMON=(--gate-config "$WORK/gate.toml" --scenario-file "$WORK/posts.toml" --sample-timeout 900)

echo "# cost acceptance $(date -u +%FT%TZ) on $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# other processes using CPU at start (top 8 by %CPU):"
ps -eo pcpu,comm --sort=-pcpu | head -9 | sed 's/^/#   /'
echo "# valgrind: $(valgrind --version); strace: $(strace -V | head -1)"

# One `record --cost` of TARGET; prints KEY's value.
cost_of() {
  local out="$WORK/rec-$RANDOM"
  "$VB" record "${COMMON[@]}" --cost --samples 1 --target "$1" --out "$out" > /dev/null 2> "$out.log" \
    || { cat "$out.log" >&2; return 1; }
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['metrics'][sys.argv[2]]['value'])" \
    "$out/posts.json" "$KEY"
}

# One ab run's JSON (args after the targets).
ab_json() {
  local out="$WORK/ab-$RANDOM.json"
  "$VB" ab "${COMMON[@]}" --out "$out" "$@" > /dev/null 2> "$out.log" || true
  [ -s "$out" ] || { tail -3 "$out.log" >&2; return 1; }
  echo "$out"
}

for step in "${STEPS[@]}"; do
case "$step" in
calibrate)
  if [ -z "${N:-}" ]; then
    K=20000
    i0=$(cost_of ref); i1=$(cost_of "ref --inject-work $K")
    N=$(python3 -c "i0,i1,k=$i0,$i1,$K; print(round(0.02*i0/((i1-i0)/k)))")
    echo "calibrate: $KEY ref $i0, with --inject-work $K $i1 -> N = $N for +2 %"
  fi
  ;;
ab2)
  : "${N:?run calibrate first or set N}"
  busy_on
  worse=0; inside=0; runs=0; named=0
  for r in $(seq "$FIRST" "$((FIRST + RUNS - 1))"); do
    f=$(ab_json --a ref --b "ref --inject-work $N" --cost --rounds "$ROUNDS" --order-seed "$r") || continue
    runs=$((runs+1))
    line=$(python3 - "$f" "$KEY" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); m = d["metrics"][sys.argv[2]]
ci = m["ci_pct"]
part = sys.argv[2].split(".server.")[0]
fs = d.get("functions", {}).get(part, {}).get("functions", [])
top = fs[0] if fs else {"name": "none", "delta": 0}
share = top.get("share_of_change")
print(m["verdict"], f'{m["estimate_pct"]:.3f}', f'{ci["lo"]:.3f}', f'{ci["hi"]:.3f}', len(d["balance"]["kept"]),
      top["name"].replace(" ", "_"), f'{top["delta"]:.0f}', f'{100*share:.1f}' if share is not None else "nan")
PY
)
    read -r v est lo hi kept fn delta share <<< "$line"
    echo "ab2 run $r: $v estimate ${est} % [${lo}, ${hi}] ($kept rounds kept); top grower $fn +$delta/request, $share % of the change"
    case "$fn" in *inject_work*|*post_version*) python3 -c "import sys; sys.exit(0 if $share>=80 else 1)" && named=$((named+1));; esac
    [ "$v" = worse ] && worse=$((worse+1))
    python3 -c "import sys; sys.exit(0 if abs($est-2.0)<=0.5 else 1)" && inside=$((inside+1))
  done
  busy_off
  echo "ab2: worse in $worse of $runs runs; estimate within 2 ± 0.5 % in $inside of $runs; inject_work (or its handler) the top grower with >= 80 % of the change in $named of $runs (N = $N, R = $ROUNDS, one core busy)"
  ;;
aa)
  busy_on
  false_v=0; runs=0; : > "$WORK/aa-values"
  for r in $(seq "$FIRST" "$((FIRST + RUNS - 1))"); do
    f=$(ab_json --a ref --b ref --aa --cost --rounds "$ROUNDS" --order-seed "$r") || continue
    runs=$((runs+1))
    out=$(python3 - "$f" "$WORK/aa-values" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cost = {k: m for k, m in d["metrics"].items() if m.get("interval_method") == "t_log_ratio"}
false = [k for k, m in cost.items() if m["verdict"] in ("worse", "better")]
grow = [(abs(f["share_of_total"]), p, f["name"]) for p, c in d.get("functions", {}).items() for f in c["functions"]]
g = max(grow) if grow else (0.0, "-", "-")
print(f"largest function change {100*g[0]:.3f} % of its part ({g[2]} in {g[1]})", file=sys.stderr)
with open(sys.argv[2], "a") as f:
    for k, m in cost.items():
        f.write(k + " " + " ".join(str(x) for x in m["a"] + m["b"]) + "\n")
print(len(false), len(cost), ",".join(false))
PY
)
    read -r nf nk which <<< "$(tail -1 <<< "$out")"
    echo "aa run $r: $nf false verdicts of $nk cost keys ${which}; $(head -1 <<< "$out")"
    false_v=$((false_v+nf))
  done
  busy_off
  python3 - "$WORK/aa-values" <<'PY'
import sys, collections
vals = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, *xs = line.split(); vals[k] += [float(x) for x in xs]
for k, xs in sorted(vals.items()):
    print(f"aa spread {k}: max/min - 1 = {100*(max(xs)/min(xs)-1):.3f} % over {len(xs)} cost samples")
PY
  echo "aa: $false_v false verdicts on cost keys in $runs runs (R = $ROUNDS, one core busy)"
  ;;
cpu)
  : "${N:?run calibrate first or set N}"
  f=$(ab_json --a ref --b ref --aa --rounds 6) && python3 - "$f" "$CPUKEY" <<'PY'
import json, sys, statistics as st
d = json.load(open(sys.argv[1])); m = d["metrics"][sys.argv[2]]
xs = m["a"] + m["b"]
print(f"cpu A/A: {sys.argv[2]} CV {100*st.stdev(xs)/st.mean(xs):.2f} % over {len(xs)} samples (mean {st.mean(xs):.1f} us); verdict {m['verdict']}")
PY
  N5=$(python3 -c "print(round(2.5*$N))")
  f=$(ab_json --a ref --b "ref --inject-work $N5" --rounds 6) && python3 - "$f" "$CPUKEY" "$N5" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); m = d["metrics"][sys.argv[2]]; ci = m["ci_pct"] or {"lo": float("nan"), "hi": float("nan")}
print(f"cpu 5 %: --inject-work {sys.argv[3]} (5 % of instructions/request): {m['verdict']}, estimate {m['estimate_pct']:+.2f} % [{ci['lo']:+.2f}, {ci['hi']:+.2f}] at R = 6")
PY
  ;;
wall)
  for mode in plain cost; do
    extra=(); [ "$mode" = cost ] && extra=(--cost)
    t0=$(date +%s.%N)
    "$VB" record small --gate-config "$WORK/gate.toml" --out "$WORK/wall-$mode" "${extra[@]}" > /dev/null 2> "$WORK/wall-$mode.log" \
      || { tail -3 "$WORK/wall-$mode.log"; continue; }
    t1=$(date +%s.%N)
    eval "wall_$mode=$(python3 -c "print(round($t1-$t0,1))")"
  done
  echo "wall: record small ${wall_plain:-?} s, with --cost ${wall_cost:-?} s: $(python3 -c "print(f'{${wall_cost:-0}/${wall_plain:-1}:.2f}')")x"
  ;;
*) echo "unknown step $step" >&2; exit 2 ;;
esac
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
