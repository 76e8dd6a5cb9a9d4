/*
 * test_api.c: the public API (kjit.h) on the cpu and parallel targets.
 *
 * Contexts and their options, compile errors as a status and a message with
 * file:line:col (through the callback too), a context that stays usable after
 * them, function lookup and signatures, plain functions with converted scalar
 * arguments, kernels whose arguments are checked, device memory, streams and
 * events on the host, and every seed example in examples/ run against
 * a float64 reference computed here in C on random inputs.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"
#include "rng.h"

static uint64_t rng = 0x853c49e6748fea9bULL;
static kjit_context *make_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

/* --------------------------------------------------------------- contexts */

START_TEST(contexts_and_names)
{
    kjit_options options;
    kjit_options_init(&options);
    ck_assert_int_eq(options.target, KJIT_TARGET_AUTO);
    ck_assert_int_eq(options.opt_level, 3);
    ck_assert_int_eq(options.device, -1);
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_target settled = kjit_context_target(context);
    ck_assert(settled == KJIT_TARGET_CPU || settled == KJIT_TARGET_CUDA);
    ck_assert_str_eq(kjit_last_error(context), "");
    kjit_context_destroy(context);

    context = make_context(KJIT_TARGET_PARALLEL);
    ck_assert_int_eq(kjit_context_target(context), KJIT_TARGET_PARALLEL);
    kjit_context_destroy(context);

    ck_assert_str_eq(kjit_target_name(KJIT_TARGET_PARALLEL), "parallel");
    ck_assert_str_eq(kjit_status_name(KJIT_ERROR_SHAPE), "shape error");
    ck_assert_str_eq(kjit_dtype_name(KJIT_C128), "c128");
    ck_assert_uint_eq(kjit_dtype_size(KJIT_C64), 8);
    ck_assert_uint_eq(kjit_dtype_size(KJIT_BOOL), 1);

    /* without a GPU, cuda is a clear error and no context */
    char reason[256];
    if (kjit_cuda_available(reason, sizeof reason) != KJIT_OK) {
        options.target = KJIT_TARGET_CUDA;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_ERROR_NO_DEVICE);
        ck_assert_ptr_null(context);
        ck_assert(strlen(kjit_last_error(NULL)) > 0);
    }
}
END_TEST

/* ------------------------------------------------------- compile errors */

typedef struct Seen {
    int count;
    char text[1024];
} Seen;

static void remember(void *user, const char *text)
{
    Seen *seen = user;
    seen->count++;
    if (seen->count == 1)
        snprintf(seen->text, sizeof seen->text, "%s", text);
}

START_TEST(compile_errors_are_values)
{
    Seen seen = {0};
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.on_diagnostic = remember;
    options.diagnostic_user = &seen;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);

    const char *bad = "fn f(x: f64) -> f64 {\n    return x + y;\n}\n"
                      "fn g(x: f64) -> f32 {\n    return undefined_name;\n}\n";
    kjit_module *module = (kjit_module *)0x1;
    ck_assert_int_eq(kjit_compile_string(context, "bad.kern", bad, &module), KJIT_ERROR_COMPILE);
    ck_assert_ptr_null(module);
    const char *message = kjit_last_error(context);
    ck_assert_msg(strstr(message, "bad.kern:2:16"), "%s", message);
    ck_assert_msg(strstr(message, "bad.kern:5:12"), "several errors are reported: %s", message);
    ck_assert_msg(strstr(message, "^"), "the caret line: %s", message);
    ck_assert_int_ge(seen.count, 2);
    ck_assert_msg(strstr(seen.text, "bad.kern:2:16"), "%s", seen.text);

    ck_assert_int_eq(kjit_compile_file(context, "/nonexistent/nothing.kern", &module),
                     KJIT_ERROR_IO);
    ck_assert_msg(strstr(kjit_last_error(context), "nothing.kern"), "%s", kjit_last_error(context));

    /* the context still works */
    ck_assert_int_eq(kjit_compile_string(context, "good.kern",
                                         "fn twice(x: f64) -> f64 { return 2 * x; }", &module),
                     KJIT_OK);
    ck_assert_str_eq(kjit_last_error(context), "");
    kjit_function *twice;
    ck_assert_int_eq(kjit_module_function(module, "twice", &twice), KJIT_OK);
    kjit_arg arg = kjit_arg_f64(21);
    kjit_array result;
    ck_assert_int_eq(kjit_call(twice, &arg, 1, NULL, &result), KJIT_OK);
    ck_assert(*(double *)result.data == 42.0);
    kjit_array_free(&result);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ---------------------------------------------------- functions, kernels */

static const char api_source[] =
    "fn hypot2(x: f64, y: f64) -> f64 { return x * x + y * y; }\n"
    "fn scaled(n: i32, s: f32) -> f32 { return f32(n) * s; }\n"
    "fn csq(z: c128) -> c128 { return z * z; }\n"
    "fn total(a: f64[]) -> f64 {\n"
    "    let s = 0.0;\n"
    "    for i in range(len(a)) { s += a[i]; }\n"
    "    return s;\n"
    "}\n"
    "@vectorize\n"
    "fn lerp3(a: f32, b: f32, t: f32) -> f32 { return a + (b - a) * t; }\n"
    "@kernel\n"
    "fn saxpy(a: f32, x: f32[], y: f32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { y[i] = a * x[i] + y[i]; }\n"
    "}\n";

