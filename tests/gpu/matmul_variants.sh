#!/usr/bin/env bash
# tests/gpu/matmul_variants.sh [N]: f64 tensor-core matrix multiply variants
# (tests/bench/matmul_tc_variants.cu) against cuBLAS at N^3 (default 4096),
# on the GPU machine, in a bundle or a checkout (it finds its root from its
# own path).  It needs nvcc and cuBLAS; with libkjit (the bundle's, or a
# checkout's build/) it adds the row "kjit", tests/bench/matmul_tc.kern.  Builds the program with
# `nvcc -O3 -arch=sm_90 -lcublas`, runs each variant in a process of its own
# (one that faults or is refused prints "failed" and the rest go on) and
# prints one Markdown table: variant, ms, TFLOP/s, x cuBLAS (its time over
# the cublas row's), the largest error relative to cuBLAS's element over the
# whole matrix and to a long-double sum at 64 elements, registers a thread,
# local (spill) bytes a thread and shared bytes a block, and the bits: of
# 64 sampled elements, how many equal the cpu's fma chain (mma()'s
# definition), and the percentage of all elements equal to those of the row
# "current" (mma.sync m8n8k4).  Exits non-zero when the build
# fails or a variant's result is wrong (error over 1e-12).
set -u
n=${1:-4096}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/bench
# With libkjit (a bundle's bin/, or a build's build/), the table has a
# "kjit" row: tests/bench/matmul_tc.kern through the library.
kjit=()
if [ -f "$root/bin/libkjit.so.xz" ] || [ -f "$root/bin/libkjit.so" ]; then
    . "$root/tests/gpu/bundle.sh"
    enter_bundle "$root" # work, its removal, KJIT_STDLIB, the cache, libdevice
    kjit=(-DKJIT_VARIANT -I"$here" -L"$root/bin" -lkjit -Xlinker -rpath="$root/bin")
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    if [ -f "$root/build/libkjit.so" ]; then
        export KJIT_CACHE_DIR=$work/cache
        kjit=(-DKJIT_VARIANT -I"$root/runtime" -L"$root/build" -lkjit -Xlinker -rpath="$root/build")
    fi
fi
export KJIT_MATMUL_KERN=$here/matmul_tc.kern
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$nvcc" -O3 -arch=sm_90 -std=c++17 -o "$work/variants" "$here/matmul_tc_variants.cu" -lcublas \
    "${kjit[@]}" || { echo "matmul_variants.sh: the build failed"; exit 1; }
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

# The kernels that take any size, at one that is no multiple of their tiles
# (rows, columns and k end inside a tile), checked the same way.
: > "$work/edges"
for name in current current_k4 k4_clamp k4_clamp_inside kjit; do
    grep -q "^$name	" "$work/list" || continue
    if out=$("$work/variants" run "$name" 1000 2> "$work/err"); then
        echo "$out" >> "$work/edges"
    else
        echo "$name failed: $(tail -c 300 "$work/err" | tr '\n' ' ')" >> "$work/edges"
    fi
done

python3 - "$work/list" "$work/rows" "$n" "$work/edges" <<'PY'
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
print("\nAt 1000^3 (edges inside the tiles): variant, ms, max err vs cuBLAS, vs exact, = fma chain (of 64), % = m8n8k4 bits\n")
for r in (line.split() for line in open(sys.argv[4])):
    if len(r) != 10 or r[1] == "failed:":
        print(f"- {r[0]}: failed: {' '.join(r[2:])[:200]}")
        bad += 1
        continue
    wrong = not (float(r[3]) <= 1e-12 and float(r[4]) <= 1e-12)
    bad += wrong
    print(f"- {r[0]}: {float(r[1]):.3f} ms, {r[3]}{' WRONG' if wrong else ''}, {r[4]}, {r[8]}, {r[9]}")
sys.exit(1 if bad else 0)
PY
