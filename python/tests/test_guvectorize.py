"""@guvectorize calls from Python (examples/gufunc.kern): NumPy's gufunc
broadcasting over the loop dimensions, outputs allocated or given, a scalar
for a () input, several outputs, device arrays on cuda, and the errors.  Each
result is compared with a float64 NumPy reference on fresh random inputs,
within a stated relative tolerance."""
import numpy as np
import pytest

import kjit
from conftest import TARGETS, example, requires_gpu

F64_TOL = 1e-12   # sums of a few dozen products: a few ulps of float64
F32_TOL = 1e-5    # the same in float32

MIN_MAX_SOURCE = """
@guvectorize("(n)->(),()")
fn min_max(x: f64[], lo: f64[], hi: f64[]) {
    lo[0] = x[0];
    hi[0] = x[0];
    for i in range(1, len(x)) { lo[0] = min(lo[0], x[i]); hi[0] = max(hi[0], x[i]); }
}
"""


def relative_error(got, want):
    want = np.asarray(want, np.float64)
    return np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300), initial=0.0)


def moving_average(x, w):
    w = np.broadcast_to(w, x.shape[:-1])
    out = np.empty(x.shape)
    for r in np.ndindex(x.shape[:-1]):
        for i in range(x.shape[-1]):
            out[r + (i,)] = x[r][max(0, i - w[r] + 1):i + 1].mean()
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_dot_broadcasts_like_numpy(target, rng):
    m = kjit.load(example("gufunc.kern"), target=target)
    n = int(rng.integers(1, 40))
    for ashape, bshape in [((1000 + int(rng.integers(0, 999)), n),) * 2,   # not a multiple
                           ((0, n), (0, n)),                             # an empty loop
                           ((1, n), (1, n)),                             # one element
                           ((n,), (n,)),                                 # no loop: 0-d
                           ((7, 1, n), (5, n))]:                         # broadcast
        a, b = rng.random(ashape), rng.random(bshape)
        got = m.dot(a, b)
        want = np.einsum("...n,...n->...", a, b)
        assert got.shape == want.shape and got.dtype == np.float64
        assert relative_error(got, want) <= F64_TOL
    a32 = rng.random((100, n)).astype(np.float32)
    got = m.dot(a32, a32)
    assert got.dtype == np.float32
    assert relative_error(got, np.einsum("...n,...n->...", a32.astype(np.float64),
                                         a32.astype(np.float64))) <= F32_TOL


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_norm_and_moving_average(target, rng):
    m = kjit.load(example("gufunc.kern"), target=target)
    a = rng.random((3, 1, 6, 5)).astype(np.float32)
    b = rng.random((4, 5, 7)).astype(np.float32)
    got = m.matmul(a, b)
    assert got.shape == (3, 4, 6, 7)
    assert relative_error(got, np.matmul(a.astype(np.float64), b.astype(np.float64))) <= F32_TOL
    # Strided operands: a transposed view.
    bt = rng.random((7, 5))
    a64 = rng.random((2, 6, 5))
    assert relative_error(m.matmul(a64, bt.T), np.matmul(a64, bt.T)) <= F64_TOL
    x = rng.standard_normal((4, 5, 33))
    assert relative_error(m.row_norm(x), np.linalg.norm(x, axis=-1)) <= F64_TOL
    x = rng.random((13, 101))
    assert relative_error(m.moving_average(x, 5), moving_average(x, 5)) <= F64_TOL
    w = rng.integers(1, 12, 13)
    assert relative_error(m.moving_average(x, w), moving_average(x, w)) <= F64_TOL


@pytest.mark.parametrize("target", TARGETS)
def test_outputs_given_and_several(target, rng):
    m = kjit.load(example("gufunc.kern"), target=target)
    a, b = rng.random((50, 16)), rng.random((50, 16))
    out = np.full(50, np.nan)
    assert m.dot(a, b, out=out) is out
    assert relative_error(out, np.einsum("ij,ij->i", a, b)) <= F64_TOL
    out2 = np.full(50, np.nan)
    m.dot(a, b, out2)
    assert relative_error(out2, out) == 0
    mm = kjit.compile(MIN_MAX_SOURCE, target=target)
    x = rng.standard_normal((6, 9, 21))
    lo, hi = mm.min_max(x)
    assert np.array_equal(lo, x.min(axis=-1)) and np.array_equal(hi, x.max(axis=-1))


def test_errors_name_the_problem(rng):
    m = kjit.load(example("gufunc.kern"), target="cpu")
    with pytest.raises(kjit.ShapeError, match="core dimension n: 16 in argument 0, 12 in "
                                              "argument 1"):
        m.dot(rng.random((4, 16)), rng.random((4, 12)))
    with pytest.raises(kjit.ShapeError, match="do not broadcast"):
        m.dot(rng.random((4, 16)), rng.random((3, 16)))
    with pytest.raises(kjit.ShapeError, match="output 0 has shape"):
        m.dot(rng.random((4, 16)), rng.random((4, 16)), out=np.empty(5))
    with pytest.raises(kjit.DTypeError, match="signatures on offer"):
        m.dot(np.ones((4, 16), np.int32), np.ones((4, 16), np.int32))
    with pytest.raises(kjit.InvalidArgumentError, match="takes its 2 inputs"):
        m.dot(rng.random(3))
    assert m.matmul.layout == "(m,n),(n,p)->(m,p)"
    assert (m.matmul.inputs, m.matmul.outputs) == (2, 1)
    a32 = np.ones((3, 4), np.float32)
    assert m.matmul.signatures[m.matmul.match(a32, a32.T)] == "(f32[,], f32[,], f32[,])"
    m.matmul.prepare(a32, a32.T)   # code generated, nothing run


@requires_gpu
def test_gpu_device_arrays_stay_on_the_device(rng):
    m = kjit.load(example("gufunc.kern"), target="cuda")
    a, b = rng.random((4097, 16)), rng.random((4097, 16))
    da, db = kjit.to_device(a), kjit.to_device(b)
    out = m.dot(da, db)
    assert isinstance(out, kjit.DeviceArray)
    assert relative_error(out.copy_to_host(), np.einsum("ij,ij->i", a, b)) <= F64_TOL
    stream = kjit.Stream(m.context)
    out2 = kjit.device_array((4097,), np.float64)
    m.dot(da, db, out=out2, stream=stream)
    stream.synchronize()
    assert relative_error(out2.copy_to_host(), np.einsum("ij,ij->i", a, b)) <= F64_TOL
