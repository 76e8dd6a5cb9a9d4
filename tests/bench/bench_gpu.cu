// bench_gpu.cu: the GPU benchmark, kjit against hand-written CUDA C, side by
// side in one process.
//
// Each seed workload is written twice: as CUDA C the way a CUDA programmer
// would (one thread per element on 256-thread blocks; the 2-D kernels on
// 32 x 8 blocks), built with `nvcc -O3 -arch=sm_90`, and in .kern, run
// through kjit.h on the same device buffers (vectorized calls with the launch
// shape kjit's runtime chooses; kernels on the CUDA C grid and block).  Both
// run on the default stream and are timed alike, with CUDA events around one
// launch: after 3 warm-ups of each, 20 launches of each, taking turns (which
// side goes first alternates), so that the GPU's and the host's clock changes
// reach both sides alike; the medians are printed.  Before timing, each side's
// result is checked against float64 values computed here, so a fast wrong
// kernel cannot enter the table.
//
// Prints "<name> <kjit ms> <CUDA C ms>" per workload and "copy_gbps <GB/s>",
// the device-to-device copy bandwidth (bytes read + written) the elementwise
// rows are held against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "kjit.h"

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                         cudaGetErrorString(err_));                                   \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

static kjit_context *context;

static void check(kjit_status status, const char *what)
{
    if (status != KJIT_OK) {
        std::fprintf(stderr, "bench_gpu: %s: %s: %s\n", what, kjit_status_name(status),
                     kjit_last_error(context));
        std::exit(1);
    }
}

// ------------------------------------------------------------- CUDA C side

