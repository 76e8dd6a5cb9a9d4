/*
 * test_simd_range.c: the narrowing rules of the SIMD lowering, which lean on
 * the ranges codegen_simd_range.c proves (64-bit products of operands in
 * i32's range as one 32 x 32 -> 64 multiply, i64 -> f64 of values in
 * [-2^51, 2^51) in two instructions), the branch-free i64/u64 -> f64 of any
 * value, and gathers and scatters on arrays whose stride only the call knows
 * (stride 1 skips the multiply), and the saturating f64 -> i64 whose fast
 * way trusts cvttpd2dq.  Each kernel runs on fresh random inputs,
 * with values at the edges of the proven ranges (INT32_MIN and INT32_MAX
 * operands, results at -2^51 and 2^51 - 1, one past them and up to 2^52
 * on either side (where the two-instruction form would be wrong), the last
 * threadIdx of a block of 1024, loop counters next to i32's bounds) and
 * conversion ties (2^53 + 1, 2^63 - 1 ...), with the SIMD lowering and
 * without (kjit_options.cpu_simd), on cpu and parallel: the two must agree
 * bit for bit, and with a reference computed here in C (exact: integers, and
 * IEEE operations in the kernel's order).
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "kjit_tools.h"
#include "rng.h"

static uint64_t rng;

static uint64_t next_random(void)
{
    rng_seed(&rng, "simd_range");
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char source[] =
    "@kernel\n"
    "fn products(x: i32[], y: i32[], h: i16[], u: i64[], w: u64[], out_i: i64[], out_f: f64[,]) {\n"
    "    let i = grid(1);\n"
    "    if i >= len(x) { return; }\n"
    "    let a = i64(x[i]);\n"
    "    let b = i64(y[i]);\n"
    "    let low = u[i] & 1048575;\n"
    "    let up: i64 = 0;\n"
    "    for k in range(2147483640, 2147483647) { up += k * b; }\n"
    "    let down: i64 = 0;\n"
    "    for k in range(-2147483640, -2147483648, -1) { down += k * a; }\n"
    "    out_i[i] = a * b + (a + 1) * b + up * 3 + down;\n"
    "    out_f[0, i] = f64(a * 1048576 + low);\n"
    "    out_f[1, i] = f64(a * 1048576 + low + 1);\n"
    "    out_f[2, i] = f64(u[i]) + f64(a * i64(h[i]));\n"
    "    out_f[3, i] = f64(w[i]);\n"
    "    out_f[4, i] = f64((a + 2147483648) * 1048576 + low);\n"
    "    out_f[5, i] = f64((a - 2147483648) * 1048576 + low);\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn paths(base: i32, data: i64[], out: f64[,]) {\n"
    "    let i = blockIdx.x + base;\n"
    "    let j = threadIdx.x;\n"
    "    let acc = 0.0;\n"
    "    for k in range(4) {\n"
    "        let d = j - k * 300;\n"
    "        acc += sqrt(f64(i * i + d * d));\n"
    "        acc += f64(data[(k * 7 + j * 5) % len(data)]);\n"
    "    }\n"
    "    out[j, blockIdx.x] = acc;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn truncations(x: f64[], out: i64[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { out[i] = i64(x[i] * 1.0); }\n"
    "}\n";

/* ------------------------------------------------------------ fixtures */

/* i64 arithmetic that wraps, as kjit's does */
static int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* ------------------------------------------------------------ products and conversions */

enum { N = 1000, ROWS = 6 };

static int32_t edge_i32(void)
{
    static const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX - 1, INT32_MAX};
    uint64_t r = next_random();
    return r % 3 == 0 ? edges[(r >> 8) % 7] : (int32_t)(uint32_t)(r >> 16);
}

/* any i64, often one whose conversion rounds: a tie (2^53 + 1 and its
 * multiples by powers of two), near 2^63, or a negative one */
