#!/usr/bin/env bash
# A/A runs of a scenario with the default gate: does the per-sample gate drop rounds on this
# machine, and how much do the route keys vary with and without CPU pinning? Prints what it
# measured.
#
#   scripts/aa-rounds.sh [RUNS] [OUT_DIR]
#
# Env: VB        vaultbench binary (default target/release/vaultbench)
#      SCENARIO  scenario (default small)
#      ROUNDS    rounds per run (default 6)
#      MODES     "pin" and/or "nopin" (default "pin nopin"); nopin passes --no-pin
#      NOPIN_RUNS runs of the nopin mode (default RUNS)
#
# Per run: rounds kept and dropped (with the reasons), samples retried (and why). Per mode:
# the A/A coefficient of variation of every route key's p50 and server CPU per request, over
# all kept samples of a run (A and B alike: they are one build), as the median over runs.
# Runs use the machine's own calibration reference (run `vaultbench calibrate` first on a
# quiet machine) and the default gate; each run is a fresh `vaultbench ab --aa`, bounded by
# its sample timeouts, and its children are killed and reaped by vaultbench on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10}
OUT=${2:-aa-rounds-$(date -u +%Y%m%dT%H%M%SZ)}
VB=${VB:-target/release/vaultbench}
SCENARIO=${SCENARIO:-small}
ROUNDS=${ROUNDS:-6}
MODES=${MODES:-"pin nopin"}
NOPIN_RUNS=${NOPIN_RUNS:-$RUNS}
[ -x "$VB" ] || { echo "aa-rounds: $VB is not an executable (cargo build --release, or set VB)" >&2; exit 2; }
mkdir -p "$OUT"

echo "# aa-rounds $(date -u +%FT%TZ) on $(nproc) cores; $SCENARIO, R = $ROUNDS, default gate; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# Modes alternate run by run, so a drift of the machine over the script's half hour falls on
# both alike.
maxn=$RUNS; [ "$NOPIN_RUNS" -gt "$maxn" ] && maxn=$NOPIN_RUNS
for r in $(seq "$maxn"); do
  for mode in $MODES; do
    n=$RUNS; extra=()
    extra=(--pin); if [ "$mode" = nopin ]; then n=$NOPIN_RUNS; extra=(--no-pin); fi
    [ "$r" -le "$n" ] || continue
    f="$OUT/$mode-$r.json"
    set +e
    "$VB" ab --a ref --b ref --aa --scenario "$SCENARIO" --rounds "$ROUNDS" --order-seed "$r" \
      "${extra[@]}" --out "$f" > /dev/null 2> "$OUT/$mode-$r.log"
    rc=$?
    set -e
    if [ ! -s "$f" ]; then
      echo "$mode run $r: exit $rc, no result: $(tail -1 "$OUT/$mode-$r.log")"
      continue
    fi
    python3 - "$f" "$mode" "$r" "$rc" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); mode, r, rc = sys.argv[2:5]
kept, dropped = d["balance"]["kept"], d["balance"]["dropped"]
retried = []
for rd in d["rounds"]:
    for arm in ("a", "b"):
        s = rd.get(arm)
        if s and s.get("attempts", 1) > 1:
            retried.append(f"round {rd['index']} {arm}: " + "; ".join(s.get("retried_because", [])))
why = "; ".join(f"round {x.get('index', x.get('round'))}: {x.get('reason', x)}" for x in dropped)
print(f"{mode} run {r}: exit {rc}, {len(kept)} of {d['rounds_planned']} rounds kept, {len(dropped)} dropped"
      + (f" ({why})" if dropped else "") + f", {len(retried)} samples retried"
      + ("".join(f"\n    retried {t}" for t in retried)))
PY
  done
done

python3 - "$OUT" "$MODES" <<'PY'
import glob, json, os, statistics as st, sys
out, modes = sys.argv[1], sys.argv[2].split()
for mode in modes:
    files = sorted(glob.glob(os.path.join(out, f"{mode}-*.json")))
    if not files:
        continue
    per_key = {}
    dropped = total = 0
    for f in files:
        d = json.load(open(f))
        dropped += len(d["balance"]["dropped"]); total += d["rounds_planned"]
        for k, m in d["metrics"].items():
            if not k.startswith("route.") or not (k.endswith(".p50_us") or k.endswith(".server.cpu_us_per_request")):
                continue
            xs = [x for x in m.get("a", []) + m.get("b", []) if x is not None]
            if len(xs) >= 3 and st.mean(xs) > 0:
                per_key.setdefault(k, []).append(st.stdev(xs) / st.mean(xs))
    print(f"{mode}: {len(files)} runs, {dropped} of {total} rounds dropped")
    for suffix in (".p50_us", ".server.cpu_us_per_request"):
        ks = sorted(k for k in per_key if k.endswith(suffix))
        meds = [st.median(per_key[k]) for k in ks]
        if meds:
            print(f"{mode}: route *{suffix}: median over keys of the per-run A/A CV {100 * st.median(meds):.2f} % "
                  f"(keys {len(ks)}, range {100 * min(meds):.2f}–{100 * max(meds):.2f} %)")
        for k in ks:
            print(f"{mode}:   {k} CV {100 * st.median(per_key[k]):.2f} % (median of {len(per_key[k])} runs)")
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
