#!/usr/bin/env bash
# tests/gpu/run.sh [BUNDLE]: the GPU tests, on the GPU machine.
#
# Run from the repository root with the bundle `make gpu-bundle` made (default
# build/gpu-bundle, carried to the machine).  In order:
#   1. the unit tests (the cuda suite must run, not skip): seeds against
#      float64, every example's vectorized functions cuda vs cpu, device
#      arrays, streams and events, a kernel fault, out-of-memory; then the
#      JIT layout probe (tests/gpu/jit_layout.sh) and far_sections.sh;
#   2. every example through `kjit run` on cuda and on cpu with the same
#      seeded inputs, the results compared (tests/gpu/compare_npy.py states
#      the tolerances; the mma() matrix multiply too, and the mma() golden
#      programs on cuda), plus `kjit build --emit=ptx` and `kjit info`; then
#      every mode, every kernel (bin/modes-test, docs/testing.md): every
#      function of the repository's sources on cuda and in every cpu mode
#      against cpu with cpu_simd = 0;
#      then the race checker's verdicts against compute-sanitizer's
#      (tests/gpu/racecheck.sh);
#   3. the latency benchmark (bin/latency: compile times, and launch costs
#      beside a bare cuLaunchKernel), the tests of `kjit bench`
#      (tests/cli/bench.sh, with its cuda rows), the @guvectorize examples
#      against NumPy (tests/cli/gufunc.sh, cuda included) and the demo (examples/demo.sh:
#      kjit bench over every seed example, cuda included);
#   4. the Python package's tests (python/tests, CuPy and PyTorch arrays),
#      with its compiled hot path built here first (tests/gpu/bundle.sh), the
#      Python seed examples on cuda and the Python call overhead
#      (tests/bench/bench_python.py; tests/gpu/python.sh runs that part alone);
#   5. libraries' cuda code (tests/gpu/aot.sh: every example from libraries
#      built here, through libkjit-rt, against the JIT; the first-call
#      latency and the host cost of calls from a library);
#   6. the benchmark (tests/bench/bench_gpu.sh), whose table ends the log.
# KJIT_GPU_SKIP="modes aot benchmark" leaves those steps out, saying so.
# Ends with one line: "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
kjit=$root/bin/kjit
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
# KJIT_GPU_SKIP="modes benchmark": steps left out of this run (one call of
# the device tool has 10 minutes; the steps left out run in another call).
skipped() {
    case " ${KJIT_GPU_SKIP:-} " in
    *" $1 "*) echo "skipped: $1 (KJIT_GPU_SKIP)"; return 0 ;;
    esac
    return 1
}
fail() { failed=$((failed + 1)); echo "FAIL $*"; }


echo "=== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$kjit" info && pass "kjit info" || fail "kjit info"
"$kjit" info | grep -q '^  cuda      yes' && pass "cuda target available" \
    || fail "cuda target available"

