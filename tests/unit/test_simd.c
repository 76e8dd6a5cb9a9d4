/*
 * test_simd.c: the SIMD lowering of the cpu targets (codegen_simd.c).  Each
 * kernel and vectorized function here runs twice on fresh random inputs,
 * with the SIMD lowering (kjit_options.cpu_simd = 1) and without, on cpu and
 * parallel: the two must agree bit for bit, and both must match a reference
 * computed here in C (exact: the operations are IEEE ones in the same order,
 * or integers).  The kernels cover varying ifs, loops left through break,
 * continue, return and their condition, integer division by varying
 * divisors (zeros and -1 among them), shifts by varying counts, saturating
 * conversions, gathers, scatters, atomics, complex values, and blocks of
 * every shape (1, 3, 7, 33 threads across; 3-D), grid-stride loops,
 * counted loops that carry their running lanes (left by return and break)
 * and grid-stride counters kept as lane 0's value, whose f64 conversion
 * is checked on both sides of +-2^52 and +-2^53.  Last,
 * the SIMD path must be the one taken: the Mandelbrot kernel's assembly has
 * packed multiplies with it and none without, and its pixels are stored
 * as vectors.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "kjit_tools.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform01(void) { return (double)(next_random() >> 11) * 0x1.0p-53; }

static const char source[] =
    "@kernel\n"
    "fn mixed(x: f64[], d: i64[], out_f: f64[], out_i: i64[]) {\n"
    "    let i = grid(1);\n"
    "    if i >= len(x) { return; }\n"
    "    let v = x[i];\n"
    "    let q = d[i];\n"
    "    let acc = 0.0;\n"
    "    let count: i64 = 0;\n"
    "    let div = (q * 7 + 3) / q + (q * 5) % q;\n"
    "    let k: i64 = 0;\n"
    "    while k < 40 {\n"
    "        k += 1;\n"
    "        if k % 3 == i % 3 { continue; }\n"
    "        acc = acc * 0.5 + v * f64(k);\n"
    "        if acc > 50.0 { break; }\n"
    "        count += 1;\n"
    "    }\n"
    "    if v < -0.9 { out_f[i] = -1.0; out_i[i] = count; return; }\n"
    "    let s = ((count << (q & 63)) ^ (q >> (count & 7))) + i64(v * 1.0e19);\n"
    "    let edges = i64((v - v) / (v - v)) + i64(v / 0.0) / 2 + i64(v * 3.0e9);\n"
    "    if v > 0 { out_f[i] = sqrt(acc) / v + f64(q); } else { out_f[i] = acc - v + f64(q * 4097); }\n"
    "    out_i[i] = div + s + edges;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn shuffle(src: f32[], idx: i64[], dst: f32[], gathered: f32[], hist: i32[]) {\n"
    "    let t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
    "    let b = blockIdx.x + gridDim.x * blockIdx.y;\n"
    "    let g = i64(b) * i64(blockDim.x * blockDim.y * blockDim.z) + i64(t);\n"
    "    if g < len(idx) {\n"
    "        let j = idx[g];\n"
    "        dst[j] = src[g] * 2.0 + f32(threadIdx.z);\n"
    "        gathered[g] = src[j] - f32(threadIdx.y);\n"
    "        atomic_add(hist, j % 8, 1);\n"
    "    }\n"
    "}\n"
    "\n"
    "fn escape_count(c: c128, limit: i32) -> i32 {\n"
    "    let z = complex(0.0, 0.0);\n"
    "    for n in range(limit) {\n"
    "        z = z * z + c;\n"
    "        if abs(z) > 2.0 { return n; }\n"
    "    }\n"
    "    return -1;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn escape_grid(re: f64[], im: f64[], limit: i32, out: i32[,]) {\n"
    "    let x = threadIdx.x + blockIdx.x * blockDim.x;\n"
    "    let y = threadIdx.y + blockIdx.y * blockDim.y;\n"
    "    if x < len(re) && y < len(im) {\n"
    "        out[y, x] = escape_count(complex(re[x], im[y]), limit + i32(y % 3));\n"
    "    }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn guarded(a: f64[], n: i64, out: f64[]) {\n"
    "    let i = grid(1);\n"
    "    if i >= len(out) { return; }\n"
    "    if i < n && a[n - 1] > 0.0 { out[i] = a[i] + 1.0; } else { out[i] = -1.0; }\n"
    "    let j: i64 = 0;\n"
    "    while j < n && a[j] > 0.5 { j += 1; }\n"
    "    if j > 0 { out[i] = out[i] + f64(j); }\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn grid_stride(src: i64[], usrc: u64[], image: u8[,], wide: i16[,], conv: f64[,], uconv: f64[,],\n"
    "               back: i64[], rev: i32[]) {\n"
    "    let h = image.shape[0];\n"
    "    let w = image.shape[1];\n"
    "    let sx, sy = grid(2);\n"
    "    let gx, gy = gridsize(2);\n"
    "    for x in range(sx, w, gx) {\n"
    "        let fx = f64(src[x]);\n"
    "        for y in range(sy, h, gy) {\n"
    "            image[y, x] = u8(src[x] + y * 7);\n"
    "            wide[y, x] = i16(x * 3 - y);\n"
    "            conv[y, x] = f64(src[x] ^ y);\n"
    "            uconv[y, x] = f64(usrc[x] ^ u64(y));\n"
    "        }\n"
    "        let acc: i64 = 0;\n"
    "        for j in range(3, -3, -2) { acc = acc * 5 + j * x; }\n"
    "        if sy == 0 { back[x] = acc + i64(fx / 1024.0); }\n"
    "    }\n"
    "    for t in range(sx, w, gx) {\n"
    "        let t0 = t;\n"
    "        if t % 5 == 1 { t = t + 1000; }\n"
    "        if sy == 0 { back[t0] += t - t0; }\n"
    "    }\n"
    "    if sy == 0 {\n"
    "        for k in range(w - 1 - sx, -1, -gx) { rev[k] = i32(k * 2 + 1); }\n"
    "        for u in range(u64(sx), u64(w), u64(gx)) { rev[w + i64(u)] = i32(u) * 3; }\n"
    "    }\n"
    "}\n"
    "\n"
    "@vectorize(i64(i64))\n"
    "fn collatz(n) {\n"
    "    let x = n;\n"
    "    let steps = 0;\n"
    "    while x > 1 {\n"
    "        if x % 2 == 0 { x = x / 2; } else { x = 3 * x + 1; }\n"
    "        steps += 1;\n"
    "    }\n"
    "    return steps;\n"
    "}\n"
    "\n"
    "@vectorize(i64(i64), i32(i32))\n"
    "fn halves(n) {\n"
    "    let x = n;\n"
    "    let acc = n * 0;\n"
    "    let k = n * 0;\n"
    "    while k < 6 {\n"
    "        if x % 4 == 0 { acc = acc + x / 2 + x / 4; x = x / 4 + 1; } else { x = x * 3 - 7; acc = acc - x / 8; }\n"
    "        if x % 2 == 0 { x = x - 1; acc = acc + x / 2; } else {\n"
    "            if acc % 2 == 0 { acc = acc / 2; } else { acc = acc + x / 2; }\n"
    "        }\n"
    "        if 0 == x % 8 { acc = acc + x / 8 - x / 16; } else { acc = acc - x / -2; }\n"
    "        k += 1;\n"
    "    }\n"
    "    return acc + x;\n"
    "}\n"
    "\n"
    "@vectorize(f64(f64, f64, f64), f32(f32, f32, f32))\n"
    "fn escape(x, y, limit) {\n"
    "    let zr = x * 0;\n"
    "    let zi = x * 0;\n"
    "    let count = x * 0;\n"
    "    while count < limit {\n"
    "        let t = zr * zr - zi * zi + x;\n"
    "        zi = 2 * zr * zi + y;\n"
    "        zr = t;\n"
    "        if zr * zr + zi * zi > 4 { break; }\n"
    "        count += 1;\n"
    "    }\n"
    "    return count;\n"
    "}\n";

/* ------------------------------------------------------------ references */

