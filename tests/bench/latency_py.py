"""Host-side costs of Numba (numba-cuda) and CuPy, for the latency table of
docs/performance.md, measured the way tests/bench/latency.c measures kjit:

  launch      an empty kernel, grid 1 x block 1, host time per call
  vectorized  an add on 1,000-element f32 device arrays, host time per call
  host 1e5    an add on 100,000-element f32 host arrays (copies in and out)
  first call  compile included (Numba: @vectorize(target='cuda') add), and the
              time to import the library

Each call cost is the median of 7 batches of 2,000 calls (200 for host arrays),
synchronised after each batch.  Prints "| library | what | time | note |" rows;
a library that cannot be imported prints one row saying why.
"""
import statistics
import sys
import time

RUNS, CALLS = 7, 2000


def per_call_us(fn, sync, calls=CALLS):
    fn()
    sync()
    batches = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        batches.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(batches)


def row(library, what, value, unit, note=""):
    print(f"| {library} | {what} | {value:.2f} {unit} | {note} |", flush=True)


def bench_cupy():
    t0 = time.perf_counter()
    import cupy as cp
    import numpy as np
    row("CuPy", "import", (time.perf_counter() - t0) * 1e3, "ms")
    sync = cp.cuda.Device().synchronize
    empty = cp.RawKernel(r'extern "C" __global__ void empty(float *p) {}', "empty")
    a = cp.ones(1000, cp.float32)
    empty((1,), (1,), (a,))
    row("CuPy", "launch, empty kernel", per_call_us(lambda: empty((1,), (1,), (a,)), sync), "us",
        "RawKernel, grid 1, block 1")
    b, c = cp.ones(1000, cp.float32), cp.empty(1000, cp.float32)
    row("CuPy", "vectorized call, device", per_call_us(lambda: cp.add(a, b, out=c), sync), "us",
        "cp.add, 1,000 f32")
    ha = np.ones(100_000, np.float32)
    hb = np.ones(100_000, np.float32)
    row("CuPy", "add, 1e5 host arrays", per_call_us(
        lambda: cp.asnumpy(cp.add(cp.asarray(ha), cp.asarray(hb))), sync, 200), "us",
        "copies in and out")


def bench_numba():
    t0 = time.perf_counter()
    from numba import cuda, vectorize
    import numpy as np
    row("Numba", "import", (time.perf_counter() - t0) * 1e3, "ms")
    sync = cuda.synchronize

    @cuda.jit
    def empty(p):
        pass

    a = cuda.to_device(np.ones(1000, np.float32))
    empty[1, 1](a)
    row("Numba", "launch, empty kernel", per_call_us(lambda: empty[1, 1](a), sync), "us",
        "@cuda.jit, grid 1, block 1")

    t0 = time.perf_counter()

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add(x, y):
        return x + y

    b, c = cuda.to_device(np.ones(1000, np.float32)), cuda.device_array(1000, np.float32)
    add(a, b, out=c)
    sync()
    row("Numba", "first call, compile included", (time.perf_counter() - t0) * 1e3, "ms",
        "@vectorize(target='cuda') add")
    row("Numba", "vectorized call, device", per_call_us(lambda: add(a, b, out=c), sync), "us",
        "1,000 f32")
    ha = np.ones(100_000, np.float32)
    hb = np.ones(100_000, np.float32)
    row("Numba", "add, 1e5 host arrays", per_call_us(lambda: add(ha, hb), sync, 200), "us",
        "copies in and out")


libraries = sys.argv[1:] or ["cupy", "numba"]
for name in libraries:
    try:
        {"cupy": bench_cupy, "numba": bench_numba}[name]()
    except Exception as error:  # a missing or broken library: say so, go on
        print(f"| {name} | unavailable | - | {type(error).__name__}: {error} |", flush=True)
