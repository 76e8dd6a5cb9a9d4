/*
 * test_print.c: print(...) on the cpu and parallel targets, captured through
 * kjit_options.on_print: every line arrives whole and ends in a newline, from
 * plain functions, @vectorize elements, kernels (with and without a barrier,
 * so on fibers too) and device functions; a line longer than the buffer
 * arrives cut but still ends in a newline; two contexts keep their own lines.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

typedef struct Captured {
    int lines;
    char text[16384];
    size_t len;
    int bad_lines; /* lines that did not end in '\n' or held another '\n' */
} Captured;

static void capture(void *user, const char *line, size_t len)
{
    Captured *c = user;
    c->lines++;
    if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1))
        c->bad_lines++;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, line, len);
        c->len += len;
        c->text[c->len] = 0;
    }
}

static kjit_context *make_context(kjit_target target, Captured *captured)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 4;
    options.on_print = capture;
    options.print_user = captured;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static const char *source =
    "fn show(n: i32, x: f64) -> i32 {\n"
    "    print(\"n =\", n, \"x = %.2f\", x, n > 1, complex(1.0, 2.0));\n"
    "    return n;\n"
    "}\n"
    "@vectorize\n"
    "fn each(x: f64) -> f64 {\n"
    "    print(\"element\", x);\n"
    "    return x;\n"
    "}\n"
    "fn device(i: i64) { print(\"device\", i); }\n"
    "@kernel\n"
    "fn threads(a: f32[], barrier: i32) {\n"
    "    let i = grid(1);\n"
    "    print(\"thread %3d of block %d: %g\", i, blockIdx.x, a[i]);\n"
    "    device(i);\n"
    "    if barrier != 0 { syncthreads(); }\n"
    "}\n"
    "fn long_line(x: f64) {\n"
    "    print(x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x,\n"
    "          \"%0200.1f %0200.1f %0200.1f %0200.1f %0200.1f %0200.1f\", x, x, x, x, x, x);\n"
    "}\n";

static void run_all(kjit_target target)
{
    Captured captured = {0};
    kjit_context *context = make_context(target, &captured);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "print.kern", source, &module) == KJIT_OK, "%s",
                  kjit_last_error(context));

    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, "show", &fn), KJIT_OK);
    kjit_arg args[2] = {kjit_arg_i32(3), kjit_arg_f64(0.125)};
    kjit_array result;
    ck_assert_int_eq(kjit_call(fn, args, 2, NULL, &result), KJIT_OK);
    ck_assert_str_eq(captured.text, "n = 3 x = 0.12 true (1+2j)\n");

    /* @vectorize: one line per element */
    captured = (Captured){0};
    ck_assert_int_eq(kjit_module_function(module, "each", &fn), KJIT_OK);
    enum { N = 200 };
    double *in = calloc(N, sizeof *in), *out = calloc(N, sizeof *out);
    int64_t n = N;
    kjit_array in_array = kjit_array_make(in, KJIT_F64, 1, &n);
    kjit_array out_array = kjit_array_make(out, KJIT_F64, 1, &n);
    kjit_arg varg = kjit_arg_array(&in_array);
    ck_assert_int_eq(kjit_call(fn, &varg, 1, &out_array, NULL), KJIT_OK);
    ck_assert_int_eq(captured.lines, N);
    ck_assert_int_eq(captured.bad_lines, 0);

    /* kernels: each thread's line and its device function's line */
    ck_assert_int_eq(kjit_module_function(module, "threads", &fn), KJIT_OK);
    float a[64];
    for (int i = 0; i < 64; i++)
        a[i] = (float)i / 2;
    int64_t len = 64;
    kjit_array a_array = kjit_array_make(a, KJIT_F32, 1, &len);
    for (int barrier = 0; barrier < 2; barrier++) {
        captured = (Captured){0};
        kjit_arg kargs[2] = {kjit_arg_array(&a_array), kjit_arg_i32(barrier)};
        uint32_t grid[3] = {4, 1, 1}, block[3] = {16, 1, 1};
        ck_assert_msg(kjit_launch(fn, grid, block, kargs, 2, NULL) == KJIT_OK, "%s",
                      kjit_last_error(context));
        ck_assert_int_eq(captured.lines, 128);
        ck_assert_int_eq(captured.bad_lines, 0);
        ck_assert_msg(strstr(captured.text, "thread  37 of block 2: 18.5\n"), "%s", captured.text);
        ck_assert_msg(strstr(captured.text, "device 63\n"), "%s", captured.text);
    }

    /* a line past the buffer arrives cut, with its newline */
    captured = (Captured){0};
    ck_assert_int_eq(kjit_module_function(module, "long_line", &fn), KJIT_OK);
    kjit_arg x = kjit_arg_f64(1.5);
    ck_assert_int_eq(kjit_call(fn, &x, 1, NULL, NULL), KJIT_OK);
    ck_assert_int_eq(captured.lines, 1);
    ck_assert_int_eq(captured.bad_lines, 0);
    ck_assert_uint_eq(captured.len, KJ_PRINT_LINE_BYTES);

    free(in);
    free(out);
    kjit_module_free(module);
    kjit_context_destroy(context);
}

START_TEST(print_cpu)
{
    run_all(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(print_parallel)
{
    run_all(KJIT_TARGET_PARALLEL);
}
END_TEST

/* Two contexts that share compiled code still print to their own callbacks. */
START_TEST(print_two_contexts)
{
    Captured first = {0}, second = {0};
    kjit_context *one = make_context(KJIT_TARGET_CPU, &first);
    kjit_context *two = make_context(KJIT_TARGET_CPU, &second);
    const char *text = "fn hello(n: i32) { print(\"hello\", n); }";
    kjit_module *m1, *m2;
    ck_assert_int_eq(kjit_compile_string(one, "a.kern", text, &m1), KJIT_OK);
    ck_assert_int_eq(kjit_compile_string(two, "a.kern", text, &m2), KJIT_OK);
    kjit_function *f1, *f2;
    ck_assert_int_eq(kjit_module_function(m1, "hello", &f1), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(m2, "hello", &f2), KJIT_OK);
    kjit_arg a1 = kjit_arg_i32(1), a2 = kjit_arg_i32(2);
    ck_assert_int_eq(kjit_call(f1, &a1, 1, NULL, NULL), KJIT_OK);
    ck_assert_int_eq(kjit_call(f2, &a2, 1, NULL, NULL), KJIT_OK);
    ck_assert_str_eq(first.text, "hello 1\n");
    ck_assert_str_eq(second.text, "hello 2\n");
    kjit_module_free(m1);
    kjit_module_free(m2);
    kjit_context_destroy(one);
    kjit_context_destroy(two);
}
END_TEST

Suite *suite_print(void)
{
    Suite *s = suite_create("print");
    TCase *tc = tcase_create("print");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, print_cpu);
    tcase_add_test(tc, print_parallel);
    tcase_add_test(tc, print_two_contexts);
    suite_add_tcase(s, tc);
    return s;
}
