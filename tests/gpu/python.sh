#!/usr/bin/env bash
# tests/gpu/python.sh [BUNDLE]: the Python figures on the GPU machine, in one
# command (run.sh runs the same as part of everything).
#
#   bash tests/gpu/python.sh build/gpu-bundle
#
# Builds the package's compiled hot path there (build_python_extension in
# tests/gpu/bundle.sh: this machine's gcc, Python and NumPy headers; the pure
# Python path, said so, when it cannot), then, in one run, each layer of a
# call of add on 1,000 f32 device elements:
#   - bin/cuda-host (tests/cuda_host/cuda_host.c) on the real driver: the
#     C API's kjit_call, kjit_call_async on a stream and kjit_launch, host
#     time per call, on a context of default options and one of Python's;
#     then the same on the fake driver (bin/libkjit-fakecuda.so), which is
#     kjit's own host work on this machine's CPU and the driver calls each
#     call makes (one cuLaunchKernel, one cuCtxGetCurrent, no
#     cuCtxSetCurrent);
#   - bin/stream-diag (tests/cuda_host/stream_diag.c): the driver's bare
#     launch and kjit's call of add on the legacy null stream,
#     CU_STREAM_PER_THREAD, a created blocking and a non-blocking stream:
#     host time, with the synchronisation, and the GPU's pace (issue 26
#     item 1: where the null stream's extra 0.75 us comes from); then the
#     driver's cost of each form of the launch (kernelParams against one
#     packed `extra` buffer, cuLaunchKernel against cuLaunchKernelEx, three
#     16-byte descriptors against one struct or four scalars), and kjit's
#     add with its parameters as kernelParams (KJIT_CUDA_PARAMS=pointers,
#     the form before) and packed (the default) side by side, results
#     checked;
#   - tests/gpu/param_forms.py: the same two forms from Python, add(d, e,
#     out=f) on two contexts in one process, results checked;
#   - tests/gpu/launch_forms.c (built here with cc, libcuda dlopened): the
#     driver's own cost of cuLaunchKernel with kernelParams against one
#     `extra` buffer, and of cuMemAlloc/cuMemFree against the stream-ordered
#     cuMemAllocAsync/cuMemFreeAsync (issue 26 items 1 and 2);
#   - tests/gpu/launch_diag.py: the empty launch from Python against the C
#     API's under the pool's threads=1 and pinned to one CPU, beside the
#     interpreter's floor (issue 26 item 3: what scales on this host);
#   - tests/gpu/pyhot_diag.py (with tests/gpu/pyhot_diag.c, built there with
#     cc): the layers of add(d, e, out=f) in one process, rows taking turns:
#     the interpreter's call of a no-op with the same arguments, the Python
#     call, the same on contexts without cancel polls and of the C API's
#     defaults, kjit_call in a C loop with the GIL held and released, the
#     GIL pair alone, a bare cuLaunchKernel; short batches (host time) and
#     long ones with their synchronisation (the GPU's pace once the queue is
#     full); unpinned, pinned, and on the fake driver (tests/gpu/pyhot.sh
#     runs it alone);
#   - tests/bench/bench_python.py: the host rows (cpu: add beside np.add, the
#     empty launch beside the C API's), the bare cuLaunchKernel and the C
#     API's kjit_call (bin/latency), kjit's add from Python on kjit device
#     arrays and CuPy arrays (with out=, without, with out= and stream=),
#     CuPy's cp.add and Numba's @vectorize (with $KJIT_NUMBA_WHEELS when set,
#     as run.sh), and the goal rows (under 4 us with out=; without out=
#     within 1.25x of it; the launch within 2x of the C API's);
# then the Python tests of the compiled path (ufuncs, gufuncs, interop) when
# pytest is there.  Goal (issue 26): kjit's add on device arrays under 4 us a
# call (CuPy 11 us, Numba 88-124 us on the H100/H200 machine).  Ends with "N
# passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }

python_package_step
hot=$(python3 -c 'import kjit; print(kjit.hot_path)' 2>&1)
echo "kjit.hot_path: $hot"
[ "$hot" = compiled ] && pass "Python runs the compiled hot path" \
    || fail "Python runs the compiled hot path (it runs: $hot)"

