#!/usr/bin/env bash
# Builds every cargo-fuzz target in fuzz/ and runs each for a bounded time (default 60 s),
# then prints per target the executions run and the crashes found. Exits 1 when any target
# crashed (the input is kept in fuzz/artifacts/TARGET/), 2 on a usage or build error.
# Not part of CI's test run: fuzzing is open-ended and timing-bound.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). It runs on the stable toolchain:
# RUSTC_BOOTSTRAP lets cargo-fuzz pass its nightly-only flags. Targets are built without a
# sanitizer (`-s none`): the crates are safe Rust, so AddressSanitizer would only halve the
# executions; libFuzzer still catches panics, overflow checks, hangs and runaway memory.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs="${1:-60}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer, not '$secs'" >&2
    exit 2
fi
shift || true
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)" >&2
    exit 2
fi
export RUSTC_BOOTSTRAP=1

cargo fuzz build -s none >&2 || { echo "fuzz.sh: building the fuzz targets failed" >&2; exit 2; }
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo fuzz list); fi

mkdir -p target/fuzz-logs
failed=0
printf '%-16s %8s %12s %10s  %s\n' target seconds executions crashes log
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    before=$(find "artifacts/$t" -type f | wc -l)
    log="target/fuzz-logs/$t.log"
    # -timeout: one input taking longer is reported as a hang; -rss_limit_mb bounds memory.
    # libFuzzer stops at the first crash; the rest of the time is not spent.
    set +e
    cargo fuzz run -s none "$t" "corpus/$t" "${seeds[@]}" -- \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1
    rc=$?
    set -e
    execs=$({ grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || true; } | grep -o '[0-9]*$' | tail -1 || true)
    after=$(find "artifacts/$t" -type f | wc -l)
    crashes=$((after - before))
    if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        # Failed without leaving an input: count it, the log says why.
        crashes=1
    fi
    [ "$crashes" -gt 0 ] && failed=1
    printf '%-16s %8s %12s %10s  %s\n' "$t" "$secs" "${execs:-?}" "$crashes" "fuzz/$log"
done
exit "$failed"
