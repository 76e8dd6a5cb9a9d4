#!/usr/bin/env bash
# tests/bench/check_cost_gpu.sh: what checked mode costs on the GPU, on the
# seed workloads of tests/bench/bench_gpu.cu, from the bundle's root on the GPU
# machine (as bench_gpu.sh is run).  The benchmark program runs ROUNDS times
# each way, taking turns, with KJIT_CHECK=0 and KJIT_CHECK=1 (kjit_options_init
# reads it); CUDA C's figures are the same code both times, so their ratio
# shows how much the machine drifted.  Prints per workload the median kjit
# time each way and their ratio.  Not a timed test.
#
#   bash tests/bench/check_cost_gpu.sh [ROUNDS]
set -u
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -f bin/libkjit.so ] || { echo "check_cost_gpu.sh: no bin/libkjit.so (run from the unpacked bundle)"; exit 1; }
nvcc -O3 -arch=sm_90 -std=c++17 -I"$here" -o "$work/bench_gpu" "$here/bench_gpu.cu" \
    -L"$PWD/bin" -lkjit -Xlinker -rpath="$PWD/bin" || exit 1
for round in $(seq 1 "$rounds"); do
    KJIT_CHECK=0 KJIT_CACHE_DIR=$work/cache "$work/bench_gpu" > "$work/off.$round.txt" || exit 1
    KJIT_CHECK=1 KJIT_CACHE_DIR=$work/cache "$work/bench_gpu" > "$work/on.$round.txt" || exit 1
done
python3 - "$work" "$rounds" <<'PY'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def read(kind):
    kjit, cuda = {}, {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{kind}.{r}.txt"):
            parts = line.split()
            if len(parts) == 3:
                kjit.setdefault(parts[0], []).append(float(parts[1]))
                cuda.setdefault(parts[0], []).append(float(parts[2]))
    med = lambda d: {k: statistics.median(v) for k, v in d.items()}
    return med(kjit), med(cuda)
off, cuda_off = read("off")
on, cuda_on = read("on")
print(f"checked mode on the GPU, median of {rounds} runs each way (ms)")
print()
print("| workload | kjit unchecked | kjit checked | checked / unchecked | CUDA C drift |")
print("| --- | --- | --- | --- | --- |")
for key in off:
    if key in on:
        print(f"| {key} | {off[key]:.4f} | {on[key]:.4f} | {on[key] / off[key]:.2f} "
              f"| {cuda_on[key] / cuda_off[key]:.2f} |")
PY
