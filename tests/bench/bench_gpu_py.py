"""The Numba (numba-cuda) and CuPy side of the GPU benchmark.

The seed workloads as a Numba user writes them (@vectorize(target='cuda') for
the elementwise rows, @cuda.jit kernels with the same grid and block as the
CUDA C version for the others) and CuPy's ufuncs for the elementwise rows, on
device arrays, timed with CUDA events: the median of 20 calls after 3 warm-ups.
Prints "<name> <library> <ms>" lines; a library that cannot be imported or
fails prints nothing for its rows (the table shows "-").

    python3 bench_gpu_py.py [cupy] [numba]     (default: both)

bench_gpu.sh runs the two in separate processes, since the image's Numba may
need an older NumPy than the one CuPy is installed with.
"""
import math
import statistics
import sys

import numpy as np

REPEAT = 20


def median_ms(fn, record, elapsed):
    for _ in range(3):
        fn()
    times = []
    for _ in range(REPEAT):
        start, end = record(), None
        fn()
        end = record()
        times.append(elapsed(start, end))
    return statistics.median(times)


def emit(name, library, ms):
    print(f"{name} {library} {ms:.4f}", flush=True)


rng = np.random.default_rng(1)
BIG = 100_000_000


def bench_cupy():
    import cupy as cp

    def record():
        e = cp.cuda.Event()
        e.record()
        return e

    def elapsed(s, e):
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e)

    a = cp.asarray(rng.random(BIG, dtype=np.float32))
    b = cp.asarray(rng.random(BIG, dtype=np.float32))
    c = cp.empty(BIG, cp.float32)
    emit("add_f32_1e8", "cupy", median_ms(lambda: cp.add(a, b, out=c), record, elapsed))
    a6, b6, c6 = a[:1_000_000], b[:1_000_000], c[:1_000_000]
    emit("add_f32_1e6", "cupy", median_ms(lambda: cp.add(a6, b6, out=c6), record, elapsed))
    x = cp.asarray(rng.random(BIG) * 20 - 10)
    y = cp.empty(BIG, cp.float64)
    emit("sin_f64_1e8", "cupy", median_ms(lambda: cp.sin(x, out=y), record, elapsed))
    del x, y
    a7, c7 = a[:10_000_000], c[:10_000_000]
    emit("exp_f32_1e7", "cupy", median_ms(lambda: cp.exp(a7, out=c7), record, elapsed))
    # The reductions: cp.sum (CUB underneath), cp.dot (cuBLAS), sums along each axis.
    emit("sum_f32_1e8", "cupy", median_ms(lambda: cp.sum(a), record, elapsed))
    emit("dot_f32_1e8", "cupy", median_ms(lambda: cp.dot(a, b), record, elapsed))
    m = a.reshape(10_000, 10_000)
    emit("sum_axis1_10000x10000", "cupy", median_ms(lambda: cp.sum(m, axis=1), record, elapsed))
    emit("sum_axis0_10000x10000", "cupy", median_ms(lambda: cp.sum(m, axis=0), record, elapsed))
    del a, b, c, m
    # The matrix multiply: cuBLAS's dgemm (FP64 tensor cores on an H100).
    n = 4096
    ma = cp.asarray(rng.random((n, n)))
    mb = cp.asarray(rng.random((n, n)))
    mc = cp.empty((n, n))
    cublas = median_ms(lambda: cp.matmul(ma, mb, out=mc), record, elapsed)
    emit("matmul_f64_4096", "cupy", cublas)
    emit("matmul_tc_f64_4096", "cupy", cublas)  # the same cuBLAS, beside the mma() row


