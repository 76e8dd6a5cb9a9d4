#!/usr/bin/env bash
# tests/gpu/matmul_variants.sh [N]: f64 tensor-core matrix multiply variants
# (tests/bench/matmul_tc_variants.cu) against cuBLAS at N^3 (default 4096),
# on the GPU machine, from the bundle's root or the repository's (it needs
# nvcc and cuBLAS only, not libkjit).  Builds the program with
# `nvcc -O3 -arch=sm_90 -lcublas`, runs each variant in a process of its own
# (one that faults or is refused prints "failed" and the rest go on) and
# prints one Markdown table: variant, ms, TFLOP/s, x cuBLAS (its time over
# the cublas row's), the largest error relative to cuBLAS's element over the
# whole matrix and to a long-double sum at 64 elements, registers a thread,
# local (spill) bytes a thread and shared bytes a block, and the bits: of
# 64 sampled elements, how many equal the cpu's fma chain (mma()'s
# definition), and the percentage of all elements equal to m8_s1's
# (mma.sync m8n8k4).  Exits non-zero when the build
# fails or a variant's result is wrong (error over 1e-12).
set -u
n=${1:-4096}
here=$(cd "$(dirname "$0")/../bench" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" -O3 -arch=sm_90 -std=c++17 -o "$work/variants" "$here/matmul_tc_variants.cu" -lcublas ||
    { echo "matmul_variants.sh: the build failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null
"$work/variants" list > "$work/list" || exit 1
: > "$work/rows"
while IFS=$'\t' read -r name what; do
    if out=$("$work/variants" run "$name" "$n" 2> "$work/err"); then
        echo "$out" >> "$work/rows"
    else
        echo "$name failed: $(tail -c 300 "$work/err" | tr '\n' ' ')" >> "$work/rows"
    fi
done < "$work/list"

python3 - "$work/list" "$work/rows" "$n" <<'PY'
import sys
what = dict(line.rstrip("\n").split("\t", 1) for line in open(sys.argv[1]))
rows, n = [line.split() for line in open(sys.argv[2])], int(sys.argv[3])
base = next((float(r[1]) for r in rows if r[0] == "cublas" and len(r) == 10), None)
print(f"\nf64 C = A B at {n}^3 (x cuBLAS: time over cublasDgemm's)\n")
print("| variant | ms | TFLOP/s | x cuBLAS | max err vs cuBLAS | max err vs exact | regs | local B | smem B | = fma chain (of 64) | % = m8n8k4 bits | what |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
bad = 0
for r in rows:
    if len(r) != 10 or r[1] == "failed:":
        print(f"| {r[0]} | failed | | | | | | | | | | {' '.join(r[2:])[:200]} |")
        bad += 1
        continue
    name, ms, tf, ec, er, regs, local, smem, chain, m8bits = r
    ratio = f"{float(ms) / base:.2f}" if base else "-"
    wrong = not (float(ec) <= 1e-12 and float(er) <= 1e-12)
    bad += wrong
    print(f"| {name} | {float(ms):.3f} | {float(tf):.1f} | {ratio} | {ec}{' WRONG' if wrong else ''} | {er} | {regs} | {local} | {smem} | {chain} | {m8bits} | {what.get(name, '')} |")
sys.exit(1 if bad else 0)
PY
