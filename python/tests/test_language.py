"""Language features from Python (docs/language.md): constant arrays, read in
@vectorize functions and kernels on every target, and refused when written."""
import os

import numpy as np
import pytest

import kjit
from conftest import REPO, TARGETS


@pytest.fixture(scope="module", params=TARGETS)
def target(request):
    return request.param


TABLE = """
const W: f32[2, 3] = [[0.5, 1, 2], [-1, 3.25, 100]];
const LUT: u16[4] = [0x0000, 0x1021, 0x2042, 0x3063];
@vectorize
fn pick(r: i32, c: i32) -> f32 { return W[r, c] * f32(W.shape[1]); }
@kernel
fn look(idx: i32[], out: u16[]) {
    let i = grid(1);
    if i < len(out) { out[i] = LUT[idx[i]]; }
}
"""


def test_const_array(target, rng):
    m = kjit.compile(TABLE, target=target)
    r = rng.integers(0, 2, 1000).astype(np.int32)
    c = rng.integers(0, 3, 1000).astype(np.int32)
    w = np.array([[0.5, 1, 2], [-1, 3.25, 100]], np.float32)
    np.testing.assert_array_equal(m.pick(r, c), w[r, c] * 3)
    idx = rng.integers(0, 4, 100).astype(np.int32)
    out = np.zeros(100, np.uint16)
    m.look[4, 32](idx, out)
    np.testing.assert_array_equal(out, np.array([0, 0x1021, 0x2042, 0x3063], np.uint16)[idx])


def test_const_array_crc(target):
    m = kjit.load(os.path.join(REPO, "tests", "golden", "exec", "const_array.kern"), target=target)
    out = np.zeros(1, np.uint16)
    m.crc16[1, 32](np.arange(9, dtype=np.uint8), out)
    assert out[0] == 0x6EDE  # binascii.crc_hqx(bytes(range(9)), 0xffff)


def test_const_array_is_read_only():
    with pytest.raises(kjit.CompileError, match="the constant array 'T', which is read-only"):
        kjit.compile("const T: i32[2] = [1, 2];\n@kernel fn k(o: i32[]) { T[0] = o[0]; }\n",
                     target="cpu")


TRIDIAG = os.path.join(REPO, "tests", "golden", "exec", "local_launch.kern")


def test_local_sized_at_launch(target, rng):
    # local() sized by the launch: an array's extent (the column's length)
    # and scalar parameters, on every target
    m = kjit.load(TRIDIAG, target=target)
    d = rng.standard_normal((120, 50))
    x = np.zeros_like(d)
    m.tridiag_columns[2, 32](d, x)
    a = 4 * np.eye(120) - np.eye(120, k=1) - np.eye(120, k=-1)
    np.testing.assert_allclose(a @ x, d, atol=1e-12)
    xs = np.arange(100, dtype=np.int32)
    out = np.zeros(100, np.int64)
    m.prefix_windows[4, 32](xs, out, 5, 20)
    want = sum(np.roll(xs, -k).astype(np.int64) for k in range(5)) + (8 + 5 % 3) * 1000
    np.testing.assert_array_equal(out, want)


def test_local_sized_at_launch_is_bounded(target):
    m = kjit.load(TRIDIAG, target=target)
    out = np.full(100, -1, np.int64)
    with pytest.raises(kjit.InvalidArgumentError, match="take 800192 bytes per thread"):
        m.prefix_windows[4, 32](np.arange(100, dtype=np.int32), out, 200000, 20)
    with pytest.raises(kjit.InvalidArgumentError, match="is given size -8 by this launch"):
        m.prefix_windows[4, 32](np.arange(100, dtype=np.int32), out, 3, -8)
    assert (out == -1).all()  # refused before anything ran


SEVERAL = os.path.join(REPO, "tests", "golden", "vectorize", "several_outputs.kern")


def test_several_outputs(target, rng):
    # a @vectorize of several outputs: a tuple of arrays, or out=(a, b)
    m = kjit.load(SEVERAL, target=target)
    a = rng.integers(-1000, 1000, (40, 30))
    b = rng.choice([-7, -3, 2, 5, 11], 30)
    q, r = m.floor_divmod(a, b)
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)
    q2, r2 = np.empty_like(a), np.empty_like(a)
    got = m.floor_divmod(a.T, -4, out=(q2.T, r2.T))
    assert got[0].base is q2 and got[1].base is r2
    np.testing.assert_array_equal(q2.T, a.T // -4)
    np.testing.assert_array_equal(r2.T, a.T % -4)
    assert m.floor_divmod(-17, 5) == (-4, 3)
    x = np.linspace(-3, 3, 77, dtype=np.float32)
    s, c, pos = m.wave(x)
    assert (s.dtype, c.dtype, pos.dtype) == (np.float32, np.float32, np.bool_)
    np.testing.assert_allclose(s, np.sin(x), atol=1e-6)
    np.testing.assert_allclose(c, np.cos(x), atol=1e-6)
    np.testing.assert_array_equal(pos, x >= 0)
    assert m.floor_divmod.outputs == 2 and m.wave.output_types() == ("f32", "f32", "bool")
    z, n = m.escape(np.linspace(-2, 0.5, 50), np.linspace(-1.2, 1.2, 20)[:, None], 40)
    assert z.shape == n.shape == (20, 50) and n.dtype == np.int32
    assert n.min() == 0 and n.max() == 40 and (z[n < 40] > 2).all()


def test_several_outputs_refused():
    m = kjit.load(SEVERAL, target="cpu")
    a = np.arange(10)
    with pytest.raises(kjit.InvalidArgumentError, match="out= takes a tuple of 2 arrays"):
        m.floor_divmod(a, 3, out=np.empty(10, np.int64))
    with pytest.raises(kjit.ShapeError, match="output 1 has shape"):
        m.floor_divmod(a, 3, out=(np.empty(10, np.int64), np.empty(9, np.int64)))
    with pytest.raises(kjit.DTypeError, match="output 0 .* must be a i64 array"):
        m.floor_divmod(a, 3, out=(np.empty(10, np.float64), np.empty(10, np.int64)))
    with pytest.raises(kjit.InvalidArgumentError, match="takes 2 inputs"):
        m.floor_divmod(a)