START_TEST(lookup_and_signatures)
{
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "api.kern", api_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    ck_assert_int_eq(kjit_module_function_count(module), 6);
    ck_assert_str_eq(kjit_module_function_name(module, 0), "hypot2");
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "nope", &fn), KJIT_ERROR_NOT_FOUND);
    ck_assert_msg(strstr(kjit_last_error(context), "'nope'") &&
                      strstr(kjit_last_error(context), "saxpy"),
                  "%s", kjit_last_error(context));

    ck_assert_int_eq(kjit_module_function(module, "saxpy", &fn), KJIT_OK);
    ck_assert_int_eq(kjit_function_kind_of(fn), KJIT_FUNCTION_KERNEL);
    ck_assert_str_eq(kjit_function_name(fn), "saxpy");
    ck_assert_str_eq(kjit_function_signature(fn, 0), "(f32, f32[], f32[])");
    kjit_dtype dtype;
    int ndim;
    ck_assert_int_eq(kjit_function_param(fn, 0, 1, &dtype, &ndim), KJIT_OK);
    ck_assert_int_eq(dtype, KJIT_F32);
    ck_assert_int_eq(ndim, 1);
    ck_assert_int_ne(kjit_function_result(fn, 0, &dtype), KJIT_OK);

    ck_assert_int_eq(kjit_module_function(module, "lerp3", &fn), KJIT_OK);
    ck_assert_int_eq(kjit_function_kind_of(fn), KJIT_FUNCTION_VECTORIZE);
    ck_assert_int_eq(kjit_function_signature_count(fn), 1);
    ck_assert_int_eq(kjit_function_param_count(fn), 3);
    ck_assert_str_eq(kjit_function_signature(fn, 0), "f32(f32, f32, f32)");
    ck_assert_int_eq(kjit_function_result(fn, 0, &dtype), KJIT_OK);
    ck_assert_int_eq(dtype, KJIT_F32);
    kjit_module_free(module);

    /* Which signature a call takes is chosen by the arrays' element types. */
    static const char two_signatures[] =
        "@vectorize(f32(f32, f32), f64(f64, f64))\nfn mul(a, b) { return a * b; }\n";
    ck_assert_int_eq(kjit_compile_string(context, "mul.kern", two_signatures, &module), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "mul", &fn), KJIT_OK);
    double f64_data[3] = {1, 2, 3};
    float f32_data[3] = {1, 2, 3};
    int8_t i8_data[3] = {1, 2, 3};
    int64_t three = 3;
    kjit_array f64_array = kjit_array_make(f64_data, KJIT_F64, 1, &three);
    kjit_array f32_array = kjit_array_make(f32_data, KJIT_F32, 1, &three);
    kjit_array i8_array = kjit_array_make(i8_data, KJIT_I8, 1, &three);
    int signature = -1;
    kjit_arg f64_args[2] = {kjit_arg_array(&f64_array), kjit_arg_f64(2.0)};
    ck_assert_int_eq(kjit_function_match(fn, f64_args, 2, &signature), KJIT_OK);
    ck_assert_str_eq(kjit_function_signature(fn, signature), "f64(f64, f64)");
    kjit_arg f32_args[2] = {kjit_arg_f64(2.0), kjit_arg_array(&f32_array)};
    ck_assert_int_eq(kjit_function_match(fn, f32_args, 2, &signature), KJIT_OK);
    ck_assert_str_eq(kjit_function_signature(fn, signature), "f32(f32, f32)");
    kjit_arg i8_args[2] = {kjit_arg_array(&i8_array), kjit_arg_array(&i8_array)};
    ck_assert_int_eq(kjit_function_match(fn, i8_args, 2, &signature), KJIT_ERROR_TYPE);
    ck_assert_msg(strstr(kjit_last_error(context), "i8"), "%s", kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(plain_functions_convert_scalars)
{
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "api.kern", api_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *fn;
    kjit_array result;
    for (int trial = 0; trial < 20; trial++) {
        double x = rng_uniform(&rng, -100, 100), y = rng_uniform(&rng, -100, 100);
        ck_assert_int_eq(kjit_module_function(module, "hypot2", &fn), KJIT_OK);
        kjit_arg args[2] = {kjit_arg_f64(x), kjit_arg_i64((int64_t)y)};
        ck_assert_msg(kjit_call(fn, args, 2, NULL, &result) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(result.ndim, 0);
        ck_assert_int_eq(result.dtype, KJIT_F64);
        double want = x * x + (double)(int64_t)y * (double)(int64_t)y;
        ck_assert(fabs(*(double *)result.data - want) <= 1e-15 * fabs(want) + 1e-300);
        kjit_array_free(&result);

        ck_assert_int_eq(kjit_module_function(module, "scaled", &fn), KJIT_OK);
        int n = (int)(rng_next(&rng) % 1000);
        float s = (float)rng_uniform(&rng, -2, 2);
        kjit_arg sargs[2] = {kjit_arg_i64(n), kjit_arg_f64(s)};
        ck_assert_int_eq(kjit_call(fn, sargs, 2, NULL, &result), KJIT_OK);
        ck_assert_int_eq(result.dtype, KJIT_F32);
        ck_assert(*(float *)result.data == (float)n * s);
        kjit_array_free(&result);
    }
    /* complex in, complex out */
    ck_assert_int_eq(kjit_module_function(module, "csq", &fn), KJIT_OK);
    kjit_arg z = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_C128};
    z.value.c[0] = 1.5;
    z.value.c[1] = -2.0;
    ck_assert_int_eq(kjit_call(fn, &z, 1, NULL, &result), KJIT_OK);
    ck_assert(((double *)result.data)[0] == 1.5 * 1.5 - 4.0);
    ck_assert(((double *)result.data)[1] == 2 * 1.5 * -2.0);
    kjit_array_free(&result);
    /* ... but a complex does not silently become real */
    ck_assert_int_eq(kjit_module_function(module, "hypot2", &fn), KJIT_OK);
    kjit_arg zz[2] = {z, z};
    ck_assert_int_eq(kjit_call(fn, zz, 2, NULL, &result), KJIT_ERROR_TYPE);
    ck_assert_msg(strstr(kjit_last_error(context), "argument 0"), "%s", kjit_last_error(context));

    /* an array argument of a plain function */
    ck_assert_int_eq(kjit_module_function(module, "total", &fn), KJIT_OK);
    double values[100], want = 0;
    for (int i = 0; i < 100; i++)
        want += values[i] = rng_uniform(&rng, -1, 1);
    int64_t shape[1] = {100};
    kjit_array a = kjit_array_make(values, KJIT_F64, 1, shape);
    kjit_arg arg = kjit_arg_array(&a);
    ck_assert_int_eq(kjit_call(fn, &arg, 1, NULL, &result), KJIT_OK);
    ck_assert(fabs(*(double *)result.data - want) < 1e-12);
    kjit_array_free(&result);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

static void saxpy_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "api.kern", api_source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "saxpy", &fn), KJIT_OK);
    enum { N = 100003 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)),
          *want = malloc(N * sizeof(float)), *y0 = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        x[i] = (float)rng_uniform(&rng, -1, 1);
        y[i] = (float)rng_uniform(&rng, -1, 1);
        y0[i] = y[i];
        want[i] = (float)(1.5 * (double)x[i] + (double)y[i]);
    }
    int64_t n = N;
    kjit_array X = kjit_array_make(x, KJIT_F32, 1, &n), Y = kjit_array_make(y, KJIT_F32, 1, &n);
    kjit_arg args[3] = {kjit_arg_f64(1.5), kjit_arg_array(&X), kjit_arg_array(&Y)};
    uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 3, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    /* a*x + y in f32 rounds at most twice: within one f32 epsilon of
     * |a x| + |y| of the float64 value (cancellation makes a relative bound
     * on the result itself meaningless). */
    for (int i = 0; i < N; i++) {
        double scale = 1.5 * fabs((double)x[i]) + fabs((double)y0[i]);
        ck_assert_msg(fabs((double)y[i] - (double)want[i]) <= 1.2e-7 * scale, "%d: %g vs %g", i,
                      y[i], want[i]);
    }

    /* argument checks: rank, element type, count, kind */
    double d[4];
    int64_t four = 4, two[2] = {2, 2};
    kjit_array D = kjit_array_make(d, KJIT_F64, 1, &four), M = kjit_array_make(x, KJIT_F32, 2, two);
    args[2] = kjit_arg_array(&D);
    ck_assert_int_eq(kjit_launch(fn, grid, block, args, 3, NULL), KJIT_ERROR_TYPE);
    ck_assert_msg(strstr(kjit_last_error(context), "argument 2 (y) must be a f32[] array, not f64[]"),
                  "%s", kjit_last_error(context));
    args[2] = kjit_arg_array(&M);
    ck_assert_int_eq(kjit_launch(fn, grid, block, args, 3, NULL), KJIT_ERROR_TYPE);
    ck_assert_int_eq(kjit_launch(fn, grid, block, args, 2, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    uint32_t huge[3] = {1024, 2, 1};
    args[2] = kjit_arg_array(&Y);
    ck_assert_int_eq(kjit_launch(fn, grid, huge, args, 3, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(kjit_call(fn, args, 3, NULL, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "kjit_launch"), "%s", kjit_last_error(context));
    free(x);
    free(y);
    free(want);
    free(y0);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

/* A module-level constant array through the C API: a @vectorize lookup
 * over its 2-D table, on cpu and parallel; a write to it is a compile
 * error, not a crash in read-only memory. */
START_TEST(const_array_lookup)
{
    const char *source =
        "const W: f64[2, 3] = [[0.5, 1, 2], [-1, 3.25, 1e10]];\n"
        "@vectorize fn pick(r: i32, c: i32) -> f64 { return W[r, c] * f64(W.shape[1]); }\n";
    kjit_target targets[] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    double table[2][3] = {{0.5, 1, 2}, {-1, 3.25, 1e10}};
    for (int t = 0; t < 2; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "table.kern", source, &module) == KJIT_OK,
                      "%s", kjit_last_error(context));
        kjit_function *pick;
        ck_assert_int_eq(kjit_module_function(module, "pick", &pick), KJIT_OK);
        enum { N = 600 };
        int32_t r[N], c[N];
        for (int i = 0; i < N; i++) {
            r[i] = i % 2;
            c[i] = (i / 2) % 3;
        }
        int64_t n = N;
        kjit_array R = kjit_array_make(r, KJIT_I32, 1, &n), C = kjit_array_make(c, KJIT_I32, 1, &n);
        kjit_arg args[2] = {kjit_arg_array(&R), kjit_arg_array(&C)};
        kjit_array result;
        ck_assert_msg(kjit_call(pick, args, 2, NULL, &result) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int i = 0; i < N; i++)
            ck_assert_msg(((double *)result.data)[i] == 3 * table[r[i]][c[i]], "element %d", i);
        kjit_array_free(&result);
        kjit_module_free(module);

        module = (kjit_module *)0x1;
        ck_assert_int_eq(kjit_compile_string(context, "write.kern",
                                             "const T: i32[2] = [1, 2];\n"
                                             "@kernel fn k(o: i32[]) { T[0] = o[0]; }\n",
                                             &module),
                         KJIT_ERROR_COMPILE);
        ck_assert_ptr_null(module);
        ck_assert_msg(strstr(kjit_last_error(context), "the constant array 'T', which "
                                                       "is read-only") != NULL, "%s",
                      kjit_last_error(context));
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(kernel_launch_cpu)
{
    saxpy_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(kernel_launch_parallel)
{
    saxpy_on(KJIT_TARGET_PARALLEL);
}
END_TEST

START_TEST(device_memory_streams_events_on_host)
{
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_string(context, "api.kern", api_source, &module), KJIT_OK);
    kjit_function *lerp;
    ck_assert_int_eq(kjit_module_function(module, "lerp3", &lerp), KJIT_OK);
    enum { N = 5000 };
    float a[N], b[N], back[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)rng_uniform(&rng, -5, 5);
        b[i] = (float)rng_uniform(&rng, -5, 5);
    }
    int64_t n = N;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n), B = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_array dA, dB, dOut;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, &n, &dA), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, &n, &dB), KJIT_OK);
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_F32, 1, &n, &dOut), KJIT_OK);
    ck_assert_int_eq(dA.memory, KJIT_MEMORY_DEVICE);
    kjit_stream *stream;
    ck_assert_int_eq(kjit_stream_create(context, &stream), KJIT_OK);
    kjit_event *start, *end;
    ck_assert_int_eq(kjit_event_record(context, stream, &start), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &dA, &A, stream), KJIT_OK);
    ck_assert_int_eq(kjit_copy(context, &dB, &B, stream), KJIT_OK);
    kjit_arg args[3] = {kjit_arg_array(&dA), kjit_arg_array(&dB), kjit_arg_f64(0.25)};
    ck_assert_msg(kjit_call_async(lerp, args, 3, &dOut, stream) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_array Back = kjit_array_make(back, KJIT_F32, 1, &n);
    ck_assert_int_eq(kjit_copy(context, &Back, &dOut, stream), KJIT_OK);
    ck_assert_int_eq(kjit_stream_synchronize(stream), KJIT_OK);
    ck_assert_int_eq(kjit_event_record(context, stream, &end), KJIT_OK);
    double ms = -1;
    ck_assert_int_eq(kjit_event_elapsed(start, end, &ms), KJIT_OK);
    ck_assert(ms >= 0 && ms < 60000);
    /* a + (b - a) * t: three f32 roundings against the float64 value */
    for (int i = 0; i < N; i++) {
        double want = (double)a[i] + ((double)b[i] - (double)a[i]) * 0.25;
        ck_assert_msg(fabs(back[i] - want) <= 4e-7 * (fabs(a[i]) + fabs(b[i])), "%d", i);
    }
    /* copies check shapes */
    int64_t m = N - 1;
    kjit_array Short = kjit_array_make(back, KJIT_F32, 1, &m);
    ck_assert_int_eq(kjit_copy(context, &Short, &dOut, NULL), KJIT_ERROR_SHAPE);
    kjit_event_destroy(start);
    kjit_event_destroy(end);
    kjit_stream_destroy(stream);
    ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &dA), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &dB), KJIT_OK);
    ck_assert_int_eq(kjit_device_free(context, &dOut), KJIT_OK);
    ck_assert_ptr_null(dA.data);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

