/*
 * test_cuda.c: the cuda target through the public API, on a GPU.
 *
 * The seed workloads run on cuda and on cpu and are compared with float64
 * references computed here, on fresh random inputs; every vectorized
 * function of the examples (examples/NAME.kern) runs on both targets and must
 * agree; device arrays, streams and events, a kernel fault (named in the
 * error; the context is re-created, or where the driver forbids that every
 * cuda call says so, and the cpu target goes on), an out-of-memory
 * allocation, a kernel's contiguous and strided variants, device functions
 * with the newer atomics (against a C reference), and checked mode (each kind
 * of check, then a correct call on the same GPU) are checked; the warp
 * collectives (a shuffle block sum and scan, votes, every shuffle) must give
 * cpu's bits exactly, syncgrid() a heat equation within rounding of float64
 * (and a clear error for a grid too large to be co-resident), and the launch's
 * dynamic shared memory, 64 KiB included, cpu's results; a kernel that never
 * ends, built cancellable, stops on kjit_context_cancel from another thread
 * and on a time limit (the flag in mapped host memory), the context going
 * on with a correct launch each time.
 *
 * Without a CUDA driver the suite holds no tests and prints one line saying
 * so: nothing here passes without a GPU.  The driver is only dlopen'ed while
 * the suite is built (never cuInit'ed), because Check forks each test and a
 * CUDA context does not survive fork.
 */
#include <check.h>
#include <dlfcn.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kjit.h"

#include "case_device_functions.h"
#include "rng.h"

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;

static void seed_rng(void)
{
    rng_state = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    printf("test_cuda: random seed %llu\n", (unsigned long long)rng_state);
}

static double uniform(double lo, double hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

/* The tests need a working GPU; a driver without one skips visibly. */
static bool gpu_or_skip(const char *test)
{
    char reason[512];
    if (kjit_cuda_available(reason, sizeof reason) == KJIT_OK)
        return true;
    printf("%s: skipped: no CUDA driver (%s)\n", test, reason);
    return false;
}

/* Whether device 0 (the tests' contexts') is of compute capability n / 10
 * or later. */
static bool gpu_arch_at_least(int n)
{
    kjit_device_info info;
    ck_assert_int_eq(kjit_cuda_device_info(0, &info), KJIT_OK);
    return info.compute_major * 10 + info.compute_minor >= n;
}

static kjit_context *open_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    kjit_context *context = NULL;
    kjit_status status = kjit_context_create(&options, &context);
    ck_assert_msg(status == KJIT_OK, "context for %s: %s", kjit_target_name(target),
                  kjit_status_name(status));
    return context;
}

static kjit_function *compile(kjit_context *context, const char *source, const char *name,
                              kjit_module **module)
{
    kjit_status status = kjit_compile_string(context, "test.kern", source, module);
    ck_assert_msg(status == KJIT_OK, "compile: %s", kjit_last_error(context));
    kjit_function *function = NULL;
    status = kjit_module_function(*module, name, &function);
    ck_assert_msg(status == KJIT_OK, "no function %s: %s", name, kjit_last_error(context));
    return function;
}

static double element(const kjit_array *array, int64_t i)
{
    const char *p = (const char *)array->data + i * kjit_dtype_size(array->dtype);
    switch (array->dtype) {
    case KJIT_BOOL: return *(const uint8_t *)p;
    case KJIT_I8: return *(const int8_t *)p;
    case KJIT_I16: return *(const int16_t *)p;
    case KJIT_I32: return *(const int32_t *)p;
    case KJIT_I64: return (double)*(const int64_t *)p;
    case KJIT_U8: return *(const uint8_t *)p;
    case KJIT_U16: return *(const uint16_t *)p;
    case KJIT_U32: return *(const uint32_t *)p;
    case KJIT_U64: return (double)*(const uint64_t *)p;
    case KJIT_F32: return *(const float *)p;
    case KJIT_F64: return *(const double *)p;
    default: return NAN;
    }
}

static void set_element(kjit_array *array, int64_t i, double v)
{
    char *p = (char *)array->data + i * kjit_dtype_size(array->dtype);
    switch (array->dtype) {
    case KJIT_BOOL: *(uint8_t *)p = v != 0; break;
    case KJIT_I8: *(int8_t *)p = (int8_t)v; break;
    case KJIT_I16: *(int16_t *)p = (int16_t)v; break;
    case KJIT_I32: *(int32_t *)p = (int32_t)v; break;
    case KJIT_I64: *(int64_t *)p = (int64_t)v; break;
    case KJIT_U8: *(uint8_t *)p = (uint8_t)v; break;
    case KJIT_U16: *(uint16_t *)p = (uint16_t)v; break;
    case KJIT_U32: *(uint32_t *)p = (uint32_t)v; break;
    case KJIT_U64: *(uint64_t *)p = (uint64_t)v; break;
    case KJIT_F32: *(float *)p = (float)v; break;
    case KJIT_F64: *(double *)p = v; break;
    default: break;
    }
}

/*
 * Elements where |got - want| > atol + rtol |want| (NaN never matches
 * anything but NaN).  Returns how many; reports the worst.
 */
