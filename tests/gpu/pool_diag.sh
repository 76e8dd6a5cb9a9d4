#!/usr/bin/env bash
# tests/gpu/pool_diag.sh [BUNDLE]: the parallel target's small calls on the
# GPU machine's own CPU (issue 25: "every row at or ahead of Numba on
# parallel"; the block sum was behind Numba parallel there, the inc rows,
# stencil3d 32^3 and delay-and-sum must stay where they are), kjit's thread
# pool before and after its adaptive spin, and its wake-up tree (an option;
# runtime/pool.c),
# from the bundle `make gpu-bundle` made.
# About two minutes.  Built here against the bundle's libkjit.so
# (bundle.sh's build_bench_programs).
#
# Every kjit parallel row under these settings, in ROUNDS interleaved rounds
# (KJIT_POOL_ROUNDS, 3), each a process giving the median of REPEAT calls'
# times (KJIT_BENCH_REPEAT, 7; wall clock), the table showing the median of
# the rounds' medians:
# - "before": KJIT_POOL_SPIN_MAX_US=0, the pool as at main 169fe56: the
#   caller wakes every sleeper itself (one FUTEX_WAKE of up to fifteen), and
#   workers spin a fixed 100 us between runs;
# - "after": the default, a spin window of twice the time between runs, up
#   to 1 ms;
# - "after, tree": KJIT_POOL_WAKE_FAN=2, sleepers woken in a tree (the
#   caller wakes two, each woken two more); "tree only": that with
#   KJIT_POOL_SPIN_MAX_US=0; "after, fan 4": KJIT_POOL_WAKE_FAN=4;
# - "no spin, chain" and "no spin, tree": KJIT_POOL_SPIN_US=0 with fan 0
#   and 2, every call wakes every worker (the wake path alone);
# then kjit cpu (one round), Numba @njit and @njit(parallel=True) with the
# threading layer Numba chose, tests/bench/cpu_diag.c's parallel 1e5 row on
# 1 to 16 workers before and after, and the block sums on parallel alone,
# calls back to back (workers awake: what a call costs besides the wake).
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
repeat=${KJIT_BENCH_REPEAT:-7}
rounds=${KJIT_POOL_ROUNDS:-3}
build_bench_programs bench_simd bench_cpu cpu_diag ||
    { echo "pool_diag.sh: the programs do not build here"; exit 1; }

rows="inc i32|stencil3d f64 32"
start=$SECONDS
# run NAME ENV... -- COMMAND...: run_json, saying what failed.
run() {
    run_json "$@" || { echo "pool_diag.sh: $1 failed:"; tail -5 "$work/$1.err"; }
}
# both NAME ENV...: the bench_cpu and bench_simd rows on parallel.  The
# block sums with every runner in turn, as the table runs them: their
# parallel calls find the workers idle for the scalar C's 0.4 ms, asleep
# after their 100 us of spinning; the inc rows' calls come back to back.
both() {
    local name=$1; shift
    run "$name.cpu" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=parallel "$@" -- \
        "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
    run "$name.simd" "$@" -- "$work/bench_simd" "--repeat=$repeat" \
        --only=block_sum,block_sum_helper "$root/examples" "$bench"
    run "$name.das" "$@" -- "$work/bench_simd" "--repeat=$repeat" --targets=parallel --no-refs \
        --only=das,mandel "$root/examples" "$bench"
}
for r in $(seq 1 "$rounds"); do
    both "before.$r" KJIT_POOL_WAKE_FAN=0 KJIT_POOL_SPIN_MAX_US=0
    both "after.$r" X=1
    both "spin.$r" KJIT_POOL_WAKE_FAN=2
    both "tree.$r" KJIT_POOL_WAKE_FAN=2 KJIT_POOL_SPIN_MAX_US=0
    both "fan4.$r" KJIT_POOL_WAKE_FAN=4
    both "nospinchain.$r" KJIT_POOL_SPIN_US=0 KJIT_POOL_WAKE_FAN=0
    both "nospintree.$r" KJIT_POOL_SPIN_US=0 KJIT_POOL_WAKE_FAN=2
done
for key in before after; do
    envs=(X=1); [ $key = before ] && envs=(KJIT_POOL_WAKE_FAN=0 KJIT_POOL_SPIN_MAX_US=0)
    run "b2b.$key" "${envs[@]}" -- "$work/bench_simd" "--repeat=$repeat" --targets=parallel \
        --no-refs --only=block_sum,block_sum_helper "$root/examples" "$bench"
done
run "cpu.cpu" KJIT_BENCH_ONLY="$rows" KJIT_BENCH_TARGETS=cpu -- \
    "$work/bench_cpu" "$root/examples" "$repeat" "$bench"
