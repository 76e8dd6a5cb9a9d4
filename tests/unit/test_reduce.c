/*
 * test_reduce.c: @reduce through the public API (kjit_reduce) on cpu and
 * parallel, against float64 / long double / exact references on fresh random
 * inputs: sizes around the block (1024) and the lane count (32), sizes of
 * two and three levels of the tree, empty arrays with and without an initial
 * value, one element, every axis combination of a 3-D array, strided and
 * broadcast inputs of a fused map, integers exactly; the float error within
 * the bound docs/language.md states; the same bits on cpu and parallel and in
 * every form of the kernels (KJIT_REDUCE_FORM runs the cuda target's WARPS
 * and COLUMNS kernels under the cpu target's CUDA emulation), strided first
 * levels included; and the errors.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "rng.h"

static const char source[] =
    "@reduce(f32(f32, f32), f64(f64, f64), i64(i64, i64))\n"
    "fn vsum(a, b) { return a + b; }\n"
    "@reduce(f32(f32, f32), f64(f64, f64), i32(i32, i32))\n"
    "fn vmax(a, b) { return max(a, b); }\n"
    "@vectorize(f32(f32, f32), f64(f64, f64))\n"
    "fn mul(x, y) { return x * y; }\n"
    "@reduce(map = mul, f32(f32, f32), f64(f64, f64))\n"
    "fn dot(a, b) { return a + b; }\n"
    "@vectorize\n"
    "fn square(x: f64) -> f64 { return x * x; }\n"
    "@reduce(map = square)\n"
    "fn sumsq(a: f64, b: f64) -> f64 { return a + b; }\n";

static uint64_t rng_state;
static void seed_rng(void) { rng_seed(&rng_state, "test_reduce"); }
static double uniform(double lo, double hi) { return rng_uniform(&rng_state, lo, hi); }

/* The float error bound of docs/language.md: each level of the tree adds at
 * most B/L - 1 + log2(L) = 36 roundings to any element's path. */
static double error_bound(int64_t n, double unit, double sum_abs)
{
    int levels = 0;
    for (int64_t m = n; levels == 0 || m > 1; m = (m + 1023) / 1024)
        levels++;
    return levels * 36.0 * unit * sum_abs;
}

