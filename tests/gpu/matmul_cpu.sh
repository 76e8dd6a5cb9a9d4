#!/usr/bin/env bash
# tests/gpu/matmul_cpu.sh [BUNDLE]: tests/bench/matmul.kern on the GPU
# machine's own CPU (issue 25; docs/performance.md, "matmul's block shape on
# the cpu, and fma()"), before and after in one run, from the bundle `make
# gpu-bundle` made:
#   before: main's lowering of the block shape (KJIT_SIMD_GUARDED_LOADS=0:
#           guarded loads copied per path; KJIT_SIMD_ROW_CHUNKS=0: a rest
#           chunk under unknown lanes for every row);
#   after:  the bundle's lowering; both on tests/bench/matmul.kern;
#   fma:    (run time only) the bundle's lowering on the kernel with its step
#           written `acc[i, j] = fma(av, bv[j], acc[i, j])` (made here from
#           the file; the check then wants fma chains), to see whether the
#           FMA units close the gap to OpenBLAS on that host.
#   1. the compile of a first launch, AVX-512 and AVX2
#      (KJIT_CPU_FEATURES=-avx512f): bin/latency --program FILE 0 (every
#      function) and 1 (the 16x16 block shape, general variant), thread
#      clock, 5 new processes each, before and after alternately, medians;
#   2. every program of examples/ and tests/bench cold (bin/latency cpu),
#      both ISAs: the goal is each under 250 ms;
#   3. the run time: bench_cpu's matmul f64 512 row (thread clock, median
#      of 5), before, after and fma alternately, 3 rounds, both ISAs, beside
#      NumPy's `@` on one OpenBLAS thread (thread clock) and on all (wall).
# Takes about two minutes.  Prints "N passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
export KJIT_CACHE=off
start_counts
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# the kernel with fma() and the check of its fma chains
mkdir -p "$work/fma"
cp tests/bench/*.kern "$work/fma/"
sed -i 's/acc\[i, j\] += av \* bv\[j\];/acc[i, j] = fma(av, bv[j], acc[i, j]);/' "$work/fma/matmul.kern"
grep -q 'acc\[i, j\] = fma(av, bv\[j\], acc\[i, j\]);' "$work/fma/matmul.kern" || fail "the fma() kernel not made"
cp bin/libkjit.so "$work/"
flags="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Itests/bench"
gcc $flags -o "$work/bench_cpu" tests/bench/bench_cpu.c -L"$work" -lkjit -lm -Wl,-rpath,"$work" &&
    sed 's/want += a\[(size_t)i \* N + k\] \* b\[(size_t)k \* N + j\];/want = fma(a[(size_t)i * N + k], b[(size_t)k * N + j], want);/' \
        tests/bench/bench_cpu.c > "$work/bench_cpu_fma.c" &&
    gcc $flags -o "$work/bench_cpu_fma" "$work/bench_cpu_fma.c" -L"$work" -lkjit -lm -Wl,-rpath,"$work" ||
    fail "the benchmark programs do not build here"
# before / after COMMAND...: COMMAND as main's lowering or the bundle's
before() { KJIT_SIMD_GUARDED_LOADS=0 KJIT_SIMD_ROW_CHUNKS=0 "$@"; }
after() { "$@"; }
fma() { "$@"; }
grep -o 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' '
grep -m1 'model name' /proc/cpuinfo

echo "=== 1. matmul.kern's first launch: compile ms (thread clock), median of 5, before / after"
echo "| ISA | before: functions | before: 16x16 shape | after: functions | after: 16x16 shape |"
echo "| --- | ---: | ---: | ---: | ---: |"
for features in "" -avx512f; do
    declare -A runs=()
    for r in 1 2 3 4 5; do
        for v in before after; do
            file=tests/bench/matmul.kern
            for kind in 0 1; do
                out=$($v env KJIT_CPU_FEATURES=$features KJIT_BENCH_CLOCK=thread bin/latency --program "$file" $kind 2>&1)
                runs[$v$kind]="${runs[$v$kind]:-} $(echo "$out" | awk 'NR == 1 {print $1}')"
            done
        done
    done
    echo "| ${features:-AVX-512} | $(echo ${runs[before0]} | median) | $(echo ${runs[before1]} | median) |" \
         "$(echo ${runs[after0]} | median) | $(echo ${runs[after1]} | median) |"
    echo "  (runs: before ${runs[before1]}; after ${runs[after1]})"
    unset runs
done
pass "first launch compiles"

echo "=== 2. every program cold (cpu), after"
for features in "" -avx512f; do
    echo "--- KJIT_CPU_FEATURES=${features:-(none)}"
    if KJIT_CPU_FEATURES=$features KJIT_BENCH_CLOCK=thread bin/latency cpu examples tests/bench \
            > "$work/cpu$features.log" 2>&1; then
        sed -n '/^| program/,$p' "$work/cpu$features.log"
        pass "cpu program table ${features:-avx512}"
    else
        cat "$work/cpu$features.log"
        fail "cpu program table ${features:-avx512}"
    fi
done

echo "=== 3. matmul f64 512 run time, ms (thread clock, median of 5 a round), 3 rounds alternately"
ok=1
for features in "" -avx512f; do
    declare -A ms=()
    for round in 1 2 3; do
        for v in before after fma; do
            prog=$work/bench_cpu dir=tests/bench
            [ $v = fma ] && prog=$work/bench_cpu_fma dir=$work/fma
            out=$($v env KJIT_CPU_FEATURES=$features KJIT_BENCH_CLOCK=thread KJIT_BENCH_TARGETS=cpu \
                  KJIT_BENCH_ONLY="matmul f64 512" "$prog" examples 5 "$dir" 2>&1) || { ok=0; echo "$out"; }
            ms[$v]="${ms[$v]:-} $(echo "$out" | grep -o '[0-9.]*}}' | tr -d '}')"
        done
    done
    for v in before after fma; do
        echo "${features:-AVX-512} $v:${ms[$v]} (median $(echo ${ms[$v]} | median))"
    done
    unset ms
done
python3 - <<'PY'
import os, time, statistics, subprocess, sys
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
[ "$ok" = 1 ] && pass "matmul run time, both" || fail "matmul run time, both"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
