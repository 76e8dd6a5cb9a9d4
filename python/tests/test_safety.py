"""Calls that must not go wrong quietly: outputs that overlap inputs give what
NumPy gives; read-only arrays are refused where a kernel may store into them
(and only there); one context used from many threads keeps each thread's
error message its own."""
import threading

import numpy as np
import pytest

import kjit
from conftest import TARGETS

SOURCE = """
@vectorize
fn add(a: f64, b: f64) -> f64 { return a + b; }

@kernel
fn scale(x: f64[], y: f64[], s: f64) {
    let i = grid(1);
    if i < len(x) { y[i] = s * x[i]; }
}

@kernel
fn bump(x: f64[]) {
    let i = grid(1);
    if i < len(x) { x[i] = x[i] + 1.0; }
}

fn put(a: f64[], v: f64) -> f64 { a[0] = v; return v; }

@guvectorize("(n),()->(n)")
fn moving_average(x: f64[], w: i64, out: f64[]) {
    let s = 0.0;
    for i in range(len(x)) {
        s += x[i];
        if i >= w { s -= x[i - w]; }
        out[i] = s / f64(min(i + 1, w));
    }
}
"""


@pytest.fixture(scope="module", params=TARGETS)
def m(request):
    return kjit.compile(SOURCE, "safety.kern", target=request.param)


def read_only(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


# ------------------------------------------------------- outputs over inputs

def test_output_overlapping_an_input(m):
    a = np.arange(1, 9, dtype=np.float64)
    expect = a + a[::-1]
    m.add(a, a[::-1], out=a)
    assert np.array_equal(a, expect)            # all 9s, as NumPy gives
    b = np.arange(101, dtype=np.float64)
    expect = b.copy()
    expect[1:] = b[:-1] + 1
    m.add(b[:-1], 1.0, out=b[1:])
    assert np.array_equal(b, expect)
    c = np.arange(12, dtype=np.float64)
    m.add(c, c, out=c)                          # the same view: elementwise is safe
    assert np.array_equal(c, 2 * np.arange(12))


def test_gufunc_output_is_its_input(m, rng):
    x = rng.standard_normal((3, 17))
    expect = m.moving_average(x, 3)
    m.moving_average(x, 3, x)
    assert np.array_equal(x, expect)


# ------------------------------------------------------------ read-only arrays

def test_read_only_array_a_kernel_writes_is_refused(m, tmp_path):
    x = read_only(np.arange(8.0))
    with pytest.raises(kjit.InvalidArgumentError, match="argument 0 is a read-only array"):
        m.bump[1, 32](x)
    assert np.array_equal(x, np.arange(8.0))    # untouched
    path = tmp_path / "x.npy"
    np.save(path, np.arange(8.0))
    mapped = np.load(path, mmap_mode="r")
    with pytest.raises(kjit.InvalidArgumentError, match="read-only"):
        m.bump[1, 32](mapped)
    y = np.zeros(8)
    with pytest.raises(kjit.InvalidArgumentError, match="argument 1 is a read-only array"):
        m.scale[1, 32](x, read_only(y), 2.0)


def test_read_only_inputs_are_taken(m, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(8.0))
    mapped = np.load(path, mmap_mode="r")
    y = np.zeros(8)
    m.scale[1, 32](mapped, y, 3.0)              # scale only reads x
    assert np.array_equal(y, 3 * np.arange(8.0))
    assert np.array_equal(m.add(mapped, read_only(np.ones(8))), np.arange(8.0) + 1)
    assert np.array_equal(m.moving_average(mapped, 1), np.arange(8.0))


def test_read_only_outputs_are_refused(m):
    with pytest.raises(kjit.InvalidArgumentError, match="read-only"):
        m.add(np.ones(4), 1.0, out=read_only(np.zeros(4)))
    with pytest.raises(kjit.InvalidArgumentError, match="argument 2 is a read-only array"):
        m.moving_average(np.ones((2, 5)), 2, read_only(np.zeros((2, 5))))
    with pytest.raises(kjit.InvalidArgumentError, match="argument 0 is a read-only array"):
        m.put(read_only(np.zeros(3)), 1.0)


def test_params_written_are_known(m):
    assert m.scale._written == (False, True, False)
    assert m.bump._written == (True,)
    assert m.moving_average._written == (False, False, True)


# ------------------------------------------------------------------- threads

def test_one_context_many_threads(m):
    """8 threads call and fail on one context; each sees its own message."""
    failures = []

    def work(t):
        try:
            x = np.arange(50.0) + t
            for round in range(20):
                assert np.array_equal(m.add(x, float(t)), x + t)
                wrong = np.zeros(3 + t)
                with pytest.raises(kjit.ShapeError) as caught:
                    m.add(x, 1.0, out=wrong)
                assert f"({3 + t},)" in str(caught.value), str(caught.value)
                with pytest.raises(kjit.NotFoundError) as caught:
                    m.function(f"missing_{t}_{round}")
                assert f"missing_{t}_{round}" in str(caught.value), str(caught.value)
                y = np.zeros(50)
                m.scale[1, 64](x, y, 2.0)
                assert np.array_equal(y, 2 * x)
        except BaseException as error:  # noqa: BLE001
            failures.append(f"thread {t}: {error!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
