"""Paired timing of kjit against its peer in one process (issue 25's rows
whose ratio moved from one table to the next, on either side of 1).

`make bench-cpu` times kjit (bench_cpu.c) and its peers (bench_cpu.py) in two
processes, a minute apart; on a shared host a memory-bound row's ratio then
moves with the machine (stencil3d 128^3, cpu / Numba: 0.78 to 1.86 over the
tables in docs/performance.md).  Here each row's two sides take turns in one
process on the same arrays, the output too: a pair is one sample of each
(`inner` calls), the order swapped every pair, and the row is the median of
the pairs' ratios, with the quartiles, the range and the share of pairs kjit
won.  kjit is called through its Python package; the first row is a call
over 16 elements, what a call costs each side beside the kernel (under a
microsecond with the package's compiled hot path; every other row takes 0.02
ms or more a call).  One-thread rows only: two pools in one process take
each other's cores (Numba's OpenMP threads spin after a prange, and kjit
parallel's stencil ran 4 times slower beside them on the 16-core host), so
the parallel rows stay with bench-cpu's two processes.

    python3 tests/bench/bench_pairs.py [ROOT]

ROOT: the repository (examples/ and tests/bench/), this file's by default.
KJIT_PAIRS=N pairs a row (31); KJIT_BENCH_ONLY="A|B" the rows whose name
holds A or B.  Needs NumPy, Numba and the kjit package (PYTHONPATH, with
KJIT_LIBRARY where the package has no library of its own).  Every result is
checked against the peer's before the timing; a difference ends the run.
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as bench_cpu.py: one-thread BLAS
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numba as nb  # noqa: E402
import numpy as np  # noqa: E402

import kjit  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_arrays import fresh  # noqa: E402
from numba_refs import INC_SOURCE, STENCIL_SOURCE, gufunc_dot, numba_loops  # noqa: E402 (bench_cpu.py's too)

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PAIRS = int(os.environ.get("KJIT_PAIRS", "31"))
ONLY = os.environ.get("KJIT_BENCH_ONLY", "").split("|")


def path(*parts):
    return os.path.join(ROOT, *parts)


def sample_ms(fn, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) * 1e3 / inner


def pair(name, ours, peer, peer_name, inner):
    """Times the row's pairs and prints its line."""
    if not any(part in name for part in ONLY):
        return
    for _ in range(2):
        ours()
        peer()
    times = {"ours": [], "peer": []}
    ratios = []
    for k in range(PAIRS):
        order = (("ours", ours), ("peer", peer)) if k % 2 == 0 else (("peer", peer), ("ours", ours))
        got = {side: sample_ms(fn, inner) for side, fn in order}
        for side in got:
            times[side].append(got[side])
        ratios.append(got["ours"] / got["peer"])
    q = statistics.quantiles(ratios, n=4)
    won = sum(r < 1 for r in ratios) / len(ratios)
    print(f"| {name} | {peer_name} | {statistics.median(times['ours']):.4f} | "
          f"{statistics.median(times['peer']):.4f} | **{statistics.median(ratios):.2f}** | "
          f"{q[0]:.2f}-{q[2]:.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {won:.0%} |", flush=True)


def same(name, ours, peer, out, rtol=0.0):
    """Runs each side into out (both sides of a row write the same array, so
    that where its pages lie weighs the same on both) and compares them."""
    out[...] = 0
    ours()
    got = out.copy()
    out[...] = 0
    peer()
    ok = np.array_equal(got, out) if rtol == 0 else np.allclose(got, out, rtol=rtol, atol=0)
    if not ok:
        sys.exit(f"bench_pairs.py: {name}: kjit's result differs from the peer's")


CPU = kjit.context("cpu")

