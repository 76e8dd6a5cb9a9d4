/*
 * reduce_rows.cu: the run time of examples/reduce.kern's @reduce forms on the
 * GPU, for tests/gpu/reduce_forms.sh (issue 25: the WARPS form's compile
 * cost, before and after): a sum of 1e8 f32 and of 1e8 f64, the fused dot of
 * 1e8 f32, and the sums of a 10000 x 10000 f32 array along axis 1 (the WARPS
 * form, one output a row, whose last block is 784 of 10000 elements) and
 * along axis 0 (the COLUMNS form), each on device arrays, the result checked
 * against float64 sums made here by plain kernels.  The variant of the forms
 * is the environment's (KJIT_REDUCE_WARPS_MAIN=1: main's), read when kjit
 * lifts them; the script runs this once a variant and round.
 *
 *   reduce_rows KERN    prints "<row> <median ms> <min ms> <hash>" a row:
 *                       20 timed calls after 3 untimed (CUDA events around
 *                       each kjit_reduce), and an FNV-1a hash of the
 *                       result's bytes, which two variants of the same
 *                       operations must share; exits 1 on a wrong result.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "kjit.h"

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "reduce_rows: %s: %s\n", #call, cudaGetErrorString(e_));         \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static kjit_context *context;

static void check(kjit_status status, const char *what)
{
    if (status != KJIT_OK) {
        fprintf(stderr, "reduce_rows: %s: %s: %s\n", what, kjit_status_name(status),
                kjit_last_error(context));
        exit(1);
    }
}

/* Values in [-1, 1) from a hash of the index: the same data in every run. */
template <typename T> __global__ void fill(T *x, long n, uint32_t seed)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
        h ^= h >> 29, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 32;
        x[i] = (T)((double)(h >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    }
}

/* out[r] = the float64 sum of row r of x (rows x cols, C order) of a * b
 * (b NULL: of a), and abs[r] that of the absolute values; or of column r
 * when `columns`. */
template <typename T>
__global__ void sums(const T *a, const T *b, long rows, long cols, bool columns, double *out,
                     double *abs_out)
{
    long lines = columns ? cols : rows, length = columns ? rows : cols;
    for (long r = blockIdx.x * (long)blockDim.x + threadIdx.x; r < lines; r += (long)gridDim.x * blockDim.x) {
        double s = 0, s_abs = 0;
        for (long k = 0; k < length; k++) {
            long at = columns ? k * cols + r : r * cols + k;
            double v = b ? (double)a[at] * (double)b[at] : (double)a[at];
            s += v, s_abs += fabs(v);
        }
        out[r] = s, abs_out[r] = s_abs;
    }
}

static kjit_array view(void *data, kjit_dtype dtype, int ndim, const int64_t *shape)
{
    kjit_array array = kjit_array_make(data, dtype, ndim, shape);
    array.memory = KJIT_MEMORY_DEVICE;
    return array;
}

