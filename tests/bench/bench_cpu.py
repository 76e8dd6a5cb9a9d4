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

# NumPy's BLAS (np.dot, np.matmul: OpenBLAS in NumPy's wheels) on one thread,
# as the kjit cpu column it stands beside: the table's NumPy column is a
# one-thread reference (kjit parallel has Numba parallel's beside it), and
# OpenBLAS on every core against kjit on one measured the core count (on the
# 16-core host matmul's cpu / NumPy ranged 1.23-12.52 over three rounds).
# Set the variable to time NumPy on more threads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the thread count)

from bench_arrays import fresh  # noqa: E402 (this folder: the arrays placed as bench_cpu.c's)
from numba_refs import INC_SOURCE, STENCIL_SOURCE, gufunc_dot, numba_loops  # noqa: E402 (shared with bench_pairs.py)

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


# KJIT_BENCH_ONLY=TEXT: only the rows whose name holds TEXT, "A|B" either (as
# bench_cpu.c).
ONLY = os.environ.get("KJIT_BENCH_ONLY", "").split("|")


def only(name):
    return any(part in name for part in ONLY)
results = {}


def elementwise_rows():
    """add, sin and exp over 1e7 elements, the sums and the dot."""
    rng = np.random.default_rng(0)
    N = 10_000_000
    a32 = fresh(rng.random(N, dtype=np.float32))
    b32 = fresh(rng.random(N, dtype=np.float32))
    x64 = fresh(rng.random(N) * 2 * np.pi)
    out32 = fresh(np.empty(N, np.float32))
    out64 = fresh(np.empty(N, np.float64))

    results["add f32 1e7"] = {"numpy": median_ms(lambda: np.add(a32, b32, out=out32))}
    # The reductions: np.sum is pairwise (blocks of 128 in 8 lanes), np.dot is BLAS.
    s32 = fresh(np.random.default_rng(3).random(100_000_000, dtype=np.float32))
    s64 = fresh(s32.astype(np.float64))
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
    a = fresh(rows_rng.random((1_000_000, 16)))
    b = fresh(rows_rng.random((1_000_000, 16)))
    out = fresh(np.empty(1_000_000))
    row = {"numpy": median_ms(lambda: np.einsum("ij,ij->i", a, b, out=out))}
    if nb is not None:
        sig = ["void(float64[:], float64[:], float64[:])"]
        nb_dot = nb.guvectorize(sig, "(n),(n)->()")(gufunc_dot)
        nb_dot_par = nb.guvectorize(sig, "(n),(n)->()", target="parallel")(gufunc_dot)
        row["numba"] = median_ms(lambda: nb_dot(a, b, out))
        row["numba_parallel"] = median_ms(lambda: nb_dot_par(a, b, out))
    results["gufunc dot f64 1e6x16"] = row


MATMUL_SOURCE = """
def blocked(a, b, c):
    n, depth = a.shape
    m = b.shape[1]
    for bi in ROWS(n // 64):
        row0 = bi * 64
        for col0 in range(0, m, 64):
            tile = np.zeros((64, 64))
            for k0 in range(0, depth, 16):
                for ty in range(16):
                    for tx in range(16):
                        c00 = tile[ty, tx]; c01 = tile[ty, tx + 16]; c02 = tile[ty, tx + 32]; c03 = tile[ty, tx + 48]
                        c10 = tile[ty + 16, tx]; c11 = tile[ty + 16, tx + 16]; c12 = tile[ty + 16, tx + 32]; c13 = tile[ty + 16, tx + 48]
                        c20 = tile[ty + 32, tx]; c21 = tile[ty + 32, tx + 16]; c22 = tile[ty + 32, tx + 32]; c23 = tile[ty + 32, tx + 48]
                        c30 = tile[ty + 48, tx]; c31 = tile[ty + 48, tx + 16]; c32 = tile[ty + 48, tx + 32]; c33 = tile[ty + 48, tx + 48]
                        for k in range(k0, k0 + 16):
                            b0 = b[k, col0 + tx]; b1 = b[k, col0 + tx + 16]
                            b2 = b[k, col0 + tx + 32]; b3 = b[k, col0 + tx + 48]
                            a0 = a[row0 + ty, k]
                            c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3
                            a1 = a[row0 + ty + 16, k]
                            c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3
                            a2 = a[row0 + ty + 32, k]
                            c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3
                            a3 = a[row0 + ty + 48, k]
                            c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3
                        tile[ty, tx] = c00; tile[ty, tx + 16] = c01; tile[ty, tx + 32] = c02; tile[ty, tx + 48] = c03
                        tile[ty + 16, tx] = c10; tile[ty + 16, tx + 16] = c11; tile[ty + 16, tx + 32] = c12; tile[ty + 16, tx + 48] = c13
                        tile[ty + 32, tx] = c20; tile[ty + 32, tx + 16] = c21; tile[ty + 32, tx + 32] = c22; tile[ty + 32, tx + 48] = c23
                        tile[ty + 48, tx] = c30; tile[ty + 48, tx + 16] = c31; tile[ty + 48, tx + 32] = c32; tile[ty + 48, tx + 48] = c33
            c[row0:row0 + 64, col0:col0 + 64] = tile
"""


