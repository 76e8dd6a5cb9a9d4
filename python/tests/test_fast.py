"""The compiled hot path (kjit/_fast.c) against the pure Python one: the same
results and the same errors for what each takes, and a launch's dynamic
shared memory.  Installed (KJIT_TEST_INSTALLED), the compiled path must be
there: the install builds it."""
import ctypes
import os
import types

import numpy as np
import pytest

from conftest import INSTALLED, example
import kjit
from kjit import _core

compiled = pytest.mark.skipif(_core._fast is None, reason=f"skipped: {kjit.hot_path}")

MULTI = """
@vectorize(f32(f32, f32), f64(f64, f64), i32(i32, i32), c128(c128, c128))
fn mix(a, b) { return a * b + a; }
"""


def test_installed_package_has_the_compiled_path():
    if not INSTALLED:
        pytest.skip("skipped: the source tree's tests run the pure Python path")
    assert kjit.hot_path == "compiled"
    assert isinstance(kjit.load(example("add.kern"), target="cpu").add, _core._fast.Vectorized)


def both(fn, *args, **kwargs):
    """(compiled result, Python result) of one call."""
    fast = fn(*args, **kwargs)
    slow = fn._call_slow(*args, **kwargs)
    return fast, slow


@compiled
@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_same_results_as_the_python_path(rng, target):
    add = kjit.load(example("add.kern"), target=target).add
    mix = kjit.compile(MULTI, target=target).mix
    a = rng.random(1000).astype(np.float32)
    b = rng.random(1000).astype(np.float32)
    grid = rng.random((7, 1, 5)).astype(np.float32)
    cases = [
        (add, (a, b)), (add, (a, 2.5)), (add, (1.5, b)), (add, (a, np.float32(3))),
        (add, (a[:999:3], b[1::3])), (add, (grid, grid.transpose(1, 0, 2)[:1])),
        (add, (np.float32(1), 2.0)), (add, (1.0, 2.0)), (add, (np.array(1.5, np.float32), a)),
        (mix, (a.astype(np.float64), b.astype(np.float64))),
        (mix, (np.arange(10, dtype=np.int32), 3)),
        (mix, (a.astype(np.complex128), 1j)),
    ]
    for fn, args in cases:
        fast, slow = both(fn, *args)
        assert type(fast) is type(slow), (fn.name, args)
        assert np.asarray(fast).dtype == np.asarray(slow).dtype
        assert np.shape(fast) == np.shape(slow)
        np.testing.assert_array_equal(fast, slow)
    expected = a + b
    out = np.empty_like(a)
    assert add(a, b, out=out) is out
    np.testing.assert_array_equal(out, expected)
    strided = np.zeros(2000, np.float32)[::2]
    add(a, b, out=strided)
    np.testing.assert_array_equal(strided, expected)
    # an out that overlaps an input reads it as before the call, as NumPy does
    c = a.copy()
    add(c, c[::-1], out=c)
    np.testing.assert_array_equal(c, a + a[::-1])
    # kjit's host device arrays, in and out
    da, db = kjit.to_device(a, target=target), kjit.to_device(b, target=target)
    dout = kjit.device_array(1000, np.float32, target=target)
    assert add(da, db, out=dout) is dout
    np.testing.assert_array_equal(dout.copy_to_host(), expected)
    np.testing.assert_array_equal(add(da, db).copy_to_host(), expected)


