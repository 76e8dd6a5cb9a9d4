#!/usr/bin/env bash
# tests/gpu/matmul_cpu.sh [BUNDLE]: tests/bench/matmul.kern on the GPU
# machine's own CPU (issue 25: "the matrix multiply within 2x of OpenBLAS on
# cpu (f64), with the gap documented"; docs/performance.md, "matmul on the
# cpu: where the time goes"), before and after in one run, from the bundle
# `make gpu-bundle` made:
#   before: main's layout of the split form's per-thread arrays
#           (KJIT_SIMD_THREAD_ARRAYS=0: 1024 elements each, 16-byte aligned);
#   after:  the bundle's (a cache line longer, aligned to a line);
#   fma:    (run time only) bench_cpu's row "matmul f64 512, fma() step":
#           the kernel with its step written `acc[i, j] = fma(av, bv[j],
#           acc[i, j])` (its check wants fma chains).
#   1. the run time: bench_cpu's matmul f64 512 row (thread clock, median of
#      5), before, after and fma alternately, 5 rounds, AVX-512 and AVX2
#      (KJIT_CPU_FEATURES=-avx512f), beside NumPy's `@` on one OpenBLAS
#      thread (thread clock) and on all (wall);
#   2. where the time goes: the same row (after) for variants of the kernel
#      that leave a part out or make it cheap (timed unchecked,
#      KJIT_BENCH_UNCHECKED=1), 3 rounds each, both ISAs;
#   3. the floor of the inner loop on this CPU: a C loop of independent
#      vector multiply-then-add steps (and of FMAs) at the width of
#      -march=native, scaled to matmul's 512^3 steps; and the kernel's k
#      loop written in C with AVX-512 intrinsics (gcc -O3, tiles in L1);
#   4. the compile of the first launch (bin/latency --program FILE 1, the
#      16x16 shape), before and after, 3 new processes each, both ISAs.
# (The table of every program's cold compile that mmcpu's version printed is
# gone: tests/gpu/compile_threads.sh and reduce_compile.sh print theirs.)
# Takes about two minutes (2m12s on the 2-core machine, busy).  Prints "N
# passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
export KJIT_CACHE=off
start_counts
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# the kernel's variants, each a folder holding a matmul.kern (and the others)
mkvariant() { # NAME PYTHON-EXPRESSION-OF-src
    mkdir -p "$work/$1"
    cp tests/bench/*.kern "$work/$1/"
    python3 - "$work/$1/matmul.kern" "$2" <<'PY' || fail "the variant $1 not made"
import sys
path, expr = sys.argv[1], sys.argv[2]
src = open(path).read()
out = eval(expr, {"src": src})
if out == src:
    sys.exit("unchanged")
open(path, "w").write(out)
PY
}
tiles='"            at[ty + 16 * l, tx] = r < n && k0 + tx < depth ? a[r, k0 + tx] : 0.0;\n"'
btile='"            bt[ty, tx + 16 * l] = k0 + ty < depth && s < m ? b[k0 + ty, s] : 0.0;\n"'
mkvariant no_tile_loads "src.replace($tiles, '').replace($btile, '')"
mkvariant no_arithmetic 'src[:src.index("        for k in range(TK) {")] + src[src.index("        syncthreads();\n    }"):]'
mkvariant a_cached 'src.replace("a[r, k0 + tx]", "a[r, tx]")'
mkvariant b_cached 'src.replace("b[k0 + ty, s]", "b[ty, s]")'
mkvariant no_multiply 'src.replace("acc[i, j] += av * bv[j];", "acc[i, j] += bv[j];")'

cp bin/libkjit.so "$work/"
flags="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Itests/bench"
gcc $flags -o "$work/bench_cpu" tests/bench/bench_cpu.c -L"$work" -lkjit -lm -Wl,-rpath,"$work" ||
    fail "the benchmark programs do not build here"
# before / after COMMAND...: COMMAND with main's layout or the bundle's
before() { KJIT_SIMD_THREAD_ARRAYS=0 "$@"; }
after() { "$@"; }
fma() { MATMUL_ROW="fma() step" "$@"; }
describe_cpu
lscpu 2>/dev/null | grep -E '^(L1d cache|L2 cache|L3 cache|CPU max MHz):' | tr -s ' ' | tr '\n' ';'
echo

# row DIR [ENV...]: bench_cpu's matmul row in ms (median of 5); the fma()
# row with MATMUL_ROW="fma() step"
row() {
    local dir=$1
    shift
    env "$@" KJIT_BENCH_CLOCK=thread KJIT_BENCH_TARGETS=cpu KJIT_BENCH_ONLY="${MATMUL_ROW:-matmul f64 512 (4x4}" \
        "$work/bench_cpu" examples 5 "$dir" 2>&1 | grep -o '[0-9.]*}}' | tr -d '}'
}

echo "=== 1. matmul f64 512 run time, ms (thread clock, median of 5 a round), 5 rounds alternately"
ok=1
for features in "" -avx512f; do
    declare -A ms=()
    for round in 1 2 3 4 5; do
        for v in before after fma; do
            t=$($v row tests/bench KJIT_CPU_FEATURES=$features)
            [ -n "$t" ] || { ok=0; echo "no time: $v ${features:-AVX-512}"; }
            ms[$v]="${ms[$v]:-} $t"
        done
    done
    for v in before after fma; do
        echo "${features:-AVX-512} $v:${ms[$v]} (median $(echo ${ms[$v]} | median))"
    done
    unset ms
done
python3 - <<'PY'
import os, subprocess, sys
code = """
import numpy as np, time, statistics, sys
clock = time.thread_time if sys.argv[1] == "thread" else time.perf_counter
rng = np.random.default_rng(7)
a = rng.random((512, 512)); b = rng.random((512, 512)); c = np.empty((512, 512))
np.matmul(a, b, out=c)
t = []
for _ in range(15):
    t0 = clock(); np.matmul(a, b, out=c); t.append((clock() - t0) * 1e3)
print(f"{statistics.median(t):.3f}")
"""
for label, env, clock in (("one OpenBLAS thread, thread clock", {"OPENBLAS_NUM_THREADS": "1"}, "thread"),
                          ("OpenBLAS's threads, wall clock", {}, "wall")):
    out = subprocess.run([sys.executable, "-c", code, clock], env=dict(os.environ, **env),
                         capture_output=True, text=True)
    print(f"NumPy @ 512 f64, {label}: {out.stdout.strip() or out.stderr.strip()[-200:]} ms")
PY
[ "$ok" = 1 ] && pass "matmul run time, both ISAs" || fail "matmul run time, both ISAs"

echo "=== 2. where the time goes: the row (after) for variants of the kernel, ms (median of 5 a round), 3 rounds"
echo "  full: tests/bench/matmul.kern; no_tile_loads: the two tile stores gone (the compute on whatever the"
echo "  tiles hold); no_arithmetic: the k loop gone (tile loads, barriers, accumulators' init and stores);"
echo "  a_cached / b_cached: every tile of a (b) read from its first columns (rows), in cache;"
echo "  no_multiply: acc += bv[j] (half the vector arithmetic)"
ok=1
for features in "" -avx512f; do
    line="${features:-AVX-512}:"
    for v in full no_tile_loads no_arithmetic a_cached b_cached no_multiply; do
        dir=$work/$v
        [ $v = full ] && dir=tests/bench
        runs=
        for round in 1 2 3; do
            t=$(row "$dir" KJIT_CPU_FEATURES=$features KJIT_BENCH_UNCHECKED=1)
            [ -n "$t" ] || { ok=0; echo "no time: $v ${features:-AVX-512}"; }
            runs="$runs $t"
        done
        line="$line $v $(echo $runs | median) ($runs);"
    done
    echo "$line"
done
[ "$ok" = 1 ] && pass "the parts of the time" || fail "the parts of the time"

echo "=== 3. the inner loop's floor: independent vector multiply-then-add steps (and FMAs), -march=native"
cat > "$work/peak.c" <<'C'
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#ifdef __AVX512F__
#define W 8
typedef __m512d v;
#define MUL _mm512_mul_pd
#define ADD _mm512_add_pd
#define FMADD _mm512_fmadd_pd
#define SET _mm512_set1_pd
#else
#define W 4
typedef __m256d v;
#define MUL _mm256_mul_pd
#define ADD _mm256_add_pd
#define FMADD _mm256_fmadd_pd
#define SET _mm256_set1_pd
#endif
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
/* Independent accumulators, each a step an iteration: 8 on 8 different
 * products (x_i y_k, which no compiler merges) for multiply then add (2
 * ports, 2 operations a step: 8 cycles for 8, over the add's latency), 12
 * for the FMA (one operation a step: 8 would wait on its latency of 4) */
#define STEPS8(OP)                                                               \
    OP(a0, x0, y0) OP(a1, x1, y0) OP(a2, x2, y0) OP(a3, x3, y0)                  \
    OP(a4, x0, y1) OP(a5, x1, y1) OP(a6, x2, y1) OP(a7, x3, y1)
#define STEPS12(OP) STEPS8(OP) OP(a8, x0, y0) OP(a9, x1, y0) OP(a10, x2, y1) OP(a11, x3, y1)
#define MA(a, x, y) a = ADD(a, MUL(x, y));
#define FM(a, x, y) a = FMADD(x, y, a);
#define RUN(COUNT, OP, NAME)                                                     \
    {                                                                            \
        double best = 1e9;                                                       \
        v a0 = SET(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
        v a8 = a0, a9 = a0, a10 = a0, a11 = a0;                                  \
        v x0 = SET(1e-9), x1 = SET(2e-9), x2 = SET(3e-9), x3 = SET(4e-9);        \
        v y0 = SET(1.0), y1 = SET(0.5);                                          \
        for (int rep = 0; rep < 5; rep++) {                                      \
            double t0 = now();                                                   \
            for (long k = 0; k < n; k++) {                                       \
                STEPS##COUNT(OP)                                                 \
                __asm__ volatile("" : "+x"(x0), "+x"(y0));                       \
            }                                                                    \
            double t = now() - t0;                                               \
            best = t < best ? t : best;                                          \
        }                                                                        \
        v s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))); \
        s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                             \
        double per = best / (n * (double)COUNT);                                 \
        printf("%s: %.3f ns a %d-lane step; matmul 512 (512^3 / %d steps): %.3f ms (%g)\n", \
               NAME, per * 1e9, W, W, per * 512.0 * 512 * 512 / W * 1e3, s[0]);  \
    }
