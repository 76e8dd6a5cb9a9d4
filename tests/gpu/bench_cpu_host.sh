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
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
build_bench_programs bench_simd bench_cpu ||
    { echo "bench_cpu_host.sh: the benchmark programs do not build here"; exit 1; }

numba_path=$(numba_pythonpath "$work/numba-site")
describe_cpu
PYTHONPATH=$numba_path python3 "$bench/bench_cpu_report.py" "$work/bench_cpu" "$work/bench_simd" \
    "$root/examples" "${KJIT_BENCH_REPEAT:-7}"
