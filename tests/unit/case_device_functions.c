/*
 * case_device_functions.c: see case_device_functions.h.
 */
#include "case_device_functions.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const device_source =
    "const BLOCK = 128;\n"
    "const BINS: i64 = 16;\n"
    "fn add_byte(hist: i32[], v: u8) { atomic_add(hist, i64(v), 1); }\n"
    "fn global_index() -> i64 {\n"
    "    return i64(blockIdx.x) * i64(blockDim.x) + i64(threadIdx.x);\n"
    "}\n"
    "@kernel\n"
    "fn histogram(data: u8[], hist: i32[]) {\n"
    "    let i = global_index();\n"
    "    if i < len(data) { add_byte(hist, data[i]); }\n"
    "}\n"
    "fn scan_block(tile: f64[], t: i32) {\n"
    "    let offset = 1;\n"
    "    while offset < BLOCK {\n"
    "        let v = t >= offset ? tile[t - offset] : 0.0;\n"
    "        syncthreads();\n"
    "        tile[t] += v;\n"
    "        syncthreads();\n"
    "        offset *= 2;\n"
    "    }\n"
    "}\n"
    "@kernel\n"
    "fn block_scan(x: f64[], out: f64[]) {\n"
    "    let tile = shared(f64, BLOCK);\n"
    "    let t = threadIdx.x;\n"
    "    let i = global_index();\n"
    "    tile[t] = i < len(x) ? x[i] : 0.0;\n"
    "    syncthreads();\n"
    "    scan_block(tile, t);\n"
    "    if i < len(out) { out[i] = tile[t]; }\n"
    "}\n"
    "@kernel\n"
    "fn pairs(a: u8[], b: u8[], hist: u32[,], low: f32[], high: f32[], wrap: u32[]) {\n"
    "    let i = global_index();\n"
    "    if i < len(a) {\n"
    "        atomic_add(hist[i64(a[i]) % BINS, i64(b[i]) % BINS], 1);\n"
    "        atomic_min(low, i64(a[i] % 8), f32(b[i]) - 0.5);\n"
    "        atomic_max(high[a[i] % 8], i % 5 == 0 ? f32(nan) : f32(b[i]) + 0.5);\n"
    "        atomic_inc(wrap, 0, 999);\n"
    "        atomic_dec(wrap[1], 999);\n"
    "        atomic_xor(wrap[2], u32(a[i]));\n"
    "    }\n"
    "}\n";

static uint64_t random_bits(uint64_t *rng)
{
    return (uint64_t)(rng_uniform(rng, 0, 1) * 9007199254740992.0);
}