static int64_t kdiv(int64_t a, int64_t b)
{
    if (b == 0)
        return a;
    if (b == -1)
        return (int64_t)(0 - (uint64_t)a);
    return a / b;
}

static int64_t krem(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }

static int64_t to_i64_sat(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static void mixed_reference(double v, int64_t q, int64_t i, double *out_f, int64_t *out_i)
{
    double acc = 0.0;
    int64_t count = 0;
    int64_t div = (int64_t)((uint64_t)kdiv((int64_t)((uint64_t)q * 7 + 3), q) + (uint64_t)krem((int64_t)((uint64_t)q * 5), q));
    int64_t k = 0;
    while (k < 40) {
        k += 1;
        if (k % 3 == i % 3)
            continue;
        acc = acc * 0.5 + v * (double)k;
        if (acc > 50.0)
            break;
        count += 1;
    }
    if (v < -0.9) {
        *out_f = -1.0;
        *out_i = count;
        return;
    }
    uint64_t shifted = (uint64_t)count << (q & 63);
    int64_t s = (int64_t)((shifted ^ (uint64_t)(q >> (count & 7))) + (uint64_t)to_i64_sat(v * 1.0e19));
    /* NaN, infinities and values past 32 bits, each way */
    int64_t edges = (int64_t)((uint64_t)to_i64_sat((v - v) / (v - v)) + (uint64_t)kdiv(to_i64_sat(v / 0.0), 2) +
                              (uint64_t)to_i64_sat(v * 3.0e9));
    *out_f = v > 0 ? sqrt(acc) / v + (double)q : acc - v + (double)(int64_t)((uint64_t)q * 4097);
    *out_i = (int64_t)((uint64_t)div + (uint64_t)s + (uint64_t)edges);
}

static int escape_count_reference(double cr, double ci, int limit)
{
    double zr = 0, zi = 0;
    for (int n = 0; n < limit; n++) {
        double r = zr * zr - zi * zi + cr;
        zi = zr * zi + zi * zr + ci;
        zr = r;
        if (hypot(zr, zi) > 2.0)
            return n;
    }
    return -1;
}

static int64_t collatz_reference(int64_t n)
{
    int64_t steps = 0;
    while (n > 1) {
        n = n % 2 == 0 ? n / 2 : 3 * n + 1;
        steps++;
    }
    return steps;
}

static double escape_reference(double x, double y, double limit)
{
    double zr = 0, zi = 0, count = 0;
    while (count < limit) {
        double t = zr * zr - zi * zi + x;
        zi = 2 * zr * zi + y;
        zr = t;
        if (zr * zr + zi * zi > 4)
            break;
        count += 1;
    }
    return count;
}

static float escape_reference_f32(float x, float y, float limit)
{
    float zr = 0, zi = 0, count = 0;
    while (count < limit) {
        float t = zr * zr - zi * zi + x;
        zi = 2 * zr * zi + y;
        zr = t;
        if (zr * zr + zi * zi > 4)
            break;
        count += 1;
    }
    return count;
}

/* ------------------------------------------------------------ fixtures */

/* The block shapes every kernel runs with: widths that are not multiples
 * of any vector width, and 3-D blocks. */
static const uint32_t blocks[][3] = {{1, 1, 1}, {3, 1, 1}, {7, 2, 1}, {33, 1, 1}, {5, 3, 2}, {64, 1, 1}, {4, 4, 4}};
enum { BLOCK_SHAPES = sizeof blocks / sizeof blocks[0] };

/* ------------------------------------------------------------ kernels */

static void mixed_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { N = 1003 };
    double *x = malloc(N * sizeof *x), *out_f[2];
    int64_t *d = malloc(N * sizeof *d), *out_i[2];
    for (int s = 0; s < 2; s++) {
        out_f[s] = malloc(N * sizeof(double));
        out_i[s] = malloc(N * sizeof(int64_t));
    }
    for (int b = 0; b < BLOCK_SHAPES; b++) {
        for (int i = 0; i < N; i++) {
            x[i] = 2.0 * uniform01() - 1.0;
            /* divisors: 0, -1, small and large, of both signs */
            int pick = (int)(next_random() % 6);
            d[i] = pick == 0 ? 0 : pick == 1 ? -1 : pick == 2 ? INT64_MIN : (int64_t)(next_random() % 200) - 100;
        }
        uint32_t threads = blocks[b][0] * blocks[b][1] * blocks[b][2];
        /* grid(1) counts blockIdx.x * blockDim.x + threadIdx.x: a 1-D grid
         * of blocks whose x extent covers N; their y and z threads repeat
         * the same indices, writing the same values */
        uint32_t grid[3] = {(N + blocks[b][0] - 1) / blocks[b][0], 1, 1};
        (void)threads;
        int64_t shape[1] = {N};
        for (int s = 0; s < 2; s++) {
            memset(out_f[s], 0, N * sizeof(double));
            memset(out_i[s], 0, N * sizeof(int64_t));
            kjit_array ax = kjit_array_make(x, KJIT_F64, 1, shape), ad = kjit_array_make(d, KJIT_I64, 1, shape),
                       af = kjit_array_make(out_f[s], KJIT_F64, 1, shape),
                       ai = kjit_array_make(out_i[s], KJIT_I64, 1, shape);
            kjit_arg args[4] = {kjit_arg_array(&ax), kjit_arg_array(&ad), kjit_arg_array(&af), kjit_arg_array(&ai)};
            pair_launch(&p, s, "mixed", grid, blocks[b], args, 4);
        }
        for (int i = 0; i < N; i++) {
            double want_f;
            int64_t want_i;
            mixed_reference(x[i], d[i], i, &want_f, &want_i);
            ck_assert_msg(memcmp(&out_f[0][i], &out_f[1][i], sizeof(double)) == 0 && out_i[0][i] == out_i[1][i],
                          "block %u,%u,%u element %d: scalar %a %lld, SIMD %a %lld", blocks[b][0], blocks[b][1],
                          blocks[b][2], i, out_f[0][i], (long long)out_i[0][i], out_f[1][i], (long long)out_i[1][i]);
            ck_assert_msg(out_f[1][i] == want_f && out_i[1][i] == want_i,
                          "element %d (x %a, d %lld): %a %lld, want %a %lld", i, x[i], (long long)d[i],
                          out_f[1][i], (long long)out_i[1][i], want_f, (long long)want_i);
        }
    }
    for (int s = 0; s < 2; s++) {
        free(out_f[s]);
        free(out_i[s]);
    }
    free(x);
    free(d);
    pair_close(&p);
}