@compiled
@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_device_array_results_allocated_in_c(rng, target, monkeypatch):
    # Without out=, the result of a call on kjit device arrays is a DeviceArray
    # from the context's pool, allocated by the C path (the Python one is
    # never entered), of the broadcast shape and the signature's type.
    add = kjit.load(example("add.kern"), target=target).add
    mix = kjit.compile(MULTI, target=target).mix
    grid = rng.random((6, 1, 5)).astype(np.float32)
    row = rng.random((4, 5)).astype(np.float32)
    dg, dr = kjit.to_device(grid, target=target), kjit.to_device(row, target=target)
    want_add, want_mix = add._call_slow(dg, dr), mix._call_slow(dg, 2.0)

    def refuse(*args, **kwargs):
        raise AssertionError("the call went to the Python path")
    monkeypatch.setattr(type(add), "_call_slow", refuse)
    got = add(dg, dr)
    assert isinstance(got, kjit.DeviceArray) and got.shape == (6, 4, 5)
    np.testing.assert_array_equal(got.copy_to_host(), want_add.copy_to_host())
    np.testing.assert_array_equal(got.copy_to_host(), grid + row)
    got = add(grid, dr)  # a NumPy array first: the result still goes beside dr
    assert isinstance(got, kjit.DeviceArray)
    got = mix(dg, 2.0)  # several signatures: the f32 one (a float scalar converts)
    assert got.dtype == want_mix.dtype and got.shape == want_mix.shape
    np.testing.assert_array_equal(got.copy_to_host(), want_mix.copy_to_host())


@compiled
def test_same_errors_as_the_python_path(rng):
    add = kjit.load(example("add.kern"), target="cpu").add
    a = rng.random(10).astype(np.float32)
    frozen = a.copy()
    frozen.flags.writeable = False
    errors = [
        ((a, a.astype(np.float64)), {}, kjit.DTypeError),
        ((a, rng.random(11).astype(np.float32)), {}, kjit.ShapeError),
        ((a,), {}, kjit.InvalidArgumentError),
        ((a, a), {"out": frozen}, kjit.InvalidArgumentError),
        ((a, a), {"out": np.empty(3, np.float32)}, kjit.ShapeError),
        ((a, a), {"out": np.empty(10, np.float64)}, kjit.DTypeError),
        ((a, "x"), {}, kjit.DTypeError),
        ((a, a), {"bogus": 1}, TypeError),
    ]
    for args, kwargs, error in errors:
        with pytest.raises(error) as fast:
            add(*args, **kwargs)
        with pytest.raises(error) as slow:
            add._call_slow(*args, **kwargs)
        assert str(fast.value) == str(slow.value)


@compiled
def test_calls_take_the_vectorcall(rng):
    # A call builds no tuple or dict (Python 3.12 passes the flag on to the
    # subclass itself; before, _core asks _fast.use_vectorcall): out= and
    # stream=None are read from the call's keyword names, however spelled.
    add = kjit.load(example("add.kern"), target="cpu").add
    assert type(add).__flags__ & (1 << 11), "VectorizedFunction lacks Py_TPFLAGS_HAVE_VECTORCALL"
    a = rng.random(10).astype(np.float32)
    out = np.empty_like(a)
    spelled = "".join(["o", "ut"])  # not the interned "out"
    assert add(a, a, **{spelled: out}, stream=None) is out
    np.testing.assert_array_equal(out, a + a)
    with pytest.raises(TypeError, match="bogus"):
        add(a, a, bogus=1)

    # a subclass whose __call__ is replaced after the flag was set keeps its
    # own __call__ (on Python 3.11 the flag stays: _fast.c calls tp_call)
    class Mine(type(add)):
        pass
    _core._fast.use_vectorcall(Mine)
    mine = kjit.load(example("add.kern"), target="cpu").add
    mine.__class__ = Mine
    np.testing.assert_array_equal(mine(a, a), a + a)
    Mine.__call__ = lambda self, *args, **kwargs: ("mine", args, kwargs)
    assert mine(a, out=out) == ("mine", (a,), {"out": out})