__global__ void add_f32(const float *a, const float *b, float *c, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void sin_f64(const double *x, double *y, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = sin(x[i]);
}

__global__ void exp_f32(const float *x, float *y, long n)
{
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = expf(x[i]);
}

__device__ int mandel(double x, double y, int max_iters)
{
    double zr = 0, zi = 0;
    for (int i = 0; i < max_iters; i++) {
        double r = zr * zr - zi * zi + x;
        zi = 2 * zr * zi + y;
        zr = r;
        if (zr * zr + zi * zi >= 4)
            return i;
    }
    return max_iters;
}

__global__ void mandel_kernel(double min_x, double max_x, double min_y, double max_y,
                              unsigned char *image, int height, int width, int iters)
{
    double px = (max_x - min_x) / width, py = (max_y - min_y) / height;
    int sx = blockIdx.x * blockDim.x + threadIdx.x, sy = blockIdx.y * blockDim.y + threadIdx.y;
    int gx = gridDim.x * blockDim.x, gy = gridDim.y * blockDim.y;
    for (int x = sx; x < width; x += gx)
        for (int y = sy; y < height; y += gy)
            image[(long)y * width + x] = (unsigned char)mandel(min_x + x * px, min_y + y * py, iters);
}

__global__ void lla_mesh(double lat0, double lon0, double dlat, double dlon, double lat2,
                         double lon2, double s, double *out, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
    if (j < rows && i < cols) {
        double lat1 = lat0 + j * dlat, lon1 = lon0 + i * dlon;
        double sa = sin(0.008726645 * (lat2 - lat1)), so = sin(0.008726645 * (lon2 - lon1));
        double a = sa * sa + cos(0.01745329 * lat1) * cos(0.01745329 * lat2) * so * so;
        out[(long)j * cols + i] = atan2(a, 1 - a) * s;
    }
}

__global__ void das(double *out, int rows, int cols, const long *data)
{
    long i = blockIdx.x, j = threadIdx.x;
    if (i < cols && j < rows) {
        double acc = 0;
        for (long k = 0; k < 128; k++)
            for (long n = 0; n < 128; n++) {
                long order = (long)((sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                     sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                    0.05 / 1.54 * 30);
                if (order < 2000)
                    acc += (double)data[k * 2000 + order];
            }
        out[j * cols + i] = acc;
    }
}

// The reductions' references: CUB's DeviceReduce (sum, and the dot product
// through a transform iterator), DeviceSegmentedReduce for the row sums, and a
// column-sum kernel (one thread per column: coalesced rows) for axis 0.
struct Product {
    const float *a, *b;
    __host__ __device__ float operator()(long i) const { return a[i] * b[i]; }
};

__global__ void column_sums(const float *x, float *out, long rows, long cols)
{
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float acc = 0;
    for (long i = 0; i < rows; i++)
        acc += x[i * cols + j];
    out[j] = acc;
}

// --------------------------------------------------------------- kjit side

static const char source[] =
    "@vectorize fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@vectorize fn vsin(x: f64) -> f64 { return sin(x); }\n"
    "@vectorize fn vexp(x: f32) -> f32 { return exp(x); }\n"
    "@reduce fn vsum(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@vectorize fn mul(x: f32, y: f32) -> f32 { return x * y; }\n"
    "@reduce(map = mul) fn dot(a: f32, b: f32) -> f32 { return a + b; }\n"
    "fn mandel(x: f64, y: f64, max_iters: i32) -> i32 {\n"
    "    let c = complex(x, y);\n"
    "    let z = complex(0.0, 0.0);\n"
    "    for i in range(max_iters) {\n"
    "        z = z * z + c;\n"
    "        if z.real * z.real + z.imag * z.imag >= 4 { return i; }\n"
    "    }\n"
    "    return max_iters;\n"
    "}\n"
    "@kernel fn mandel_kernel(min_x: f64, max_x: f64, min_y: f64, max_y: f64, image: u8[,],\n"
    "                         iters: i32) {\n"
    "    let height = image.shape[0];\n"
    "    let width = image.shape[1];\n"
    "    let px = (max_x - min_x) / f64(width);\n"
    "    let py = (max_y - min_y) / f64(height);\n"
    "    let sx, sy = grid(2);\n"
    "    let gx, gy = gridsize(2);\n"
    "    for x in range(sx, width, gx) {\n"
    "        for y in range(sy, height, gy) {\n"
    "            image[y, x] = u8(mandel(min_x + f64(x) * px, min_y + f64(y) * py, iters));\n"
    "        }\n"
    "    }\n"
    "}\n"
    "@kernel fn lla_mesh(lat0: f64, lon0: f64, dlat: f64, dlon: f64, lat2: f64, lon2: f64,\n"
    "                    s: f64, out: f64[,]) {\n"
    "    let i, j = grid(2);\n"
    "    if j < out.shape[0] && i < out.shape[1] {\n"
    "        let lat1 = lat0 + f64(j) * dlat;\n"
    "        let lon1 = lon0 + f64(i) * dlon;\n"
    "        let a = sin(0.008726645 * (lat2 - lat1)) ** 2\n"
    "              + cos(0.01745329 * lat1) * cos(0.01745329 * lat2)\n"
    "                * sin(0.008726645 * (lon2 - lon1)) ** 2;\n"
    "        out[j, i] = atan2(a, 1 - a) * s;\n"
    "    }\n"
    "}\n"
    "@kernel fn das(out: f64[,], data: i64[]) {\n"
    "    let i = blockIdx.x;\n"
    "    let j = threadIdx.x;\n"
    "    if i < out.shape[1] && j < out.shape[0] {\n"
    "        let acc = 0.0;\n"
    "        for k in range(128) {\n"
    "            for n in range(128) {\n"
    "                let order = i64(((f64(i*i + (j - k*6)*(j - k*6)) ** 0.5\n"
    "                                + f64(i*i + (j - n*6)*(j - n*6)) ** 0.5) * 0.05) / 1.54 * 30);\n"
    "                if order < 2000 { acc += f64(data[k * 2000 + order]); }\n"
    "            }\n"
    "        }\n"
    "        out[j, i] = acc;\n"
    "    }\n"
    "}\n";

static kjit_module *module;

static kjit_function *function(const char *name)
{
    kjit_function *f;
    check(kjit_module_function(module, name, &f), name);
    return f;
}

// A kjit view of a CUDA C buffer: both sides work on the same memory.
static kjit_array view(void *data, kjit_dtype dtype, int ndim, const int64_t *shape)
{
    kjit_array array = kjit_array_make(data, dtype, ndim, shape);
    array.memory = KJIT_MEMORY_DEVICE;
    return array;
}

// A vectorized call, on the default stream.
static std::function<void()> kjit_call(kjit_function *f, std::vector<kjit_arg> args,
                                       kjit_array *out)
{
    return [=]() mutable {
        check(kjit_call_async(f, args.data(), (int)args.size(), out, NULL), "call");
    };
}

// A kernel launch, on the default stream.
static std::function<void()> kjit_kernel(kjit_function *f, std::vector<kjit_arg> args, dim3 grid,
                                         dim3 block)
{
    return [=]() mutable {
        const uint32_t g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
        check(kjit_launch(f, g, b, args.data(), (int)args.size(), NULL), "launch");
    };
}

// ------------------------------------------------------------------ timing

static double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

static float event_ms(const std::function<void()> &launch, cudaEvent_t start, cudaEvent_t end)
{
    CHECK(cudaEventRecord(start));
    launch();
    CHECK(cudaEventRecord(end));
    CHECK(cudaEventSynchronize(end));
    CHECK(cudaGetLastError());
    float ms;
    CHECK(cudaEventElapsedTime(&ms, start, end));
    return ms;
}

// Prints "<name> <kjit ms> <CUDA C ms>": 20 launches of each, taking turns.
static void compare(const char *name, const std::function<void()> &kjit,
                    const std::function<void()> &cuda)
{
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    for (int i = 0; i < 3; i++) {
        cuda();
        kjit();
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<float> kjit_ms, cuda_ms;
    for (int i = 0; i < 20; i++) {
        bool cuda_first = i % 2 == 0;
        (cuda_first ? cuda_ms : kjit_ms).push_back(event_ms(cuda_first ? cuda : kjit, start, end));
        (cuda_first ? kjit_ms : cuda_ms).push_back(event_ms(cuda_first ? kjit : cuda, start, end));
    }
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(end));
    std::printf("%s %.4f %.4f\n", name, median(kjit_ms), median(cuda_ms));
    std::fflush(stdout);
}

// ---------------------------------------------------------------- checking

template <typename T> static T *device_random(long n, double lo, double hi, std::vector<T> &host)
{
    host.resize(n);
    for (long i = 0; i < n; i++)
        host[i] = (T)(lo + (hi - lo) * (std::rand() / (double)RAND_MAX));
    T *dev;
    CHECK(cudaMalloc(&dev, n * sizeof(T)));
    CHECK(cudaMemcpy(dev, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    return dev;
}

template <typename T> static std::vector<T> to_host(const T *dev, long n)
{
    std::vector<T> host(n);
    CHECK(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

static void verify(const char *side, const char *name, double got, double want, double tolerance)
{
    if (!(std::fabs(got - want) <= tolerance * (1 + std::fabs(want)))) {
        std::fprintf(stderr, "bench_gpu: %s's %s is wrong: got %.17g, want %.17g\n", side, name,
                     got, want);
        std::exit(1);
    }
}

// Runs one side once into cleared output and checks it with `test`.
template <typename T>
static void run_and_verify(const char *side, const std::function<void()> &launch, T *out, long n,
                           const std::function<void(const char *, const std::vector<T> &)> &test)
{
    CHECK(cudaMemset(out, 0, n * sizeof(T)));
    launch();
    CHECK(cudaDeviceSynchronize());
    test(side, to_host(out, n));
}

template <typename T>
static void verify_both(const std::function<void()> &kjit, const std::function<void()> &cuda,
                        T *out, long n,
                        const std::function<void(const char *, const std::vector<T> &)> &test)
{
    run_and_verify<T>("kjit", kjit, out, n, test);
    run_and_verify<T>("CUDA C", cuda, out, n, test);
}

// The two sides' images may differ only in a few boundary pixels, where an
// fma rounds an escape test the other way.
static void compare_images(const std::function<void()> &kjit, const std::function<void()> &cuda,
                           unsigned char *image, long n)
{
    std::vector<unsigned char> first;
    run_and_verify<unsigned char>("kjit", kjit, image, n,
                                  [&](const char *, const std::vector<unsigned char> &v) { first = v; });
    long differ = 0;
    run_and_verify<unsigned char>("CUDA C", cuda, image, n,
                                  [&](const char *, const std::vector<unsigned char> &v) {
        for (long i = 0; i < n; i++)
            differ += v[i] != first[i];
    });
    if (differ > n / 1000) {
        std::fprintf(stderr, "bench_gpu: the Mandelbrot images differ in %ld of %ld pixels\n",
                     differ, n);
        std::exit(1);
    }
}

// -------------------------------------------------------------------- main

// ---------------------------------------------------------- @guvectorize

// The gufunc dot over 1e6 rows of 16 f64: kjit's @guvectorize (a thread per
// row) beside the CUDA C a user writes for it, one thread per row.  All three
// (and Numba's in bench_gpu_py.py) sum in a local variable: a sum kept in
// out[0] stores to memory at every step, since out may alias a or b.
__global__ void dot_rows(const double *a, const double *b, double *out, long rows, int n)
{
    for (long r = blockIdx.x * (long)blockDim.x + threadIdx.x; r < rows;
         r += (long)gridDim.x * blockDim.x) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += a[r * n + i] * b[r * n + i];
        out[r] = s;
    }
}

static void gufunc_rows()
{
    static const char gufunc_source[] =
        "@guvectorize(\"(n),(n)->()\")\n"
        "fn dot(a: f64[], b: f64[], out: f64[]) {\n"
        "    let s = 0.0;\n"
        "    for i in range(len(a)) { s += a[i] * b[i]; }\n"
        "    out[0] = s;\n"
        "}\n";
    kjit_module *gufuncs;
    check(kjit_compile_string(context, "gufunc.kern", gufunc_source, &gufuncs), "compile");
    kjit_function *dot;
    check(kjit_module_function(gufuncs, "dot", &dot), "dot");
    const long rows = 1000000;
    const int n = 16;
    std::vector<double> ha, hb;
    double *a = device_random<double>(rows * n, -1, 1, ha), *b = device_random<double>(rows * n, -1, 1, hb);
    double *out;
    CHECK(cudaMalloc(&out, rows * sizeof(double)));
    int64_t shape[2] = {rows, n}, out_shape[1] = {rows};
    static kjit_array av, bv, ov;
    av = view(a, KJIT_F64, 2, shape), bv = view(b, KJIT_F64, 2, shape);
    ov = view(out, KJIT_F64, 1, out_shape);
    auto kjit = kjit_call(dot, {kjit_arg_array(&av), kjit_arg_array(&bv)}, &ov);
    auto cuda = [=] { dot_rows<<<(rows + 255) / 256, 256>>>(a, b, out, rows, n); };
    verify_both<double>(kjit, cuda, out, rows, [&](const char *side, const std::vector<double> &v) {
        for (long r = 0; r < rows; r += 9973) {
            double want = 0;
            for (int i = 0; i < n; i++)
                want += ha[r * n + i] * hb[r * n + i];
            verify(side, "gufunc dot", v[r], want, 1e-12);
        }
    });
    compare("gufunc_dot_1e6x16", kjit, cuda);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(out));
    kjit_module_free(gufuncs);
}

// ------------------------------------------------------- matrix multiply

// The register-blocked f64 matrix multiply of tests/bench/matmul.kern (issue
// 25): 16 x 16 threads make a 64 x 64 tile of c, each thread 4 x 4 of it (rows
// ty + 16 i, columns tx + 16 j) in registers, over 16-deep tiles of a and b in
// shared memory.  The CUDA C below is the same algorithm as a CUDA programmer
// writes it; CuPy's `@` (cuBLAS, with the FP64 tensor cores) and Numba's
// @cuda.jit of it are in bench_gpu_py.py.
__global__ void matmul_blocked(const double *a, const double *b, double *c, int n, int m, int depth)
{
    __shared__ double at[64][16], bt[16][64];
    int tx = threadIdx.x, ty = threadIdx.y;
    long row0 = (long)blockIdx.y * 64, col0 = (long)blockIdx.x * 64;
    double acc[4][4] = {};
    for (int k0 = 0; k0 < depth; k0 += 16) {
        for (int l = 0; l < 4; l++) {
            long r = row0 + ty + 16 * l, s = col0 + tx + 16 * l;
            at[ty + 16 * l][tx] = r < n && k0 + tx < depth ? a[r * depth + k0 + tx] : 0.0;
            bt[ty][tx + 16 * l] = k0 + ty < depth && s < m ? b[(long)(k0 + ty) * m + s] : 0.0;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; k++) {
            double bv[4];
#pragma unroll
            for (int j = 0; j < 4; j++)
                bv[j] = bt[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                double av = at[ty + 16 * i][k];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = __dadd_rn(acc[i][j], __dmul_rn(av, bv[j])); // no fma, as kjit
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            long r = row0 + ty + 16 * i, s = col0 + tx + 16 * j;
            if (r < n && s < m)
                c[r * m + s] = acc[i][j];
        }
}

static void matmul_rows(const char *bench_dir)
{
    const int n = 4096;
    char path[4096];
    std::snprintf(path, sizeof path, "%s/matmul.kern", bench_dir);
    kjit_module *mm;
    check(kjit_compile_file(context, path, &mm), path);
    kjit_function *matmul;
    check(kjit_module_function(mm, "matmul", &matmul), "matmul");
    std::vector<double> ha, hb;
    double *a = device_random<double>((long)n * n, 0, 1, ha), *b = device_random<double>((long)n * n, 0, 1, hb);
    double *c;
    CHECK(cudaMalloc(&c, (long)n * n * sizeof(double)));
    int64_t shape[2] = {n, n};
    static kjit_array av, bv, cv;
    av = view(a, KJIT_F64, 2, shape), bv = view(b, KJIT_F64, 2, shape), cv = view(c, KJIT_F64, 2, shape);
    dim3 grid(n / 64, n / 64), block(16, 16);
    auto kjit = kjit_kernel(matmul, {kjit_arg_array(&av), kjit_arg_array(&bv), kjit_arg_array(&cv)}, grid, block);
    auto cuda = [=] { matmul_blocked<<<grid, block>>>(a, b, c, n, n, n); };
    // both sum each element over k in order, from 0, without fma: the same bits
    verify_both<double>(kjit, cuda, c, (long)n * n, [&](const char *side, const std::vector<double> &v) {
        for (long e = 0; e < (long)n * n; e += 1000003) {
            long i = e / n, j = e % n;
            double want = 0;
            for (int k = 0; k < n; k++)
                want += ha[i * n + k] * hb[(long)k * n + j];
            verify(side, "matmul", v[e], want, 1e-13);
        }
    });
    compare("matmul_f64_4096", kjit, cuda);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    kjit_module_free(mm);
}

// The tensor-core f64 matrix multiply of tests/bench/matmul_tc.kern (issue
// 25): 256 threads (8 warps) make a 128 x 128 tile of c over 128 x 16 tiles
// of a and 16 x 128 tiles of b in shared memory (rows padded by 4), each warp
// a 64 x 32 piece of it as 8 x 4 mma.sync.m8n8k4 f64 tiles, which kjit issues
// on sm_90 as 4 x 4 m16n8k4 (the tiles 2p and 2p + 1 of a column share its
// b: compiler/backend/ptx_mma.c); the next tiles' elements are loaded into
// registers before the mma of the current ones (rows and columns past the
// edge clamped, k checked in the last tile only).  The same algorithm and
// instructions as the .kern's PTX, by inline asm; CuPy's `@` (cuBLAS) is
// beside it in bench_gpu_py.py.
__device__ __forceinline__ void dmma16(double a0, double a1, double b, double &d0, double &d1,
                                       double &d2, double &d3)
{
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, "
                 "{%6}, {%0, %1, %2, %3};"
                 : "+d"(d0), "+d"(d1), "+d"(d2), "+d"(d3)
                 : "d"(a0), "d"(a1), "d"(b));
}

__global__ void __launch_bounds__(256) matmul_tc(const double *a, const double *b, double *c, int n,
                                                 int m, int depth)
{
    __shared__ double at[128][20], bt[16][132];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int g = lane / 4, t = lane % 4;
    int wm = (warp % 2) * 64, wn = (warp / 2) * 32;
    long row0 = (long)blockIdx.y * 128, col0 = (long)blockIdx.x * 128;
    if (n == 0 || m == 0)
        return;
    double acc[8][4][2] = {};
    // rows and columns past the edge read at the last one (their products
    // land in elements never stored); only a tile that reaches k's end checks
    double na[8], nb[8];
#pragma unroll
    for (int l = 0; l < 8; l++) {
        int e = tid + 256 * l;
        long r = min(row0 + e / 16, (long)n - 1), s = min(col0 + e % 128, (long)m - 1);
        na[l] = e % 16 < depth ? a[r * depth + e % 16] : 0.0;
        nb[l] = e / 128 < depth ? b[(long)(e / 128) * m + s] : 0.0;
    }
    for (int k0 = 0; k0 < depth; k0 += 16) {
#pragma unroll
        for (int l = 0; l < 8; l++) {
            int e = tid + 256 * l;
            at[e / 16][e % 16] = na[l];
            bt[e / 128][e % 128] = nb[l];
        }
        __syncthreads();
        int k1 = k0 + 16;
        if (k1 + 16 <= depth) {
#pragma unroll
            for (int l = 0; l < 8; l++) {
                int e = tid + 256 * l;
                long r = min(row0 + e / 16, (long)n - 1), s = min(col0 + e % 128, (long)m - 1);
                na[l] = a[r * depth + k1 + e % 16];
                nb[l] = b[(long)(k1 + e / 128) * m + s];
            }
        } else {
#pragma unroll
            for (int l = 0; l < 8; l++) {
                int e = tid + 256 * l;
                long r = min(row0 + e / 16, (long)n - 1), s = min(col0 + e % 128, (long)m - 1);
                int k = k1 + e % 16, kb = k1 + e / 128;
                na[l] = k < depth ? a[r * depth + k] : 0.0;
                nb[l] = kb < depth ? b[(long)kb * m + s] : 0.0;
            }
        }
#pragma unroll
        for (int kk = 0; kk < 16; kk += 4) {
            double fa[8], fb[4];
#pragma unroll
            for (int i = 0; i < 8; i++)
                fa[i] = at[wm + 8 * i + g][kk + t];
#pragma unroll
            for (int j = 0; j < 4; j++)
                fb[j] = bt[kk + t][wn + 8 * j + g];
#pragma unroll
            for (int i = 0; i < 8; i += 2)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    dmma16(fa[i], fa[i + 1], fb[j], acc[i][j][0], acc[i][j][1], acc[i + 1][j][0],
                           acc[i + 1][j][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            long r = row0 + wm + 8 * i + g, s = col0 + wn + 8 * j + 2 * t;
            if (r < n && s < m)
                c[r * m + s] = acc[i][j][0];
            if (r < n && s + 1 < m)
                c[r * m + s + 1] = acc[i][j][1];
        }
}

static void matmul_tc_rows(const char *bench_dir)
{
    const int n = 4096;
    char path[4096];
    std::snprintf(path, sizeof path, "%s/matmul_tc.kern", bench_dir);
    kjit_module *mm;
    check(kjit_compile_file(context, path, &mm), path);
    kjit_function *matmul;
    check(kjit_module_function(mm, "matmul_tc", &matmul), "matmul_tc");
    std::vector<double> ha, hb;
    double *a = device_random<double>((long)n * n, 0, 1, ha), *b = device_random<double>((long)n * n, 0, 1, hb);
    double *c;
    CHECK(cudaMalloc(&c, (long)n * n * sizeof(double)));
    int64_t shape[2] = {n, n};
    static kjit_array av, bv, cv;
    av = view(a, KJIT_F64, 2, shape), bv = view(b, KJIT_F64, 2, shape), cv = view(c, KJIT_F64, 2, shape);
    dim3 grid(n / 128, n / 128), block(256);
    auto kjit = kjit_kernel(matmul, {kjit_arg_array(&av), kjit_arg_array(&bv), kjit_arg_array(&cv)}, grid, block);
    auto cuda = [=] { matmul_tc<<<grid, block>>>(a, b, c, n, n, n); };
    // the tensor cores round their own way: against float64 sums, not bits
    verify_both<double>(kjit, cuda, c, (long)n * n, [&](const char *side, const std::vector<double> &v) {
        for (long e = 0; e < (long)n * n; e += 1000003) {
            long i = e / n, j = e % n;
            double want = 0;
            for (int k = 0; k < n; k++)
                want += ha[i * n + k] * hb[(long)k * n + j];
            verify(side, "matmul_tc", v[e], want, 1e-13);
        }
    });
    compare("matmul_tc_f64_4096", kjit, cuda);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    kjit_module_free(mm);
}

int main(int argc, char **argv)
{
    std::srand(1);
    // the folder of tests/bench's .kern files (bench_gpu.sh passes it)
    const char *bench_dir = argc > 1 ? argv[1] : "tests/bench";
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    check(kjit_context_create(&options, &context), "context");
    check(kjit_compile_string(context, "bench.kern", source, &module), "compile");

    const long big = 100000000;
    std::vector<float> ha, hb;
    float *a = device_random<float>(big, -1, 1, ha), *b = device_random<float>(big, -1, 1, hb);
    float *c;
    CHECK(cudaMalloc(&c, big * sizeof(float)));
    {
        cudaEvent_t start, end;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&end));
        std::function<void()> copy = [&] {
            CHECK(cudaMemcpyAsync(c, a, big * sizeof(float), cudaMemcpyDeviceToDevice));
        };
        std::vector<float> ms;
        for (int i = 0; i < 23; i++)
            ms.push_back(event_ms(copy, start, end));
        ms.erase(ms.begin(), ms.begin() + 3);
        std::printf("copy_gbps %.1f\n", 2.0 * big * sizeof(float) / median(ms) / 1e6);
    }

    for (long n : {big, 1000000L}) {
        int64_t shape[1] = {n};
        static kjit_array av, bv, cv;
        av = view(a, KJIT_F32, 1, shape), bv = view(b, KJIT_F32, 1, shape);
        cv = view(c, KJIT_F32, 1, shape);
        auto kjit = kjit_call(function("add"), {kjit_arg_array(&av), kjit_arg_array(&bv)}, &cv);
        auto cuda = [=] { add_f32<<<(n + 255) / 256, 256>>>(a, b, c, n); };
        verify_both<float>(kjit, cuda, c, n, [&](const char *side, const std::vector<float> &y) {
            for (long i = 0; i < n; i += n / 97)
                verify(side, "add", y[i], (double)ha[i] + hb[i], 1e-6);
        });
        compare(n == big ? "add_f32_1e8" : "add_f32_1e6", kjit, cuda);
    }
    {
        // Reductions of 1e8 f32: the sum, the fused dot, and the sums along
        // each axis of the same buffer as a 10000 x 10000 array.
        float *sum;
        CHECK(cudaMalloc(&sum, 10000 * sizeof(float)));
        int64_t shape[1] = {big}, square[2] = {10000, 10000}, cols[1] = {10000};
        static kjit_array av, bv, mv, sv0, sv1;
        av = view(a, KJIT_F32, 1, shape), bv = view(b, KJIT_F32, 1, shape);
        mv = view(a, KJIT_F32, 2, square);
        sv0 = view(sum, KJIT_F32, 0, NULL), sv1 = view(sum, KJIT_F32, 1, cols);
        void *temp = NULL;
        size_t temp_bytes = 0, more = 0;
        cub::DeviceReduce::Sum(NULL, temp_bytes, a, sum, big);
        // The fused dot for CUB: products made on the fly (CUDA 13's CUB has
        // no iterators of its own; Thrust's serve).
        auto products = thrust::make_transform_iterator(thrust::counting_iterator<long>(0),
                                                        Product{a, b});
        cub::DeviceReduce::Sum(NULL, more, products, sum, big);
        temp_bytes = std::max(temp_bytes, more);
        std::vector<int> offsets(10001);
        for (int i = 0; i <= 10000; i++)
            offsets[i] = i * 10000;
        int *d_offsets;
        CHECK(cudaMalloc(&d_offsets, offsets.size() * sizeof(int)));
        CHECK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * sizeof(int),
                         cudaMemcpyHostToDevice));
        cub::DeviceSegmentedReduce::Sum(NULL, more, a, sum, 10000, d_offsets, d_offsets + 1);
        temp_bytes = std::max(temp_bytes, more);
        CHECK(cudaMalloc(&temp, temp_bytes));
        auto reduce = [](kjit_function *f, std::vector<kjit_arg> args, int axis, kjit_array *out) {
            return [=]() mutable {
                check(kjit_reduce(f, args.data(), (int)args.size(), axis < 0 ? NULL : &axis,
                                  axis < 0 ? 0 : 1, NULL, out, NULL), "reduce");
            };
        };
        double want_sum = 0, want_dot = 0;
        for (long i = 0; i < big; i++)
            want_sum += ha[i], want_dot += (double)ha[i] * hb[i];
        auto check_sum = [&](double want, const char *what) {
            return [=](const char *side, const std::vector<float> &v) {
                verify(side, what, v[0], want, 1e-3);
            };
        };
        std::function<void()> kjit = reduce(function("vsum"), {kjit_arg_array(&av)}, -1, &sv0);
        std::function<void()> cuda = [=] {
            size_t t = temp_bytes;
            cub::DeviceReduce::Sum(temp, t, a, sum, big);
        };
        verify_both<float>(kjit, cuda, sum, 1, check_sum(want_sum, "sum"));
        compare("sum_f32_1e8", kjit, cuda);
        kjit = reduce(function("dot"), {kjit_arg_array(&av), kjit_arg_array(&bv)}, -1, &sv0);
        cuda = [=] { size_t t = temp_bytes; cub::DeviceReduce::Sum(temp, t, products, sum, big); };
        verify_both<float>(kjit, cuda, sum, 1, check_sum(want_dot, "dot"));
        compare("dot_f32_1e8", kjit, cuda);
        kjit = reduce(function("vsum"), {kjit_arg_array(&mv)}, 1, &sv1);
        cuda = [=] {
            size_t t = temp_bytes;
            cub::DeviceSegmentedReduce::Sum(temp, t, a, sum, 10000, d_offsets, d_offsets + 1);
        };
        compare("sum_axis1_10000x10000", kjit, cuda);
        kjit = reduce(function("vsum"), {kjit_arg_array(&mv)}, 0, &sv1);
        cuda = [=] { column_sums<<<(10000 + 255) / 256, 256>>>(a, sum, 10000, 10000); };
        compare("sum_axis0_10000x10000", kjit, cuda);
        CHECK(cudaFree(temp));
        CHECK(cudaFree(d_offsets));
        CHECK(cudaFree(sum));
    }
    {
        std::vector<double> hx;
        double *x = device_random<double>(big, -10, 10, hx), *y;
        CHECK(cudaMalloc(&y, big * sizeof(double)));
        int64_t shape[1] = {big};
        static kjit_array xv, yv;
        xv = view(x, KJIT_F64, 1, shape), yv = view(y, KJIT_F64, 1, shape);
        auto kjit = kjit_call(function("vsin"), {kjit_arg_array(&xv)}, &yv);
        auto cuda = [=] { sin_f64<<<(big + 255) / 256, 256>>>(x, y, big); };
        verify_both<double>(kjit, cuda, y, big, [&](const char *side, const std::vector<double> &v) {
            for (long i = 0; i < big; i += big / 97)
                verify(side, "sin", v[i], std::sin(hx[i]), 1e-15);
        });
        compare("sin_f64_1e8", kjit, cuda);
        CHECK(cudaFree(x));
        CHECK(cudaFree(y));
    }
    {
        const long n = 10000000;
        int64_t shape[1] = {n};
        static kjit_array xv, yv;
        xv = view(a, KJIT_F32, 1, shape), yv = view(c, KJIT_F32, 1, shape);
        auto kjit = kjit_call(function("vexp"), {kjit_arg_array(&xv)}, &yv);
        auto cuda = [=] { exp_f32<<<(n + 255) / 256, 256>>>(a, c, n); };
        verify_both<float>(kjit, cuda, c, n, [&](const char *side, const std::vector<float> &v) {
            for (long i = 0; i < n; i += n / 97)
                verify(side, "exp", v[i], std::exp((double)ha[i]), 1e-6);
        });
        compare("exp_f32_1e7", kjit, cuda);
    }
    for (int big_image = 0; big_image < 2; big_image++) {
        int width = big_image ? 8192 : 1536, height = big_image ? 8192 : 1024;
        int iters = big_image ? 256 : 20;
        long n = (long)width * height;
        unsigned char *image;
        CHECK(cudaMalloc(&image, n));
        int64_t shape[2] = {height, width};
        static kjit_array iv;
        iv = view(image, KJIT_U8, 2, shape);
        dim3 block(32, 8), grid((width + 31) / 32, (height + 7) / 8);
        auto kjit = kjit_kernel(function("mandel_kernel"),
                                {kjit_arg_f64(-2.0), kjit_arg_f64(1.0), kjit_arg_f64(-1.0),
                                 kjit_arg_f64(1.0), kjit_arg_array(&iv), kjit_arg_i32(iters)},
                                grid, block);
        auto cuda = [=] {
            mandel_kernel<<<grid, block>>>(-2.0, 1.0, -1.0, 1.0, image, height, width, iters);
        };
        verify_both<unsigned char>(kjit, cuda, image, n,
                                   [&](const char *side, const std::vector<unsigned char> &v) {
            // A point inside the set reaches the limit (as u8: 256 wraps to 0);
            // the far corner escapes at once.
            verify(side, "mandelbrot (inside)", v[(long)(height / 2) * width + width * 2 / 3],
                   (unsigned char)iters, 0);
            verify(side, "mandelbrot (outside)", v[0], 0, 0);
        });
        compare_images(kjit, cuda, image, n);
        char name[64];
        std::snprintf(name, sizeof name, "mandel_%dx%dx%d", width, height, iters);
        compare(name, kjit, cuda);
        CHECK(cudaFree(image));
    }
    {
        int rows = 1000, cols = 1000;
        double *out;
        CHECK(cudaMalloc(&out, (long)rows * cols * sizeof(double)));
        int64_t shape[2] = {rows, cols};
        static kjit_array ov;
        ov = view(out, KJIT_F64, 2, shape);
        dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
        auto kjit = kjit_kernel(function("lla_mesh"),
                                {kjit_arg_f64(-45.0), kjit_arg_f64(-90.0), kjit_arg_f64(0.09),
                                 kjit_arg_f64(0.18), kjit_arg_f64(30.0), kjit_arg_f64(60.0),
                                 kjit_arg_f64(6371.0), kjit_arg_array(&ov)},
                                grid, block);
        auto cuda = [=] {
            lla_mesh<<<grid, block>>>(-45.0, -90.0, 0.09, 0.18, 30.0, 60.0, 6371.0, out, rows,
                                      cols);
        };
        verify_both<double>(kjit, cuda, out, (long)rows * cols,
                            [&](const char *side, const std::vector<double> &v) {
            for (int j = 0; j < rows; j += 111)
                for (int i = 0; i < cols; i += 97) {
                    double lat1 = -45.0 + j * 0.09, lon1 = -90.0 + i * 0.18;
                    double sa = std::sin(0.008726645 * (30.0 - lat1));
                    double so = std::sin(0.008726645 * (60.0 - lon1));
                    double av = sa * sa + std::cos(0.01745329 * lat1) *
                                              std::cos(0.01745329 * 30.0) * so * so;
                    verify(side, "lla", v[(long)j * cols + i], std::atan2(av, 1 - av) * 6371.0,
                           1e-12);
                }
        });
        compare("lla_1000x1000", kjit, cuda);
        CHECK(cudaFree(out));
    }
    {
        int rows = 762, cols = 1200;
        double *out;
        CHECK(cudaMalloc(&out, (long)rows * cols * sizeof(double)));
        std::vector<long> hd;
        long *data = device_random<long>(128 * 2000, 0, 100, hd);
        int64_t shape[2] = {rows, cols}, data_shape[1] = {128 * 2000};
        static kjit_array ov, dv;
        ov = view(out, KJIT_F64, 2, shape), dv = view(data, KJIT_I64, 1, data_shape);
        auto kjit = kjit_kernel(function("das"), {kjit_arg_array(&ov), kjit_arg_array(&dv)},
                                dim3(cols), dim3(rows));
        auto cuda = [=] { das<<<cols, rows>>>(out, rows, cols, data); };
        verify_both<double>(kjit, cuda, out, (long)rows * cols,
                            [&](const char *side, const std::vector<double> &v) {
            for (long i : {0L, 700L, 1199L})
                for (long j : {0L, 300L, 761L}) {
                    double acc = 0;
                    for (long k = 0; k < 128; k++)
                        for (long n = 0; n < 128; n++) {
                            long order = (long)((std::sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                                 std::sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                                0.05 / 1.54 * 30);
                            if (order < 2000)
                                acc += (double)hd[k * 2000 + order];
                        }
                    verify(side, "das", v[j * cols + i], acc, 1e-12);
                }
        });
        compare("das_1200x762", kjit, cuda);
        CHECK(cudaFree(out));
        CHECK(cudaFree(data));
    }
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(c));
    gufunc_rows();
    matmul_rows(bench_dir);
    matmul_tc_rows(bench_dir);
    kjit_module_free(module);
    kjit_context_destroy(context);
    return 0;
}
