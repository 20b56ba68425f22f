#!/usr/bin/env bash
# Measures vaultbench's A/B sensitivity on this machine with the reference server:
#   1. A/A false positives: `small`, R=6, several runs: how often any verdict is not "no change";
#   2. A vs A-with-group-commit: the fsync difference shows up as an exact difference;
#   3. A vs A slowed on purpose (--inject-delay-us on every version post): the smallest
#      slowdown detected ("worse") in at least 9 of 10 runs.
# Usage: scripts/ab-sensitivity.sh OUTDIR [AA_RUNS] [DELAYS_US...]
# Env: VB (the binary), GATE (a gate config), ONLY_PAIRED=1, PAIRED_DELAYS, PAIRED_RUNS,
# PUSH_DELAYS, PUSH_RUNS (the vault1k push probe).
# Results: one A/B JSON per run under OUTDIR and a summary on stdout.
set -euo pipefail
out=${1:?usage: scripts/ab-sensitivity.sh OUTDIR [AA_RUNS] [DELAYS_US...]}
aa_runs=${2:-3}
shift 2 || true
delays=("$@")
[ ${#delays[@]} -gt 0 ] || delays=(500 1000 2000 4000)
mkdir -p "$out"
vb=${VB:-./target/release/vaultbench}
# GATE=path/to/gate.toml loosens the calibration gate (say so wherever the figures are quoted).
gate_args=()
[ -n "${GATE:-}" ] && gate_args=(--gate-config "$GATE")
push_only="$out/push-only.toml"
cat > "$push_only" <<'TOML'
name = "push-only"
doc = "Cold start and a cold push of the small vault: the sensitivity probe's workload."
profile = "small"

[[phase]]
kind = "cold_start"

[[phase]]
kind = "cold_push"
TOML

# ONLY_PAIRED=1 skips the sequential parts (1-3).
if [ -z "${ONLY_PAIRED:-}" ]; then
echo "== 1. A/A, small, R=6, $aa_runs runs"
for i in $(seq 1 "$aa_runs"); do
  "$vb" ab "${gate_args[@]}" --a ref --b ref --aa --scenario small --rounds 6 --order-seed "$i" --out "$out/aa-$i.json" >/dev/null 2>"$out/aa-$i.log" || true
  python3 - "$out/aa-$i.json" <<'PY' || echo "  run $i: no result (see $out/aa-$i.log)"
import json, sys
d = json.load(open(sys.argv[1]))
v = {}
for k, m in d["metrics"].items():
    v[m["verdict"]] = v.get(m["verdict"], 0) + 1
print(f"  run {sys.argv[1]}: {len(d['metrics'])} timing/resource keys, verdicts {v}, exact differences {len(d['exact_differences'])}")
PY
done

echo "== 2. A vs A --group-commit, small, R=6"
"$vb" ab "${gate_args[@]}" --a ref --b "ref --group-commit" --scenario small --rounds 6 --out "$out/gc.json" >/dev/null 2>"$out/gc.log" || true
python3 - "$out/gc.json" <<'PY' || echo "  no result (see $out/gc.log)"
import json, sys
d = json.load(open(sys.argv[1]))
for k, e in sorted(d["exact_differences"].items()):
    if "fsync" in k or "journal" in k:
        print(f"  {k}: {e['diff']['a']} -> {e['diff']['b']} {e['unit']} (stable A {e['diff']['a_stable']}, B {e['diff']['b_stable']})")
PY

echo "== 3. A vs A slowed by D us per version post, push-only, R=6, 10 runs each"
for d in "${delays[@]}"; do
  worse=0
  pcts=()
  for i in $(seq 1 10); do
    f="$out/delay-$d-$i.json"
    "$vb" ab "${gate_args[@]}" --a ref --b "ref --inject-delay-us $d" --scenario-file "$push_only" --rounds 6 --order-seed "$i" --out "$f" >/dev/null 2>"$out/delay-$d-$i.log" || true
    r=$(python3 -c "import json,sys; m=json.load(open('$f'))['metrics']['cold_push.wall_ms']; print(m['verdict'], round(m['estimate_pct'] or 0, 1))" 2>/dev/null || echo "none n/a")
    [ "${r%% *}" = worse ] && worse=$((worse+1))
    pcts+=("${r##* }")
  done
  echo "  delay ${d}us: cold_push.wall_ms called worse in $worse/10 runs; estimated change % per run: ${pcts[*]}"
done
fi

# Paired mode (`ab --paired`): both builds up at once, requests alternated. PAIRED_DELAYS are
# microseconds per version post chosen near +3 % of route.post-version.c1.p50_us and +5 % of
# cold_push.wall_ms on this machine (measure the A/A p50 first; the acceptance load is a
# `yes` loop on one core: run `yes >/dev/null &` before this script and say so).
paired_scenario="$out/paired.toml"
cat > "$paired_scenario" <<'TOML'
name = "paired-probe"
doc = "Cold start, a cold push, a cold pull, edit propagation and the version-post route at one in flight: the paired sensitivity probe."
profile = "small"
devices = 2

[[phase]]
kind = "cold_start"

[[phase]]
kind = "cold_push"

[[phase]]
kind = "cold_pull"

[[phase]]
kind = "edit_propagation"

[[phase]]
kind = "route_load"
routes = ["post-version"]
in_flight = [1]
requests = 2000
TOML
paired_delays=(${PAIRED_DELAYS:-12 40})
runs=${PAIRED_RUNS:-10}
echo "== 4. paired A/A, R=3, tau 1%, $runs runs"
for i in $(seq 1 "$runs"); do
  f="$out/paired-aa-$i.json"
  t0=$(date +%s)
  "$vb" ab "${gate_args[@]}" --paired --aa --a ref --b ref --scenario-file "$paired_scenario" --rounds 3 --tau 1% --order-seed "$i" --out "$f" >/dev/null 2>"$out/paired-aa-$i.log" || true
  t1=$(date +%s)
  python3 - "$f" "$((t1-t0))" <<'PY' || echo "  run $i: no result (see $out/paired-aa-$i.log)"
import json, sys
d = json.load(open(sys.argv[1]))
t = [k for k, m in d["metrics"].items() if m.get("interval_method") == "paired_blocks"]
called = [k for k in t if d["metrics"][k]["verdict"] in ("better", "worse")]
print(f"  run: {len(t)} paired timing keys, {len(called)} called better/worse {called}, {sys.argv[2]} s")
PY
done
for d in "${paired_delays[@]}"; do
  echo "== 5. paired, B slowed by ${d} us per version post, R=3, tau 1%, $runs runs"
  for i in $(seq 1 "$runs"); do
    f="$out/paired-delay-$d-$i.json"
    t0=$(date +%s)
    "$vb" ab "${gate_args[@]}" --paired --a ref --b "ref --inject-delay-us $d" --scenario-file "$paired_scenario" --rounds 3 --tau 1% --order-seed "$i" --out "$f" >/dev/null 2>"$out/paired-delay-$d-$i.log" || true
    t1=$(date +%s)
    python3 - "$f" "$((t1-t0))" <<'PY' || echo "  run $i: no result"
import json, sys
d = json.load(open(sys.argv[1]))
out = []
for k in ("route.post-version.c1.p50_us", "cold_push.wall_ms", "cold_pull.wall_ms", "edit.p50_ms"):
    m = d["metrics"].get(k)
    if m:
        ci = m["ci_pct"] or {"lo": float("nan"), "hi": float("nan")}
        out.append(f"{k} {m['verdict']} {m['estimate_pct']:+.2f}% [{ci['lo']:+.2f}, {ci['hi']:+.2f}]")
print("  " + "; ".join(out) + f"; {sys.argv[2]} s")
PY
  done
done

# The push probe: a cold push of vault1k (1,100 files, so 110 file pairs a block; `small`'s 100
# files leave ten a block, too few for a +5 % call). PUSH_DELAYS are microseconds per version
# post near +5 % of a file push (about 150 us on the 2-vCPU VM); PUSH_RUNS runs each, and as
# many A/A runs. Empty PUSH_DELAYS (the default) skips it.
push_delays=(${PUSH_DELAYS:-})
if [ ${#push_delays[@]} -gt 0 ]; then
push_probe="$out/push-probe.toml"
cat > "$push_probe" <<'TOML'
name = "push-probe"
doc = "Cold start and a cold push of vault1k: the paired push probe, enough file pairs per round for a +5 % call at R = 3."
profile = "vault1k"
devices = 2

[[phase]]
kind = "cold_start"

[[phase]]
kind = "cold_push"
TOML
push_runs=${PUSH_RUNS:-10}
for d in 0 "${push_delays[@]}"; do
  if [ "$d" = 0 ]; then
    echo "== 6. paired push probe A/A, R=3, tau 1%, $push_runs runs"
  else
    echo "== 7. paired push probe, B slowed by ${d} us per version post, R=3, tau 1%, $push_runs runs"
  fi
  for i in $(seq 1 "$push_runs"); do
    f="$out/push-$d-$i.json"
    if [ "$d" = 0 ]; then arms=(--aa --a ref --b ref); else arms=(--a ref --b "ref --inject-delay-us $d"); fi
    t0=$(date +%s)
    "$vb" ab "${gate_args[@]}" --paired "${arms[@]}" --scenario-file "$push_probe" --rounds 3 --tau 1% --order-seed "$i" --out "$f" >/dev/null 2>"$out/push-$d-$i.log" || true
    t1=$(date +%s)
    python3 - "$f" "$((t1-t0))" <<'PY' || echo "  run $i: no result (see $out/push-$d-$i.log)"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["metrics"]["cold_push.wall_ms"]
ci = m["ci_pct"] or {"lo": float("nan"), "hi": float("nan")}
print(f"  cold_push.wall_ms {m['verdict']} {m['estimate_pct']:+.2f}% [{ci['lo']:+.2f}, {ci['hi']:+.2f}]; {sys.argv[2]} s")
PY
  done
done
fi
