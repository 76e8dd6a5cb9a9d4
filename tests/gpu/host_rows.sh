#!/usr/bin/env bash
# tests/gpu/host_rows.sh AFTER BEFORE: the two rows of issue 25's host table
# still behind Numba (block sum f32 524288 on parallel, stencil3d f64 32^3 on
# cpu), two bundles of `make gpu-bundle` side by side on the GPU machine's
# own CPU, in ROUNDS interleaved rounds (KJIT_POOL_ROUNDS, 5), each a process
# giving the median of REPEAT calls (KJIT_BENCH_REPEAT, 7; wall clock):
# - "before": BEFORE's libkjit (main), "after": AFTER's;
# - "after, cap 1 ms": AFTER with KJIT_POOL_SPIN_MAX_US=1000, the old cap;
# - the block sums run as the table runs them (bench_simd with every runner
#   in turn: kjit cpu, kjit parallel, hand-SIMD C, scalar C), so a parallel
#   call comes after the other three runners' time (the "gap" column: their
#   medians' sum);
# then Numba @njit and @njit(parallel=True) (bench_simd.py, bench_cpu.py:
# each call back to back, Numba's workers as its threading layer leaves
# them).  About a minute.  The stencil3d row here is a process of that
# row alone (7 calls after one warm-up), slower and noisier on cpu than in
# the full table (H200 host 21:19 UTC: 0.029-0.044 ms against the table's
# 0.0202): compare its before and after, not its Numba ratio.  Prints the table; with $OUT set, leaves the
# JSON files in $OUT/host_rows.tar.gz.
set -u
. "$(dirname "$0")/bundle.sh"
after_dir=$(cd "${1:-build/gpu-bundle}" && pwd) || exit 1
before_dir=$(cd "${2:-build/gpu-bundle}" && pwd) || exit 1
repeat=${KJIT_BENCH_REPEAT:-7}
rounds=${KJIT_POOL_ROUNDS:-5}
# each bundle's programs in a folder of its own, against its own libkjit.so
enter_bundle "$before_dir"
top=$work
work=$top/before && mkdir -p "$work" && build_bench_programs bench_simd bench_cpu ||
    { echo "host_rows.sh: the programs do not build against $before_dir"; exit 1; }
cd "$after_dir" && root=$PWD
unpack_libkjit || { echo "cannot unpack $after_dir/bin/libkjit.so.xz"; exit 1; }
export KJIT_STDLIB=$root/stdlib
work=$top/after && mkdir -p "$work" && build_bench_programs bench_simd bench_cpu ||
    { echo "host_rows.sh: the programs do not build against $after_dir"; exit 1; }
work=$top
start=$SECONDS
# run NAME ENV... -- COMMAND...: run_json, saying what failed.
run() {
    run_json "$@" || { echo "host_rows.sh: $1 failed:"; tail -5 "$work/$1.err"; }
}
# rows NAME SIDE ENV...: the block sums (every runner) and stencil3d 32^3
# (cpu and parallel) with SIDE's programs.
rows() {
    local name=$1 side=$2; shift 2
    local dir=$before_dir; [ "$side" = after ] && dir=$after_dir
    run "$name.simd" KJIT_CACHE_DIR="$work/cache.$side" KJIT_STDLIB="$dir/stdlib" "$@" -- "$work/$side/bench_simd" \
        "--repeat=$repeat" --only=block_sum,block_sum_helper "$root/examples" "$bench"
    run "$name.cpu" KJIT_CACHE_DIR="$work/cache.$side" KJIT_STDLIB="$dir/stdlib" KJIT_BENCH_ONLY="stencil3d f64 32" "$@" -- \
        "$work/$side/bench_cpu" "$root/examples" "$repeat" "$bench"
}
for r in $(seq 1 "$rounds"); do
    rows "before.$r" before X=1
    rows "after.$r" after X=1
    rows "cap1.$r" after KJIT_POOL_SPIN_MAX_US=1000
done
mkdir -p "$work/refs"
run "refs" X=1 -- "$work/after/bench_simd" "--repeat=1" --targets=cpu --no-refs \
    "--save-refs=$work/refs" "$root/examples" "$bench"
