"""@kernel launches from Python, written as in Numba: kern[grid, block](args),
grid and block as ints or tuples.  The seed kernels (Mandelbrot, delay-and-sum,
the mesh distance) are checked against NumPy float64 references on every
target here (cuda where a GPU is usable), and launch mistakes are errors."""
import os

import numpy as np
import pytest

import kjit
from conftest import REPO, TARGETS, example, requires_gpu


@pytest.fixture(scope="module", params=TARGETS)
def target(request):
    return request.param


def mandelbrot_reference(min_x, max_x, min_y, max_y, height, width, iters):
    x = min_x + np.arange(width) * ((max_x - min_x) / width)
    y = min_y + np.arange(height) * ((max_y - min_y) / height)
    c = x[None, :] + 1j * y[:, None]
    z = np.zeros_like(c)
    count = np.full(c.shape, iters, dtype=np.int64)
    alive = np.ones(c.shape, bool)
    for i in range(iters):
        z[alive] = z[alive] * z[alive] + c[alive]
        escaped = alive & (z.real * z.real + z.imag * z.imag >= 4)
        count[escaped] = i
        alive &= ~escaped
    return count.astype(np.uint8)


def test_mandelbrot(target, rng):
    m = kjit.load(example("mandelbrot.kern"), target=target)
    # A random window near the set, so that every run looks at fresh points.
    # (every such window holds part of the set's edge)
    cx, cy = rng.uniform(-1.0, -0.3), rng.uniform(-0.3, 0.3)
    w = rng.uniform(0.8, 1.5)
    box = (cx - w, cx + w, cy - w * 2 / 3, cy + w * 2 / 3)
    image = np.zeros((128, 192), np.uint8)
    m.mandel_kernel[(6, 16), (32, 8)](*box, image, 20)
    ref = mandelbrot_reference(*box, 128, 192, 20)
    # The escape test |z|^2 >= 4 turns on the last bit for points on its edge:
    # at most 0.2% of the pixels may differ, by any count.
    assert np.mean(image != ref) <= 0.002, np.mean(image != ref)
    assert len(np.unique(ref)) > 3  # the window is not all one colour
    # The device function, called on the host.
    assert m.mandel(0.0, 0.0, 20) == 20 and m.mandel(2.0, 2.0, 20) == 0


def test_mesh_distance_kernel(target, rng):
    m = kjit.load(example("lla.kern"), target=target)
    nx, ny = 200, 150
    lat2, lon2 = rng.uniform(-60, 60), rng.uniform(-120, 120)
    xb, xe, yb, ye = -45.0, 45.0, -90.0, 90.0
    out = np.full((ny, nx), np.nan)
    m.lla[(7, 19), (32, 8)](lat2, lon2, xb, xe, yb, ye, 6371.0, nx, ny, out)
    lat1 = ((xe - xb) * np.arange(nx) / (nx - 1) + xb)[None, :]
    lon1 = ((ye - yb) * np.arange(ny) / (ny - 1) + yb)[:, None]
    a = (np.sin(0.008726645 * (lat2 - lat1)) ** 2 + np.cos(0.01745329 * lat1) *
         np.cos(0.01745329 * lat2) * np.sin(0.008726645 * (lon2 - lon1)) ** 2)
    np.testing.assert_allclose(out, np.arctan2(a, 1 - a) * 6371.0, rtol=1e-12, atol=1e-9)
    # The vectorized form on the same mesh, with scalars broadcast, agrees.
    lat1b, lon1b = np.broadcast_arrays(lat1, lon1)
    np.testing.assert_allclose(m.lla_a(lat1b, lon1b, lat2, lon2, 6371.0), out,
                               rtol=1e-13, atol=1e-9)


def test_delay_and_sum(target, rng):
    if target == "cpu":
        target = "parallel"  # 150 million inner steps
    m = kjit.load(example("das.kern"), target=target)
    data = rng.integers(-1000, 1000, 256_000, dtype=np.int64)
    out = np.zeros((38, 60))                    # rows j, columns i
    m.das[60, 38](out, data)
    i = np.arange(60)[None, :]
    j = np.arange(38)[:, None]
    ref = np.zeros((38, 60))
    k = np.arange(128)
    for n in range(128):
        # shapes (38, 60, 128): the delay for every pixel and channel k
        dk = np.sqrt((i * i)[..., None] + (j[..., None] - k * 6) ** 2.0)
        dn = np.sqrt(i * i + (j - n * 6) ** 2.0)[..., None]
        order = (((dk + dn) * 0.05) / 1.54 * 30).astype(np.int64)
        ok = order < 2000
        ref += np.where(ok, data[np.where(ok, k * 2000 + order, 0)], 0).sum(axis=-1)
    # x ** 0.5 against sqrt may move a delay across an integer: a handful of
    # the 16,384 terms of a pixel can take a neighbouring sample.
    bad = np.abs(out - ref) > 0
    assert np.mean(bad) < 0.02, np.mean(bad)
    np.testing.assert_allclose(out, ref, atol=4 * 2000)