START_TEST(mixed_control_flow_cpu) { mixed_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(mixed_control_flow_parallel) { mixed_on(KJIT_TARGET_PARALLEL); }
END_TEST

static void shuffle_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { N = 999 };
    float *src = malloc(N * sizeof *src), *dst[2], *gathered[2];
    int64_t *idx = malloc(N * sizeof *idx);
    int32_t hist[2][8];
    for (int s = 0; s < 2; s++) {
        dst[s] = malloc(N * sizeof(float));
        gathered[s] = malloc(N * sizeof(float));
    }
    for (int b = 0; b < BLOCK_SHAPES; b++) {
        /* a random permutation: every dst element written once */
        for (int i = 0; i < N; i++) {
            src[i] = (float)(uniform01() * 100.0 - 50.0);
            idx[i] = i;
        }
        for (int i = N - 1; i > 0; i--) {
            int j = (int)(next_random() % (uint64_t)(i + 1));
            int64_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        uint32_t threads = blocks[b][0] * blocks[b][1] * blocks[b][2];
        uint32_t count = (N + threads - 1) / threads;
        uint32_t grid[3] = {(count + 1) / 2, 2, 1};
        int64_t shape[1] = {N}, hshape[1] = {8};
        for (int s = 0; s < 2; s++) {
            memset(dst[s], 0, N * sizeof(float));
            memset(gathered[s], 0, N * sizeof(float));
            memset(hist[s], 0, sizeof hist[s]);
            kjit_array as = kjit_array_make(src, KJIT_F32, 1, shape), ai = kjit_array_make(idx, KJIT_I64, 1, shape),
                       ad = kjit_array_make(dst[s], KJIT_F32, 1, shape),
                       ag = kjit_array_make(gathered[s], KJIT_F32, 1, shape),
                       ah = kjit_array_make(hist[s], KJIT_I32, 1, hshape);
            kjit_arg args[5] = {kjit_arg_array(&as), kjit_arg_array(&ai), kjit_arg_array(&ad),
                                kjit_arg_array(&ag), kjit_arg_array(&ah)};
            pair_launch(&p, s, "shuffle", grid, blocks[b], args, 5);
        }
        ck_assert(memcmp(dst[0], dst[1], N * sizeof(float)) == 0);
        ck_assert(memcmp(gathered[0], gathered[1], N * sizeof(float)) == 0);
        ck_assert(memcmp(hist[0], hist[1], sizeof hist[0]) == 0);
        int32_t want_hist[8] = {0};
        for (int g = 0; g < N; g++) {
            /* thread g of the launch: its z and y within the block */
            uint32_t t = (uint32_t)g % threads;
            uint32_t tz = t / (blocks[b][0] * blocks[b][1]), ty = t / blocks[b][0] % blocks[b][1];
            float want_dst = src[g] * 2.0f + (float)tz;
            float want_gathered = src[idx[g]] - (float)ty;
            ck_assert_msg(dst[1][idx[g]] == want_dst, "block %u,%u,%u: dst[%lld] %g, want %g", blocks[b][0],
                          blocks[b][1], blocks[b][2], (long long)idx[g], dst[1][idx[g]], want_dst);
            ck_assert_msg(gathered[1][g] == want_gathered, "gathered[%d] %g, want %g", g, gathered[1][g],
                          want_gathered);
            want_hist[idx[g] % 8]++;
        }
        ck_assert(memcmp(hist[1], want_hist, sizeof want_hist) == 0);
    }
    for (int s = 0; s < 2; s++) {
        free(dst[s]);
        free(gathered[s]);
    }
    free(src);
    free(idx);
    pair_close(&p);
}

START_TEST(gather_scatter_atomics_cpu) { shuffle_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(gather_scatter_atomics_parallel) { shuffle_on(KJIT_TARGET_PARALLEL); }
END_TEST

static void escape_grid_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { W = 77, H = 41, LIMIT = 30 };
    double re[W], im[H];
    int32_t *out[2];
    for (int s = 0; s < 2; s++)
        out[s] = malloc(W * H * sizeof(int32_t));
    for (int x = 0; x < W; x++)
        re[x] = -2.0 + 2.6 * uniform01();
    for (int y = 0; y < H; y++)
        im[y] = -1.2 + 2.4 * uniform01();
    const uint32_t shapes[][3] = {{8, 4, 1}, {3, 5, 1}, {33, 2, 1}, {1, 16, 1}};
    for (size_t b = 0; b < sizeof shapes / sizeof shapes[0]; b++) {
        uint32_t grid[3] = {(W + shapes[b][0] - 1) / shapes[b][0], (H + shapes[b][1] - 1) / shapes[b][1], 1};
        int64_t rshape[1] = {W}, ishape[1] = {H}, oshape[2] = {H, W};
        for (int s = 0; s < 2; s++) {
            memset(out[s], 0x55, W * H * sizeof(int32_t));
            kjit_array ar = kjit_array_make(re, KJIT_F64, 1, rshape), ai = kjit_array_make(im, KJIT_F64, 1, ishape),
                       ao = kjit_array_make(out[s], KJIT_I32, 2, oshape);
            kjit_arg args[4] = {kjit_arg_array(&ar), kjit_arg_array(&ai), kjit_arg_i32(LIMIT), kjit_arg_array(&ao)};
            pair_launch(&p, s, "escape_grid", grid, shapes[b], args, 4);
        }
        ck_assert(memcmp(out[0], out[1], W * H * sizeof(int32_t)) == 0);
        /* hypot is libm's in the reference and libmvec's on SIMD lanes:
         * a point on the boundary may escape one step apart */
        int differ = 0;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                int want = escape_count_reference(re[x], im[y], LIMIT + y % 3);
                int got = out[1][y * W + x];
                if (got != want) {
                    differ++;
                    ck_assert_msg(abs(got - want) <= 1, "(%d,%d): %d, want %d", y, x, got, want);
                }
            }
        ck_assert_msg(differ <= W * H / 100, "%d points differ", differ);
    }
    for (int s = 0; s < 2; s++)
        free(out[s]);
    pair_close(&p);
}