def bench_numba():
    from numba import cuda, vectorize

    def record():
        e = cuda.event()
        e.record()
        return e

    def elapsed(s, e):
        e.synchronize()
        return cuda.event_elapsed_time(s, e)

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add(a, b):
        return a + b

    @vectorize(["float64(float64)"], target="cuda")
    def vsin(x):
        return math.sin(x)

    @vectorize(["float32(float32)"], target="cuda")
    def vexp(x):
        return math.exp(x)

    a = cuda.to_device(rng.random(BIG, dtype=np.float32))
    b = cuda.to_device(rng.random(BIG, dtype=np.float32))
    c = cuda.device_array(BIG, np.float32)
    emit("add_f32_1e8", "numba", median_ms(lambda: add(a, b, out=c), record, elapsed))
    a6, b6, c6 = a[:1_000_000], b[:1_000_000], c[:1_000_000]
    emit("add_f32_1e6", "numba", median_ms(lambda: add(a6, b6, out=c6), record, elapsed))
    x = cuda.to_device(rng.random(BIG) * 20 - 10)
    y = cuda.device_array(BIG, np.float64)
    emit("sin_f64_1e8", "numba", median_ms(lambda: vsin(x, out=y), record, elapsed))
    del x, y
    a7, c7 = a[:10_000_000], c[:10_000_000]
    emit("exp_f32_1e7", "numba", median_ms(lambda: vexp(a7, out=c7), record, elapsed))
    # cuda.reduce: Numba's reduction, into a device array (no copy back).
    sum_reduce = cuda.reduce(lambda x, y: x + y)
    total = cuda.device_array(1, np.float32)
    emit("sum_f32_1e8", "numba", median_ms(lambda: sum_reduce(a, res=total), record, elapsed))
    del a, b, c

    @cuda.jit(device=True)
    def mandel(x, y, max_iters):
        c = complex(x, y)
        z = 0.0j
        for i in range(max_iters):
            z = z * z + c
            if (z.real * z.real + z.imag * z.imag) >= 4:
                return i
        return max_iters

    @cuda.jit
    def mandel_kernel(min_x, max_x, min_y, max_y, image, iters):
        height = image.shape[0]
        width = image.shape[1]
        pixel_size_x = (max_x - min_x) / width
        pixel_size_y = (max_y - min_y) / height
        start_x, start_y = cuda.grid(2)
        grid_x, grid_y = cuda.gridsize(2)
        for x in range(start_x, width, grid_x):
            real = min_x + x * pixel_size_x
            for y in range(start_y, height, grid_y):
                imag = min_y + y * pixel_size_y
                image[y, x] = mandel(real, imag, iters)

    for width, height, iters in ((1536, 1024, 20), (8192, 8192, 256)):
        image = cuda.device_array((height, width), np.uint8)
        grid, block = ((width + 31) // 32, (height + 7) // 8), (32, 8)
        emit(f"mandel_{width}x{height}x{iters}", "numba",
             median_ms(lambda: mandel_kernel[grid, block](-2.0, 1.0, -1.0, 1.0, image, iters),
                       record, elapsed))

    @cuda.jit
    def lla_mesh(lat0, lon0, dlat, dlon, lat2, lon2, s, out):
        i, j = cuda.grid(2)
        if j < out.shape[0] and i < out.shape[1]:
            lat1 = lat0 + j * dlat
            lon1 = lon0 + i * dlon
            a = (math.sin(0.008726645 * (lat2 - lat1)) ** 2
                 + math.cos(0.01745329 * lat1) * math.cos(0.01745329 * lat2)
                 * math.sin(0.008726645 * (lon2 - lon1)) ** 2)
            out[j, i] = math.atan2(a, 1 - a) * s

    out = cuda.device_array((1000, 1000), np.float64)
    grid, block = ((1000 + 31) // 32, (1000 + 7) // 8), (32, 8)
    emit("lla_1000x1000", "numba",
         median_ms(lambda: lla_mesh[grid, block](-45.0, -90.0, 0.09, 0.18, 30.0, 60.0, 6371.0, out),
                   record, elapsed))

    @cuda.jit
    def das(out, data):
        i = cuda.blockIdx.x
        j = cuda.threadIdx.x
        if i < out.shape[1] and j < out.shape[0]:
            acc = 0.0
            for k in range(128):
                for n in range(128):
                    order = int(((i * i + (j - k * 6) ** 2) ** 0.5
                                 + (i * i + (j - n * 6) ** 2) ** 0.5) * 0.05 / 1.54 * 30)
                    if order < 2000:
                        acc += data[k * 2000 + order]
            out[j, i] = acc

    out = cuda.device_array((762, 1200), np.float64)
    data = cuda.to_device(rng.integers(0, 100, 128 * 2000).astype(np.int64))
    emit("das_1200x762", "numba",
         median_ms(lambda: das[1200, 762](out, data), record, elapsed))

    # tests/bench/matmul.kern's register-blocked multiply, as a Numba user
    # writes it: cuda.local.array for the 4x4 block and the row of b.
    from numba import float64

    @cuda.jit
    def matmul(a, b, c):
        at = cuda.shared.array((64, 16), float64)
        bt = cuda.shared.array((16, 64), float64)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row0, col0 = cuda.blockIdx.y * 64, cuda.blockIdx.x * 64
        n, depth = a.shape
        m = b.shape[1]
        acc = cuda.local.array((4, 4), float64)
        bv = cuda.local.array(4, float64)
        for i in range(4):
            for j in range(4):
                acc[i, j] = 0.0
        for k0 in range(0, depth, 16):
            for l in range(4):
                r, s = row0 + ty + 16 * l, col0 + tx + 16 * l
                at[ty + 16 * l, tx] = a[r, k0 + tx] if r < n and k0 + tx < depth else 0.0
                bt[ty, tx + 16 * l] = b[k0 + ty, s] if k0 + ty < depth and s < m else 0.0
            cuda.syncthreads()
            for k in range(16):
                for j in range(4):
                    bv[j] = bt[k, tx + 16 * j]
                for i in range(4):
                    av = at[ty + 16 * i, k]
                    for j in range(4):
                        acc[i, j] += av * bv[j]
            cuda.syncthreads()
        for i in range(4):
            for j in range(4):
                r, s = row0 + ty + 16 * i, col0 + tx + 16 * j
                if r < n and s < m:
                    c[r, s] = acc[i, j]

    n = 4096
    ha, hb = rng.random((n, n)), rng.random((n, n))
    ma, mb = cuda.to_device(ha), cuda.to_device(hb)
    mc = cuda.device_array((n, n), np.float64)
    matmul[(n // 64, n // 64), (16, 16)](ma, mb, mc)
    got = mc.copy_to_host()
    assert np.allclose(got[::997, ::991], (ha @ hb)[::997, ::991], rtol=1e-12, atol=0)
    emit("matmul_f64_4096", "numba",
         median_ms(lambda: matmul[(n // 64, n // 64), (16, 16)](ma, mb, mc), record, elapsed))


def bench_gufunc(library):
    """The gufunc dot over 1e6 rows of 16 f64: Numba's @guvectorize(target='cuda')
    and CuPy's einsum, on device arrays, beside kjit's @guvectorize in bench_gpu.cu."""
    a = rng.random((1_000_000, 16))
    b = rng.random((1_000_000, 16))
    want = np.einsum("ij,ij->i", a, b)
    if library == "numba":
        from numba import cuda, guvectorize

        def record():
            e = cuda.event()
            e.record()
            return e

        def elapsed(s, e):
            e.synchronize()
            return cuda.event_elapsed_time(s, e)

        @guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->()",
                     target="cuda")
        def dot(x, y, res):
            s = 0.0
            for i in range(x.shape[0]):
                s += x[i] * y[i]
            res[0] = s

        da, db = cuda.to_device(a), cuda.to_device(b)
        out = cuda.device_array(1_000_000, np.float64)
        dot(da, db, out)
        assert np.allclose(out.copy_to_host(), want, rtol=1e-12, atol=0)
        emit("gufunc_dot_1e6x16", "numba", median_ms(lambda: dot(da, db, out), record, elapsed))
    else:
        import cupy as cp

        def record():
            e = cp.cuda.Event()
            e.record()
            return e

        def elapsed(s, e):
            e.synchronize()
            return cp.cuda.get_elapsed_time(s, e)

        da, db = cp.asarray(a), cp.asarray(b)
        # cp.einsum takes no out=: each call allocates its result (from
        # CuPy's memory pool, so no cudaMalloc once warm).
        got = cp.einsum("ij,ij->i", da, db)
        assert np.allclose(cp.asnumpy(got), want, rtol=1e-12, atol=0)
        emit("gufunc_dot_1e6x16", "cupy",
             median_ms(lambda: cp.einsum("ij,ij->i", da, db), record, elapsed))


LIBRARIES = {"cupy": bench_cupy, "numba": bench_numba}
for library in sys.argv[1:] or list(LIBRARIES):
    bench = LIBRARIES.get(library)
    if bench is None:
        print(f"bench_gpu_py: unknown library {library!r} (cupy, numba)", file=sys.stderr)
        sys.exit(2)
    try:
        bench()
    except Exception as error:  # a missing or broken library leaves its rows empty
        print(f"bench_gpu_py: {library} failed: {type(error).__name__}: {error}",
              file=sys.stderr)
    try:
        bench_gufunc(library)
    except Exception as error:
        print(f"bench_gpu_py: {library}'s gufunc row failed: {type(error).__name__}: {error}",
              file=sys.stderr)