@compiled
def test_device_arrays_read_in_c(rng):
    # DeviceArray's fields are DeviceBase's, which the C path reads in place;
    # GPU memory given to a cpu module still goes to the Python path's refusal.
    add = kjit.load(example("add.kern"), target="cpu").add
    a = rng.random(10).astype(np.float32)
    d = kjit.to_device(a, target="cpu")
    assert isinstance(d, _core._fast.DeviceBase)
    # the kjit_array lives in the object (DeviceBase._keep): its first field
    # is the data pointer, at the address the call reads
    assert d._addr and d._gpu is False
    assert ctypes.c_uint64.from_address(d._addr).value == d.ptr != 0
    # an array from the context's pool keeps its kjit_array in the object
    e = kjit.context("cpu").device_array(10, np.float32)
    assert id(e) < e._addr < id(e) + type(e).__basicsize__
    assert ctypes.c_uint64.from_address(e._addr).value == e.ptr != 0
    np.testing.assert_array_equal(add(d, d).copy_to_host(), a + a)
    fake_gpu = kjit.DeviceArray(kjit.context("cpu"), a.ctypes.data, a.shape, a.dtype, gpu=True,
                                owner=a)
    assert fake_gpu._gpu is True
    for args in [(fake_gpu, d), (d, fake_gpu)]:
        with pytest.raises(kjit.InvalidArgumentError, match="GPU memory") as fast:
            add(*args)
        with pytest.raises(kjit.InvalidArgumentError) as slow:
            add._call_slow(*args)
        assert str(fast.value) == str(slow.value)
    # an output in GPU memory too (it once went to the host code, a fault on a
    # real GPU array)
    for call in (add, add._call_slow):
        with pytest.raises(kjit.InvalidArgumentError, match=r"the output \(out=\) is in GPU"):
            call(d, d, out=fake_gpu)


class FakeCupy:
    """What the C path reads of a cupy.ndarray (.dtype, .shape, .strides,
    .data.ptr), over NumPy memory; named as CuPy's type is, so that the
    Python path's converter takes it for one (and registers its type)."""

    def __init__(self, a, **changes):
        self.base = a
        self.dtype, self.shape, self.strides = a.dtype, a.shape, a.strides
        self.data = types.SimpleNamespace(ptr=a.ctypes.data)
        for name, value in changes.items():
            setattr(self, name, value)


FakeCupy.__module__, FakeCupy.__name__ = "cupy", "ndarray"


@compiled
def test_cupy_arrays_read_in_c(rng):
    # On cuda, calls with CuPy arrays (and out=) are packed in C once the
    # Python path has met CuPy's type; with no GPU here, the packing itself
    # is checked (_fast._pack_cupy), and that a cpu module still refuses them.
    fast = _core._fast
    a = rng.random((6, 8)).astype(np.float32)[:, ::2]
    assert fast._pack_cupy(FakeCupy(a)) == (a.ctypes.data, 9, (6, 4), (32, 8), True)
    assert fast._pack_cupy(FakeCupy(np.zeros((), np.int64)))[1:] == (4, (), (), True)
    for odd in [FakeCupy(a, dtype="float32"), FakeCupy(a, strides=(32,)),
                FakeCupy(a, shape=[6, 4]), FakeCupy(a, data=None),
                FakeCupy(a.astype(">f4")), FakeCupy(a.astype(object)), object()]:
        assert fast._pack_cupy(odd) is None  # the Python path's to judge; no exception
    add = kjit.load(example("add.kern"), target="cpu").add
    x = FakeCupy(a)
    try:
        for _ in range(2):  # the first call registers the type, the second reads it in C
            with pytest.raises(kjit.InvalidArgumentError, match="GPU memory") as got:
                add(x, x)
            with pytest.raises(kjit.InvalidArgumentError) as slow:
                add._call_slow(x, x)
            assert str(got.value) == str(slow.value)
            with pytest.raises(kjit.InvalidArgumentError, match="GPU memory"):
                add(a, a, out=x)
    finally:
        try:  # the real type again, for the GPU tests that follow in this process
            import cupy
            fast.register_cupy(cupy.ndarray)
        except ImportError:
            pass


