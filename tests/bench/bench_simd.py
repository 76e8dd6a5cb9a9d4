"""Numba's side of `make bench-cpu`'s SIMD rows (tests/bench/bench_simd.c).

    python3 tests/bench/bench_simd.py REFS_DIR [REPEAT]

REFS_DIR is what `bench_simd --save-refs=REFS_DIR` wrote: the inputs kjit and
the C references ran on, the scalar C's results and manifest.json with the
sizes and the rows' names.  Each workload is the kjit program's algorithm in
Numba, once with @njit or @vectorize (one thread) and once with
@njit(parallel=True) and prange or @vectorize(target='parallel'); each result
is checked as bench_simd.c checks kjit's (the integer results equal, the block
sums within 1e-5 of the float64 sums' absolute values and the same bits as the
C tree) before a time is kept.  Prints one JSON object
{row name: {"numba": ms, "numba_parallel": ms}}, medians of REPEAT runs after a
warm-up that compiles; {} when Numba cannot be imported.
"""
import json
import math
import os
import statistics
import sys
import time

import numpy as np

from bench_arrays import fresh  # this folder: the arrays placed as bench_simd.c's

try:
    import numba as nb
except ImportError:  # the table then shows "-" for Numba
    nb = None


# KJIT_BENCH_CLOCK=thread: the calling thread's CPU time, as bench_simd.c's
# (for a busy machine; meaningless for the parallel rows).
clock = time.thread_time if os.environ.get("KJIT_BENCH_CLOCK") == "thread" else time.perf_counter


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return statistics.median(times)


class Refs:
    """The files of bench_simd --save-refs."""

    def __init__(self, folder):
        self.folder = folder
        with open(os.path.join(folder, "manifest.json")) as f:
            self.manifest = json.load(f)

    def load(self, name, dtype):
        return np.fromfile(os.path.join(self.folder, name), dtype=dtype)


def check_equal(name, got, expected):
    differ = np.count_nonzero(got.reshape(-1) != expected.reshape(-1))
    if differ:
        raise SystemExit(f"bench_simd.py: {name}: {differ} of {expected.size} elements differ "
                         "from the scalar C's")


def timed(name, runs, expected_check, repeat):
    """{"numba": ms, "numba_parallel": ms} for runs {key: (call, output)}."""
    row = {}
    for key, (call, output) in runs.items():
        output[...] = 0
        call()  # compiles
        expected_check(f"{name}, {key}", output)
        row[key] = median_ms(call, repeat)
        expected_check(f"{name}, {key}, timed", output)
    return row


def mandel_rows(refs, repeat):
    m = refs.manifest["mandel"]
    expected = refs.load("mandel.expected", np.uint8).reshape(m["height"], m["width"])

    @nb.njit
    def mandel(x, y, max_iters):
        c = complex(x, y)
        z = 0.0j
        for i in range(max_iters):
            z = z * z + c
            if z.real * z.real + z.imag * z.imag >= 4:
                return i
        return max_iters

    def mandel_image(min_x, max_x, min_y, max_y, image, iters):
        height, width = image.shape
        pixel_x = (max_x - min_x) / width
        pixel_y = (max_y - min_y) / height
        for x in nb.prange(width):
            re = min_x + x * pixel_x
            for y in range(height):
                image[y, x] = mandel(re, min_y + y * pixel_y, iters)

    one, par = nb.njit(mandel_image), nb.njit(parallel=True)(mandel_image)
    image = fresh(np.zeros_like(expected))
    args = (-2.0, 1.0, -1.0, 1.0, image, m["iters"])
    return {m["name"]: timed(m["name"], {
        "numba": (lambda: one(*args), image),
        "numba_parallel": (lambda: par(*args), image),
    }, lambda name, got: check_equal(name, got, expected), repeat)}


def escape_rows(refs, repeat):
    m = refs.manifest["escape"]
    re, im = refs.load("escape.re", np.float32), refs.load("escape.im", np.float32)
    expected = refs.load("escape.expected", np.int32)

    def escape(re, im, max_iters):
        c = complex(re, im)
        z = np.complex64(0)
        for i in range(max_iters):
            z = z * z + c
            if z.real * z.real + z.imag * z.imag >= 4:
                return i
        return max_iters

    signature = ["int32(float32, float32, int32)"]
    one = nb.vectorize(signature)(escape)
    par = nb.vectorize(signature, target="parallel")(escape)
    out = fresh(np.zeros_like(expected))
    iters = np.int32(m["iters"])
    return {m["name"]: timed(m["name"], {
        "numba": (lambda: one(re, im, iters, out=out), out),
        "numba_parallel": (lambda: par(re, im, iters, out=out), out),
    }, lambda name, got: check_equal(name, got, expected), repeat)}