numba_path=$(numba_pythonpath "$work/numba-site")
run "numba.cpu" KJIT_BENCH_ONLY="stencil3d f64 32" PYTHONPATH="$numba_path" -- \
    python3 "$bench/bench_cpu.py" "$repeat"
run "numba.simd" PYTHONPATH="$numba_path" -- python3 "$bench/bench_simd.py" "$work/refs" "$repeat"
layer=$(numba_layer "$numba_path")
describe_cpu
echo "$(nproc) logical cpus; $(echo "$layer" | tail -1); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-unset} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}"
python3 - "$work" "$((SECONDS - start))" "$rounds" <<'PY'
import json, os, statistics, sys
sys.path.insert(0, "tests/gpu")  # run from the bundle's root (enter_bundle)
from work_json import json_loader
work, seconds, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
load = json_loader(work)
def value(key, r, target, row):
    data = dict(load(f"{key}.{r}.simd").get(target, {}))
    data.update(load(f"{key}.{r}.cpu").get(target, {}))
    return data.get(row)
def med(key, target, row):
    values = [value(key, r, target, row) for r in range(1, rounds + 1)]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def cell(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 0.1 else f"{ms:.3f}"
def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
numba = dict(load("numba.cpu"))
numba.update(load("numba.simd"))
settings = [("before", "before"), ("after", "after"), ("cap1", "after, cap 1 ms")]
names = list(load("after.1.simd").get("parallel", {})) + list(load("after.1.cpu").get("cpu", {}))
print(f"\nms, wall clock: median of {rounds} interleaved rounds' medians of {len(settings)} "
      f"settings ({seconds} s in all)\n")
for target, ref in (("parallel", "numba_parallel"), ("cpu", "numba")):
    print(f"\nkjit {target} against Numba's {ref}:\n")
    print("| row | " + " | ".join(l for _, l in settings) + f" | {ref} | " +
          " | ".join(f"{l} / Numba" for _, l in settings) + " | rounds (before; after) |")
    print("| --- |" + " ---: |" * (2 * len(settings) + 1) + " --- |")
    for row in names:
        n = numba.get(row, {}).get(ref)
        spread = "; ".join(" ".join(cell(value(k, r, target, row)) for r in range(1, rounds + 1))
                           for k in ("before", "after"))
        print(f"| {row} | " + " | ".join(cell(med(k, target, row)) for k, _ in settings) +
              f" | {cell(n)} | " + " | ".join(ratio(med(k, target, row), n) for k, _ in settings) +
              f" | {spread} |")
print("\nThe block sums' other runners, between two kjit parallel calls (medians), ms:\n")
print("| row | setting | kjit cpu | hand-SIMD C | scalar C | gap (their sum) |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for row in load("after.1.simd").get("parallel", {}):
    for k, label in settings:
        parts = [med(k, t, row) for t in ("cpu", "hand_simd", "scalar_c")]
        gap = sum(p for p in parts if p is not None)
        print(f"| {row} | {label} | " + " | ".join(cell(p) for p in parts) + f" | {cell(gap)} |")
print("\nEach round's kjit parallel call against the gap before it (the sum of the other "
      "runners' medians), ms:\n")
print("| row | setting | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " |")
print("| --- | --- |" + " --- |" * rounds)
for row in load("after.1.simd").get("parallel", {}):
    for k, label in settings:
        cells = []
        for r in range(1, rounds + 1):
            data = load(f"{k}.{r}.simd")
            parts = [data.get(t, {}).get(row) for t in ("cpu", "hand_simd", "scalar_c")]
            par = data.get("parallel", {}).get(row)
            cells.append("-" if par is None or None in parts else f"{cell(par)} after {sum(parts):.3f}")
        print(f"| {row} | {label} | " + " | ".join(cells) + " |")
PY
if [ -n "${OUT:-}" ]; then
    tar -czf "$OUT/host_rows.tar.gz" -C "$work" --exclude='cache.*' --exclude=numba-site \
        --exclude=refs --exclude=before --exclude=after . 2>/dev/null
fi
