"""compare_npy.py WANT.npy GOT.npy [--exact]: do two results of one program agree?

Floats: the largest difference over the largest magnitude of WANT must be
under 1e-5 for f32 and 1e-12 for f64 (two math libraries, cpu's and
libdevice, each a few ulp from the truth); NaNs must sit in the same places.
Integers (Mandelbrot iteration counts): at most 0.2% of elements may differ,
for points on the set's edge where a contracted multiply-add decides.
With --exact every element must be equal (NaNs in the same places).
Prints one line and exits 0 when they agree.
"""
import sys

import numpy as np

want, got = np.load(sys.argv[1]), np.load(sys.argv[2])
if want.shape != got.shape or want.dtype != got.dtype:
    print(f"shape/dtype differ: {want.shape} {want.dtype} vs {got.shape} {got.dtype}")
    sys.exit(1)
if "--exact" in sys.argv[3:]:
    same = (want == got) | (np.isnan(want) & np.isnan(got)
                            if np.issubdtype(want.dtype, np.inexact) else False)
    bad = np.flatnonzero(~same)
    print(f"{bad.size} elements differ" + (f", the first at {bad[0]}: {want.flat[bad[0]]} vs "
                                             f"{got.flat[bad[0]]}" if bad.size else ""))
    sys.exit(0 if bad.size == 0 else 1)
if np.issubdtype(want.dtype, np.floating) or np.issubdtype(want.dtype, np.complexfloating):
    tol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-12
    if not np.array_equal(np.isnan(want), np.isnan(got)):
        print("NaNs differ")
        sys.exit(1)
    ok = ~np.isnan(want)
    scale = float(np.max(np.abs(want[ok]))) if ok.any() else 0.0
    err = float(np.max(np.abs(want[ok].astype(np.float64) - got[ok]))) / scale if scale else 0.0
    print(f"max relative error {err:.3g} (tolerance {tol:g})")
    sys.exit(0 if err <= tol else 1)
share = float(np.mean(want != got)) if want.size else 0.0
print(f"{share * 100:.3f}% of elements differ (tolerance 0.2%)")
sys.exit(0 if share <= 0.002 else 1)