@compiled
def test_fast_launch(rng):
    m = kjit.load(example("mandelbrot.kern"), target="cpu")
    image = np.zeros((64, 96), np.uint8)
    slow = np.zeros_like(image)
    launch = m.mandel_kernel[(3, 8), (32, 8)]
    assert isinstance(launch, _core._fast.Launch)
    launch(-2.0, 1.0, -1.0, 1.0, image, 20)
    launch._call_slow(-2.0, 1.0, -1.0, 1.0, slow, 20)
    np.testing.assert_array_equal(image, slow)
    assert image.max() == 20
    frozen = np.zeros_like(image)
    frozen.flags.writeable = False
    with pytest.raises(kjit.InvalidArgumentError, match="read-only"):
        launch(-2.0, 1.0, -1.0, 1.0, frozen, 20)
    with pytest.raises(kjit.InvalidArgumentError, match="takes 6 arguments"):
        launch(-2.0, 1.0)


REPO = os.path.dirname(os.path.dirname(example("")))


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_dynamic_shared_memory(rng, target):
    m = kjit.load(os.path.join(REPO, "tests", "golden", "exec", "dynamic_shared.kern"),
                  target=target)
    x = np.arange(1024, dtype=np.float32)
    out = np.zeros_like(x)
    m.reverse_blocks[4, 256, None, 256 * 4](x, out)
    np.testing.assert_array_equal(out, x.reshape(4, 256)[:, ::-1].ravel())
    # half the bytes: each block's tile holds 128, so only the threads that
    # read below it write
    out2 = np.full_like(x, -1)
    m.reverse_blocks[4, 256, None, 128 * 4](x, out2)
    assert (out2 == -1).sum() == 4 * 128
    with pytest.raises(kjit.InvalidArgumentError, match="dynamic shared memory"):
        m.reverse_blocks[4, 256, None, -5]


def test_device_array_views(rng):
    add = kjit.load(example("add.kern"), target="cpu").add
    host = rng.random((6, 8)).astype(np.float32)
    d = kjit.to_device(host, target="cpu")
    np.testing.assert_array_equal(np.asarray(d.reshape(8, 6)), host.reshape(8, 6))
    np.testing.assert_array_equal(np.asarray(d.reshape(-1)), host.ravel())
    with pytest.raises(kjit.ShapeError, match="cannot reshape"):
        d.reshape(5, -1)
    for key in [(1,), (slice(1, 5, 2),), (Ellipsis, 3), (slice(None, None, -1), slice(2, 7)),
                (-1, slice(None, None, 3)), (2, 5)]:
        view = d[key]
        np.testing.assert_array_equal(np.asarray(view), host[key])
        assert view.shape == host[key].shape
    with pytest.raises(IndexError, match="out of bounds"):
        d[6]
    with pytest.raises(IndexError, match="basic indexing"):
        d[[0, 1]]
    with pytest.raises(kjit.ShapeError, match="strided"):
        d[:, ::2].reshape(-1)
    # views are views: writes through them show in the array
    d[1:3].fill(7)
    assert (np.asarray(d)[1:3] == 7).all() and (np.asarray(d)[0] == host[0]).all()
    out = kjit.device_array((3, 4), np.float32, target="cpu")
    add(d[::2, ::2], d[1::2, 1::2], out=out)
    expect = np.asarray(d)[::2, ::2] + np.asarray(d)[1::2, 1::2]
    np.testing.assert_array_equal(np.asarray(out), expect)


