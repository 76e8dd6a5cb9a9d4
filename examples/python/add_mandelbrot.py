"""Seed 002: Numba's @vectorize(target='cuda') add, and the Mandelbrot kernel
with a device function, complex numbers and a 2-D grid-stride loop, through
kjit (examples/add.kern, examples/mandelbrot.kern), timed beside NumPy's (and
CuPy's add where it is installed)."""
import numpy as np

from seedlib import best_ms, cupy_or_none, kern, kjit, options, report

args = options(__doc__).parse_args()
add = kjit.load(kern("add.kern"), target=args.target).add
mandel = kjit.load(kern("mandelbrot.kern"), target=args.target).mandel_kernel
target = add.context.target
rng = np.random.default_rng(2)
n = 10_000_000
a = rng.random(n, dtype=np.float32)
b = rng.random(n, dtype=np.float32)

s = add(a, b)
assert np.array_equal(s, a + b), "kjit's add differs from NumPy's"
rows = [(f"kjit {target}, host arrays", best_ms(lambda: add(a, b), args.repeat),
         "copies in and out" if target == "cuda" else ""),
        ("NumPy a + b", best_ms(lambda: a + b, args.repeat), "")]
if target == "cuda":
    da, db = kjit.to_device(a), kjit.to_device(b)
    out = kjit.device_array(n, np.float32)
    rows.insert(1, ("kjit cuda, device arrays",
                    best_ms(lambda: add(da, db, out=out), args.repeat, kjit.synchronize), ""))
cp = cupy_or_none()
if cp is not None:
    ca, cb = cp.asarray(a), cp.asarray(b)
    rows.append(("CuPy cp.add, device arrays",
                 best_ms(lambda: cp.add(ca, cb), args.repeat, cp.cuda.Device().synchronize), ""))
report(f"add, {n:.0e} float32 elements", rows)

height, width = (1024, 1536) if target != "cpu" else (512, 768)
image = np.zeros((height, width), np.uint8)
launch = mandel[(48, 128), (32, 8)]
kjit_ms = best_ms(lambda: launch(-2.0, 1.0, -1.0, 1.0, image, 20), args.repeat)


def numpy_mandelbrot():
    x = np.linspace(-2.0, 1.0, width, endpoint=False)
    y = np.linspace(-1.0, 1.0, height, endpoint=False)
    c = x[None, :] + 1j * y[:, None]
    z = np.zeros_like(c)
    count = np.full(c.shape, 20, np.uint8)
    alive = np.ones(c.shape, bool)
    for i in range(20):
        z[alive] = z[alive] ** 2 + c[alive]
        escaped = alive & (np.abs(z) >= 2)
        count[escaped] = i
        alive &= ~escaped
    return count


same = np.mean(image == numpy_mandelbrot()) * 100
report(f"Mandelbrot {width} x {height}, 20 iterations ({same:.2f}% of the pixels as NumPy's)", [(f"kjit {target} kernel", kjit_ms, "grid (48, 128), block (32, 8)"),
            ("NumPy, whole-array steps", best_ms(numpy_mandelbrot, 1), "")])
