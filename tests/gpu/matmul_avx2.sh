#!/usr/bin/env bash
# tests/gpu/matmul_avx2.sh [BUNDLE] [ROUNDS]: tests/bench/matmul.kern on
# AVX2 (KJIT_CPU_FEATURES=-avx512f) beside OpenBLAS's AVX2 kernel (NumPy's
# `@`, OPENBLAS_CORETYPE=Haswell, one thread), and for reference AVX-512
# beside OpenBLAS's own pick, in one run, interleaved (issue 25: "the matrix
# multiply within 2x of OpenBLAS on cpu (f64)"; docs/performance.md, "matmul
# on AVX2 against OpenBLAS's Haswell kernel").  bench_cpu's `matmul f64 512`
# row (thread clock, median of 5) and NumPy's `@` (thread clock, median of
# 15), ROUNDS rounds (default 5) taken in turn; prints each round, the
# medians and the ratios, and the kernel OpenBLAS says it runs
# (openblas_get_corename: a CORETYPE it cannot run falls back, and the
# ratio would be against the wrong kernel).  Beside the kernel on AVX2,
# the same with KJIT_SIMD_FISSION=0: its k loop whole, whose 16
# accumulators, 4 b vectors and broadcast spill from AVX2's 16 ymm
# registers, where the lowering now runs it as two loops of 8 accumulators
# (compiler/backend/codegen_simd_fission.c; docs/performance.md): what the
# split gains; and the kernel written with fma() (bench_cpu's row "matmul f64
# 512, fma() step"), each product and sum rounded once as OpenBLAS's are.
# About 70 s on the 2-core machine.  Prints "N passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
rounds=${2:-5}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
export KJIT_CACHE=off
start_counts
build_bench_programs bench_cpu || { fail "bench_cpu does not build here"; echo "$passed passed, $failed failed"; exit 1; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
describe_cpu
cat > "$work/np.py" <<'PY'
import ctypes, glob, os, statistics, sys, time
import numpy as np
if sys.argv[1:] == ["core"]:
    # the kernel OpenBLAS runs: the library NumPy loaded (numpy.libs' copy or
    # the system's), its openblas_get_corename under whichever suffix it has
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*.so*"))
    for path in libs + ["libopenblas.so.0", "libopenblas.so"]:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(lib, name):
                f = getattr(lib, name)
                f.restype = ctypes.c_char_p
                print(f().decode())
                sys.exit(0)
    print("unknown")
    sys.exit(0)
rng = np.random.default_rng(7)
a = rng.random((512, 512)); b = rng.random((512, 512)); c = np.empty((512, 512))
np.matmul(a, b, out=c)
t = []
for _ in range(15):
    t0 = time.thread_time(); np.matmul(a, b, out=c); t.append((time.thread_time() - t0) * 1e3)
print(f"{statistics.median(t):.3f}")
PY
haswell() { OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 "$@"; }
native() { OPENBLAS_NUM_THREADS=1 "$@"; }
core_haswell=$(haswell python3 "$work/np.py" core)
core_native=$(native python3 "$work/np.py" core)
echo "OpenBLAS's kernel: OPENBLAS_CORETYPE=Haswell: $core_haswell; unset: $core_native"
[ "$core_haswell" = Haswell ] && pass "OpenBLAS runs its Haswell kernel" ||
    fail "OpenBLAS runs $core_haswell, not Haswell: the AVX2 ratio would be against the wrong kernel"

# row FEATURES [ENV...]: bench_cpu's matmul row in ms (median of 5); with
# MATMUL_ROW="fma() step" its row of the kernel written with fma()
row() {
    local features=$1
    shift
    env "$@" KJIT_CPU_FEATURES="$features" KJIT_BENCH_CLOCK=thread KJIT_BENCH_TARGETS=cpu \
        KJIT_BENCH_ONLY="${MATMUL_ROW:-matmul f64 512 (4x4}" "$work/bench_cpu" examples 5 "$root/tests/bench" 2>&1 |
        grep -o '[0-9.]*}}' | tr -d '}'
}
echo "=== matmul f64 512, ms (thread clock): kjit's row (median of 5) and NumPy's @ on one thread (median of 15), $rounds rounds"
k2='' h='' k5='' n='' one='' f2='' f5='' ok=1
for round in $(seq "$rounds"); do
    a=$(row -avx512f); b=$(haswell python3 "$work/np.py"); c=$(row ""); d=$(native python3 "$work/np.py")
    e=$(row -avx512f KJIT_SIMD_FISSION=0)
    f=$(MATMUL_ROW="fma() step" row -avx512f); g=$(MATMUL_ROW="fma() step" row "")
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$d" ] && [ -n "$e" ] && [ -n "$f" ] && [ -n "$g" ] || ok=0
    echo "round $round: kjit AVX2 $a, OpenBLAS Haswell $b; kjit AVX-512 $c, OpenBLAS $core_native $d; kjit AVX2 one k loop $e; fma() AVX2 $f, AVX-512 $g"
    k2="$k2 $a" h="$h $b" k5="$k5 $c" n="$n $d" one="$one $e" f2="$f2 $f" f5="$f5 $g"
done
[ "$ok" = 1 ] && pass "every round timed" || fail "a round without a time"
m_k2=$(echo "$k2" | median) m_h=$(echo "$h" | median) m_k5=$(echo "$k5" | median)
m_n=$(echo "$n" | median) m_one=$(echo "$one" | median)
m_f2=$(echo "$f2" | median) m_f5=$(echo "$f5" | median)
awk -v a="$m_k2" -v b="$m_h" -v c="$m_k5" -v d="$m_n" -v e="$m_one" -v f="$m_f2" -v g="$m_f5" \
    -v core="$core_native" 'BEGIN {
    printf "medians: kjit AVX2 %.2f, OpenBLAS Haswell %.2f: %.2fx\n", a, b, a / b
    printf "         kjit AVX-512 %.2f, OpenBLAS %s %.2f: %.2fx\n", c, core, d, c / d
    printf "         kjit AVX2 against OpenBLAS %s: %.2fx\n", core, a / d
    printf "         kjit AVX2 one k loop (KJIT_SIMD_FISSION=0) %.2f: %.2fx OpenBLAS Haswell\n", e, e / b
    printf "         fma() step: AVX2 %.2f, %.2fx OpenBLAS Haswell; AVX-512 %.2f, %.2fx OpenBLAS %s\n", f, f / b, g, g / d, core }'
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