static int64_t mismatches(const kjit_array *got, const double *want, int64_t n, double rtol,
                          double atol, const char *label)
{
    int64_t bad = 0, worst = -1;
    double worst_excess = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = element(got, i), w = want[i];
        if (isnan(w) && isnan(g))
            continue;
        double excess = fabs(g - w) - (atol + rtol * fabs(w));
        if (isnan(g) || isnan(w) || excess > 0) {
            bad++;
            if (worst < 0 || isnan(excess) || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
    }
    if (bad)
        printf("%s: %lld of %lld elements off, worst at %lld: got %.17g, want %.17g\n", label,
               (long long)bad, (long long)n, (long long)worst, element(got, worst), want[worst]);
    return bad;
}

static kjit_array host_array(kjit_dtype dtype, int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    void *data = calloc((size_t)(n > 0 ? n : 1), kjit_dtype_size(dtype));
    ck_assert_ptr_nonnull(data);
    return kjit_array_make(data, dtype, ndim, shape);
}

/* Poison: a result the kernel never wrote must not look right. */
static void poison(kjit_array *array)
{
    memset(array->data, 0x7f, (size_t)kjit_array_size(array) * kjit_dtype_size(array->dtype));
}

/* ------------------------------------------------- seeds vs float64 */

static const char seed_source[] =
    "@vectorize\n"
    "fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@vectorize\n"
    "fn vsin(x: f64) -> f64 { return sin(x); }\n"
    "@vectorize\n"
    "fn vexp(x: f32) -> f32 { return exp(x); }\n"
    "@vectorize\n"
    "fn lla_a(lat1: f64, lon1: f64, lat2: f64, lon2: f64, s: f64) -> f64 {\n"
    "    let a = sin(0.008726645 * (lat2 - lat1)) ** 2\n"
    "          + cos(0.01745329 * lat1) * cos(0.01745329 * lat2) * sin(0.008726645 * (lon2 - "
    "lon1)) ** 2;\n"
    "    return atan2(a, 1 - a) * s;\n"
    "}\n"
    "fn mandel(x: f64, y: f64, max_iters: i32) -> i32 {\n"
    "    let c = complex(x, y);\n"
    "    let z = complex(0.0, 0.0);\n"
    "    for i in range(max_iters) {\n"
    "        z = z * z + c;\n"
    "        if z.real * z.real + z.imag * z.imag >= 4 { return i; }\n"
    "    }\n"
    "    return max_iters;\n"
    "}\n"
    "@kernel\n"
    "fn mandel_kernel(min_x: f64, max_x: f64, min_y: f64, max_y: f64, image: u8[,], iters: i32) "
    "{\n"
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
    "@kernel\n"
    "fn das(out: f64[,], data: i64[]) {\n"
    "    let i = blockIdx.x;\n"
    "    let j = threadIdx.x;\n"
    "    if i < out.shape[1] && j < out.shape[0] {\n"
    "        let acc = 0.0;\n"
    "        for k in range(128) {\n"
    "            for n in range(128) {\n"
    "                let order = i64(((f64(i*i + (j - k*6)*(j - k*6)) ** 0.5\n"
    "                                + f64(i*i + (j - n*6)*(j - n*6)) ** 0.5) * 0.05) / 1.54 * "
    "30);\n"
    "                if order < 2000 { acc += f64(data[k * 2000 + order]); }\n"
    "            }\n"
    "        }\n"
    "        out[j, i] = acc;\n"
    "    }\n"
    "}\n";

/* Runs the elementwise seeds on `target` and checks them against float64. */
static void check_elementwise_seeds(kjit_target target)
{
    kjit_context *context = open_context(target);
    kjit_module *module;
    const char *label = kjit_target_name(target);
    enum { N = 1000003 };
    int64_t shape[1] = {N};

    /* add f32: one rounding of the exact sum. */
    kjit_function *add = compile(context, seed_source, "add", &module);
    kjit_array a = host_array(KJIT_F32, 1, shape), b = host_array(KJIT_F32, 1, shape);
    kjit_array out = host_array(KJIT_F32, 1, shape);
    double *want = malloc(sizeof(double) * N);
    for (int64_t i = 0; i < N; i++) {
        set_element(&a, i, uniform(-1000, 1000));
        set_element(&b, i, uniform(-1000, 1000));
        want[i] = element(&a, i) + element(&b, i);
    }
    poison(&out);
    kjit_arg args[5] = {kjit_arg_array(&a), kjit_arg_array(&b)};
    ck_assert_msg(kjit_call(add, args, 2, &out, NULL) == KJIT_OK, "add on %s: %s", label,
                  kjit_last_error(context));
    ck_assert_int_eq(mismatches(&out, want, N, 6e-8, 1e-30, "add f32"), 0);

    /* exp f32: libdevice's expf is within 2 ulp. */
    kjit_function *vexp;
    ck_assert_int_eq(kjit_module_function(module, "vexp", &vexp), KJIT_OK);
    for (int64_t i = 0; i < N; i++) {
        set_element(&a, i, uniform(-20, 20));
        want[i] = exp(element(&a, i));
    }
    poison(&out);
    ck_assert_msg(kjit_call(vexp, args, 1, &out, NULL) == KJIT_OK, "exp: %s",
                  kjit_last_error(context));
    ck_assert_int_eq(mismatches(&out, want, N, 3e-7, 1e-37, "exp f32"), 0);

    /* sin f64 over a wide range (libdevice's slow path reduction included). */
    kjit_function *vsin;
    ck_assert_int_eq(kjit_module_function(module, "vsin", &vsin), KJIT_OK);
    kjit_array x = host_array(KJIT_F64, 1, shape), y = host_array(KJIT_F64, 1, shape);
    for (int64_t i = 0; i < N; i++) {
        set_element(&x, i, uniform(-1e6, 1e6));
        want[i] = sin(element(&x, i));
    }
    poison(&y);
    kjit_arg xargs[1] = {kjit_arg_array(&x)};
    ck_assert_msg(kjit_call(vsin, xargs, 1, &y, NULL) == KJIT_OK, "sin: %s",
                  kjit_last_error(context));
    ck_assert_int_eq(mismatches(&y, want, N, 0, 4e-16, "sin f64"), 0);

    /* LLA: two arrays and three broadcast scalars. */
    kjit_function *lla;
    ck_assert_int_eq(kjit_module_function(module, "lla_a", &lla), KJIT_OK);
    kjit_array lon = host_array(KJIT_F64, 1, shape);
    double lat2 = uniform(-60, 60), lon2 = uniform(-170, 170), s = 6371.0;
    for (int64_t i = 0; i < N; i++) {
        set_element(&x, i, uniform(-90, 90));
        set_element(&lon, i, uniform(-180, 180));
        double lat1 = element(&x, i), lon1 = element(&lon, i);
        double sa = sin(0.008726645 * (lat2 - lat1)), so = sin(0.008726645 * (lon2 - lon1));
        double av = sa * sa + cos(0.01745329 * lat1) * cos(0.01745329 * lat2) * so * so;
        want[i] = atan2(av, 1 - av) * s;
    }
    poison(&y);
    kjit_arg largs[5] = {kjit_arg_array(&x), kjit_arg_array(&lon), kjit_arg_f64(lat2),
                         kjit_arg_f64(lon2), kjit_arg_f64(s)};
    ck_assert_msg(kjit_call(lla, largs, 5, &y, NULL) == KJIT_OK, "lla_a: %s",
                  kjit_last_error(context));
    ck_assert_int_eq(mismatches(&y, want, N, 1e-12, 1e-12, "lla_a f64"), 0);

    free(want);
    free(a.data), free(b.data), free(out.data), free(x.data), free(y.data), free(lon.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(elementwise_seeds_match_float64)
{
    if (!gpu_or_skip("elementwise_seeds_match_float64"))
        return;
    check_elementwise_seeds(KJIT_TARGET_CUDA);
    check_elementwise_seeds(KJIT_TARGET_CPU);
}
END_TEST

static int mandel_reference(double x, double y, int max_iters)
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

/* The two seed kernels, launched on cuda and cpu, against float64 in C. */
static void check_seed_kernels(kjit_target target)
{
    kjit_context *context = open_context(target);
    kjit_module *module;
    const char *label = kjit_target_name(target);

    /* Mandelbrot: iteration counts; points on the set's edge may differ by
     * a contracted multiply-add, so a few pixels in a thousand may disagree. */
    kjit_function *mandel = compile(context, seed_source, "mandel_kernel", &module);
    int64_t shape[2] = {256, 384};
    kjit_array image = host_array(KJIT_U8, 2, shape);
    poison(&image);
    int iters = 50;
    double min_x = -2.0, max_x = 1.0, min_y = -1.0, max_y = 1.0;
    double *want = malloc(sizeof(double) * 256 * 384);
    for (int64_t py = 0; py < 256; py++)
        for (int64_t px = 0; px < 384; px++)
            want[py * 384 + px] = (uint8_t)mandel_reference(
                min_x + (double)px * ((max_x - min_x) / 384), min_y + (double)py * ((max_y - min_y) / 256),
                iters);
    kjit_arg margs[6] = {kjit_arg_f64(min_x), kjit_arg_f64(max_x), kjit_arg_f64(min_y),
                         kjit_arg_f64(max_y), kjit_arg_array(&image), kjit_arg_i32(iters)};
    uint32_t grid[3] = {8, 4, 1}, block[3] = {16, 16, 1};
    ck_assert_msg(kjit_launch(mandel, grid, block, margs, 6, NULL) == KJIT_OK, "mandel on %s: %s",
                  label, kjit_last_error(context));
    ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
    ck_assert_int_le(mismatches(&image, want, 256 * 384, 0, 0, "mandelbrot"), 256 * 384 / 500);

    /* Delay-and-sum at 64 x 40: sums of integers, exact but for an order that a
     * different rounding moves across an integer (a 1e-3 share at most). */
    kjit_function *das;
    ck_assert_int_eq(kjit_module_function(module, "das", &das), KJIT_OK);
    int64_t out_shape[2] = {64, 40}, data_shape[1] = {128 * 2000};
    kjit_array out = host_array(KJIT_F64, 2, out_shape);
    kjit_array data = host_array(KJIT_I64, 1, data_shape);
    for (int64_t i = 0; i < data_shape[0]; i++)
        set_element(&data, i, floor(uniform(0, 100)));
    poison(&out);
    double *dwant = malloc(sizeof(double) * 64 * 40);
    for (int64_t j = 0; j < 64; j++)
        for (int64_t i = 0; i < 40; i++) {
            double acc = 0;
            for (int64_t k = 0; k < 128; k++)
                for (int64_t n = 0; n < 128; n++) {
                    int64_t order = (int64_t)((sqrt((double)(i * i + (j - k * 6) * (j - k * 6))) +
                                               sqrt((double)(i * i + (j - n * 6) * (j - n * 6)))) *
                                              0.05 / 1.54 * 30);
                    if (order < 2000)
                        acc += element(&data, k * 2000 + order);
                }
            dwant[j * 40 + i] = acc;
        }
    kjit_arg dargs[2] = {kjit_arg_array(&out), kjit_arg_array(&data)};
    uint32_t dgrid[3] = {40, 1, 1}, dblock[3] = {64, 1, 1};
    ck_assert_msg(kjit_launch(das, dgrid, dblock, dargs, 2, NULL) == KJIT_OK, "das: %s",
                  kjit_last_error(context));
    ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
    ck_assert_int_eq(mismatches(&out, dwant, 64 * 40, 1e-3, 0, "delay-and-sum"), 0);

    free(want), free(dwant), free(image.data), free(out.data), free(data.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(seed_kernels_match_float64)
{
    if (!gpu_or_skip("seed_kernels_match_float64"))
        return;
    check_seed_kernels(KJIT_TARGET_CUDA);
    check_seed_kernels(KJIT_TARGET_CPU);
}
END_TEST

/* ------------------------------------------- every example, cuda vs cpu */

/* Inputs each vectorized signature can take: floats in (0.1, 2) stay inside
 * every math function's domain, small positive ints avoid division by zero. */
static double random_input(kjit_dtype dtype)
{
    if (dtype == KJIT_F32 || dtype == KJIT_F64)
        return uniform(0.1, 2.0);
    if (dtype == KJIT_BOOL)
        return uniform(0, 1) < 0.5;
    return floor(uniform(1, 100));
}

static void compare_function(kjit_context *cpu, kjit_context *cuda, const char *path,
                             const char *name, int *compared)
{
    kjit_module *cpu_module, *cuda_module;
    ck_assert_msg(kjit_compile_file(cpu, path, &cpu_module) == KJIT_OK, "%s: %s", path,
                  kjit_last_error(cpu));
    ck_assert_msg(kjit_compile_file(cuda, path, &cuda_module) == KJIT_OK, "%s on cuda: %s", path,
                  kjit_last_error(cuda));
    kjit_function *on_cpu, *on_cuda;
    ck_assert_int_eq(kjit_module_function(cpu_module, name, &on_cpu), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(cuda_module, name, &on_cuda), KJIT_OK);
    enum { N = 10007 };
    int64_t shape[1] = {N};
    for (int sig = 0; sig < kjit_function_signature_count(on_cpu); sig++) {
        int nparams = kjit_function_param_count(on_cpu);
        kjit_arg args[16];
        kjit_array inputs[16];
        kjit_dtype result_dtype;
        bool complex_types = false;
        ck_assert_int_eq(kjit_function_result(on_cpu, sig, &result_dtype), KJIT_OK);
        ck_assert_int_le(nparams, 16);
        for (int p = 0; p < nparams; p++) {
            kjit_dtype dtype;
            int ndim;
            ck_assert_int_eq(kjit_function_param(on_cpu, sig, p, &dtype, &ndim), KJIT_OK);
            complex_types |= dtype == KJIT_C64 || dtype == KJIT_C128;
            inputs[p] = host_array(dtype, 1, shape);
            for (int64_t i = 0; i < N; i++)
                set_element(&inputs[p], i, random_input(dtype));
            args[p] = kjit_arg_array(&inputs[p]);
        }
        if (!complex_types && result_dtype != KJIT_C64 && result_dtype != KJIT_C128) {
            kjit_array want, got;
            ck_assert_msg(kjit_call(on_cpu, args, nparams, NULL, &want) == KJIT_OK, "%s.%s cpu: %s",
                          path, name, kjit_last_error(cpu));
            ck_assert_msg(kjit_call(on_cuda, args, nparams, NULL, &got) == KJIT_OK,
                          "%s.%s cuda: %s", path, name, kjit_last_error(cuda));
            double *reference = malloc(sizeof(double) * N);
            for (int64_t i = 0; i < N; i++)
                reference[i] = element(&want, i);
            /* Two math libraries, each within a few ulp of the truth. */
            bool single = result_dtype == KJIT_F32;
            char label[256];
            snprintf(label, sizeof label, "%s: %s %s", path, name,
                     kjit_function_signature(on_cpu, sig));
            ck_assert_int_eq(mismatches(&got, reference, N, single ? 2e-6 : 1e-13,
                                        single ? 1e-6 : 1e-14, label),
                             0);
            (*compared)++;
            free(reference);
            kjit_array_free(&want);
            kjit_array_free(&got);
        }
        for (int p = 0; p < nparams; p++)
            free(inputs[p].data);
    }
    kjit_module_free(cpu_module);
    kjit_module_free(cuda_module);
}

START_TEST(every_example_agrees_with_cpu)
{
    if (!gpu_or_skip("every_example_agrees_with_cpu"))
        return;
    kjit_context *cpu = open_context(KJIT_TARGET_CPU), *cuda = open_context(KJIT_TARGET_CUDA);
    glob_t files;
    ck_assert_int_eq(glob("examples/*.kern", 0, NULL, &files), 0);
    int compared = 0;
    for (size_t f = 0; f < files.gl_pathc; f++) {
        kjit_module *module;
        ck_assert_msg(kjit_compile_file(cpu, files.gl_pathv[f], &module) == KJIT_OK, "%s: %s",
                      files.gl_pathv[f], kjit_last_error(cpu));
        for (int i = 0; i < kjit_module_function_count(module); i++) {
            const char *name = kjit_module_function_name(module, i);
            kjit_function *function;
            ck_assert_int_eq(kjit_module_function(module, name, &function), KJIT_OK);
            if (kjit_function_kind_of(function) == KJIT_FUNCTION_VECTORIZE)
                compare_function(cpu, cuda, files.gl_pathv[f], name, &compared);
        }
        kjit_module_free(module);
    }
    globfree(&files);
    printf("every_example_agrees_with_cpu: %d vectorized signatures compared\n", compared);
    ck_assert_int_gt(compared, 0);
    kjit_context_destroy(cpu);
    kjit_context_destroy(cuda);
}
END_TEST

/* ---------------------------------------- device arrays, streams, events */

static const char saxpy_source[] =
    "@vectorize fn add(a: f32, b: f32) -> f32 { return a + b; }\n"
    "@kernel fn saxpy(a: f32, x: f32[], y: f32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { y[i] = a * x[i] + y[i]; }\n"
    "}\n";

START_TEST(device_arrays_stay_on_the_device)
{
    if (!gpu_or_skip("device_arrays_stay_on_the_device"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    kjit_function *add = compile(context, saxpy_source, "add", &module);
    enum { N = 1 << 20 };
    int64_t shape[1] = {N};
    kjit_array ha = host_array(KJIT_F32, 1, shape), hb = host_array(KJIT_F32, 1, shape);
    kjit_array hout = host_array(KJIT_F32, 1, shape);
    double *want = malloc(sizeof(double) * N);
    for (int64_t i = 0; i < N; i++) {
        set_element(&ha, i, uniform(-10, 10));
        set_element(&hb, i, uniform(-10, 10));
        want[i] = element(&ha, i) + element(&hb, i);
    }
    kjit_array da, db, dout;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &da), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &db), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &dout), KJIT_OK);
    ck_assert_int_eq(da.memory, KJIT_MEMORY_DEVICE);
    ck_assert_int_eq(kjit_copy(context, &da, &ha, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &db, &hb, NULL), KJIT_OK);
    poison(&hout);
    ck_assert_int_eq(kjit_copy(context, &dout, &hout, NULL), KJIT_OK);

    kjit_arg args[2] = {kjit_arg_array(&da), kjit_arg_array(&db)};
    ck_assert_msg(kjit_call(add, args, 2, &dout, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    /* Twice more into the same output: a call on device arrays queues work and
     * returns; only the copy back waits for it. */
    ck_assert_int_eq(kjit_call(add, args, 2, &dout, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &hout, &dout, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&hout, want, N, 6e-8, 1e-30, "add on device arrays"), 0);

    /* A kernel launched on device arrays: y = 2 x + y, in place. */
    kjit_function *saxpy;
    ck_assert_int_eq(kjit_module_function(module, "saxpy", &saxpy), KJIT_OK);
    for (int64_t i = 0; i < N; i++)
        want[i] = 2.0f * (float)element(&ha, i) + (float)element(&hb, i);
    kjit_arg sargs[3] = {kjit_arg_f32(2.0f), kjit_arg_array(&da), kjit_arg_array(&db)};
    uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
    ck_assert_msg(kjit_launch(saxpy, grid, block, sargs, 3, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    poison(&hout);
    ck_assert_int_eq(kjit_copy(context, &hout, &db, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&hout, want, N, 1.2e-7, 1e-6, "saxpy on device arrays"), 0);

    /* Device to device: db (the saxpy result) into dout, then back to the host. */
    ck_assert_int_eq(kjit_copy(context, &dout, &db, NULL), KJIT_OK);
    poison(&hout);
    ck_assert_int_eq(kjit_copy(context, &hout, &dout, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&hout, want, N, 1.2e-7, 1e-6, "a device-to-device copy"), 0);

    ck_assert_int_eq(kjit_device_free(context, &da), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &db), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &dout), KJIT_OK);
    free(ha.data), free(hb.data), free(hout.data), free(want);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(streams_and_events)
{
    if (!gpu_or_skip("streams_and_events"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    kjit_function *add = compile(context, saxpy_source, "add", &module);
    enum { N = 1 << 24 };
    int64_t shape[1] = {N};
    kjit_array ha = host_array(KJIT_F32, 1, shape), hout = host_array(KJIT_F32, 1, shape);
    double *want = malloc(sizeof(double) * N);
    for (int64_t i = 0; i < N; i++) {
        set_element(&ha, i, uniform(-10, 10));
        want[i] = element(&ha, i) + 1.5;
    }
    kjit_stream *stream;
    ck_assert_int_eq(kjit_stream_create(context, &stream), KJIT_OK);
    kjit_array da, dout;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &da), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &dout), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &da, &ha, stream), KJIT_OK);

    kjit_event *start, *end;
    ck_assert_int_eq(kjit_event_record(context, stream, &start), KJIT_OK);
    kjit_arg args[2] = {kjit_arg_array(&da), kjit_arg_f32(1.5f)};
    for (int rep = 0; rep < 10; rep++)
        ck_assert_msg(kjit_call_async(add, args, 2, &dout, stream) == KJIT_OK, "%s",
                      kjit_last_error(context));
    ck_assert_int_eq(kjit_event_record(context, stream, &end), KJIT_OK);
    poison(&hout);
    ck_assert_int_eq(kjit_copy(context, &hout, &dout, stream), KJIT_OK);
    ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
    double ms = -1;
    ck_assert_int_eq(kjit_event_elapsed(start, end, &ms), KJIT_OK);
    /* Ten passes over 128 MiB cannot take no time, nor a minute. */
    ck_assert_msg(ms > 0.01 && ms < 60000, "implausible event time %g ms", ms);
    ck_assert_int_eq(mismatches(&hout, want, N, 6e-8, 1e-30, "add with a broadcast scalar"),
                     0);
    printf("streams_and_events: 10 adds of 2^24 f32 on a stream took %.3f ms\n", ms);

    kjit_event_destroy(start);
    kjit_event_destroy(end);
    kjit_device_free(context, &da);
    kjit_device_free(context, &dout);
    kjit_stream_destroy(stream);
    free(ha.data), free(hout.data), free(want);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ------------------------------------------------------------- errors */

START_TEST(a_fault_names_the_kernel_and_the_host_goes_on)
{
    if (!gpu_or_skip("a_fault_names_the_kernel_and_the_host_goes_on"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    kjit_function *oob = compile(context,
                                 "@kernel fn oob_write(a: f32[]) {\n"
                                 "    let i = grid(1);\n"
                                 "    a[i + 1099511627776] = 1.0;\n"
                                 "}\n",
                                 "oob_write", &module);
    int64_t shape[1] = {256};
    kjit_array da;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, shape, &da), KJIT_OK);
    kjit_arg args[1] = {kjit_arg_array(&da)};
    uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    kjit_status status = kjit_launch(oob, grid, block, args, 1, NULL);
    if (status == KJIT_OK)
        status = kjit_synchronize(context);
    ck_assert_msg(status == KJIT_ERROR_CUDA, "a fault gave %s", kjit_status_name(status));
    const char *message = kjit_last_error(context);
    printf("fault message: %s\n", message);
    ck_assert_msg(strstr(message, "oob_write") != NULL, "the kernel is not named: %s", message);
    ck_assert_msg(strstr(message, "CUDA_ERROR_") != NULL, "no driver error name: %s", message);

    /* Afterwards the host goes on: either the context was re-created and a
     * module compiled after the fault computes the right answer, or (drivers
     * that keep the device poisoned for the process) every cuda call fails
     * with a message saying so, and the cpu target still works. */
    kjit_device_free(context, &da);
    enum { N = 4096 };
    int64_t n_shape[1] = {N};
    kjit_array a = host_array(KJIT_F32, 1, n_shape), out = host_array(KJIT_F32, 1, n_shape);
    double want[N];
    for (int64_t i = 0; i < N; i++) {
        set_element(&a, i, uniform(-1, 1));
        want[i] = element(&a, i) * 2;
    }
    kjit_arg add_args[2] = {kjit_arg_array(&a), kjit_arg_array(&a)};
    kjit_module *again = NULL;
    kjit_function *add = NULL;
    status = kjit_compile_string(context, "again.kern", saxpy_source, &again);
    if (status == KJIT_OK)
        status = kjit_module_function(again, "add", &add);
    if (status == KJIT_OK) {
        poison(&out);
        status = kjit_call(add, add_args, 2, &out, NULL);
    }
    if (status == KJIT_OK) {
        printf("after the fault: the context was re-created\n");
        ck_assert_int_eq(mismatches(&out, want, N, 0, 0, "add after a fault"), 0);
        /* The module of the fault's context is gone: using it is an error. */
        kjit_device_alloc(context, KJIT_F32, 1, shape, &da);
        ck_assert_msg(kjit_launch(oob, grid, block, args, 1, NULL) != KJIT_OK,
                      "a module from before the fault still launched");
        kjit_device_free(context, &da);
    } else {
        message = kjit_last_error(context);
        printf("after the fault: %s\n", message);
        ck_assert_int_eq(status, KJIT_ERROR_CUDA);
        ck_assert_msg(strstr(message, "oob_write") != NULL && strstr(message, "fault") != NULL,
                      "unclear message after the fault: %s", message);
    }
    kjit_context *cpu = open_context(KJIT_TARGET_CPU);
    kjit_module *cpu_module;
    kjit_function *cpu_add = compile(cpu, saxpy_source, "add", &cpu_module);
    poison(&out);
    ck_assert_int_eq(kjit_call(cpu_add, add_args, 2, &out, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&out, want, N, 0, 0, "add on cpu after a GPU fault"), 0);
    kjit_module_free(cpu_module);
    kjit_context_destroy(cpu);

    free(a.data), free(out.data);
    if (again)
        kjit_module_free(again);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ------------------------------------------------------- checked mode */

/* Checked mode on the GPU (kjit_options.check; test_checks.c has the same
 * on cpu and parallel): each kind of check fails with KJIT_ERROR_CHECK and a
 * message naming the source place, the values and the block and thread (or
 * element), and the call right after it in the same context, on the same
 * GPU, gives the float64 reference's answer: a failed check only returns
 * early from the failing thread, so nothing faults. */
static const char checked_source[] =
    "@kernel\n"
    "fn gather(src: f64[], idx: i64[], out: f64[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(out) {\n"
    "        out[i] = src[idx[i]] * 2.0;\n"
    "    }\n"
    "}\n"
    "@vectorize\n"
    "fn idiv(a: i32, b: i32) -> i32 { return a / b + a % b; }\n"
    "@vectorize\n"
    "fn conv(x: f64) -> i16 { return i16(x * 100.0); }\n"
    "@vectorize\n"
    "fn shifts(x: i64, n: i64) -> i64 { return (x << n) >> n; }\n"
    "@vectorize\n"
    "fn power(k: i64, n: i64) -> i64 { return k ** n; }\n"
    "@kernel\n"
    "fn staged(a: f32[], out: f32[], shift: i64) {\n"
    "    let t = shared(f32, 128);\n"
    "    let l = local(f32, 2);\n"
    "    t[threadIdx.x] = a[grid(1)];\n"
    "    l[shift % 4] = 1.0;\n"
    "    syncthreads();\n"
    "    out[grid(1)] = t[threadIdx.x + shift] + l[0];\n"
    "}\n";

static void expect_check_failure(kjit_context *context, kjit_status status, const char *a,
                                 const char *b)
{
    const char *message = kjit_last_error(context);
    printf("checked mode: %s\n", message);
    ck_assert_msg(status == KJIT_ERROR_CHECK, "status %s: %s", kjit_status_name(status), message);
    ck_assert_msg(strstr(message, a) != NULL, "'%s' not in: %s", a, message);
    ck_assert_msg(!b || strstr(message, b) != NULL, "'%s' not in: %s", b, message);
}

START_TEST(checked_mode_reports_and_the_gpu_stays_usable)
{
    if (!gpu_or_skip("checked_mode_reports_and_the_gpu_stays_usable"))
        return;
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CUDA;
    options.check = 1;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    kjit_function *gather = compile(context, checked_source, "gather", &module);
    kjit_function *idiv, *conv, *shifts, *power, *staged;
    ck_assert_int_eq(kjit_module_function(module, "idiv", &idiv), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "conv", &conv), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "shifts", &shifts), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "power", &power), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "staged", &staged), KJIT_OK);

    /* gather: an index past the end, then a correct launch (host arrays) */
    enum { N = 1 << 16, SRC = 10000, BLOCK = 256 };
    int64_t n_shape[1] = {N}, src_shape[1] = {SRC};
    kjit_array src = host_array(KJIT_F64, 1, src_shape), idx = host_array(KJIT_I64, 1, n_shape),
               out = host_array(KJIT_F64, 1, n_shape);
    for (int64_t i = 0; i < SRC; i++)
        set_element(&src, i, uniform(-1e3, 1e3));
    int64_t *ix = idx.data;
    double *want = malloc(sizeof(double) * N);
    for (int round = 0; round < 3; round++) {
        for (int64_t i = 0; i < N; i++) {
            ix[i] = (int64_t)uniform(0, SRC - 1);
            want[i] = 2 * element(&src, ix[i]);
        }
        int64_t bad = (int64_t)uniform(0, N - 1);
        ix[bad] = round == 1 ? -5 : SRC + 3;
        kjit_arg args[3] = {kjit_arg_array(&src), kjit_arg_array(&idx), kjit_arg_array(&out)};
        uint32_t grid[3] = {N / BLOCK, 1, 1}, block[3] = {BLOCK, 1, 1};
        char what[128], where[96];
        snprintf(what, sizeof what, "test.kern:5:21: error: index %lld out of range for axis 0 of 'src' (length %d)",
                 (long long)ix[bad], SRC);
        snprintf(where, sizeof where, "in block (%lld,0,0), thread (%lld,0,0) of kernel 'gather'",
                 (long long)(bad / BLOCK), (long long)(bad % BLOCK));
        expect_check_failure(context, kjit_launch(gather, grid, block, args, 3, NULL), what, where);
        /* the next launch in the same process and context */
        ix[bad] = (int64_t)uniform(0, SRC - 1);
        want[bad] = 2 * element(&src, ix[bad]);
        poison(&out);
        ck_assert_int_eq(kjit_launch(gather, grid, block, args, 3, NULL), KJIT_OK);
        ck_assert_int_eq(mismatches(&out, want, N, 0, 0, "gather after a failed check"), 0);
    }

    /* idiv on device arrays: by zero, MIN / -1, then right */
    enum { V = 100000 };
    int64_t v_shape[1] = {V};
    kjit_array a = host_array(KJIT_I32, 1, v_shape), b = host_array(KJIT_I32, 1, v_shape),
               q = host_array(KJIT_I32, 1, v_shape);
    kjit_array da, db, dq;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_I32, 1, v_shape, &da), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_I32, 1, v_shape, &db), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_I32, 1, v_shape, &dq), KJIT_OK);
    int32_t *av = a.data, *bv = b.data;
    double *qwant = malloc(sizeof(double) * V);
    for (int64_t i = 0; i < V; i++) {
        av[i] = (int32_t)uniform(-2e9, 2e9);
        bv[i] = (int32_t)uniform(1, 1000) * (uniform(0, 1) < 0.5 ? -1 : 1);
        qwant[i] = (double)(av[i] / bv[i] + av[i] % bv[i]);
    }
    int64_t zero_at = (int64_t)uniform(0, V - 1);
    int32_t saved = bv[zero_at];
    bv[zero_at] = 0;
    kjit_arg dargs[2] = {kjit_arg_array(&da), kjit_arg_array(&db)};
    ck_assert_int_eq(kjit_copy(context, &da, &a, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &db, &b, NULL), KJIT_OK);
    char where[96];
    snprintf(where, sizeof where, "at element %lld of the call of 'idiv'", (long long)zero_at);
    expect_check_failure(context, kjit_call(idiv, dargs, 2, &dq, NULL),
                         "test.kern:9:43: error: integer division by zero", where);
    bv[zero_at] = -1;
    av[zero_at] = INT32_MIN;
    ck_assert_int_eq(kjit_copy(context, &da, &a, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &db, &b, NULL), KJIT_OK);
    expect_check_failure(context, kjit_call(idiv, dargs, 2, &dq, NULL),
                         "integer division overflows i32: -2147483648 / -1", where);
    bv[zero_at] = saved;
    av[zero_at] = 12345;
    qwant[zero_at] = (double)(12345 / saved + 12345 % saved);
    ck_assert_int_eq(kjit_copy(context, &da, &a, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &db, &b, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_call(idiv, dargs, 2, &dq, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &q, &dq, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&q, qwant, V, 0, 0, "idiv after failed checks"), 0);
    kjit_device_free(context, &da), kjit_device_free(context, &db), kjit_device_free(context, &dq);

    /* conversions, shifts and powers on host arrays */
    kjit_array x = host_array(KJIT_F64, 1, v_shape), xi = host_array(KJIT_I16, 1, v_shape);
    for (int64_t i = 0; i < V; i++) {
        set_element(&x, i, uniform(-327.6, 327.6));
        qwant[i] = (double)(int16_t)(element(&x, i) * 100.0);
    }
    int64_t bad = (int64_t)uniform(0, V - 1);
    set_element(&x, bad, NAN);
    kjit_arg xarg[1] = {kjit_arg_array(&x)};
    expect_check_failure(context, kjit_call(conv, xarg, 1, &xi, NULL), "conversion of NaN to i16", NULL);
    set_element(&x, bad, 1e6);
    expect_check_failure(context, kjit_call(conv, xarg, 1, &xi, NULL),
                         "conversion of 100000000 to i16 is out of range", NULL);
    set_element(&x, bad, 1.5);
    qwant[bad] = 150;
    ck_assert_int_eq(kjit_call(conv, xarg, 1, &xi, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&xi, qwant, V, 0, 0, "conv after failed checks"), 0);

    kjit_array k = host_array(KJIT_I64, 1, v_shape), n = host_array(KJIT_I64, 1, v_shape),
               r = host_array(KJIT_I64, 1, v_shape);
    int64_t *kv = k.data, *nv = n.data;
    for (int64_t i = 0; i < V; i++) {
        kv[i] = (int64_t)uniform(-5, 5);
        nv[i] = (int64_t)uniform(0, 20);
        double p = 1;
        for (int j = 0; j < nv[i]; j++)
            p *= (double)kv[i];
        qwant[i] = p;
    }
    kjit_arg kn[2] = {kjit_arg_array(&k), kjit_arg_array(&n)};
    nv[bad] = -3;
    expect_check_failure(context, kjit_call(power, kn, 2, &r, NULL),
                         "negative exponent -3 in an integer power", NULL);
    expect_check_failure(context, kjit_call(shifts, kn, 2, &r, NULL),
                         "shift count -3 out of range for a 64-bit operand", NULL);
    nv[bad] = 2;
    qwant[bad] = (double)(kv[bad] * kv[bad]);
    ck_assert_int_eq(kjit_call(power, kn, 2, &r, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&r, qwant, V, 0, 0, "power after failed checks"), 0);

    /* shared and local arrays, with a barrier after the failing store */
    enum { S = 1024 };
    int64_t s_shape[1] = {S};
    kjit_array sa = host_array(KJIT_F32, 1, s_shape), so = host_array(KJIT_F32, 1, s_shape);
    double swant[S];
    for (int64_t i = 0; i < S; i++)
        set_element(&sa, i, uniform(-1, 1));
    uint32_t sgrid[3] = {S / 128, 1, 1}, sblock[3] = {128, 1, 1};
    kjit_arg sargs[3] = {kjit_arg_array(&sa), kjit_arg_array(&so), kjit_arg_i64(2)};
    expect_check_failure(context, kjit_launch(staged, sgrid, sblock, sargs, 3, NULL),
                         "index 2 out of range for axis 0 of 'l' (length 2)", "of kernel 'staged'");
    sargs[2] = kjit_arg_i64(4);
    expect_check_failure(context, kjit_launch(staged, sgrid, sblock, sargs, 3, NULL),
                         "out of range for axis 0 of 't' (length 128)", "thread (1");
    sargs[2] = kjit_arg_i64(0);
    for (int64_t i = 0; i < S; i++)
        swant[i] = element(&sa, i) + 1.0;
    ck_assert_int_eq(kjit_launch(staged, sgrid, sblock, sargs, 3, NULL), KJIT_OK);
    ck_assert_int_eq(mismatches(&so, swant, S, 1e-6, 1e-6, "staged after failed checks"), 0);

    free(want), free(qwant);
    free(src.data), free(idx.data), free(out.data), free(a.data), free(b.data), free(q.data);
    free(x.data), free(xi.data), free(k.data), free(n.data), free(r.data);
    free(sa.data), free(so.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ------------------------------------- contiguous and strided kernel variants */

/* kjit_launch compiles a kernel once per set of C-contiguous array arguments
 * (their strides then come from the shape).  The same values as contiguous
 * arrays and as a transposed and a sliced view must give the float64
 * reference, and the two variants the same bits; `a` reaches a plain
 * function, so the facts about its strides must survive the call. */
static const char layout_source[] =
    "fn at(a: f64[,], i: i64, j: i64) -> f64 { return a[i, j]; }\n"
    "@kernel\n"
    "fn combine(a: f64[,], b: f64[,], out: f64[,], s: f64) {\n"
    "    let x, y = grid(2);\n"
    "    if y < out.shape[0] && x < out.shape[1] {\n"
    "        out[y, x] = at(a, y, x) * s + b[y, x] * f64(y - x);\n"
    "    }\n"
    "}\n";

static kjit_array view2(double *buf, int64_t rows, int64_t cols, int64_t si, int64_t sj)
{
    int64_t shape[2] = {rows, cols};
    kjit_array a = kjit_array_make(buf, KJIT_F64, 2, shape);
    a.strides[0] = si * (int64_t)sizeof(double);
    a.strides[1] = sj * (int64_t)sizeof(double);
    return a;
}

START_TEST(contiguous_and_strided_kernel_variants_agree)
{
    if (!gpu_or_skip("contiguous_and_strided_kernel_variants_agree"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    kjit_function *fn = compile(context, layout_source, "combine", &module);
    enum { R = 301, C = 517 };
    double s = uniform(-3, 3);
    double *a_c = malloc(sizeof(double) * R * C), *b_c = malloc(sizeof(double) * R * C);
    double *a_t = malloc(sizeof(double) * C * R), *b_s = malloc(sizeof(double) * R * 2 * C);
    double *out_c = malloc(sizeof(double) * R * C), *out_t = malloc(sizeof(double) * C * R);
    double *want = malloc(sizeof(double) * R * C);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
            a_c[i * C + j] = a_t[j * R + i] = uniform(-100, 100);
            b_c[i * C + j] = b_s[i * 2 * C + 2 * j] = uniform(-100, 100);
            b_s[i * 2 * C + 2 * j + 1] = NAN;
            want[i * C + j] = a_c[i * C + j] * s + b_c[i * C + j] * (double)(i - j);
        }
    memset(out_c, 0x7f, sizeof(double) * R * C);
    memset(out_t, 0x7f, sizeof(double) * R * C);
    kjit_array A = view2(a_c, R, C, C, 1), B = view2(b_c, R, C, C, 1), O = view2(out_c, R, C, C, 1);
    /* a transposed, b every other column, out written through a transposed view */
    kjit_array AT = view2(a_t, R, C, 1, R), BS = view2(b_s, R, C, 2 * C, 2);
    kjit_array OT = view2(out_t, R, C, 1, R);
    uint32_t grid[3] = {(C + 31) / 32, (R + 7) / 8, 1}, block[3] = {32, 8, 1};
    kjit_arg args[4] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&O),
                        kjit_arg_f64(s)};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "contiguous: %s",
                  kjit_last_error(context));
    kjit_arg targs[4] = {kjit_arg_array(&AT), kjit_arg_array(&BS), kjit_arg_array(&OT),
                         kjit_arg_f64(s)};
    ck_assert_msg(kjit_launch(fn, grid, block, targs, 4, NULL) == KJIT_OK, "strided: %s",
                  kjit_last_error(context));
    /* |a s + b (y - x)| < 1e5: an FMA moves the result by at most an ulp of
     * the product. */
    ck_assert_int_eq(mismatches(&O, want, R * C, 1e-15, 1e-10, "contiguous variant"), 0);
    int64_t bad = 0;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++)
            if (memcmp(&out_c[i * C + j], &out_t[j * R + i], sizeof(double)) != 0)
                bad++;
    ck_assert_msg(bad == 0, "%lld elements differ between the variants", (long long)bad);
    free(a_c), free(b_c), free(a_t), free(b_s), free(out_c), free(out_t), free(want);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ------------------------------------------- device functions and atomics */

