"""Seed 001: sin over 1e6 float64 values through kjit (examples/sin.kern),
checked with allclose against NumPy as the seed checks CuPy, Numba, PyTorch
and PyCUDA, and timed beside NumPy (and CuPy where it is installed)."""
import numpy as np

from seedlib import best_ms, cupy_or_none, kern, kjit, options, report

args = options(__doc__).parse_args()
vsin = kjit.load(kern("sin.kern"), target=args.target).vsin
target = vsin.context.target
x = np.random.default_rng(1).uniform(-np.pi, np.pi, 1_000_000)

y = vsin(x)
print("allclose(kjit, NumPy):", np.allclose(y, np.sin(x)))
rows = [(f"kjit {target}, host arrays", best_ms(lambda: vsin(x), args.repeat),
         "copies in and out" if target == "cuda" else ""),
        ("NumPy np.sin", best_ms(lambda: np.sin(x), args.repeat), "")]
if target == "cuda":
    dx, out = kjit.to_device(x), kjit.device_array(x.shape)
    rows.insert(1, ("kjit cuda, device arrays",
                    best_ms(lambda: vsin(dx, out=out), args.repeat, kjit.synchronize), ""))
cp = cupy_or_none()
if cp is not None:
    cx = cp.asarray(x)
    print("allclose(CuPy, NumPy):", np.allclose(cp.asnumpy(cp.sin(cx)), np.sin(x)))
    rows.append(("CuPy cp.sin, device arrays",
                 best_ms(lambda: cp.sin(cx), args.repeat, cp.cuda.Device().synchronize), ""))
    # kjit on CuPy's own array: no copy, a CuPy array back.
    assert isinstance(vsin(cx), cp.ndarray) if target == "cuda" else True
report("sin, 1e6 float64 elements", rows)
