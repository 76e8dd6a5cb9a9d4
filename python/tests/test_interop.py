"""NumPy's __array_ufunc__ protocol (NEP 13) with pandas Series, xarray
DataArrays and Dask arrays: through f.ufunc (a numpy.ufunc, cpu and parallel)
and through kjit's functions themselves, which hand a call with such an
argument to its __array_ufunc__ as NumPy hands a ufunc call (every target).
On the GPU, Dask arrays of CuPy chunks and CuPy arrays themselves.  Each
library is optional: a missing one skips its tests, saying so."""
import numpy as np
import pytest

from conftest import CPU_TARGETS, example, requires_gpu
import kjit
from kjit import _core

needs_fast = pytest.mark.skipif(_core._fast is None,
                                reason=f"skipped: numpy.ufuncs need the compiled path "
                                       f"({kjit.hot_path})")


def library(name):
    return pytest.importorskip(name, reason=f"skipped: {name} is not installed")


@pytest.fixture(params=CPU_TARGETS)
def modules(request):
    return (kjit.load(example("add.kern"), target=request.param),
            kjit.load(example("gufunc.kern"), target=request.param))


def calls(m, ufunc):
    """The add of the module, as a kjit function and (with the compiled path)
    as a numpy.ufunc."""
    out = [m.add]
    if ufunc and _core._fast is not None:
        out.append(m.add.ufunc)
    return out


@pytest.mark.parametrize("ufunc", [False, True])
def test_pandas_series(modules, rng, ufunc):
    pd = library("pandas")
    m, g = modules
    a = rng.random(50).astype(np.float32)
    s = pd.Series(a, index=[f"r{i}" for i in range(50)], name="x")
    for add in calls(m, ufunc):
        r = add(s, s)
        assert isinstance(r, pd.Series), type(r)
        assert list(r.index) == list(s.index)
        np.testing.assert_array_equal(r.to_numpy(), a + a)
        # pandas aligns on the index before the call, as for np.add
        shuffled = s.iloc[::-1]
        np.testing.assert_array_equal(add(s, shuffled).reindex(s.index).to_numpy(), a + a)
        np.testing.assert_array_equal(add(s, np.float32(1)).to_numpy(), a + 1)
    if ufunc and _core._fast is not None:
        np.testing.assert_allclose(m.add.ufunc.reduce(s), a.sum(), rtol=1e-5)
        r = m.add.ufunc.accumulate(s)
        np.testing.assert_array_equal(np.asarray(r), np.add.accumulate(a))
    x = pd.Series(rng.random(40))
    r = g.moving_average(x, 3)
    assert isinstance(r, pd.Series) and list(r.index) == list(x.index)
    np.testing.assert_array_equal(r.to_numpy(), g.moving_average(x.to_numpy(), 3))


@pytest.mark.parametrize("ufunc", [False, True])
def test_xarray_dataarrays(modules, rng, ufunc):
    xr = library("xarray")
    m, g = modules
    a = rng.random((4, 6)).astype(np.float32)
    x = xr.DataArray(a, dims=("time", "x"), coords={"time": [10, 20, 30, 40]},
                     attrs={"units": "m"})
    for add in calls(m, ufunc):
        r = add(x, x)
        assert isinstance(r, xr.DataArray), type(r)
        assert r.dims == ("time", "x") and list(r.coords["time"].values) == [10, 20, 30, 40]
        np.testing.assert_array_equal(r.values, a + a)
        # broadcast by dimension name, as xarray does for NumPy's ufuncs
        row = xr.DataArray(a[0], dims=("x",))
        np.testing.assert_array_equal(add(x, row).values, a + a[0])
    # gufuncs: xarray leaves them to apply_ufunc, with the core dimension named
    b = x.astype(np.float64)
    dots = [g.dot] + ([g.dot.ufunc] if ufunc and _core._fast is not None else [])
    for dot in dots:
        r = xr.apply_ufunc(dot, b, b, input_core_dims=[["x"], ["x"]])
        assert isinstance(r, xr.DataArray) and r.dims == ("time",)
        np.testing.assert_allclose(r.values, np.einsum("tx,tx->t", b.values, b.values),
                                   rtol=1e-12)


@pytest.mark.parametrize("ufunc", [False, True])
def test_dask_arrays(modules, rng, ufunc):
    da = library("dask.array")
    m, g = modules
    a = rng.random((100, 8)).astype(np.float32)
    d = da.from_array(a, chunks=(25, 8))
    for add in calls(m, ufunc):
        r = add(d, d)
        assert isinstance(r, da.Array), type(r)  # lazy: dask's __array_ufunc__ took it
        np.testing.assert_array_equal(r.compute(), a + a)
        np.testing.assert_array_equal(add(d, a[0]).compute(), a + a[0])
    # gufuncs through dask's apply_gufunc: the core dimension in one chunk
    b = d.astype(np.float64)
    dots = [g.dot] + ([g.dot.ufunc] if ufunc and _core._fast is not None else [])
    for dot in dots:
        r = dot(b, b)
        assert isinstance(r, da.Array) and r.shape == (100,)
        np.testing.assert_allclose(r.compute(), np.einsum("ij,ij->i", a.astype(np.float64),
                                                          a.astype(np.float64)), rtol=1e-12)
        with pytest.raises(ValueError, match="multiple chunks"):
            dot(b.rechunk((25, 4)), b.rechunk((25, 4)))


def test_nobody_takes_the_call(rng):
    m = kjit.load(example("add.kern"), target="cpu")

    class Refuses:
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return NotImplemented

    class Takes:
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return (ufunc.__name__, ufunc.nin, ufunc.nout, ufunc.signature, method,
                    len(inputs), sorted(kwargs))

    with pytest.raises(TypeError, match="all returned NotImplemented.*'Refuses'"):
        m.add(Refuses(), np.float32(1))
    out = np.empty(3, np.float32)
    assert m.add(Takes(), np.float32(1), out=out) == \
        ("add", 2, 1, None, "__call__", 2, ["out"])
    g = kjit.load(example("gufunc.kern"), target="cpu")
    assert g.dot(Takes(), Takes())[:4] == ("dot", 2, 1, "(n),(n)->()")
    # out=(array,), as NumPy's ufuncs take it
    a = rng.random(3).astype(np.float32)
    assert m.add(a, a, out=(out,)) is out
    np.testing.assert_array_equal(out, a + a)


@requires_gpu
def test_cuda_cupy_and_dask_of_cupy(rng):
    cp = library("cupy")
    m = kjit.load(example("add.kern"), target="cuda")
    g = kjit.load(example("gufunc.kern"), target="cuda")
    a = rng.random((64, 16)).astype(np.float32)
    x = cp.asarray(a)
    # CuPy arrays are read in place, and the result is a CuPy array
    r = m.add(x, x)
    assert isinstance(r, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(r), a + a)
    dot = g.dot(x, x)
    assert isinstance(dot, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(dot), np.einsum("ij,ij->i", a, a), rtol=1e-5)
    da = library("dask.array")
    d = da.from_array(x, chunks=(16, 16), asarray=False)
    r = m.add(d, d)
    assert isinstance(r, da.Array)
    got = r.compute()
    assert isinstance(got, cp.ndarray)  # each chunk ran on the GPU
    np.testing.assert_array_equal(cp.asnumpy(got), a + a)
