#!/usr/bin/env bash
# tests/bench/bench_gpu.sh: the GPU benchmark, on the GPU machine, from the
# bundle's root (tests/gpu/run.sh calls it): kjit (bin/bench_gpu_kjit), the
# hand-written CUDA C (built here with nvcc -O3 -arch=sm_90), Numba and CuPy,
# side by side in one run, printed as one Markdown table.
#
# kjit and CUDA C take turns: KJIT_BENCH_ROUNDS rounds (default 5), each
# running both programs (which one goes first alternates), each program
# timing every row as the median of 20 launches.  A row's figure for each
# side is the median of its rounds, and the table shows the range of the
# per-round ratios beside their median ratio.  Short rows (a 9 us add) move
# by 5-10% between two runs of the same program a second apart (GPU and host
# clocks), so one round each would mostly measure which one ran at a quieter
# moment.
#
# KJIT_NUMBA_WHEELS, when set, names a folder of wheels (a NumPy that the
# image's Numba accepts) installed into a private folder for the Numba part
# only; CuPy runs with the machine's own NumPy.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nvcc -O3 -arch=sm_90 -o "$work/bench_gpu_cuda" "$here/bench_gpu_cuda.cu" || exit 1
rounds=${KJIT_BENCH_ROUNDS:-5}
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then
        "$work/bench_gpu_cuda" > "$work/cuda.$round.txt" || exit 1
        bin/bench_gpu_kjit > "$work/kjit.$round.txt" || exit 1
    else
        bin/bench_gpu_kjit > "$work/kjit.$round.txt" || exit 1
        "$work/bench_gpu_cuda" > "$work/cuda.$round.txt" || exit 1
    fi
done
python3 "$here/bench_gpu_py.py" cupy > "$work/py.txt"
numba_path=${PYTHONPATH:-}
if [ -n "${KJIT_NUMBA_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/numba-site" \
        "$KJIT_NUMBA_WHEELS"/*.whl && numba_path=$work/numba-site${numba_path:+:$numba_path}
fi
PYTHONPATH=$numba_path python3 "$here/bench_gpu_py.py" numba >> "$work/py.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$work/gpu.txt" 2>/dev/null

python3 - "$work" "$rounds" <<'PY'
import statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def pairs(name):
    out = {}
    for line in open(f"{work}/{name}"):
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = float(parts[1])
    return out
kjit_rounds = [pairs(f"kjit.{r}.txt") for r in range(1, rounds + 1)]
cuda_rounds = [pairs(f"cuda.{r}.txt") for r in range(1, rounds + 1)]
def across(per_round):
    keys = set().union(*per_round)
    return {k: statistics.median(p[k] for p in per_round if k in p) for k in keys}
kjit, cuda = across(kjit_rounds), across(cuda_rounds)
def ratio_range(key):
    ratios = [k[key] / c[key] for k, c in zip(kjit_rounds, cuda_rounds) if k.get(key) and c.get(key)]
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
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
print(f"GPU: {gpu}; device-to-device copy: {copy:.0f} GB/s (read + written); "
      f"kjit and CUDA C: median of {rounds} alternating rounds of 20 launches each")
print()
print("| workload | kjit ms | CUDA C ms | kjit / CUDA C | per round | Numba ms | CuPy ms "
      "| kjit GB/s (% of copy) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
fmt = lambda v: "-" if v is None else f"{v:.4f}"
for key, label in rows:
    k, c = kjit.get(key), cuda.get(key)
    ratio = f"{k / c:.2f}" if k and c else "-"
    bw = "-"
    if key in moved and k:
        gbps = moved[key] / k / 1e6
        bw = f"{gbps:.0f} ({100 * gbps / copy:.0f}%)" if copy else f"{gbps:.0f}"
    print(f"| {label} | {fmt(k)} | {fmt(c)} | {ratio} | {ratio_range(key)} | {fmt(py.get((key, 'numba')))} "
          f"| {fmt(py.get((key, 'cupy')))} | {bw} |")
PY
