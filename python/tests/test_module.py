"""Modules, functions and everything around calls: loading and compiling,
signatures and kinds, plain functions, compile errors with their caret,
missing functions and files, device arrays on the host and both array
protocols (no copies: data pointers compared), streams and events on cpu,
devices, the library lookup, and the wheel the package builds offline."""
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import kjit
from conftest import REPO, example, requires_gpu

SOURCE = """
// a plain function, a vectorized one calling it, and a kernel
fn hypot2(x: f64, y: f64) -> f64 { return x * x + y * y; }

@vectorize
fn norm(x: f64, y: f64) -> f64 { return hypot2(x, y) ** 0.5; }

@kernel
fn scale(a: f64[], s: f64) {
    let i = grid(1);
    if i < len(a) { a[i] = a[i] * s; }
}
"""


@pytest.fixture(scope="module")
def module():
    return kjit.compile(SOURCE, name="mixed.kern", target="cpu")


def test_functions_kinds_signatures(module):
    m = module
    assert m.function_names == ("hypot2", "norm", "scale")
    assert [f.kind for f in m] == ["plain", "vectorize", "kernel"]
    assert m.norm.signatures == ("f64(f64, f64)",)
    assert m.norm.params() == [("f64", 0), ("f64", 0)] and m.norm.result() == "f64"
    assert m["scale"] is m.scale and m.scale.param_count == 2
    assert "norm" in dir(m)
    assert m.context.target == "cpu"


def test_plain_function_converts_scalars(module, rng):
    x, y = rng.standard_normal(2)
    got = module.hypot2(x, y)
    assert isinstance(got, np.float64)
    assert abs(got - (x * x + y * y)) <= 4e-16 * (x * x + y * y)
    assert module.hypot2(3, 4) == 25.0            # ints convert as a cast would
    assert module.hypot2(np.float32(1.5), True) == 3.25


