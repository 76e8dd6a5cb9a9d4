"""aot_compare.py CPU_DIR CUDA_DIR: the results a library's cuda code gave
(tests/gpu/aot.sh; tests/aot/aot_driver.c --dump) against the JIT's on cpu,
each NAME.npy of CPU_DIR against CUDA_DIR's, within the tolerances of
tests/gpu/compare_npy.py: floats, the largest difference over the largest
magnitude of the cpu result under 1e-5 for f32 and c64, 1e-12 for f64 and
c128, 2e-3 for f16 and 1e-2 for bf16 (NAME.bf16.npy, as bits: one or two of
their ulps), NaNs in the same places; integers, at most 0.2% of elements
differing (a contracted multiply-add decides points on an edge); booleans
equal.  Prints one line per result that disagrees, then a summary; exits 0
when every cpu result has a cuda one and they agree.
"""
import glob
import os
import sys

import numpy as np


def load(path):
    a = np.load(path)
    if path.endswith(".bf16.npy"):  # bf16 bits: the top half of an f32
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return a


def tolerance(path, dtype):
    if path.endswith(".bf16.npy"):
        return 1e-2
    return {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-5,
            np.dtype(np.complex64): 1e-5}.get(np.dtype(dtype), 1e-12)


def agree(path, want, got):
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"shape/dtype {want.shape} {want.dtype} vs {got.shape} {got.dtype}"
    if np.issubdtype(want.dtype, np.inexact):
        tol = tolerance(path, want.dtype)
        if not np.array_equal(np.isnan(want), np.isnan(got)):
            return "NaNs differ"
        ok = ~np.isnan(want)
        scale = float(np.max(np.abs(want[ok]))) if ok.any() else 0.0
        diff = np.abs(want[ok].astype(np.complex128) - got[ok].astype(np.complex128))
        err = float(np.max(diff)) / scale if scale and diff.size else 0.0
        return None if err <= tol else f"relative error {err:.3g} over {tol:g}"
    if want.dtype == np.bool_:
        return None if np.array_equal(want, got) else "booleans differ"
    share = float(np.mean(want != got)) if want.size else 0.0
    return None if share <= 0.002 else f"{share * 100:.3f}% of elements differ (over 0.2%)"


def main():
    cpu_dir, cuda_dir = sys.argv[1], sys.argv[2]
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(cpu_dir, "*.npy")))
    bad = 0
    for name in names:
        other = os.path.join(cuda_dir, name)
        if not os.path.exists(other):
            print(f"{name}: no cuda result")
            bad += 1
            continue
        why = agree(name, load(os.path.join(cpu_dir, name)), load(other))
        if why:
            print(f"{name}: {why}")
            bad += 1
    print(f"{len(names) - bad} of {len(names)} results agree with cpu within the tolerances")
    sys.exit(0 if names and bad == 0 else 1)


if __name__ == "__main__":
    main()
