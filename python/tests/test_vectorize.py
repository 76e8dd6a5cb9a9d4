"""@vectorize calls from Python: NumPy broadcasting, scalars, out=, every
element type, any strides, and the errors a caller can make.  Each result is
compared with a float64 (or exact integer) NumPy reference on fresh random
inputs; the tolerance is stated beside each comparison."""
import numpy as np
import pytest

import kjit
from conftest import TARGETS, example, requires_gpu

EPS32 = np.finfo(np.float32).eps

TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "c64", "c128"]
ALL_TYPES_SOURCE = (
    "@vectorize(" + ", ".join(f"{t}({t}, {t})" for t in TYPES) + ")\n"
    "fn add(a, b) { return a + b; }\n"
    "@vectorize\nfn flip(a: bool) -> bool { return !a; }\n"
    "@vectorize\nfn axpb(a: f64, x: f64, b: f64) -> f64 { return a * x + b; }\n")
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f32": np.float32,
      "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


def random_array(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def check_add(got, a, b):
    """Integers: exactly NumPy's wrapping sum.  Floats: within half an ulp of
    the result type, relative to |a| + |b|, of the float64 (complex128) sum."""
    a, b = np.asarray(a), np.asarray(b)
    if got.dtype.kind in "iu":
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, a + b)
        return
    ref = a.astype(np.complex128 if got.dtype.kind == "c" else np.float64) + b
    eps = np.finfo(got.dtype).eps
    bound = eps * (np.abs(a).astype(np.float64) + np.abs(b))
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)


@pytest.fixture(scope="module", params=TARGETS)
def target(request):
    return request.param


@pytest.fixture(scope="module")
def types_module(target):
    return kjit.compile(ALL_TYPES_SOURCE, name="types.kern", target=target)


@pytest.mark.parametrize("t", TYPES)
def test_every_dtype_and_strides(types_module, rng, t):
    m = types_module
    a = random_array(rng, NP[t], (37, 29))
    b = random_array(rng, NP[t], (37, 29))
    got = m.add(a, b)
    assert got.dtype == NP[t] and got.shape == (37, 29)
    check_add(got, a, b)
    # Views that are not contiguous, read in place.
    for x, y in [(a.T, b.T), (a[::3, ::2], b[::-3, ::-2]), (a[:, 5][:, None], b[7][None, :]),
                 (np.broadcast_to(a[:1], a.shape), b), (a[3, 4], b[::-1])]:
        check_add(m.add(x, y), *np.broadcast_arrays(x, y))


def test_bool(types_module, rng):
    a = rng.integers(0, 2, size=1000).astype(bool)
    np.testing.assert_array_equal(types_module.flip(a), ~a)
    np.testing.assert_array_equal(types_module.flip(a[::-7]), ~a[::-7])


def test_broadcasting_scalars_and_out(types_module, rng):
    m = types_module
    a = rng.standard_normal((6, 1, 5))
    x = rng.standard_normal((4, 5))
    b = rng.standard_normal(5)
    got = m.axpb(a, x, b)
    ref = a * x + b
    assert got.shape == (6, 4, 5)
    # a * x + b in float64, with or without a fused multiply-add: 2 ulps.
    np.testing.assert_allclose(got, ref, rtol=0, atol=4 * np.finfo(float).eps * (
        np.abs(a * x) + np.abs(b)).max())
    # Python scalars take the parameter's type.
    got = m.axpb(2.5, x, 3)
    np.testing.assert_allclose(got, 2.5 * x + 3, rtol=2e-16, atol=1e-15)
    out = np.empty((6, 4, 5))
    assert m.axpb(a, x, b, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)
    # A non-contiguous output.
    big = np.zeros((8, 10))
    m.add(x, x, out=big[::2, ::2])
    np.testing.assert_array_equal(big[::2, ::2], x + x)
    assert np.all(big[1::2] == 0)
    # All scalars: a NumPy scalar of the result type.
    s = m.axpb(2.0, 3.0, 0.5)
    assert isinstance(s, np.float64) and s == 6.5
    # Lists and 0-d arrays are array-likes.
    np.testing.assert_array_equal(m.add(np.float64(1.5) * np.ones(3), [1.0, 2.0, 3.0]),
                                  [2.5, 3.5, 4.5])


def test_signature_dispatch_and_result_type(types_module, rng):
    m = types_module
    a32 = random_array(rng, np.float32, 100)
    a64 = random_array(rng, np.float64, 100)
    assert m.add(a32, a32).dtype == np.float32
    assert m.add(a64, a64).dtype == np.float64
    assert m.add(a32, 1.0).dtype == np.float32   # a Python float adapts
    assert m.add.match(a64, a64) == TYPES.index("f64")
    assert m.add.result(TYPES.index("c64")) == "c64"
    assert len(m.add.signatures) == len(TYPES)


