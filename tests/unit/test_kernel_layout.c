/*
 * test_kernel_layout.c: the contiguous kernel variants on the cpu and parallel
 * targets.
 *
 * kjit_launch compiles a @kernel once per set of C-contiguous array arguments;
 * in that code a contiguous array's strides come from its shape, not its
 * descriptor.  These tests launch the same kernels on contiguous arrays and on
 * transposed, sliced and padded views holding the same values, and check:
 * every result against a float64 reference computed here (so strided views
 * given contiguous code, or the reverse, would fail), the two variants'
 * results bit for bit against each other, an array that reaches a plain
 * function through the kernel, a 3-D array, a size-1 dimension with an odd
 * stride (contiguous by NumPy's rule), and that each distinct layout compiles
 * once and only once.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kjit_runtime.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uniform(double lo, double hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (double)(rng >> 11) / 9007199254740992.0;
}

/* `combine` reads `a` through a plain function (the facts about its strides
 * must survive the call) and `b` directly; `sum3` walks a 3-D array. */
static const char layout_source[] =
    "fn at(a: f64[,], i: i64, j: i64) -> f64 { return a[i, j]; }\n"
    "@kernel\n"
    "fn combine(a: f64[,], b: f64[,], out: f64[,], s: f64) {\n"
    "    let x, y = grid(2);\n"
    "    if y < out.shape[0] && x < out.shape[1] {\n"
    "        out[y, x] = at(a, y, x) * s + b[y, x] * f64(y - x);\n"
    "    }\n"
    "}\n"
    "@kernel\n"
    "fn sum3(a: f32[,,], out: f64[]) {\n"
    "    let i = grid(1);\n"
    "    if i < out.shape[0] {\n"
    "        let acc = 0.0;\n"
    "        for j in range(a.shape[1]) {\n"
    "            for k in range(a.shape[2]) {\n"
    "                acc += f64(a[i, j, k]) * f64(j + 1) - f64(k);\n"
    "            }\n"
    "        }\n"
    "        out[i] = acc;\n"
    "    }\n"
    "}\n";

/* The source with a comment no other run has, so that the cache cannot hold
 * its code and the compile counter sees every variant. */
static char *unique_source(void)
{
    size_t n = sizeof layout_source + 64;
    char *text = malloc(n);
    snprintf(text, n, "// run %ld %ld\n%s", (long)time(NULL), (long)getpid(), layout_source);
    return text;
}

static kjit_context *make_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

/* A 2-D f64 view of buf: element [i][j] at buf[i * si + j * sj] (in elements). */
static kjit_array view2(double *buf, int64_t rows, int64_t cols, int64_t si, int64_t sj)
{
    int64_t shape[2] = {rows, cols};
    kjit_array a = kjit_array_make(buf, KJIT_F64, 2, shape);
    a.strides[0] = si * (int64_t)sizeof(double);
    a.strides[1] = sj * (int64_t)sizeof(double);
    return a;
}

static double at2(const kjit_array *a, int64_t i, int64_t j)
{
    return *(const double *)((const char *)a->data + i * a->strides[0] + j * a->strides[1]);
}