def test_launch_forms_and_errors(rng):
    m = kjit.compile("""
@kernel
fn fill(a: f32[,], value: f32) {
    let x, y = grid(2);
    if y < a.shape[0] && x < a.shape[1] { a[y, x] = value + f32(y * 1000 + x); }
}
""", name="fill.kern", target="cpu")
    a = np.zeros((20, 30), np.float32)
    v = float(rng.uniform(-5, 5))
    m.fill[(4, 3), (8, 8)](a, v)
    # value is an f32 and the sum one f32 rounding: the same in NumPy's float32
    # (a float64 reference is off by v's rounding, large where the sum cancels).
    ref = np.float32(v) + (np.arange(20)[:, None] * 1000 + np.arange(30)).astype(np.float32)
    np.testing.assert_array_equal(a, ref)
    # A transposed view is written in place.
    b = np.zeros((30, 20), np.float32)
    m.fill[(1, 1), (32, 32)](b.T, v)
    np.testing.assert_array_equal(b.T, ref)
    # ints for 1-D configurations; the third setting is a stream.
    c = np.zeros((1, 40), np.float32)
    m.fill[2, 32, kjit.Stream(kjit.context("cpu"))](c, 1.0)
    np.testing.assert_array_equal(c[0], 1 + np.arange(40))
    assert m.fill.kind == "kernel" and m.fill.signatures == ("(f32[,], f32)",)
    assert m.fill.params() == [("f32", 2), ("f32", 0)]

    with pytest.raises(kjit.DTypeError, match="must be a f32\\[,\\] array, not f64\\[,\\]"):
        m.fill[1, 1](np.zeros((2, 2)), 1.0)
    with pytest.raises(kjit.DTypeError, match="must be a f32\\[,\\] array, not f32\\[\\]"):
        m.fill[1, 1](np.zeros(4, np.float32), 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="at most 1024"):
        m.fill[1, (64, 32)](a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="every extent is at least 1"):
        m.fill[0, 1](a, 1.0)
    # CUDA's limits on every target, checked before anything runs
    with pytest.raises(kjit.InvalidArgumentError, match="2147483648 blocks in x; at most 2147483647"):
        m.fill[2**31, 1](a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="65536 blocks in y; at most 65535"):
        m.fill[(1, 65536), 1](a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="65 threads in z; at most 64"):
        m.fill[1, (1, 1, 65)](a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="below 2\\*\\*32"):
        m.fill[2**32, 1](a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="is a @kernel"):
        m.fill(a, 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="pass an array"):
        m.fill[1, 1]([[1.0]], 1.0)
    with pytest.raises(kjit.InvalidArgumentError, match="dynamic shared memory"):
        m.fill[1, 1, None, -1]
    with pytest.raises(kjit.InvalidArgumentError, match="takes 2 arguments"):
        m.fill[1, 1](a)


@requires_gpu
def test_gpu_kernel_on_device_arrays(rng):
    m = kjit.load(example("mandelbrot.kern"), target="cuda")
    image = kjit.device_array((1024, 1536), np.uint8)
    m.mandel_kernel[(48, 128), (32, 8)](-2.0, 1.0, -1.0, 1.0, image, 20)
    got = image.copy_to_host()
    ref = mandelbrot_reference(-2.0, 1.0, -1.0, 1.0, 1024, 1536, 20)
    assert np.mean(got != ref) <= 0.002
    try:
        import cupy as cp
    except ImportError:
        return
    cimage = cp.zeros((1024, 1536), cp.uint8)
    m.mandel_kernel[(48, 128), (32, 8), cp.cuda.Stream.null](-2.0, 1.0, -1.0, 1.0, cimage, 20)
    assert np.mean(cp.asnumpy(cimage) != ref) <= 0.002


def test_tensor_core_matmul(target, rng):
    """tests/bench/matmul_tc.kern: mma(), the warp's f64 matrix multiply-
    accumulate, tiled as a DMMA GEMM, at sizes that are not multiples of its
    128 x 128 tiles, against NumPy's float64 `@`.  On cpu and parallel each
    element is the fma chain over k in order (docs/language.md), which NumPy's
    BLAS need not follow: the two agree within a few ulps of the sums."""
    m = kjit.load(os.path.join(REPO, "tests", "bench", "matmul_tc.kern"), target=target)
    for n, depth, cols in ((37, 29, 45), (130, 20, 140)):
        a = rng.uniform(-1, 1, (n, depth))
        b = rng.uniform(-1, 1, (depth, cols))
        c = np.full((n, cols), np.nan)
        m.matmul_tc[((cols + 127) // 128, (n + 127) // 128), 256](a, b, c)
        scale = np.abs(a) @ np.abs(b)
        assert np.all(np.abs(c - a @ b) <= 1e-14 * scale), np.max(np.abs(c - a @ b) / scale)


def test_mma_errors_are_compile_errors():
    with pytest.raises(kjit.CompileError, match="mma\\(\\) gives two values"):
        kjit.compile("@kernel\nfn k(x: f64[]) { let d = mma(x[0], x[1], 0.0, 0.0); x[0] = d; }\n")
