/*
 * test_random.c: stdlib/random.kern (Philox4x32-10) through the public API,
 * on cpu, parallel and, when a GPU is usable, cuda.
 *
 *   - Random123's known-answer vectors (kat_vectors, philox4x32 with 10
 *     rounds) for philox4x32_10;
 *   - rand_u32, rand_u64, rand_below, rand_int, rand_uniform and
 *     rand_uniform_f32 over 4096 counters under a fresh random seed, bit for
 *     bit against the Philox written again here in C (and so equal across
 *     targets);
 *   - rand_normal and rand_normal_f32 against Box-Muller in long double, to
 *     the accuracy of log, sqrt and cos, and their first two moments.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kjit.h"

/* ================================================================ the C Philox */

static void philox_c(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t x0 = counter[0], x1 = counter[1], x2 = counter[2], x3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y1 = (uint32_t)p1;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1, y3 = (uint32_t)p0;
        x0 = y0, x1 = y1, x2 = y2, x3 = y3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

static uint32_t word_c(uint64_t seed, uint64_t block, int word)
{
    uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0, 0};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
    philox_c(counter, key, out);
    return out[word];
}

static uint32_t rand_u32_c(uint64_t seed, uint64_t n) { return word_c(seed, n >> 2, (int)(n & 3)); }

static uint64_t rand_u64_c(uint64_t seed, uint64_t n)
{
    int w = (int)(n & 1) * 2;
    return word_c(seed, n >> 1, w) | (uint64_t)word_c(seed, n >> 1, w + 1) << 32;
}

/* ================================================================ the targets */

static int targets(kjit_target out[3])
{
    int n = 0;
    out[n++] = KJIT_TARGET_CPU;
    out[n++] = KJIT_TARGET_PARALLEL;
    char reason[256];
    if (kjit_cuda_available(reason, sizeof reason) == KJIT_OK)
        out[n++] = KJIT_TARGET_CUDA;
    return n;
}

static kjit_module *open_random(kjit_target target, kjit_context **context)
{
    kjit_options options;
    kjit_options_init(&options);
    options.target = target;
    options.num_threads = 3;
    ck_assert_int_eq(kjit_context_create(&options, context), KJIT_OK);
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(*context, "use_random.kern", "import random;\n", &module) ==
                      KJIT_OK,
                  "%s", kjit_last_error(*context));
    return module;
}

static kjit_arg u64_arg(uint64_t v)
{
    kjit_arg a = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_U64};
    a.value.u = v;
    return a;
}

/* name(args...) over arrays into out (allocated by the caller). */
static void call(kjit_context *context, kjit_module *module, const char *name, kjit_arg *args,
                 int nargs, kjit_array *out)
{
    kjit_function *fn;
    ck_assert_msg(kjit_module_function(module, name, &fn) == KJIT_OK, "%s", kjit_last_error(context));
    ck_assert_msg(kjit_call(fn, args, nargs, out, NULL) == KJIT_OK, "%s: %s", name,
                  kjit_last_error(context));
}

/* ================================================================ tests */

