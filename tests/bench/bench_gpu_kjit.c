/*
 * bench_gpu_kjit.c: kjit's side of the GPU benchmark, through kjit.h alone.
 *
 * The same workloads as bench_gpu_cuda.cu, written in .kern, on device arrays
 * (no transfers), timed with kjit events on one stream: the median of 20
 * calls after 3 warm-ups.  Vectorized calls use the launch shape the runtime
 * chooses; kernels use the same grid and block as the CUDA C version.  Each
 * result is checked against a float64 value computed here on a few elements,
 * so a fast wrong kernel cannot enter the table.
 * Prints "<name> <ms>" lines, as bench_gpu_cuda.cu does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

static kjit_context *context;

static void check(kjit_status status, const char *what)
{
    if (status != KJIT_OK) {
        fprintf(stderr, "bench_gpu_kjit: %s: %s: %s\n", what, kjit_status_name(status),
                kjit_last_error(context));
        exit(1);
    }
}

static const char source[] =
    "@vectorize fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@vectorize fn vsin(x: f64) -> f64 { return sin(x); }\n"
    "@vectorize fn vexp(x: f32) -> f32 { return exp(x); }\n"
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

/* One timed call: a vectorized call or a launch, on `stream`. */
typedef struct Job {
    kjit_function *function;
    kjit_arg args[8];
    int nargs;
    kjit_array *out;          /* vectorized */
    uint32_t grid[3], block[3]; /* kernels */
} Job;

static kjit_stream *stream;