START_TEST(device_functions_and_atomics_match_reference)
{
    if (!gpu_or_skip("device_functions_and_atomics_match_reference"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    static uint64_t state;
    rng_seed(&state, "test_cuda device functions");
    case_device_functions(context, &state);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(out_of_memory_is_reported)
{
    if (!gpu_or_skip("out_of_memory_is_reported"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    int64_t terabyte[1] = {(int64_t)1 << 40};
    kjit_array huge;
    kjit_status status = kjit_device_alloc(context, KJIT_U8, 1, terabyte, &huge);
    ck_assert_msg(status == KJIT_ERROR_OUT_OF_MEMORY, "1 TiB allocation gave %s: %s",
                  kjit_status_name(status), kjit_last_error(context));
    int64_t small[1] = {1024};
    kjit_array ok;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_U8, 1, small, &ok), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &ok), KJIT_OK);
    kjit_context_destroy(context);
}
END_TEST

/* @reduce on the GPU: the same bits as the cpu target for sums over every
 * axis and along each axis of a 2-D array (the WARPS and the strided COLUMNS
 * kernels keep the cpu's order; axis 0 of shapes whose columns are not a
 * multiple of 32 and rows not of 1024, f32, f64 and i64, two reduced
 * dimensions that do not merge), a fused dot within float rounding of the
 * cpu's (the GPU may contract its multiply into the add), host and device
 * arrays, a stream, sizes of one to three tree levels, empty with init. */
static const char reduce_source[] =
    "@reduce(f32(f32, f32), f64(f64, f64), i64(i64, i64))\n"
    "fn vsum(a, b) { return a + b; }\n"
    "@vectorize(f32(f32, f32), f64(f64, f64))\n"
    "fn mul(x, y) { return x * y; }\n"
    "@reduce(map = mul, f32(f32, f32), f64(f64, f64))\n"
    "fn dot(a, b) { return a + b; }\n";

static kjit_array reduce_on(kjit_context *context, kjit_function *function, kjit_arg *args,
                            int nargs, const int *axes, int naxes, const kjit_arg *init)
{
    kjit_array r;
    ck_assert_msg(kjit_reduce(function, args, nargs, axes, naxes, init, NULL, &r) == KJIT_OK,
                  "%s: %s", kjit_function_name(function), kjit_last_error(context));
    return r;
}

START_TEST(reductions_match_the_cpu)
{
    if (!gpu_or_skip("reductions_match_the_cpu"))
        return;
    kjit_context *gpu = open_context(KJIT_TARGET_CUDA), *cpu = open_context(KJIT_TARGET_CPU);
    kjit_module *gm, *cm;
    kjit_function *gsum = compile(gpu, reduce_source, "vsum", &gm);
    kjit_function *csum = compile(cpu, reduce_source, "vsum", &cm);
    kjit_function *gdot, *cdot;
    ck_assert_int_eq(kjit_module_function(gm, "dot", &gdot), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(cm, "dot", &cdot), KJIT_OK);
    const int64_t sizes[] = {1, 31, 1024, 1025, 33001, 1048576 + 5, 3 * 1048576 + 77};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        kjit_array x = host_array(KJIT_F32, 1, &n), y = host_array(KJIT_F32, 1, &n);
        for (int64_t i = 0; i < n; i++) {
            set_element(&x, i, uniform(-1, 1));
            set_element(&y, i, uniform(-1, 1));
        }
        kjit_arg args[2] = {kjit_arg_array(&x), kjit_arg_array(&y)};
        kjit_array g = reduce_on(gpu, gsum, args, 1, NULL, 0, NULL);
        kjit_array c = reduce_on(cpu, csum, args, 1, NULL, 0, NULL);
        ck_assert_msg(memcmp(g.data, c.data, 4) == 0, "sum of %lld: cuda %.9g, cpu %.9g",
                      (long long)n, element(&g, 0), element(&c, 0));
        kjit_array_free(&g), kjit_array_free(&c);
        g = reduce_on(gpu, gdot, args, 2, NULL, 0, NULL);
        c = reduce_on(cpu, cdot, args, 2, NULL, 0, NULL);
        double scale = 0;
        for (int64_t i = 0; i < n; i++)
            scale += fabs(element(&x, i) * element(&y, i));
        ck_assert_msg(fabs(element(&g, 0) - element(&c, 0)) <= 1e-5 * scale,
                      "dot of %lld: cuda %.9g, cpu %.9g", (long long)n, element(&g, 0),
                      element(&c, 0));
        kjit_array_free(&g), kjit_array_free(&c);
        free(x.data), free(y.data);
    }

    /* Along each axis of a 2-D array, and of a transposed view. */
    int64_t shape[2] = {1500, 2100};
    kjit_array m = host_array(KJIT_F32, 2, shape);
    for (int64_t i = 0; i < shape[0] * shape[1]; i++)
        set_element(&m, i, uniform(-1, 1));
    for (int transposed = 0; transposed < 2; transposed++) {
        kjit_array v = m;
        if (transposed) {
            v.shape[0] = shape[1], v.shape[1] = shape[0];
            v.strides[0] = m.strides[1], v.strides[1] = m.strides[0];
        }
        for (int axis = 0; axis < 2; axis++) {
            kjit_arg arg = kjit_arg_array(&v);
            kjit_array g = reduce_on(gpu, gsum, &arg, 1, &axis, 1, NULL);
            kjit_array c = reduce_on(cpu, csum, &arg, 1, &axis, 1, NULL);
            ck_assert_int_eq(kjit_array_size(&g), kjit_array_size(&c));
            ck_assert_msg(memcmp(g.data, c.data, (size_t)kjit_array_size(&g) * 4) == 0,
                          "axis %d%s: cuda and cpu differ", axis, transposed ? " (transposed)" : "");
            kjit_array_free(&g), kjit_array_free(&c);
        }
    }

    /* The leading axes of a C-contiguous 3-D array (the column sums), and
     * full sums of f32 views that start 1 to 3 elements in (the unaligned
     * WARPS variant) and of f64. */
    int64_t cube[3] = {37, 1100, 29};
    kjit_array c3 = host_array(KJIT_F32, 3, cube);
    for (int64_t i = 0; i < cube[0] * cube[1] * cube[2]; i++)
        set_element(&c3, i, uniform(-1, 1));
    for (int naxes = 1; naxes <= 2; naxes++) {
        int axes[2] = {0, 1};
        kjit_arg arg = kjit_arg_array(&c3);
        kjit_array g = reduce_on(gpu, gsum, &arg, 1, axes, naxes, NULL);
        kjit_array c = reduce_on(cpu, csum, &arg, 1, axes, naxes, NULL);
        ck_assert_msg(memcmp(g.data, c.data, (size_t)kjit_array_size(&g) * 4) == 0,
                      "leading %d axes of 3-D: cuda and cpu differ", naxes);
        kjit_array_free(&g), kjit_array_free(&c);
    }
    for (int offset = 1; offset < 4; offset++) {
        int64_t len = cube[0] * cube[1] * cube[2] - offset;
        kjit_array v = kjit_array_make((float *)c3.data + offset, KJIT_F32, 1, &len);
        kjit_arg arg = kjit_arg_array(&v);
        kjit_array g = reduce_on(gpu, gsum, &arg, 1, NULL, 0, NULL);
        kjit_array c = reduce_on(cpu, csum, &arg, 1, NULL, 0, NULL);
        ck_assert_msg(memcmp(g.data, c.data, 4) == 0, "sum from element %d: cuda and cpu differ",
                      offset);
        kjit_array_free(&g), kjit_array_free(&c);
    }
    /* COLUMNS: axis 0 with ragged shapes and types, and axes (0, 2) of the cube */
    const struct {
        kjit_dtype dtype;
        int64_t shape[2];
    } columns[] = {{KJIT_F32, {2049, 33}}, {KJIT_F64, {1030, 65}}, {KJIT_I64, {2100, 31}},
                   {KJIT_F32, {5, 3}}};
    for (size_t k = 0; k < sizeof columns / sizeof columns[0]; k++) {
        kjit_array a = host_array(columns[k].dtype, 2, columns[k].shape);
        for (int64_t i = 0; i < columns[k].shape[0] * columns[k].shape[1]; i++)
            set_element(&a, i, columns[k].dtype == KJIT_I64 ? uniform(-1e12, 1e12) : uniform(-1, 1));
        int axis = 0;
        kjit_arg arg = kjit_arg_array(&a);
        kjit_array g = reduce_on(gpu, gsum, &arg, 1, &axis, 1, NULL);
        kjit_array c = reduce_on(cpu, csum, &arg, 1, &axis, 1, NULL);
        ck_assert_msg(memcmp(g.data, c.data,
                             (size_t)kjit_array_size(&g) * kjit_dtype_size(columns[k].dtype)) == 0,
                      "axis 0 of %lld x %lld %s: cuda and cpu differ",
                      (long long)columns[k].shape[0], (long long)columns[k].shape[1],
                      kjit_dtype_name(columns[k].dtype));
        kjit_array_free(&g), kjit_array_free(&c);
        free(a.data);
    }
    {
        int axes[2] = {0, 2};
        kjit_arg arg = kjit_arg_array(&c3);
        kjit_array g = reduce_on(gpu, gsum, &arg, 1, axes, 2, NULL);
        kjit_array c = reduce_on(cpu, csum, &arg, 1, axes, 2, NULL);
        ck_assert_msg(memcmp(g.data, c.data, (size_t)kjit_array_size(&g) * 4) == 0,
                      "axes (0, 2) of 3-D: cuda and cpu differ");
        kjit_array_free(&g), kjit_array_free(&c);
    }
    free(c3.data);

    /* Device arrays and a device output; then on a stream. */
    int64_t n = 1 << 22, one = 1;
    kjit_array hx = host_array(KJIT_F64, 1, &n);
    for (int64_t i = 0; i < n; i++)
        set_element(&hx, i, uniform(-1, 1));
    kjit_array dx, dout, hout = host_array(KJIT_F64, 0, &one);
    ck_assert_int_eq(kjit_device_alloc(gpu, KJIT_F64, 1, &n, &dx), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(gpu, KJIT_F64, 0, NULL, &dout), KJIT_OK);
    ck_assert_int_eq(kjit_copy(gpu, &dx, &hx, NULL), KJIT_OK);
    kjit_arg darg = kjit_arg_array(&dx), harg = kjit_arg_array(&hx);
    ck_assert_msg(kjit_reduce(gsum, &darg, 1, NULL, 0, NULL, &dout, NULL) == KJIT_OK, "%s",
                  kjit_last_error(gpu));
    ck_assert_int_eq(kjit_synchronize(gpu), KJIT_OK);
    ck_assert_int_eq(kjit_copy(gpu, &hout, &dout, NULL), KJIT_OK);
    kjit_array c = reduce_on(cpu, csum, &harg, 1, NULL, 0, NULL);
    ck_assert_msg(memcmp(hout.data, c.data, 8) == 0, "device arrays: cuda and cpu differ");
    kjit_stream *stream;
    ck_assert_int_eq(kjit_stream_create(gpu, &stream), KJIT_OK);
    memset(hout.data, 0, 8);
    ck_assert_int_eq(kjit_copy(gpu, &dout, &hout, NULL), KJIT_OK);
    ck_assert_msg(kjit_reduce_async(gsum, &darg, 1, NULL, 0, NULL, &dout, stream) == KJIT_OK,
                  "%s", kjit_last_error(gpu));
    ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
    ck_assert_int_eq(kjit_copy(gpu, &hout, &dout, NULL), KJIT_OK);
    ck_assert_msg(memcmp(hout.data, c.data, 8) == 0, "on a stream: cuda and cpu differ");
    kjit_stream_destroy(stream);
    kjit_array_free(&c);

    /* Empty: the initial value, written on the device; an error without it. */
    int64_t zero = 0;
    kjit_array e = kjit_array_make(hx.data, KJIT_F64, 1, &zero);
    kjit_arg earg = kjit_arg_array(&e), init = kjit_arg_f64(4.5);
    ck_assert_int_eq(kjit_reduce(gsum, &earg, 1, NULL, 0, &init, &dout, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_copy(gpu, &hout, &dout, NULL), KJIT_OK);
    ck_assert(*(double *)hout.data == 4.5);
    kjit_array r;
    ck_assert_int_eq(kjit_reduce(gsum, &earg, 1, NULL, 0, NULL, NULL, &r), KJIT_ERROR_SHAPE);

    ck_assert_int_eq(kjit_device_free(gpu, &dx), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(gpu, &dout), KJIT_OK);
    free(hx.data), free(hout.data), free(m.data);
    kjit_module_free(gm), kjit_module_free(cm);
    kjit_context_destroy(gpu), kjit_context_destroy(cpu);
}
END_TEST

/* -------------------------------------- warp, block and grid collectives */

/* A deep copy of a host array (same shape, C order). */
static kjit_array copy_of(const kjit_array *a)
{
    kjit_array c = host_array(a->dtype, a->ndim, a->shape);
    memcpy(c.data, a->data, (size_t)kjit_array_size(a) * kjit_dtype_size(a->dtype));
    return c;
}

/*
 * Launches `name` of tests/golden/exec/<file> on cpu and on cuda, each on its
 * own copy of `arrays` (every argument an array), and checks that every array
 * ends the same, bit for bit.  The cuda results are left in `arrays`.
 */
static void launch_both_bit_exact(const char *file, const char *name, uint32_t blocks,
                                  uint32_t threads, size_t dynamic_bytes, kjit_array *arrays,
                                  int count)
{
    char path[256];
    snprintf(path, sizeof path, "tests/golden/exec/%s", file);
    kjit_array cpu_arrays[16];
    kjit_arg cpu_args[16], cuda_args[16];
    ck_assert_int_le(count, 16);
    for (int i = 0; i < count; i++) {
        cpu_arrays[i] = copy_of(&arrays[i]);
        cpu_args[i] = kjit_arg_array(&cpu_arrays[i]);
        cuda_args[i] = kjit_arg_array(&arrays[i]);
    }
    uint32_t grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
    kjit_launch_options options;
    kjit_launch_options_init(&options);
    options.dynamic_shared_bytes = dynamic_bytes;
    kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_CUDA};
    for (int t = 0; t < 2; t++) {
        kjit_context *context = open_context(targets[t]);
        kjit_module *module;
        ck_assert_msg(kjit_compile_file(context, path, &module) == KJIT_OK, "%s: %s", path,
                      kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, name, &fn), KJIT_OK);
        kjit_status status = kjit_launch_ex(fn, grid, block, t ? cuda_args : cpu_args, count,
                                            &options);
        ck_assert_msg(status == KJIT_OK, "%s on %s: %s", name, kjit_target_name(targets[t]),
                      kjit_last_error(context));
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
    for (int i = 0; i < count; i++) {
        size_t bytes = (size_t)kjit_array_size(&arrays[i]) * kjit_dtype_size(arrays[i].dtype);
        ck_assert_msg(memcmp(cpu_arrays[i].data, arrays[i].data, bytes) == 0,
                      "%s: argument %d differs between cpu and cuda", name, i);
        free(cpu_arrays[i].data);
    }
}

static void fill_random(kjit_array *a, double low, double high)
{
    for (int64_t i = 0; i < kjit_array_size(a); i++)
        set_element(a, i, a->dtype == KJIT_F32 || a->dtype == KJIT_F64 ? uniform(low, high)
                                                                      : floor(uniform(low, high)));
}

START_TEST(warp_collectives_match_cpu_bit_for_bit)
{
    if (!gpu_or_skip("warp_collectives_match_cpu_bit_for_bit"))
        return;
    /* the shuffle block sum and the shuffle scan: the same additions in the
     * same order on both targets (no multiply to contract) */
    int64_t n = 37 * 256 - 77, blocks = 37;
    kjit_array sum[2] = {host_array(KJIT_F32, 1, &n), host_array(KJIT_F32, 1, &blocks)};
    fill_random(&sum[0], -100, 100);
    launch_both_bit_exact("warp.kern", "block_sum", 37, 256, 0, sum, 2);
    int64_t m = 7 * 100 - 13;
    kjit_array scan[2] = {host_array(KJIT_F64, 1, &m), host_array(KJIT_F64, 1, &m)};
    fill_random(&scan[0], -1, 1);
    launch_both_bit_exact("warp.kern", "warp_scan", 7, 100, 0, scan, 2);
    /* votes with exited lanes and a partial warp (48 threads a block) */
    int64_t v = 3 * 48 - 21;
    kjit_array votes[5] = {host_array(KJIT_I32, 1, &v), host_array(KJIT_U32, 1, &v),
                           host_array(KJIT_BOOL, 1, &v), host_array(KJIT_BOOL, 1, &v),
                           host_array(KJIT_U32, 1, &v)};
    fill_random(&votes[0], -3, 3);
    launch_both_bit_exact("warp.kern", "votes", 3, 48, 0, votes, 5);
    /* every shuffle, lanes in and out of 0..31 */
    int64_t s = 4 * 64;
    kjit_dtype types[9] = {KJIT_I64, KJIT_F64, KJIT_U32, KJIT_F32, KJIT_I32,
                           KJIT_I64, KJIT_F64, KJIT_U32, KJIT_F32};
    kjit_array shuffles[9];
    for (int i = 0; i < 9; i++)
        shuffles[i] = host_array(types[i], 1, &s);
    for (int i = 0; i < 4; i++)
        fill_random(&shuffles[i], -1e6, 1e6);
    fill_random(&shuffles[4], -70, 70);
    launch_both_bit_exact("warp.kern", "shuffles", 4, 64, 0, shuffles, 9);
    /* block votes */
    int64_t bv = 5 * 128, nb = 5;
    kjit_array block_votes[4] = {host_array(KJIT_F32, 1, &bv), host_array(KJIT_I32, 1, &nb),
                                 host_array(KJIT_BOOL, 1, &nb), host_array(KJIT_BOOL, 1, &nb)};
    fill_random(&block_votes[0], 0, 1);
    launch_both_bit_exact("warp.kern", "block_votes", 5, 128, 0, block_votes, 4);
    kjit_array *all[] = {sum, scan, votes, shuffles, block_votes};
    int counts[] = {2, 2, 5, 9, 4};
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < counts[k]; i++)
            free(all[k][i].data);
}
END_TEST

