#!/usr/bin/env bash
# tests/gpu/reduce_compile.sh [BUNDLE]: the cold compile times of every
# program of examples/ and tests/bench on the GPU machine (issue 25, item 1;
# docs/performance.md, "Every program, cold"): bin/latency's program table
# with its cuda columns, among them each @reduce file's slowest first call on
# the GPU (kjit_reduce_prepare in a new process without a disk cache: PTX,
# ptxas and loading, for a sum of 1e6 elements), beside the every-function
# PTX that `kjit build` compiles.  Times by the compiling thread's CPU time
# and ptxas's (KJIT_BENCH_CLOCK=thread), then the same by the wall clock.
# Prints "N passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
start_counts

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1
for clock in thread wall; do
    echo "=== cold compiles of every program, KJIT_BENCH_CLOCK=$clock"
    if KJIT_BENCH_CLOCK=$clock "$root/bin/latency" cuda examples tests/bench > "$work/latency-$clock.log" 2>&1 &&
        grep -q '@reduce first call, cuda' "$work/latency-$clock.log"; then
        sed -n '/^| program/,$p' "$work/latency-$clock.log"
        pass "program table with the cuda first calls ($clock clock)"
    else
        cat "$work/latency-$clock.log"
        fail "program table with the cuda first calls ($clock clock)"
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
