#!/usr/bin/env bash
# tests/gpu/python.sh [BUNDLE]: the Python figures on the GPU machine, in one
# command (run.sh runs the same as part of everything).
#
#   bash tests/gpu/python.sh build/gpu-bundle
#
# Builds the package's compiled hot path there (build_python_extension in
# tests/gpu/bundle.sh: this machine's gcc, Python and NumPy headers; the pure
# Python path, said so, when it cannot), then tests/bench/bench_python.py:
# the host rows (cpu: add beside np.add, the empty launch beside the C API's),
# kjit's add on kjit device arrays and CuPy arrays, CuPy's cp.add and Numba's
# @vectorize (with $KJIT_NUMBA_WHEELS when set, as run.sh), then the Python
# tests of the compiled path (ufuncs, gufuncs, interop) when pytest is there.
# Goal (issue 26): kjit's add on device arrays under 4 us a call (CuPy 11 us,
# Numba 88-124 us on the H100/H200 machine).  Ends with "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
export KJIT_LIBRARY=$root/bin/libkjit.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}

echo "=== the compiled hot path (python/kjit/_fast.c, built here)"
build_python_extension && pass "python extension step" || fail "python extension step"
hot=$(python3 -c 'import kjit; print(kjit.hot_path)' 2>&1)
echo "kjit.hot_path: $hot"
[ "$hot" = compiled ] && pass "Python runs the compiled hot path" \
    || fail "Python runs the compiled hot path (it runs: $hot)"

echo "=== tests/bench/bench_python.py"
numba_site=$(numba_pythonpath "$work/numba-site")
{ python3 "$root/tests/bench/bench_python.py" host kjit cupy
  PYTHONPATH=$numba_site${PYTHONPATH:+:$PYTHONPATH} python3 "$root/tests/bench/bench_python.py" numba |
      grep -v '^| library\|^| ---'; } > "$work/bench.log" 2>&1
cat "$work/bench.log"
grep -q '^| kjit | add, device arrays, out= | [0-9]' "$work/bench.log" \
    && pass "kjit's add on device arrays measured" || fail "kjit's add on device arrays measured"
us=$(sed -n 's/^| kjit | add, device arrays, out= | \([0-9.]*\) us.*/\1/p' "$work/bench.log")
[ -n "$us" ] && echo "kjit add, device arrays, out=: $us us a call (goal: under 4 us)"

echo "=== the compiled path's Python tests (ufuncs, gufuncs, interop, the fast path)"
pytest_path=
if ! python3 -m pytest --version >/dev/null 2>&1 && [ -d "$root/python/wheels" ]; then
    python3 -m pip install -q --no-index --find-links "$root/python/wheels" \
        --target "$work/pytest-site" pytest >/dev/null 2>&1 && pytest_path=$work/pytest-site
fi
if PYTHONPATH=$pytest_path:$PYTHONPATH python3 -m pytest --version >/dev/null 2>&1; then
    PYTHONPATH=$pytest_path:$PYTHONPATH python3 -m pytest -q -rs -p no:cacheprovider \
        "$root/python/tests/test_fast.py" "$root/python/tests/test_ufunc.py" \
        "$root/python/tests/test_gufunc_numpy.py" "$root/python/tests/test_interop.py" \
        > "$work/pytest.log" 2>&1
    cat "$work/pytest.log"
    summary=$(tail -1 "$work/pytest.log")
    # -q's last line starts with its first count ("2 failed, 37 passed in 9s")
    py_passed=$(echo "$summary" | grep -o '[0-9][0-9]* passed' | cut -d' ' -f1)
    py_failed=$(echo "$summary" | grep -o '[0-9][0-9]* \(failed\|errors\{0,1\}\)' |
        awk '{n += $1} END {print n + 0}')
    passed=$((passed + ${py_passed:-0}))
    failed=$((failed + ${py_failed:-0}))
    [ -n "$py_passed" ] || fail "the Python tests ran"
else
    echo "SKIP the Python tests: no pytest here and none in the bundle"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
