"""The Numba references' loops that tests/bench/bench_cpu.py (`make
bench-cpu`) and tests/bench/bench_pairs.py (`make bench-pairs`) both time, so
that the two compare kjit with the same code.  The sources' outer loop is
ROWS: `range` for @njit, `nb.prange` for @njit(parallel=True); `numba_loops`
compiles them."""
import numpy as np

STENCIL_SOURCE = """
def jacobi(u, v):
    n = u.shape[0]
    for z in ROWS(1, n - 1):
        for y in range(1, n - 1):
            for x in range(1, n - 1):
                v[z, y, x] = (u[z, y, x - 1] + u[z, y, x + 1] + u[z, y - 1, x] + u[z, y + 1, x]
                              + u[z - 1, y, x] + u[z + 1, y, x]) * (1.0 / 6.0)
"""

INC_SOURCE = """
def inc1(a, b):
    for i in ROWS(a.shape[0]):
        b[i] = a[i] + np.int32(1)

def inc2(a, b):
    for i in ROWS(a.shape[0]):
        for j in range(a.shape[1]):
            b[i, j] = a[i, j] + np.int32(1)
"""


def numba_loops(nb, source, rows):
    """source's functions by name, with ROWS as `rows` ("range" or
    "nb.prange"), not yet compiled (the caller picks @njit's options)."""
    namespace = {"nb": nb, "np": np}
    exec(source.replace("ROWS", rows), namespace)
    return namespace


def gufunc_dot(x, y, res):
    """examples/gufunc.kern's dot, for @guvectorize "(n),(n)->()"."""
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    res[0] = s
