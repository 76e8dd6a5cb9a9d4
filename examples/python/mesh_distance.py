"""Seed 004: a great-circle distance over a 1000 x 1000 latitude/longitude
mesh, first vectorized with the fixed point and the scale passed as scalars
(broadcast, not expanded into arrays), then as a kernel that builds the mesh
itself (examples/lla.kern); both checked against NumPy and timed beside it
(and CuPy where it is installed)."""
import numpy as np

from seedlib import best_ms, cupy_or_none, kern, kjit, options, report

args = options(__doc__).parse_args()
m = kjit.load(kern("lla.kern"), target=args.target)
target = m.context.target
n = 1000
xb, xe, yb, ye, s = -45.0, 45.0, -90.0, 90.0, 6371.0
lat2, lon2 = 30.0, 60.0
lat1, lon1 = np.meshgrid(np.linspace(xb, xe, n), np.linspace(yb, ye, n))


def numpy_lla(lat1, lon1):
    a = (np.sin(0.008726645 * (lat2 - lat1)) ** 2 + np.cos(0.01745329 * lat1) *
         np.cos(0.01745329 * lat2) * np.sin(0.008726645 * (lon2 - lon1)) ** 2)
    return np.arctan2(a, 1 - a) * s


ref = numpy_lla(lat1, lon1)
vec = m.lla_a(lat1, lon1, lat2, lon2, s)
out = np.zeros((n, n))
grid, block = ((n + 31) // 32, (n + 7) // 8), (32, 8)
m.lla[grid, block](lat2, lon2, xb, xe, yb, ye, s, n, n, out)
print(f"largest difference from NumPy: vectorized {np.max(np.abs(vec - ref)):.1e} km, "
      f"kernel {np.max(np.abs(out - ref)):.1e} km")
rows = [(f"kjit {target} vectorized, host arrays",
         best_ms(lambda: m.lla_a(lat1, lon1, lat2, lon2, s), args.repeat), "scalars broadcast"),
        (f"kjit {target} kernel, mesh built on the {('GPU' if target == 'cuda' else 'CPU')}",
         best_ms(lambda: m.lla[grid, block](lat2, lon2, xb, xe, yb, ye, s, n, n, out),
                 args.repeat), "no input arrays"),
        ("NumPy, whole-array expressions", best_ms(lambda: numpy_lla(lat1, lon1), args.repeat), "")]
if target == "cuda":
    dout = kjit.device_array((n, n))
    rows.insert(2, ("kjit cuda kernel, device output",
                    best_ms(lambda: m.lla[grid, block](lat2, lon2, xb, xe, yb, ye, s, n, n, dout),
                            args.repeat, kjit.synchronize), ""))
cp = cupy_or_none()
if cp is not None:
    clat, clon = cp.asarray(lat1), cp.asarray(lon1)

    def cupy_lla():
        a = (cp.sin(0.008726645 * (lat2 - clat)) ** 2 + cp.cos(0.01745329 * clat) *
             np.cos(0.01745329 * lat2) * cp.sin(0.008726645 * (lon2 - clon)) ** 2)
        return cp.arctan2(a, 1 - a) * s
    rows.append(("CuPy, whole-array expressions",
                 best_ms(cupy_lla, args.repeat, cp.cuda.Device().synchronize), ""))
report(f"mesh distance, {n} x {n}", rows)
