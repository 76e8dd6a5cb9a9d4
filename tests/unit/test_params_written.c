/*
 * test_params_written.c: kjit_function_param_written, which tells a host
 * (the Python package) which array parameters a function may store into, so
 * that it can refuse read-only memory for those and only those: a store, an
 * array `let` of a parameter, an atomic, a device function that stores into
 * the array it is given, a @guvectorize's output; and none of that for
 * parameters that are only read, scalars, or indices out of range.
 */
#include <check.h>

#include "kjit.h"
#include "fixture.h"

static const char source[] =
    "fn put(a: f32[], i: i64, v: f32) { a[i] = v; }\n"
    "fn get(a: f32[], i: i64) -> f32 { return a[i]; }\n"
    "@kernel\n"
    "fn copy(x: f32[], y: f32[], n: i64) {\n"
    "    let i = grid(1);\n"
    "    if i < n { y[i] = x[i]; }\n"
    "}\n"
    "@kernel\n"
    "fn through_let(x: f32[], y: f32[], z: f32[]) {\n"
    "    let i = grid(1);\n"
    "    let w = z;\n"
    "    if i < len(x) { w[i] = x[i] + y[i]; }\n"
    "}\n"
    "@kernel\n"
    "fn counts(x: i32[], hist: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { atomic_add(hist, x[i], 1); }\n"
    "}\n"
    "@kernel\n"
    "fn by_call(x: f32[], y: f32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { put(y, i, get(x, i)); }\n"
    "}\n"
    "@guvectorize(\"(n)->()\")\n"
    "fn total(x: f64[], out: f64[]) {\n"
    "    let s = 0.0;\n"
    "    for i in range(len(x)) { s += x[i]; }\n"
    "    out[0] = s;\n"
    "}\n";

START_TEST(which_parameters_are_written)
{
    Fixture f = fixture_open(KJIT_TARGET_CPU, "written.kern", source);
    struct {
        const char *name;
        int written[3];
    } cases[] = {
        {"copy", {0, 1, 0}},        {"through_let", {0, 0, 1}}, {"counts", {0, 1, 0}},
        {"by_call", {0, 1, 0}},     {"total", {0, 1, 0}},       {"put", {1, 0, 0}},
        {"get", {0, 0, 0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kjit_function *fn = fixture_fn(&f, cases[c].name);
        for (int p = 0; p < 3; p++)
            ck_assert_msg(kjit_function_param_written(fn, p) == cases[c].written[p],
                          "%s: parameter %d: written %d", cases[c].name, p,
                          kjit_function_param_written(fn, p));
        ck_assert_int_eq(kjit_function_param_written(fn, -1), 0);
        ck_assert_int_eq(kjit_function_param_written(fn, 99), 0);
    }
    ck_assert_int_eq(kjit_function_param_written(NULL, 0), 0);
    fixture_close(&f);
}
END_TEST

Suite *suite_params_written(void)
{
    Suite *s = suite_create("params_written");
    TCase *tc = tcase_create("params_written");
    tcase_add_test(tc, which_parameters_are_written);
    suite_add_tcase(s, tc);
    return s;
}