def test_vectorized_and_kernel_together(module, rng):
    x = rng.standard_normal(1000)
    y = rng.standard_normal(1000)
    r = module.norm(x, y)
    np.testing.assert_allclose(r, np.hypot(x, y), rtol=4e-16)
    s = float(rng.uniform(0.5, 2))
    before = r.copy()
    module.scale[(1000 + 127) // 128, 128](r, s)
    np.testing.assert_allclose(r, before * s, rtol=2.3e-16)


def test_compile_error_has_location_line_and_caret():
    bad = "@vectorize\nfn f(a: f32) -> f32 {\n    return a * nope;\n}\n"
    with pytest.raises(kjit.CompileError) as error:
        kjit.compile(bad, name="bad.kern", target="cpu")
    e = error.value
    assert e.status == "compile error" and e.code == 1
    lines = str(e).splitlines()
    assert lines[0] == "bad.kern:3:16: error: unknown name 'nope'"
    assert lines[1] == "    return a * nope;"
    assert lines[2] == " " * 15 + "^"
    # Several errors are all reported.
    with pytest.raises(kjit.CompileError) as error:
        kjit.compile("fn f() -> i32 { return x; }\nfn g() -> i32 { return y; }\n",
                     name="two.kern", target="cpu")
    assert "two.kern:1:" in str(error.value) and "two.kern:2:" in str(error.value)


def test_missing_function_and_file(module):
    with pytest.raises(kjit.NotFoundError, match="no function named 'nope'.*hypot2, norm, "
                                                 "scale") as error:
        module.nope
    assert isinstance(error.value, AttributeError)
    assert not hasattr(module, "also_missing")
    with pytest.raises(kjit.KjitIOError, match="missing.kern"):
        kjit.load("missing.kern", target="cpu")
    with pytest.raises(kjit.InvalidArgumentError, match="target 'gpu'"):
        kjit.load(example("add.kern"), target="gpu")


def test_imports_find_the_stdlib(rng):
    m = kjit.compile("import geo;\n@vectorize\nfn f(x: f64) -> f64 { return x; }\n",
                     name="uses_stdlib.kern", target="cpu")
    x = rng.standard_normal(5)
    np.testing.assert_array_equal(m.f(x), x)


def test_device_arrays_on_host(rng):
    m = kjit.load(example("add.kern"), target="cpu")
    a = rng.standard_normal((40, 25)).astype(np.float32)
    d = kjit.to_device(a, target="cpu")
    assert not d.on_gpu and d.shape == (40, 25) and d.dtype == np.float32
    np.testing.assert_array_equal(d.copy_to_host(), a)
    s = m.add(d, d)
    assert isinstance(s, kjit.DeviceArray)       # device in, device out
    np.testing.assert_array_equal(s.copy_to_host(), a + a)
    out = kjit.device_array_like(a, target="cpu")
    assert m.add(d, 1.0, out=out) is out
    np.testing.assert_array_equal(out.copy_to_host(), a + np.float32(1))
    # Freed arrays' memory is reused, not returned to the system each time.
    ptr = out.ptr
    del out
    again = kjit.device_array((40, 25), np.float32, target="cpu")
    assert again.ptr == ptr
    with pytest.raises(kjit.ShapeError):
        d.copy_from_host(np.zeros(3, np.float32))


def test_array_protocols_share_memory(rng):
    m = kjit.load(example("add.kern"), target="cpu")
    a = rng.standard_normal((16, 9)).astype(np.float32)
    d = kjit.to_device(a, target="cpu")
    # kjit -> NumPy through __array_interface__ and through DLPack: same bytes.
    v = np.asarray(d)
    assert v.__array_interface__["data"][0] == d.ptr
    w = np.from_dlpack(d)
    assert w.__array_interface__["data"][0] == d.ptr
    np.testing.assert_array_equal(w, a)
    # NumPy -> kjit through DLPack: a view, strides kept, no copy.
    t = a[::2, ::-3]
    view = kjit.from_dlpack(t)
    assert view.ptr == t.__array_interface__["data"][0] and view.strides == t.strides
    np.testing.assert_array_equal(m.add(view, view).copy_to_host(), t + t)
    np.testing.assert_array_equal(view.copy_to_host() if view.is_contiguous() else
                                  np.asarray(view), t)
    del w, v
    # A kjit call writes into NumPy's memory through such a view.
    target = np.zeros((16, 9), np.float32)
    m.add(a, a, out=kjit.from_dlpack(target))
    np.testing.assert_array_equal(target, a + a)


def test_streams_and_events_on_cpu(rng):
    m = kjit.load(example("add.kern"), target="cpu")
    s = kjit.Stream(kjit.context("cpu"))
    assert s.handle == 0
    a = rng.standard_normal(10_000).astype(np.float32)
    out = np.empty_like(a)
    start = kjit.Event(s)
    m.add(a, a, out=out, stream=s)
    end = kjit.Event(s)
    s.synchronize()
    assert 0 <= end.elapsed_ms(start) < 10_000
    np.testing.assert_array_equal(out, a + a)
    with pytest.raises(kjit.InvalidArgumentError, match="not a stream"):
        m.add(a, a, out=out, stream="fast")


def test_devices_and_cuda_availability():
    available = kjit.cuda_available()
    assert available == (kjit.cuda_reason() is None)
    if not available:
        assert kjit.devices() == [] and kjit.device_count() == 0
        assert "CUDA" in kjit.cuda_reason() or "cuda" in kjit.cuda_reason()
        with pytest.raises(kjit.NoDeviceError):
            kjit.load(example("add.kern"), target="cuda")
        assert kjit.context("auto").target == "cpu"


@requires_gpu
def test_gpu_devices():
    devices = kjit.devices()
    assert devices and devices[0]["name"] and devices[0]["total_memory"] > 0
    assert devices[0]["compute_capability"][0] >= 3
    assert kjit.context("auto").target == "cuda"


def test_library_lookup_lists_what_it_tried(tmp_path):
    # A copy of the package outside the repository, with KJIT_LIBRARY wrong.
    import shutil
    shutil.copytree(os.path.join(REPO, "python", "kjit"), tmp_path / "kjit")
    env = dict(os.environ, KJIT_LIBRARY=str(tmp_path / "nowhere" / "libkjit.so"))
    run = subprocess.run([sys.executable, "-c", "import kjit; print(kjit.library_path)"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    if run.returncode == 0:
        # An installed libkjit.so was found after KJIT_LIBRARY.
        assert "nowhere" not in run.stdout
    else:
        assert "nowhere/libkjit.so (KJIT_LIBRARY: no such file)" in run.stderr
        assert "installed prefix" in run.stderr and "build folder" in run.stderr


def test_wheel_builds_offline(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "python", "build_backend"))
    try:
        import kjit_build
    finally:
        sys.path.pop(0)
    assert kjit_build.get_requires_for_build_wheel() == []
    if not kjit_build._in_repository() and kjit_build._installed_prefix() is None \
            and not os.environ.get("KJIT_PREFIX"):
        pytest.skip("skipped: no kjit repository or installed libkjit.so to build a wheel "
                    "from (the GPU bundle carries neither)")
    name = kjit_build.build_wheel(str(tmp_path))
    names = zipfile.ZipFile(tmp_path / name).namelist()
    assert "kjit/__init__.py" in names and "kjit/_core.py" in names
    assert f"kjit-{kjit.__version__}.dist-info/RECORD" in names


CHECKED = """
@kernel
fn shift_left(src: f64[], dst: f64[]) {
    let i = grid(1);
    if i < len(dst) { dst[i] = src[i + 1]; }
}
"""


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_checked_mode_names_the_source_place(target):
    """check=True: an index past the end raises CheckError with file:line:col,
    the values and the thread; the same context then runs a correct launch."""
    m = kjit.compile(CHECKED, name="shift.kern", target=target, check=True)
    rng = np.random.default_rng()
    src = rng.standard_normal(1000)
    dst = np.zeros(1000)
    with pytest.raises(kjit.CheckError) as error:
        m.shift_left[4, 256](src, dst)
    assert error.value.status == "check failed"
    assert ("shift.kern:5:35: error: index 1000 out of range for axis 0 of 'src' "
            "(length 1000) in block (3,0,0), thread (231,0,0)") in str(error.value)
    m.shift_left[4, 256](src, dst[:999])
    np.testing.assert_array_equal(dst[:999], src[1:])


RACY = """
@kernel
fn racy(x: f32[], out: f32[]) {
    let s = shared(f32, 64);
    let t = threadIdx.x;
    s[t] = x[grid(1)];
    out[grid(1)] = s[(t + 1) % 64];
}
"""


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_race_checker_names_both_places(target):
    """check="race": a missing barrier raises CheckError naming both accesses
    and both threads; check="all" also finds it, check=True does not."""
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, dtype=np.float32)
    for check in ("race", "all"):
        m = kjit.compile(RACY, name="racy.kern", target=target, check=check)
        with pytest.raises(kjit.CheckError) as error:
            m.racy[2, 64](x, out)
        assert ("racy.kern:6:5: error: write of s[1] by thread (1,0,0) of block (0,0,0) races "
                "with the read at racy.kern:7:21 by thread (0,0,0)") in str(error.value)
    kjit.compile(RACY, name="racy.kern", target=target, check=True).racy[2, 64](x, out)
    with pytest.raises(kjit.InvalidArgumentError):
        kjit.compile(RACY, name="racy.kern", target=target, check="races")


def test_race_checker_refused_on_cuda():
    """The race checker runs on the host: a cuda context refuses it and names
    compute-sanitizer."""
    with pytest.raises(kjit.KjitError) as error:
        kjit.compile(RACY, name="racy.kern", target="cuda", check="race")
    assert "compute-sanitizer" in str(error.value)


def test_unsafe_cache_folder_is_a_warning(tmp_path, monkeypatch):
    """A cache folder others can write is refused (docs/security.md): the call
    still works, and the runtime's warning arrives as kjit.CacheWarning."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("KJIT_CACHE_DIR", str(shared))
    # a source of its own, so that no earlier compile in this process has it
    source = f"@vectorize\nfn f(x: f64) -> f64 {{ return x * {os.getpid()}.0 + 0.25; }}\n"
    with pytest.warns(kjit.CacheWarning, match="is writable by its group or by others"):
        m = kjit.compile(source, name="warned.kern", target="cpu")
        assert m.f(2.0) == 2.0 * os.getpid() + 0.25
    assert not any(shared.iterdir())
