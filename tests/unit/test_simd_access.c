/*
 * test_simd_access.c: the memory accesses of the SIMD lowering of the cpu
 * targets (codegen_simd_expr.c) where lanes may be off: the contiguous
 * loads and stores of whole chunks with every lane on, c ? a : b where one
 * side loads (one side alone when every lane takes it), the compare of a
 * narrow index with an i64 length, and masked accesses to shared() memory
 * (a plain load or a blended store when the chunk lies inside the array, a
 * load only as wide as its highest active lane, the masked one across the
 * array's end); and i64(narrow) compared with i64 values outside the narrow
 * range.
 *
 * Each kernel runs with the SIMD lowering (kjit_options.cpu_simd = 1) and
 * without, on cpu and parallel, on fresh random inputs (rng.h: the seed is
 * printed), over blocks of 1 to 300 threads (whole vectors, a rest, lone
 * lanes; a shared array that ends inside a chunk) and on contiguous and
 * strided views of its inputs: the two must agree bit for bit, and both
 * must match a reference computed here in C with the same IEEE operations
 * in the same order (exact).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "rng.h"

static uint64_t rng;

static const char source[] =
    "@kernel\n"
    "fn tree_sum(x: f32[], sums: f32[]) {\n"
    "    let tile = shared(f32, 300);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    tile[t] = i < len(x) ? x[i] : 0;\n"
    "    syncthreads();\n"
    "    let half = blockDim.x / 2;\n"
    "    while half > 0 {\n"
    "        if t < half { tile[t] += tile[t + half]; }\n"
    "        syncthreads();\n"
    "        half = half / 2;\n"
    "    }\n"
    "    if t == 0 { sums[blockIdx.x] = tile[0]; }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn private_masks(x: f32[], m: f32[,], out: f32[]) {\n"
    "    let tile = shared(f32, 300);\n"
    "    let t = threadIdx.x;\n"
    "    let i = blockIdx.x * blockDim.x + t;\n"
    "    let v = i < len(x) ? x[i] : 0.5;\n"
    "    tile[t] = v;\n"
    "    syncthreads();\n"
    "    let w = tile[(t + 5) % blockDim.x];\n"
    "    syncthreads();\n"
    "    if v > 0.3 { tile[t] = w * 2.0; }\n"
    "    syncthreads();\n"
    "    let u: f32 = 0.0;\n"
    "    if w < 0.6 { u = tile[t]; }\n"
    "    let r = i64(blockIdx.x) % m.shape[0];\n"
    "    let mv = t < m.shape[1] ? m[r, t] : 0.25;\n"
    "    let side = v > 0.7 ? 1.5 : x[i % len(x)];\n"
    "    if i < len(out) { out[i] = u + tile[t] * mv - side; }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn narrow_compares(u: i64, base: i32, out: i32[]) {\n"
    "    let t = threadIdx.x + base;\n"
    "    let ut = u32(threadIdx.x) * u32(3000000) + u32(base);\n"
    "    let i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    let k: i32 = 0;\n"
    "    if i64(t) < u { k += 1; }\n"
    "    if i64(t) <= u { k += 2; }\n"
    "    if i64(t) > u { k += 4; }\n"
    "    if i64(t) >= u { k += 8; }\n"
    "    if i64(t) == u { k += 16; }\n"
    "    if i64(t) != u { k += 32; }\n"
    "    if u < i64(t) { k += 64; }\n"
    "    if i64(ut) < u { k += 128; }\n"
    "    if i64(ut) >= u { k += 256; }\n"
    "    if i64(ut) == u { k += 512; }\n"
    "    if i < len(out) { out[i] = k; }\n"
    "}\n";

/* ------------------------------------------------------------ references */

static float element(const float *data, int64_t stride, int64_t i) { return data[i * stride]; }