static uint64_t edge_u64(void)
{
    static const uint64_t edges[] = {0, 1, ~0ull, 1ull << 63, (1ull << 63) - 1, (1ull << 53) + 1, (1ull << 54) + 2,
                                     (1ull << 53) + 3, (1ull << 63) + 1024, (1ull << 63) + 1025, 0xffffffffull,
                                     0x100000000ull, 0x80000000ull, 0xfffffffffffff800ull};
    uint64_t r = next_random();
    uint64_t v = r % 2 == 0 ? edges[(r >> 8) % (sizeof edges / sizeof edges[0])] : next_random() >> (r % 64);
    return (r >> 20) % 4 == 0 ? (uint64_t)-(int64_t)v : v;
}

static void products_on(kjit_target target)
{
    Pair p = pair_open(target, "simd_range.kern", source);
    int32_t x[N], y[N];
    int16_t h[N];
    int64_t u[N], out_i[2][N];
    uint64_t w[N];
    static double out_f[2][ROWS * N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            x[i] = edge_i32();
            y[i] = edge_i32();
            uint64_t r = next_random();
            h[i] = r % 3 == 0 ? (r % 2 ? INT16_MIN : INT16_MAX) : (int16_t)(r >> 24);
            u[i] = (int64_t)edge_u64();
            w[i] = edge_u64();
        }
        /* the ends of the exact range: -2^51 and 2^51 - 1 (and 2^51 one past) */
        x[0] = INT32_MIN, u[0] = 0;
        x[1] = INT32_MAX, u[1] = 1048575;
        int64_t n = N, shape_f[2] = {ROWS, N};
        for (int s = 0; s < 2; s++) {
            memset(out_i[s], 0, sizeof out_i[s]);
            memset(out_f[s], 0, sizeof out_f[s]);
            kjit_array ax = kjit_array_make(x, KJIT_I32, 1, &n), ay = kjit_array_make(y, KJIT_I32, 1, &n),
                       ah = kjit_array_make(h, KJIT_I16, 1, &n), au = kjit_array_make(u, KJIT_I64, 1, &n),
                       aw = kjit_array_make(w, KJIT_U64, 1, &n), ai = kjit_array_make(out_i[s], KJIT_I64, 1, &n),
                       af = kjit_array_make(out_f[s], KJIT_F64, 2, shape_f);
            kjit_arg args[7] = {kjit_arg_array(&ax), kjit_arg_array(&ay), kjit_arg_array(&ah), kjit_arg_array(&au),
                                kjit_arg_array(&aw), kjit_arg_array(&ai), kjit_arg_array(&af)};
            uint32_t block[3] = {round == 0 ? 64 : round == 1 ? 7 : 1024, 1, 1};
            uint32_t grid[3] = {(N + block[0] - 1) / block[0], 1, 1};
            pair_launch(&p, s, "products", grid, block, args, 7);
        }
        ck_assert_msg(memcmp(out_i[0], out_i[1], sizeof out_i[0]) == 0 &&
                          memcmp(out_f[0], out_f[1], sizeof out_f[0]) == 0,
                      "the scalar and SIMD code differ");
        for (int i = 0; i < N; i++) {
            int64_t a = x[i], b = y[i], low = u[i] & 1048575;
            int64_t up = 0, down = 0;
            for (int64_t k = 2147483640; k < 2147483647; k++) up = wrap_add(up, k * b);
            for (int64_t k = -2147483640; k > -2147483648LL; k--) down = wrap_add(down, k * a);
            int64_t want_i = wrap_add(wrap_add(wrap_add(a * b, (a + 1) * b), wrap_mul(up, 3)), down);
            double want_f[ROWS] = {(double)(a * 1048576 + low), (double)(a * 1048576 + low + 1),
                                   (double)u[i] + (double)(a * h[i]), (double)w[i],
                                   (double)((a + 2147483648) * 1048576 + low),
                                   (double)((a - 2147483648) * 1048576 + low)};
            ck_assert_msg(out_i[1][i] == want_i, "element %d (x %d, y %d): %lld, want %lld", i, x[i], y[i],
                          (long long)out_i[1][i], (long long)want_i);
            for (int r = 0; r < ROWS; r++)
                ck_assert_msg(memcmp(&out_f[1][r * N + i], &want_f[r], sizeof(double)) == 0,
                              "element %d, conversion %d (x %d, u %lld, h %d, w %llu): %a, want %a", i, r, x[i],
                              (long long)u[i], h[i], (unsigned long long)w[i], out_f[1][r * N + i], want_f[r]);
        }
    }
    pair_close(&p);
}