/* tests/bench/matmul_tc.kern (mma()) of n x depth by depth x m, into c, on
 * a context of `target` for `arch` (NULL: the device's own). */
static void matmul_tc_on(kjit_target target, const char *arch, kjit_array *arrays)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.cuda_arch = arch;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_file(context, "tests/bench/matmul_tc.kern", &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "matmul_tc", &fn), KJIT_OK);
    kjit_arg args[3];
    for (int i = 0; i < 3; i++)
        args[i] = kjit_arg_array(&arrays[i]);
    uint32_t grid[3] = {(uint32_t)((arrays[2].shape[1] + 127) / 128),
                        (uint32_t)((arrays[2].shape[0] + 127) / 128), 1};
    uint32_t block[3] = {256, 1, 1};
    kjit_status status = kjit_launch(fn, grid, block, args, 3, NULL);
    ck_assert_msg(status == KJIT_OK, "matmul_tc on %s %s: %s", kjit_target_name(target),
                  arch ? arch : "", kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
}

/*
 * mma() on the GPU (issue 25): the tensor-core matrix multiply of
 * tests/bench/matmul_tc.kern at sizes that are not multiples of its tiles.
 * For sm_75 (no f64 mma.sync: the shuffles and fmas of codegen_mma.c) the
 * result is cpu's, bit for bit; with the device's own mma.sync it is within
 * 1e-14 (relative to the sum of |a| |b|) of long double sums, and the test
 * says how many elements have cpu's bits (the tensor cores' rounding is
 * NVIDIA's; docs/language.md states the tolerance).  On sm_90 and later,
 * where the device's own code issues the calls in pairs as m16n8k4
 * (ptx_mma.c), its result has the bits of sm_80's code (each an m8n8k4).
 */