@compiled
@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_stream_calls_stay_in_c(rng, target, monkeypatch):
    # stream= (a kjit.Stream, a CUstream handle, anything with
    # __cuda_stream__) and out=(array,) take the C path, which runs
    # kjit_call_async as the Python path does: the same results, and a
    # stream the Python path refuses is refused with its message.
    add = kjit.load(example("add.kern"), target=target).add
    a, b = rng.random(50).astype(np.float32), rng.random(50).astype(np.float32)
    stream = kjit.Stream(kjit.context(target))

    class Foreign:
        def __cuda_stream__(self):
            return (0, 0)  # the legacy default stream
    forms = [({"stream": stream}, True), ({"stream": 0}, True), ({"stream": Foreign()}, True),
             ({"stream": stream}, False), ({"stream": None}, True)]
    want = {}
    for k, (kwargs, with_out) in enumerate(forms):
        out = np.empty_like(a)
        got = add._call_slow(a, b, out=out, **kwargs) if with_out else \
            add._call_slow(a, b, **kwargs)
        want[k] = got.copy()
    with pytest.raises(kjit.InvalidArgumentError) as slow_error:
        add._call_slow(a, b, stream="bogus")

    def refuse(*args, **kwargs):
        raise AssertionError("the call went to the Python path")
    monkeypatch.setattr(type(add), "_call_slow", refuse)
    for k, (kwargs, with_out) in enumerate(forms):
        out = np.empty_like(a)
        got = add(a, b, out=out, **kwargs) if with_out else add(a, b, **kwargs)
        assert (got is out) == with_out
        np.testing.assert_array_equal(got, want[k])
        np.testing.assert_array_equal(got, a + b)
    out = np.empty_like(a)
    assert add(a, b, out=(out,), stream=stream) is out
    np.testing.assert_array_equal(out, a + b)
    assert add(np.float32(2), 3.0, stream=stream) == 5  # scalars in, a scalar out
    # a foreign stream's wrapper is remembered per context: the same stream
    # object given to functions of two contexts in turn
    class Handle:
        def __cuda_stream__(self):
            return (0, 0x1234)
    foreign = Handle()
    other = kjit.load(example("add.kern"), target="parallel" if target == "cpu" else "cpu").add
    monkeypatch.setattr(type(other), "_call_slow", refuse)
    for _ in range(3):
        for fn in (add, other):
            out = np.empty_like(a)
            assert fn(a, b, out=out, stream=foreign) is out
            np.testing.assert_array_equal(out, a + b)
    monkeypatch.undo()
    with pytest.raises(kjit.InvalidArgumentError) as fast_error:
        add(a, b, stream="bogus")
    assert str(fast_error.value) == str(slow_error.value)


FAKE_CUDA_SCRIPT = r"""
import ctypes, sys
import numpy as np
import kjit
from kjit import _core
fake = ctypes.CDLL(sys.argv[1])
fake.kjit_fake_cuda_count.restype = ctypes.c_long
fake.kjit_fake_cuda_count.argtypes = [ctypes.c_char_p]
count = lambda name: fake.kjit_fake_cuda_count(name.encode())
assert kjit.cuda_available(), kjit.cuda_reason()
m = kjit.compile(sys.argv[2] + "@kernel\nfn fill(x: f32[], v: f32) {\n"
                 "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "    if i < x.shape[0] { x[i] = v; }\n}\n", target="cuda")
add = m.add
assert isinstance(add, _core._fast.Vectorized)
a = np.arange(1000, dtype=np.float32)
da, db = kjit.to_device(a, target="cuda"), kjit.to_device(a, target="cuda")
out = kjit.device_array(1000, np.float32, target="cuda")
stream = kjit.Stream(kjit.context("cuda"))
def refuse(*args, **kwargs):
    raise AssertionError("the call went to the Python path")
type(add)._call_slow = refuse
launch = m.fill[4, 256, stream]
forms = {"out=": lambda: add(da, db, out=out),
         "out=, stream=": lambda: add(da, db, out=out, stream=stream),
         "out=(out,), stream=": lambda: add(da, db, out=(out,), stream=stream),
         "no out=": lambda: add(da, db),
         "launch on a stream": lambda: launch(out, 1.5)}
for name, form in forms.items():
    form()  # code loaded, the block size asked, the pool holds a block
    fake.kjit_fake_cuda_reset()
    for _ in range(50):
        form()
    launches, set_current = count("cuLaunchKernel"), count("cuCtxSetCurrent")
    others = count("cuMemAlloc_v2") + count("cuMemFree_v2") + count("cuCtxSynchronize") + \
        count("cuStreamSynchronize") + count("cuMemcpyHtoD_v2") + count("cuMemcpyDtoH_v2")
    assert (launches, set_current, others) == (50, 0, 0), (name, launches, set_current, others)
print("ok")
"""