/* Sums of random f64 and f32 arrays of many sizes, on one target. */
static void check_sums(kjit_target target)
{
    seed_rng();
    Fixture f = fixture_open(target, "reduce.kern", source);
    kjit_function *vsum = fixture_fn(&f, "vsum");
    const int64_t sizes[] = {1, 2, 31, 32, 33, 1000, 1023, 1024, 1025, 2048, 33001,
                             1048576, 1048576 + 1024 + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        double *x = malloc((size_t)n * sizeof *x);
        float *y = malloc((size_t)n * sizeof *y);
        long double ref64 = 0, ref32 = 0;
        double abs64 = 0, abs32 = 0;
        for (int64_t i = 0; i < n; i++) {
            x[i] = uniform(-1, 1);
            y[i] = (float)uniform(-1, 1);
            ref64 += x[i];
            ref32 += y[i];
            abs64 += fabs(x[i]);
            abs32 += fabs(y[i]);
        }
        kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), Y = kjit_array_make(y, KJIT_F32, 1, &n);
        kjit_array r;
        kjit_arg arg = kjit_arg_array(&X);
        ck_assert_msg(kjit_reduce(vsum, &arg, 1, NULL, 0, NULL, NULL, &r) == KJIT_OK, "%s",
                      kjit_last_error(f.context));
        ck_assert_int_eq(r.ndim, 0);
        double got = *(double *)r.data;
        kjit_array_free(&r);
        ck_assert_msg(fabs(got - (double)ref64) <= error_bound(n, 0x1p-53, abs64),
                      "f64 sum of %lld: %.17g, want %.17Lg", (long long)n, got, ref64);
        arg = kjit_arg_array(&Y);
        ck_assert_int_eq(kjit_reduce(vsum, &arg, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
        ck_assert_int_eq(r.dtype, KJIT_F32);
        float got32 = *(float *)r.data;
        kjit_array_free(&r);
        ck_assert_msg(fabs(got32 - (double)ref32) <= error_bound(n, 0x1p-24, abs32),
                      "f32 sum of %lld: %.9g, want %.17Lg", (long long)n, got32, ref32);
        free(x);
        free(y);
    }
    fixture_close(&f);
}

START_TEST(sums_within_the_bound_cpu)
{
    check_sums(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(sums_within_the_bound_parallel)
{
    check_sums(KJIT_TARGET_PARALLEL);
}
END_TEST

/* The bits of sum, dot and max on one target (and form of the kernels). */
static void results(kjit_target target, const char *form, const float *x, const float *y,
                    int64_t n, uint32_t out[4])
{
    if (form)
        setenv("KJIT_REDUCE_FORM", form, 1);
    else
        unsetenv("KJIT_REDUCE_FORM");
    Fixture f = fixture_open(target, "reduce.kern", source);
    kjit_array X = kjit_array_make((void *)x, KJIT_F32, 1, &n);
    kjit_array Y = kjit_array_make((void *)y, KJIT_F32, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&Y)};
    const char *names[3] = {"vsum", "dot", "vmax"};
    int nargs[3] = {1, 2, 1};
    for (int k = 0; k < 3; k++) {
        kjit_array r;
        ck_assert_msg(kjit_reduce(fixture_fn(&f, names[k]), args, nargs[k], NULL, 0, NULL, NULL, &r) ==
                          KJIT_OK, "%s: %s", names[k], kjit_last_error(f.context));
        memcpy(&out[k], r.data, 4);
        kjit_array_free(&r);
    }
    /* along an axis: the rows of x as 7 x (n / 7) */
    int64_t shape[2] = {7, n / 7};
    kjit_array M = kjit_array_make((void *)x, KJIT_F32, 2, shape);
    kjit_arg m = kjit_arg_array(&M);
    int axis = 1;
    kjit_array r;
    ck_assert_int_eq(kjit_reduce(fixture_fn(&f, "vsum"), &m, 1, &axis, 1, NULL, NULL, &r), KJIT_OK);
    uint32_t h = 0;
    for (int i = 0; i < 7; i++)
        h = h * 31 + ((uint32_t *)r.data)[i];
    out[3] = h;
    kjit_array_free(&r);
    fixture_close(&f);
    unsetenv("KJIT_REDUCE_FORM");
}

START_TEST(same_bits_on_every_run_target_and_form)
{
    seed_rng();
    int64_t n = 3 * 1048576 + 77;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)uniform(-1, 1);
        y[i] = (float)uniform(0, 2);
    }
    uint32_t want[4], got[4];
    results(KJIT_TARGET_CPU, NULL, x, y, n, want);
    results(KJIT_TARGET_CPU, NULL, x, y, n, got);
    ck_assert_msg(memcmp(want, got, sizeof want) == 0, "cpu twice differs");
    results(KJIT_TARGET_PARALLEL, NULL, x, y, n, got);
    ck_assert_msg(memcmp(want, got, sizeof want) == 0, "parallel differs from cpu");
    results(KJIT_TARGET_PARALLEL, "lanes", x, y, n, got);
    ck_assert_msg(memcmp(want, got, sizeof want) == 0, "the LANES form differs from SIMD");
    results(KJIT_TARGET_PARALLEL, "warps", x, y, n, got);
    ck_assert_msg(memcmp(want, got, sizeof want) == 0, "the WARPS form differs from SIMD");
    free(x);
    free(y);
}
END_TEST

