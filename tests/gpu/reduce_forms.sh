#!/usr/bin/env bash
# tests/gpu/reduce_forms.sh [BUNDLE]: the cuda @reduce forms with the WARPS
# form's loop over an output's last block unrolled as before (main:
# KJIT_REDUCE_TAIL_UNROLL=0, cuda's four copies) and not unrolled (new: the
# default, 1), side by side on the GPU machine (issue 25, item 1;
# docs/performance.md, "what a @reduce call compiles"):
#   1. the compile cost of a first call: bin/latency --first-call for
#      examples/reduce.kern's dot and vsum (f32, f64), PTX, ptxas and the
#      module load, KJIT_BENCH_CLOCK=thread, median of 5 new processes;
#   2. the run time of the GPU benchmark's reduce rows (sum f32 1e8, dot f32
#      1e8, the sums along axis 1 and 0 of 10000x10000; tests/bench/bench_gpu.cu,
#      kjit's ms beside CUB's), the two variants alternately, 3 rounds each,
#      each round in a new process with a fresh cache.
# The switch is read when a form is made and is not part of the cache key:
# each run has a cache folder of its own.  First (0.) the host's cpu table of
# every program's cold compile (bin/latency cpu, thread clock), AVX-512 and
# AVX2 (KJIT_CPU_FEATURES=-avx512f): matmul.kern's block shape (issue 25).
# Prints "N passed, M failed".
set -u
bundle=${1:-build/gpu-bundle}
. "$(dirname "$0")/bundle.sh"
enter_bundle "$bundle"
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
variant_env() { [ "$1" = main ] && echo 0 || echo ""; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1

echo "=== 0. the host's cold compiles (cpu): every program's first launch, AVX-512 and AVX2"
for features in "" -avx512f; do
    echo "--- KJIT_CPU_FEATURES=${features:-(none)}"
    if KJIT_CPU_FEATURES=$features KJIT_BENCH_CLOCK=thread "$root/bin/latency" cpu examples tests/bench \
            > "$work/cpu$features.log" 2>&1; then
        sed -n '/^| program/,$p' "$work/cpu$features.log"
        pass "cpu program table ${features:-avx512}"
    else
        cat "$work/cpu$features.log"
        fail "cpu program table ${features:-avx512}"
    fi
done

echo "=== 1. first call on cuda (PTX, ptxas, load), ms of thread CPU time, median of 5"
printf '| call | main (tail unrolled 4x) | new (tail not unrolled) |\n| --- | ---: | ---: |\n'
ok=1
for spec in cuda:dot:0 cuda:dot:1 cuda:vsum:0 cuda:vsum:1; do
    row="| $spec"
    for v in main new; do
        runs=""
        for r in 1 2 3 4 5; do
            out=$(KJIT_REDUCE_TAIL_UNROLL=$(variant_env $v) KJIT_BENCH_CLOCK=thread \
                  "$root/bin/latency" --first-call examples/reduce.kern "$spec" 2>&1) || { ok=0; echo "$out"; }
            runs="$runs $(echo "$out" | awk 'NR == 1 {print $1}')"
        done
        row="$row | $(echo $runs | tr ' ' '\n' | sort -g | sed -n 3p) ms"
    done
    echo "$row |"
done
[ "$ok" = 1 ] && pass "first calls, both variants" || fail "first calls, both variants"

echo "=== 2. the GPU benchmark's reduce rows (kjit ms, CUB ms), 3 rounds a variant"
if nvcc -O3 -arch=sm_90 -std=c++17 -Itests/bench -o "$work/bench_gpu" tests/bench/bench_gpu.cu \
        -L"$root/bin" -lkjit -Xlinker -rpath="$root/bin" > "$work/nvcc.log" 2>&1; then
    ok=1
    for round in 1 2 3; do
        for v in main new; do
            KJIT_REDUCE_TAIL_UNROLL=$(variant_env $v) KJIT_CACHE_DIR=$work/cache-$v-$round \
                "$work/bench_gpu" tests/bench > "$work/$v.$round.txt" 2>&1 || { ok=0; tail -5 "$work/$v.$round.txt"; }
        done
    done
    python3 - "$work" <<'PY'
import statistics, sys
work = sys.argv[1]
rows = ["sum_f32_1e8", "dot_f32_1e8", "sum_axis1_10000x10000", "sum_axis0_10000x10000"]
ms = {}
for v in ("main", "new"):
    for r in (1, 2, 3):
        for line in open(f"{work}/{v}.{r}.txt"):
            p = line.split()
            if len(p) == 3 and p[0] in rows:
                ms.setdefault((v, p[0]), []).append((float(p[1]), float(p[2])))
print("| row | main kjit ms (3 rounds) | new kjit ms (3 rounds) | new / main (medians) | CUB ms |")
print("| --- | --- | --- | ---: | ---: |")
for row in rows:
    a, b = ms.get(("main", row), []), ms.get(("new", row), [])
    if not a or not b:
        print(f"| {row} | missing | missing | - | - |")
        continue
    ka, kb = [x[0] for x in a], [x[0] for x in b]
    cub = statistics.median([x[1] for x in a + b])
    print(f"| {row} | {', '.join(f'{x:.4f}' for x in ka)} | {', '.join(f'{x:.4f}' for x in kb)} | "
          f"{statistics.median(kb) / statistics.median(ka):.3f} | {cub:.4f} |")
PY
    [ "$ok" = 1 ] && pass "reduce rows, both variants" || fail "reduce rows, both variants"
else
    cat "$work/nvcc.log"
    fail "nvcc tests/bench/bench_gpu.cu"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