static uint64_t launches_compiled(kjit_function *fn, kjit_context *context, kjit_array *a,
                                  kjit_array *b, kjit_array *out, double s)
{
    uint64_t before = kj_cache_counters().compiles;
    kjit_arg args[4] = {kjit_arg_array(a), kjit_arg_array(b), kjit_arg_array(out),
                        kjit_arg_f64(s)};
    uint32_t grid[3] = {5, 7, 1}, block[3] = {16, 8, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    return kj_cache_counters().compiles - before;
}

/* out = a * s + b * (y - x), exactly as the kernel computes it (cpu code has
 * no FMA contraction): zero tolerance. */
static void check_combine(const kjit_array *a, const kjit_array *b, const kjit_array *out,
                          double s, const char *label)
{
    int64_t rows = out->shape[0], cols = out->shape[1];
    for (int64_t y = 0; y < rows; y++)
        for (int64_t x = 0; x < cols; x++) {
            double want = at2(a, y, x) * s + at2(b, y, x) * (double)(y - x);
            double got = at2(out, y, x);
            ck_assert_msg(got == want, "%s: out[%lld, %lld] = %.17g, want %.17g", label,
                          (long long)y, (long long)x, got, want);
        }
}

static void combine_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    char *source = unique_source();
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "layout.kern", source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    free(source);
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "combine", &fn), KJIT_OK);

    enum { R = 37, C = 53, PAD = 5 }; /* more than the 80 x 56 threads: some idle */
    double s = uniform(-3, 3);
    /* Contiguous: a, b, out in C order. */
    double *a_c = malloc(sizeof(double) * R * C), *b_c = malloc(sizeof(double) * R * C);
    double *out_c = malloc(sizeof(double) * R * C);
    /* The same values as views: a transposed (a C x R buffer), b every other
     * column of an R x 2C buffer, out rows padded by PAD elements. */
    double *a_t = malloc(sizeof(double) * C * R), *b_s = malloc(sizeof(double) * R * 2 * C);
    double *out_p = malloc(sizeof(double) * R * (C + PAD));
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) {
            a_c[i * C + j] = a_t[j * R + i] = uniform(-100, 100);
            b_c[i * C + j] = b_s[i * 2 * C + 2 * j] = uniform(-100, 100);
            b_s[i * 2 * C + 2 * j + 1] = NAN; /* never read */
        }
    memset(out_c, 0xff, sizeof(double) * R * C);
    memset(out_p, 0xff, sizeof(double) * R * (C + PAD));

    kjit_array A = view2(a_c, R, C, C, 1), B = view2(b_c, R, C, C, 1), O = view2(out_c, R, C, C, 1);
    kjit_array AT = view2(a_t, R, C, 1, R), BS = view2(b_s, R, C, 2 * C, 2);
    kjit_array OP = view2(out_p, R, C, C + PAD, 1);
    ck_assert(kj_array_is_contiguous(&A) && !kj_array_is_contiguous(&AT));
    ck_assert(!kj_array_is_contiguous(&BS) && !kj_array_is_contiguous(&OP));

    ck_assert_int_eq(launches_compiled(fn, context, &A, &B, &O, s), 1);
    check_combine(&A, &B, &O, s, "contiguous");
    ck_assert_int_eq(launches_compiled(fn, context, &AT, &BS, &OP, s), 1);
    check_combine(&AT, &BS, &OP, s, "strided views");
    /* Mixed: only b contiguous; then the first layout again, compiled once. */
    memset(out_p, 0xff, sizeof(double) * R * (C + PAD));
    ck_assert_int_eq(launches_compiled(fn, context, &AT, &B, &OP, s), 1);
    check_combine(&AT, &B, &OP, s, "mixed");
    ck_assert_int_eq(launches_compiled(fn, context, &A, &B, &O, s), 0);

    /* The two variants agree bit for bit. */
    for (int64_t i = 0; i < R; i++)
        ck_assert_msg(memcmp(out_c + i * C, out_p + i * (C + PAD), sizeof(double) * C) == 0,
                      "row %lld differs between the contiguous and strided variants",
                      (long long)i);

    /* A one-row view whose row stride is not the row length: contiguous by
     * NumPy's rule (size-1 dimensions do not count), so computed strides
     * (C, 1) stand in for the descriptor's (3C, 1) and must give row 0. */
    kjit_array A1 = view2(a_c, 1, C, 3 * C, 1), B1 = view2(b_c, 1, C, 7 * C, 1);
    double row[C];
    kjit_array O1 = view2(row, 1, C, 5 * C, 1);
    ck_assert(kj_array_is_contiguous(&A1) && kj_array_is_contiguous(&O1));
    launches_compiled(fn, context, &A1, &B1, &O1, s);
    check_combine(&A1, &B1, &O1, s, "one row");

    free(a_c), free(b_c), free(out_c), free(a_t), free(b_s), free(out_p);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(combine_views_cpu)
{
    combine_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(combine_views_parallel)
{
    combine_on(KJIT_TARGET_PARALLEL);
}
END_TEST

/* sum3 on a contiguous 3-D array and on a view of it with its last two axes
 * swapped (the same array read as [i, k, j]). */
static void sum3_on(kjit_target target)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    ck_assert_int_eq(kjit_compile_string(context, "layout.kern", layout_source, &module), KJIT_OK);
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "sum3", &fn), KJIT_OK);
    enum { N0 = 9, N1 = 6, N2 = 11 };
    float *buf = malloc(sizeof(float) * N0 * N1 * N2);
    for (int i = 0; i < N0 * N1 * N2; i++)
        buf[i] = (float)uniform(-1, 1);
    int64_t shape[3] = {N0, N1, N2}, swapped_shape[3] = {N0, N2, N1}, out_shape[1] = {N0};
    kjit_array a = kjit_array_make(buf, KJIT_F32, 3, shape);
    kjit_array sw = kjit_array_make(buf, KJIT_F32, 3, swapped_shape);
    sw.strides[1] = a.strides[2];
    sw.strides[2] = a.strides[1];
    double out[N0], out_sw[N0];
    kjit_array o = kjit_array_make(out, KJIT_F64, 1, out_shape);
    kjit_array osw = kjit_array_make(out_sw, KJIT_F64, 1, out_shape);
    uint32_t grid[3] = {2, 1, 1}, block[3] = {8, 1, 1};
    kjit_arg args[2] = {kjit_arg_array(&a), kjit_arg_array(&o)};
    ck_assert_msg(kjit_launch(fn, grid, block, args, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_arg sargs[2] = {kjit_arg_array(&sw), kjit_arg_array(&osw)};
    ck_assert_msg(kjit_launch(fn, grid, block, sargs, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int i = 0; i < N0; i++) {
        double want = 0, want_sw = 0;
        for (int j = 0; j < N1; j++)
            for (int k = 0; k < N2; k++)
                want += (double)buf[(i * N1 + j) * N2 + k] * (j + 1) - k;
        for (int j = 0; j < N2; j++)
            for (int k = 0; k < N1; k++)
                want_sw += (double)buf[(i * N1 + k) * N2 + j] * (j + 1) - k;
        ck_assert_msg(out[i] == want, "sum3[%d] = %.17g, want %.17g", i, out[i], want);
        ck_assert_msg(out_sw[i] == want_sw, "sum3 swapped[%d] = %.17g, want %.17g", i, out_sw[i],
                      want_sw);
    }
    free(buf);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(sum3_views_cpu)
{
    sum3_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(sum3_views_parallel)
{
    sum3_on(KJIT_TARGET_PARALLEL);
}
END_TEST

Suite *suite_kernel_layout(void)
{
    Suite *suite = suite_create("kernel_layout");
    TCase *tcase = tcase_create("kernel_layout");
    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, combine_views_cpu);
    tcase_add_test(tcase, combine_views_parallel);
    tcase_add_test(tcase, sum3_views_cpu);
    tcase_add_test(tcase, sum3_views_parallel);
    suite_add_tcase(suite, tcase);
    return suite;
}
