/*
 * test_race.c: the race checker (kjit_options.check = KJIT_CHECK_RACE) through
 * the C API, on the cpu and parallel targets: arguments that alias each
 * other, atomics, syncgrid() between blocks, one report on every run, and the
 * options it refuses (unknown bits, cuda).  The command line's cases and the
 * racy kernels of the golden tests are tests/cli/race.sh and
 * tests/golden/races.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

static const char source[] =
    "@kernel\n"
    "fn shift(src: f32[], dst: f32[]) {\n"
    "    let t = grid(1);\n"
    "    dst[t] = src[(t + 1) % len(src)];\n"
    "}\n"
    "@kernel\n"
    "fn counts(hist: i32[], out: i32[]) {\n"
    "    atomic_add(hist, 0, 1);\n"
    "    if threadIdx.x == 7 { out[blockIdx.x] = hist[0]; }\n"
    "}\n"
    "@kernel\n"
    "fn atomics(hist: i32[]) {\n"
    "    atomic_add(hist, 0, 1);\n"
    "}\n"
    "@kernel\n"
    "fn handoff(a: f32[], out: f32[]) {\n"
    "    if blockIdx.x == 0 { a[threadIdx.x] = f32(threadIdx.x); }\n"
    "    syncgrid();\n"
    "    if blockIdx.x == 1 { out[threadIdx.x] = a[threadIdx.x]; }\n"
    "}\n"
    "@kernel\n"
    "fn no_handoff(a: f32[], out: f32[]) {\n"
    "    if blockIdx.x == 0 { a[threadIdx.x] = f32(threadIdx.x); }\n"
    "    if blockIdx.x == 1 { out[threadIdx.x] = a[threadIdx.x]; }\n"
    "}\n";

enum { N = 256 };

static kjit_context *race_context(kjit_target target)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 4;
    options.check = KJIT_CHECK_RACE;
    kjit_context *context;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    return context;
}

static kjit_function *function_of(kjit_context *context, kjit_module **module, const char *name)
{
    if (!*module)
        ck_assert_msg(kjit_compile_string(context, "race.kern", source, module) == KJIT_OK, "%s",
                      kjit_last_error(context));
    kjit_function *function;
    ck_assert_int_eq(kjit_module_function(*module, name, &function), KJIT_OK);
    return function;
}

static kjit_status launch2(kjit_function *f, float *a, float *b, uint32_t blocks, uint32_t threads)
{
    int64_t shape[1] = {(int64_t)blocks * threads};
    kjit_array A = kjit_array_make(a, KJIT_F32, 1, shape), B = kjit_array_make(b, KJIT_F32, 1, shape);
    kjit_arg args[2] = {kjit_arg_array(&A), kjit_arg_array(&B)};
    uint32_t grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
    return kjit_launch(f, grid, block, args, 2, NULL);
}

START_TEST(aliased_arguments_race)
{
    for (kjit_target target = KJIT_TARGET_CPU; target <= KJIT_TARGET_PARALLEL; target++) {
        kjit_context *context = race_context(target);
        kjit_module *module = NULL;
        kjit_function *shift = function_of(context, &module, "shift");
        static float a[N], b[N];
        for (int i = 0; i < N; i++)
            a[i] = (float)i;
        /* two arrays: no race, and the result of an unchecked run */
        ck_assert_int_eq(launch2(shift, a, b, 4, N / 4), KJIT_OK);
        for (int i = 0; i < N; i++)
            ck_assert(b[i] == a[(i + 1) % N]);
        /* one array twice: the store through dst races with the load through src */
        char first[1024] = "";
        for (int run = 0; run < 3; run++) {
            ck_assert_int_eq(launch2(shift, a, a, 4, N / 4), KJIT_ERROR_CHECK);
            const char *message = kjit_last_error(context);
            ck_assert_msg(strstr(message, "race.kern:4:5: error: write of dst[1] by thread (1,0,0) "
                                          "of block (0,0,0) races with the read of src at "
                                          "race.kern:4:17 by thread (0,0,0)"),
                          "%s", message);
            if (run == 0)
                snprintf(first, sizeof first, "%s", message);
            else
                ck_assert_str_eq(message, first); /* the same report on every run */
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(atomics_race_only_with_plain_accesses)
{
    kjit_context *context = race_context(KJIT_TARGET_PARALLEL);
    kjit_module *module = NULL;
    int32_t hist[1] = {0}, out[4] = {0};
    int64_t one[1] = {1}, four[1] = {4};
    kjit_array H = kjit_array_make(hist, KJIT_I32, 1, one);
    kjit_array O = kjit_array_make(out, KJIT_I32, 1, four);
    kjit_arg args[2] = {kjit_arg_array(&H), kjit_arg_array(&O)};
    uint32_t grid[3] = {4, 1, 1}, block[3] = {64, 1, 1};
    ck_assert_int_eq(kjit_launch(function_of(context, &module, "atomics"), grid, block, args, 1, NULL),
                     KJIT_OK);
    ck_assert_int_eq(hist[0], 256);
    ck_assert_int_eq(kjit_launch(function_of(context, &module, "counts"), grid, block, args, 2, NULL),
                     KJIT_ERROR_CHECK);
    const char *message = kjit_last_error(context);
    /* thread 7 reads what threads 0 to 6 added, with no barrier after them */
    ck_assert_msg(strstr(message, "race.kern:9:49: error: read of hist[0] by thread (7,0,0) of "
                                  "block (0,0,0) races with the atomic at race.kern:8:5 by thread "
                                  "(0,0,0)"),
                  "%s", message);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(syncgrid_orders_blocks)
{
    kjit_context *context = race_context(KJIT_TARGET_CPU);
    kjit_module *module = NULL;
    static float a[64], out[64];
    ck_assert_int_eq(launch2(function_of(context, &module, "handoff"), a, out, 2, 32), KJIT_OK);
    for (int i = 0; i < 32; i++)
        ck_assert(out[i] == (float)i);
    ck_assert_int_eq(launch2(function_of(context, &module, "no_handoff"), a, out, 2, 32),
                     KJIT_ERROR_CHECK);
    const char *message = kjit_last_error(context);
    ck_assert_msg(strstr(message, "read of a[0] by thread (0,0,0) of block (1,0,0) races with the "
                                  "write at race.kern:23:26 by thread (0,0,0) of block (0,0,0)"),
                  "%s", message);
    kjit_module_free(module);
    kjit_context_destroy(context);
}
END_TEST

START_TEST(options_it_refuses)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = KJIT_TARGET_CPU;
    options.check = 4;
    kjit_context *context = NULL;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(context);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(NULL), "unknown check bits"));
    options.check = KJIT_CHECK_ALL;
    options.target = KJIT_TARGET_CUDA;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(kjit_last_error(NULL), "compute-sanitizer"));
    /* AUTO with the race checker is cpu */
    options.target = KJIT_TARGET_AUTO;
    ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
    ck_assert_int_eq(kjit_context_target(context), KJIT_TARGET_CPU);
    kjit_context_destroy(context);
    /* KJIT_CHECK=race adds the bit */
    setenv("KJIT_CHECK", "race", 1);
    context = race_context(KJIT_TARGET_CPU);
    kjit_context_destroy(context);
    unsetenv("KJIT_CHECK");
}
END_TEST

Suite *suite_race(void)
{
    Suite *suite = suite_create("race");
    TCase *tcase = tcase_create("race");
    tcase_add_test(tcase, aliased_arguments_race);
    tcase_add_test(tcase, atomics_race_only_with_plain_accesses);
    tcase_add_test(tcase, syncgrid_orders_blocks);
    tcase_add_test(tcase, options_it_refuses);
    suite_add_tcase(suite, tcase);
    return suite;
}
