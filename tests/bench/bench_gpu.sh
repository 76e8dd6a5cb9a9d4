#!/usr/bin/env bash
# tests/bench/bench_gpu.sh: the GPU benchmark, on the GPU machine, from the
# bundle's root (tests/gpu/run.sh calls it): kjit and the hand-written CUDA C
# in one program (tests/bench/bench_gpu.cu, built here with nvcc -O3
# -arch=sm_90 against bin/libkjit.so), then Numba and CuPy, printed as one
# Markdown table.
#
# bench_gpu.cu times kjit and CUDA C taking turns on the same buffers (20
# launches each per row).  It runs KJIT_BENCH_ROUNDS times (default 3): a
# row's figures are the medians over the rounds, and the table shows the
# range of the per-round ratios beside their overall ratio.
#
# KJIT_NUMBA_WHEELS, when set, names a folder of wheels (a NumPy that the
# image's Numba accepts) installed into a private folder for the Numba part
# only; CuPy runs with the machine's own NumPy.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -f bin/libkjit.so ] || { echo "bench_gpu.sh: no bin/libkjit.so (run from the unpacked bundle)"; exit 1; }
nvcc -O3 -arch=sm_90 -std=c++17 -I"$here" -o "$work/bench_gpu" "$here/bench_gpu.cu" \
    -L"$PWD/bin" -lkjit -Xlinker -rpath="$PWD/bin" || exit 1
rounds=${KJIT_BENCH_ROUNDS:-3}
for round in $(seq 1 "$rounds"); do
    "$work/bench_gpu" "$here" > "$work/pair.$round.txt" || exit 1
done
python3 "$here/bench_gpu_py.py" cupy > "$work/py.txt"
. "$here/../gpu/bundle.sh"
numba_path=$(numba_pythonpath "$work/numba-site")
PYTHONPATH=$numba_path python3 "$here/bench_gpu_py.py" numba >> "$work/py.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>/dev/null

python3 - "$work" "$rounds" <<'PY'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
rounds_kjit, rounds_cuda, copies = [], [], []
for r in range(1, rounds + 1):
    k, c = {}, {}
    for line in open(f"{work}/pair.{r}.txt"):
        parts = line.split()
        if len(parts) == 3:
            k[parts[0]], c[parts[0]] = float(parts[1]), float(parts[2])
        elif len(parts) == 2 and parts[0] == "copy_gbps":
            copies.append(float(parts[1]))
    rounds_kjit.append(k)
    rounds_cuda.append(c)
def across(per_round):
    keys = set().union(*per_round)
    return {k: statistics.median(p[k] for p in per_round if k in p) for k in keys}
kjit, cuda = across(rounds_kjit), across(rounds_cuda)
def ratio_range(key):
    ratios = [k[key] / c[key] for k, c in zip(rounds_kjit, rounds_cuda) if k.get(key) and c.get(key)]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
py = {}
for line in open(f"{work}/py.txt"):
    parts = line.split()
    if len(parts) == 3:
        py[(parts[0], parts[1])] = float(parts[2])
copy = statistics.median(copies) if copies else None
# Bytes each elementwise row moves (read + written).
moved = {"add_f32_1e8": 12e8, "sin_f64_1e8": 16e8, "sum_f32_1e8": 4e8, "dot_f32_1e8": 8e8,
         "sum_axis1_10000x10000": 4e8, "sum_axis0_10000x10000": 4e8,
         "gufunc_dot_1e6x16": 2.64e8}
# Floating-point operations of the compute-bound rows (GFLOP/s beside them).
flops = {"matmul_f64_4096": 2 * 4096 ** 3, "matmul_tc_f64_4096": 2 * 4096 ** 3}
rows = [("add_f32_1e8", "add f32, 1e8"), ("add_f32_1e6", "add f32, 1e6"),
        ("sin_f64_1e8", "sin f64, 1e8"),
        ("sum_f32_1e8", "sum f32, 1e8 (CUB DeviceReduce::Sum)"),
        ("dot_f32_1e8", "dot f32, 2 x 1e8, fused (CUB over a transform)"),
        ("sum_axis1_10000x10000", "sum f32 10000x10000, axis 1 (CUB segmented)"),
        ("sum_axis0_10000x10000", "sum f32 10000x10000, axis 0 (a column kernel)"), ("exp_f32_1e7", "exp f32, 1e7"),
        ("mandel_1536x1024x20", "Mandelbrot 1536x1024, 20 iters"),
        ("mandel_8192x8192x256", "Mandelbrot 8192x8192, 256 iters"),
        ("lla_1000x1000", "LLA distance 1000x1000, mesh on the GPU"),
        ("das_1200x762", "delay-and-sum 1200x762x128x128 f64"),
        ("gufunc_dot_1e6x16", "@guvectorize dot f64, 1e6 rows of 16 (a thread per row)"),
        ("matmul_f64_4096", "matmul f64 4096, 4x4 registers per thread (CuPy: cuBLAS)"),
        ("matmul_tc_f64_4096", "matmul f64 4096, tensor cores by mma() (CuPy: cuBLAS)")]
gpu = open(f"{work}/gpu.txt").read().strip() or "unknown GPU"
print(f"GPU: {gpu}; device-to-device copy: {copy:.0f} GB/s (read + written); "
      f"kjit and CUDA C taking turns, 20 launches each, {rounds} rounds")
print()
print("| workload | kjit ms | CUDA C ms | kjit / CUDA C | per round | Numba ms | CuPy ms "
      "| kjit GB/s (% of copy), or TFLOP/s |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
fmt = lambda v: "-" if v is None else f"{v:.4f}"
for key, label in rows:
    k, c = kjit.get(key), cuda.get(key)
    ratio = f"{k / c:.2f}" if k and c else "-"
    bw = "-"
    if key in moved and k:
        gbps = moved[key] / k / 1e6
        bw = f"{gbps:.0f} ({100 * gbps / copy:.0f}%)" if copy else f"{gbps:.0f}"
    elif key in flops and k:
        bw = f"{flops[key] / k / 1e9:.0f} TFLOP/s"
    print(f"| {label} | {fmt(k)} | {fmt(c)} | {ratio} | {ratio_range(key)} | {fmt(py.get((key, 'numba')))} "
          f"| {fmt(py.get((key, 'cupy')))} | {bw} |")
PY
