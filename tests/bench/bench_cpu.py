"""CPU references for `make bench-cpu`: NumPy and Numba on the elementwise and
reduction rows (the kernels' Numba rows are tests/bench/bench_simd.py's).

Prints one JSON object: {workload: {"numpy": ms, "numba": ms, "numba_parallel": ms}},
each the median of REPEAT runs after a warm-up (compile time excluded), so the
kjit side (tests/bench/bench_cpu.c) can be printed beside it in one table.
"""
import json
import os
import statistics
import sys
import time

import numpy as np

REPEAT = int(sys.argv[1]) if len(sys.argv) > 1 else 7

try:
    import numba as nb
except ImportError:  # the table then shows "-" for Numba
    nb = None


# KJIT_BENCH_CLOCK=thread: the calling thread's CPU time, as bench_cpu.c's.
clock = time.thread_time if os.environ.get("KJIT_BENCH_CLOCK") == "thread" else time.perf_counter


def median_ms(fn):
    fn()
    times = []
    for _ in range(REPEAT):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return statistics.median(times)


rng = np.random.default_rng(0)
N = 10_000_000
a32 = rng.random(N, dtype=np.float32)
b32 = rng.random(N, dtype=np.float32)
x64 = rng.random(N) * 2 * np.pi
out32 = np.empty(N, np.float32)
out64 = np.empty(N, np.float64)
results = {}

results["add f32 1e7"] = {"numpy": median_ms(lambda: np.add(a32, b32, out=out32))}
# The reductions: np.sum is pairwise (blocks of 128 in 8 lanes), np.dot is BLAS.
s32 = np.random.default_rng(3).random(100_000_000, dtype=np.float32)
s64 = s32.astype(np.float64)
results["sum f32 1e8"] = {"numpy": median_ms(lambda: np.sum(s32))}
results["sum f64 1e8"] = {"numpy": median_ms(lambda: np.sum(s64))}
results["dot f32 1e7"] = {"numpy": median_ms(lambda: np.dot(a32, b32))}
del s64
results["sin f64 1e7"] = {"numpy": median_ms(lambda: np.sin(x64, out=out64))}
results["exp f32 1e7"] = {"numpy": median_ms(lambda: np.exp(a32, out=out32))}

if nb is not None:
    @nb.vectorize(["float32(float32, float32)"])
    def nb_add(a, b):
        return a + b

    @nb.vectorize(["float32(float32, float32)"], target="parallel")
    def nb_add_par(a, b):
        return a + b

    @nb.vectorize(["float64(float64)"])
    def nb_sin(x):
        return np.sin(x)

    @nb.vectorize(["float64(float64)"], target="parallel")
    def nb_sin_par(x):
        return np.sin(x)

    @nb.vectorize(["float32(float32)"])
    def nb_exp(x):
        return np.exp(x)

    @nb.vectorize(["float32(float32)"], target="parallel")
    def nb_exp_par(x):
        return np.exp(x)

    results["add f32 1e7"]["numba"] = median_ms(lambda: nb_add(a32, b32, out=out32))
    results["add f32 1e7"]["numba_parallel"] = median_ms(lambda: nb_add_par(a32, b32, out=out32))
    results["sin f64 1e7"]["numba"] = median_ms(lambda: nb_sin(x64, out=out64))
    results["sin f64 1e7"]["numba_parallel"] = median_ms(lambda: nb_sin_par(x64, out=out64))
    results["exp f32 1e7"]["numba"] = median_ms(lambda: nb_exp(a32, out=out32))
    results["exp f32 1e7"]["numba_parallel"] = median_ms(lambda: nb_exp_par(a32, out=out32))


def gufunc_rows():
    """The @guvectorize dot over 1e6 rows of 16 f64: NumPy's einsum, Numba's
    @guvectorize on its cpu and parallel targets."""
    rows_rng = np.random.default_rng(5)
    a = rows_rng.random((1_000_000, 16))
    b = rows_rng.random((1_000_000, 16))
    out = np.empty(1_000_000)
    row = {"numpy": median_ms(lambda: np.einsum("ij,ij->i", a, b, out=out))}
    if nb is not None:
        def dot(x, y, res):
            s = 0.0
            for i in range(x.shape[0]):
                s += x[i] * y[i]
            res[0] = s
        sig = ["void(float64[:], float64[:], float64[:])"]
        nb_dot = nb.guvectorize(sig, "(n),(n)->()")(dot)
        nb_dot_par = nb.guvectorize(sig, "(n),(n)->()", target="parallel")(dot)
        row["numba"] = median_ms(lambda: nb_dot(a, b, out))
        row["numba_parallel"] = median_ms(lambda: nb_dot_par(a, b, out))
    results["gufunc dot f64 1e6x16"] = row


gufunc_rows()
json.dump(results, sys.stdout)
print()