/* The float64 sums of `lines` lines (see `sums`), on the host. */
template <typename T>
static void reference(const T *a, const T *b, long rows, long cols, bool columns,
                      std::vector<double> &want, std::vector<double> &want_abs)
{
    long lines = columns ? cols : rows;
    double *d;
    CHECK(cudaMalloc(&d, 2 * lines * sizeof(double)));
    sums<T><<<(lines + 127) / 128, 128>>>(a, b, rows, cols, columns, d, d + lines);
    CHECK(cudaGetLastError());
    want.resize(lines), want_abs.resize(lines);
    CHECK(cudaMemcpy(want.data(), d, lines * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(want_abs.data(), d + lines, lines * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d));
}

/* The float64 sum of all of a (times b) as one: its 10000 rows' sums added
 * here (a single thread's loop over 1e8 elements would take seconds). */
template <typename T>
static void reference_total(const T *a, const T *b, long side, std::vector<double> &want,
                            std::vector<double> &want_abs)
{
    std::vector<double> lines, lines_abs;
    reference<T>(a, b, side, side, false, lines, lines_abs);
    double s = 0, s_abs = 0;
    for (size_t i = 0; i < lines.size(); i++)
        s += lines[i], s_abs += lines_abs[i];
    want.assign(1, s), want_abs.assign(1, s_abs);
}

/* One row: time kjit_reduce(function, args, axis) into out (n outputs of T),
 * check each output against the float64 sums, print the line. */
template <typename T>
static bool row(const char *name, kjit_function *function, std::vector<kjit_arg> args, int axis,
                kjit_array *out, T *out_data, const std::vector<double> &want,
                const std::vector<double> &want_abs)
{
    auto call = [&] {
        check(kjit_reduce(function, args.data(), (int)args.size(), axis < 0 ? NULL : &axis,
                          axis < 0 ? 0 : 1, NULL, out, NULL),
              name);
    };
    cudaEvent_t start, end;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&end));
    for (int i = 0; i < 3; i++)
        call();
    CHECK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int i = 0; i < 20; i++) {
        CHECK(cudaEventRecord(start));
        call();
        CHECK(cudaEventRecord(end));
        CHECK(cudaEventSynchronize(end));
        float t;
        CHECK(cudaEventElapsedTime(&t, start, end));
        ms.push_back(t);
    }
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(end));
    std::sort(ms.begin(), ms.end());
    size_t n = want.size();
    std::vector<T> got(n);
    CHECK(cudaMemcpy(got.data(), out_data, n * sizeof(T), cudaMemcpyDeviceToHost));
    uint64_t hash = 1469598103934665603ull;
    const unsigned char *bytes = (const unsigned char *)got.data();
    for (size_t i = 0; i < n * sizeof(T); i++)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    bool ok = true;
    /* a tree sum's error: well under 1e-5 of the sum of magnitudes in f32 */
    double tolerance = sizeof(T) == 4 ? 1e-5 : 1e-12;
    for (size_t i = 0; i < n && ok; i++)
        if (!(fabs((double)got[i] - want[i]) <= tolerance * want_abs[i] + 1e-30)) {
            fprintf(stderr, "reduce_rows: %s: output %zu is %.9g, want %.9g\n", name, i,
                    (double)got[i], want[i]);
            ok = false;
        }
    printf("%s %.4f %.4f %016llx%s\n", name, (ms[9] + ms[10]) / 2, ms[0], (unsigned long long)hash,
           ok ? "" : " WRONG");
    fflush(stdout);
    return ok;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "examples/reduce.kern";
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    check(kjit_context_create(&options, &context), "context");
    kjit_module *module;
    check(kjit_compile_file(context, path, &module), path);
    kjit_function *vsum, *dot;
    check(kjit_module_function(module, "vsum", &vsum), "vsum");
    check(kjit_module_function(module, "dot", &dot), "dot");

    const long big = 100000000, side = 10000;
    float *a, *b, *sum_f32;
    double *x, *sum_f64;
    CHECK(cudaMalloc(&a, big * sizeof(float)));
    CHECK(cudaMalloc(&b, big * sizeof(float)));
    CHECK(cudaMalloc(&x, big * sizeof(double)));
    CHECK(cudaMalloc(&sum_f32, side * sizeof(float)));
    CHECK(cudaMalloc(&sum_f64, sizeof(double)));
    fill<float><<<1024, 256>>>(a, big, 1);
    fill<float><<<1024, 256>>>(b, big, 2);
    fill<double><<<1024, 256>>>(x, big, 3);
    CHECK(cudaDeviceSynchronize());

    int64_t shape[1] = {big}, square[2] = {side, side}, outs[1] = {side};
    static kjit_array av, bv, xv, mv, s0, s1, d0;
    av = view(a, KJIT_F32, 1, shape), bv = view(b, KJIT_F32, 1, shape);
    xv = view(x, KJIT_F64, 1, shape), mv = view(a, KJIT_F32, 2, square);
    s0 = view(sum_f32, KJIT_F32, 0, NULL), s1 = view(sum_f32, KJIT_F32, 1, outs);
    d0 = view(sum_f64, KJIT_F64, 0, NULL);

    std::vector<double> want, want_abs;
    bool ok = true;
    reference_total<float>(a, NULL, side, want, want_abs);
    ok &= row<float>("sum_f32_1e8", vsum, {kjit_arg_array(&av)}, -1, &s0, sum_f32, want, want_abs);
    reference_total<double>(x, NULL, side, want, want_abs);
    ok &= row<double>("sum_f64_1e8", vsum, {kjit_arg_array(&xv)}, -1, &d0, sum_f64, want, want_abs);
    reference_total<float>(a, b, side, want, want_abs);
    ok &= row<float>("dot_f32_1e8", dot, {kjit_arg_array(&av), kjit_arg_array(&bv)}, -1, &s0,
                     sum_f32, want, want_abs);
    reference<float>(a, NULL, side, side, false, want, want_abs);
    ok &= row<float>("sum_axis1_10000x10000", vsum, {kjit_arg_array(&mv)}, 1, &s1, sum_f32, want,
                     want_abs);
    reference<float>(a, NULL, side, side, true, want, want_abs);
    ok &= row<float>("sum_axis0_10000x10000", vsum, {kjit_arg_array(&mv)}, 0, &s1, sum_f32, want,
                     want_abs);

    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(x));
    CHECK(cudaFree(sum_f32));
    CHECK(cudaFree(sum_f64));
    kjit_module_free(module);
    kjit_context_destroy(context);
    return ok ? 0 : 1;
}
