#!/usr/bin/env bash
# tests/gpu/dask.sh [BUNDLE]: kjit.dask on a Dask cluster of one worker per GPU
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
# Ends with one line: "N passed, N failed".
set -u
. "$(dirname "$0")/bundle.sh"
enter_bundle "${1:-build/gpu-bundle}"
export KJIT_LIBRARY=$root/bin/libkjit.so
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

echo "=== Dask on this machine's Python ($(python3 --version 2>&1))"
dask_path=
if python3 -c 'import dask.array, distributed' 2>/dev/null; then
    echo "dask $(python3 -c 'import dask; print(dask.__version__)') from this machine's Python"
elif [ -d "$root/python/dask-wheels" ]; then
    # Each package by name, so that pip picks the wheel this Python can take.
    names=$(ls "$root/python/dask-wheels" | sed 's/-.*//' | sort -u)
    if python3 -m pip install -q --no-index --no-deps --find-links "$root/python/dask-wheels" \
            --target "$work/dask-site" $names > "$work/pip.log" 2>&1 &&
       PYTHONPATH=$work/dask-site python3 -c 'import dask.array, distributed' 2>>"$work/pip.log"; then
        dask_path=$work/dask-site
        echo "dask from the bundle's wheels (python/dask-wheels)"
    else
        tail -3 "$work/pip.log"
    fi
fi
if [ -z "$dask_path" ] && ! python3 -c 'import dask.array, distributed' 2>/dev/null; then
    echo "skipped: this machine's Python ($(python3 --version 2>&1)) has no dask and distributed," \
         "and the bundle's wheels do not install here (made for another Python, or absent)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi

PYTHONPATH=$root/python${dask_path:+:$dask_path}${PYTHONPATH:+:$PYTHONPATH} \
    python3 "$root/tests/gpu/dask_gpus.py" "$root"