int main(void)
{
    long n = 20000000;
    RUN(8, MA, "multiply then add")
    RUN(12, FM, "fma")
    return 0;
}
C
for features in "" -avx512f; do
    march=-march=native
    [ -n "$features" ] && march="-march=native -mno-avx512f"
    if gcc -O2 $march -ffp-contract=off -o "$work/peak$features" "$work/peak.c" 2>"$work/peak.err"; then
        echo "--- ${features:-AVX-512}"
        "$work/peak$features"
    else
        cat "$work/peak.err"
        fail "the floor's program does not build ($features)"
    fi
done

# the k loop as C intrinsics (AVX-512): the compute part of the kernel, its
# tiles in L1, at -O3, for the kernel's "no tile loads" to be read against
cat > "$work/kloop.c" <<'C'
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double at[64 * 16] __attribute__((aligned(64))), bt[16 * 64] __attribute__((aligned(64)));
static double acc[16][256 + 8] __attribute__((aligned(64)));
int main(void)
{
    for (int i = 0; i < 1024; i++) at[i] = 1e-9 * i, bt[i] = 1.0 - 1e-9 * i;
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now();
        for (long phase = 0; phase < 64 * 32; phase++) { /* blocks x k tiles */
            for (int ty = 0; ty < 16; ty++)
                for (int c = 0; c < 2; c++) {
                    int lane = ty * 16 + c * 8;
                    __m512d a[16];
                    for (int q = 0; q < 16; q++) a[q] = _mm512_load_pd(&acc[q][lane]);
                    for (int k = 0; k < 16; k++) {
                        __m512d b[4];
                        for (int j = 0; j < 4; j++) b[j] = _mm512_loadu_pd(&bt[k * 64 + c * 8 + 16 * j]);
                        for (int i = 0; i < 4; i++) {
                            __m512d av = _mm512_set1_pd(at[(ty + 16 * i) * 16 + k]);
                            for (int j = 0; j < 4; j++)
                                a[i * 4 + j] = _mm512_add_pd(a[i * 4 + j], _mm512_mul_pd(av, b[j]));
                        }
                    }
                    for (int q = 0; q < 16; q++) _mm512_store_pd(&acc[q][lane], a[q]);
                }
            __asm__ volatile("" : : "r"(acc) : "memory");
        }
        double t = now() - t0;
        best = t < best ? t : best;
    }
    printf("the k loop in C (gcc -O3, intrinsics, tiles in L1): %.3f ms\n", best * 1e3);
    return 0;
}
C
if grep -q avx512f /proc/cpuinfo && gcc -O3 -march=native -ffp-contract=off -o "$work/kloop" "$work/kloop.c"; then
    "$work/kloop"
fi

echo "=== 4. matmul.kern's first launch (16x16 shape): compile ms (thread clock), median of 3, before / after"
for features in "" -avx512f; do
    declare -A runs=()
    for r in 1 2 3; do
        for v in before after; do
            out=$($v env KJIT_CPU_FEATURES=$features KJIT_BENCH_CLOCK=thread \
                  bin/latency --program tests/bench/matmul.kern 1 2>&1)
            runs[$v]="${runs[$v]:-} $(echo "$out" | awk 'NR == 1 {print $1}')"
        done
    done
    echo "${features:-AVX-512}: before $(echo ${runs[before]} | median) (${runs[before]}), after" \
         "$(echo ${runs[after]} | median) (${runs[after]})"
    unset runs
done
pass "first launch compiles"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