echo "=== kjit's host work per call: bin/cuda-host, real driver, then the fake one"
if [ -x "$root/bin/cuda-host" ]; then
    "$root/bin/cuda-host" > "$work/cuda-host.log" 2>&1 && grep -q '^| kjit_call ' "$work/cuda-host.log" \
        && pass "cuda-host on the GPU" || fail "cuda-host on the GPU"
    cat "$work/cuda-host.log"
    KJIT_CUDA_DRIVER="$root/bin/libkjit-fakecuda.so" "$root/bin/cuda-host" \
        > "$work/cuda-host-fake.log" 2>&1
    cat "$work/cuda-host-fake.log"
    grep -q '^| kjit_call add, device arrays, out= | Python.s | [0-9]* | [0-9]* | 1.00 | 1.00 | 0.00 | 2.00 |' \
        "$work/cuda-host-fake.log" && pass "one cuLaunchKernel and no cuCtxSetCurrent a call" \
        || fail "one cuLaunchKernel and no cuCtxSetCurrent a call (fake driver)"
else
    fail "no bin/cuda-host in the bundle"
fi

echo "=== a call on each kind of stream: the driver's bare launch and kjit's call (bin/stream-diag)"
# legacy NULL, CU_STREAM_PER_THREAD, a created blocking and a non-blocking
# stream: host time, time with the synchronisation, the GPU's pace (events)
if [ -x "$root/bin/stream-diag" ]; then
    "$root/bin/stream-diag" > "$work/stream-diag.log" 2>&1 \
        && pass "stream-diag on the GPU" || fail "stream-diag on the GPU"
    cat "$work/stream-diag.log"
    grep -q '^results of the two forms: x + y on every row, identical' "$work/stream-diag.log" \
        && pass "kjit's add gives x + y with its parameters packed and as pointers (C)" \
        || fail "kjit's add gives x + y with its parameters packed and as pointers (C)"
else
    fail "no bin/stream-diag in the bundle"
fi

echo "=== kjit's add from Python, its parameters as pointers and packed (tests/gpu/param_forms.py)"
python3 "$root/tests/gpu/param_forms.py" > "$work/param-forms.log" 2>&1 \
    && pass "param_forms.py: x + y in both forms (Python)" \
    || fail "param_forms.py: x + y in both forms (Python)"
cat "$work/param-forms.log"

echo "=== the layers of add(d, e, out=f) in one process (tests/gpu/pyhot_diag.py)"
# the interpreter's call, _fast.c, the GIL pair, libkjit and the bare launch,
# in short batches (host time) and long ones (the GPU's pace once the
# launch queue is full), unpinned, pinned and on the fake driver
python3 "$root/tests/gpu/pyhot_diag.py" "$root" > "$work/pyhot-diag.log" 2>&1 \
    && pass "pyhot_diag.py: the call's layers" || fail "pyhot_diag.py: the call's layers"
cat "$work/pyhot-diag.log"

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

echo "=== the driver's own cost of the call's forms (tests/gpu/launch_forms.c, no kjit)"
# kernelParams against one CU_LAUNCH_PARAM_BUFFER_POINTER block; cuMemAlloc
# against the stream-ordered pool (cuMemAllocAsync) for a result array
if cc -O2 -o "$work/launch-forms" "$root/tests/gpu/launch_forms.c" -ldl > "$work/lf-cc.log" 2>&1; then
    "$work/launch-forms" > "$work/launch-forms.log" 2>&1 \
        && pass "launch-forms on the real driver" || fail "launch-forms on the real driver"
    cat "$work/launch-forms.log"
else
    cat "$work/lf-cc.log"
    fail "launch-forms built with cc"
fi

echo "=== the empty launch from Python against the C API's: what scales here (tests/gpu/launch_diag.py)"
# the C launch under each option set in one process (launch_options.c)
if cc -O2 -I"$root/runtime" -o "$work/launch-options" "$root/tests/gpu/launch_options.c" \
        -L"$root/bin" -lkjit -Wl,-rpath,"$root/bin" > "$work/lo-cc.log" 2>&1; then
    export KJIT_LAUNCH_OPTIONS=$work/launch-options
    "$work/launch-options" && pass "launch-options" || fail "launch-options"
else
    cat "$work/lo-cc.log"
    fail "launch-options built with cc"
fi
python3 "$root/tests/gpu/launch_diag.py" > "$work/launch-diag.log" 2>&1 \
    && pass "launch diag" || fail "launch diag"
cat "$work/launch-diag.log"

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