def test_zero_size_and_large(types_module, rng):
    m = types_module
    empty = np.empty((0, 3))
    assert m.axpb(empty, 1.0, 2.0).shape == (0, 3)
    a = random_array(rng, np.float32, 1_000_003)
    b = random_array(rng, np.float32, 1_000_003)
    check_add(m.add(a, b), a, b)


def test_errors(types_module, rng):
    m = types_module
    a = random_array(rng, np.float32, 10)
    with pytest.raises(kjit.DTypeError, match="non-native byte order"):
        m.add(a.astype(">f4"), a)
    with pytest.raises(kjit.DTypeError, match="object arrays"):
        m.add(np.array([1.0, 2.0], dtype=object), a[:2])
    with pytest.raises(kjit.DTypeError, match="no element type for float128"):
        m.add(a.astype(np.longdouble), a)
    with pytest.raises(kjit.DTypeError, match="argument 0 has type f16"):
        m.add(a.astype(np.float16), a)
    with pytest.raises(kjit.DTypeError, match="signatures on offer") as error:
        m.add(a, a.astype(np.float64))
    assert error.value.status == "type error" and isinstance(error.value, TypeError)
    with pytest.raises(kjit.ShapeError, match=r"\(10,\) and \(3,\) do not broadcast"):
        m.add(a, a[:3])
    with pytest.raises(kjit.ShapeError, match="output has shape"):
        m.add(a, a, out=np.empty(11, np.float32))
    with pytest.raises(kjit.DTypeError, match="output has element type f64"):
        m.add(a, a, out=np.empty(10))
    with pytest.raises(kjit.InvalidArgumentError, match="read-only"):
        m.add(a, a, out=np.broadcast_to(a, (10,)))
    with pytest.raises(kjit.InvalidArgumentError, match="takes 2 arguments, 1 given"):
        m.add(a)
    with pytest.raises(kjit.DTypeError, match="a str"):
        m.add(a, "x")


# ------------------------------------------------------------------ seeds

def test_seed_sin_against_numpy(rng):
    m = kjit.load(example("sin.kern"), target="parallel")
    x = rng.uniform(-100, 100, 1_000_000)
    # A correctly rounded float64 sin is within 1 ulp of 1: 2.3e-16.
    np.testing.assert_allclose(m.vsin(x), np.sin(x), rtol=0, atol=4.5e-16)


def test_seed_exp_against_numpy(rng):
    m = kjit.load(example("exp.kern"), target="cpu")
    x = rng.standard_normal(100_000).astype(np.float32)
    got = m.vexp(x)
    assert got.dtype == np.float32
    # f32 exp within 2 ulps of float64's.
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)), rtol=2.5e-7)


def test_seed_lla_scalars_broadcast(rng):
    m = kjit.load(example("lla.kern"), target="parallel")
    lat1 = rng.uniform(-90, 90, (300, 200))
    lon1 = rng.uniform(-180, 180, (300, 200))
    got = m.lla_a(lat1, lon1, 40.7, -74.0, 6371.0)
    lat2, lon2 = 40.7, -74.0
    a = (np.sin(0.008726645 * (lat2 - lat1)) ** 2 + np.cos(0.01745329 * lat1) *
         np.cos(0.01745329 * lat2) * np.sin(0.008726645 * (lon2 - lon1)) ** 2)
    np.testing.assert_allclose(got, np.arctan2(a, 1 - a) * 6371.0, rtol=1e-13, atol=1e-9)


# -------------------------------------------------------------------- GPU

@requires_gpu
def test_gpu_cupy_in_and_out(rng):
    cp = pytest.importorskip("cupy", reason="skipped: CuPy is not installed")
    m = kjit.load(example("add.kern"), target="cuda")
    a = random_array(rng, np.float32, (300, 7))
    b = random_array(rng, np.float32, 7)
    da, db = cp.asarray(a), cp.asarray(b)
    got = m.add(da, db)
    assert isinstance(got, cp.ndarray) and got.dtype == np.float32
    check_add(cp.asnumpy(got), a, np.broadcast_to(b, a.shape))
    out = cp.empty((300, 7), cp.float32)
    assert m.add(da, db, out=out) is out            # written in place, no copy
    check_add(cp.asnumpy(out), a, np.broadcast_to(b, a.shape))
    check_add(cp.asnumpy(m.add(da.T, da.T)), a.T, a.T)  # strided device views


