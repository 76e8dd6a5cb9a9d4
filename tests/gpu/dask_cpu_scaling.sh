#!/usr/bin/env bash
# tests/gpu/dask_cpu_scaling.sh [BUNDLE] [--quick]: the cpu Dask benchmark of
# docs/scaling.md (tests/bench/bench_dask.py, what `make bench-dask` runs) on
# the GPU machine's own CPU, whose cores are idle, unlike the project's shared
# 2-core build machine where that benchmark cannot show its goal.
#
#   bash tests/gpu/dask_cpu_scaling.sh build/gpu-bundle
#
# kjit's cpu target on 1 and then 2 worker processes of one thread each
# (distributed.LocalCluster): a compute-bound elementwise call, a sum and the
# heat stencil, strong and weak scaling, then the cost of a task.  Dask comes
# from the machine's Python, else the bundle's wheels (python/dask-wheels);
# the package's compiled hot path is built here first (build_python_extension).
# Goal (issue 29): 2 workers at least 1.5x of 1 on compute-bound work, which
# the elementwise row's strong scaling is.  Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
export KJIT_LIBRARY=$root/bin/libkjit.so
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }

echo "=== Dask on this machine's Python ($(python3 --version 2>&1))"
dask_site "$work/dask-site" || { echo "0 passed, 0 failed, 1 skipped"; exit 0; }
build_python_extension || echo "(the pure Python path, said above)"
export PYTHONPATH=$root/python${dask_path:+:$dask_path}${PYTHONPATH:+:$PYTHONPATH}
echo "cores: $(nproc), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# the workers' own threads: one core each, as on the build machine
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

echo "=== tests/bench/bench_dask.py"
python3 "$root/tests/bench/bench_dask.py" ${2:-} | tee "$work/bench.log"
speedup=$(sed -n 's/^| elementwise | [0-9]* ms | [0-9]* ms (\([0-9.]*\)x).*/\1/p' "$work/bench.log")
if [ -z "$speedup" ]; then
    fail "the benchmark printed its elementwise row"
elif python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 1.5 else 1)" "$speedup"; then
    pass "2 workers ${speedup}x of 1 on the compute-bound elementwise call (goal 1.5x)"
else
    fail "2 workers ${speedup}x of 1 on the compute-bound elementwise call (goal 1.5x)"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