static void run_job(const Job *job)
{
    if (job->out)
        check(kjit_call_async(job->function, job->args, job->nargs, job->out, stream), "call");
    else
        check(kjit_launch(job->function, job->grid, job->block, job->args, job->nargs, stream),
              "launch");
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(const Job *job)
{
    for (int i = 0; i < 3; i++)
        run_job(job);
    check(kjit_stream_synchronize(stream), "warm-up");
    double times[20];
    for (int i = 0; i < 20; i++) {
        kjit_event *start, *end;
        check(kjit_event_record(context, stream, &start), "event");
        run_job(job);
        check(kjit_event_record(context, stream, &end), "event");
        check(kjit_event_elapsed(start, end, &times[i]), "elapsed");
        kjit_event_destroy(start);
        kjit_event_destroy(end);
    }
    qsort(times, 20, sizeof times[0], compare_doubles);
    return (times[9] + times[10]) / 2;
}

static kjit_array device_array(kjit_dtype dtype, int ndim, const int64_t *shape)
{
    kjit_array array;
    check(kjit_device_alloc(context, dtype, ndim, shape, &array), "device alloc");
    return array;
}

/* A device array of random values in [lo, hi), and its host copy. */
static kjit_array device_random(kjit_dtype dtype, int64_t n, double lo, double hi, void **host)
{
    size_t size = kjit_dtype_size(dtype);
    char *data = malloc((size_t)n * size);
    for (int64_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * (rand() / (double)RAND_MAX);
        if (dtype == KJIT_F32)
            ((float *)data)[i] = (float)v;
        else if (dtype == KJIT_F64)
            ((double *)data)[i] = v;
        else
            ((int64_t *)data)[i] = (int64_t)v;
    }
    kjit_array host_view = kjit_array_make(data, dtype, 1, &n);
    kjit_array array = device_array(dtype, 1, &n);
    check(kjit_copy(context, &array, &host_view, NULL), "copy in");
    *host = data;
    return array;
}

static void *to_host(kjit_array *array)
{
    int64_t n = kjit_array_size(array);
    void *data = malloc((size_t)n * kjit_dtype_size(array->dtype));
    kjit_array host_view = kjit_array_make(data, array->dtype, array->ndim, array->shape);
    check(kjit_copy(context, &host_view, array, NULL), "copy out");
    return data;
}

static void verify(const char *name, double got, double want, double tolerance)
{
    if (!(fabs(got - want) <= tolerance * (1 + fabs(want)))) {
        fprintf(stderr, "bench_gpu_kjit: %s is wrong: got %.17g, want %.17g\n", name, got, want);
        exit(1);
    }
}

static kjit_function *function(kjit_module *module, const char *name)
{
    kjit_function *f;
    check(kjit_module_function(module, name, &f), name);
    return f;
}

int main(void)
{
    srand(1);
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    check(kjit_context_create(&options, &context), "context");
    kjit_module *module;
    check(kjit_compile_string(context, "bench.kern", source, &module), "compile");
    check(kjit_stream_create(context, &stream), "stream");

    const int64_t big = 100000000;
    void *ha, *hb;
    kjit_array a = device_random(KJIT_F32, big, -1, 1, &ha);
    kjit_array b = device_random(KJIT_F32, big, -1, 1, &hb);
    kjit_array c = device_array(KJIT_F32, 1, &big);

    int64_t sizes[2] = {big, 1000000};
    for (int s = 0; s < 2; s++) {
        kjit_array av = a, bv = b, cv = c;
        av.shape[0] = bv.shape[0] = cv.shape[0] = sizes[s];
        Job job = {function(module, "add"), {kjit_arg_array(&av), kjit_arg_array(&bv)}, 2, &cv};
        double ms = median_ms(&job);
        float *hc = to_host(&c);
        verify("add", hc[sizes[s] - 1], (double)((float *)ha)[sizes[s] - 1] +
                                            ((float *)hb)[sizes[s] - 1], 1e-6);
        free(hc);
        printf("add_f32_%s %.4f\n", s == 0 ? "1e8" : "1e6", ms);
    }
    {
        void *hx;
        kjit_array x = device_random(KJIT_F64, big, -10, 10, &hx);
        kjit_array y = device_array(KJIT_F64, 1, &big);
        Job job = {function(module, "vsin"), {kjit_arg_array(&x)}, 1, &y};
        double ms = median_ms(&job);
        double *hy = to_host(&y);
        for (int64_t i = 0; i < big; i += big / 7)
            verify("sin", hy[i], sin(((double *)hx)[i]), 1e-15);
        free(hy), free(hx);
        kjit_device_free(context, &x);
        kjit_device_free(context, &y);
        printf("sin_f64_1e8 %.4f\n", ms);
    }
    {
        kjit_array x = a, y = c;
        x.shape[0] = y.shape[0] = 10000000;
        Job job = {function(module, "vexp"), {kjit_arg_array(&x)}, 1, &y};
        double ms = median_ms(&job);
        float *hy = to_host(&c);
        for (int64_t i = 0; i < 10000000; i += 1000003)
            verify("exp", hy[i], exp(((float *)ha)[i]), 1e-6);
        free(hy);
        printf("exp_f32_1e7 %.4f\n", ms);
    }
    for (int big_image = 0; big_image < 2; big_image++) {
        int64_t width = big_image ? 8192 : 1536, height = big_image ? 8192 : 1024;
        int iters = big_image ? 256 : 20;
        int64_t shape[2] = {height, width};
        kjit_array image = device_array(KJIT_U8, 2, shape);
        Job job = {function(module, "mandel_kernel"),
                   {kjit_arg_f64(-2.0), kjit_arg_f64(1.0), kjit_arg_f64(-1.0), kjit_arg_f64(1.0),
                    kjit_arg_array(&image), kjit_arg_i32(iters)},
                   6, NULL, {(uint32_t)(width + 31) / 32, (uint32_t)(height + 7) / 8, 1},
                   {32, 8, 1}};
        double ms = median_ms(&job);
        uint8_t *hi = to_host(&image);
        /* The origin is inside the set; the far corner escapes at once. */
        verify("mandelbrot (inside)", hi[(height / 2) * width + width * 2 / 3], (uint8_t)iters, 0);
        verify("mandelbrot (outside)", hi[0], 0, 0);
        free(hi);
        kjit_device_free(context, &image);
        printf("mandel_%dx%dx%d %.4f\n", (int)width, (int)height, iters, ms);
    }
    {
        int64_t shape[2] = {1000, 1000};
        kjit_array out = device_array(KJIT_F64, 2, shape);
        Job job = {function(module, "lla_mesh"),
                   {kjit_arg_f64(-45.0), kjit_arg_f64(-90.0), kjit_arg_f64(0.09),
                    kjit_arg_f64(0.18), kjit_arg_f64(30.0), kjit_arg_f64(60.0),
                    kjit_arg_f64(6371.0), kjit_arg_array(&out)},
                   8, NULL, {(1000 + 31) / 32, (1000 + 7) / 8, 1}, {32, 8, 1}};
        double ms = median_ms(&job);
        double *ho = to_host(&out);
        double lat1 = -45.0 + 999 * 0.09, lon1 = -90.0 + 500 * 0.18;
        double sa = sin(0.008726645 * (30.0 - lat1)), so = sin(0.008726645 * (60.0 - lon1));
        double av = sa * sa + cos(0.01745329 * lat1) * cos(0.01745329 * 30.0) * so * so;
        verify("lla", ho[999 * 1000 + 500], atan2(av, 1 - av) * 6371.0, 1e-12);
        free(ho);
        kjit_device_free(context, &out);
        printf("lla_1000x1000 %.4f\n", ms);
    }
    {
        int64_t shape[2] = {762, 1200};
        kjit_array out = device_array(KJIT_F64, 2, shape);
        void *hd;
        kjit_array data = device_random(KJIT_I64, 128 * 2000, 0, 100, &hd);
        Job job = {function(module, "das"), {kjit_arg_array(&out), kjit_arg_array(&data)}, 2,
                   NULL, {1200, 1, 1}, {762, 1, 1}};
        double ms = median_ms(&job);
        double *ho = to_host(&out);
        int64_t i = 700, j = 300;
        double acc = 0;
        for (int64_t k = 0; k < 128; k++)
            for (int64_t n = 0; n < 128; n++) {
                int64_t order = (int64_t)((sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                           sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                          0.05 / 1.54 * 30);
                if (order < 2000)
                    acc += (double)((int64_t *)hd)[k * 2000 + order];
            }
        verify("das", ho[j * 1200 + i], acc, 1e-3);
        free(ho), free(hd);
        printf("das_1200x762 %.4f\n", ms);
    }
    kjit_stream_destroy(stream);
    kjit_module_free(module);
    kjit_context_destroy(context);
    free(ha), free(hb);
    return 0;
}