void case_device_functions(kjit_context *context, uint64_t *rng)
{
    kjit_module *module;
    ck_assert_msg(kjit_compile_string(context, "device.kern", device_source, &module) == KJIT_OK,
                  "%s", kjit_last_error(context));
    kjit_function *histogram, *scan, *pairs, *add_byte;
    ck_assert_int_eq(kjit_module_function(module, "histogram", &histogram), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "block_scan", &scan), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "pairs", &pairs), KJIT_OK);
    ck_assert_int_eq(kjit_module_function(module, "add_byte", &add_byte), KJIT_OK);
    enum { N = 50000, THREADS = 128, BINS = 16 };
    uint32_t grid[3] = {(N + THREADS - 1) / THREADS, 1, 1}, block[3] = {THREADS, 1, 1};
    uint8_t *a = malloc(N), *b = malloc(N);
    double *x = malloc(N * sizeof(double)), *out = malloc(N * sizeof(double));
    int32_t hist[256] = {0}, want_hist[256] = {0};
    uint32_t pair_hist[BINS][BINS] = {{0}}, want_pairs[BINS][BINS] = {{0}};
    float low[8], high[8], want_low[8], want_high[8];
    uint32_t wrap[3] = {(uint32_t)(random_bits(rng) % 1000), (uint32_t)(random_bits(rng) % 1000), 7};
    uint32_t want_wrap[3] = {wrap[0], wrap[1], wrap[2]};
    for (int k = 0; k < 8; k++) {
        low[k] = want_low[k] = 1000;
        high[k] = want_high[k] = -1000;
    }
    for (int i = 0; i < N; i++) {
        a[i] = (uint8_t)random_bits(rng);
        b[i] = (uint8_t)random_bits(rng);
        x[i] = (double)(random_bits(rng) % 2001) / 1000.0 - 1.0;
        want_hist[a[i]]++;
        want_pairs[a[i] % BINS][b[i] % BINS]++;
        want_low[a[i] % 8] = fminf(want_low[a[i] % 8], (float)b[i] - 0.5f);
        if (i % 5 != 0)
            want_high[a[i] % 8] = fmaxf(want_high[a[i] % 8], (float)b[i] + 0.5f);
        want_wrap[0] = want_wrap[0] >= 999 ? 0 : want_wrap[0] + 1;
        want_wrap[1] = want_wrap[1] == 0 || want_wrap[1] > 999 ? 999 : want_wrap[1] - 1;
        want_wrap[2] ^= a[i];
    }
    int64_t n = N, bins = 256, eight = 8, three = 3, pshape[2] = {BINS, BINS};
    kjit_array A = kjit_array_make(a, KJIT_U8, 1, &n), B = kjit_array_make(b, KJIT_U8, 1, &n);
    kjit_array H = kjit_array_make(hist, KJIT_I32, 1, &bins);
    kjit_arg hargs[2] = {kjit_arg_array(&A), kjit_arg_array(&H)};
    ck_assert_msg(kjit_launch(histogram, grid, block, hargs, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int k = 0; k < 256; k++)
        ck_assert_int_eq(hist[k], want_hist[k]);

    kjit_array X = kjit_array_make(x, KJIT_F64, 1, &n), O = kjit_array_make(out, KJIT_F64, 1, &n);
    kjit_arg sargs[2] = {kjit_arg_array(&X), kjit_arg_array(&O)};
    ck_assert_msg(kjit_launch(scan, grid, block, sargs, 2, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int i = 0; i < N; i++) {
        double want = 0;
        for (int j = i - i % THREADS; j <= i; j++)
            want += x[j];
        ck_assert_msg(fabs(out[i] - want) <= 1e-12 * (1 + fabs(want)), "scan %d: %.17g vs %.17g",
                      i, out[i], want);
    }

    kjit_array P = kjit_array_make(pair_hist, KJIT_U32, 2, pshape);
    kjit_array L = kjit_array_make(low, KJIT_F32, 1, &eight);
    kjit_array G = kjit_array_make(high, KJIT_F32, 1, &eight);
    kjit_array W = kjit_array_make(wrap, KJIT_U32, 1, &three);
    kjit_arg pargs[6] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&P),
                         kjit_arg_array(&L), kjit_arg_array(&G), kjit_arg_array(&W)};
    ck_assert_msg(kjit_launch(pairs, grid, block, pargs, 6, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
    for (int r = 0; r < BINS; r++)
        for (int c = 0; c < BINS; c++)
            ck_assert_uint_eq(pair_hist[r][c], want_pairs[r][c]);
    for (int k = 0; k < 8; k++) {
        ck_assert_msg(low[k] == want_low[k], "low[%d] %g vs %g", k, low[k], want_low[k]);
        ck_assert_msg(high[k] == want_high[k], "high[%d] %g vs %g", k, high[k], want_high[k]);
    }
    for (int k = 0; k < 3; k++)
        ck_assert_uint_eq(wrap[k], want_wrap[k]);

    /* the host cannot call a device function; the error names the built-in */
    kjit_arg bargs[2] = {kjit_arg_array(&H), kjit_arg_i64(3)};
    ck_assert_int_eq(kjit_call(add_byte, bargs, 2, NULL, NULL), KJIT_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(kjit_last_error(context), "add_byte is a device function (add_byte uses "
                                                   "atomic_add at device.kern:3:"),
                  "%s", kjit_last_error(context));
    free(a), free(b), free(x), free(out);
    kjit_module_free(module);
}
