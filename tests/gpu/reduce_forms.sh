#!/usr/bin/env bash
# tests/gpu/reduce_forms.sh [BUNDLE]: the cuda @reduce forms in three
# variants side by side on the GPU machine (issue 25, item 1;
# docs/performance.md, "one kernel's compile"): main (the default: the WARPS
# form's loops over an output's full blocks and over its last block unrolled
# four times), tail1 (the last block's loop not unrolled,
# KJIT_REDUCE_TAIL_UNROLL=1: the sum along axis 1 ran 5% slower on an H200)
# and warps2 (the full blocks' loop unrolled twice, KJIT_REDUCE_WARPS_UNROLL=2):
# cheaper to compile, to be made the default only where they run as fast:
#   1. the compile cost of a first call: bin/latency --first-call for
#      examples/reduce.kern's dot and vsum (f32, f64), PTX, ptxas and the
#      module load, KJIT_BENCH_CLOCK=thread, median of 5 new processes;
#   2. the run time of the GPU benchmark's reduce rows (sum f32 1e8, dot f32
#      1e8, the sums along axis 1 and 0 of 10000x10000; tests/bench/bench_gpu.cu,
#      kjit's ms beside CUB's), the variants alternately, 3 rounds each,
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
variants="main tail1 warps2"
# with_variant V COMMAND...: COMMAND under variant V's switches
with_variant() {
    local v=$1
    shift
    case $v in
        tail1) KJIT_REDUCE_TAIL_UNROLL=1 "$@" ;;
        warps2) KJIT_REDUCE_WARPS_UNROLL=2 "$@" ;;
        *) "$@" ;;
    esac
}

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
printf '| call | main (both loops 4x) | tail1 (last block 1x) | warps2 (full blocks 2x) |\n| --- | ---: | ---: | ---: |\n'
ok=1
for spec in cuda:dot:0 cuda:dot:1 cuda:vsum:0 cuda:vsum:1; do
    row="| $spec"
    for v in $variants; do
        runs=""
        for r in 1 2 3 4 5; do
            out=$(with_variant $v env KJIT_BENCH_CLOCK=thread \
                  "$root/bin/latency" --first-call examples/reduce.kern "$spec" 2>&1) || { ok=0; echo "$out"; }
            runs="$runs $(echo "$out" | awk 'NR == 1 {print $1}')"
        done
        row="$row | $(echo $runs | tr ' ' '\n' | sort -g | sed -n 3p) ms"
    done
    echo "$row |"
done
[ "$ok" = 1 ] && pass "first calls, both variants" || fail "first calls, both variants"

echo "=== 2. the GPU benchmark's reduce rows (kjit ms, CUB ms), 3 rounds a variant, alternately"
if nvcc -O3 -arch=sm_90 -std=c++17 -Itests/bench -o "$work/bench_gpu" tests/bench/bench_gpu.cu \
        -L"$root/bin" -lkjit -Xlinker -rpath="$root/bin" > "$work/nvcc.log" 2>&1; then
    ok=1
    for round in 1 2 3; do
        for v in $variants; do
            with_variant $v env KJIT_CACHE_DIR="$work/cache-$v-$round" \
                "$work/bench_gpu" tests/bench > "$work/$v.$round.txt" 2>&1 || { ok=0; tail -5 "$work/$v.$round.txt"; }
        done
    done
    python3 - "$work" <<'PY'
import statistics, sys
work = sys.argv[1]
rows = ["sum_f32_1e8", "dot_f32_1e8", "sum_axis1_10000x10000", "sum_axis0_10000x10000"]
variants = ("main", "tail1", "warps2")
ms = {}
for v in variants:
    for r in (1, 2, 3):
        for line in open(f"{work}/{v}.{r}.txt"):
            p = line.split()
            if len(p) == 3 and p[0] in rows:
                ms.setdefault((v, p[0]), []).append((float(p[1]), float(p[2])))
print("| row | " + " | ".join(f"{v} kjit ms (3 rounds)" for v in variants) +
      " | tail1 / main | warps2 / main | CUB ms |")
print("| --- |" + " --- |" * len(variants) + " ---: | ---: | ---: |")
for row in rows:
    runs = {v: [x[0] for x in ms.get((v, row), [])] for v in variants}
    if not all(runs.values()):
        print(f"| {row} |" + " missing |" * len(variants) + " - | - | - |")
        continue
    med = {v: statistics.median(runs[v]) for v in variants}
    cub = statistics.median([x[1] for v in variants for x in ms[(v, row)]])
    print(f"| {row} | " + " | ".join(", ".join(f"{x:.4f}" for x in runs[v]) for v in variants) +
          f" | {med['tail1'] / med['main']:.3f} | {med['warps2'] / med['main']:.3f} | {cub:.4f} |")
PY
    [ "$ok" = 1 ] && pass "reduce rows, both variants" || fail "reduce rows, both variants"
else
    cat "$work/nvcc.log"
    fail "nvcc tests/bench/bench_gpu.cu"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