/* Random123 1.14, examples/kat_vectors: "philox4x32 10" lines. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
     0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
     0x94fdcceb, 0x5001e420, 0x24126ea1},
};

START_TEST(known_answer_vectors)
{
    kjit_target ts[3];
    int nt = targets(ts);
    for (int t = 0; t < nt; t++) {
        kjit_context *context;
        kjit_module *module = open_random(ts[t], &context);
        /* 12 calls: 3 vectors x 4 words, as arrays (the C side checks
         * itself against the same vectors) */
        uint32_t in[6][12], got[12];
        int32_t word[12];
        for (int i = 0; i < 12; i++) {
            for (int k = 0; k < 6; k++)
                in[k][i] = kat[i / 4][k];
            word[i] = i % 4;
        }
        int64_t shape[1] = {12};
        kjit_array arrays[7], out = kjit_array_make(got, KJIT_U32, 1, shape);
        kjit_arg args[7];
        for (int k = 0; k < 6; k++) {
            arrays[k] = kjit_array_make(in[k], KJIT_U32, 1, shape);
            args[k] = kjit_arg_array(&arrays[k]);
        }
        arrays[6] = kjit_array_make(word, KJIT_I32, 1, shape);
        args[6] = kjit_arg_array(&arrays[6]);
        call(context, module, "philox4x32_10", args, 7, &out);
        for (int i = 0; i < 12; i++) {
            uint32_t want = kat[i / 4][6 + i % 4], c_out[4];
            ck_assert_msg(got[i] == want, "%s: vector %d word %d: %08x, want %08x",
                          kjit_target_name(ts[t]), i / 4, i % 4, got[i], want);
            philox_c(kat[i / 4], kat[i / 4] + 4, c_out);
            ck_assert_uint_eq(c_out[i % 4], want);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

enum { N = 4096 };

START_TEST(streams_match_the_c_philox_bit_for_bit)
{
    uint64_t seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
    const char *env = getenv("KJIT_RANDOM_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    static uint64_t counters[N], got64[N];
    static uint32_t got32[N];
    static double gotf[N];
    static float gotf32[N];
    static int64_t goti[N];
    for (int i = 0; i < N; i++) /* consecutive ones, then anywhere in 64 bits */
        counters[i] = i < N / 2 ? (uint64_t)i : rand_u64_c(seed ^ 1, (uint64_t)i);
    int64_t shape[1] = {N};
    kjit_array cs = kjit_array_make(counters, KJIT_U64, 1, shape);
    kjit_target ts[3];
    int nt = targets(ts);
    for (int t = 0; t < nt; t++) {
        const char *tn = kjit_target_name(ts[t]);
        kjit_context *context;
        kjit_module *module = open_random(ts[t], &context);
        kjit_arg args[4] = {u64_arg(seed), kjit_arg_array(&cs)};

        kjit_array out = kjit_array_make(got32, KJIT_U32, 1, shape);
        call(context, module, "rand_u32", args, 2, &out);
        for (int i = 0; i < N; i++)
            ck_assert_msg(got32[i] == rand_u32_c(seed, counters[i]), "%s rand_u32 seed %#llx counter %llu",
                          tn, (unsigned long long)seed, (unsigned long long)counters[i]);

        out = kjit_array_make(got64, KJIT_U64, 1, shape);
        call(context, module, "rand_u64", args, 2, &out);
        for (int i = 0; i < N; i++)
            ck_assert_msg(got64[i] == rand_u64_c(seed, counters[i]), "%s rand_u64 seed %#llx", tn,
                          (unsigned long long)seed);

        uint64_t bound = 1 + rand_u64_c(seed ^ 2, 0) % 1000000007;
        args[2] = u64_arg(bound);
        call(context, module, "rand_below", args, 3, &out);
        for (int i = 0; i < N; i++) {
            uint64_t want = (uint64_t)(((unsigned __int128)rand_u64_c(seed, counters[i]) * bound) >> 64);
            ck_assert_msg(got64[i] == want && got64[i] < bound, "%s rand_below seed %#llx", tn,
                          (unsigned long long)seed);
        }

        out = kjit_array_make(goti, KJIT_I64, 1, shape);
        args[2] = kjit_arg_i64(-7);
        args[3] = kjit_arg_i64(12);
        call(context, module, "rand_int", args, 4, &out);
        for (int i = 0; i < N; i++) {
            int64_t want = -7 + (int64_t)(((unsigned __int128)rand_u64_c(seed, counters[i]) * 19) >> 64);
            ck_assert_msg(goti[i] == want && goti[i] >= -7 && goti[i] < 12, "%s rand_int", tn);
        }

        out = kjit_array_make(gotf, KJIT_F64, 1, shape);
        call(context, module, "rand_uniform", args, 2, &out);
        for (int i = 0; i < N; i++) {
            double want = (double)(rand_u64_c(seed, counters[i]) >> 11) * 0x1p-53;
            ck_assert_msg(gotf[i] == want && gotf[i] >= 0 && gotf[i] < 1, "%s rand_uniform", tn);
        }

        out = kjit_array_make(gotf32, KJIT_F32, 1, shape);
        call(context, module, "rand_uniform_f32", args, 2, &out);
        for (int i = 0; i < N; i++) {
            float want = (float)(rand_u32_c(seed, counters[i]) >> 8) * 0x1p-24f;
            ck_assert_msg(gotf32[i] == want && gotf32[i] >= 0 && gotf32[i] < 1,
                          "%s rand_uniform_f32", tn);
        }
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

START_TEST(normals_are_box_muller)
{
    uint64_t seed = (uint64_t)time(NULL) * 0xD1B54A32D192ED03ull;
    static uint64_t counters[N];
    static double got[N];
    static float got32[N];
    for (int i = 0; i < N; i++)
        counters[i] = (uint64_t)i;
    int64_t shape[1] = {N};
    kjit_array cs = kjit_array_make(counters, KJIT_U64, 1, shape);
    kjit_target ts[3];
    int nt = targets(ts);
    for (int t = 0; t < nt; t++) {
        const char *tn = kjit_target_name(ts[t]);
        kjit_context *context;
        kjit_module *module = open_random(ts[t], &context);
        kjit_arg args[2] = {u64_arg(seed), kjit_arg_array(&cs)};
        kjit_array out = kjit_array_make(got, KJIT_F64, 1, shape);
        call(context, module, "rand_normal", args, 2, &out);
        kjit_array out32 = kjit_array_make(got32, KJIT_F32, 1, shape);
        call(context, module, "rand_normal_f32", args, 2, &out32);
        double sum = 0, sum2 = 0, sum32 = 0, sum2_32 = 0;
        for (int i = 0; i < N; i++) {
            uint64_t n = counters[i];
            long double u1 = 1.0L - (long double)(rand_u64_c(seed, 2 * n) >> 11) * 0x1p-53L;
            long double u2 = (long double)(rand_u64_c(seed, 2 * n + 1) >> 11) * 0x1p-53L;
            long double want = sqrtl(-2 * logl(u1)) * cosl(2 * 3.14159265358979323846264338327950288L * u2);
            /* a few ULP of log, sqrt, cos, and cos's sensitivity to its
             * argument (2 pi u2, rounded) near its zeros */
            ck_assert_msg(fabsl(got[i] - want) <= 1e-14L * (1 + fabsl(want)) * 8,
                          "%s rand_normal(%#llx, %llu) = %.17g, want %.17Lg", tn,
                          (unsigned long long)seed, (unsigned long long)n, got[i], want);
            float v1 = 1.0f - (float)(word_c(seed, n, 0) >> 8) * 0x1p-24f;
            float v2 = (float)(word_c(seed, n, 1) >> 8) * 0x1p-24f;
            long double want32 = sqrtl(-2 * logl(v1)) * cosl(2 * 3.14159265358979323846264338327950288L * v2);
            ck_assert_msg(fabsl(got32[i] - want32) <= 4e-6L * (1 + fabsl(want32)),
                          "%s rand_normal_f32(%#llx, %llu) = %.9g, want %.9Lg", tn,
                          (unsigned long long)seed, (unsigned long long)n, got32[i], want32);
            sum += got[i];
            sum2 += got[i] * got[i];
            sum32 += got32[i];
            sum2_32 += (double)got32[i] * got32[i];
        }
        /* 4096 samples: the mean within 5 standard errors of 0, the
         * variance within 5 of 1 */
        ck_assert_msg(fabs(sum / N) < 5 / sqrt(N) && fabs(sum2 / N - 1) < 5 * sqrt(2.0 / N),
                      "%s: mean %g, variance %g", tn, sum / N, sum2 / N);
        ck_assert_msg(fabs(sum32 / N) < 5 / sqrt(N) && fabs(sum2_32 / N - 1) < 5 * sqrt(2.0 / N),
                      "%s f32: mean %g, variance %g", tn, sum32 / N, sum2_32 / N);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

Suite *suite_random(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("philox");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, known_answer_vectors);
    tcase_add_test(tc, streams_match_the_c_philox_bit_for_bit);
    tcase_add_test(tc, normals_are_box_muller);
    suite_add_tcase(s, tc);
    return s;
}