def stencil_rows():
    for n, inner in ((128, 4), (32, 50)):
        u = fresh(np.random.default_rng(13).random((n, n, n)))
        out = fresh(np.zeros((n, n, n)))
        kernel = CPU.load(path("tests", "bench", "stencil3d.kern")).jacobi[(n // 32, n // 4, n // 2), (32, 4, 2)]
        peer = nb.njit(numba_loops(nb, STENCIL_SOURCE, "range")["jacobi"])
        same("stencil3d", lambda: kernel(u, out), lambda: peer(u, out), out)
        pair(f"stencil3d f64 {n}^3, cpu", lambda: kernel(u, out), lambda: peer(u, out), "Numba", inner)


def matmul_rows():
    n = 512
    rng = np.random.default_rng(7)
    a, b = rng.random((n, n)), rng.random((n, n))
    out = np.empty((n, n))
    with open(path("tests", "bench", "matmul.kern")) as f:
        text = f.read()
    step = "acc[i, j] += av * bv[j];"
    assert text.count(step) == 1, "matmul.kern's step is not where bench_pairs.py looks"
    for form, source in (("plain", text), ("fma() step", text.replace(step, "acc[i, j] = fma(av, bv[j], acc[i, j]);"))):
        kernel = CPU.compile(source, "matmul.kern").matmul[(n // 64, n // 64), (16, 16)]
        same("matmul", lambda: kernel(a, b, out), lambda: np.matmul(a, b, out=out), out, rtol=1e-12)
        pair(f"matmul f64 512, {form}, cpu", lambda: kernel(a, b, out), lambda: np.matmul(a, b, out=out),
             "NumPy @ (OpenBLAS, 1 thread)", 3)


def elementwise_rows():
    rng = np.random.default_rng(0)
    N = 10_000_000
    a32 = fresh(rng.random(N, dtype=np.float32))
    b32 = fresh(rng.random(N, dtype=np.float32))
    out = fresh(np.empty(N, np.float32))
    add = CPU.load(path("examples", "add.kern")).add
    vexp = CPU.load(path("examples", "exp.kern")).vexp

    @nb.vectorize(["float32(float32, float32)"])
    def nb_add(x, y):
        return x + y
    same("add", lambda: add(a32, b32, out=out), lambda: nb_add(a32, b32, out=out), out)
    pair("add f32 1e7, cpu", lambda: add(a32, b32, out=out), lambda: nb_add(a32, b32, out=out),
         "Numba @vectorize", 1)
    same("exp", lambda: vexp(a32, out=out), lambda: np.exp(a32, out=out), out, rtol=4 * 2.0**-23)
    pair("exp f32 1e7, cpu", lambda: vexp(a32, out=out), lambda: np.exp(a32, out=out), "NumPy", 1)

    rows, cols = 1000, 1600
    a = fresh((np.arange(rows * cols, dtype=np.int64) * 2654435761 % 2**32).astype(np.uint32).view(np.int32))
    out = fresh(np.empty_like(a))
    inc1 = CPU.load(path("tests", "bench", "inc.kern")).inc1[((a.size + 255) // 256,), (256,)]
    numba_inc = numba_loops(nb, INC_SOURCE, "range")
    nb_inc1, nb_inc2 = nb.njit(numba_inc["inc1"]), nb.njit(numba_inc["inc2"])
    same("inc1", lambda: inc1(a, out), lambda: nb_inc1(a, out), out)
    pair("inc i32 1.6e6, @kernel 1-D, cpu", lambda: inc1(a, out), lambda: nb_inc1(a, out), "Numba", 10)
    inc = CPU.load(path("tests", "bench", "inc.kern"))
    vinc = inc.vinc
    same("vinc", lambda: vinc(a, out=out), lambda: nb_inc1(a, out), out)
    pair("inc i32 1.6e6, @vectorize, cpu", lambda: vinc(a, out=out), lambda: nb_inc1(a, out), "Numba", 10)
    a2, out2 = a.reshape(rows, cols), out.reshape(rows, cols)
    inc2 = inc.inc2[((cols + 31) // 32, (rows + 7) // 8), (32, 8)]
    same("inc2", lambda: inc2(a2, out2), lambda: nb_inc2(a2, out2), out2)
    pair("inc i32 1.6e6, @kernel 2-D 32x8, cpu", lambda: inc2(a2, out2), lambda: nb_inc2(a2, out2), "Numba", 10)


def reduction_rows():
    """examples/gufunc.kern's dot over 1e6 rows of 16 f64 against Numba's
    @guvectorize of the same loop, and examples/reduce.kern's dot over 1e7
    f32 against NumPy's np.dot (OpenBLAS's sdot on one thread): the sums of
    a dot are added in another order on each side, so compared within a
    relative 1e-12 (f64 over 16) and 1e-4 (f32 over 1e7, a sum of positive
    terms)."""
    rng = np.random.default_rng(5)
    a, b = fresh(rng.random((1_000_000, 16))), fresh(rng.random((1_000_000, 16)))
    out = fresh(np.empty(1_000_000))
    dot = CPU.load(path("examples", "gufunc.kern")).dot

    nb_dot = nb.guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->()")(gufunc_dot)
    same("gufunc dot", lambda: dot(a, b, out=out), lambda: nb_dot(a, b, out), out, rtol=1e-12)
    pair("gufunc dot f64 1e6x16, cpu", lambda: dot(a, b, out=out), lambda: nb_dot(a, b, out),
         "Numba @guvectorize", 1)
    # what the package's default, cancellable code (a poll in loops) costs
    # the dot against a context without polls
    plain = kjit.context("cpu", cancellable=False).load(path("examples", "gufunc.kern")).dot
    same("gufunc dot", lambda: dot(a, b, out=out), lambda: plain(a, b, out=out), out)
    pair("gufunc dot f64 1e6x16, cpu (cancellable, the default)", lambda: dot(a, b, out=out),
         lambda: plain(a, b, out=out), "kjit, cancellable=False", 1)

    x = fresh(np.random.default_rng(0).random(10_000_000, dtype=np.float32))
    y = fresh(np.random.default_rng(1).random(10_000_000, dtype=np.float32))
    vdot = CPU.load(path("examples", "reduce.kern")).dot
    ours, theirs = float(vdot(x, y)), float(np.dot(x, y))
    if abs(ours - theirs) > 1e-4 * abs(theirs):
        sys.exit(f"bench_pairs.py: dot f32: kjit gives {ours}, NumPy {theirs}")
    pair("dot f32 1e7 (@reduce), cpu", lambda: vdot(x, y), lambda: np.dot(x, y), "NumPy np.dot", 1)


def call_costs():
    """What a call of (almost) nothing costs each side here: the part of a
    row that is the Python call, not the kernel."""
    a = np.zeros(16, np.int32)
    b = np.empty_like(a)
    inc1 = CPU.load(path("tests", "bench", "inc.kern")).inc1[(1,), (16,)]
    nb_inc1 = nb.njit(numba_loops(nb, INC_SOURCE, "range")["inc1"])
    nb_inc1(a, b)
    pair("a call over 16 elements", lambda: inc1(a, b), lambda: nb_inc1(a, b), "Numba", 2000)


print(f"kjit's Python calls: {kjit.hot_path}; NumPy {np.__version__}, Numba {nb.__version__}; "
      f"{PAIRS} pairs a row")
if kjit.hot_path != "compiled":
    print("(kjit's calls run the pure Python path, some microseconds a call more: rows of "
          "0.1 ms and less are not kjit's kernels alone; `make bench-pairs` installs the package "
          "with its compiled hot path)")
print()
print("| row | peer | kjit ms | peer ms | kjit / peer, median of the pairs | quartiles | range | pairs kjit won |")
print("| --- | --- | ---: | ---: | ---: | --- | --- | ---: |")
for rows in (call_costs, stencil_rows, matmul_rows, elementwise_rows, reduction_rows):
    rows()