static void tree_sum_reference(const float *x, int64_t stride, int64_t n, int bd, int64_t blocks, float *sums)
{
    float tile[300];
    for (int64_t b = 0; b < blocks; b++) {
        for (int t = 0; t < bd; t++) {
            int64_t i = b * bd + t;
            tile[t] = i < n ? element(x, stride, i) : 0.0f;
        }
        for (int half = bd / 2; half > 0; half /= 2)
            for (int t = 0; t < half; t++)
                tile[t] += tile[t + half];
        sums[b] = tile[0];
    }
}

static void private_masks_reference(const float *x, int64_t xstride, int64_t n, const float *m, int64_t rs,
                                    int64_t cs, int64_t rows, int64_t cols, int bd, int64_t blocks, float *out,
                                    int64_t out_n)
{
    float tile[300], v[300], w[300];
    for (int64_t b = 0; b < blocks; b++) {
        for (int t = 0; t < bd; t++) {
            int64_t i = b * bd + t;
            v[t] = i < n ? element(x, xstride, i) : 0.5f;
            tile[t] = v[t];
        }
        for (int t = 0; t < bd; t++)
            w[t] = tile[(t + 5) % bd];
        for (int t = 0; t < bd; t++)
            if (v[t] > 0.3f)
                tile[t] = w[t] * 2.0f;
        for (int t = 0; t < bd; t++) {
            int64_t i = b * bd + t;
            float u = w[t] < 0.6f ? tile[t] : 0.0f;
            int64_t r = b % rows;
            float mv = t < cols ? m[r * rs + t * cs] : 0.25f;
            float side = v[t] > 0.7f ? 1.5f : element(x, xstride, i % n);
            if (i < out_n)
                out[i] = u + tile[t] * mv - side;
        }
    }
}

static int32_t narrow_compares_reference(int64_t u, int32_t base, int x)
{
    int64_t t = (int32_t)((uint32_t)x + (uint32_t)base), ut = (int64_t)((uint32_t)x * 3000000u + (uint32_t)base);
    return (t < u) + 2 * (t <= u) + 4 * (t > u) + 8 * (t >= u) + 16 * (t == u) + 32 * (t != u) + 64 * (u < t) +
           128 * (ut < u) + 256 * (ut >= u) + 512 * (ut == u);
}

/* ------------------------------------------------------------ fixtures */

static Pair open_pair(kjit_target target)
{
    rng_seed(&rng, "simd_access");
    return pair_open(target, "simd_access.kern", source);
}

static void launch(Pair *p, int simd, const char *name, uint32_t blocks, uint32_t threads, kjit_arg *args,
                   int nargs)
{
    uint32_t grid[3] = {blocks, 1, 1}, block[3] = {threads, 1, 1};
    pair_launch(p, simd, name, grid, block, args, nargs);
}

/* 1-D view of n floats of data, every stride-th. */
static kjit_array view_1d(float *data, int64_t n, int64_t stride)
{
    kjit_array a = kjit_array_make(data, KJIT_F32, 1, &n);
    a.strides[0] = stride * (int64_t)sizeof(float);
    return a;
}

/* Block widths: below, at and past the vector widths, odd rests, and 297
 * (the last chunk crosses the end of the 300-element shared array). */
static const int widths[] = {1, 3, 8, 13, 64, 100, 256, 297};
enum { WIDTHS = sizeof widths / sizeof widths[0] };

static void fill(float *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)rng_uniform(&rng, 0.0, 1.0);
}

/* ------------------------------------------------------------ tests */