echo "=== unit tests"
"$root/bin/unit-tests" > "$work/unit.log" 2>&1
unit_rc=$?
cat "$work/unit.log"
# Check's summary: "NN%: Checks: C, Failures: F, Errors: E".
read -r checks failures errors < <(sed -n 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' "$work/unit.log" | tail -1)
checks=${checks:-0} failures=${failures:-0} errors=${errors:-0}
passed=$((passed + checks - failures - errors))
failed=$((failed + failures + errors))
[ "$unit_rc" -eq 0 ] || [ $((failures + errors)) -gt 0 ] || fail "unit-tests exited $unit_rc"
if grep -q 'skipped: no CUDA driver' "$work/unit.log"; then
    fail "the cuda unit tests skipped on the GPU machine"
fi

# The same cuda suite with the driver's linker assembling the PTX, as on a
# machine without the toolkit's ptxas (what runs above used ptxas when found).
echo "=== the cuda unit tests again, ptxas off (the driver's linker)"
if CK_RUN_SUITE=cuda KJIT_PTXAS=off KJIT_CACHE_DIR=$work/cache-linker "$root/bin/unit-tests" \
        > "$work/unit-linker.log" 2>&1 && grep -q '100%: Checks' "$work/unit-linker.log"; then
    tail -1 "$work/unit-linker.log"; pass "cuda unit tests through the driver's linker"
else
    cat "$work/unit-linker.log"; fail "cuda unit tests through the driver's linker"
fi

# Code with line tables keeps its constants within 2 GiB of its code while the
# CUDA driver holds its address space (tests/gpu/jit_layout.c), and runs when
# every mapping is far from the others (tests/cli/far_sections.sh).
echo "=== JIT layout with a cuda context open (tests/gpu/jit_layout.sh, tests/cli/far_sections.sh)"
bash "$root/tests/gpu/jit_layout.sh" "$root" > "$work/layout.log" 2>&1 && pass "jit layout" \
    || fail "jit layout"
cat "$work/layout.log"
sh "$root/tests/cli/far_sections.sh" "$kjit" > "$work/far.log" 2>&1 && pass "far sections" \
    || fail "far sections"
tail -1 "$work/far.log"

echo "=== examples: cuda vs cpu through kjit run"
# name | kjit run arguments; @OUT@ names the result files of one target.
examples=(
    "add|examples/add.kern add rand:f32:1e6 rand:f32:1e6 -o @OUT@.npy"
    "sin|examples/sin.kern vsin rand:f64:1e6 -o @OUT@.npy"
    "exp|examples/exp.kern vexp randn:f32:1e6 -o @OUT@.npy"
    "lla_a|examples/lla.kern lla_a rand:f64:1000x1000 rand:f64:1000x1000 30.0 60.0 6371.0 -o @OUT@.npy"
    "lla|examples/lla.kern lla 30.0 60.0 -45.0 45.0 -90.0 90.0 6371.0 1000 1000 zeros:f64:1000x1000 --grid 32,125 --block 32,8 --save 9=@OUT@.npy"
    "mandelbrot|examples/mandelbrot.kern mandel_kernel -2.0 1.0 -1.0 1.0 zeros:u8:1024x1536 20 --grid 48,128 --block 32,8 --save 4=@OUT@.npy"
    "das|examples/das.kern das zeros:f64:762x1200 arange:i64:256000 --grid 1200 --block 762 --save 0=@OUT@.npy"
    "gufunc_dot|examples/gufunc.kern dot rand:f64:100003x16 rand:f64:100003x16 -o @OUT@.npy"
    "gufunc_norm|examples/gufunc.kern row_norm randn:f64:7x1001x33 -o @OUT@.npy"
    "gufunc_moving|examples/gufunc.kern moving_average randn:f64:517x300 7 -o @OUT@.npy"
    "gufunc_matmul|examples/gufunc.kern matmul rand:f32:1000x1x8x5 rand:f32:3x5x6 -o @OUT@.npy"
    "matmul_tc|tests/bench/matmul_tc.kern matmul_tc randn:f64:300x200 randn:f64:200x260 zeros:f64:300x260 --grid 3,3 --block 256 --save 2=@OUT@.npy"
)
# Float to integer conversions at their edges: cpu and cuda must agree exactly.
# NaN is not among them: its conversion is unspecified (docs/language.md) and
# differs (0 on cpu, the GPU's own value on cuda).
python3 - "$work" <<'PY' || fail "writing the conversion inputs"
import sys
import numpy as np
edges = [np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 127.9, 128.0, -128.9,
         -129.0, 255.5, 2147483647.5, 2147483648.0, -2147483648.9, -2147483649.0,
         4294967295.9, 4294967296.0, 9.2e18, 9.3e18, -9.3e18, 1.8e19, 1.9e19, 1e300, -1e300]
rng = np.random.default_rng(3)
x = np.concatenate([edges, rng.standard_normal(2000) * 10.0 ** rng.integers(0, 21, 2000)])
np.save(f"{sys.argv[1]}/conv_f64.npy", x)
np.save(f"{sys.argv[1]}/conv_f32.npy", x.astype(np.float32))
PY
for fn in f64_i64 f64_u64 f64_i32 f64_u32 f64_i8 f32_i64 f32_u64 f32_i32 f32_u32; do
    examples+=("convert_$fn|tests/gpu/convert.kern $fn @WORK@/conv_${fn%%_*}.npy -o @OUT@.npy|exact")
done
if [ -f "$root/tests/gpu/examples.txt" ]; then
    mapfile -t examples < <(grep -v '^#' "$root/tests/gpu/examples.txt" | grep .)
fi
for entry in "${examples[@]}"; do
    name=${entry%%|*}
    args=${entry#*|}
    exact=
    case $args in *'|exact') args=${args%|exact}; exact=--exact ;; esac
    args=${args//@WORK@/$work}
    ok=1
    for target in cpu cuda; do
        run_args=${args//@OUT@/$work/$name.$target}
        # shellcheck disable=SC2086
        if ! "$kjit" run $run_args --target $target --seed 7 > "$work/$name.$target.log" 2>&1; then
            echo "--- kjit run $run_args --target $target:"; cat "$work/$name.$target.log"
            ok=0
        fi
    done
    if [ $ok -eq 1 ]; then
        grep -i 'ms\|time' "$work/$name.cuda.log" | head -3
        python3 "$root/tests/gpu/compare_npy.py" "$work/$name.cpu.npy" "$work/$name.cuda.npy" $exact \
            && pass "example $name on cuda matches cpu" || fail "example $name on cuda matches cpu"
    else
        fail "example $name runs on cpu and cuda"
    fi
done
# mma() on cuda (mma.sync) prints what it prints on cpu: the golden .out files
# (tests/golden/run.sh runs cuda beside cpu and parallel where a GPU is).
if tests/golden/run.sh "$kjit" tests/golden/exec/mma.kern tests/golden/exec/mma_accumulate.kern \
        > "$work/golden_mma.log" 2>&1 && grep -q ' 0 failed' "$work/golden_mma.log"; then
    tail -1 "$work/golden_mma.log"; pass "mma() golden programs on cuda"
else
    cat "$work/golden_mma.log"; fail "mma() golden programs on cuda"
fi
for file in examples/*.kern; do
    "$kjit" build "$file" --target cuda --emit=ptx -o "$work/out.ptx" > "$work/build.log" 2>&1 \
        && grep -q '\.entry\|^//' "$work/out.ptx" && pass "kjit build --emit=ptx $file" \
        || { cat "$work/build.log"; fail "kjit build --emit=ptx $file"; }
done
# No GPU for this process: --target cuda must say why, auto must fall back.
CUDA_VISIBLE_DEVICES= "$kjit" run examples/add.kern add rand:f32:10 rand:f32:10 --target cuda \
    > "$work/nogpu.log" 2>&1
if [ $? -ne 0 ] && grep -qi 'gpu\|cuda\|device' "$work/nogpu.log"; then
    pass "--target cuda without a GPU says why"
else
    cat "$work/nogpu.log"; fail "--target cuda without a GPU says why"
fi
CUDA_VISIBLE_DEVICES= "$kjit" run examples/add.kern add rand:f32:10 rand:f32:10 --target auto \
    > "$work/auto.log" 2>&1 && pass "--target auto falls back to cpu without a GPU" \
    || { cat "$work/auto.log"; fail "--target auto falls back to cpu without a GPU"; }

echo "=== every mode, every kernel (bin/modes-test, cuda included)"
if skipped modes; then :; else
"$root/bin/modes-test" --root "$root" > "$work/modes.log" 2>&1
modes_rc=$?
cat "$work/modes.log"
if grep -q '^cuda: skipped' "$work/modes.log"; then
    fail "modes-test did not run on cuda"
elif [ "$modes_rc" -eq 0 ]; then
    pass "every mode, every kernel: $(grep '^modes: [0-9]' "$work/modes.log")"
else
    fail "every mode, every kernel (bin/modes-test exited $modes_rc)"
fi
fi

echo "=== the race checker against compute-sanitizer (tests/gpu/racecheck.sh)"
bash "$root/tests/gpu/racecheck.sh" "$root" > "$work/racecheck.log" 2>&1
race_rc=$?
cat "$work/racecheck.log"
if grep -q '^skipped:' "$work/racecheck.log"; then
    echo "skipped: $(grep '^skipped:' "$work/racecheck.log")"
elif [ "$race_rc" -eq 0 ]; then
    pass "race checker agrees with racecheck: $(tail -1 "$work/racecheck.log")"
else
    fail "race checker against racecheck: $(tail -1 "$work/racecheck.log")"
fi

echo "=== latency benchmark"
if "$root/bin/latency" > "$work/latency.log" 2>&1 && grep -q '^| cuda' "$work/latency.log"; then
    cat "$work/latency.log"; pass "latency benchmark, with its cuda rows"
else
    cat "$work/latency.log"; fail "latency benchmark, with its cuda rows"
fi
# The same host-side costs for CuPy and Numba (Numba with the NumPy it can
# import, from $KJIT_NUMBA_WHEELS when set, as tests/bench/bench_gpu.sh does).
numba_site=$(numba_pythonpath "$work/latency-site")
{ python3 "$root/tests/bench/latency_py.py" cupy
  PYTHONPATH=$numba_site python3 "$root/tests/bench/latency_py.py" numba; } > "$work/latency_py.log" 2>&1
cat "$work/latency_py.log"
if grep -q '^| CuPy | launch' "$work/latency_py.log" && grep -q '^| Numba | launch' "$work/latency_py.log"; then
    pass "latency of CuPy and Numba, measured beside kjit's"
else
    fail "latency of CuPy and Numba, measured beside kjit's"
fi

echo "=== kjit bench tests (tests/cli/bench.sh)"
sh "$root/tests/cli/bench.sh" "$kjit" > "$work/cli.log" 2>&1
cli_rc=$?
cat "$work/cli.log"
read -r cli_passed cli_failed < <(sed -n 's/^bench.sh: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$work/cli.log" | tail -1)
passed=$((passed + ${cli_passed:-0}))
failed=$((failed + ${cli_failed:-0}))
[ "$cli_rc" -eq 0 ] || [ "${cli_failed:-0}" -gt 0 ] || fail "tests/cli/bench.sh exited $cli_rc"

echo "=== @guvectorize through kjit run (tests/cli/gufunc.sh, cuda included)"
sh "$root/tests/cli/gufunc.sh" "$kjit" > "$work/gufunc.log" 2>&1
gufunc_rc=$?
cat "$work/gufunc.log"
read -r g_passed g_failed < <(sed -n 's/^gufunc.sh: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p' "$work/gufunc.log" | tail -1)
passed=$((passed + ${g_passed:-0}))
failed=$((failed + ${g_failed:-0}))
[ "$gufunc_rc" -eq 0 ] || [ "${g_failed:-0}" -gt 0 ] || fail "tests/cli/gufunc.sh exited $gufunc_rc"
grep -q '^gufunc.sh: seed .*targets: .*cuda' "$work/gufunc.log" \
    || fail "tests/cli/gufunc.sh did not run on cuda"

echo "=== demo (examples/demo.sh)"
if sh "$root/examples/demo.sh" "$kjit" "$work/demo"; then
    pass "examples/demo.sh on every target, cuda included"
else
    fail "examples/demo.sh on every target, cuda included"
fi

echo "=== the Python package (python/tests: CuPy and PyTorch arrays in and out)"
# pytest from the machine, else from the wheels the bundle carries; the
# cuda tests must run, not skip.  Then every Python seed example on cuda.
export KJIT_LIBRARY=$root/bin/libkjit.so
# The compiled hot path, built on this machine (tests/gpu/bundle.sh says how,
# and why not when it cannot: then the pure Python path runs, and says so).
build_python_extension && pass "python extension step" || fail "python extension step"
echo "kjit.hot_path: $(PYTHONPATH=$root/python python3 -c 'import kjit; print(kjit.hot_path)' 2>&1)"
pytest_path=
if ! python3 -m pytest --version >/dev/null 2>&1 && [ -d "$root/python/wheels" ]; then
    python3 -m pip install -q --no-index --find-links "$root/python/wheels" \
        --target "$work/pytest-site" pytest >/dev/null 2>&1 && pytest_path=$work/pytest-site
fi
if PYTHONPATH=$pytest_path${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest --version >/dev/null 2>&1; then
    PYTHONPATH=$pytest_path${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest -rs -p no:cacheprovider \
        "$root/python/tests" > "$work/python.log" 2>&1
    cat "$work/python.log"
    summary=$(tail -1 "$work/python.log")
    py_passed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
    py_failed=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    py_errors=$(echo "$summary" | sed -n 's/.* \([0-9]*\) error.*/\1/p')
    passed=$((passed + ${py_passed:-0}))
    failed=$((failed + ${py_failed:-0} + ${py_errors:-0}))
    [ -n "$py_passed" ] || fail "python/tests ran"
    if grep -q 'skipped: no CUDA driver' "$work/python.log"; then
        fail "the Python cuda tests skipped on the GPU machine"
    fi
else
    echo "SKIP python/tests: no pytest here and none in the bundle (python3 -m pip install pytest)"
fi
for example in "$root"/examples/python/*.py; do
    if python3 "$example" --target cuda > "$work/pyexample.log" 2>&1; then
        cat "$work/pyexample.log"; pass "Python example $(basename "$example") on cuda"
    else
        cat "$work/pyexample.log"; fail "Python example $(basename "$example") on cuda"
    fi
done
# Numba in its own process, with the NumPy it can import ($KJIT_NUMBA_WHEELS,
# installed above for the latency rows), as tests/bench/bench_gpu.sh does.
{ python3 "$root/tests/bench/bench_python.py" kjit cupy
  PYTHONPATH=$numba_site python3 "$root/tests/bench/bench_python.py" numba | grep -v '^| library\|^| ---'; } \
    > "$work/bench_python.log" 2>&1
cat "$work/bench_python.log"
grep -q '^| kjit | add, device' "$work/bench_python.log" \
    && pass "Python call overhead measured (tests/bench/bench_python.py)" \
    || fail "Python call overhead measured (tests/bench/bench_python.py)"
unset KJIT_LIBRARY

echo "=== libraries built ahead of time, on cuda (tests/gpu/aot.sh)"
if skipped aot; then :; else
bash "$root/tests/gpu/aot.sh" "$root" > "$work/aot.log" 2>&1
cat "$work/aot.log"
read -r aot_passed aot_failed < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$work/aot.log" | tail -1)
passed=$((passed + ${aot_passed:-0}))
failed=$((failed + ${aot_failed:-0}))
[ -n "${aot_passed:-}" ] || fail "tests/gpu/aot.sh ran to its end"
grep -q '^skipped: no CUDA driver' "$work/aot.log" && fail "tests/gpu/aot.sh skipped on the GPU machine"
fi

echo "=== benchmark"
if skipped benchmark; then :
elif bash "$root/tests/bench/bench_gpu.sh"; then
    pass "benchmark ran"
else
    fail "benchmark ran"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
