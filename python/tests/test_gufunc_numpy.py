"""@guvectorize functions as NumPy generalized ufuncs (f.ufunc, cpu and
parallel): the layout as the signature, one loop per signature, and NumPy's
keywords (axes=, axis=, keepdims=, out=, dtype=, casting=).  Results are
compared with float64 NumPy references on fresh random inputs."""
import gc

import numpy as np
import pytest

from conftest import CPU_TARGETS, example
import kjit
from kjit import _core

pytestmark = pytest.mark.skipif(_core._fast is None,
                                reason=f"skipped: the gufuncs need the compiled path "
                                       f"({kjit.hot_path})")

F64_TOL = 1e-12
F32_TOL = 1e-5

MIN_MAX = """
@guvectorize(f64(f64[], f64[], f64[]), i32(i32[], i32[], i32[]), "(n)->(),()")
fn min_max(x, lo, hi) {
    lo[0] = x[0];
    hi[0] = x[0];
    for i in range(1, len(x)) { lo[0] = min(lo[0], x[i]); hi[0] = max(hi[0], x[i]); }
}
"""

CHECKED = """
@guvectorize("(n),()->(n)")
fn share(x: i64[], d: i64, out: i64[]) {
    for i in range(len(x)) { out[i] = x[i] / d; }
}
"""


def rel(got, want):
    want = np.asarray(want, np.float64)
    return np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300), initial=0.0)


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_is_a_generalized_ufunc(rng, target):
    m = kjit.load(example("gufunc.kern"), target=target)
    u = m.dot.ufunc
    assert isinstance(u, np.ufunc)
    assert u is m.dot.ufunc  # made once
    assert (u.signature, u.nin, u.nout, u.types, u.__name__) == \
        ("(n),(n)->()", 2, 1, ["ff->f", "dd->d"], "dot")
    n = int(rng.integers(1, 40))
    a, b = rng.random((1000 + int(rng.integers(0, 99)), n)), rng.random((1, n))
    assert rel(u(a, b), np.einsum("in,in->i", a, np.broadcast_to(b, a.shape))) <= F64_TOL
    # strided operands: every other row and column, a transposed view
    big = rng.random((60, 2 * n))
    assert rel(u(big[::2, ::2], big[1::2, ::2]),
               np.einsum("in,in->i", big[::2, ::2], big[1::2, ::2])) <= F64_TOL
    # axes=: the core along axis 0 of each input
    assert rel(u(a.T, a.T, axes=[(0,), (0,), ()]), np.einsum("in,in->i", a, a)) <= F64_TOL
    # out=, and the float32 loop for float32 inputs; dtype= picks the other
    out = np.full(a.shape[0], np.nan)
    assert u(a, a, out=out) is out
    assert rel(out, np.einsum("in,in->i", a, a)) <= F64_TOL
    a32 = a.astype(np.float32)
    assert u(a32, a32).dtype == np.float32
    assert rel(u(a32, a32), np.einsum("in,in->i", a32.astype(np.float64),
                                      a32.astype(np.float64))) <= F32_TOL
    assert u(a32, a32, dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError):
        u(a, a32, casting="no")
    # NumPy's own shape errors, before any loop runs
    with pytest.raises(ValueError):
        u(rng.random((4, 3)), rng.random((4, 5)))


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_matmul_norm_and_moving_average(rng, target):
    m = kjit.load(example("gufunc.kern"), target=target)
    mm = m.matmul.ufunc
    assert mm.signature == "(m,n),(n,p)->(m,p)"
    a, b = rng.random((3, 1, 6, 5)), rng.random((4, 5, 7))
    assert rel(mm(a, b), np.matmul(a, b)) <= F64_TOL
    bt = rng.random((7, 5))
    assert rel(mm(a, bt.T), np.matmul(a, bt.T)) <= F64_TOL
    out = np.empty((3, 4, 6, 7))
    assert mm(a, b, out=out) is out and rel(out, np.matmul(a, b)) <= F64_TOL
    # axes= moves the cores: (n,m) and (p,n) in, (p,m) out
    at, btt = np.swapaxes(a[:, 0], -1, -2).copy(), np.swapaxes(b[0], -1, -2).copy()
    got = mm(at, btt, axes=[(-1, -2), (-1, -2), (-1, -2)])
    assert rel(got, np.swapaxes(np.matmul(a[:, 0], b[0]), -1, -2)) <= F64_TOL
    norm = m.row_norm.ufunc
    x = rng.standard_normal((5, 33))
    assert rel(norm(x), np.linalg.norm(x, axis=-1)) <= F64_TOL
    assert rel(norm(x, axis=0), np.linalg.norm(x, axis=0)) <= F64_TOL
    assert norm(x, axis=0, keepdims=True).shape == (1, 33)
    ma = m.moving_average.ufunc
    assert (ma.signature, ma.types) == ("(n),()->(n)", ["dl->d"])
    x = rng.random((13, 101))
    w = rng.integers(1, 12, 13)
    np.testing.assert_array_equal(ma(x, 5), m.moving_average(x, 5))
    np.testing.assert_array_equal(ma(x, w), m.moving_average(x, w))


def test_several_outputs_and_loops(rng):
    g = kjit.compile(MIN_MAX, target="cpu").min_max
    u = g.ufunc
    assert (u.nin, u.nout, u.types) == (1, 2, ["d->dd", "i->ii"])
    x = rng.standard_normal((6, 9, 21))
    lo, hi = u(x)
    np.testing.assert_array_equal(lo, x.min(axis=-1))
    np.testing.assert_array_equal(hi, x.max(axis=-1))
    i = rng.integers(-1000, 1000, (7, 11)).astype(np.int32)
    lo = np.empty(7, np.int32)
    hi = np.empty(7, np.int32)
    r = u(i, out=(lo, hi))
    assert r[0] is lo and r[1] is hi
    np.testing.assert_array_equal(lo, i.min(axis=-1))
    np.testing.assert_array_equal(hi, i.max(axis=-1))
    # int16 goes to the int32 loop (a safe cast), as NumPy's own gufuncs do
    np.testing.assert_array_equal(u(i.astype(np.int16))[1], i.max(axis=-1))


def test_gufunc_outlives_its_module(rng):
    u = kjit.load(example("gufunc.kern"), target="cpu").dot.ufunc
    gc.collect()
    a = rng.random((10, 4))
    assert rel(u(a, a), np.einsum("in,in->i", a, a)) <= F64_TOL


def test_errors_in_a_gufunc_loop_are_raised():
    u = kjit.compile(CHECKED, target="cpu", check=True).share.ufunc
    np.testing.assert_array_equal(u(np.array([6, 8]), 2), [3, 4])
    with pytest.raises((kjit.CheckError, SystemError)) as error:
        u(np.array([6, 8]), 0)
    text = str(error.value) + str(error.value.__cause__ or "")
    assert "division" in text or "zero" in text, text


def test_gufunc_refused_without_the_compiled_path(monkeypatch):
    m = kjit.load(example("gufunc.kern"), target="cpu")
    monkeypatch.setattr(_core, "_fast", None)
    with pytest.raises(kjit.InvalidArgumentError, match="compiled path"):
        _ = m.dot.ufunc