static void tree_sum_on(kjit_target target)
{
    Pair p = open_pair(target);
    enum { MAX_N = 3000 };
    float *x = malloc(2 * MAX_N * sizeof *x), *sums[2], *want = malloc(MAX_N * sizeof *want);
    for (int s = 0; s < 2; s++)
        sums[s] = malloc(MAX_N * sizeof(float));
    for (int w = 0; w < WIDTHS; w++) {
        for (int64_t stride = 1; stride <= 2; stride++) {
            int bd = widths[w];
            /* a length that ends inside a block, and one of whole blocks */
            int64_t n = (int64_t)(rng_uniform(&rng, 1.0, MAX_N - 300));
            if (stride == 2)
                n = n / bd * bd + (n / bd == 0 ? bd : 0);
            int64_t blocks = (n + bd - 1) / bd;
            fill(x, 2 * MAX_N);
            tree_sum_reference(x, stride, n, bd, blocks, want);
            for (int s = 0; s < 2; s++) {
                memset(sums[s], 0, MAX_N * sizeof(float));
                kjit_array ax = view_1d(x, n, stride), as = view_1d(sums[s], blocks, 1);
                kjit_arg args[2] = {kjit_arg_array(&ax), kjit_arg_array(&as)};
                launch(&p, s, "tree_sum", (uint32_t)blocks, (uint32_t)bd, args, 2);
            }
            for (int64_t b = 0; b < blocks; b++) {
                ck_assert_msg(memcmp(&sums[0][b], &sums[1][b], sizeof(float)) == 0,
                              "width %d stride %lld n %lld block %lld: scalar %a, SIMD %a", bd, (long long)stride,
                              (long long)n, (long long)b, sums[0][b], sums[1][b]);
                ck_assert_msg(memcmp(&sums[1][b], &want[b], sizeof(float)) == 0,
                              "width %d stride %lld n %lld block %lld: %a, want %a", bd, (long long)stride,
                              (long long)n, (long long)b, sums[1][b], want[b]);
            }
        }
    }
    for (int s = 0; s < 2; s++)
        free(sums[s]);
    free(want);
    free(x);
    pair_close(&p);
}

