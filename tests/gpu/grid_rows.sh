#!/usr/bin/env bash
# tests/gpu/grid_rows.sh [BUNDLE]: issue 25 item 5 on the GPU machine's own
# CPU (about a minute): the one-line elementwise @kernel (tests/bench/inc.kern,
# inc1 in blocks of 256 and inc2 in blocks of 32 x 8) run as rows of its grid
# (compiler/grid_rows.c, the default) and by blocks (KJIT_CPU_ROWS=0, as
# before), against the same @vectorize, NumPy and Numba, on cpu and parallel,
# with AVX-512 and with KJIT_CPU_FEATURES=-avx512f; the rows and the blocks
# alternate, two rounds each.  Built here against the bundle's libkjit.so
# (bundle.sh's build_bench_programs).
#
# Prints:
# - bench_cpu's "inc i32" rows (KJIT_BENCH_ONLY), median of each round, the
#   better of the two rounds, rows and blocks side by side, and their ratios
#   to the @vectorize; NumPy and Numba (tests/bench/bench_cpu.py);
# - tests/bench/cpu_diag.c's inc section: the three forms over 1e5 i32 with
#   the arrays at byte offsets from a page, rows against blocks;
# - PASS/FAIL: every run checked its results (bench_cpu and cpu_diag exit
#   non-zero on a wrong element).
# - tests/bench/cpu_diag.c's par section (branch par2d): the forms with the
#   rows cut for the pool by threads as kernels' blocks (KJIT_CPU_ROWS_CUT=0,
#   the default), by elements as a @vectorize's (1) or in whole rows (2),
#   all timed in turn in one process, on cpu and on parallel with
#   GRID_ROWS_THREADS (16,8,4) workers, two processes per ISA; the mean of
#   the two processes' medians, and each variant against the @vectorize.
# KJIT_BENCH_REPEAT (7) samples a median; KJIT_NUMBA_WHEELS as for
# bench_cpu_host.sh.  GRID_ROWS_ONLY=par runs the par section alone.
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
start_counts
repeat=${KJIT_BENCH_REPEAT:-7}
build_bench_programs bench_cpu cpu_diag ||
    { echo "grid_rows.sh: the programs do not build here"; echo "0 passed, 1 failed"; exit 1; }

start=$SECONDS
only=${GRID_ROWS_ONLY:-}
# run NAME ENV... -- COMMAND...: run_json, and a PASS or FAIL line.
run() {
    if run_json "$@"; then
        pass "$1"
    else
        fail "$1: $(tail -3 "$work/$1.err")"
    fi
}
for round in 1 2; do
    for isa in avx512 avx2; do
        features=; [ $isa = avx2 ] && features=-avx512f
        run "par $isa $round" KJIT_CPU_FEATURES="$features" KJIT_DIAG_ONLY=par \
            KJIT_DIAG_THREADS="${GRID_ROWS_THREADS:-16,8,4}" -- "$work/cpu_diag" "$bench" 31
        [ "$only" = par ] && continue
        for rows in 1 0; do
            run "bench $isa rows=$rows $round" KJIT_CPU_FEATURES="$features" KJIT_CPU_ROWS=$rows \
                KJIT_BENCH_ONLY="inc i32" -- "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
        done
    done
done
[ "$only" = par ] || for isa in avx512 avx2; do
    features=; [ $isa = avx2 ] && features=-avx512f
    for rows in 1 0; do
        run "diag $isa rows=$rows" KJIT_CPU_FEATURES="$features" KJIT_CPU_ROWS=$rows KJIT_DIAG_ONLY=inc -- \
            "$work/cpu_diag" "$bench" "$repeat"
    done
done
[ "$only" = par ] || numba_path=$(numba_pythonpath "$work/numba-site")
[ "$only" = par ] || env KJIT_BENCH_ONLY="inc i32" PYTHONPATH="$numba_path" python3 "$bench/bench_cpu.py" "$repeat" \
    > "$work/numba.json" 2> "$work/numba.err" || { echo "NumPy/Numba: $(tail -3 "$work/numba.err")"; }

describe_cpu
nproc
python3 - "$work" "$((SECONDS - start))" <<'PY'
import json, os, sys
sys.path.insert(0, "tests/gpu")  # run from the bundle's root (enter_bundle)
from work_json import json_loader
work, seconds = sys.argv[1], sys.argv[2]
load = json_loader(work)
def cell(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.3f}"
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
numba = load("numba")
print(f"ms, median of samples, wall clock, the better of 2 rounds ({seconds} s in all)\n")
for isa in ("avx512", "avx2"):
    def best(rows, target, row):
        got = [load(f"bench {isa} rows={rows} {r}").get(target, {}).get(row) for r in (1, 2)]
        got = [g for g in got if g is not None]
        return min(got) if got else None
    print(f"{isa}:\n")
    print("| row | target | rows | blocks | vectorize | rows/vec | blocks/vec | NumPy | Numba | Numba parallel |")
    print("| --- | --- |" + " ---: |" * 8)
    names = []
    for target in ("cpu", "parallel"):
        for row in load(f"bench {isa} rows=1 1").get(target, {}):
            if "@kernel" in row:
                names.append((target, row))
    for target, row in names:
        vec = best(1, target, row.split(", ")[0] + ", @vectorize")
        r, b = best(1, target, row), best(0, target, row)
        ref = numba.get(row, {}) if target == "cpu" else {}
        nref = numba.get(row, {})
        print(f"| {row} | {target} | {cell(r)} | {cell(b)} | {cell(vec)} | {ratio(r, vec)} | {ratio(b, vec)} | "
              f"{cell(ref.get('numpy'))} | {cell(nref.get('numba'))} | {cell(nref.get('numba_parallel'))} |")
    print()
print("tests/bench/cpu_diag.c, inc at offsets (ms):\n")
print("| row | AVX-512 rows | blocks | AVX2 rows | blocks |")
print("| --- | ---: | ---: | ---: | ---: |")
diag = {k: load(f"diag {k}") for k in ("avx512 rows=1", "avx512 rows=0", "avx2 rows=1", "avx2 rows=0")}
for row in diag["avx512 rows=1"]:
    print(f"| {row} | " + " | ".join(cell(diag[k].get(row)) for k in diag) + " |")
# the par section: "par SIZE VARIANT, TARGET" -> ms; a table per ISA, a row
# per size and target, a column per variant (the mean of the two rounds,
# then its ratio to vinc's)
for isa in ("avx512", "avx2"):
    rounds = [load(f"par {isa} {r}") for r in (1, 2)]
    if not rounds[0]:
        continue
    variants, places = [], []
    for key in rounds[0]:
        head, target = key.rsplit(", ", 1)
        size, variant = head[4:].split(" ", 1)
        if variant not in variants:
            variants.append(variant)
        if (size, target) not in places:
            places.append((size, target))
    def both(key):
        got = [r.get(key) for r in rounds if r.get(key) is not None]
        return sum(got) / len(got) if got else None
    print(f"\npar, {isa}: ms (mean of the two processes' medians of 31), then / vinc\n")
    print("| size, target | " + " | ".join(variants) + " | " + " | ".join(v + " /vec" for v in variants[1:]) + " |")
    print("| --- |" + " ---: |" * (2 * len(variants) - 1))
    for size, target in places:
        ms = [both(f"par {size} {v}, {target}") for v in variants]
        print(f"| {size}, {target} | " + " | ".join(cell(m) for m in ms) + " | " +
              " | ".join(ratio(m, ms[0]) for m in ms[1:]) + " |")
PY
echo "$passed passed, $failed failed"
