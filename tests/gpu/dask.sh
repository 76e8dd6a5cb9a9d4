#!/usr/bin/env bash
# tests/gpu/dask.sh [BUNDLE] [diag]: kjit.dask on a Dask cluster of one worker per GPU
# (kjit.dask.gpu_cluster: each worker's CUDA_VISIBLE_DEVICES its own GPU, or
# dask-cuda's LocalCUDACluster where it is installed), on the GPU machine.
#
# Run from the repository root with the bundle `make gpu-bundle` made (default
# build/gpu-bundle).  The machine has no network: Dask comes from its own
# Python, else from the wheels the bundle carries (python/dask-wheels, made
# for the build machine's Python); when neither gives it, the script says
# "skipped: ..." and why.  tests/gpu/dask_gpus.py then checks each worker's
# GPU, every form on cuda against NumPy (CuPy chunks where CuPy is installed,
# else NumPy chunks copied in and out), and measures a stencil of
# 2 x 16384^2 f32 and a sum of 2e9 f32 on 1 GPU and on 2 (goal: 1.8x).
# Ends with one line: "N passed, N failed".  With "diag", it runs
# tests/gpu/dask_diag.py instead (the 1-GPU slowness, step by step).
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
export KJIT_LIBRARY=$root/bin/libkjit.so
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

echo "=== Dask on this machine's Python ($(python3 --version 2>&1))"
dask_site "$work/dask-site" || { echo "0 passed, 0 failed, 1 skipped"; exit 0; }

# diag: tests/gpu/dask_diag.py instead (why one worker holding several CuPy
# chunks of a GPU was slow: each step timed apart; about 2 minutes)
script=dask_gpus.py
[ "${2:-}" = diag ] && script=dask_diag.py
PYTHONPATH=$root/python${dask_path:+:$dask_path}${PYTHONPATH:+:$PYTHONPATH} \
    python3 "$root/tests/gpu/$script" "$root"
