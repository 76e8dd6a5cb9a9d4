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
# Numba accepts).  The report's own variables reach it: KJIT_BENCH_ROUNDS=N
# runs the whole set N times in turn, times the medians over the rounds and
# ratios the medians of the rounds' ratios with their range (3 rounds: about
# 4 minutes here); KJIT_BENCH_ONLY="A|B" only the rows whose name holds A or
# B; KJIT_BENCH_REPEAT, when set, the runs a median takes (else 7 for one
# round, 2 a round for several).  Prints the table, or why there is none.
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
build_bench_programs bench_simd bench_cpu ||
    { echo "bench_cpu_host.sh: the benchmark programs do not build here"; exit 1; }

numba_path=$(numba_pythonpath "$work/numba-site")
describe_cpu
PYTHONPATH=$numba_path python3 "$bench/bench_cpu_report.py" "$work/bench_cpu" "$work/bench_simd" \
    "$root/examples" ${KJIT_BENCH_REPEAT:+"$KJIT_BENCH_REPEAT"}
