"""Seed 003: exp over a random float32 vector of 1e7 elements, as the seed runs
it through PyCUDA, here through kjit (examples/exp.kern), checked against
NumPy and timed beside it (and CuPy where it is installed)."""
import numpy as np

from seedlib import best_ms, cupy_or_none, kern, kjit, options, report

args = options(__doc__).parse_args()
vexp = kjit.load(kern("exp.kern"), target=args.target).vexp
target = vexp.context.target
a = np.random.default_rng(3).standard_normal(10_000_000).astype(np.float32)

got = vexp(a)
error = np.max(np.abs(got - np.exp(a.astype(np.float64))) / np.exp(a.astype(np.float64)))
print(f"largest relative difference from float64 exp: {error:.2e}")
rows = [(f"kjit {target}, host arrays", best_ms(lambda: vexp(a), args.repeat),
         "copies in and out" if target == "cuda" else ""),
        ("NumPy np.exp", best_ms(lambda: np.exp(a), args.repeat), "")]
if target == "cuda":
    da, out = kjit.to_device(a), kjit.device_array(a.shape, np.float32)
    rows.insert(1, ("kjit cuda, device arrays",
                    best_ms(lambda: vexp(da, out=out), args.repeat, kjit.synchronize), ""))
cp = cupy_or_none()
if cp is not None:
    ca = cp.asarray(a)
    rows.append(("CuPy cp.exp, device arrays",
                 best_ms(lambda: cp.exp(ca), args.repeat, cp.cuda.Device().synchronize), ""))
report("exp, 1e7 float32 elements", rows)
