/*
 * test_mma.c: mma(), the warp's f64 matrix multiply-accumulate, on the cpu
 * and parallel targets through the public API: the tensor-core matrix
 * multiply of tests/bench/matmul_tc.kern at sizes that are not multiples of
 * its tiles, bit for bit against C's fma chain in the order docs/language.md
 * defines (each element from 0.0, k = 0, 1, ... in order: the kernel's mma()
 * add k in steps of 4, each step k, k + 1, k + 2, k + 3); one mma() of
 * fractions against C's chain from C, bit for bit, in the golden test's
 * layout (tests/golden/exec/mma_accumulate.kern); and the compile errors as
 * kjit_status values.  test_cuda.c compares the GPU with float64.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double uniform(double low, double high)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return low + (high - low) * (double)(rng >> 11) / 9007199254740992.0;
}

static kjit_context *make_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 2;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static kjit_function *load(kjit_context *context, const char *file, const char *name,
                           kjit_module **module)
{
    kjit_status status = kjit_compile_file(context, file, module);
    ck_assert_msg(status == KJIT_OK, "%s: %s", file, kjit_last_error(context));
    kjit_function *function;
    ck_assert_int_eq(kjit_module_function(*module, name, &function), KJIT_OK);
    return function;
}

static const kjit_target targets[] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};

/* c = a b of n x depth by depth x m on `target`, blocks of 256 threads. */
static void tc_multiply(kjit_target target, const double *a, const double *b, double *c, int64_t n,
                        int64_t depth, int64_t m)
{
    kjit_context *context = make_context(target);
    kjit_module *module;
    kjit_function *fn = load(context, "tests/bench/matmul_tc.kern", "matmul_tc", &module);
    int64_t sa[2] = {n, depth}, sb[2] = {depth, m}, sc[2] = {n, m};
    kjit_array A = kjit_array_make((void *)a, KJIT_F64, 2, sa);
    kjit_array B = kjit_array_make((void *)b, KJIT_F64, 2, sb);
    kjit_array C = kjit_array_make(c, KJIT_F64, 2, sc);
    kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&C)};
    uint32_t grid[3] = {(uint32_t)((m + 127) / 128), (uint32_t)((n + 127) / 128), 1};
    uint32_t block[3] = {256, 1, 1};
    kjit_status status = kjit_launch(fn, grid, block, args, 3, NULL);
    ck_assert_msg(status == KJIT_OK, "matmul_tc on %s: %s", kjit_target_name(target),
                  kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(matmul_tc_is_the_fma_chain)
{
    const int64_t sizes[3][3] = {{37, 29, 45}, {130, 20, 140}, {8, 4, 8}};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s][0], depth = sizes[s][1], m = sizes[s][2];
        double *a = malloc(sizeof(double) * (size_t)(n * depth));
        double *b = malloc(sizeof(double) * (size_t)(depth * m));
        double *c = malloc(sizeof(double) * (size_t)(n * m));
        for (int64_t i = 0; i < n * depth; i++)
            a[i] = uniform(-1, 1);
        for (int64_t i = 0; i < depth * m; i++)
            b[i] = uniform(-1, 1);
        for (int t = 0; t < 2; t++) {
            memset(c, 0xff, sizeof(double) * (size_t)(n * m)); /* NaNs: every element written */
            tc_multiply(targets[t], a, b, c, n, depth, m);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++) {
                    double want = 0.0;
                    for (int64_t k = 0; k < depth; k++)
                        want = fma(a[i * depth + k], b[k * m + j], want);
                    ck_assert_msg(memcmp(&c[i * m + j], &want, sizeof want) == 0,
                                  "%s, %lldx%lldx%lld: c[%lld, %lld] is %.17g, the fma chain %.17g",
                                  kjit_target_name(targets[t]), (long long)n, (long long)depth,
                                  (long long)m, (long long)i, (long long)j, c[i * m + j], want);
                }
        }
        free(a);
        free(b);
        free(c);
    }
}
END_TEST

/* mma_accumulate.kern's product (K = 8 in two mma(), from C), its
 * fractions' sums rounded at every step: the chain in order, from C. */
START_TEST(accumulation_from_c_in_order)
{
    int64_t shape[2] = {8, 8};
    double a[64], b[64], c[64], d[64];
    for (int i = 0; i < 64; i++) {
        a[i] = uniform(-1, 1) / 3;
        b[i] = uniform(-1, 1) / 7;
        c[i] = uniform(-1, 1);
    }
    for (int t = 0; t < 2; t++) {
        kjit_context *context = make_context(targets[t]);
        kjit_module *module;
        kjit_function *fn = load(context, "tests/golden/exec/mma_accumulate.kern", "mma_product",
                                 &module);
        kjit_array arrays[4] = {kjit_array_make(a, KJIT_F64, 2, shape),
                                kjit_array_make(b, KJIT_F64, 2, shape),
                                kjit_array_make(c, KJIT_F64, 2, shape),
                                kjit_array_make(d, KJIT_F64, 2, shape)};
        kjit_arg args[4];
        for (int i = 0; i < 4; i++)
            args[i] = kjit_arg_array(&arrays[i]);
        uint32_t grid[3] = {1, 1, 1}, block[3] = {8, 4, 1};
        ck_assert_msg(kjit_launch(fn, grid, block, args, 4, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        for (int g = 0; g < 8; g++)
            for (int n = 0; n < 8; n++) {
                double want = c[g * 8 + n];
                for (int k = 0; k < 8; k++)
                    want = fma(a[g * 8 + k], b[k * 8 + n], want);
                ck_assert_msg(memcmp(&d[g * 8 + n], &want, sizeof want) == 0,
                              "%s: d[%d, %d] is %.17g, the chain %.17g",
                              kjit_target_name(targets[t]), g, n, d[g * 8 + n], want);
            }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* The checker's errors come back as KJIT_ERROR_COMPILE with the message. */
START_TEST(errors_are_statuses)
{
    static const char *const cases[][2] = {
        {"@kernel\nfn k(x: f64[]) { let d = mma(x[0], x[1], 0.0, 0.0); x[0] = d; }\n",
         "mma() gives two values"},
        {"fn f(a: f64) -> f64 { let d0, d1 = mma(a, a, a, a); return d0; }\n"
         "@vectorize\nfn v(a: f64) -> f64 { return f(a); }\n",
         "v -> f uses mma()"},
        {"@kernel\nfn k(x: f64[]) { let d0, d1 = mma(x[0], x[1], 0.0); }\n",
         "mma takes 4 arguments"},
    };
    kjit_context *context = make_context(KJIT_TARGET_CPU);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kjit_module *module = NULL;
        kjit_status status = kjit_compile_string(context, "mma_errors.kern", cases[i][0], &module);
        ck_assert_int_eq(status, KJIT_ERROR_COMPILE);
        const char *error = kjit_last_error(context);
        ck_assert_msg(error && strstr(error, cases[i][1]), "case %zu: '%s' lacks '%s'", i,
                      error ? error : "(none)", cases[i][1]);
    }
    kjit_context_destroy(context);
}
END_TEST

Suite *suite_mma(void)
{
    Suite *suite = suite_create("mma");
    TCase *tcase = tcase_create("mma");
    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, matmul_tc_is_the_fma_chain);
    tcase_add_test(tcase, accumulation_from_c_in_order);
    tcase_add_test(tcase, errors_are_statuses);
    suite_add_tcase(suite, tcase);
    return suite;
}
