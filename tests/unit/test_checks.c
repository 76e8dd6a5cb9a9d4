/*
 * test_checks.c: checked mode (kjit_options.check) on the cpu and parallel
 * targets (test_cuda.c has the same cases on the GPU).
 *
 * Each kind of check runs twice on fresh random inputs: first with operands
 * that are all fine, where the results must match a float64 (or exact
 * integer) reference computed here, so checking changes no result; then with
 * one bad operand planted at a random place, where the call must end with
 * KJIT_ERROR_CHECK and a message that names the source place, the values
 * and the block and thread (kernels) or element (vectorized calls).  After
 * each failure the same context runs a correct call and must give the right
 * answer.  Checks are off by default (x / 0 then gives x, as
 * docs/language.md says) and KJIT_CHECK=1 turns them on.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"
#include "rng.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static int64_t below(int64_t n) { return (int64_t)(rng_next(&rng) % (uint64_t)n); }

static const char source[] =
    "@kernel\n"
    "fn gather(src: f64[], idx: i64[], out: f64[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(out) {\n"
    "        out[i] = src[idx[i]] * 2.0;\n"
    "    }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn window(a: f64[,], out: f64[,], shift: i64) {\n"
    "    let x, y = grid(2);\n"
    "    let t = shared(f64, 64);\n"
    "    let l = local(f64, 4);\n"
    "    t[threadIdx.x] = 1.0;\n"
    "    l[shift % 8] = 3.0;\n"
    "    syncthreads();\n"
    "    if y < out.shape[0] && x < out.shape[1] {\n"
    "        out[y, x] = a[y, x + shift] + t[threadIdx.x] + l[shift % 8];\n"
    "    }\n"
    "}\n"
    "\n"
    "@vectorize\n"
    "fn idiv(a: i32, b: i32) -> i32 {\n"
    "    return a / b + a % b;\n"
    "}\n"
    "\n"
    "@vectorize\n"
    "fn conv(x: f64) -> i16 {\n"
    "    return i16(x * 100.0);\n"
    "}\n"
    "\n"
    "@vectorize\n"
    "fn shifts(x: i64, n: i32) -> i64 {\n"
    "    return (x << n) >> n;\n"
    "}\n"
    "\n"
    "@vectorize\n"
    "fn power(k: i64, n: i64) -> i64 {\n"
    "    return k ** n;\n"
    "}\n"
    "\n"
    "fn at(a: f64[], i: i64) -> f64 {\n"
    "    return a[i];\n"
    "}\n";

static kjit_context *checked_context(kjit_target target, int check)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    options.check = check;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static kjit_function *function_of(kjit_context *context, kjit_module **module, const char *name)
{
    if (!*module)
        ck_assert_msg(kjit_compile_string(context, "checks.kern", source, module) == KJIT_OK,
                      "%s", kjit_last_error(context));
    kjit_function *function;
    ck_assert_int_eq(kjit_module_function(*module, name, &function), KJIT_OK);
    return function;
}

/* The call failed a check, and the message says `want` (each part in turn). */
static void expect_failure(kjit_context *context, kjit_status status, const char *const *want)
{
    const char *message = kjit_last_error(context);
    ck_assert_msg(status == KJIT_ERROR_CHECK, "status %s, message: %s", kjit_status_name(status),
                  message);
    for (int i = 0; want[i]; i++)
        ck_assert_msg(strstr(message, want[i]) != NULL, "'%s' is not in the message:\n%s",
                      want[i], message);
}

static const kjit_target targets[] = {KJIT_TARGET_CPU, KJIT_TARGET_PARALLEL};
enum { TARGET_COUNT = 2 };

/* ------------------------------------------------------------ indices */