def matmul_rows():
    """The register-blocked matrix multiply of tests/bench/matmul.kern (512 x
    512, f64): NumPy's `@` (OpenBLAS, with its own threads), and Numba's @njit
    and @njit(parallel=True) of the same algorithm, the kernel's threads as
    loops: 64x64 tiles of c (prange over their rows for parallel), 16 deep
    steps of k, and in each a 4x4 block of c in 16 scalars per (ty, tx),
    elements 16 apart.  The sums are in the kernel's order (the same bits).
    The fma() row (bench_cpu.c: the kernel's step written as an fma) has
    Numba's same functions with fastmath={'contract'}: LLVM then fuses each
    `c00 += a0 * b0` into an fma, which is how Numba asks for one."""
    n = 512
    mm_rng = np.random.default_rng(7)
    a = mm_rng.random((n, n))
    b = mm_rng.random((n, n))
    c = np.empty((n, n))
    numpy_ms = median_ms(lambda: np.matmul(a, b, out=c))
    for name, fastmath in (("matmul f64 512 (4x4 per thread)", False),
                           ("matmul f64 512, fma() step", {"contract"})):
        row = {"numpy": numpy_ms}
        if nb is not None:
            want = a @ b
            kernels = {}
            for kind, rows in (("numba", "range"), ("numba_parallel", "nb.prange")):
                namespace = numba_loops(nb, MATMUL_SOURCE, rows)
                kernels[kind] = nb.njit(parallel=kind == "numba_parallel",
                                        fastmath=fastmath)(namespace["blocked"])
                kernels[kind](a, b, c)
                if not np.allclose(c, want, rtol=1e-12, atol=0):  # OpenBLAS sums otherwise
                    sys.exit(f"bench_cpu.py: {kind}'s matrix multiply ({name}) differs from NumPy's")
            for kind, fn in kernels.items():
                row[kind] = median_ms(lambda: fn(a, b, c))
        results[name] = row


def matmul_tc_rows():
    """tests/bench/matmul_tc.kern (mma(), 256 x 256, f64): NumPy's `@`
    (OpenBLAS) beside it; Numba has no warp matrix multiply-accumulate."""
    n = 256
    mm_rng = np.random.default_rng(7)
    a = mm_rng.random((n, n))
    b = mm_rng.random((n, n))
    c = np.empty((n, n))
    results["matmul f64 256, mma() tiles"] = {"numpy": median_ms(lambda: np.matmul(a, b, out=c))}


BINS_SOURCE = """
def bins(data, width, sums, counts):
    for b in ROWS(sums.shape[0]):
        r1 = b * width
        r2 = r1 + width
        s = 0.0
        c = 0
        for i in range(data.shape[0]):
            r = data[i]
            if r1 <= r and r < r2:
                s += r
                c += 1
        sums[b] = s
        counts[b] = c
"""


def bins_rows():
    """tests/bench/bins.kern's algorithm: for each of 1000 bins of width 0.001,
    the sum and count of the elements of 400,000 f64 in [0, 1) inside it.
    NumPy's whole-array form (a mask per bin, its sum and count), and Numba's
    @njit and @njit(parallel=True) (prange over the bins) of the loops."""
    data = np.random.default_rng(11).random(400_000)
    width = 0.001
    sums = np.empty(1000)
    counts = np.empty(1000, np.int64)

    def numpy_bins():
        for b in range(1000):
            r1 = b * width
            inside = (r1 <= data) & (data < r1 + width)
            sums[b] = np.sum(data, where=inside)
            counts[b] = np.count_nonzero(inside)
    row = {"numpy": median_ms(numpy_bins)}
    want = counts.copy()
    if nb is not None:
        for kind, rows in (("numba", "range"), ("numba_parallel", "nb.prange")):
            namespace = numba_loops(nb, BINS_SOURCE, rows)
            fn = nb.njit(parallel=kind == "numba_parallel")(namespace["bins"])
            fn(data, width, sums, counts)
            if not np.array_equal(counts, want):
                sys.exit(f"bench_cpu.py: {kind}'s bin counts differ from NumPy's")
            row[kind] = median_ms(lambda: fn(data, width, sums, counts))
    for form in ("if", "select", "bools as numbers"):
        results[f"bins f64 4e5 x 1000, {form}"] = row