START_TEST(mma_matches_cpu_and_float64)
{
    if (!gpu_or_skip("mma_matches_cpu_and_float64"))
        return;
    const int64_t sizes[2][3] = {{200, 72, 136}, {129, 33, 260}};
    for (int z = 0; z < 2; z++) {
        int64_t n = sizes[z][0], depth = sizes[z][1], m = sizes[z][2];
        int64_t sa[2] = {n, depth}, sb[2] = {depth, m}, sc[2] = {n, m};
        kjit_array a = host_array(KJIT_F64, 2, sa), b = host_array(KJIT_F64, 2, sb);
        fill_random(&a, -1, 1);
        fill_random(&b, -1, 1);
        kjit_array outs[4];
        const char *arches[4] = {NULL, NULL, "sm_75", "sm_80"};
        kjit_target where[4] = {KJIT_TARGET_CPU, KJIT_TARGET_CUDA, KJIT_TARGET_CUDA,
                                KJIT_TARGET_CUDA};
        for (int v = 0; v < 4; v++) {
            outs[v] = host_array(KJIT_F64, 2, sc);
            kjit_array arrays[3] = {a, b, outs[v]};
            matmul_tc_on(where[v], arches[v], arrays);
        }
        const double *A = a.data, *B = b.data, *cpu = outs[0].data, *gpu = outs[1].data,
                     *emulated = outs[2].data, *unpaired = outs[3].data;
        bool paired = gpu_arch_at_least(90);
        int64_t same = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                long double want = 0, scale = 0;
                for (int64_t k = 0; k < depth; k++) {
                    want += (long double)A[i * depth + k] * B[k * m + j];
                    scale += fabsl((long double)A[i * depth + k] * B[k * m + j]);
                }
                int64_t e = i * m + j;
                ck_assert_msg(memcmp(&emulated[e], &cpu[e], sizeof(double)) == 0,
                              "sm_75's mma() c[%lld, %lld] is %.17g, cpu's %.17g", (long long)i,
                              (long long)j, emulated[e], cpu[e]);
                ck_assert_msg(fabsl(gpu[e] - want) <= 1e-14L * scale,
                              "mma.sync's c[%lld, %lld] is %.17g, float64 %.17Lg", (long long)i,
                              (long long)j, gpu[e], want);
                /* on sm_90 the device's own code pairs the calls as m16n8k4
                 * (ptx_mma.c), sm_80's issues each as m8n8k4: the same bits */
                ck_assert_msg(!paired || memcmp(&gpu[e], &unpaired[e], sizeof(double)) == 0,
                              "m16n8k4's c[%lld, %lld] is %.17g, m8n8k4's %.17g", (long long)i,
                              (long long)j, gpu[e], unpaired[e]);
                same += memcmp(&gpu[e], &cpu[e], sizeof(double)) == 0;
            }
        printf("mma_matches_cpu_and_float64: %lldx%lldx%lld: mma.sync has cpu's bits in %lld of "
               "%lld elements\n", (long long)n, (long long)depth, (long long)m, (long long)same,
               (long long)(n * m));
        free(a.data);
        free(b.data);
        for (int v = 0; v < 4; v++)
            free(outs[v].data);
    }
}
END_TEST