START_TEST(narrowed_products_and_conversions_cpu) { products_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(narrowed_products_and_conversions_parallel) { products_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ threadIdx, gathers, scatters */

static double paths_reference(int32_t base, uint32_t bx, int64_t j, const int64_t *data, int64_t len,
                              int64_t stride)
{
    int32_t i = (int32_t)((uint32_t)bx + (uint32_t)base);
    int32_t ii = (int32_t)((uint32_t)i * (uint32_t)i);
    double acc = 0.0;
    for (int64_t k = 0; k < 4; k++) {
        int64_t d = j - k * 300;
        acc += sqrt((double)((int64_t)ii + d * d));
        acc += (double)data[((k * 7 + j * 5) % len) * stride];
    }
    return acc;
}

/* The distances of das.kern with threadIdx up to 1023 and blockIdx.x + base
 * wrapping in i32; data read through a view of stride 1 and of stride 3,
 * out written through a C-ordered and a transposed view. */
static void paths_on(kjit_target target)
{
    Pair p = pair_open(target, "simd_range.kern", source);
    enum { LEN = 301, WIDTH = 5, MAX_THREADS = 1024 };
    int64_t *storage = malloc(sizeof(int64_t) * LEN * 3);
    double *out[2];
    for (int s = 0; s < 2; s++) out[s] = malloc(sizeof(double) * MAX_THREADS * WIDTH);
    static const uint32_t widths[] = {1024, 33, 4, 1};
    for (int round = 0; round < 8; round++) {
        for (int k = 0; k < LEN * 3; k++) storage[k] = (int64_t)edge_u64() >> (next_random() % 40);
        uint32_t threads = widths[round % 4];
        int32_t base = round % 3 == 0 ? INT32_MAX - 2 : round % 3 == 1 ? INT32_MIN : (int32_t)next_random();
        int64_t stride = round % 2 ? 3 : 1;
        bool transposed = round & 4;
        kjit_array data = kjit_array_make(storage, KJIT_I64, 1, (int64_t[]){LEN});
        data.strides[0] = (int64_t)sizeof(int64_t) * stride;
        for (int s = 0; s < 2; s++) {
            memset(out[s], 0, sizeof(double) * MAX_THREADS * WIDTH);
            kjit_array o = kjit_array_make(out[s], KJIT_F64, 2, (int64_t[]){threads, WIDTH});
            if (transposed) {
                o.strides[0] = sizeof(double);
                o.strides[1] = (int64_t)sizeof(double) * threads;
            }
            kjit_arg args[3] = {kjit_arg_i32(base), kjit_arg_array(&data), kjit_arg_array(&o)};
            pair_launch(&p, s, "paths", (uint32_t[]){WIDTH, 1, 1}, (uint32_t[]){threads, 1, 1}, args, 3);
        }
        for (uint32_t j = 0; j < threads; j++)
            for (uint32_t bx = 0; bx < WIDTH; bx++) {
                size_t at = transposed ? bx * threads + j : j * WIDTH + bx;
                double want = paths_reference(base, bx, j, storage, LEN, stride);
                ck_assert_msg(memcmp(&out[0][at], &out[1][at], sizeof(double)) == 0,
                              "thread %u, block %u: scalar %a, SIMD %a", j, bx, out[0][at], out[1][at]);
                ck_assert_msg(memcmp(&out[1][at], &want, sizeof(double)) == 0,
                              "thread %u, block %u (base %d, stride %lld): %a, want %a", j, bx, base,
                              (long long)stride, out[1][at], want);
            }
    }
    for (int s = 0; s < 2; s++) free(out[s]);
    free(storage);
    pair_close(&p);
}

START_TEST(paths_gathers_scatters_cpu) { paths_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(paths_gathers_scatters_parallel) { paths_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ f64 -> i64 */

static int64_t to_i64_sat(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 0x1p63)
        return INT64_MAX;
    if (v < -0x1p63)
        return INT64_MIN;
    return (int64_t)v;
}

/* The saturating conversion's fast test (cvttpd2dq's 0x80000000 marks a lane
 * it could not convert) and its slow way: values next to -2^31 (which
 * converts to 0x80000000 itself), 2^31, 2^63, NaN and the infinities, mixed
 * into chunks of ordinary ones or alone. */
static void truncations_on(kjit_target target)
{
    Pair p = pair_open(target, "simd_range.kern", source);
    static const double edges[] = {-0x1p31, -0x1p31 - 0.5, -0x1p31 - 1, -0x1p31 + 0.25, 0x1p31 - 0.5, 0x1p31,
                                   0x1p31 + 1, 0x1p63, -0x1p63, 0x1p63 - 1024, -0x1p63 - 2048, NAN, -NAN,
                                   INFINITY, -INFINITY, -0.0, 0.0, -0.75, 0.75, 1e19, -1e19};
    enum { M = 997 };
    double x[M];
    int64_t out[2][M];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < M; i++) {
            uint64_t r = next_random();
            double ordinary = ((double)(int64_t)(r >> 11) - 0x1p52) * 0x1p-30 * (double)(1 << (r % 16));
            x[i] = (round == 0 || r % (round + 1) == 0) ? edges[(r >> 8) % (sizeof edges / sizeof edges[0])]
                                                        : ordinary;
        }
        int64_t n = M;
        for (int s = 0; s < 2; s++) {
            kjit_array ax = kjit_array_make(x, KJIT_F64, 1, &n), ao = kjit_array_make(out[s], KJIT_I64, 1, &n);
            kjit_arg args[2] = {kjit_arg_array(&ax), kjit_arg_array(&ao)};
            pair_launch(&p, s, "truncations", (uint32_t[]){(M + 63) / 64, 1, 1}, (uint32_t[]){64, 1, 1}, args, 2);
        }
        for (int i = 0; i < M; i++) {
            ck_assert_msg(out[0][i] == out[1][i], "%a: scalar %lld, SIMD %lld", x[i], (long long)out[0][i],
                          (long long)out[1][i]);
            ck_assert_msg(out[1][i] == to_i64_sat(x[i]), "%a: %lld, want %lld", x[i], (long long)out[1][i],
                          (long long)to_i64_sat(x[i]));
        }
    }
    pair_close(&p);
}

START_TEST(truncations_cpu) { truncations_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(truncations_parallel) { truncations_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ the rules are taken */

#if defined(__x86_64__)
/* The products kernel's SIMD code multiplies 32 x 32 -> 64 (pmuldq): its
 * narrowed products are not left to the generic 64-bit multiply. */
START_TEST(narrow_multiply_is_taken)
{
    char path[] = "/tmp/kjit_simd_range_XXXXXX.kern";
    fixture_temp_file(path, 5, source);
    int found[2];
    for (int simd = 0; simd < 2; simd++) {
        kjit_stage_options options;
        kjit_stage_options_init(&options);
        options.cpu_simd = simd;
        options.function = "paths";
        char *bytes = NULL, *error = NULL;
        size_t size = 0;
        ck_assert_msg(kjit_stage_file(path, KJIT_STAGE_ASM, &options, &bytes, &size,
                                      &error) == KJIT_OK,
                      "%s", error ? error : "?");
        const char *block = strstr(bytes, "\npaths__block:");
        ck_assert(block);
        found[simd] = strstr(block, "pmuldq") != NULL;
        free(bytes);
    }
    remove(path);
    ck_assert_msg(!found[0] && found[1], "pmuldq: scalar code %d, SIMD code %d", found[0], found[1]);
}
END_TEST
#endif

Suite *suite_simd_range(void)
{
    Suite *s = suite_create("simd_range");
    TCase *tc = tcase_create("narrowing");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, narrowed_products_and_conversions_cpu);
    tcase_add_test(tc, narrowed_products_and_conversions_parallel);
    tcase_add_test(tc, paths_gathers_scatters_cpu);
    tcase_add_test(tc, paths_gathers_scatters_parallel);
    tcase_add_test(tc, truncations_cpu);
    tcase_add_test(tc, truncations_parallel);
#if defined(__x86_64__)
    tcase_add_test(tc, narrow_multiply_is_taken);
#endif
    suite_add_tcase(s, tc);
    return s;
}
