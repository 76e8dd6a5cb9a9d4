"""@reduce functions from Python: f(x, axis=None|int|tuple, init=None,
out=None), fused map= forms, the same bits as `kjit run` (and so kjit_reduce)
on cpu and parallel."""
import os
import subprocess

import numpy as np
import pytest

from conftest import REPO, example
import kjit

KJIT = os.path.join(REPO, "build", "kjit")


def kjit_run(tmp_path, name, inputs, *options):
    """What `kjit run examples/reduce.kern name inputs... options` writes."""
    paths = []
    for i, x in enumerate(inputs):
        path = tmp_path / f"in{i}.npy"
        np.save(path, x)
        paths.append(str(path))
    out = tmp_path / "out.npy"
    subprocess.run([KJIT, "run", example("reduce.kern"), name, *paths, *options, "-o",
                    str(out), "--target", "cpu"], check=True, capture_output=True)
    return np.load(out)


@pytest.mark.skipif(not os.path.exists(KJIT), reason="skipped: no build/kjit")
def test_same_bits_as_kjit_run(rng, tmp_path):
    m = kjit.load(example("reduce.kern"), target="cpu")
    x = rng.random((37, 130)).astype(np.float32)
    y = rng.random((37, 130)).astype(np.float32)
    cases = [("vsum", (x,), {}, ()), ("vsum", (x,), {"axis": 1}, ("--axis", "1")),
             ("vsum", (x,), {"axis": (0, -1)}, ("--axis", "0,-1")),
             ("vmax", (x,), {"init": 0.5}, ("--init", "0.5")),
             ("dot", (x, y), {"axis": 0}, ("--axis", "0")), ("sumsq", (x,), {}, ())]
    for name, args, kwargs, options in cases:
        ours = np.asarray(getattr(m, name)(*args, **kwargs))
        theirs = kjit_run(tmp_path, name, args, *options)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        assert ours.tobytes() == theirs.tobytes(), (name, kwargs)


@pytest.mark.parametrize("target", ["cpu", "parallel"])
def test_reduce_forms(rng, target):
    m = kjit.load(example("reduce.kern"), target=target)
    x = rng.random((20, 30, 4))
    total = m.vsum(x)
    assert isinstance(total, np.float64)
    np.testing.assert_allclose(total, x.sum())
    np.testing.assert_allclose(m.vsum(x, axis=1), x.sum(axis=1))
    np.testing.assert_allclose(m.vsum(x, axis=-1), x.sum(axis=-1))
    np.testing.assert_allclose(m.vsum(x, axis=(0, 2)), x.sum(axis=(0, 2)))
    np.testing.assert_allclose(m.vsum(x[:, ::2, 1]), x[:, ::2, 1].sum())  # strided
    np.testing.assert_allclose(m.vsum(x, init=100.0), x.sum() + 100.0)
    assert m.vmax(np.zeros(0), init=-1.0) == -1.0
    out = np.empty(30)
    assert m.vsum(x, axis=(0, 2), out=out) is out
    np.testing.assert_allclose(out, x.sum(axis=(0, 2)))
    a = rng.integers(-5, 5, 1000).astype(np.int32)
    r = m.vsum(a)
    assert r.dtype == np.int32 and r == a.sum()
    # fused maps: no product array
    f, g = rng.random(500).astype(np.float32), rng.random(500).astype(np.float32)
    np.testing.assert_allclose(m.dot(f, g), np.dot(f, g), rtol=1e-5)
    np.testing.assert_allclose(m.dot(f, 2.0), f.sum() * 2, rtol=1e-5)  # a scalar broadcast
    np.testing.assert_allclose(m.sumsq(f), (f * f).sum(), rtol=1e-5)
    # the same bits on cpu and parallel
    cpu = kjit.load(example("reduce.kern"), target="cpu")
    big = rng.random(100_000).astype(np.float32)
    assert m.vsum(big).tobytes() == cpu.vsum(big).tobytes()
    # kjit's device arrays (host memory here)
    d = kjit.to_device(x, target=target)
    np.testing.assert_allclose(m.vsum(d, axis=0), x.sum(axis=0))


def test_reduce_errors(rng):
    m = kjit.load(example("reduce.kern"), target="cpu")
    x = rng.random(10)
    with pytest.raises(kjit.ShapeError):
        m.vsum(np.zeros(0))  # empty, no init
    with pytest.raises(kjit.KjitError, match="axis"):
        m.vsum(x, axis=3)
    with pytest.raises(kjit.InvalidArgumentError, match="axis"):
        m.vsum(x, axis="0")
    with pytest.raises(kjit.InvalidArgumentError, match="reduces 2 arguments, 1 given"):
        m.dot(x)
    with pytest.raises(kjit.InvalidArgumentError, match="init= is a scalar"):
        m.vsum(x, init=x)
    with pytest.raises(kjit.ShapeError):
        m.vsum(x.reshape(2, 5), axis=0, out=np.empty(4))
    with pytest.raises(kjit.DTypeError):
        m.vsum(x.astype(np.complex128))
