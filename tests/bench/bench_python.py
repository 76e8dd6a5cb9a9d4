"""The cost of a kjit call from Python, beside CuPy and Numba: a vectorized
add on 1,000-element float32 device arrays, host time per call (the issue's
target for kjit: under 8 us).  Each figure is the median of 7 batches of 2,000
calls, synchronised after each batch, as tests/bench/latency_py.py measures.

  python3 tests/bench/bench_python.py        (on the GPU machine: run.sh runs it)

Prints "| library | what | time | note |" rows; what is missing (no GPU, no
CuPy, no Numba) gets a row saying so.  Without a GPU the kjit rows are for
the cpu target, which shows the Python side's own cost.
"""
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
try:
    import kjit
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
    import kjit

RUNS, CALLS, N = 7, 2000, 1000


def per_call_us(fn, sync):
    fn()
    sync()
    batches = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        sync()
        batches.append((time.perf_counter() - t0) / CALLS * 1e6)
    return statistics.median(batches)


def row(library, what, us, note=""):
    value = f"{us:.2f} us" if us is not None else "-"
    print(f"| {library} | {what} | {value} | {note} |", flush=True)


def bench_kjit():
    target = "cuda" if kjit.cuda_available() else "cpu"
    add = kjit.load(os.path.join(REPO, "examples", "add.kern"), target=target).add
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    da, db = kjit.to_device(a, target=target), kjit.to_device(a[::-1], target=target)
    out = kjit.device_array(N, np.float32, target=target)
    sync = kjit.context(target).synchronize
    note = f"{target}, 1,000 f32" + ("" if target == "cuda" else " (no GPU: the Python side's cost)")
    row("kjit", "add, device arrays, out=", per_call_us(lambda: add(da, db, out=out), sync),
        note)
    row("kjit", "add, device arrays", per_call_us(lambda: add(da, db), sync),
        note + ", output from kjit's pool")
    assert np.array_equal(add(da, db).copy_to_host(), a + a[::-1])
    try:
        import cupy as cp
        if target != "cuda":
            raise ImportError("no GPU")
    except ImportError as error:
        row("kjit", "add, CuPy arrays", None, f"skipped: {error}")
        return
    ca, cb = cp.asarray(a), cp.asarray(a[::-1])
    cout = cp.empty(N, cp.float32)
    row("kjit", "add, CuPy arrays, out=", per_call_us(lambda: add(ca, cb, out=cout), sync),
        "cuda, 1,000 f32")
    row("kjit", "add, CuPy arrays", per_call_us(lambda: add(ca, cb), sync),
        "cuda, 1,000 f32, output from CuPy's pool")


def bench_cupy():
    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as error:
        row("CuPy", "cp.add, device arrays", None, f"skipped: {type(error).__name__}: {error}")
        return
    a = cp.random.random(N, dtype=cp.float32)
    b = cp.random.random(N, dtype=cp.float32)
    c = cp.empty(N, cp.float32)
    sync = cp.cuda.Device().synchronize
    row("CuPy", "cp.add, device arrays, out=", per_call_us(lambda: cp.add(a, b, out=c), sync),
        "1,000 f32")
    row("CuPy", "cp.add, device arrays", per_call_us(lambda: cp.add(a, b), sync), "1,000 f32")


def bench_numba():
    try:
        from numba import cuda, vectorize
        if not cuda.is_available():
            raise ImportError("Numba sees no GPU")
    except Exception as error:
        row("Numba", "@vectorize add, device arrays", None,
            f"skipped: {type(error).__name__}: {error}")
        return

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add(x, y):
        return x + y
    a = cuda.to_device(np.random.default_rng(0).random(N, dtype=np.float32))
    b = cuda.to_device(np.random.default_rng(1).random(N, dtype=np.float32))
    c = cuda.device_array(N, np.float32)
    row("Numba", "@vectorize add, device arrays, out=",
        per_call_us(lambda: add(a, b, out=c), cuda.synchronize), "1,000 f32")


if __name__ == "__main__":
    print("| library | what | time per call | note |")
    print("| --- | --- | --- | --- |")
    which = sys.argv[1:] or ["kjit", "cupy", "numba"]
    for name in which:
        globals()[f"bench_{name}"]()
