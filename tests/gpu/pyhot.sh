#!/usr/bin/env bash
# tests/gpu/pyhot.sh [BUNDLE]: where a cuda call from Python goes (issue 26
# item 1), on the GPU machine, in about a minute:
#
#   bash tests/gpu/pyhot.sh build/gpu-bundle
#
# Builds the package's compiled hot path there (build_python_extension), then
# runs tests/gpu/pyhot_diag.py, which times the layers of `add(d, e, out=f)`
# (1,000 f32 kjit device arrays) in one process, rows taking turns: the
# interpreter's call of a no-op C function with the same arguments, the Python
# call, the same add on a cancellable=False context, kjit_call in a C loop
# with the GIL held and released around each call, the GIL pair alone, a bare
# cuLaunchKernel of the add in kjit's form; each as short batches (host time)
# and long ones with their synchronisation (as bench_python.py and
# bin/latency time them), in processes unpinned, pinned to one CPU, with the
# Python thread alone pinned, and on the fake driver.  Then, for the
# figures earlier runs compared, bin/latency's C call in a process of its own
# and bench_python.py's kjit rows.  Writes its output to $OUT/pyhot.log too
# when $OUT is set.  Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
log=${OUT:-$work}/pyhot.log
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
{
    python_package_step
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
    echo "=== the layers of add(d, e, out=f) in one process (tests/gpu/pyhot_diag.py)"
    python3 "$root/tests/gpu/pyhot_diag.py" "$root" && pass "pyhot_diag.py" || fail "pyhot_diag.py"
    echo "=== bin/latency cuda --calls (the C API, a process of its own)"
    "$root/bin/latency" cuda --calls && pass "latency" || fail "latency"
    echo "=== bench_python.py kjit"
    python3 "$root/tests/bench/bench_python.py" kjit && pass "bench_python.py kjit" \
        || fail "bench_python.py kjit"
    echo "$passed passed, $failed failed"
} 2>&1 | tee "$log"
grep -q ' 0 failed$' "$log"
