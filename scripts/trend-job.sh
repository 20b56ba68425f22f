#!/usr/bin/env bash
# The steps of the reusable trend job (.github/workflows/trend.yml) for a server's repository,
# runnable by hand in that repository's checkout:
#
#   VB=path/to/vaultbench BUILD='cargo build --release' BIN=target/release/server \
#     SCENARIO=perf/posts.toml BASELINES=perf/baselines OUT=perf-out scripts/trend-job.sh
#
# It records the checked-out commit as a `git:` target (built and cached by vaultbench) with
# `--cost`, renders the report, and compares with BASELINES/<this machine's class>/. With no
# baseline for the class it says so and exits 0. Exit codes are vaultbench's: 3 (the gate
# refused the machine) is turned into 0 with a warning, since the refusal is the result.
#
# Environment: VB (vaultbench), BUILD (build command), BIN or RUN (the server), SCENARIO (a
# built-in name or a scenario file), BASELINES (default perf/baselines), OUT (default
# perf-out), COST_SAMPLES (default 3), THRESHOLD (default 5%), REV (default HEAD),
# REBASELINE (true: also lay out OUT/rebaseline/<BASELINES>/<class>/ to commit),
# HISTORY_BRANCH (a data branch holding the history: the recording's history line is written
# to OUT/history-line/<class>/<scenario>.jsonl for a later step to push there, and `trend
# detect` runs over the branch's history plus this line; empty: no history), HISTORY_DIR
# (default history, the directory on that branch), BISECT (true: `trend detect --bisect`).
#
# Nothing here pushes: this script runs the server's build with a read-only token, and the
# workflow's `history` job, the only one allowed to write, appends the line to the branch.
set -euo pipefail
: "${VB:?set VB to the vaultbench executable}"
: "${BUILD:?set BUILD to the build command}"
BASELINES=${BASELINES:-perf/baselines}
OUT=${OUT:-perf-out}
COST_SAMPLES=${COST_SAMPLES:-3}
THRESHOLD=${THRESHOLD:-5%}
REV=${REV:-HEAD}
REBASELINE=${REBASELINE:-false}
SCENARIO=${SCENARIO:-small}
HISTORY_BRANCH=${HISTORY_BRANCH:-}
HISTORY_DIR=${HISTORY_DIR:-history}
BISECT=${BISECT:-false}

if [ -n "${BIN:-}" ]; then how=(--bin "$BIN"); elif [ -n "${RUN:-}" ]; then how=(--run "$RUN"); else
  echo "set BIN (the built server, relative to the checkout) or RUN (its command line)" >&2
  exit 2
fi
if [ -f "$SCENARIO" ]; then scen=(--scenario-file "$SCENARIO"); else scen=("$SCENARIO"); fi
# The same scenario as a flag, for the bisect runs `trend detect --bisect` starts.
if [ -f "$SCENARIO" ]; then bscen=(--scenario-file "$SCENARIO"); else bscen=(--scenario "$SCENARIO"); fi

mkdir -p "$OUT/recording"
class=$("$VB" class)
echo "machine class: $class"
echo "class=$class" >> "${GITHUB_OUTPUT:-/dev/null}"

set +e
"$VB" record "${scen[@]}" --target "git:$REV" --build "$BUILD" "${how[@]}" \
  --cost --cost-samples "$COST_SAMPLES" --out "$OUT/recording"
code=$?
set -e
if [ "$code" -eq 3 ]; then
  echo "::warning::the calibration gate refused this machine: no recording"
  exit 0
fi
[ "$code" -eq 0 ] || exit "$code"

rec=$(find "$OUT/recording" -maxdepth 1 -name '*.json' ! -name '*.provenance.json' | head -n 1)
"$VB" report "$rec" --format html --out "$OUT/recording/report.html"
"$VB" report "$rec" --format md --out "$OUT/recording/report.md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/recording/report.md" >> "$GITHUB_STEP_SUMMARY"; fi

if [ -n "$HISTORY_BRANCH" ]; then
  # The recording's history line, laid out as on the branch.
  "$VB" history append "$rec" --history "$OUT/history-line" > /dev/null
  line=$(cd "$OUT/history-line" && find . -name '*.jsonl' | head -n 1)
  line=${line#./}
  # The branch's history so far (none on the first run) with this line after it.
  mkdir -p "$OUT/history/$(dirname "$line")"
  git fetch --quiet origin "$HISTORY_BRANCH" 2>/dev/null || true
  git show "origin/$HISTORY_BRANCH:$HISTORY_DIR/$line" > "$OUT/history/$line" 2>/dev/null || : > "$OUT/history/$line"
  cat "$OUT/history-line/$line" >> "$OUT/history/$line"
  entries=$(grep -c . "$OUT/history/$line" || true)
  echo "history: $entries entries in $HISTORY_DIR/$line on $HISTORY_BRANCH (with this one)"
  if [ "$entries" -ge 6 ]; then
    detect=("$VB" trend detect "$OUT/history/$line" --out "$OUT/recording/trend.json")
    if [ "$BISECT" = true ]; then
      detect+=(--bisect --repo . -- --build "$BUILD" "${how[@]}" "${bscen[@]}")
    fi
    set +e
    "${detect[@]}"
    dcode=$?
    set -e
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$OUT/recording/trend.md" ]; then
      cat "$OUT/recording/trend.md" >> "$GITHUB_STEP_SUMMARY"
    fi
    # Exit 1: a step or drift for the worse. A trend signal: said, never the job's failure.
    if [ "$dcode" -eq 1 ]; then
      echo "::warning::trend detect: a change point for the worse (see trend.md)"
    elif [ "$dcode" -ne 0 ]; then
      echo "::warning::trend detect exited $dcode"
    fi
  fi
fi

if [ "$REBASELINE" = true ]; then
  mkdir -p "$OUT/rebaseline/$BASELINES/$class"
  cp "$rec" "${rec%.json}.provenance.json" "$OUT/rebaseline/$BASELINES/$class/"
  "$VB" verify "$OUT/rebaseline/$BASELINES/"
fi

mkdir -p "$BASELINES"
set +e
"$VB" compare "$BASELINES" "$OUT/recording" --threshold "$THRESHOLD" --missing-baseline-ok \
  --out "$OUT/recording/compare.md"
code=$?
set -e
if [ -f "$OUT/recording/compare.md" ]; then
  if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/recording/compare.md" >> "$GITHUB_STEP_SUMMARY"; fi
elif [ "$code" -eq 0 ]; then
  echo "::notice::no baseline in $BASELINES for machine class $class: nothing compared (run with rebaseline to make one)"
fi
exit "$code"
