"""@vectorize functions as real numpy.ufuncs (f.ufunc, cpu and parallel): one
loop per signature, NumPy's methods and keywords, other libraries'
__array_ufunc__ (Dask, when installed)."""
import gc

import numpy as np
import pytest

from conftest import example
import kjit
from kjit import _core

pytestmark = pytest.mark.skipif(_core._fast is None,
                                reason=f"skipped: the ufuncs need the compiled path "
                                       f"({kjit.hot_path})")

MULTI = """
@vectorize(f32(f32, f32), f64(f64, f64), i32(i32, i32), c128(c128, c128))
fn mix(a, b) { return a * b + a; }
"""


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_is_a_numpy_ufunc(rng, target):
    add = kjit.load(example("add.kern"), target=target).add
    u = add.ufunc
    assert isinstance(u, np.ufunc)
    assert u is add.ufunc  # made once
    assert (u.nin, u.nout, u.types, u.__name__) == (2, 1, ["ff->f"], "add")
    a = rng.random(1000).astype(np.float32)
    b = rng.random(1000).astype(np.float32)
    np.testing.assert_array_equal(u(a, b), a + b)
    np.testing.assert_array_equal(u(a[::2], b[1::2]), a[::2] + b[1::2])
    grid = rng.random((30, 40)).astype(np.float32)
    np.testing.assert_array_equal(u(grid, grid[0]), grid + grid[0])
    # methods
    np.testing.assert_allclose(u.reduce(a), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(u.reduce(grid, axis=1), grid.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(u.accumulate(a), np.add.accumulate(a))
    np.testing.assert_array_equal(u.outer(a[:5], b[:7]), np.add.outer(a[:5], b[:7]))
    np.testing.assert_array_equal(add.reduce(grid, axis=0), u.reduce(grid, axis=0))
    x = np.zeros(5, np.float32)
    u.at(x, [0, 1, 1, 4], np.float32(2))
    np.testing.assert_array_equal(x, [2, 4, 0, 0, 2])
    # keywords
    mask = a > 0.5
    out = np.full_like(a, -1)
    u(a, b, out=out, where=mask)
    np.testing.assert_array_equal(out, np.where(mask, a + b, -1))
    # NumPy's casting: int inputs go to the f32 loop only when asked
    ints = np.arange(10, dtype=np.int16)
    np.testing.assert_array_equal(u(ints, ints), (ints + ints).astype(np.float32))
    with pytest.raises(TypeError):
        u(a.astype(np.float64), b, casting="no")


def test_one_loop_per_signature(rng):
    mix = kjit.compile(MULTI, target="cpu").mix
    u = mix.ufunc
    assert u.types == ["ff->f", "dd->d", "ii->i", "DD->D"]
    a = rng.random(100).astype(np.float32)
    assert u(a, a).dtype == np.float32
    assert u(a, a, dtype=np.float64).dtype == np.float64
    np.testing.assert_allclose(u(a, a, dtype=np.float64), a.astype(np.float64) ** 2 + a)
    i = np.arange(10, dtype=np.int32)
    np.testing.assert_array_equal(u(i, i), i * i + i)
    c = a.astype(np.complex128) * 1j
    np.testing.assert_allclose(u(c, c), c * c + c)


def test_ufunc_outlives_its_module(rng):
    u = kjit.compile(MULTI, target="cpu").mix.ufunc
    gc.collect()
    a = rng.random(10)
    np.testing.assert_allclose(u(a, a), a * a + a)


def test_errors_in_a_loop_are_raised(rng):
    m = kjit.compile("@vectorize\nfn quot(x: i64, d: i64) -> i64 {\n    return x / d;\n}\n",
                     target="cpu", check=True)
    u = m.quot.ufunc
    np.testing.assert_array_equal(u(np.array([6, 8]), np.array([3, 2])), [2, 4])
    # NumPy runs such loops without asking for errors; the loop's exception
    # comes out of the call all the same (as itself or inside SystemError)
    with pytest.raises((kjit.CheckError, SystemError)) as error:
        u(np.array([6, 8]), np.array([3, 0]))
    text = str(error.value) + str(error.value.__cause__ or "")
    assert "division" in text or "zero" in text, text


def test_dask_arrays(rng):
    da = pytest.importorskip("dask.array", reason="skipped: dask is not installed")
    u = kjit.load(example("add.kern"), target="cpu").add.ufunc
    a = rng.random(1000).astype(np.float32)
    d = da.from_array(a, chunks=250)
    r = u(d, d)
    assert isinstance(r, da.Array)  # dask's __array_ufunc__ took the call
    np.testing.assert_array_equal(r.compute(), a + a)