def stencil_rows():
    """tests/bench/stencil3d.kern's Jacobi step at 32^3 and 128^3: NumPy's
    slices, Numba's @njit and @njit(parallel=True) (prange over z) loops."""
    for n in (32, 128):
        u = fresh(np.random.default_rng(13).random((n, n, n)))
        v = fresh(np.zeros((n, n, n)))
        inner = 50 if n == 32 else 4

        def timed(fn):  # as bench_cpu.c: `inner` steps a sample
            return median_ms(lambda: [fn() for _ in range(inner)]) / inner

        def numpy_step():
            v[1:-1, 1:-1, 1:-1] = (u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:] + u[1:-1, :-2, 1:-1]
                                   + u[1:-1, 2:, 1:-1] + u[:-2, 1:-1, 1:-1]
                                   + u[2:, 1:-1, 1:-1]) * (1.0 / 6.0)
        row = {"numpy": timed(numpy_step)}
        want = v.copy()
        if nb is not None:
            for kind, rows in (("numba", "range"), ("numba_parallel", "nb.prange")):
                namespace = numba_loops(nb, STENCIL_SOURCE, rows)
                fn = nb.njit(parallel=kind == "numba_parallel")(namespace["jacobi"])
                v[:] = 0
                fn(u, v)
                if not np.array_equal(v, want):
                    sys.exit(f"bench_cpu.py: {kind}'s stencil differs from NumPy's")
                row[kind] = timed(lambda: fn(u, v))
        results[f"stencil3d f64 {n}^3"] = row


def inc_rows():
    """tests/bench/inc.kern's b = a + 1 over i32, at 1e5 (100 x 1000) and 1.6e6
    (1000 x 1600) elements: NumPy's np.add into b, Numba's @njit and
    @njit(parallel=True) loops (1-D for the @kernel 1-D and @vectorize rows,
    2-D for the 2-D one)."""
    for size, (rows, cols) in (("1e5", (100, 1000)), ("1.6e6", (1000, 1600))):
        a2 = (np.arange(rows * cols, dtype=np.int64) * 2654435761 % 2**32).astype(np.uint32).view(np.int32)
        a2 = fresh(a2.reshape(rows, cols))
        b2 = fresh(np.empty_like(a2))
        a1, b1 = a2.reshape(-1), b2.reshape(-1)
        inner = 200 if size == "1e5" else 10

        def timed(fn):  # as bench_cpu.c: `inner` calls a sample
            return median_ms(lambda: [fn() for _ in range(inner)]) / inner
        numpy_ms = timed(lambda: np.add(a1, np.int32(1), out=b1))
        want = b1.copy()
        numba = {}
        if nb is not None:
            for kind, loop in (("numba", "range"), ("numba_parallel", "nb.prange")):
                namespace = numba_loops(nb, INC_SOURCE, loop)
                for form in ("inc1", "inc2"):
                    fn = nb.njit(parallel=kind == "numba_parallel")(namespace[form])
                    x, y = (a1, b1) if form == "inc1" else (a2, b2)
                    b1[:] = 0
                    fn(x, y)
                    if not np.array_equal(b1, want):
                        sys.exit(f"bench_cpu.py: {kind}'s {form} differs from NumPy's")
                    numba[kind, form] = timed(lambda: fn(x, y))
        for form, loops in (("@kernel 1-D", "inc1"), ("@kernel 2-D 32x8", "inc2"), ("@vectorize", "inc1")):
            row = {"numpy": numpy_ms}
            for kind in ("numba", "numba_parallel"):
                if (kind, loops) in numba:
                    row[kind] = numba[kind, loops]
            results[f"inc i32 {size}, {form}"] = row


INC = tuple(f"inc i32 {size}, {form}" for size in ("1e5", "1.6e6")
            for form in ("@kernel 1-D", "@kernel 2-D 32x8", "@vectorize"))
ELEMENTWISE = ("add f32 1e7", "sin f64 1e7", "exp f32 1e7", "sum f32 1e8", "sum f64 1e8",
               "dot f32 1e7")
for names, rows in ((ELEMENTWISE, elementwise_rows), (("gufunc dot f64 1e6x16",), gufunc_rows),
                    (("matmul f64 512 (4x4 per thread)", "matmul f64 512, fma() step"), matmul_rows),
                    (("matmul f64 256, mma() tiles",), matmul_tc_rows),
                    (("bins f64 4e5 x 1000, if", "bins f64 4e5 x 1000, select",
                      "bins f64 4e5 x 1000, bools as numbers"), bins_rows),
                    (("stencil3d f64 32^3", "stencil3d f64 128^3"), stencil_rows),
                    (INC, inc_rows)):
    if any(only(name) for name in names):
        rows()
results = {name: row for name, row in results.items() if only(name)}
json.dump(results, sys.stdout)
print()