def collatz_rows(refs, repeat):
    m = refs.manifest["collatz"]
    values = fresh(np.arange(1, m["n"] + 1, dtype=np.int64))
    expected = refs.load("collatz.expected", np.int64)

    def collatz(n):
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        return steps

    one = nb.vectorize(["int64(int64)"])(collatz)
    par = nb.vectorize(["int64(int64)"], target="parallel")(collatz)
    out = fresh(np.zeros_like(expected))
    return {m["name"]: timed(m["name"], {
        "numba": (lambda: one(values, out=out), out),
        "numba_parallel": (lambda: par(values, out=out), out),
    }, lambda name, got: check_equal(name, got, expected), repeat)}


def das_rows(refs, repeat):
    m = refs.manifest["das"]
    data = refs.load("das.data", np.int64)
    expected = refs.load("das.expected", np.float64).reshape(m["height"], m["width"])

    # examples/das.kern's `** 0.5` is a square root (kjit lowers it to sqrt).
    def das(out, data):
        for i in nb.prange(out.shape[1]):
            for j in range(out.shape[0]):
                acc = 0.0
                for k in range(128):
                    for n in range(128):
                        order = int(((math.sqrt(i * i + (j - k * 6) * (j - k * 6))
                                      + math.sqrt(i * i + (j - n * 6) * (j - n * 6))) * 0.05)
                                    / 1.54 * 30)
                        if order < 2000:
                            acc += data[k * 2000 + order]
                out[j, i] = acc

    one, par = nb.njit(das), nb.njit(parallel=True)(das)
    out = np.zeros_like(expected)
    return {m["name"]: timed(m["name"], {
        "numba": (lambda: one(out, data), out),
        "numba_parallel": (lambda: par(out, data), out),
    }, lambda name, got: check_equal(name, got, expected), repeat)}


def block_sum_rows(refs, repeat):
    m = refs.manifest["block_sum"]
    x = refs.load("block_sum.x", np.float32)
    expected = refs.load("block_sum.expected", np.float32)
    sums_f64, abs_f64 = refs.load("block_sum.f64", np.float64), refs.load("block_sum.abs", np.float64)

    # The kernel's tree, one block at a time (Numba has no block barrier on cpu).
    def block_sum(x, sums):
        for b in nb.prange(sums.shape[0]):
            tile = np.zeros(256, np.float32)
            for t in range(256):
                if b * 256 + t < x.shape[0]:
                    tile[t] = x[b * 256 + t]
            half = 128
            while half > 0:
                for t in range(half):
                    tile[t] += tile[t + half]
                half //= 2
            sums[b] = tile[0]

    def check(name, got):
        error = np.abs(got.astype(np.float64) - sums_f64)
        if not np.all(error <= 1e-5 * abs_f64 + 1e-30):
            raise SystemExit(f"bench_simd.py: {name}: a block sum is not within 1e-5 of float64's")
        if not np.array_equal(got.view(np.uint32), expected.view(np.uint32)):
            raise SystemExit(f"bench_simd.py: {name}: block sums not the bits of the C tree")

    one, par = nb.njit(block_sum), nb.njit(parallel=True)(block_sum)
    sums = np.zeros_like(expected)
    return {m["name"]: timed(m["name"], {
        "numba": (lambda: one(x, sums), sums),
        "numba_parallel": (lambda: par(x, sums), sums),
    }, check, repeat)}


def main():
    refs = Refs(sys.argv[1])
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    results = {}
    if nb is not None:
        for key, rows in (("mandel", mandel_rows), ("escape", escape_rows), ("das", das_rows),
                          ("collatz", collatz_rows), ("block_sum", block_sum_rows)):
            if key in refs.manifest:  # bench_simd ran it (KJIT_BENCH_ONLY, --only)
                results.update(rows(refs, repeat))
    json.dump(results, sys.stdout)
    print()


if __name__ == "__main__":
    main()
