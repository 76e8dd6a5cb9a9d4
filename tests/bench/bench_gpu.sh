#!/usr/bin/env bash
# tests/bench/bench_gpu.sh: the GPU benchmark, on the GPU machine, from the
# bundle's root (tests/gpu/run.sh calls it): kjit (bin/bench_gpu_kjit), the
# hand-written CUDA C (built here with nvcc -O3 -arch=sm_90), Numba and CuPy,
# side by side in one run, printed as one Markdown table.
#
# KJIT_NUMBA_WHEELS, when set, names a folder of wheels (a NumPy that the
# image's Numba accepts) installed into a private folder for the Numba part
# only; CuPy runs with the machine's own NumPy.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nvcc -O3 -arch=sm_90 -o "$work/bench_gpu_cuda" "$here/bench_gpu_cuda.cu" || exit 1
"$work/bench_gpu_cuda" > "$work/cuda.txt" || exit 1
bin/bench_gpu_kjit > "$work/kjit.txt" || exit 1
python3 "$here/bench_gpu_py.py" cupy > "$work/py.txt"
numba_path=${PYTHONPATH:-}
if [ -n "${KJIT_NUMBA_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/numba-site" \
        "$KJIT_NUMBA_WHEELS"/*.whl && numba_path=$work/numba-site${numba_path:+:$numba_path}
fi
PYTHONPATH=$numba_path python3 "$here/bench_gpu_py.py" numba >> "$work/py.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>/dev/null

python3 - "$work" <<'PY'
import sys
work = sys.argv[1]
def pairs(name):
    out = {}
    for line in open(f"{work}/{name}"):
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = float(parts[1])
    return out
kjit, cuda = pairs("kjit.txt"), pairs("cuda.txt")
py = {}
for line in open(f"{work}/py.txt"):
    parts = line.split()
    if len(parts) == 3:
        py[(parts[0], parts[1])] = float(parts[2])
copy = cuda.get("copy_gbps")
# Bytes each elementwise row moves (read + written).
moved = {"add_f32_1e8": 12e8, "sin_f64_1e8": 16e8}
rows = [("add_f32_1e8", "add f32, 1e8"), ("add_f32_1e6", "add f32, 1e6"),
        ("sin_f64_1e8", "sin f64, 1e8"), ("exp_f32_1e7", "exp f32, 1e7"),
        ("mandel_1536x1024x20", "Mandelbrot 1536x1024, 20 iters"),
        ("mandel_8192x8192x256", "Mandelbrot 8192x8192, 256 iters"),
        ("lla_1000x1000", "LLA distance 1000x1000, mesh on the GPU"),
        ("das_1200x762", "delay-and-sum 1200x762x128x128 f64")]
gpu = open(f"{work}/gpu.txt").read().strip() or "unknown GPU"
print(f"GPU: {gpu}; device-to-device copy: {copy:.0f} GB/s (read + written)")
print()
print("| workload | kjit ms | CUDA C ms | kjit / CUDA C | Numba ms | CuPy ms | kjit GB/s (% of copy) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
fmt = lambda v: "-" if v is None else f"{v:.4f}"
for key, label in rows:
    k, c = kjit.get(key), cuda.get(key)
    ratio = f"{k / c:.2f}" if k and c else "-"
    bw = "-"
    if key in moved and k:
        gbps = moved[key] / k / 1e6
        bw = f"{gbps:.0f} ({100 * gbps / copy:.0f}%)" if copy else f"{gbps:.0f}"
    print(f"| {label} | {fmt(k)} | {fmt(c)} | {ratio} | {fmt(py.get((key, 'numba')))} "
          f"| {fmt(py.get((key, 'cupy')))} | {bw} |")
PY