/* grid.kern's heat equation in float64: steps explicit steps of
 * u[i] += alpha (u[i-1] - 2 u[i] + u[i+1]) with fixed ends, in place in u
 * (next: n doubles of scratch). */
static void heat_reference(double *u, double *next, int64_t n, double alpha, int steps)
{
    for (int st = 0; st < steps; st++) {
        for (int64_t i = 0; i < n; i++)
            next[i] = i > 0 && i < n - 1 ? u[i] + alpha * (u[i - 1] - 2.0 * u[i] + u[i + 1]) : u[i];
        memcpy(u, next, sizeof *u * (size_t)n);
    }
}

/* Cooperative launches of one module on two streams: the grid barrier's
 * counter is the module's, so the runtime orders them; each stream's heat
 * equation must still match float64 (interleaved on purpose). */
START_TEST(syncgrid_on_two_streams)
{
    if (!gpu_or_skip("syncgrid_on_two_streams"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_file(context, "tests/golden/exec/grid.kern", &module), KJIT_OK);
    kjit_function *heat;
    ck_assert_int_eq(kjit_module_function(module, "heat", &heat), KJIT_OK);
    enum { STREAMS = 2, ROUNDS = 6 };
    int64_t n = 64 * 256 - 37;
    int steps = 50;
    double alpha[STREAMS] = {0.3, 0.2};
    kjit_stream *streams[STREAMS];
    kjit_array host[STREAMS], dev[STREAMS], scratch[STREAMS];
    double *ref[STREAMS];
    double *next = malloc(sizeof *next * (size_t)n);
    for (int s = 0; s < STREAMS; s++) {
        ck_assert_int_eq(kjit_stream_create(context, &streams[s]), KJIT_OK);
        host[s] = host_array(KJIT_F64, 1, &n);
        ref[s] = malloc(sizeof *ref[s] * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            ((double *)host[s].data)[i] = ref[s][i] = uniform(0, 1);
        ck_assert_int_eq(kjit_device_alloc(context, KJIT_F64, 1, &n, &dev[s]), KJIT_OK);
        ck_assert_int_eq(kjit_device_alloc(context, KJIT_F64, 1, &n, &scratch[s]), KJIT_OK);
        ck_assert_int_eq(kjit_copy(context, &dev[s], &host[s], streams[s]), KJIT_OK);
    }
    uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
    for (int round = 0; round < ROUNDS; round++)
        for (int s = 0; s < STREAMS; s++) {
            kjit_arg args[4] = {kjit_arg_array(&dev[s]), kjit_arg_array(&scratch[s]),
                                kjit_arg_f64(alpha[s]), kjit_arg_i64(steps)};
            ck_assert_msg(kjit_launch(heat, grid, block, args, 4, streams[s]) == KJIT_OK, "%s",
                          kjit_last_error(context));
        }
    for (int s = 0; s < STREAMS; s++) {
        ck_assert_int_eq(kjit_copy(context, &host[s], &dev[s], streams[s]), KJIT_OK);
        ck_assert_int_eq(kjit_stream_synchronize(streams[s]), KJIT_OK);
        heat_reference(ref[s], next, n, alpha[s], ROUNDS * steps);
        ck_assert_int_eq(mismatches(&host[s], ref[s], n, 1e-12, 1e-14, "heat on two streams"), 0);
        kjit_device_free(context, &dev[s]);
        kjit_device_free(context, &scratch[s]);
        kjit_stream_destroy(streams[s]);
        free(host[s].data);
        free(ref[s]);
    }
    free(next);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(syncgrid_heat_equation_matches_float64)
{
    if (!gpu_or_skip("syncgrid_heat_equation_matches_float64"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_file(context, "tests/golden/exec/grid.kern", &module), KJIT_OK);
    kjit_function *heat;
    ck_assert_int_eq(kjit_module_function(module, "heat", &heat), KJIT_OK);
    /* twice: the barrier's counter must be ready for a second launch */
    for (int round = 0; round < 2; round++) {
        int64_t n = 64 * 256 - 100;
        int steps = 200;
        double alpha = 0.3;
        kjit_array u = host_array(KJIT_F64, 1, &n), scratch = host_array(KJIT_F64, 1, &n);
        double *ref = malloc(sizeof *ref * (size_t)n), *next = malloc(sizeof *next * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            ((double *)u.data)[i] = ref[i] = uniform(0, 1);
        heat_reference(ref, next, n, alpha, steps);
        kjit_arg args[4] = {kjit_arg_array(&u), kjit_arg_array(&scratch), kjit_arg_f64(alpha),
                            kjit_arg_i64(steps)};
        uint32_t grid[3] = {64, 1, 1}, block[3] = {256, 1, 1};
        ck_assert_msg(kjit_launch(heat, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        /* cuda contracts a * b + c into one fma: a few ulp per step */
        ck_assert_int_eq(mismatches(&u, ref, n, 1e-12, 1e-14, "heat on cuda"), 0);
        free(ref);
        free(next);
        free(u.data);
        free(scratch.data);
    }
    /* a grid that cannot be resident at once: the error names the most blocks */
    int64_t big = 1 << 20;
    kjit_array u = host_array(KJIT_F64, 1, &big), scratch = host_array(KJIT_F64, 1, &big);
    kjit_arg args[4] = {kjit_arg_array(&u), kjit_arg_array(&scratch), kjit_arg_f64(0.1),
                        kjit_arg_i64(1)};
    /* 100000 blocks of 1024 threads: no GPU holds them all at once */
    uint32_t grid[3] = {100000, 1, 1}, block[3] = {1024, 1, 1};
    ck_assert_int_eq(kjit_launch(heat, grid, block, args, 4, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "at most") &&
                      strstr(kjit_last_error(context), "syncgrid()"),
                  "%s", kjit_last_error(context));
    free(u.data);
    free(scratch.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(dynamic_shared_memory_on_the_gpu)
{
    if (!gpu_or_skip("dynamic_shared_memory_on_the_gpu"))
        return;
    int64_t n = 3 * 64;
    kjit_array arrays[2] = {host_array(KJIT_F32, 1, &n), host_array(KJIT_F32, 1, &n)};
    fill_random(&arrays[0], -10, 10);
    /* a block's worth, half of it, and 64 KiB (above the 48 KiB every kernel
     * may have without opting in) */
    size_t sizes[3] = {64 * 4, 32 * 4, 64 * 1024};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < n; i++)
            ((float *)arrays[1].data)[i] = -1000;
        launch_both_bit_exact("dynamic_shared.kern", "reverse_blocks", 3, 64, sizes[k], arrays, 2);
    }
    int64_t w = 64;
    kjit_array words = host_array(KJIT_U32, 1, &w);
    launch_both_bit_exact("dynamic_shared.kern", "aliasing", 2, 32, 24, &words, 1);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(((uint32_t *)words.data)[i], (uint32_t)(i % 4 + 1) + 24000);
    /* more than a block may have: a clear error */
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_file(context, "tests/golden/exec/dynamic_shared.kern", &module),
                     KJIT_OK);
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "reverse_blocks", &fn), KJIT_OK);
    kjit_arg args[2] = {kjit_arg_array(&arrays[0]), kjit_arg_array(&arrays[1])};
    uint32_t grid[3] = {3, 1, 1}, block[3] = {64, 1, 1};
    kjit_launch_options options;
    kjit_launch_options_init(&options);
    options.dynamic_shared_bytes = 1 << 20;
    ck_assert_int_eq(kjit_launch_ex(fn, grid, block, args, 2, &options),
                     KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "dynamic shared memory"), "%s",
                  kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
    free(arrays[0].data);
    free(arrays[1].data);
    free(words.data);
}
END_TEST

/* ------------------------------------------------- local() sized at launch */

/* tests/golden/exec/local_launch.kern on the GPU: each thread's slice of the
 * launch's scratch (interleaved across the grid's threads), sized from
 * scalar parameters and from an array's extent; the refusal as on cpu. */
START_TEST(local_sized_at_launch_on_the_gpu)
{
    if (!gpu_or_skip("local_sized_at_launch_on_the_gpu"))
        return;
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_file(context, "tests/golden/exec/local_launch.kern", &module),
                     KJIT_OK);
    kjit_function *fn, *tri, *rev;
    ck_assert_int_eq(kjit_module_function(module, "prefix_windows", &fn), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "tridiag_columns", &tri), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "reverse_in_local", &rev), KJIT_OK);
    int64_t n = 1000;
    kjit_array x = host_array(KJIT_I32, 1, &n), out = host_array(KJIT_I64, 1, &n);
    for (int64_t i = 0; i < n; i++)
        ((int32_t *)x.data)[i] = (int32_t)(i * 7 % 13);
    uint32_t grid[3] = {8, 1, 1}, block[3] = {128, 1, 1};
    for (int w = 1; w <= 33; w += 16) {
        poison(&out);
        kjit_arg args[4] = {kjit_arg_array(&x), kjit_arg_array(&out), kjit_arg_i32(w),
                            kjit_arg_i64(3)};
        ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int64_t i = 0; i < n; i++) {
            int64_t want = (3 + w % 3) * 1000;
            for (int k = 0; k < w; k++)
                want += ((int32_t *)x.data)[(i + k) % n];
            ck_assert_msg(((int64_t *)out.data)[i] == want, "w %d: out[%lld] = %lld, want %lld",
                          w, (long long)i, (long long)((int64_t *)out.data)[i], (long long)want);
        }
    }
    kjit_arg bad[4] = {kjit_arg_array(&x), kjit_arg_array(&out), kjit_arg_i32(200000),
                       kjit_arg_i64(3)};
    ck_assert_int_eq(kjit_launch(fn, grid, block, bad, 4, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "512 KiB"), "%s", kjit_last_error(context));
    /* the columns of a 300 x 200 system */
    int64_t shape[2] = {300, 200};
    kjit_array d = host_array(KJIT_F64, 2, shape), sol = host_array(KJIT_F64, 2, shape);
    fill_random(&d, -1, 1);
    kjit_arg targs[2] = {kjit_arg_array(&d), kjit_arg_array(&sol)};
    uint32_t tgrid[3] = {4, 1, 1}, tblock[3] = {64, 1, 1};
    ck_assert_msg(kjit_launch(tri, tgrid, tblock, targs, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    const double *D = d.data, *S = sol.data;
    for (int i = 0; i < 300; i++)
        for (int j = 0; j < 200; j++) {
            double r = 4 * S[i * 200 + j] - (i > 0 ? S[(i - 1) * 200 + j] : 0) -
                       (i < 299 ? S[(i + 1) * 200 + j] : 0) - D[i * 200 + j];
            ck_assert_msg(fabs(r) < 1e-12, "residual %g at (%d, %d)", r, i, j);
        }
    /* with a barrier */
    int64_t m = 256;
    kjit_array fx = host_array(KJIT_F32, 1, &m), fo = host_array(KJIT_F32, 1, &m);
    fill_random(&fx, -10, 10);
    kjit_arg rargs[3] = {kjit_arg_array(&fx), kjit_arg_array(&fo), kjit_arg_i32(33)};
    uint32_t rgrid[3] = {2, 1, 1}, rblock[3] = {128, 1, 1};
    ck_assert_msg(kjit_launch(rev, rgrid, rblock, rargs, 3, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int i = 0; i < 256; i++) {
        float want = (((float *)fx.data)[i] + 32.0f) - 32.0f;
        ck_assert_msg(((float *)fo.data)[i] == want, "out[%d] = %g, want %g", i,
                      ((float *)fo.data)[i], want);
    }
    kjit_module_free(module);
    kjit_context_destroy(context);
    free(x.data), free(out.data), free(d.data), free(sol.data), free(fx.data), free(fo.data);
}
END_TEST

/* -------------------------------------- @vectorize of several outputs on the GPU */

/* tests/golden/vectorize/several_outputs.kern on cuda against cpu: host
 * outputs staged and every one copied back (outputs 1.. go to the kernel
 * after the inputs), strided operands, scalars alone (0-d outputs). */
START_TEST(several_outputs_on_the_gpu)
{
    if (!gpu_or_skip("several_outputs_on_the_gpu"))
        return;
    int64_t shape[2] = {64, 100}, row = 100, n = 64 * 100;
    kjit_array a = host_array(KJIT_I64, 2, shape), b = host_array(KJIT_I64, 1, &row);
    for (int64_t i = 0; i < n; i++)
        ((int64_t *)a.data)[i] = i * 37 % 1001 - 500;
    for (int64_t j = 0; j < row; j++)
        ((int64_t *)b.data)[j] = (j % 2 ? -1 : 1) * (j % 13 + 1);
    kjit_array outs[2][2];
    kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_CUDA};
    for (int t = 0; t < 2; t++) {
        kjit_context *context = open_context(targets[t]);
        kjit_module *module;
        ck_assert_int_eq(kjit_compile_file(context, "tests/golden/vectorize/several_outputs.kern",
                                           &module), KJIT_OK);
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "floor_divmod", &fn), KJIT_OK);
        outs[t][0] = host_array(KJIT_I64, 2, shape);
        outs[t][1] = host_array(KJIT_I64, 2, shape);
        poison(&outs[t][0]);
        poison(&outs[t][1]);
        kjit_arg args[4] = {kjit_arg_array(&a), kjit_arg_array(&b), kjit_arg_array(&outs[t][0]),
                            kjit_arg_array(&outs[t][1])};
        ck_assert_msg(kjit_call(fn, args, 4, NULL, NULL) == KJIT_OK, "%s on %s",
                      kjit_last_error(context), kjit_target_name(targets[t]));
        /* scalars alone: 0-d outputs */
        int64_t q = -1, r = -1;
        kjit_array Q = kjit_array_make(&q, KJIT_I64, 0, NULL), R = kjit_array_make(&r, KJIT_I64, 0, NULL);
        kjit_arg sargs[4] = {kjit_arg_i64(-17), kjit_arg_i64(5), kjit_arg_array(&Q),
                             kjit_arg_array(&R)};
        ck_assert_msg(kjit_call(fn, sargs, 4, NULL, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_msg(q == -4 && r == 3, "%s: divmod(-17, 5) = (%lld, %lld)",
                      kjit_target_name(targets[t]), (long long)q, (long long)r);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(memcmp(outs[0][k].data, outs[1][k].data, (size_t)n * 8) == 0,
                      "output %d differs between cpu and cuda", k);
        free(outs[0][k].data);
        free(outs[1][k].data);
    }
    free(a.data);
    free(b.data);
}
END_TEST

/* ------------------------------------------------- print on the GPU */

/* print(...) in a kernel and its device function is vprintf: the lines reach
 * the process's stdout (fd 1) when the host waits, each whole, the same
 * lines as on cpu in some order. */
START_TEST(print_reaches_stdout_whole)
{
    if (!gpu_or_skip("print_reaches_stdout_whole"))
        return;
    char path[] = "/tmp/kjit-print-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    kjit_context *context = open_context(KJIT_TARGET_CUDA);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_file(context, "tests/golden/print/kernel.kern", &module),
                     KJIT_OK);
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "threads", &fn), KJIT_OK);
    int64_t n = 6;
    kjit_array a = host_array(KJIT_F32, 1, &n);
    for (int i = 0; i < 6; i++)
        ((float *)a.data)[i] = (float)i;
    kjit_arg args[1] = {kjit_arg_array(&a)};
    uint32_t grid[3] = {2, 1, 1}, block[3] = {4, 1, 1};
    ck_assert_int_eq(kjit_launch(fn, grid, block, args, 1, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char text[8192] = "";
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    ck_assert_int_gt(got, 0);
    text[got] = 0;
    ck_assert_msg(strstr(text, "thread 1 of block 1 sees 5\n"), "%s", text);
    ck_assert_msg(strstr(text, "  element 3 holds 3.0\n"), "%s", text);
    ck_assert_msg(strstr(text, "block 1 passed the barrier\n"), "%s", text);
    int lines = 0;
    for (char *c = text; *c; c++)
        lines += *c == '\n';
    ck_assert_int_eq(lines, 14);
    kjit_module_free(module);
    kjit_context_destroy(context);
    free(a.data);
}
END_TEST

/* ------------------------------------------- issue 16 on the GPU */

/* test_complex.c and test_kernels_cpu.c hold these checks; they run here on
 * cuda, there on cpu and parallel. */
void kj_test_complex_on(kjit_target target);
void kj_test_local_kernel_on(kjit_target target, const char *name, int64_t count,
                             uint32_t blocks, uint32_t threads, double rtol, bool may_fail);

/* Smith's complex division and hypot-based abs: the c64 and c128 cases of
 * issue 16, a Butterworth response, and the normwise error of random quotients
 * and the ULP error of abs against exact references. */
START_TEST(complex_division_and_abs_match_exact)
{
    if (!gpu_or_skip("complex_division_and_abs_match_exact"))
        return;
    kj_test_complex_on(KJIT_TARGET_CUDA);
}
END_TEST

/* local() arrays of 128 KiB per thread with syncthreads() (the cpu target's
 * fibers crashed on these), and of 512 KiB, CUDA's limit, which a GPU may
 * refuse to reserve for all its resident threads: then only a clean error is
 * asked for.  FMA contraction changes the sums' roundings: 1e-11 relative. */
START_TEST(local_arrays_with_barriers)
{
    if (!gpu_or_skip("local_arrays_with_barriers"))
        return;
    kj_test_local_kernel_on(KJIT_TARGET_CUDA, "local_128k", 16384, 1, 64, 1e-11, false);
    kj_test_local_kernel_on(KJIT_TARGET_CUDA, "local_128k", 16384, 4, 128, 1e-11, false);
    kj_test_local_kernel_on(KJIT_TARGET_CUDA, "local_512k", 32768, 2, 32, 1e-11, true);
    kj_test_local_kernel_on(KJIT_TARGET_CUDA, "local_512k_no_barrier", 65536, 2, 32, 1e-11, true);
}
END_TEST

/* ------------------------------------------------------- cancellation */

static const char cancel_source[] =
    "@kernel\n"
    "fn spin(out: i32[], stop: i32) {\n"
    "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    let k = i % 7;\n"
    "    while k != stop {\n"
    "        k = (k + 1) % 1000;\n"
    "    }\n"
    "    out[i] = k;\n"
    "}\n";

typedef struct CancelLater {
    kjit_context *context;
} CancelLater;

static void *cancel_after_200ms(void *arg)
{
    CancelLater *later = arg;
    struct timespec pause = {0, 200 * 1000000};
    nanosleep(&pause, NULL);
    kjit_context_cancel(later->context);
    return NULL;
}

static double seconds_from(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* One launch of spin over host memory (kjit_launch copies it in and out and
 * waits): stop -1 never ends. */
static kjit_status launch_spin(kjit_function *fn, int32_t *out, int count, int32_t stop)
{
    int64_t shape[1] = {count};
    kjit_array array = kjit_array_make(out, KJIT_I32, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&array), kjit_arg_i32(stop)};
    uint32_t grid[3] = {(uint32_t)(count / 128), 1, 1}, block[3] = {128, 1, 1};
    return kjit_launch(fn, grid, block, args, 2, NULL);
}

START_TEST(cancel_stops_an_endless_kernel)
{
    if (!gpu_or_skip("cancel_stops_an_endless_kernel"))
        return;
    enum { N = 128 * 264 };
    static int32_t out[N];
    for (int timed = 0; timed < 2; timed++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = KJIT_TARGET_CUDA;
        options.cancellable = 1;
        options.time_limit_s = timed ? 0.3 : 0;
        kjit_context *context = NULL;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        kjit_module *module = NULL;
        kjit_function *fn = compile(context, cancel_source, "spin", &module);
        ck_assert_msg(launch_spin(fn, out, N, 3) == KJIT_OK, "%s", kjit_last_error(context));
        ck_assert_int_eq(out[N - 1], 3);

        pthread_t thread;
        CancelLater later = {context};
        if (!timed)
            ck_assert_int_eq(pthread_create(&thread, NULL, cancel_after_200ms, &later), 0);
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        kjit_status status = launch_spin(fn, out, N, -1);
        kjit_status synced = kjit_synchronize(context);
        double took = seconds_from(&start);
        if (!timed)
            pthread_join(thread, NULL);
        kjit_status want = timed ? KJIT_ERROR_TIMEOUT : KJIT_ERROR_CANCELLED;
        ck_assert_msg(status == want || (status == KJIT_OK && synced == KJIT_ERROR_CANCELLED),
                      "%s: launch %s, synchronize %s: %s", timed ? "time limit" : "cancel",
                      kjit_status_name(status), kjit_status_name(synced), kjit_last_error(context));
        ck_assert_msg(took < 10, "the kernel stopped %.2f s after it started", took);
        /* the GPU context goes on: the request is not kept */
        ck_assert_msg(launch_spin(fn, out, N, 500) == KJIT_OK, "after the cancel: %s",
                      kjit_last_error(context));
        ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
        for (int i = 0; i < N; i += 101)
            ck_assert_int_eq(out[i], 500);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

Suite *suite_cuda(void)
{
    Suite *suite = suite_create("cuda");
    /* Only dlopen here: cuInit in the parent would break the forked tests. */
    void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) {
        const char *why = dlerror();
        printf("cuda: skipped: no CUDA driver (libcuda.so.1: %s)\n", why ? why : "not found");
        return suite;
    }
    dlclose(driver);
    seed_rng();
    TCase *tcase = tcase_create("cuda");
    tcase_set_timeout(tcase, 300);
    tcase_add_test(tcase, elementwise_seeds_match_float64);
    tcase_add_test(tcase, seed_kernels_match_float64);
    tcase_add_test(tcase, every_example_agrees_with_cpu);
    tcase_add_test(tcase, device_arrays_stay_on_the_device);
    tcase_add_test(tcase, streams_and_events);
    tcase_add_test(tcase, a_fault_names_the_kernel_and_the_host_goes_on);
    tcase_add_test(tcase, out_of_memory_is_reported);
    tcase_add_test(tcase, contiguous_and_strided_kernel_variants_agree);
    tcase_add_test(tcase, reductions_match_the_cpu);
    tcase_add_test(tcase, warp_collectives_match_cpu_bit_for_bit);
    tcase_add_test(tcase, mma_matches_cpu_and_float64);
    tcase_add_test(tcase, syncgrid_heat_equation_matches_float64);
    tcase_add_test(tcase, syncgrid_on_two_streams);
    tcase_add_test(tcase, dynamic_shared_memory_on_the_gpu);
    tcase_add_test(tcase, local_sized_at_launch_on_the_gpu);
    tcase_add_test(tcase, several_outputs_on_the_gpu);
    tcase_add_test(tcase, print_reaches_stdout_whole);
    tcase_add_test(tcase, device_functions_and_atomics_match_reference);
    tcase_add_test(tcase, complex_division_and_abs_match_exact);
    tcase_add_test(tcase, local_arrays_with_barriers);
    tcase_add_test(tcase, checked_mode_reports_and_the_gpu_stays_usable);
    tcase_add_test(tcase, cancel_stops_an_endless_kernel);
    suite_add_tcase(suite, tcase);
    return suite;
}