START_TEST(complex_escape_time_cpu) { escape_grid_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(complex_escape_time_parallel) { escape_grid_on(KJIT_TARGET_PARALLEL); }
END_TEST

/*
 * Grid-stride loops over a 2-D image, the grid smaller than the image (the
 * lanes step on, some of them done): a counter started at uniform + lane
 * stores bytes and halves contiguously (through views whose last stride is
 * 1, and through strided ones), a uniform counter under the varying loop
 * indexes rows, i64 and u64 of every magnitude become f64, and loops count
 * down (by lanes and uniformly) and over u64.
 */
static int64_t wide_random(void)
{
    uint64_t r = next_random();
    return (int64_t)(r >> (next_random() % 64)) * (next_random() & 1 ? -1 : 1);
}

static void grid_stride_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { W = 101, H = 13, PAD = 2 };
    int64_t src[W];
    uint64_t usrc[W];
    for (int x = 0; x < W; x++) {
        src[x] = wide_random();
        usrc[x] = next_random() >> (next_random() % 64);
    }
    src[0] = INT64_MIN, src[1] = INT64_MAX, src[2] = (1ll << 53) + 1, usrc[0] = UINT64_MAX;
    uint8_t *image[2];
    int16_t *wide[2];
    double *conv[2], *uconv[2];
    int64_t back[2][W];
    int32_t rev[2][2 * W];
    for (int s = 0; s < 2; s++) {
        image[s] = malloc(W * H * PAD), wide[s] = malloc(W * H * PAD * sizeof(int16_t));
        conv[s] = malloc(W * H * sizeof(double)), uconv[s] = malloc(W * H * sizeof(double));
    }
    const uint32_t shapes[][3] = {{1, 1, 1}, {3, 1, 1}, {7, 2, 1}, {33, 1, 1}, {64, 1, 1}, {8, 4, 1}};
    for (size_t b = 0; b < sizeof shapes / sizeof shapes[0]; b++)
        for (int strided = 0; strided < 2; strided++) {
            /* about two thirds of the image across, a third down */
            uint32_t grid[3] = {(2 * W / 3 + shapes[b][0] - 1) / shapes[b][0],
                                (H / 3 + shapes[b][1] - 1) / shapes[b][1], 1};
            int64_t shape1[1] = {W}, shape2[2] = {H, W}, rshape[1] = {2 * W};
            for (int s = 0; s < 2; s++) {
                memset(image[s], 0x55, W * H * PAD), memset(wide[s], 0x55, W * H * PAD * sizeof(int16_t));
                memset(back[s], 0x55, sizeof back[s]), memset(rev[s], 0x55, sizeof rev[s]);
                kjit_array as = kjit_array_make(src, KJIT_I64, 1, shape1), au = kjit_array_make(usrc, KJIT_U64, 1, shape1);
                kjit_array ai = kjit_array_make(image[s], KJIT_U8, 2, shape2);
                kjit_array aw = kjit_array_make(wide[s], KJIT_I16, 2, shape2);
                if (strided) {
                    /* every other element of rows twice as long */
                    ai.strides[0] *= PAD, ai.strides[1] *= PAD, aw.strides[0] *= PAD, aw.strides[1] *= PAD;
                }
                kjit_array ac = kjit_array_make(conv[s], KJIT_F64, 2, shape2),
                           auc = kjit_array_make(uconv[s], KJIT_F64, 2, shape2),
                           ab = kjit_array_make(back[s], KJIT_I64, 1, shape1),
                           ar = kjit_array_make(rev[s], KJIT_I32, 1, rshape);
                kjit_arg args[8] = {kjit_arg_array(&as), kjit_arg_array(&au), kjit_arg_array(&ai),
                                    kjit_arg_array(&aw), kjit_arg_array(&ac), kjit_arg_array(&auc),
                                    kjit_arg_array(&ab), kjit_arg_array(&ar)};
                pair_launch(&p, s, "grid_stride", grid, shapes[b], args, 8);
            }
            ck_assert(memcmp(image[0], image[1], W * H * PAD) == 0);
            ck_assert(memcmp(wide[0], wide[1], W * H * PAD * sizeof(int16_t)) == 0);
            ck_assert(memcmp(conv[0], conv[1], W * H * sizeof(double)) == 0);
            ck_assert(memcmp(uconv[0], uconv[1], W * H * sizeof(double)) == 0);
            ck_assert(memcmp(back[0], back[1], sizeof back[0]) == 0);
            ck_assert(memcmp(rev[0], rev[1], sizeof rev[0]) == 0);
            int step = strided ? PAD : 1;
            for (int64_t y = 0; y < H; y++)
                for (int64_t x = 0; x < W; x++) {
                    int64_t at = y * W + x;
                    ck_assert_int_eq(image[1][at * step], (uint8_t)(src[x] + y * 7));
                    ck_assert_int_eq(wide[1][at * step], (int16_t)(x * 3 - y));
                    /* C's conversions round to nearest, as the scalar code's */
                    ck_assert_msg(conv[1][at] == (double)(src[x] ^ y), "conv[%lld, %lld]: %a, want %a",
                                  (long long)y, (long long)x, conv[1][at], (double)(src[x] ^ y));
                    ck_assert_msg(uconv[1][at] == (double)(usrc[x] ^ (uint64_t)y), "uconv[%lld, %lld]: %a",
                                  (long long)y, (long long)x, uconv[1][at]);
                }
            for (int64_t x = 0; x < W; x++) {
                int64_t acc = 0;
                for (int64_t j = 3; j > -3; j -= 2)
                    acc = acc * 5 + j * x;
                double fx = (double)src[x] / 1024.0;
                int64_t tail = fx >= 9223372036854775807.0 ? INT64_MAX : (int64_t)fx;
                ck_assert_int_eq(back[1][x], (x % 5 == 1 ? 1000 : 0) + acc + tail);
                ck_assert_int_eq(rev[1][x], (int32_t)(x * 2 + 1));
                ck_assert_int_eq(rev[1][W + x], (int32_t)(x * 3));
            }
        }
    for (int s = 0; s < 2; s++)
        free(image[s]), free(wide[s]), free(conv[s]), free(uconv[s]);
    pair_close(&p);
}

