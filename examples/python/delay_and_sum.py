"""Seed 000: delay-and-sum image reconstruction, one block per image column
and one thread per row, each pixel summing 128 x 128 samples
(examples/das.kern), timed beside a NumPy version of the same sums.  The full
image is 1200 x 762; on cpu targets this runs a 120 x 76 corner by default
(--full for all of it)."""
import numpy as np

from seedlib import best_ms, kern, kjit, options, report

parser = options(__doc__)
parser.add_argument("--full", action="store_true", help="the seed's 1200 x 762 image on any target")
args = parser.parse_args()
m = kjit.load(kern("das.kern"), target=args.target)
target = m.context.target
cols, rows_ = (1200, 762) if args.full or target == "cuda" else (120, 76)
# Echoes of a point scatterer (examples/das.kern's echoes kernel), so that the
# image has something to show, over a little noise.
data = np.random.default_rng(0).integers(0, 5, 256_000, dtype=np.int64)
m.echoes[1, 128](data, 60, 40, 1000)
out = np.zeros((rows_, cols))
kjit_ms = best_ms(lambda: m.das[cols, rows_](out, data), args.repeat)


def numpy_das(cols, rows_):
    i = np.arange(cols)[None, :, None]
    j = np.arange(rows_)[:, None, None]
    k = np.arange(128)
    result = np.zeros((rows_, cols))
    dk = np.sqrt(i * i + (j - k * 6) ** 2.0)          # (rows, cols, 128)
    for n in range(128):
        dn = np.sqrt(i * i + (j - n * 6) ** 2.0)
        order = (((dk + dn) * 0.05) / 1.54 * 30).astype(np.int64)
        ok = order < 2000
        result += np.where(ok, data[np.where(ok, k * 2000 + order, 0)], 0).sum(axis=-1)
    return result


# NumPy on a 60 x 38 corner (the whole image would take minutes), scaled up.
small_c, small_r = min(cols, 60), min(rows_, 38)
numpy_ms = best_ms(lambda: numpy_das(small_c, small_r), 1)
ref = numpy_das(small_c, small_r)
close = np.mean(np.abs(out[:small_r, :small_c] - ref) <= 1e-9 * np.abs(ref).max()) * 100
peak = tuple(int(v) for v in np.unravel_index(np.argmax(out), out.shape))
print(f"brightest pixel (row, column): {peak}; {close:.1f}% of the corner as NumPy's "
      f"(x ** 0.5 against sqrt can move a delay across a sample)")
report(f"delay-and-sum, {cols} x {rows_} pixels x 128 x 128 samples", [
    (f"kjit {target} kernel", kjit_ms, f"grid {cols}, block {rows_}"),
    ("NumPy, same sums", numpy_ms * (cols * rows_) / (small_c * small_r),
     f"measured on {small_c} x {small_r}, scaled")])