START_TEST(index_checks_in_kernels)
{
    enum { N = 8192, SRC = 5000, BLOCK = 64 };
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *gather = function_of(context, &module, "gather");
        double *src = malloc(sizeof(double) * SRC), *out = malloc(sizeof(double) * N);
        int64_t *idx = malloc(sizeof(int64_t) * N);
        for (int i = 0; i < SRC; i++)
            src[i] = rng_uniform(&rng, -1e3, 1e3);
        int64_t src_shape[1] = {SRC}, n_shape[1] = {N};
        kjit_array S = kjit_array_make(src, KJIT_F64, 1, src_shape);
        kjit_array I = kjit_array_make(idx, KJIT_I64, 1, n_shape);
        kjit_array O = kjit_array_make(out, KJIT_F64, 1, n_shape);
        kjit_arg args[3] = {kjit_arg_array(&S), kjit_arg_array(&I), kjit_arg_array(&O)};
        uint32_t grid[3] = {N / BLOCK, 1, 1}, block[3] = {BLOCK, 1, 1};
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < N; i++)
                idx[i] = below(SRC);
            ck_assert_int_eq(kjit_launch(gather, grid, block, args, 3, NULL), KJIT_OK);
            for (int i = 0; i < N; i++)
                ck_assert_msg(out[i] == src[idx[i]] * 2.0, "out[%d] = %g, want %g", i, out[i],
                              src[idx[i]] * 2.0);
            if (round == 2)
                break;
            /* one index past the end (round 0) or negative (round 1) */
            int bad = (int)below(N);
            int64_t value = round == 0 ? SRC + below(100) : -1 - below(100);
            idx[bad] = value;
            char what[128], where[128];
            snprintf(what, sizeof what, "index %lld out of range for axis 0 of 'src' (length %d)",
                     (long long)value, SRC);
            snprintf(where, sizeof where, "in block (%d,0,0), thread (%d,0,0) of kernel 'gather'",
                     bad / BLOCK, bad % BLOCK);
            const char *want[] = {"checks.kern:5:21: error: ", what, where,
                                  "        out[i] = src[idx[i]] * 2.0;\n                    ^", NULL};
            expect_failure(context, kjit_launch(gather, grid, block, args, 3, NULL), want);
        }
        free(src), free(out), free(idx);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(index_checks_on_shared_local_and_2d_arrays)
{
    enum { ROWS = 32, COLS = 64, WIDE = 71 };
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *window = function_of(context, &module, "window");
        static double a[ROWS * WIDE], out[ROWS * COLS];
        for (int i = 0; i < ROWS * WIDE; i++)
            a[i] = rng_uniform(&rng, -10, 10);
        int64_t a_shape[2] = {ROWS, WIDE}, out_shape[2] = {ROWS, COLS};
        kjit_array A = kjit_array_make(a, KJIT_F64, 2, a_shape);
        kjit_array O = kjit_array_make(out, KJIT_F64, 2, out_shape);
        uint32_t grid[3] = {2, ROWS / 2, 1}, block[3] = {32, 2, 1};
        /* shift 0..3 is fine everywhere; 4..7 overrun l (length 4); 8 keeps
         * l in range (8 % 8 = 0) but overruns a's axis 1 at x = 63 only. */
        int64_t shift = below(4);
        kjit_arg args[3] = {kjit_arg_array(&A), kjit_arg_array(&O), kjit_arg_i64(shift)};
        ck_assert_int_eq(kjit_launch(window, grid, block, args, 3, NULL), KJIT_OK);
        for (int y = 0; y < ROWS; y++)
            for (int x = 0; x < COLS; x++)
                ck_assert(out[y * COLS + x] == a[y * WIDE + x + shift] + 1.0 + 3.0);

        args[2] = kjit_arg_i64(4 + below(4));
        /* every thread fails here: which one is first depends on the target */
        const char *local_want[] = {"checks.kern:15:5: error: index ", "of 'l' (length 4) in block (",
                                    " of kernel 'window'", NULL};
        expect_failure(context, kjit_launch(window, grid, block, args, 3, NULL), local_want);

        args[2] = kjit_arg_i64(8);
        const char *axis_want[] = {"checks.kern:18:22: error: index 71 out of range for axis 1 "
                                   "of 'a' (length 71) in block (1,",
                                   "thread (31,", NULL};
        expect_failure(context, kjit_launch(window, grid, block, args, 3, NULL), axis_want);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(index_checks_in_plain_functions)
{
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *at = function_of(context, &module, "at");
        double a[10];
        for (int i = 0; i < 10; i++)
            a[i] = rng_uniform(&rng, -5, 5);
        int64_t shape[1] = {10};
        kjit_array A = kjit_array_make(a, KJIT_F64, 1, shape);
        int64_t i = below(10);
        kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_i64(i)};
        kjit_array result;
        ck_assert_int_eq(kjit_call(at, args, 2, NULL, &result), KJIT_OK);
        ck_assert(*(double *)result.data == a[i]);
        kjit_array_free(&result);
        args[1] = kjit_arg_i64(10);
        const char *want[] = {"checks.kern:43:13: error: index 10 out of range for axis 0 of 'a' "
                              "(length 10) in the call of 'at'",
                              NULL};
        expect_failure(context, kjit_call(at, args, 2, NULL, &result), want);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ------------------------------------------------- vectorized operations */

enum { VN = 40000 }; /* above the parallel target's chunk, so the pool runs */

typedef struct VecCase {
    const char *name;
    kjit_dtype in[2], out;
    int nin;
} VecCase;

/* Runs name over in0, in1 into out; KJIT_OK or the status. */
static kjit_status run_vec(kjit_function *function, const VecCase *c, void *in0, void *in1,
                           void *out)
{
    int64_t shape[1] = {VN};
    kjit_array A = kjit_array_make(in0, c->in[0], 1, shape);
    kjit_array B = kjit_array_make(in1, c->in[1], 1, shape);
    kjit_array O = kjit_array_make(out, c->out, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    return kjit_call(function, args, c->nin, &O, NULL);
}

START_TEST(division_checks)
{
    static int32_t a[VN], b[VN], out[VN];
    const VecCase c = {"idiv", {KJIT_I32, KJIT_I32}, KJIT_I32, 2};
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *idiv = function_of(context, &module, "idiv");
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < VN; i++) {
                a[i] = (int32_t)(rng_next(&rng) >> 32);
                do
                    b[i] = (int32_t)below(2001) - 1000;
                while (b[i] == 0);
            }
            ck_assert_int_eq(run_vec(idiv, &c, a, b, out), KJIT_OK);
            for (int i = 0; i < VN; i++) {
                int64_t want = (int64_t)a[i] / b[i] + (int64_t)a[i] % b[i];
                ck_assert_msg(out[i] == (int32_t)want, "%d / %d: %d", a[i], b[i], out[i]);
            }
            if (round == 2)
                break;
            int bad = (int)below(VN);
            char what[160], where[64];
            if (round == 0) {
                b[bad] = 0;
                snprintf(what, sizeof what, "integer division by zero: %d / 0", a[bad]);
            } else {
                a[bad] = INT32_MIN;
                b[bad] = -1;
                snprintf(what, sizeof what, "integer division overflows i32: -2147483648 / -1");
            }
            snprintf(where, sizeof where, " at element %d of the call of 'idiv'", bad);
            const char *want[] = {"checks.kern:24:14: error: ", what, where, NULL};
            expect_failure(context, run_vec(idiv, &c, a, b, out), want);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(conversion_checks)
{
    static double x[VN];
    static int16_t out[VN];
    const VecCase c = {"conv", {KJIT_F64, KJIT_F64}, KJIT_I16, 1};
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *conv = function_of(context, &module, "conv");
        for (int round = 0; round < 4; round++) {
            /* x * 100 in (-32769, 32768): truncates into i16 */
            for (int i = 0; i < VN; i++)
                x[i] = rng_uniform(&rng, -327.68, 327.67);
            ck_assert_int_eq(run_vec(conv, &c, x, x, out), KJIT_OK);
            for (int i = 0; i < VN; i++)
                ck_assert_msg(out[i] == (int16_t)(x[i] * 100.0), "i16(%.17g * 100) = %d", x[i],
                              out[i]);
            if (round == 3)
                break;
            int bad = (int)below(VN);
            const char *what;
            if (round == 0)
                x[bad] = NAN, what = "conversion of NaN to i16";
            else if (round == 1)
                x[bad] = 327.68, what = "conversion of 32768 to i16 is out of range";
            else
                x[bad] = -1e300, what = "conversion of -1.0000000000000001e+302 to i16 is out of "
                                        "range";
            char where[64];
            snprintf(where, sizeof where, " at element %d of the call of 'conv'", bad);
            const char *want[] = {"checks.kern:29:12: error: ", what, where, NULL};
            expect_failure(context, run_vec(conv, &c, x, x, out), want);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(shift_and_power_checks)
{
    static int64_t x[VN], k[VN], out[VN];
    static int32_t n[VN];
    static int64_t e[VN];
    const VecCase shift_case = {"shifts", {KJIT_I64, KJIT_I32}, KJIT_I64, 2};
    const VecCase power_case = {"power", {KJIT_I64, KJIT_I64}, KJIT_I64, 2};
    for (int t = 0; t < TARGET_COUNT; t++) {
        kjit_context *context = checked_context(targets[t], 1);
        kjit_module *module = NULL;
        kjit_function *shifts = function_of(context, &module, "shifts");
        kjit_function *power = function_of(context, &module, "power");
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < VN; i++) {
                x[i] = (int64_t)rng_next(&rng);
                n[i] = (int32_t)below(64);
                k[i] = below(11) - 5;
                e[i] = below(20);
            }
            ck_assert_int_eq(run_vec(shifts, &shift_case, x, n, out), KJIT_OK);
            for (int i = 0; i < VN; i++)
                ck_assert(out[i] == (int64_t)((uint64_t)x[i] << n[i]) >> n[i]);
            ck_assert_int_eq(run_vec(power, &power_case, k, e, out), KJIT_OK);
            for (int i = 0; i < VN; i++) {
                int64_t want = 1;
                for (int j = 0; j < e[i]; j++)
                    want *= k[i];
                ck_assert_msg(out[i] == want, "%lld ** %lld = %lld", (long long)k[i],
                              (long long)e[i], (long long)out[i]);
            }
            if (round == 2)
                break;
            int bad = (int)below(VN);
            n[bad] = round == 0 ? 64 : -1;
            char what[96], where[64];
            snprintf(what, sizeof what,
                     "shift count %d out of range for a 64-bit operand (0 to 63)", n[bad]);
            snprintf(where, sizeof where, " at element %d of the call of 'shifts'", bad);
            const char *shift_want[] = {"checks.kern:34:15: error: ", what, where, NULL};
            expect_failure(context, run_vec(shifts, &shift_case, x, n, out), shift_want);

            e[bad] = -1 - below(5);
            snprintf(what, sizeof what, "negative exponent %lld in an integer power",
                     (long long)e[bad]);
            snprintf(where, sizeof where, " at element %d of the call of 'power'", bad);
            const char *power_want[] = {"checks.kern:39:14: error: ", what, where, NULL};
            expect_failure(context, run_vec(power, &power_case, k, e, out), power_want);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

/* ----------------------------------------------------- off by default */

START_TEST(checks_are_off_by_default_and_on_with_kjit_check)
{
    kjit_options options;
    kjit_options_init(&options);
    ck_assert_int_eq(options.check, 0);
    ck_assert_str_eq(kjit_status_name(KJIT_ERROR_CHECK), "check failed");

    unsetenv("KJIT_CHECK");
    static int32_t a[VN], b[VN], out[VN];
    const VecCase c = {"idiv", {KJIT_I32, KJIT_I32}, KJIT_I32, 2};
    for (int i = 0; i < VN; i++) {
        a[i] = (int32_t)below(2000000) - 1000000;
        b[i] = 0;
    }
    kjit_context *context = checked_context(KJIT_TARGET_CPU, 0);
    kjit_module *module = NULL;
    /* unchecked: x / 0 is x and x % 0 is 0 (docs/language.md) */
    ck_assert_int_eq(run_vec(function_of(context, &module, "idiv"), &c, a, b, out), KJIT_OK);
    for (int i = 0; i < VN; i++)
        ck_assert_int_eq(out[i], a[i]);
    kjit_module_free(module);
    kjit_context_destroy(context);

    setenv("KJIT_CHECK", "1", 1);
    context = checked_context(KJIT_TARGET_PARALLEL, 0);
    module = NULL;
    const char *want[] = {"integer division by zero", NULL};
    expect_failure(context, run_vec(function_of(context, &module, "idiv"), &c, a, b, out), want);
    kjit_module_free(module);
    kjit_context_destroy(context);
    unsetenv("KJIT_CHECK");
}
END_TEST

Suite *suite_checks(void)
{
    rng ^= (uint64_t)time(NULL) * 2654435761u;
    printf("checks: random seed %llu\n", (unsigned long long)rng);
    Suite *suite = suite_create("checks");
    TCase *tcase = tcase_create("checks");
    tcase_add_test(tcase, index_checks_in_kernels);
    tcase_add_test(tcase, index_checks_on_shared_local_and_2d_arrays);
    tcase_add_test(tcase, index_checks_in_plain_functions);
    tcase_add_test(tcase, division_checks);
    tcase_add_test(tcase, conversion_checks);
    tcase_add_test(tcase, shift_and_power_checks);
    tcase_add_test(tcase, checks_are_off_by_default_and_on_with_kjit_check);
    suite_add_tcase(suite, tcase);
    return suite;
}