START_TEST(grid_stride_loops_cpu) { grid_stride_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(grid_stride_loops_parallel) { grid_stride_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* A uniform load behind a varying && (a[n - 1]) runs only when some lane
 * gets there: with n = 0 and an empty array it must not run at all. */
static void guarded_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { N = 37 };
    double a[24], out[2][N];
    for (int i = 0; i < 24; i++)
        a[i] = uniform01();
    const int64_t counts[] = {0, 5, 24};
    for (size_t c = 0; c < 3; c++) {
        int64_t n = counts[c], ashape[1] = {n}, oshape[1] = {N};
        uint32_t grid[3] = {2, 1, 1}, block[3] = {19, 1, 1};
        for (int s = 0; s < 2; s++) {
            /* the empty array's data is NULL: a stray load faults */
            kjit_array aa = kjit_array_make(n ? a : NULL, KJIT_F64, 1, ashape);
            kjit_array ao = kjit_array_make(out[s], KJIT_F64, 1, oshape);
            kjit_arg args[3] = {kjit_arg_array(&aa), kjit_arg_i64(n), kjit_arg_array(&ao)};
            pair_launch(&p, s, "guarded", grid, block, args, 3);
        }
        ck_assert(memcmp(out[0], out[1], sizeof out[0]) == 0);
        int64_t j = 0;
        while (j < n && a[j] > 0.5)
            j++;
        for (int i = 0; i < N; i++) {
            double want = i < n && a[n - 1] > 0.0 ? a[i] + 1.0 : -1.0;
            if (j > 0)
                want += (double)j;
            ck_assert_msg(out[1][i] == want, "n %lld, out[%d] %g, want %g", (long long)n, i, out[1][i], want);
        }
    }
    pair_close(&p);
}

START_TEST(guarded_uniform_load_cpu) { guarded_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(guarded_uniform_load_parallel) { guarded_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ vectorized */

/* halves in C: the divisions under `x % 2^k == 0` (exact: lane code may
 * shift), and those where x changed, or 2^k is larger, or negative (not). */
static int64_t halves_reference(int64_t x)
{
    int64_t acc = 0;
    for (int k = 0; k < 6; k++) {
        if (x % 4 == 0) {
            acc = acc + x / 2 + x / 4;
            x = x / 4 + 1;
        } else {
            x = x * 3 - 7;
            acc = acc - x / 8;
        }
        if (x % 2 == 0) {
            x = x - 1;
            acc = acc + x / 2;
        } else if (acc % 2 == 0) {
            acc = acc / 2;
        } else {
            acc = acc + x / 2;
        }
        if (x % 8 == 0)
            acc = acc + x / 8 - x / 16;
        else
            acc = acc - x / -2;
    }
    return acc + x;
}

static void call(Pair *p, int simd, const char *name, kjit_arg *args, int nargs, kjit_array *out)
{
    ck_assert_msg(kjit_call(pair_fn(p, simd, name), args, nargs, out, NULL) == KJIT_OK, "%s: %s", name,
                  kjit_last_error(p->context[simd]));
}

static void vectorized_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    const int64_t lengths[] = {1, 3, 7, 33, 1000};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int64_t n = lengths[l], shape[1] = {n};
        int64_t *seeds = malloc((size_t)n * sizeof *seeds), *steps[2];
        double *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y), *counts[2];
        float *xf = malloc((size_t)n * sizeof *xf), *yf = malloc((size_t)n * sizeof *yf), *countsf[2];
        for (int64_t i = 0; i < n; i++) {
            seeds[i] = (int64_t)(next_random() % 100000) + 1;
            x[i] = -2.0 + 2.5 * uniform01();
            y[i] = -1.2 + 2.4 * uniform01();
            xf[i] = (float)x[i];
            yf[i] = (float)y[i];
        }
        for (int s = 0; s < 2; s++) {
            steps[s] = calloc((size_t)n, sizeof(int64_t));
            counts[s] = calloc((size_t)n, sizeof(double));
            countsf[s] = calloc((size_t)n, sizeof(float));
            kjit_array as = kjit_array_make(seeds, KJIT_I64, 1, shape), ao = kjit_array_make(steps[s], KJIT_I64, 1, shape);
            kjit_arg a1[1] = {kjit_arg_array(&as)};
            call(&p, s, "collatz", a1, 1, &ao);
            kjit_array ax = kjit_array_make(x, KJIT_F64, 1, shape), ay = kjit_array_make(y, KJIT_F64, 1, shape),
                       ac = kjit_array_make(counts[s], KJIT_F64, 1, shape);
            kjit_arg a2[3] = {kjit_arg_array(&ax), kjit_arg_array(&ay), kjit_arg_f64(60)};
            call(&p, s, "escape", a2, 3, &ac);
            kjit_array axf = kjit_array_make(xf, KJIT_F32, 1, shape), ayf = kjit_array_make(yf, KJIT_F32, 1, shape),
                       acf = kjit_array_make(countsf[s], KJIT_F32, 1, shape);
            kjit_arg a3[3] = {kjit_arg_array(&axf), kjit_arg_array(&ayf), kjit_arg_f32(45)};
            call(&p, s, "escape", a3, 3, &acf);
        }
        ck_assert(memcmp(steps[0], steps[1], (size_t)n * sizeof(int64_t)) == 0);
        ck_assert(memcmp(counts[0], counts[1], (size_t)n * sizeof(double)) == 0);
        ck_assert(memcmp(countsf[0], countsf[1], (size_t)n * sizeof(float)) == 0);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(steps[1][i] == collatz_reference(seeds[i]), "collatz(%lld): %lld", (long long)seeds[i],
                          (long long)steps[1][i]);
            ck_assert_msg(counts[1][i] == escape_reference(x[i], y[i], 60), "escape(%a, %a): %g", x[i], y[i],
                          counts[1][i]);
            ck_assert_msg(countsf[1][i] == escape_reference_f32(xf[i], yf[i], 45), "escape f32(%a, %a): %g",
                          (double)xf[i], (double)yf[i], (double)countsf[1][i]);
        }
        for (int s = 0; s < 2; s++) {
            free(steps[s]);
            free(counts[s]);
            free(countsf[s]);
        }
        free(seeds);
        free(x);
        free(y);
        free(xf);
        free(yf);
    }
    /* broadcasting: a 2-D output from a row and a column (the strided
     * layout, whose elements are gathered) */
    enum { R = 9, C = 13 };
    double rows[C], cols[R], out[2][R * C];
    for (int i = 0; i < C; i++)
        rows[i] = -2.0 + 2.5 * uniform01();
    for (int j = 0; j < R; j++)
        cols[j] = -1.2 + 2.4 * uniform01();
    int64_t rshape[2] = {1, C}, cshape[2] = {R, 1}, oshape[2] = {R, C};
    for (int s = 0; s < 2; s++) {
        kjit_array ar = kjit_array_make(rows, KJIT_F64, 2, rshape), ac = kjit_array_make(cols, KJIT_F64, 2, cshape),
                   ao = kjit_array_make(out[s], KJIT_F64, 2, oshape);
        kjit_arg args[3] = {kjit_arg_array(&ar), kjit_arg_array(&ac), kjit_arg_f64(40)};
        call(&p, s, "escape", args, 3, &ao);
    }
    ck_assert(memcmp(out[0], out[1], sizeof out[0]) == 0);
    for (int j = 0; j < R; j++)
        for (int i = 0; i < C; i++)
            ck_assert(out[1][j * C + i] == escape_reference(rows[i], cols[j], 40));
    pair_close(&p);
}

