/*
 * test_line_info.c: kjit_options.line_info through the public API.  Code
 * compiled with line tables (DWARF on cpu, .loc in PTX) runs on every target
 * (cuda when a GPU is usable) and gives the very bits the code without them
 * gives, on fresh random inputs; the two are cached apart.  The text of the
 * line tables is checked by test_ptx.c (line_info_names_the_kern_lines).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

static const char source[] = "@vectorize\n"
                             "fn f(x: f64, y: f32) -> f64 {\n"
                             "    let a = sin(x) * f64(y);\n"
                             "    return a + exp(-x * x);\n"
                             "}\n"
                             "@kernel\n"
                             "fn k(a: f32[], b: f32[]) {\n"
                             "    let i = grid(1);\n"
                             "    if i < len(a) {\n"
                             "        b[i] = cos(a[i]) * 3.0;\n"
                             "    }\n"
                             "}\n";

enum { N = 3000 };

/* f over x, y and k over x32 on `target`, with or without line tables. */
static void run(kjit_target target, int line_info, const double *x, const float *y, double *f_out,
                float *k_out)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    options.line_info = line_info;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "lines.kern", source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));
    int64_t shape[1] = {N};
    kjit_array ax = kjit_array_make((void *)x, KJIT_F64, 1, shape);
    kjit_array ay = kjit_array_make((void *)y, KJIT_F32, 1, shape);
    kjit_array out = kjit_array_make(f_out, KJIT_F64, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&ax), kjit_arg_array(&ay)};
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "f", &fn), KJIT_OK);
    ck_assert_msg(kjit_call(fn, args, 2, &out, NULL) == KJIT_OK, "%s", kjit_last_error(context));

    kjit_array kb = kjit_array_make(k_out, KJIT_F32, 1, shape);
    kjit_arg kargs[2] = {kjit_arg_array(&ay), kjit_arg_array(&kb)};
    ck_assert_int_eq(kjit_module_function(module, "k", &fn), KJIT_OK);
    uint32_t grid[3] = {(N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    ck_assert_msg(kjit_launch(fn, grid, block, kargs, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(line_tables_change_no_result)
{
    static double x[N], f0[N], f1[N];
    static float y[N], k0[N], k1[N];
    uint64_t r = (uint64_t)time(NULL) | 1;
    for (int i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (double)(r >> 11) / 9007199254740992.0 * 20 - 10;
        y[i] = (float)((double)(r & 0xffffff) / 16777216.0 * 8 - 4);
    }
    kjit_target targets[3] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL, KJIT_TARGET_CUDA};
    char reason[256];
    int count = kjit_cuda_available(reason, sizeof reason) == KJIT_OK ? 3 : 2;
    for (int t = 0; t < count; t++) {
        run(targets[t], 0, x, y, f0, k0);
        run(targets[t], 1, x, y, f1, k1);
        ck_assert_msg(memcmp(f0, f1, sizeof f0) == 0 && memcmp(k0, k1, sizeof k0) == 0,
                      "%s: results differ with line tables", kjit_target_name(targets[t]));
    }
}
END_TEST

START_TEST(line_info_defaults_to_the_environment)
{
    kjit_options options;
    setenv("KJIT_LINEINFO", "1", 1);
    kjit_options_init(&options);
    ck_assert_int_eq(options.line_info, 1);
    setenv("KJIT_LINEINFO", "0", 1);
    kjit_options_init(&options);
    ck_assert_int_eq(options.line_info, 0);
    unsetenv("KJIT_LINEINFO");
    kjit_options_init(&options);
    ck_assert_int_eq(options.line_info, 0);
}
END_TEST

Suite *suite_line_info(void)
{
    Suite *s = suite_create("line_info");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, line_tables_change_no_result);
    tcase_add_test(tc, line_info_defaults_to_the_environment);
    suite_add_tcase(s, tc);
    return s;
}
