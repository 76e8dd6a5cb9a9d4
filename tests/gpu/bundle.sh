# tests/gpu/bundle.sh: what the scripts that run from the GPU bundle share
# (tests/gpu/run.sh, racecheck.sh, multigpu.sh, dask.sh, dask_cpu_scaling.sh,
# python.sh, pyhot.sh, jit_layout.sh, bench_cpu_host.sh, cpu_host_diag.sh,
# grid_rows.sh, pool_diag.sh, host_rows.sh, reduce_compile.sh, reduce_forms.sh,
# compile_threads.sh, matmul_cpu.sh, matmul_avx2.sh, tests/bench/bench_gpu.sh
# and others); sourced.

# enter_bundle DIR: what each script that runs from the bundle does first:
# into DIR (root: its path), bin/libkjit.so unpacked, a work folder that goes
# at exit, the bundle's stdlib and a fresh cache, and the toolkit's
# libdevice, or else the bundle's copy.  Exits, with "0 passed, 1 failed",
# when it cannot.
enter_bundle() {
    caller=$PWD
    cd "$1" || { echo "no bundle at $1 (make gpu-bundle)"; echo "0 passed, 1 failed"; exit 1; }
    root=$PWD
    unpack_libkjit || { echo "cannot unpack bin/libkjit.so.xz"; echo "0 passed, 1 failed"; exit 1; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    export KJIT_STDLIB=$root/stdlib KJIT_CACHE_DIR=$work/cache
    if ! "$root/bin/kjit" info | grep -q '^libdevice:  /'; then
        export KJIT_LIBDEVICE=$root/libdevice/libdevice.10.bc
    fi
}

# build_bench_programs NAME...: tests/bench's NAME.c (bench_cpu, bench_simd,
# cpu_diag) built into $work as the Makefile builds them, against a copy of
# the bundle's libkjit.so beside them (bench_cpu_report.py finds the library
# next to bench_simd); bench_simd with the hand-written SIMD references
# (simd_ref.c, -march=native: as many lanes as this CPU has).  Sets bench,
# the bundle's tests/bench, and says so when the repository it was called
# from (the working tree the device tool carries) has other sources there:
# `make gpu-bundle` copies tests/bench, so a bundle made before a change to
# a benchmark runs the old one.  After enter_bundle; fails when one does not
# build.
build_bench_programs() {
    bench=$root/tests/bench
    cp "$root/bin/libkjit.so" "$work/" || return 1
    local flags="-std=c11 -D_GNU_SOURCE -O2 -I$bench" name refs f
    for f in "$caller"/tests/bench/*.[ch] "$caller"/tests/bench/*.py; do
        [ -e "$f" ] || continue
        if ! cmp -s "$f" "$bench/${f##*/}"; then
            echo "build_bench_programs: the bundle's tests/bench is not $caller/tests/bench" \
                "(${f##*/} differs): these are the bundle's programs; make gpu-bundle for the tree's"
            break
        fi
    done
    for name in "$@"; do
        refs=()
        if [ "$name" = bench_simd ]; then
            gcc -std=c11 -D_GNU_SOURCE -O3 -march=native -ffp-contract=off -c "$bench/simd_ref.c" \
                -o "$work/simd_ref.o" || return 1
            refs=("$work/simd_ref.o")
        fi
        # shellcheck disable=SC2086 # flags: words on purpose
        gcc $flags -o "$work/$name" "$bench/$name.c" ${refs[@]+"${refs[@]}"} -L"$work" -lkjit -lm \
            -Wl,-rpath,"$work" || return 1
    done
}

# run_json NAME ENV... -- COMMAND...: COMMAND with the ENV settings (at least
# one: an empty list trips set -u in older bash), its output (JSON) into
# $work/NAME.json and its errors into $work/NAME.err; fails as COMMAND does.
run_json() {
    local name=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$@" > "$work/$name.json" 2> "$work/$name.err"
}

# start_counts: the PASS/FAIL lines and their totals that a script ends with
# as "N passed, M failed" (pass MESSAGE, fail MESSAGE).
start_counts() {
    passed=0 failed=0
    pass() { echo "PASS: $*"; passed=$((passed + 1)); }
    fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
}

# bin/libkjit.so from the bin/libkjit.so.xz the bundle carries, unless it is
# there already; fails when it cannot.
unpack_libkjit() {
    [ -f bin/libkjit.so ] ||
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            bin/libkjit.so.xz bin/libkjit.so
}