/* Inline varying ifs with both sides, and divisions by powers of two under
 * `x % 2^k == 0`, on negative values too, in i64 and i32: the lanes agree
 * with the scalar code and with C. */
static void halves_on(kjit_target target)
{
    Pair p = pair_open(target, "simd.kern", source);
    enum { N = 1001 };
    int64_t seeds[N], got[2][N];
    int32_t seeds32[N], got32[2][N];
    for (int i = 0; i < N; i++) {
        seeds[i] = i < 64 ? i - 32 : (int64_t)(next_random() % 2000001) - 1000000;
        seeds32[i] = (int32_t)seeds[i];
    }
    int64_t shape[1] = {N};
    for (int s = 0; s < 2; s++) {
        kjit_array as = kjit_array_make(seeds, KJIT_I64, 1, shape), ao = kjit_array_make(got[s], KJIT_I64, 1, shape);
        kjit_arg a1[1] = {kjit_arg_array(&as)};
        call(&p, s, "halves", a1, 1, &ao);
        kjit_array as32 = kjit_array_make(seeds32, KJIT_I32, 1, shape),
                   ao32 = kjit_array_make(got32[s], KJIT_I32, 1, shape);
        kjit_arg a2[1] = {kjit_arg_array(&as32)};
        call(&p, s, "halves", a2, 1, &ao32);
    }
    ck_assert(memcmp(got[0], got[1], sizeof got[0]) == 0);
    ck_assert(memcmp(got32[0], got32[1], sizeof got32[0]) == 0);
    for (int i = 0; i < N; i++) {
        int64_t want = halves_reference(seeds[i]);
        ck_assert_msg(got[1][i] == want, "halves(%lld): %lld, want %lld", (long long)seeds[i], (long long)got[1][i],
                      (long long)want);
        ck_assert_msg(got32[1][i] == (int32_t)want, "halves i32(%lld): %d", (long long)seeds[i], got32[1][i]);
    }
    pair_close(&p);
}

