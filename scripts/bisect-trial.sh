#!/usr/bin/env bash
# Bisect trial: RUNS bisects (order seeds FIRST..FIRST+RUNS-1) over a 16-commit history of a
# small "server" (a script that execs the reference server) whose instructions per version post
# grow by about WORK/127 % at commit 11 and whose commit 7 does not build (the history of
# harness/tests/it/git.rs). Prints one line per run and a summary:
#
#   scripts/bisect-trial.sh > result.txt
#
# Environment: VB (default target/release/vaultbench), RUNS (10), FIRST (1), WORK (2550: about
# +20 %; 255 adds about 2 %), POSTS (200), COST_TAU (5%). The gate is loosened (instruction
# counts do not depend on contention); the build cache is shared by the runs, the bisect
# journals are not (each run has its own order seed).
set -euo pipefail
cd "$(dirname "$0")/.."
VB=$(realpath "${VB:-target/release/vaultbench}")
RUNS=${RUNS:-10}
FIRST=${FIRST:-1}
WORK=${WORK:-2550}
POSTS=${POSTS:-200}
COST_TAU=${COST_TAU:-5%}
T=$(mktemp -d /tmp/bisect-trial.XXXXXX)
trap 'rm -rf "$T"' EXIT
export VAULTBENCH_CACHE="$T/cache" XDG_DATA_HOME="$T/data" VAULTBENCH_LOCK="$T/lock"

cat > "$T/gate.toml" <<EOF
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
cat > "$T/posts.toml" <<EOF
name = "posts"
doc = "bisect trial: signed version posts at 1 in flight"
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

R="$T/repo"
mkdir -p "$R"
g() { git -C "$R" -c user.name=trial -c user.email=trial@example.invalid -c commit.gpgsign=false "$@"; }
g init -q -b main
for k in $(seq 0 15); do
  w=0; [ "$k" -ge 11 ] && w=$WORK
  printf '#!/bin/sh\n# revision %s\nexec %s serve-ref --inject-work %s "$@"\n' "$k" "$VB" "$w" > "$R/server.sh"
  if [ "$k" -eq 7 ]; then
    printf '#!/bin/sh\necho "server.c:12: error: expected ; before }" >&2\nexit 3\n' > "$R/build.sh"
  else
    printf '#!/bin/sh\nset -e\nmkdir -p bin\ncp server.sh bin/server\nchmod +x bin/server\n' > "$R/build.sh"
  fi
  g add -A
  msg="commit $k"; [ "$k" -eq 11 ] && msg="commit 11: more work per version post"
  g commit -q -m "$msg"
done
want=$(g rev-list --reverse HEAD | sed -n 12p)
good=$(g rev-list --reverse HEAD | sed -n 1p)

hits=0
for s in $(seq "$FIRST" $((FIRST + RUNS - 1))); do
  t0=$(date +%s.%N)
  set +e
  "$VB" bisect --good "$good" --bad HEAD --key route.post-version.c1.server.instructions_per_request \
    --repo "$R" --build 'sh build.sh' --bin bin/server --cost-tau "$COST_TAU" \
    --scenario-file "$T/posts.toml" --gate-config "$T/gate.toml" --order-seed "$s" \
    --out "$T/bisect-$s.json" 2> "$T/bisect-$s.err"
  code=$?
  set -e
  t1=$(date +%s.%N)
  python3 - "$T/bisect-$s.json" "$want" "$s" "$code" "$t0" "$t1" <<'PY'
import json, sys
path, want, seed, code, t0, t1 = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception:
    print(f"seed {seed}: exit {code}, no result"); sys.exit(0)
fb = (d.get("first_bad") or {})
samples = sum(len(c.get("values", [])) for c in d["commits"])
skipped = [c["index"] for c in d["commits"] if c["verdict"] == "skipped"]
print(f"seed {seed}: exit {code} outcome {d['outcome']} first_bad {fb.get('index')} "
      f"{'OK' if fb.get('commit') == want else 'WRONG'} estimate {d['estimate_pct']:+.2f}% "
      f"[{d['ci_pct']['lo']:+.2f}, {d['ci_pct']['hi']:+.2f}] builds {d['builds']['built']} run "
      f"{d['builds']['cached']} cached {d['builds']['beyond_ends']} beyond ends, "
      f"{len(d['steps'])} comparisons, {samples} cost samples, skipped {skipped}, "
      f"wall {d['wall_s']:.1f} s (outside {float(t1) - float(t0):.1f} s)")
PY
  if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (d.get('first_bad') or {}).get('commit')==sys.argv[2] and d['outcome']=='found' else 1)" "$T/bisect-$s.json" "$want" 2>/dev/null; then
    hits=$((hits + 1))
  fi
done
echo "named commit 11: $hits of $RUNS"