START_TEST(integers_are_exact)
{
    seed_rng();
    Fixture f = fixture_open(KJIT_TARGET_PARALLEL, "reduce.kern", source);
    int64_t n = 2 * 1048576 + 3;
    int64_t *x = malloc((size_t)n * sizeof *x);
    int32_t *y = malloc((size_t)n * sizeof *y);
    int64_t sum = 0;
    int32_t most = INT32_MIN;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (int64_t)uniform(-1e12, 1e12);
        y[i] = (int32_t)uniform(-2e9, 2e9);
        sum += x[i];
        most = y[i] > most ? y[i] : most;
    }
    kjit_array X = kjit_array_make(x, KJIT_I64, 1, &n), Y = kjit_array_make(y, KJIT_I32, 1, &n);
    kjit_arg a = kjit_arg_array(&X), b = kjit_arg_array(&Y);
    kjit_array r;
    ck_assert_int_eq(kjit_reduce(fixture_fn(&f, "vsum"), &a, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
    ck_assert_int_eq(*(int64_t *)r.data, sum);
    kjit_array_free(&r);
    ck_assert_int_eq(kjit_reduce(fixture_fn(&f, "vmax"), &b, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
    ck_assert_int_eq(*(int32_t *)r.data, most);
    kjit_array_free(&r);
    free(x);
    free(y);
    fixture_close(&f);
}
END_TEST

START_TEST(empty_one_and_init)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "reduce.kern", source);
    kjit_function *vsum = fixture_fn(&f, "vsum"), *vmax = fixture_fn(&f, "vmax");
    double x[1] = {2.5};
    int64_t zero = 0, one = 1;
    kjit_array E = kjit_array_make(x, KJIT_F64, 1, &zero), O = kjit_array_make(x, KJIT_F64, 1, &one);
    kjit_arg e = kjit_arg_array(&E), o = kjit_arg_array(&O), init = kjit_arg_f64(10);
    kjit_array r;
    /* empty without an initial value: an error that says so */
    ck_assert_int_eq(kjit_reduce(vsum, &e, 1, NULL, 0, NULL, NULL, &r), KJIT_ERROR_SHAPE);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "give an initial value"));
    ck_assert_int_eq(kjit_reduce(vmax, &e, 1, NULL, 0, NULL, NULL, &r), KJIT_ERROR_SHAPE);
    /* empty with one: the initial value */
    ck_assert_int_eq(kjit_reduce(vsum, &e, 1, NULL, 0, &init, NULL, &r), KJIT_OK);
    ck_assert(*(double *)r.data == 10);
    kjit_array_free(&r);
    /* one element: itself, or f(init, it) */
    ck_assert_int_eq(kjit_reduce(vsum, &o, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
    ck_assert(*(double *)r.data == 2.5);
    kjit_array_free(&r);
    ck_assert_int_eq(kjit_reduce(vsum, &o, 1, NULL, 0, &init, NULL, &r), KJIT_OK);
    ck_assert(*(double *)r.data == 12.5);
    kjit_array_free(&r);
    ck_assert_int_eq(kjit_reduce(vmax, &o, 1, NULL, 0, &init, NULL, &r), KJIT_OK);
    ck_assert(*(double *)r.data == 10);
    kjit_array_free(&r);
    /* an empty axis of a 2-D array: one initial value per output */
    int64_t shape[2] = {3, 0};
    kjit_array E2 = kjit_array_make(x, KJIT_F64, 2, shape);
    kjit_arg e2 = kjit_arg_array(&E2);
    int axis = 1;
    ck_assert_int_eq(kjit_reduce(vsum, &e2, 1, &axis, 1, &init, NULL, &r), KJIT_OK);
    ck_assert_int_eq(r.ndim, 1);
    ck_assert_int_eq(r.shape[0], 3);
    ck_assert(((double *)r.data)[2] == 10);
    kjit_array_free(&r);
    /* no outputs: nothing to do, and no error */
    axis = 0;
    ck_assert_int_eq(kjit_reduce(vsum, &e2, 1, &axis, 1, NULL, NULL, &r), KJIT_OK);
    ck_assert_int_eq(r.ndim, 1);
    ck_assert_int_eq(r.shape[0], 0);
    kjit_array_free(&r);
    axis = 1;
    int64_t shape2[2] = {0, 5};
    kjit_array E3 = kjit_array_make(x, KJIT_F64, 2, shape2);
    kjit_arg e3 = kjit_arg_array(&E3);
    ck_assert_int_eq(kjit_reduce(vsum, &e3, 1, &axis, 1, NULL, NULL, &r), KJIT_OK);
    ck_assert_int_eq(r.shape[0], 0);
    kjit_array_free(&r);
    fixture_close(&f);
}
END_TEST

/* The leading axes of C-contiguous arrays (the column sums whose work items
 * go output-fastest) and full sums of views that start off the 16-byte
 * boundary (the WARPS form's unaligned variant) and of every short size: on
 * cpu, parallel and each form of the kernels, the same bits, within the bound
 * of float64 sums over the same elements. */
static void leading_sums(kjit_target target, const char *form, const double *x, int64_t n,
                         double *got, int64_t *count)
{
    if (form)
        setenv("KJIT_REDUCE_FORM", form, 1);
    Fixture f = fixture_open(target, "reduce.kern", source);
    kjit_function *vsum = fixture_fn(&f, "vsum");
    int64_t at = 0;
    /* axis 0 of 2-D shapes; axes (0, 1) and axis 0 of a 3-D one */
    int64_t shapes[4][3] = {{2500, 37, 0}, {1, 9, 0}, {1025, 1, 0}, {40, 70, 9}};
    int ndims[4] = {2, 2, 2, 3};
    for (int c = 0; c < 4 + 1; c++) {
        int k = c < 4 ? c : 3;
        kjit_array X = kjit_array_make((void *)x, KJIT_F64, ndims[k], shapes[k]);
        ck_assert(kjit_array_size(&X) <= n);
        int axes[2] = {0, 1}, naxes = c == 3 ? 2 : 1;
        kjit_arg arg = kjit_arg_array(&X);
        kjit_array r;
        ck_assert_msg(kjit_reduce(vsum, &arg, 1, axes, naxes, NULL, NULL, &r) == KJIT_OK, "%s",
                      kjit_last_error(f.context));
        int64_t outs = kjit_array_size(&r), m = kjit_array_size(&X) / outs;
        for (int64_t o = 0; o < outs; o++) {
            double want = 0, abs = 0;
            for (int64_t i = 0; i < m; i++) {
                want += x[i * outs + o];
                abs += fabs(x[i * outs + o]);
            }
            double value = ((double *)r.data)[o];
            ck_assert_msg(fabs(value - want) <= error_bound(m, 0x1p-53, abs) + 1e-300,
                          "shape %d axes %d output %lld: %.17g, want %.17g", k, naxes,
                          (long long)o, value, want);
            got[at++] = value;
        }
        kjit_array_free(&r);
    }
    /* full sums of f32 views starting 0 to 3 elements in, of short sizes */
    float *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)x[i];
    const int64_t sizes[] = {1, 3, 31, 1023, 1024, 1027, 4096 + 3, 70001};
    for (int offset = 0; offset < 4; offset++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int64_t len = sizes[k];
            kjit_array Y = kjit_array_make(y + offset, KJIT_F32, 1, &len);
            kjit_arg arg = kjit_arg_array(&Y);
            kjit_array r;
            ck_assert_int_eq(kjit_reduce(vsum, &arg, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
            double want = 0, abs = 0;
            for (int64_t i = 0; i < len; i++) {
                want += y[offset + i];
                abs += fabs(y[offset + i]);
            }
            double value = *(float *)r.data;
            ck_assert_msg(fabs(value - want) <= error_bound(len, 0x1p-24, abs),
                          "f32 sum of %lld from element %d: %.9g, want %.17g", (long long)len,
                          offset, value, want);
            got[at++] = value;
            kjit_array_free(&r);
        }
    free(y);
    *count = at;
    fixture_close(&f);
    unsetenv("KJIT_REDUCE_FORM");
}

START_TEST(leading_axes_and_unaligned_views)
{
    seed_rng();
    int64_t n = 2500 * 37 + 16;
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = uniform(-1, 1);
    double want[20000], got[20000];
    int64_t count_want, count_got;
    leading_sums(KJIT_TARGET_CPU, NULL, x, n, want, &count_want);
    const char *forms[3] = {NULL, "lanes", "warps"};
    for (int k = 0; k < 3; k++) {
        leading_sums(KJIT_TARGET_PARALLEL, forms[k], x, n, got, &count_got);
        ck_assert_int_eq(count_got, count_want);
        for (int64_t i = 0; i < count_want; i++)
            ck_assert_msg(memcmp(&want[i], &got[i], sizeof want[i]) == 0,
                          "result %lld: parallel (%s) %.17g, cpu %.17g", (long long)i,
                          forms[k] ? forms[k] : "simd", got[i], want[i]);
    }
    free(x);
}
END_TEST

/* Reductions whose first level is strided (the COLUMNS form on cuda, and
 * under KJIT_REDUCE_FORM=warps on the cpu targets): axis 0 of 2-D arrays
 * whose columns are not a multiple of 32 and rows not a multiple of 1024
 * (a short last block; fewer rows than lanes), the leading axes of 3-D ones,
 * two reduced dimensions that do not merge, f32, f64, i64 and i32, and a
 * fused map over two arrays and over a broadcast column. */
typedef struct StridedCase {
    const char *function;
    kjit_dtype dtype;
    int ndim;
    int64_t shape[3];
    int naxes;
    int axes[2];
    int second; /* dot's second input: 0 none, 1 the same shape 7 elements on, 2 a
                   column of shape (rows, 1) */
} StridedCase;

static const StridedCase strided_cases[] = {
    {"vsum", KJIT_F32, 2, {2049, 33}, 1, {0}, 0},
    {"vsum", KJIT_F32, 2, {3000, 40}, 1, {0}, 0},
    {"vsum", KJIT_F32, 2, {5, 3}, 1, {0}, 0},
    {"vsum", KJIT_F64, 2, {1030, 65}, 1, {0}, 0},
    {"vsum", KJIT_F64, 3, {40, 70, 9}, 2, {0, 1}, 0},
    {"vsum", KJIT_F64, 3, {40, 70, 9}, 1, {0}, 0},
    {"vsum", KJIT_F64, 3, {40, 70, 9}, 2, {0, 2}, 0},
    {"vsum", KJIT_I64, 2, {2100, 31}, 1, {0}, 0},
    {"vmax", KJIT_I32, 2, {1500, 50}, 1, {0}, 0},
    {"dot", KJIT_F32, 2, {2049, 33}, 1, {0}, 1},
    {"dot", KJIT_F64, 2, {1030, 65}, 1, {0}, 2},
};
#define STRIDED_CASES (int)(sizeof strided_cases / sizeof strided_cases[0])

typedef struct StridedData {
    int64_t n;
    double *f64;
    float *f32;
    int64_t *i64;
    int32_t *i32;
} StridedData;

static void *strided_buffer(const StridedData *d, kjit_dtype dtype)
{
    switch (dtype) {
    case KJIT_F32: return d->f32;
    case KJIT_F64: return d->f64;
    case KJIT_I64: return d->i64;
    default: return d->i32;
    }
}

static double strided_value(const StridedData *d, kjit_dtype dtype, int64_t i)
{
    switch (dtype) {
    case KJIT_F32: return d->f32[i];
    case KJIT_F64: return d->f64[i];
    case KJIT_I64: return (double)d->i64[i];
    default: return d->i32[i];
    }
}

/* Runs every case on one target and form, checks each output against a
 * float64 reference (exactly for integers), and appends the results' bytes
 * to `bytes`. */
static size_t strided_results(kjit_target target, const char *form, const StridedData *d,
                              unsigned char *bytes, size_t capacity)
{
    if (form)
        setenv("KJIT_REDUCE_FORM", form, 1);
    else
        unsetenv("KJIT_REDUCE_FORM");
    Fixture f = fixture_open(target, "reduce.kern", source);
    size_t at = 0;
    for (int c = 0; c < STRIDED_CASES; c++) {
        const StridedCase *k = &strided_cases[c];
        kjit_array X = kjit_array_make(strided_buffer(d, k->dtype), k->dtype, k->ndim, k->shape);
        int64_t size = kjit_array_size(&X);
        ck_assert(size + 7 <= d->n);
        kjit_array Y = X;
        if (k->second == 1) {
            Y.data = (char *)Y.data + 7 * kjit_dtype_size(k->dtype);
        } else if (k->second == 2) {
            int64_t column[2] = {k->shape[0], 1};
            Y = kjit_array_make(Y.data, k->dtype, 2, column);
        }
        kjit_arg args[2] = {kjit_arg_array(&X), kjit_arg_array(&Y)};
        kjit_array r;
        ck_assert_msg(kjit_reduce(fixture_fn(&f, k->function), args, k->second ? 2 : 1, k->axes,
                                  k->naxes, NULL, NULL, &r) == KJIT_OK,
                      "case %d: %s", c, kjit_last_error(f.context));
        /* the reference: every element of X (and Y) to its output */
        int64_t outs = kjit_array_size(&r), m = size / outs;
        double *want = calloc((size_t)outs, sizeof *want), *abs = calloc((size_t)outs, sizeof *abs);
        bool *seen = calloc((size_t)outs, sizeof *seen);
        int64_t dims[3] = {k->shape[0], k->shape[1], k->ndim == 3 ? k->shape[2] : 1};
        for (int64_t i = 0; i < dims[0]; i++)
            for (int64_t j = 0; j < dims[1]; j++)
                for (int64_t l = 0; l < dims[2]; l++) {
                    int64_t coord[3] = {i, j, l}, o = 0, flat = (i * dims[1] + j) * dims[2] + l;
                    for (int e = 0; e < k->ndim; e++) {
                        bool reduced = false;
                        for (int a = 0; a < k->naxes; a++)
                            reduced |= k->axes[a] == e;
                        if (!reduced)
                            o = o * k->shape[e] + coord[e];
                    }
                    double v = strided_value(d, k->dtype, flat);
                    if (k->second == 1)
                        v *= strided_value(d, k->dtype, flat + 7);
                    else if (k->second == 2)
                        v *= strided_value(d, k->dtype, i);
                    if (strcmp(k->function, "vmax") == 0)
                        want[o] = seen[o] && want[o] > v ? want[o] : v;
                    else
                        want[o] += v;
                    seen[o] = true;
                    abs[o] += fabs(v);
                }
        for (int64_t o = 0; o < outs; o++) {
            double got;
            if (k->dtype == KJIT_F32)
                got = ((float *)r.data)[o];
            else if (k->dtype == KJIT_F64)
                got = ((double *)r.data)[o];
            else if (k->dtype == KJIT_I64)
                got = (double)((int64_t *)r.data)[o];
            else
                got = ((int32_t *)r.data)[o];
            double bound = k->dtype == KJIT_F32   ? error_bound(m, 0x1p-24, abs[o])
                           : k->dtype == KJIT_F64 ? error_bound(m, 0x1p-53, abs[o]) + 1e-300
                                                  : 0; /* integers: exact (all below 2^53) */
            ck_assert_msg(fabs(got - want[o]) <= bound, "case %d (%s) output %lld: %.17g, want %.17g",
                          c, form ? form : "simd", (long long)o, got, want[o]);
        }
        size_t bytes_of = (size_t)outs * kjit_dtype_size(k->dtype);
        ck_assert(at + bytes_of <= capacity);
        memcpy(bytes + at, r.data, bytes_of);
        at += bytes_of;
        free(want);
        free(abs);
        free(seen);
        kjit_array_free(&r);
    }
    fixture_close(&f);
    unsetenv("KJIT_REDUCE_FORM");
    return at;
}

START_TEST(strided_levels_in_every_form)
{
    seed_rng();
    StridedData d = {.n = 3000 * 40 + 16};
    d.f64 = malloc((size_t)d.n * sizeof *d.f64);
    d.f32 = malloc((size_t)d.n * sizeof *d.f32);
    d.i64 = malloc((size_t)d.n * sizeof *d.i64);
    d.i32 = malloc((size_t)d.n * sizeof *d.i32);
    for (int64_t i = 0; i < d.n; i++) {
        d.f64[i] = uniform(-1, 1);
        d.f32[i] = (float)uniform(-1, 1);
        d.i64[i] = (int64_t)uniform(-1e12, 1e12);
        d.i32[i] = (int32_t)uniform(-2e9, 2e9);
    }
    size_t capacity = 1 << 20;
    unsigned char *want = malloc(capacity), *got = malloc(capacity);
    size_t count = strided_results(KJIT_TARGET_CPU, NULL, &d, want, capacity);
    /* the COLUMNS form with its V lanes a thread, and with 2 and 32 */
    const struct {
        kjit_target target;
        const char *form, *column_lanes;
    } runs[] = {{KJIT_TARGET_PARALLEL, NULL, NULL}, {KJIT_TARGET_PARALLEL, "lanes", NULL},
                {KJIT_TARGET_CPU, "warps", NULL},   {KJIT_TARGET_PARALLEL, "warps", NULL},
                {KJIT_TARGET_PARALLEL, "warps", "2"},
                {KJIT_TARGET_PARALLEL, "warps", "32"}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        if (runs[k].column_lanes)
            setenv("KJIT_REDUCE_COLUMN_LANES", runs[k].column_lanes, 1);
        size_t n = strided_results(runs[k].target, runs[k].form, &d, got, capacity);
        unsetenv("KJIT_REDUCE_COLUMN_LANES");
        ck_assert_uint_eq(n, count);
        for (size_t i = 0; i < count; i++)
            ck_assert_msg(want[i] == got[i],
                          "%s (%s, column lanes %s): byte %zu differs from cpu's SIMD form",
                          runs[k].target == KJIT_TARGET_CPU ? "cpu" : "parallel",
                          runs[k].form ? runs[k].form : "simd",
                          runs[k].column_lanes ? runs[k].column_lanes : "default", i);
    }
    free(want);
    free(got);
    free(d.f64);
    free(d.f32);
    free(d.i64);
    free(d.i32);
}
END_TEST

/* Every subset of the axes of a 3-D array (and a transposed view of it),
 * against float64 sums over the same elements. */
START_TEST(every_axis_combination_of_3d)
{
    seed_rng();
    kjit_target targets[2] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
    int64_t shape[3] = {3, 1500, 5};
    int64_t n = shape[0] * shape[1] * shape[2];
    double *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = uniform(-1, 1);
    for (int t = 0; t < 2; t++) {
        Fixture f = fixture_open(targets[t], "reduce.kern", source);
        kjit_function *vsum = fixture_fn(&f, "vsum");
        for (int transposed = 0; transposed < 2; transposed++) {
            kjit_array X = kjit_array_make(x, KJIT_F64, 3, shape);
            if (transposed) { /* a view of shape (5, 1500, 3) */
                X.shape[0] = shape[2];
                X.shape[2] = shape[0];
                int64_t s = X.strides[0];
                X.strides[0] = X.strides[2];
                X.strides[2] = s;
            }
            for (int mask = 0; mask < 8; mask++) {
                int axes[3], naxes = 0;
                for (int d = 0; d < 3; d++)
                    if (mask >> d & 1)
                        axes[naxes++] = d - (d == 2 ? 3 : 0); /* -1 for the last */
                kjit_arg arg = kjit_arg_array(&X);
                kjit_array r;
                ck_assert_msg(kjit_reduce(vsum, &arg, 1, axes, naxes, NULL, NULL, &r) == KJIT_OK,
                              "%s", kjit_last_error(f.context));
                /* the reference over the same elements, in float64 */
                int64_t outs = 1;
                for (int d = 0; d < 3; d++)
                    if (!(mask >> d & 1))
                        outs *= X.shape[d];
                ck_assert_int_eq(kjit_array_size(&r), outs);
                double *want = calloc((size_t)outs, sizeof *want), *abs = calloc((size_t)outs, sizeof *abs);
                for (int64_t i = 0; i < X.shape[0]; i++)
                    for (int64_t j = 0; j < X.shape[1]; j++)
                        for (int64_t k = 0; k < X.shape[2]; k++) {
                            int64_t c[3] = {i, j, k}, o = 0;
                            for (int d = 0; d < 3; d++)
                                if (!(mask >> d & 1))
                                    o = o * X.shape[d] + c[d];
                            double v = *(double *)((char *)X.data + i * X.strides[0] +
                                                   j * X.strides[1] + k * X.strides[2]);
                            want[o] += v;
                            abs[o] += fabs(v);
                        }
                for (int64_t o = 0; o < outs; o++) {
                    double got = ((double *)r.data)[o];
                    ck_assert_msg(fabs(got - want[o]) <= 1e-12 * abs[o] + 1e-300,
                                  "axes mask %d%s output %lld: %.17g, want %.17g", mask,
                                  transposed ? " (transposed)" : "", (long long)o, got, want[o]);
                }
                free(want);
                free(abs);
                kjit_array_free(&r);
            }
        }
        fixture_close(&f);
    }
    free(x);
}
END_TEST

/* A fused map over broadcast and strided inputs: dot of each row of a
 * (4, n) array with one vector, and of a column view with a scalar. */
START_TEST(fused_map_broadcasts)
{
    seed_rng();
    Fixture f = fixture_open(KJIT_TARGET_PARALLEL, "reduce.kern", source);
    kjit_function *dot = fixture_fn(&f, "dot"), *sumsq = fixture_fn(&f, "sumsq");
    int64_t n = 5000, shape[2] = {4, 5000};
    double *a = malloc(sizeof *a * 4 * (size_t)n), *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; i < 4 * n; i++)
        a[i] = uniform(-1, 1);
    for (int64_t i = 0; i < n; i++)
        v[i] = uniform(-1, 1);
    kjit_array A = kjit_array_make(a, KJIT_F64, 2, shape), V = kjit_array_make(v, KJIT_F64, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&V)};
    int axis = -1;
    kjit_array r;
    ck_assert_msg(kjit_reduce(dot, args, 2, &axis, 1, NULL, NULL, &r) == KJIT_OK, "%s",
                  kjit_last_error(f.context));
    ck_assert_int_eq(r.shape[0], 4);
    for (int row = 0; row < 4; row++) {
        /* both sums round each of n terms' partial sums at most once: within
         * n epsilon of the sum of the terms' magnitudes, each way */
        double want = 0, scale = 0;
        for (int64_t i = 0; i < n; i++) {
            want += a[row * n + i] * v[i];
            scale += fabs(a[row * n + i] * v[i]);
        }
        ck_assert_msg(fabs(((double *)r.data)[row] - want) <= 2.0 * (double)n * DBL_EPSILON * scale,
                      "row %d", row);
    }
    kjit_array_free(&r);
    /* column 2 of the (4, n) array as a strided view, times the scalar 3 */
    kjit_array C = kjit_array_make(a + 2, KJIT_F64, 1, &shape[0]);
    C.strides[0] = n * (int64_t)sizeof(double);
    kjit_arg col[2] = {kjit_arg_array(&C), kjit_arg_f64(3)};
    ck_assert_int_eq(kjit_reduce(dot, col, 2, NULL, 0, NULL, NULL, &r), KJIT_OK);
    double want = 0;
    for (int row = 0; row < 4; row++)
        want += a[row * n + 2] * 3;
    ck_assert(fabs(*(double *)r.data - want) < 1e-14);
    kjit_array_free(&r);
    /* sum of squares: the map's one input */
    kjit_arg one = kjit_arg_array(&V);
    ck_assert_int_eq(kjit_reduce(sumsq, &one, 1, NULL, 0, NULL, NULL, &r), KJIT_OK);
    want = 0;
    for (int64_t i = 0; i < n; i++)
        want += v[i] * v[i];
    ck_assert(fabs(*(double *)r.data - want) <= 2.0 * (double)n * DBL_EPSILON * want);
    kjit_array_free(&r);
    free(a);
    free(v);
    fixture_close(&f);
}
END_TEST