START_TEST(exact_halves_cpu) { halves_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(exact_halves_parallel) { halves_on(KJIT_TARGET_PARALLEL); }
END_TEST

START_TEST(vectorized_loops_cpu) { vectorized_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(vectorized_loops_parallel) { vectorized_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ loops that carry their lanes */

/*
 * A counted loop left by return and by break (its running lanes carried
 * from one iteration to the next, an `if` that retires lanes joining the
 * lanes that stay), code after the leaving ifs in the same iteration, and a
 * grid-stride counter of uniform + lane kept as lane 0's value, whose f64
 * conversion takes a scalar conversion while lane 0 lies in [-2^52, 2^52)
 * and the exact vector one elsewhere (the bases cross both edges).
 */
static const char carried_source[] =
    "fn leave_early(x: f64, y: f64, n: i32) -> i32 {\n"
    "    let c = complex(x, y);\n"
    "    let z = complex(0.0, 0.0);\n"
    "    let extra: i32 = 0;\n"
    "    for i in range(n) {\n"
    "        z = z * z + c;\n"
    "        if z.real * z.real + z.imag * z.imag >= 4 { return i; }\n"
    "        if z.imag > 0.75 { extra = extra + 100; break; }\n"
    "        if z.real < -0.5 { extra = extra + 1; }\n"
    "    }\n"
    "    return 1000 + extra;\n"
    "}\n"
    "\n"
    "@kernel\n"
    "fn leave_grid(re: f64[], im: f64[], n: i32, out: i32[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(out) { out[i] = leave_early(re[i], im[i], n + i32(i % 3)); }\n"
    "}\n"
    "\n"
    "@vectorize\n"
    "fn leave_vec(x: f64, y: f64, n: i32) -> i32 { return leave_early(x, y, n); }\n"
    "\n"
    "@kernel\n"
    "fn unit_f64(base: i64, every: i64, out: f64[], seen: i64[]) {\n"
    "    for x in range(base + grid(1), base + len(out), gridsize(1) * every) {\n"
    "        out[x - base] = f64(x) * 0.5 + 0.25;\n"
    "        seen[x - base] = x;\n"
    "    }\n"
    "}\n";

static int leave_early_reference(double x, double y, int n)
{
    double zr = 0, zi = 0;
    int extra = 0;
    for (int i = 0; i < n; i++) {
        double ab = zr * zi;
        double r = zr * zr - zi * zi + x;
        zi = ab * 2.0 + y;
        zr = r;
        if (zr * zr + zi * zi >= 4) return i;
        if (zi > 0.75) {
            extra += 100;
            break;
        }
        if (zr < -0.5) extra += 1;
    }
    return 1000 + extra;
}

static void carried_on(kjit_target target)
{
    Pair p = pair_open(target, "carried.kern", carried_source);
    enum { N = 389, LIMIT = 24 };
    double re[N], im[N];
    int32_t out[2][N], vec[2][N];
    for (int i = 0; i < N; i++)
        re[i] = -2.1 + 2.7 * uniform01(), im[i] = -1.3 + 2.6 * uniform01();
    const uint32_t blocks[][3] = {{1, 1, 1}, {3, 1, 1}, {8, 1, 1}, {33, 1, 1}, {64, 1, 1}};
    int64_t shape[1] = {N};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        uint32_t grid[3] = {(N + blocks[b][0] - 1) / blocks[b][0], 1, 1};
        for (int s = 0; s < 2; s++) {
            memset(out[s], 0x55, sizeof out[s]);
            kjit_array ar = kjit_array_make(re, KJIT_F64, 1, shape), ai = kjit_array_make(im, KJIT_F64, 1, shape),
                       ao = kjit_array_make(out[s], KJIT_I32, 1, shape);
            kjit_arg args[4] = {kjit_arg_array(&ar), kjit_arg_array(&ai), kjit_arg_i32(LIMIT), kjit_arg_array(&ao)};
            pair_launch(&p, s, "leave_grid", grid, blocks[b], args, 4);
        }
        ck_assert(memcmp(out[0], out[1], sizeof out[0]) == 0);
        for (int i = 0; i < N; i++)
            ck_assert_msg(out[1][i] == leave_early_reference(re[i], im[i], LIMIT + i % 3), "leave_grid[%d]: %d, want %d",
                          i, out[1][i], leave_early_reference(re[i], im[i], LIMIT + i % 3));
    }
    for (int s = 0; s < 2; s++) {
        kjit_array ar = kjit_array_make(re, KJIT_F64, 1, shape), ai = kjit_array_make(im, KJIT_F64, 1, shape),
                   ao = kjit_array_make(vec[s], KJIT_I32, 1, shape);
        kjit_arg args[3] = {kjit_arg_array(&ar), kjit_arg_array(&ai), kjit_arg_i32(LIMIT)};
        ck_assert(kjit_call(pair_fn(&p, s, "leave_vec"), args, 3, &ao, NULL) == KJIT_OK);
    }
    ck_assert(memcmp(vec[0], vec[1], sizeof vec[0]) == 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(vec[1][i], leave_early_reference(re[i], im[i], LIMIT));

    /* lane 0 below, inside and above [-2^52, 2^52) as the counter steps,
     * and across +-2^53 (where f64(x0) + k would round twice)
     * (and no counter passing INT64_MAX: the threads' own loops would wrap
     * round and go on) */
    enum { M = 203 };
    double conv[2][M];
    int64_t seen[2][M], mshape[1] = {M};
    const int64_t edge = (int64_t)1 << 52;
    int64_t bases[] = {edge - 60, -edge - 60, edge - 1, -edge, 2 * edge - 60, -2 * edge - 60,
                       INT64_MAX - 4 * M, INT64_MIN, 0, 0};
    bases[8] = wide_random(), bases[9] = (int64_t)(next_random() % 1000) - 500;
    if (bases[8] > INT64_MAX - 4 * M)
        bases[8] -= 4 * M;
    for (size_t k = 0; k < sizeof bases / sizeof bases[0]; k++)
        for (int every = 1; every <= 2; every++)
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
                uint32_t grid[3] = {(M / 3 + blocks[b][0] - 1) / blocks[b][0], 1, 1};
                for (int s = 0; s < 2; s++) {
                    memset(conv[s], 0x55, sizeof conv[s]), memset(seen[s], 0x55, sizeof seen[s]);
                    kjit_array ac = kjit_array_make(conv[s], KJIT_F64, 1, mshape),
                               as = kjit_array_make(seen[s], KJIT_I64, 1, mshape);
                    kjit_arg args[4] = {kjit_arg_i64(bases[k]), kjit_arg_i64(every), kjit_arg_array(&ac),
                                        kjit_arg_array(&as)};
                    pair_launch(&p, s, "unit_f64", grid, blocks[b], args, 4);
                }
                ck_assert(memcmp(conv[0], conv[1], sizeof conv[0]) == 0);
                ck_assert(memcmp(seen[0], seen[1], sizeof seen[0]) == 0);
                int64_t stride = (int64_t)grid[0] * blocks[b][0] * every;
                for (int64_t i = 0; i < M; i++) {
                    bool written = i % stride < (int64_t)grid[0] * blocks[b][0];
                    if (!written)
                        continue;
                    int64_t x = bases[k] + i;
                    ck_assert_msg(seen[1][i] == x, "unit_f64 base %lld: seen[%lld] = %lld", (long long)bases[k],
                                  (long long)i, (long long)seen[1][i]);
                    ck_assert_msg(conv[1][i] == (double)x * 0.5 + 0.25, "unit_f64 base %lld: out[%lld] = %a, want %a",
                                  (long long)bases[k], (long long)i, conv[1][i], (double)x * 0.5 + 0.25);
                }
            }
    pair_close(&p);
}

START_TEST(carried_lanes_cpu) { carried_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(carried_lanes_parallel) { carried_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ the path taken */

/* The text of function `name` in assembly (from its label to the next
 * .Lfunc_end label). */
static char *function_text(const char *asm_text, const char *name)
{
    char label[256];
    snprintf(label, sizeof label, "\n%s:", name);
    const char *start = strstr(asm_text, label);
    ck_assert_msg(start, "no %s in the assembly", name);
    const char *end = strstr(start + 1, "\n.Lfunc_end");
    ck_assert(end);
    char *text = malloc((size_t)(end - start) + 1);
    memcpy(text, start, (size_t)(end - start));
    text[end - start] = '\0';
    return text;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(mandelbrot_runs_on_lanes)
{
    int packed[2];
    for (int simd = 0; simd < 2; simd++) {
        kjit_stage_options options;
        kjit_stage_options_init(&options);
        options.cpu_simd = simd;
        char *bytes = NULL, *error = NULL;
        size_t size = 0;
        ck_assert_msg(kjit_stage_file("examples/mandelbrot.kern", KJIT_STAGE_ASM, &options, &bytes, &size, &error) ==
                          KJIT_OK,
                      "%s", error ? error : "?");
        char *text = function_text(bytes, "mandel_kernel__block");
        /* packed f64 multiplies: mulpd (SSE) or vmulpd on xmm, ymm or zmm */
        packed[simd] = count_of(text, "mulpd");
        free(text);
        free(bytes);
    }
    ck_assert_msg(packed[0] == 0, "the scalar code has %d packed multiplies", packed[0]);
    ck_assert_msg(packed[1] >= 6, "the SIMD code has %d packed multiplies", packed[1]);
    /* its grid-stride loops' counters: x uniform + lane, y uniform, so the
     * pixels are stored as a vector of bytes (when the image's rows are
     * contiguous; scattered when not) */
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    options.cpu_simd = 1;
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    ck_assert_msg(kjit_stage_file("examples/mandelbrot.kern", KJIT_STAGE_LLVM, &options, &bytes, &size, &error) ==
                      KJIT_OK,
                  "%s", error ? error : "?");
    const char *store = strstr(bytes, "declare void @llvm.masked.store.v");
    ck_assert_msg(store && strstr(store, "i8.p0") && strstr(store, "i8.p0") < strchr(store, '\n'),
                  "the Mandelbrot kernel's pixels are not stored contiguously");
    free(bytes);
}
END_TEST

Suite *suite_simd(void)
{
    Suite *s = suite_create("simd");
    TCase *tc = tcase_create("lanes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mixed_control_flow_cpu);
    tcase_add_test(tc, mixed_control_flow_parallel);
    tcase_add_test(tc, gather_scatter_atomics_cpu);
    tcase_add_test(tc, gather_scatter_atomics_parallel);
    tcase_add_test(tc, complex_escape_time_cpu);
    tcase_add_test(tc, complex_escape_time_parallel);
    tcase_add_test(tc, grid_stride_loops_cpu);
    tcase_add_test(tc, grid_stride_loops_parallel);
    tcase_add_test(tc, guarded_uniform_load_cpu);
    tcase_add_test(tc, guarded_uniform_load_parallel);
    tcase_add_test(tc, vectorized_loops_cpu);
    tcase_add_test(tc, vectorized_loops_parallel);
    tcase_add_test(tc, exact_halves_cpu);
    tcase_add_test(tc, exact_halves_parallel);
    tcase_add_test(tc, carried_lanes_cpu);
    tcase_add_test(tc, carried_lanes_parallel);
    tcase_add_test(tc, mandelbrot_runs_on_lanes);
    suite_add_tcase(s, tc);
    return s;
}