/* ---------------------------------------------- sizes and launch limits */

/* A view of `ndim` extents that repeats one element (every stride 0), as
 * NumPy's broadcast_to makes. */
static kjit_array repeated(void *data, kjit_dtype dtype, int ndim, const int64_t *shape)
{
    kjit_array a = kjit_array_make(data, dtype, 1, (int64_t[]){1});
    a.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        a.shape[d] = shape[d];
        a.strides[d] = 0;
    }
    return a;
}

static void assert_error(kjit_context *context, kjit_status got, kjit_status want,
                         const char *text)
{
    ck_assert_msg(got == want, "status %s, not %s: %s", kjit_status_name(got),
                  kjit_status_name(want), kjit_last_error(context));
    ck_assert_msg(strstr(kjit_last_error(context), text), "'%s' lacks '%s'",
                  kjit_last_error(context), text);
}

START_TEST(sizes_that_overflow)
{
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    /* device memory: 2^64 elements is no array; 2^62 bytes is no memory */
    int64_t square[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
    kjit_array device;
    assert_error(context, kjit_device_alloc(context, KJIT_U8, 2, square, &device),
                 KJIT_ERROR_INVALID_ARGUMENT, "more than 2^63 - 1 bytes");
    ck_assert_ptr_null(device.data);
    int64_t vast[2] = {(int64_t)1 << 40, (int64_t)1 << 22};
    assert_error(context, kjit_device_alloc(context, KJIT_U8, 2, vast, &device),
                 KJIT_ERROR_OUT_OF_MEMORY, "out of memory");
    int64_t negative = -1;
    ck_assert_int_eq(kjit_device_alloc(context, KJIT_U8, 1, &negative, &device), KJIT_ERROR_SHAPE);

    kjit_module *module;
    ck_assert_int_eq(kjit_compile_string(context, "api.kern", api_source, &module), KJIT_OK);
    kjit_function *lerp;
    ck_assert_int_eq(kjit_module_function(module, "lerp3", &lerp), KJIT_OK);
    float one = 1;
    kjit_array result = {0};
    /* a broadcast view of 2^64 elements: its count does not fit */
    kjit_array huge = repeated(&one, KJIT_F32, 2, square);
    ck_assert_int_eq(kjit_array_size(&huge), -1);
    kjit_arg args[3] = {kjit_arg_array(&huge), kjit_arg_f64(1), kjit_arg_f64(0.5)};
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT,
                 "argument 0 of lerp3: the shape (4294967296,4294967296) of f32 elements");
    ck_assert_ptr_null(result.data);
    /* 2^62 elements fit, their 2^64 bytes of output do not */
    int64_t half[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
    kjit_array wide = repeated(&one, KJIT_U8, 2, half);
    kjit_array wide_f32 = repeated(&one, KJIT_F32, 2, half);
    args[0] = kjit_arg_array(&wide_f32);
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT,
                 "more than 2^63 - 1 bytes");
    (void)wide;
    /* 2^60 elements, 2^62 bytes of output: a size, but no memory for it */
    int64_t big[2] = {(int64_t)1 << 30, (int64_t)1 << 30};
    kjit_array big_view = repeated(&one, KJIT_F32, 2, big);
    args[0] = kjit_arg_array(&big_view);
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_OUT_OF_MEMORY,
                 "out of memory");
    /* two views that fit, whose broadcast does not */
    int64_t column[2] = {(int64_t)1 << 32, 1}, row[2] = {1, (int64_t)1 << 32};
    kjit_array a = repeated(&one, KJIT_F32, 2, column), b = repeated(&one, KJIT_F32, 2, row);
    args[0] = kjit_arg_array(&a);
    args[1] = kjit_arg_array(&b);
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT,
                 "broadcast shape (4294967296,4294967296)");
    /* a view whose strides reach past 2^63 bytes */
    int64_t n = 4;
    kjit_array far = kjit_array_make(&one, KJIT_F32, 1, &n);
    far.strides[0] = INT64_MAX / 2;
    args[0] = kjit_arg_array(&far);
    args[1] = kjit_arg_f64(1);
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT,
                 "reach past 2^63 bytes");
    /* as the output too, of a call and of kjit_prepare alike: the one check
     * of what a call is given (kj_api_check_call) looks at it */
    int64_t one_element = 1;
    kjit_array small = kjit_array_make(&one, KJIT_F32, 1, &one_element);
    args[0] = kjit_arg_array(&small);
    assert_error(context, kjit_call(lerp, args, 3, &far, NULL), KJIT_ERROR_INVALID_ARGUMENT,
                 "lerp3: the output: a view of shape (4,) whose strides reach past 2^63 bytes");
    assert_error(context, kjit_prepare(lerp, args, 3, &far), KJIT_ERROR_INVALID_ARGUMENT,
                 "lerp3: the output: a view of shape (4,) whose strides reach past 2^63 bytes");
    args[0] = kjit_arg_array(&far);

    /* kjit_array_make cuts nothing: 9 dimensions, a NULL shape, a negative
     * extent and an overflowing one all give the invalid marker */
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2};
    kjit_array made = kjit_array_make(&one, KJIT_F32, 9, nine);
    ck_assert_int_eq(made.ndim, KJIT_NDIM_INVALID);
    ck_assert_int_eq(kjit_array_size(&made), -1);
    args[0] = kjit_arg_array(&made);
    assert_error(context, kjit_call(lerp, args, 3, NULL, &result), KJIT_ERROR_INVALID_ARGUMENT,
                 "kjit_array_make could not describe");
    ck_assert_int_eq(kjit_array_make(&one, KJIT_F32, 1, NULL).ndim, KJIT_NDIM_INVALID);
    ck_assert_int_eq(kjit_array_make(&one, KJIT_F32, 1, &negative).ndim, KJIT_NDIM_INVALID);
    ck_assert_int_eq(kjit_array_make(&one, KJIT_F32, 2, square).ndim, KJIT_NDIM_INVALID);
    ck_assert_int_eq(kjit_array_make(&one, KJIT_U8, 2, half).ndim, 2);
    ck_assert_int_eq(kjit_array_make(&one, KJIT_F32, 8, nine).ndim, 8);
    char *error = NULL;
    int64_t count = 0, bytes = 0;
    ck_assert_int_eq(kjit_shape_size(KJIT_C128, 2, half, &count, &bytes, &error),
                     KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(error, "(2147483648,2147483648) of c128"), "%s", error);
    free(error);
    /* an empty shape's strides must fit too; its count is 0 */
    int64_t empty[3] = {0, (int64_t)1 << 31, (int64_t)1 << 20};
    ck_assert_int_eq(kjit_shape_size(KJIT_F64, 3, empty, &count, &bytes, NULL), KJIT_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(bytes, 0);
    ck_assert_int_eq(kjit_shape_size(KJIT_U8, 2, half, &count, &bytes, NULL), KJIT_OK);
    ck_assert_int_eq(count, (int64_t)1 << 62);
    ck_assert_int_eq(bytes, (int64_t)1 << 62);
    ck_assert_int_eq(kjit_shape_size(KJIT_U16, 2, half, NULL, NULL, NULL),
                     KJIT_ERROR_INVALID_ARGUMENT); /* 2^63 bytes: one too many */
    ck_assert_int_eq(kjit_shape_size(KJIT_F64, 2, half, NULL, NULL, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(launch_limits_and_targets)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = (kjit_target)77;
    kjit_context *context = (kjit_context *)&options; /* overwritten with NULL */
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(context);
    ck_assert_msg(strstr(kjit_last_error(NULL), "unknown target 77"), "%s", kjit_last_error(NULL));

    for (int t = 0; t < 2; t++) {
        context = make_context(t ? KJIT_TARGET_PARALLEL : KJIT_TARGET_CPU);
        kjit_module *module;
        ck_assert_int_eq(kjit_compile_string(context, "api.kern", api_source, &module), KJIT_OK);
        kjit_function *saxpy;
        ck_assert_int_eq(kjit_module_function(module, "saxpy", &saxpy), KJIT_OK);
        float x[4] = {1, 2, 3, 4}, y[4] = {0};
        int64_t n = 4;
        kjit_array X = kjit_array_make(x, KJIT_F32, 1, &n), Y = kjit_array_make(y, KJIT_F32, 1, &n);
        kjit_arg args[3] = {kjit_arg_f64(2), kjit_arg_array(&X), kjit_arg_array(&Y)};
        /* CUDA's limits on every target: each refused before anything runs */
        struct { uint32_t grid[3], block[3]; const char *text; } refused[] = {
            {{2147483648u, 1, 1}, {1, 1, 1}, "a grid of 2147483648 blocks in x; at most 2147483647"},
            {{4294967295u, 1, 1}, {1, 1, 1}, "at most 2147483647"},
            {{1, 65536, 1}, {1, 1, 1}, "a grid of 65536 blocks in y; at most 65535"},
            {{1, 1, 65536}, {1, 1, 1}, "blocks in z"},
            {{1, 1, 1}, {1025, 1, 1}, "a block of 1025 threads in x; at most 1024"},
            {{1, 1, 1}, {1, 1025, 1}, "threads in y"},
            {{1, 1, 1}, {1, 1, 65}, "a block of 65 threads in z; at most 64"},
            {{1, 1, 1}, {32, 33, 1}, "a block of 1056 threads; at most 1024"},
        };
        for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
            assert_error(context, kjit_launch(saxpy, refused[r].grid, refused[r].block, args, 3, NULL),
                         KJIT_ERROR_INVALID_ARGUMENT, refused[r].text);
        for (int i = 0; i < 4; i++)
            ck_assert(y[i] == 0);
        /* the limits themselves are launches (of y = 0 x + y: every thread
         * with grid(1) < 4 writes what was there) */
        uint32_t grid[3] = {1, 65535, 1}, block[3] = {1, 1, 64};
        args[0] = kjit_arg_f64(0);
        ck_assert_msg(kjit_launch(saxpy, grid, block, args, 3, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int i = 0; i < 4; i++)
            ck_assert(y[i] == 0);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------------ the seed examples */

static kjit_module *load_example(kjit_context *context, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "examples/%s", name);
    kjit_module *module = NULL;
    ck_assert_msg(kjit_compile_file(context, path, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    return module;
}

static kjit_function *function_of(kjit_module *module, const char *name)
{
    kjit_function *fn = NULL;
    ck_assert_msg(kjit_module_function(module, name, &fn) == KJIT_OK, "%s", name);
    return fn;
}

/* |got - want| in units of the last place of the type at want. */
static double ulps(double got, double want, bool single)
{
    if (got == want)
        return 0;
    double spacing = single ? ldexp(1.0, ilogb(want) - 23) : ldexp(1.0, ilogb(want) - 52);
    if (want == 0 || !isfinite(spacing))
        spacing = single ? 1.4e-45 : 4.9e-324;
    return fabs(got - want) / spacing;
}

/* Runs a unary @vectorize example elementwise and checks it within max_ulps
 * of the float64 (long double where it helps) reference. */
static void unary_example(kjit_target target, const char *file, const char *name, bool single,
                          double low, double high, double (*reference)(double), double max_ulps)
{
    kjit_context *context = make_context(target);
    kjit_module *module = load_example(context, file);
    kjit_function *fn = function_of(module, name);
    enum { N = 200000 };
    void *in = malloc(N * 8);
    for (int i = 0; i < N; i++) {
        double v = rng_uniform(&rng, low, high);
        if (single)
            ((float *)in)[i] = (float)v;
        else
            ((double *)in)[i] = v;
    }
    int64_t n = N;
    kjit_array X = kjit_array_make(in, single ? KJIT_F32 : KJIT_F64, 1, &n);
    kjit_arg arg = kjit_arg_array(&X);
    kjit_array result;
    ck_assert_msg(kjit_call(fn, &arg, 1, NULL, &result) == KJIT_OK, "%s", kjit_last_error(context));
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double x = single ? ((float *)in)[i] : ((double *)in)[i];
        double got = single ? ((float *)result.data)[i] : ((double *)result.data)[i];
        double want = reference(x);
        double u = ulps(got, single ? (double)(float)want : want, single);
        if (u > worst)
            worst = u;
    }
    ck_assert_msg(worst <= max_ulps, "%s: %.2f ulps", name, worst);
    kjit_array_free(&result);
    free(in);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

static double sin_reference(double x) { return (double)sinl(x); }
static double exp_reference(double x) { return (double)expl(x); }

static void seeds_on(kjit_target target)
{
    /* sin f64 and exp f32: within 4 ulps (SIMD math libraries promise <= 4) */
    unary_example(target, "sin.kern", "vsin", false, -100, 100, sin_reference, 4);
    unary_example(target, "exp.kern", "vexp", true, -80, 80, exp_reference, 4);

    kjit_context *context = make_context(target);
    /* add f32 with a scalar broadcast: exact (one rounding) */
    kjit_module *module = load_example(context, "add.kern");
    kjit_function *add = function_of(module, "add");
    enum { N = 100000 };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        a[i] = (float)rng_uniform(&rng, -1e3, 1e3);
        b[i] = (float)rng_uniform(&rng, -1e3, 1e3);
    }
    int64_t n = N;
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, &n), B = kjit_array_make(b, KJIT_F32, 1, &n);
    kjit_arg args[5] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    kjit_array result;
    ck_assert_msg(kjit_call(add, args, 2, NULL, &result) == KJIT_OK, "%s", kjit_last_error(context));
    for (int i = 0; i < N; i++)
        ck_assert(((float *)result.data)[i] == (float)((double)a[i] + (double)b[i]));
    kjit_array_free(&result);
    kjit_module_free(module);

    /* the LLA distance, vectorized with a scalar broadcast: 1e-12 relative */
    module = load_example(context, "lla.kern");
    kjit_function *lla = function_of(module, "lla_a");
    double *lat = malloc(N * sizeof(double)), *lon = malloc(N * sizeof(double));
    for (int i = 0; i < N; i++) {
        lat[i] = rng_uniform(&rng, -90, 90);
        lon[i] = rng_uniform(&rng, -180, 180);
    }
    kjit_array LAT = kjit_array_make(lat, KJIT_F64, 1, &n), LON = kjit_array_make(lon, KJIT_F64, 1, &n);
    double lat2 = 40.7, lon2 = -74.0, s = 6371.0;
    kjit_arg largs[5] = {kjit_arg_array(&LAT), kjit_arg_array(&LON), kjit_arg_f64(lat2),
                         kjit_arg_f64(lon2), kjit_arg_f64(s)};
    ck_assert_msg(kjit_call(lla, largs, 5, NULL, &result) == KJIT_OK, "%s", kjit_last_error(context));
    for (int i = 0; i < N; i++) {
        double sa = sin(0.008726645 * (lat2 - lat[i])), sb = sin(0.008726645 * (lon2 - lon[i]));
        double h = sa * sa + cos(0.01745329 * lat[i]) * cos(0.01745329 * lat2) * sb * sb;
        double want = atan2(h, 1 - h) * s;
        double got = ((double *)result.data)[i];
        ck_assert_msg(fabs(got - want) <= 1e-12 * fabs(want) + 1e-9, "%d: %.17g vs %.17g", i, got,
                      want);
    }
    kjit_array_free(&result);

    /* the LLA kernel that builds its mesh itself: 1e-12 relative */
    kjit_function *mesh = function_of(module, "lla");
    enum { NX = 70, NY = 50 };
    double *out = calloc(NX * NY, sizeof(double));
    int64_t out_shape[2] = {NY, NX};
    kjit_array OUT = kjit_array_make(out, KJIT_F64, 2, out_shape);
    double xb = -30, xe = 60, yb = -120, ye = 10;
    kjit_arg margs[10] = {kjit_arg_f64(lat2), kjit_arg_f64(lon2), kjit_arg_f64(xb),
                          kjit_arg_f64(xe),   kjit_arg_f64(yb),   kjit_arg_f64(ye),
                          kjit_arg_f64(s),    kjit_arg_i64(NX),   kjit_arg_i64(NY),
                          kjit_arg_array(&OUT)};
    uint32_t grid[3] = {(NX + 15) / 16, (NY + 7) / 8, 1}, block[3] = {16, 8, 1};
    ck_assert_msg(kjit_launch(mesh, grid, block, margs, 10, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int y = 0; y < NY; y++)
        for (int x = 0; x < NX; x++) {
            double lat1 = (xe - xb) * x / (NX - 1) + xb, lon1 = (ye - yb) * y / (NY - 1) + yb;
            double sa = sin(0.008726645 * (lat2 - lat1)), sb = sin(0.008726645 * (lon2 - lon1));
            double h = sa * sa + cos(0.01745329 * lat1) * cos(0.01745329 * lat2) * sb * sb;
            double want = atan2(h, 1 - h) * s;
            ck_assert_msg(fabs(out[y * NX + x] - want) <= 1e-12 * fabs(want) + 1e-9,
                          "(%d,%d): %.17g vs %.17g", y, x, out[y * NX + x], want);
        }
    free(out);
    free(lat);
    free(lon);
    free(a);
    free(b);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

/* The standard library, imported from a string: every function against C. */
static double smoothstep_reference(double e0, double e1, double x)
{
    double t = fmin(fmax((x - e0) / (e1 - e0), 0.0), 1.0);
    return t * t * (3.0 - 2.0 * t);
}

static void stdlib_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "uses_stdlib.kern", "import math;\nimport geo;\n",
                                      &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    enum { N = 50000 };
    int64_t n = N;
    double *x = malloc(N * sizeof(double)), *y = malloc(N * sizeof(double)),
           *z = malloc(N * sizeof(double)), *w = malloc(N * sizeof(double));
    for (int i = 0; i < N; i++) {
        x[i] = rng_uniform(&rng, -90, 90);
        y[i] = rng_uniform(&rng, -180, 180);
        z[i] = rng_uniform(&rng, -90, 90);
        w[i] = rng_uniform(&rng, -180, 180);
    }
    kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), Y = kjit_array_make(y, KJIT_F64, 1, &n);
    kjit_array Z = kjit_array_make(z, KJIT_F64, 1, &n), W = kjit_array_make(w, KJIT_F64, 1, &n);
    kjit_array r;

    /* clamp: exact */
    kjit_arg cargs[3] = {kjit_arg_array(&X), kjit_arg_f64(-10), kjit_arg_f64(25)};
    ck_assert_msg(kjit_call(function_of(module, "clamp"), cargs, 3, NULL, &r) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int i = 0; i < N; i++)
        ck_assert(((double *)r.data)[i] == fmin(fmax(x[i], -10), 25));
    kjit_array_free(&r);

    /* lerp and smoothstep: a few roundings, 1e-13 absolute at these magnitudes */
    kjit_arg largs[3] = {kjit_arg_array(&X), kjit_arg_array(&Y), kjit_arg_f64(0.3)};
    ck_assert_int_eq(kjit_call(function_of(module, "lerp"), largs, 3, NULL, &r), KJIT_OK);
    for (int i = 0; i < N; i++)
        ck_assert(fabs(((double *)r.data)[i] - (x[i] + (y[i] - x[i]) * 0.3)) <= 1e-13);
    kjit_array_free(&r);
    kjit_arg sargs[3] = {kjit_arg_f64(-50), kjit_arg_f64(50), kjit_arg_array(&X)};
    ck_assert_int_eq(kjit_call(function_of(module, "smoothstep"), sargs, 3, NULL, &r), KJIT_OK);
    for (int i = 0; i < N; i++)
        ck_assert(fabs(((double *)r.data)[i] - smoothstep_reference(-50, 50, x[i])) <= 1e-15);
    kjit_array_free(&r);

    /* sigmoid: 1e-14 relative (exp within a few ulps) */
    kjit_arg g = kjit_arg_array(&Z);
    for (int i = 0; i < N; i++)
        z[i] /= 3;
    ck_assert_int_eq(kjit_call(function_of(module, "sigmoid"), &g, 1, NULL, &r), KJIT_OK);
    for (int i = 0; i < N; i++) {
        double want = 1.0 / (1.0 + exp(-z[i]));
        ck_assert(fabs(((double *)r.data)[i] - want) <= 1e-14 * want);
    }
    kjit_array_free(&r);

    /* haversine_km: 1e-10 relative, or 1e-9 km near zero distance */
    kjit_arg hargs[4] = {kjit_arg_array(&X), kjit_arg_array(&Y), kjit_arg_array(&Z),
                         kjit_arg_array(&W)};
    ck_assert_int_eq(kjit_call(function_of(module, "haversine_km"), hargs, 4, NULL, &r), KJIT_OK);
    for (int i = 0; i < N; i++) {
        double rad = M_PI / 180.0;
        double sa = sin((z[i] - x[i]) * rad * 0.5), sb = sin((w[i] - y[i]) * rad * 0.5);
        double h = sa * sa + cos(x[i] * rad) * cos(z[i] * rad) * sb * sb;
        double want = 2.0 * 6371.0088 * asin(sqrt(fmin(h, 1.0)));
        ck_assert_msg(fabs(((double *)r.data)[i] - want) <= 1e-10 * want + 1e-9, "%d", i);
    }
    kjit_array_free(&r);
    free(x);
    free(y);
    free(z);
    free(w);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(stdlib_cpu_and_parallel)
{
    stdlib_on(KJIT_TARGET_CPU);
    stdlib_on(KJIT_TARGET_PARALLEL);
}
END_TEST

START_TEST(seed_examples_cpu)
{
    seeds_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(seed_examples_parallel)
{
    seeds_on(KJIT_TARGET_PARALLEL);
}
END_TEST

Suite *suite_api(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, contexts_and_names);
    tcase_add_test(tc, const_array_lookup);
    tcase_add_test(tc, compile_errors_are_values);
    tcase_add_test(tc, lookup_and_signatures);
    tcase_add_test(tc, plain_functions_convert_scalars);
    tcase_add_test(tc, kernel_launch_cpu);
    tcase_add_test(tc, kernel_launch_parallel);
    tcase_add_test(tc, device_memory_streams_events_on_host);
    tcase_add_test(tc, sizes_that_overflow);
    tcase_add_test(tc, launch_limits_and_targets);
    tcase_add_test(tc, stdlib_cpu_and_parallel);
    tcase_add_test(tc, seed_examples_cpu);
    tcase_add_test(tc, seed_examples_parallel);
    suite_add_tcase(s, tc);
    return s;
}
