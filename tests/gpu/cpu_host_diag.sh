#!/usr/bin/env bash
# tests/gpu/cpu_host_diag.sh [BUNDLE]: a short run (about a minute) on the GPU
# machine's own CPU of `make bench-cpu`'s rows that were behind Numba there
# (issue 25: stencil3d, whose SIMD code ran slower than its scalar code, and
# the inc rows), each kjit row under several settings side by side, from the
# bundle `make gpu-bundle` made.  Built here against the bundle's libkjit.so
# (bundle.sh's build_bench_programs).
#
# Prints one table, rows by column:
# - bench_cpu's stencil3d and inc rows (KJIT_BENCH_ONLY) as the full table
#   runs them (cpu then parallel in one process, the cache on), cpu alone,
#   cpu with KJIT_CACHE=off, with KJIT_CPU_SIMD=0 and KJIT_CACHE=off (the
#   table's own column), with KJIT_CPU_FEATURES=-avx512f (AVX2 lanes) and
#   with KJIT_CPU_SPECIALISE=0 (the general code, not the block shape's);
#   NumPy and Numba (tests/bench/bench_cpu.py);
# - tests/bench/cpu_diag.c: stencil3d with its arrays at chosen offsets in
#   their pages, one almost empty call's cost on cpu and parallel, and the
#   parallel 1e5 row at 1 to 16 workers, under the same settings.
# KJIT_BENCH_REPEAT (7) samples a median; KJIT_NUMBA_WHEELS as for
# bench_cpu_host.sh.
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
repeat=${KJIT_BENCH_REPEAT:-7}
build_bench_programs bench_cpu cpu_diag || { echo "cpu_host_diag.sh: the programs do not build here"; exit 1; }

rows="stencil3d|inc i32"
start=$SECONDS
# run NAME ENV... -- COMMAND...: run_json, saying what failed.
run() {
    run_json "$@" || { echo "cpu_host_diag.sh: $1 failed:"; tail -5 "$work/$1.err"; }
}
run "as the table" KJIT_BENCH_ONLY="$rows" -- "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "cpu alone" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu -- "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "cache off" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu KJIT_CACHE=off -- \
    "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "SIMD=0, cache off" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu KJIT_CACHE=off KJIT_CPU_SIMD=0 -- \
    "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "-avx512f" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu KJIT_CPU_FEATURES=-avx512f -- \
    "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "SPECIALISE=0" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu KJIT_CPU_SPECIALISE=0 -- \
    "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
run "diag" X=1 -- "$work/cpu_diag" "$bench" "$repeat"
run "diag SIMD=0" KJIT_CPU_SIMD=0 KJIT_CACHE=off -- "$work/cpu_diag" "$bench" "$repeat"
run "diag -avx512f" KJIT_CPU_FEATURES=-avx512f -- "$work/cpu_diag" "$bench" "$repeat"
numba_path=$(numba_pythonpath "$work/numba-site")
run "numba" KJIT_BENCH_ONLY="$rows" PYTHONPATH="$numba_path" -- python3 "$bench/bench_cpu.py" "$repeat"

describe_cpu
"$root/bin/kjit" info | grep '^host cpu' | cut -c1-60
python3 - "$work" "$((SECONDS - start))" <<'PY'
import json, os, sys
sys.path.insert(0, "tests/gpu")  # run from the bundle's root (enter_bundle)
from work_json import json_loader
work, seconds = sys.argv[1], sys.argv[2]
load = json_loader(work)
bench = ["as the table", "cpu alone", "cache off", "SIMD=0, cache off", "-avx512f", "SPECIALISE=0"]
data = {name: load(name) for name in bench}
numba = load("numba")
names = []
for name in bench:
    for target in ("cpu", "parallel"):
        for row in data[name].get(target, {}):
            if row not in names:
                names.append(row)
def cell(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.2f}"
print(f"ms, median of samples, wall clock; kjit cpu unless named parallel ({seconds} s in all)\n")
print("| row | " + " | ".join(bench) + " | parallel (as the table) | NumPy | Numba | Numba parallel |")
print("| --- |" + " ---: |" * (len(bench) + 4))
for row in names:
    cells = [cell(data[name].get("cpu", {}).get(row)) for name in bench]
    cells.append(cell(data["as the table"].get("parallel", {}).get(row)))
    ref = numba.get(row, {})
    cells += [cell(ref.get(k)) for k in ("numpy", "numba", "numba_parallel")]
    print(f"| {row} | " + " | ".join(cells) + " |")
diag = ["diag", "diag SIMD=0", "diag -avx512f"]
ddata = {name: load(name) for name in diag}
print("\ntests/bench/cpu_diag.c (ms; `call` rows in us):\n")
print("| row | SIMD (default) | KJIT_CPU_SIMD=0 | KJIT_CPU_FEATURES=-avx512f |")
print("| --- | ---: | ---: | ---: |")
rows = []
for name in diag:
    for row in ddata[name]:
        if row not in rows:
            rows.append(row)
for row in rows:
    print(f"| {row} | " + " | ".join(cell(ddata[name].get(row)) for name in diag) + " |")
PY