START_TEST(tree_sum_cpu) { tree_sum_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(tree_sum_parallel) { tree_sum_on(KJIT_TARGET_PARALLEL); }
END_TEST

static void private_masks_on(kjit_target target)
{
    Pair p = open_pair(target);
    enum { MAX_N = 2000, ROWS = 5, COLS = 150 };
    float *x = malloc(2 * MAX_N * sizeof *x), *out[2], *want = malloc(MAX_N * sizeof *want);
    float m[ROWS * COLS];
    for (int s = 0; s < 2; s++)
        out[s] = malloc(MAX_N * sizeof(float));
    for (int w = 0; w < WIDTHS; w++) {
        for (int layout = 0; layout < 2; layout++) {
            int bd = widths[w];
            int64_t n = (int64_t)rng_uniform(&rng, 1.0, MAX_N);
            int64_t stride = layout ? 2 : 1;
            /* out may be shorter than the grid's threads */
            int64_t out_n = n - (int64_t)rng_uniform(&rng, 0.0, (double)(n < 40 ? n : 40));
            int64_t blocks = (n + bd - 1) / bd;
            fill(x, 2 * MAX_N);
            fill(m, ROWS * COLS);
            /* m as ROWS x COLS rows (contiguous), or its transpose's view:
             * (COLS / 2) x ROWS read across rows (a stride other than 1) */
            int64_t rows = layout ? COLS / 2 : ROWS, cols = layout ? ROWS : COLS;
            int64_t rs = layout ? 1 : COLS, cs = layout ? COLS : 1;
            int64_t mshape[2] = {rows, cols};
            kjit_array am = kjit_array_make(m, KJIT_F32, 2, mshape);
            am.strides[0] = rs * (int64_t)sizeof(float);
            am.strides[1] = cs * (int64_t)sizeof(float);
            for (int64_t i = 0; i < out_n; i++)
                want[i] = 0.0f;
            private_masks_reference(x, stride, n, m, rs, cs, rows, cols, bd, blocks, want, out_n);
            for (int s = 0; s < 2; s++) {
                memset(out[s], 0, MAX_N * sizeof(float));
                kjit_array ax = view_1d(x, n, stride), ao = view_1d(out[s], out_n, 1);
                kjit_arg args[3] = {kjit_arg_array(&ax), kjit_arg_array(&am), kjit_arg_array(&ao)};
                launch(&p, s, "private_masks", (uint32_t)blocks, (uint32_t)bd, args, 3);
            }
            for (int64_t i = 0; i < out_n; i++) {
                ck_assert_msg(memcmp(&out[0][i], &out[1][i], sizeof(float)) == 0,
                              "width %d layout %d n %lld element %lld: scalar %a, SIMD %a", bd, layout,
                              (long long)n, (long long)i, out[0][i], out[1][i]);
                ck_assert_msg(memcmp(&out[1][i], &want[i], sizeof(float)) == 0,
                              "width %d layout %d n %lld element %lld: %a, want %a", bd, layout, (long long)n,
                              (long long)i, out[1][i], want[i]);
            }
        }
    }
    for (int s = 0; s < 2; s++)
        free(out[s]);
    free(want);
    free(x);
    pair_close(&p);
}

START_TEST(private_masks_cpu) { private_masks_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(private_masks_parallel) { private_masks_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* i64(narrow) against a uniform i64 in and out of the narrow type's range
 * (the compare made in the narrow type, the out-of-range answers as lane
 * masks). */
static void narrow_compares_on(kjit_target target)
{
    Pair p = open_pair(target);
    enum { BD = 45, BLOCKS = 3, N = BD * BLOCKS - 7 };
    const int64_t fixed[] = {INT64_MIN,      -((int64_t)1 << 40), (int64_t)INT32_MIN - 1, INT32_MIN, -3, -1, 0,
                             1,              7,                   41,                     INT32_MAX,  (int64_t)INT32_MAX + 1,
                             3000000 * 17LL, (int64_t)UINT32_MAX, (int64_t)UINT32_MAX + 1, (int64_t)1 << 40, INT64_MAX};
    enum { FIXED = sizeof fixed / sizeof fixed[0] };
    /* threads whose t and ut reach the ends of their types (and wrap) */
    const int32_t bases[] = {-3, INT32_MAX - 40, INT32_MIN, -40};
    int32_t out[2][N];
    for (int c = 0; c < 4 * (FIXED + 8); c++) {
        int32_t base = bases[c % 4];
        int64_t u = c / 4 < FIXED ? fixed[c / 4] : (int64_t)rng_uniform(&rng, -60.0, 60.0) * (c % 2 ? 1 : 3000000);
        if (c / 4 >= FIXED && c % 3 == 0) /* near t's values */
            u = (int64_t)base + (int64_t)rng_uniform(&rng, -10.0, 60.0);
        int64_t shape[1] = {N};
        for (int s = 0; s < 2; s++) {
            memset(out[s], 0, sizeof out[s]);
            kjit_array ao = kjit_array_make(out[s], KJIT_I32, 1, shape);
            kjit_arg args[3] = {kjit_arg_i64(u), kjit_arg_i32(base), kjit_arg_array(&ao)};
            launch(&p, s, "narrow_compares", BLOCKS, BD, args, 3);
        }
        for (int i = 0; i < N; i++) {
            int32_t want = narrow_compares_reference(u, base, i % BD);
            ck_assert_msg(out[0][i] == want && out[1][i] == want,
                          "u %lld base %d thread %d: scalar %d, SIMD %d, want %d", (long long)u, base, i % BD,
                          out[0][i], out[1][i], want);
        }
    }
    pair_close(&p);
}

START_TEST(narrow_compares_cpu) { narrow_compares_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(narrow_compares_parallel) { narrow_compares_on(KJIT_TARGET_PARALLEL); }
END_TEST

Suite *suite_simd_access(void)
{
    Suite *s = suite_create("simd_access");
    TCase *tc = tcase_create("masks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tree_sum_cpu);
    tcase_add_test(tc, tree_sum_parallel);
    tcase_add_test(tc, private_masks_cpu);
    tcase_add_test(tc, private_masks_parallel);
    tcase_add_test(tc, narrow_compares_cpu);
    tcase_add_test(tc, narrow_compares_parallel);
    suite_add_tcase(s, tc);
    return s;
}