START_TEST(errors_name_the_problem)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "reduce.kern", source);
    kjit_function *vsum = fixture_fn(&f, "vsum"), *dot = fixture_fn(&f, "dot");
    double x[6] = {0};
    int64_t shape[2] = {2, 3};
    kjit_array X = kjit_array_make(x, KJIT_F64, 2, shape);
    kjit_arg arg = kjit_arg_array(&X);
    kjit_array r;
    int bad = 2;
    ck_assert_int_eq(kjit_reduce(vsum, &arg, 1, &bad, 1, NULL, NULL, &r),
                     KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "axis 2 is out of range"));
    int twice[2] = {1, -1};
    ck_assert_int_eq(kjit_reduce(vsum, &arg, 1, twice, 2, NULL, NULL, &r),
                     KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "given twice"));
    double o[2];
    int64_t three = 3;
    kjit_array Out = kjit_array_make(o, KJIT_F64, 1, &three);
    int axis = 1;
    ck_assert_int_eq(kjit_reduce(vsum, &arg, 1, &axis, 1, NULL, &Out, NULL), KJIT_ERROR_SHAPE);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "(3,)"));
    uint8_t u[6] = {0};
    kjit_array U = kjit_array_make(u, KJIT_U8, 2, shape);
    kjit_arg ua = kjit_arg_array(&U);
    ck_assert_int_eq(kjit_reduce(vsum, &ua, 1, NULL, 0, NULL, NULL, &r), KJIT_ERROR_TYPE);
    ck_assert_int_eq(kjit_reduce(dot, &arg, 1, NULL, 0, NULL, NULL, &r),
                     KJIT_ERROR_INVALID_ARGUMENT);
    kjit_arg plain[1] = {arg};
    ck_assert_int_eq(kjit_call(vsum, plain, 1, NULL, &r), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(f.context), "kjit_reduce"));
    fixture_close(&f);
}
END_TEST

Suite *suite_reduce(void)
{
    Suite *suite = suite_create("reduce");
    TCase *tcase = tcase_create("reduce");
    tcase_set_timeout(tcase, 300);
    tcase_add_test(tcase, sums_within_the_bound_cpu);
    tcase_add_test(tcase, sums_within_the_bound_parallel);
    tcase_add_test(tcase, same_bits_on_every_run_target_and_form);
    tcase_add_test(tcase, integers_are_exact);
    tcase_add_test(tcase, empty_one_and_init);
    tcase_add_test(tcase, every_axis_combination_of_3d);
    tcase_add_test(tcase, leading_axes_and_unaligned_views);
    tcase_add_test(tcase, strided_levels_in_every_form);
    tcase_add_test(tcase, fused_map_broadcasts);
    tcase_add_test(tcase, errors_name_the_problem);
    suite_add_tcase(suite, tcase);
    return suite;
}