@compiled
def test_cuda_calls_on_the_fake_driver(tmp_path):
    # On the fake CUDA driver (tests/cuda_host/fake_cuda.c: driver calls
    # counted, nothing run), in a process of its own: calls on kjit device
    # arrays with out=, with stream=, without out= (kjit's pool), and a
    # launch on a stream stay in C and make one cuLaunchKernel each, no
    # cuCtxSetCurrent, no allocation and no synchronisation.
    import subprocess
    import sys
    fake = os.environ.get("KJIT_TEST_FAKE_CUDA") or os.path.join(
        os.path.dirname(kjit.library_path), "libkjit-fakecuda.so")
    if not os.path.exists(fake):
        pytest.skip(f"skipped: no fake CUDA driver at {fake} (make build/libkjit-fakecuda.so)")
    with open(example("add.kern")) as f:
        source = f.read()
    env = dict(os.environ, KJIT_CUDA_DRIVER=os.path.abspath(fake))
    env.pop("KJIT_PURE_PYTHON", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", FAKE_CUDA_SCRIPT, os.path.abspath(fake), source],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


POOL_SCRIPT = r"""
import ctypes, gc, sys
import numpy as np
import kjit
fake = ctypes.CDLL(sys.argv[1])
fake.kjit_fake_cuda_count.restype = ctypes.c_long
fake.kjit_fake_cuda_count.argtypes = [ctypes.c_char_p]
count = lambda name: fake.kjit_fake_cuda_count(name.encode())
assert kjit.cuda_available(), kjit.cuda_reason()
ctx = kjit.context("cuda")
assert (ctx._cpool is not None) == (sys.argv[2] == "compiled"), ctx._cpool
sizes = [1000, 7, 1000, 65536, 3, 1000, 7, 250000, 65536, 1]
fake.kjit_fake_cuda_reset()
first = [ctx.device_array(n, np.float32) for n in sizes]
ptrs = sorted(d.ptr for d in first)
assert count("cuMemAlloc_v2") == len(sizes)
held = ctx._pool_held()
del first
gc.collect()
assert ctx._pool_held() > held, "freed arrays went back to the pool"
# the same sizes again, in another order: every block reused, no allocation
again = [ctx.device_array(n, np.float32) for n in reversed(sizes)]
assert sorted(d.ptr for d in again) == ptrs, "the freed blocks were reused"
assert count("cuMemAlloc_v2") == len(sizes) and count("cuMemFree_v2") == 0
# a block is reused only for its own size class
for d, n in zip(again, reversed(sizes)):
    assert d.shape == (n,)
del again, d
gc.collect()
# a result array without out= comes from the pool too
m = kjit.compile(sys.argv[3], target="cuda")
a = kjit.to_device(np.arange(1000, dtype=np.float32), target="cuda")
allocs = count("cuMemAlloc_v2")
for _ in range(100):
    r = m.add(a, a)
assert count("cuMemAlloc_v2") == allocs, "the results came from the pool"
del r, a
gc.collect()
# results of mixed sizes and ranks: their blocks go back by size class and
# come back for the same sizes; with the compiled path they are built in C
# (Python's device_array is not asked), with the same slots
xs = [kjit.to_device(np.arange(n, dtype=np.float32).reshape(shape), target="cuda")
      for n, shape in ((1000, (1000,)), (7, (7,)), (65536, (256, 256)), (3, (3,)),
                       (12, (2, 3, 2)))]
if sys.argv[2] == "compiled":
    ctx.device_array = None
results = [m.add(x, x) for x in xs]
for x, r in zip(xs, results):
    assert type(r) is kjit.DeviceArray and r.shape == x.shape and r.strides == x.strides
    assert r.dtype == np.float32 and r._code == x._code and r.context is ctx and r.on_gpu
    assert r._info == x._info and r._arg[:8] == x._arg[:8] and len(r._arg) == len(x._arg)
    assert r.nbytes == x.nbytes and r.ptr
    r.note = "a result takes attributes"
ptrs = sorted(r.ptr for r in results)
allocs = count("cuMemAlloc_v2")
del results, r
gc.collect()
results = [m.add(x, x) for x in reversed(xs)]
assert sorted(r.ptr for r in results) == ptrs, "the results' blocks were reused"
assert count("cuMemAlloc_v2") == allocs
del results, xs, x
gc.collect()
if sys.argv[2] == "compiled":
    del ctx.device_array
# empty_pool frees every held block: nothing leaks
ctx.empty_pool()
assert ctx._pool_held() == 0
assert count("cuMemFree_v2") == count("cuMemAlloc_v2"), (count("cuMemFree_v2"),
                                                          count("cuMemAlloc_v2"))
# past the limit a freed block is freed at once, not held
limit = ctx.POOL_LIMIT
if ctx._cpool is not None:
    ctx._cpool.limit = 0
else:
    ctx.POOL_LIMIT = 0
frees = count("cuMemFree_v2")
d = ctx.device_array(1000, np.float32)
del d
gc.collect()
assert count("cuMemFree_v2") == frees + 1 and ctx._pool_held() == 0
if ctx._cpool is not None:
    ctx._cpool.limit = limit
else:
    ctx.POOL_LIMIT = limit
# out of memory: the pool is emptied and the allocation tried again, then
# the error says so; nothing is held after
keep = ctx.device_array(4096, np.float32)
del keep
gc.collect()
assert ctx._pool_held() > 0
try:
    ctx.device_array(1 << 60, np.uint8)
except kjit.KjitError as error:
    assert "memory" in str(error).lower(), error
else:
    raise AssertionError("2**60 bytes allocated")
assert ctx._pool_held() == 0
# (the fake driver counts the two refused tries: the first and the retry)
assert count("cuMemFree_v2") == count("cuMemAlloc_v2") - 2, (count("cuMemFree_v2"),
                                                              count("cuMemAlloc_v2"))
print("ok")
"""


@pytest.mark.parametrize("path", ["compiled", "pure"])
def test_device_pool_on_the_fake_driver(tmp_path, path):
    # Freed device arrays of mixed sizes go back to the context's pool and
    # are reused by size; empty_pool, the limit and the out-of-memory retry
    # free them, so every cuMemAlloc has its cuMemFree (the fake driver
    # counts them).  The compiled path keeps the pool in C (_fast.Pool).
    import subprocess
    import sys
    if path == "compiled" and kjit.hot_path != "compiled":
        pytest.skip("skipped: the compiled path is not built")
    fake = os.environ.get("KJIT_TEST_FAKE_CUDA") or os.path.join(
        os.path.dirname(kjit.library_path), "libkjit-fakecuda.so")
    if not os.path.exists(fake):
        pytest.skip(f"skipped: no fake CUDA driver at {fake} (make build/libkjit-fakecuda.so)")
    with open(example("add.kern")) as f:
        source = f.read()
    env = dict(os.environ, KJIT_CUDA_DRIVER=os.path.abspath(fake))
    env.pop("KJIT_PURE_PYTHON", None)
    if path == "pure":
        env["KJIT_PURE_PYTHON"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", POOL_SCRIPT, os.path.abspath(fake), path, source],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