# every row (bench_simd.py's Numba needs the inputs of all)
mkdir -p "$work/refs"
run "cpu.simd" X=1 -- "$work/bench_simd" "--repeat=$repeat" --targets=cpu --no-refs \
    "--save-refs=$work/refs" "$root/examples" "$bench"
run "diag.before" KJIT_POOL_WAKE_FAN=0 KJIT_POOL_SPIN_MAX_US=0 -- "$work/cpu_diag" "$bench" "$repeat"
run "diag.after" X=1 -- "$work/cpu_diag" "$bench" "$repeat"
numba_path=$(numba_pythonpath "$work/numba-site")
run "numba.cpu" KJIT_BENCH_ONLY="$rows" PYTHONPATH="$numba_path" -- python3 "$bench/bench_cpu.py" "$repeat"
run "numba.simd" PYTHONPATH="$numba_path" -- python3 "$bench/bench_simd.py" "$work/refs" "$repeat"
layer=$(numba_layer "$numba_path")

describe_cpu
echo "$(nproc) logical cpus; $(echo "$layer" | tail -1)"
python3 - "$work" "$((SECONDS - start))" "$rounds" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "tests/gpu")  # run from the bundle's root (enter_bundle)
from work_json import json_loader
work, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
load = json_loader(work)
def rows_of(name, target):
    """{row: ms} of bench_cpu's and bench_simd's JSON for one setting."""
    out = dict(load(name + ".cpu").get(target, {}))
    out.update(load(name + ".simd").get(target, {}))
    out.update(load(name + ".das").get(target, {}))
    return out
settings = [("before", "before (SPIN_MAX_US=0)"), ("after", "after"),
            ("spin", "after, tree (WAKE_FAN=2)"), ("tree", "tree only (WAKE_FAN=2 SPIN_MAX_US=0)"),
            ("fan4", "after, WAKE_FAN=4"), ("nospinchain", "SPIN_US=0, WAKE_FAN=0"),
            ("nospintree", "SPIN_US=0, WAKE_FAN=2")]
samples = {key: [rows_of(f"{key}.{r}", "parallel") for r in range(1, rounds + 1)]
           for key, _ in settings}
cpu = rows_of("cpu", "cpu")
numba = dict(load("numba.cpu"))
numba.update(load("numba.simd"))
names = []
for key, _ in settings:
    for data in samples[key]:
        for row in data:
            if row not in names:
                names.append(row)
def med(key, row):
    values = [d[row] for d in samples[key] if row in d]
    return statistics.median(values) if values else None
def cell(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.2f}"
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
print(f"\nms, wall clock, kjit parallel: median of {rounds} interleaved rounds' medians "
      f"({seconds} s in all)\n")
print("| row | kjit cpu | " + " | ".join(label for _, label in settings) +
      " | Numba | Numba parallel | before / Numba par. | after / Numba par. | rounds (after) |")
print("| --- |" + " ---: |" * (len(settings) + 5) + " --- |")
for row in names:
    ref = numba.get(row, {})
    npar = ref.get("numba_parallel")
    spread = " ".join(cell(d.get(row)) for d in samples["after"])
    print(f"| {row} | {cell(cpu.get(row))} | " +
          " | ".join(cell(med(key, row)) for key, _ in settings) +
          f" | {cell(ref.get('numba'))} | {cell(npar)} | {ratio(med('before', row), npar)} | "
          f"{ratio(med('after', row), npar)} | {spread} |")
# the serial runners of the block sums' processes: the workers spinning
# longer between the parallel calls must not slow them
print("\nThe block sums' serial runners in the same processes (median of the rounds), ms, "
      "before / after:\n")
print("| row | kjit cpu | hand-SIMD C | scalar C |")
print("| --- | ---: | ---: | ---: |")
def serial(key, row, runner):
    values = [load(f"{key}.{r}.simd").get(runner, {}).get(row) for r in range(1, rounds + 1)]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
for row in load("after.1.simd").get("cpu", {}):
    print(f"| {row} | " + " | ".join(
        f"{cell(serial('before', row, r))} / {cell(serial('after', row, r))}"
        for r in ("cpu", "hand_simd", "scalar_c")) + " |")
b2b = {key: load(f"b2b.{key}").get("parallel", {}) for key in ("before", "after")}
print("\nThe block sums on parallel alone, calls back to back (workers awake), ms:\n")
print("| row | before | after | Numba parallel |")
print("| --- | ---: | ---: | ---: |")
for row in b2b["after"]:
    print(f"| {row} | {cell(b2b['before'].get(row))} | {cell(b2b['after'].get(row))} | "
          f"{cell(numba.get(row, {}).get('numba_parallel'))} |")
before, after = load("diag.before"), load("diag.after")
print("\ntests/bench/cpu_diag.c (ms; `call` rows in us):\n")
print("| row | before | after |")
print("| --- | ---: | ---: |")
for row in after:
    print(f"| {row} | {cell(before.get(row))} | {cell(after.get(row))} |")
PY
