#!/usr/bin/env bash
# tests/gpu/bench_cpu_host.sh [BUNDLE]: `make bench-cpu` on the GPU machine's
# own CPU (an AVX-512 Xeon where this machine is an AVX2 one), from the
# bundle `make gpu-bundle` made.
#
# That machine has gcc, NumPy and Numba but no LLVM, so the two benchmark
# programs (tests/bench/bench_cpu.c, bench_simd.c) and the hand-written SIMD
# references (simd_ref.c, -march=native: as many lanes as that CPU has) are
# built here against the bundle's libkjit.so, then
# tests/bench/bench_cpu_report.py prints the same table as `make bench-cpu`.
# KJIT_NUMBA_WHEELS as for tests/bench/bench_gpu.sh (a NumPy the image's
# Numba accepts).  Prints the table, or why there is none.
set -u
bundle=${1:-build/gpu-bundle}
cd "$bundle" || { echo "bench_cpu_host.sh: no bundle at $bundle"; exit 1; }
root=$PWD
. "$root/tests/gpu/bundle.sh"
unpack_libkjit || { echo "bench_cpu_host.sh: cannot unpack bin/libkjit.so.xz"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export KJIT_STDLIB=$root/stdlib KJIT_CACHE_DIR=$work/cache

# The programs sit beside a copy of libkjit.so (bench_cpu_report.py finds the
# library next to bench_simd), built as the Makefile builds them.
bench=$root/tests/bench
cp bin/libkjit.so "$work/"
flags="-std=c11 -D_GNU_SOURCE -O2 -I$bench"
gcc -std=c11 -D_GNU_SOURCE -O3 -march=native -ffp-contract=off -c "$bench/simd_ref.c" -o "$work/simd_ref.o" &&
gcc $flags -o "$work/bench_simd" "$bench/bench_simd.c" "$work/simd_ref.o" -L"$work" -lkjit -lm \
    -Wl,-rpath,"$work" &&
gcc $flags -o "$work/bench_cpu" "$bench/bench_cpu.c" -L"$work" -lkjit -lm -Wl,-rpath,"$work" ||
    { echo "bench_cpu_host.sh: the benchmark programs do not build here"; exit 1; }

numba_path=$(numba_pythonpath "$work/numba-site")
grep -o 'avx512[a-z]*\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
PYTHONPATH=$numba_path python3 "$bench/bench_cpu_report.py" "$work/bench_cpu" "$work/bench_simd" \
    "$root/examples" "${KJIT_BENCH_REPEAT:-7}"