# numba_pythonpath DIR: prints the PYTHONPATH under which Numba finds a NumPy
# it can import: $KJIT_NUMBA_WHEELS (a folder of wheels), when set, installed
# into DIR and put in front of $PYTHONPATH; else $PYTHONPATH as it is.
numba_pythonpath() {
    local path=${PYTHONPATH:-}
    if [ -n "${KJIT_NUMBA_WHEELS:-}" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$1" \
            "$KJIT_NUMBA_WHEELS"/*.whl >&2 && path=$1${path:+:$path}
    fi
    echo "$path"
}

# python/kjit/_fast*.so, the Python package's compiled hot path (kjit/_fast.c),
# built here by the package's own build backend (build_backend/kjit_build.py)
# with this machine's C compiler, Python headers and NumPy headers: the bundle
# carries the source, not a binary, since the GPU machine's Python is not the
# one that made the bundle.  Prints what it did; when it cannot build (no
# compiler, no Python.h, no NumPy), says why and leaves the pure Python path,
# which `kjit.hot_path` then names.  Fails only when the bundle has no source.
build_python_extension() {
    python3 - "$PWD" <<'PY'
import glob, os, sys, tempfile
root = sys.argv[1]
package = os.path.join(root, "python", "kjit")
source = os.path.join(package, "_fast.c")
if not os.path.exists(source):
    sys.exit(f"python extension: no {source} in the bundle")
built = glob.glob(os.path.join(package, "_fast*.so"))
import sysconfig
suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
target = os.path.join(package, "_fast" + suffix)
if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(source):
    print(f"python extension: {target} (built before)")
    sys.exit(0)
for stale in built:  # another Python's, or an older one
    os.remove(stale)
sys.path.insert(0, os.path.join(root, "python", "build_backend"))
import kjit_build
with tempfile.TemporaryDirectory(prefix="kjit-ext-") as work:
    made = kjit_build._build_extension(work)
    if made is None:
        print("python extension: NOT built (the reason is above): Python runs the pure "
              "Python path")
        sys.exit(0)
    with open(os.path.join(root, "python", made[0]), "wb") as f:
        f.write(made[1])
print(f"python extension: built {os.path.join(root, 'python', made[0])} with "
      f"{sysconfig.get_config_var('CC') or 'cc'}, Python {sys.version.split()[0]}")
PY
}

# describe_cpu: two lines on this host's CPU for a script's header: its
# vector features (avx2, avx512*, fma) and /proc/cpuinfo's model name.
describe_cpu() {
    grep -o 'avx512[a-z]*\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' '
    echo
    grep -m1 'model name' /proc/cpuinfo
}

# numba_layer PYTHONPATH: one line, Numba's version, the threading layer it
# picks for a prange loop and its thread count (errors, if any, before it: the
# caller keeps the last line).  For host_rows.sh and pool_diag.sh.
numba_layer() {
    PYTHONPATH="$1" python3 - 2>&1 <<'PY'
import numba, numpy as np
@numba.njit(parallel=True)
def inc(a, b):
    for i in numba.prange(a.size):
        b[i] = a[i] + 1
a = np.zeros(100000, np.int32); inc(a, np.empty_like(a))
print(f"Numba {numba.__version__}, threading layer {numba.threading_layer()}, "
      f"{numba.get_num_threads()} threads")
PY
}

# python_package_step: the bundle's Python package for what follows
# (KJIT_LIBRARY the bundle's libkjit.so, PYTHONPATH its python/ first), and its
# compiled hot path built (build_python_extension) as the step "python
# extension step" of the script's counts (pass, fail: start_counts or the
# script's own).  For tests/gpu/python.sh and pyhot.sh; after enter_bundle.
python_package_step() {
    export KJIT_LIBRARY=$root/bin/libkjit.so
    export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
    echo "=== the compiled hot path (python/kjit/_fast.c, built here)"
    if build_python_extension; then pass "python extension step"; else fail "python extension step"; fi
}

# dask_site DIR: makes Dask and distributed importable, for tests/gpu/dask.sh
# and dask_cpu_scaling.sh: this machine's Python's own when it has them (sets
# dask_path empty), else the bundle's wheels (python/dask-wheels, made for
# the build machine's Python and, where found, 3.10 to 3.13) installed into
# DIR (sets dask_path=DIR, for PYTHONPATH).  Prints where they came from, or
# why there are none, and then fails.
dask_site() {
    dask_path=
    if python3 -c 'import dask.array, distributed' 2>/dev/null; then
        echo "dask $(python3 -c 'import dask; print(dask.__version__)') from this machine's Python"
        return 0
    fi
    if [ -d "$root/python/dask-wheels" ]; then
        # Each package by name, so that pip picks the wheel this Python can take.
        local names
        names=$(ls "$root/python/dask-wheels" | sed 's/-.*//' | sort -u)
        if python3 -m pip install -q --no-index --no-deps --find-links "$root/python/dask-wheels" \
                --target "$1" $names > "$work/pip.log" 2>&1 &&
           PYTHONPATH=$1 python3 -c 'import dask.array, distributed' 2>>"$work/pip.log"; then
            dask_path=$1
            echo "dask from the bundle's wheels (python/dask-wheels)"
            return 0
        fi
        tail -3 "$work/pip.log"
    fi
    echo "skipped: this machine's Python ($(python3 --version 2>&1)) has no dask and distributed," \
         "and the bundle's wheels do not install here (made for another Python, or absent)"
    return 1
}