@requires_gpu
def test_gpu_torch_in_and_out(rng):
    torch = pytest.importorskip("torch", reason="skipped: PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("skipped: PyTorch sees no GPU")
    m = kjit.load(example("add.kern"), target="cuda")
    a = random_array(rng, np.float32, (64, 33))
    ta = torch.from_numpy(a).cuda()
    got = m.add(ta, ta.t().contiguous().t())
    assert isinstance(got, torch.Tensor) and got.is_cuda
    check_add(got.cpu().numpy(), a, a)
    out = torch.empty_like(ta)
    ptr = out.data_ptr()
    m.add(ta, 1.5, out=out)
    assert out.data_ptr() == ptr
    check_add(out.cpu().numpy(), a, np.float32(1.5))


@requires_gpu
def test_gpu_kjit_device_arrays_and_protocols(rng):
    m = kjit.load(example("add.kern"), target="cuda")
    a = random_array(rng, np.float32, 1000)
    d = kjit.to_device(a)
    assert d.on_gpu and d.__cuda_array_interface__["data"][0] == d.ptr
    got = m.add(d, d)
    assert isinstance(got, kjit.DeviceArray)
    check_add(got.copy_to_host(), a, a)
    try:
        import cupy as cp
    except ImportError:
        return
    view = cp.asarray(got)                   # through __cuda_array_interface__
    assert view.data.ptr == got.ptr
    check_add(cp.asnumpy(view), a, a)
    view2 = cp.from_dlpack(got)              # through DLPack
    assert view2.data.ptr == got.ptr
    back = kjit.from_dlpack(cp.asarray(a))   # and back
    check_add(m.add(back, back).copy_to_host(), a, a)


@requires_gpu
def test_gpu_streams(rng):
    m = kjit.load(example("add.kern"), target="cuda")
    a = random_array(rng, np.float32, 1 << 20)
    d = kjit.to_device(a)
    out = kjit.device_array(a.shape, np.float32)
    s = kjit.Stream()
    assert s.handle != 0
    start = kjit.record_event(s)
    for _ in range(5):
        m.add(d, d, out=out, stream=s)
    end = kjit.record_event(s)
    s.synchronize()
    assert 0 < kjit.elapsed_ms(start, end) < 60_000
    check_add(out.copy_to_host(), a, a)
    try:
        import cupy as cp
    except ImportError:
        return
    cs = cp.cuda.Stream(non_blocking=True)
    da = cp.asarray(a)
    with cs:
        dout = cp.empty_like(da)
        m.add(da, da, out=dout, stream=cs)   # a CuPy stream carries kjit's work
        cs.synchronize()
    check_add(cp.asnumpy(dout), a, a)
    ext = cp.cuda.ExternalStream(s.handle)   # and a kjit stream carries CuPy's
    with ext:
        check_add(cp.asnumpy(da + da), a, a)


@requires_gpu
def test_gpu_host_arrays_on_cuda(rng):
    m = kjit.load(example("add.kern"), target="cuda")
    a = random_array(rng, np.float32, (100, 30))
    got = m.add(a[:, ::2], a[:, 1::2])
    assert isinstance(got, np.ndarray)
    check_add(got, a[:, ::2], a[:, 1::2])


def test_gpu_memory_refused_on_cpu_target():
    m = kjit.load(example("add.kern"), target="cpu")

    class FakeDevice:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3, "strides": None}
    with pytest.raises(kjit.InvalidArgumentError, match="compiled for the cpu target"):
        m.add(FakeDevice(), np.ones(4, np.float32))


HALVES_SOURCE = ("@vectorize(f16(f16, f16), bf16(bf16, bf16))\n"
                 "fn add(a, b) { return a + b; }\n"
                 "fn scale(x: f16, k: f64) -> f16 { return x * f16(k); }\n")


@pytest.mark.parametrize("target", TARGETS)
def test_f16_and_bf16(target):
    """float16 arrays in and out; a + b is NumPy's own float16 sum (f32, then
    rounded), bit for bit.  bf16 through ml_dtypes when it is installed, else
    as raw bytes ('V2') both ways."""
    mod = kjit.compile(HALVES_SOURCE, target=target)
    rng = np.random.default_rng(16)
    a = (rng.standard_normal(1001) * 100).astype(np.float16)
    b = (rng.standard_normal(1001) * 0.01).astype(np.float16)
    got = mod.add(a, b)
    assert got.dtype == np.float16
    assert (got.view(np.uint16) == (a + b).view(np.uint16)).all()
    assert mod.scale(np.float16(1.5), 3.0) == np.float16(4.5)

    wide = a.astype(np.float32)
    bits = ((wide.view(np.uint32) + 0x7fff + ((wide.view(np.uint32) >> 16) & 1)) >> 16)
    bits = bits.astype(np.uint16)  # bf16 of a by hand: round to nearest even
    try:
        import ml_dtypes
        x = wide.astype(ml_dtypes.bfloat16)
        assert (x.view(np.uint16) == bits).all()
        y = mod.add(x, x)
        assert y.dtype == np.dtype(ml_dtypes.bfloat16)
        assert (y == (x.astype(np.float32) * 2).astype(ml_dtypes.bfloat16)).all()
    except ImportError:
        y = mod.add(bits.view("V2"), bits.view("V2"))
        assert y.dtype == np.dtype("V2")
        want = (((bits.astype(np.uint32) << 16).view(np.float32) * 2).view(np.uint32) >> 16)
        assert (y.view(np.uint16) == want.astype(np.uint16)).all()
