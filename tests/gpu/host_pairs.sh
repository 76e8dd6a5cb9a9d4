#!/usr/bin/env bash
# tests/gpu/host_pairs.sh [BUNDLE]: the rows of `make bench-cpu` whose ratio
# moves between tables, timed in pairs on the GPU machine's own CPU
# (tests/bench/bench_pairs.py: kjit through its Python package and Numba or
# NumPy taking turns in one process), and tests/bench/stream_align.c (does
# the aligned first piece of a vectorized call pay on this CPU).
#
#   bash tests/gpu/host_pairs.sh build/gpu-bundle
#
# KJIT_NUMBA_WHEELS as for tests/bench/bench_gpu.sh; KJIT_PAIRS and
# KJIT_BENCH_ONLY reach bench_pairs.py; KJIT_STREAM_ROUNDS (2) the rounds of
# stream_align.  Prints two tables, or why there are none.
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
start_counts
bench=$root/tests/bench
describe_cpu
echo "=== stream_align (gcc -O3 -march=native)"
if gcc -std=c11 -D_GNU_SOURCE -O3 -march=native -o "$work/stream_align" "$bench/stream_align.c" &&
    "$work/stream_align" "${KJIT_STREAM_ROUNDS:-2}"; then
    pass "stream_align"
else
    fail "stream_align"
fi
# kjit and Numba in one process: the package's hot path built against the
# NumPy that Numba imports (KJIT_NUMBA_WHEELS's, when set)
numba_path=$(numba_pythonpath "$work/numba-site")
export PYTHONPATH=$numba_path
python_package_step
echo "=== bench_pairs.py"
if python3 "$bench/bench_pairs.py" "$root"; then
    pass "bench_pairs"
else
    fail "bench_pairs"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
