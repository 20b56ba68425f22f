#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ and runs each for a bounded time (default 60 s),
# then prints per target the executions run and the findings (crashes, hangs, out-of-memory
# inputs). Exits 1 when any target found something (the input is kept in
# fuzz/artifacts/TARGET/), 2 on a usage or build error. Not part of CI's test run: fuzzing is
# open-ended and timing-bound.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   FUZZ_SECONDS=600 scripts/fuzz.sh chunks_get
#
# SECONDS_PER_TARGET (or FUZZ_SECONDS) defaults to 60. Targets default to every `[[bin]]` of
# fuzz/Cargo.toml.
#
# Needs only the stable toolchain and a C++ compiler (libfuzzer-sys builds libFuzzer from
# source): the targets are built the way `cargo fuzz build -s none` builds them, with
# SanitizerCoverage's instrumentation passes given as stable `-C` flags, so neither nightly
# nor cargo-fuzz is needed. No sanitizer: the crates are safe Rust, so AddressSanitizer (a
# nightly flag) would only halve the executions; libFuzzer still catches panics, overflow
# checks (on, as in a debug build), hangs and runaway memory.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs="${FUZZ_SECONDS:-60}"
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
    secs="$1"
    shift
fi
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer, not '$secs'" >&2
    exit 2
fi

all=$(sed -n '/^\[\[bin\]\]/{n;s/^name = "\(.*\)"$/\1/p}' Cargo.toml)
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets <<<"$all"; fi
for t in "${targets[@]}"; do
    if ! grep -qx "$t" <<<"$all"; then
        echo "fuzz.sh: no fuzz target '$t' (targets: $(echo $all))" >&2
        exit 2
    fi
done

# An explicit --target keeps the instrumentation off build scripts and proc macros.
triple=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="${RUSTFLAGS:-} -Cpasses=sancov-module \
 -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
 -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares \
 --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
cargo build --release --target "$triple" "${bins[@]}" >&2 ||
    { echo "fuzz.sh: building the fuzz targets failed" >&2; exit 2; }

mkdir -p target/fuzz-logs
failed=0
printf '%-16s %8s %12s %9s  %s\n' target seconds executions findings log
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    seeds=()
    [ -d "seeds/$t" ] && seeds=("seeds/$t")
    before=$(find "artifacts/$t" -type f | wc -l)
    log="target/fuzz-logs/$t.log"
    # -timeout: one input taking longer is a hang; -rss_limit_mb bounds memory. libFuzzer
    # stops at the first finding; the rest of the time is not spent.
    set +e
    "target/$triple/release/$t" "corpus/$t" "${seeds[@]}" \
        -artifact_prefix="artifacts/$t/" -max_total_time="$secs" -timeout=20 \
        -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    execs=$({ grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || true; } | grep -o '[0-9]*$' | tail -1 || true)
    after=$(find "artifacts/$t" -type f | wc -l)
    found=$((after - before))
    if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then
        # Failed without leaving an input: count it, the log says why.
        found=1
    fi
    [ "$found" -gt 0 ] && failed=1
    printf '%-16s %8s %12s %9s  %s\n' "$t" "$secs" "${execs:-?}" "$found" "fuzz/$log"
done
exit "$failed"
