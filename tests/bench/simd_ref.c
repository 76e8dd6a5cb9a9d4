/*
 * simd_ref.c: the hand-written C that `make bench-cpu` measures kjit's cpu
 * target against (issue 10: "the cpu targets use the vector units").  Each
 * workload is here twice, with the algorithm of its kjit program:
 *
 *   *_scalar  one element at a time, as a C programmer writes it first
 *             (the loop vectoriser is off for these, so they stay scalar);
 *   *_simd    GCC vector extensions (and an intrinsic where they have no
 *             operator: square root, gather, a lane test) with as many lanes
 *             as the machine has: the width comes from the ISA macros that
 *             -march=native defines, never from a CPU model.  Lanes that are
 *             done are masked off, and a loop is left when no lane is alive.
 *
 * Same precision, same operations, in the same order, as kjit computes them:
 * the file is compiled with -ffp-contract=off because kjit never contracts a
 * multiply and an add into an fma, so the integer results (Mandelbrot and
 * escape counts, Collatz steps, delay-and-sum's sums of integers) equal kjit's
 * exactly and the block sums equal them bit for bit.
 *
 * Built by tests/bench/cpu.mk with `gcc -O3 -march=native -ffp-contract=off`.
 * The Mandelbrot loop follows /work/shared/bench/mandel_simd.c (the project's
 * 4-lane AVX2 reference of issue 10), with the lane count taken from the ISA.
 */
#include "simd_ref.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#define ISA_NAME "AVX-512"
#elif defined(__AVX2__)
#define VECTOR_BYTES 32
#define ISA_NAME "AVX2"
#elif defined(__SSE2__)
#define VECTOR_BYTES 16
#define ISA_NAME "SSE2"
#elif defined(__ARM_NEON)
#define VECTOR_BYTES 16
#define ISA_NAME "NEON"
#else
#define VECTOR_BYTES 16
#define ISA_NAME "generic vectors"
#endif

#define LANES64 (VECTOR_BYTES / 8)
#define LANES32 (VECTOR_BYTES / 4)

typedef double f64v __attribute__((vector_size(VECTOR_BYTES)));
typedef int64_t i64v __attribute__((vector_size(VECTOR_BYTES)));
typedef float f32v __attribute__((vector_size(VECTOR_BYTES)));
typedef int32_t i32v __attribute__((vector_size(VECTOR_BYTES)));

/* The scalar references stay scalar: -O3 would otherwise vectorise the loops
 * that have no early exit (block_sum's tree). */
#define SCALAR_C __attribute__((optimize("no-tree-vectorize"), noinline))

const char *simd_ref_isa(void)
{
    static char name[64];
    snprintf(name, sizeof name, "%s: %d x f64/i64, %d x f32/i32", ISA_NAME, LANES64, LANES32);
    return name;
}

/* ------------------------------------------------------------ lane helpers */

/* Whether any lane of a mask (lanes all ones or all zeros) is set. */
static inline int any_lane64(i64v mask)
{
#if defined(__AVX512F__)
    return _mm512_test_epi64_mask((__m512i)mask, (__m512i)mask) != 0;
#elif defined(__AVX2__)
    return !_mm256_testz_si256((__m256i)mask, (__m256i)mask);
#elif defined(__SSE2__)
    return _mm_movemask_epi8((__m128i)mask) != 0;
#else
    int64_t any = 0;
    for (int l = 0; l < LANES64; l++) any |= mask[l];
    return any != 0;
#endif
}

static inline int any_lane32(i32v mask)
{
    return any_lane64((i64v)mask);
}

static inline f64v sqrt_f64v(f64v v)
{
#if defined(__AVX512F__)
    return (f64v)_mm512_sqrt_pd((__m512d)v);
#elif defined(__AVX2__)
    return (f64v)_mm256_sqrt_pd((__m256d)v);
#elif defined(__SSE2__)
    return (f64v)_mm_sqrt_pd((__m128d)v);
#else
    for (int l = 0; l < LANES64; l++) v[l] = sqrt(v[l]);
    return v;
#endif
}

/* Half as many 32-bit integers as a vector has 64-bit lanes: indices. */
typedef int32_t i32h __attribute__((vector_size(VECTOR_BYTES / 2)));

/* base[index] in the lanes of mask, 0 in the others. */
static inline i64v gather_i64v(const int64_t *base, i32h index, i64v mask)
{
#if defined(__AVX512F__)
    __mmask8 k = _mm512_test_epi64_mask((__m512i)mask, (__m512i)mask);
    return (i64v)_mm512_mask_i32gather_epi64(_mm512_setzero_si512(), k, (__m256i)index,
                                             (const long long *)base, 8);
#elif defined(__AVX2__)
    return (i64v)_mm256_mask_i32gather_epi64(_mm256_setzero_si256(), (const long long *)base,
                                             (__m128i)index, (__m256i)mask, 8);
#else
    i64v values = {0};
    for (int l = 0; l < LANES64; l++)
        if (mask[l]) values[l] = base[index[l]];
    return values;
#endif
}

/* f64(v) for every i64, rounded once, as kjit converts.  AVX2 has no
 * instruction for it: the high and low 32 bits become doubles exactly
 * (2^84 + 2^63 + hi 2^32 and 2^52 + lo, by their bits), and one addition
 * rounds their sum. */
static inline f64v f64_from_i64v(i64v v)
{
#if defined(__AVX2__) && !defined(__AVX512DQ__)
    typedef uint64_t u64v __attribute__((vector_size(VECTOR_BYTES)));
    i64v low = (v & 0xffffffff) | 0x4330000000000000;             /* 2^52 + lo */
    i64v high = (i64v)((u64v)v >> 32) ^ 0x4530000080000000;       /* 2^84 + 2^63 + hi 2^32 */
    const f64v bias = (f64v)((i64v){0} + 0x4530000080100000);     /* 2^84 + 2^63 + 2^52 */
    return ((f64v)high - bias) + (f64v)low;
#else
    return __builtin_convertvector(v, f64v);
#endif
}

static inline f64v iota_f64v(void)
{
    f64v v;
    for (int l = 0; l < LANES64; l++) v[l] = l;
    return v;
}

static inline f32v iota_f32v(void)
{
    f32v v;
    for (int l = 0; l < LANES32; l++) v[l] = (float)l;
    return v;
}

/* ------------------------------------------------------------ Mandelbrot, f64 */

/* mandelbrot.kern's mandel: z * z is (a a - b b) + (a b + a b) i, as kjit
 * lowers it. */
static int32_t mandel_point(double re, double im, int32_t max_iters)
{
    double zr = 0, zi = 0;
    for (int32_t i = 0; i < max_iters; i++) {
        double ab = zr * zi;
        double new_r = zr * zr - zi * zi + re;
        zi = (ab + ab) + im;
        zr = new_r;
        if (zr * zr + zi * zi >= 4) return i;
    }
    return max_iters;
}

SCALAR_C void mandel_scalar(double min_x, double max_x, double min_y, double max_y,
                            uint8_t *image, int64_t height, int64_t width, int32_t iters)
{
    double pixel_x = (max_x - min_x) / (double)width;
    double pixel_y = (max_y - min_y) / (double)height;
    for (int64_t x = 0; x < width; x++) {
        double re = min_x + (double)x * pixel_x;
        for (int64_t y = 0; y < height; y++)
            image[y * width + x] = (uint8_t)mandel_point(re, min_y + (double)y * pixel_y, iters);
    }
}

/* LANES64 pixels of a row at a time; a lane's count is the iteration it left
 * the disc at, and the loop ends when every lane has. */
void mandel_simd(double min_x, double max_x, double min_y, double max_y, uint8_t *image,
                 int64_t height, int64_t width, int32_t iters)
{
    double pixel_x = (max_x - min_x) / (double)width;
    double pixel_y = (max_y - min_y) / (double)height;
    const f64v iota = iota_f64v();
    for (int64_t y = 0; y < height; y++) {
        double im = min_y + (double)y * pixel_y;
        uint8_t *row = image + y * width;
        int64_t x = 0;
        for (; x + LANES64 <= width; x += LANES64) {
            f64v cr = min_x + (iota + (double)x) * pixel_x;
            f64v ci = (f64v){0} + im;
            f64v zr = {0}, zi = {0};
            i64v count = (i64v){0} + iters, alive = (i64v){0} - 1;
            for (int32_t i = 0; i < iters; i++) {
                f64v ab = zr * zi;
                f64v new_r = zr * zr - zi * zi + cr;
                zi = (ab + ab) + ci;
                zr = new_r;
                i64v escaped = (zr * zr + zi * zi >= 4.0) & alive;
                count = (escaped & i) | (~escaped & count);
                alive &= ~escaped;
                if (!any_lane64(alive)) break;
            }
            for (int l = 0; l < LANES64; l++) row[x + l] = (uint8_t)count[l];
        }
        for (; x < width; x++)
            row[x] = (uint8_t)mandel_point(min_x + (double)x * pixel_x, im, iters);
    }
}

/* ------------------------------------------------------------ escape time, f32 */

static int32_t escape_point(float re, float im, int32_t max_iters)
{
    float zr = 0, zi = 0;
    for (int32_t i = 0; i < max_iters; i++) {
        float ab = zr * zi;
        float new_r = zr * zr - zi * zi + re;
        zi = (ab + ab) + im;
        zr = new_r;
        if (zr * zr + zi * zi >= 4) return i;
    }
    return max_iters;
}

SCALAR_C void escape_scalar(const float *re, const float *im, int32_t max_iters, int32_t *out,
                            int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = escape_point(re[i], im[i], max_iters);
}

void escape_simd(const float *re, const float *im, int32_t max_iters, int32_t *out, int64_t n)
{
    int64_t e = 0;
    for (; e + LANES32 <= n; e += LANES32) {
        f32v cr, ci;
        memcpy(&cr, re + e, sizeof cr);
        memcpy(&ci, im + e, sizeof ci);
        f32v zr = {0}, zi = {0};
        i32v count = (i32v){0} + max_iters, alive = (i32v){0} - 1;
        for (int32_t i = 0; i < max_iters; i++) {
            f32v ab = zr * zi;
            f32v new_r = zr * zr - zi * zi + cr;
            zi = (ab + ab) + ci;
            zr = new_r;
            i32v escaped = (zr * zr + zi * zi >= 4.0f) & alive;
            count = (escaped & i) | (~escaped & count);
            alive &= ~escaped;
            if (!any_lane32(alive)) break;
        }
        memcpy(out + e, &count, sizeof count);
    }
    for (; e < n; e++) out[e] = escape_point(re[e], im[e], max_iters);
}

/* ------------------------------------------------------------ Collatz, i64 */

static int64_t collatz_value(int64_t n)
{
    int64_t steps = 0;
    while (n != 1) {
        n = n % 2 == 0 ? n / 2 : 3 * n + 1;
        steps++;
    }
    return steps;
}

SCALAR_C void collatz_scalar(const int64_t *in, int64_t *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = collatz_value(in[i]);
}

/* An even n halves exactly, so the shift is kjit's n / 2 for every n.  A lane
 * that has reached 1 goes on round 1, 4, 2, 1 with its count frozen, so that
 * the next n does not wait for a merge with the lanes still alive. */
void collatz_simd(const int64_t *in, int64_t *out, int64_t n)
{
    int64_t e = 0;
    for (; e + LANES64 <= n; e += LANES64) {
        i64v v, steps = {0};
        memcpy(&v, in + e, sizeof v);
        i64v alive = v != 1;
        while (any_lane64(alive)) {
            i64v odd = (v & 1) != 0;
            v = (odd & (v * 3 + 1)) | (~odd & (v >> 1));
            steps -= alive;
            alive &= v != 1;
        }
        memcpy(out + e, &steps, sizeof steps);
    }
    for (; e < n; e++) out[e] = collatz_value(in[e]);
}

/* ------------------------------------------------------------ delay-and-sum, f64 */

enum { DAS_CHANNELS = 128, DAS_SAMPLES = 2000 };

SCALAR_C void das_scalar(double *out, int64_t height, int64_t width, const int64_t *data)
{
    for (int64_t i = 0; i < width; i++)
        for (int64_t j = 0; j < height; j++) {
            double acc = 0.0;
            for (int64_t k = 0; k < DAS_CHANNELS; k++)
                for (int64_t n = 0; n < DAS_CHANNELS; n++) {
                    int64_t order = (int64_t)(((sqrt((double)(i * i + (j - k * 6) * (j - k * 6)))
                                                + sqrt((double)(i * i + (j - n * 6) * (j - n * 6))))
                                               * 0.05) / 1.54 * 30);
                    if (order < DAS_SAMPLES) acc += (double)data[k * DAS_SAMPLES + order];
                }
            out[j * width + i] = acc;
        }
}

/* LANES64 rows j (the kernel's threads) of a column i at a time.  The squared
 * distances are computed in f64: they are integers below 2^53, so they equal
 * kjit's i64 arithmetic converted.  kjit's i64(t) < 2000 is t < 2000 or NaN
 * (i64(NaN) is 0), and where that holds and the read is inside data, t is
 * above -2^31: its 32-bit truncation, NaN made 0 first, is kjit's order
 * (AVX2 cannot truncate to 64 bits).  Masked-off lanes gather 0 and add +0.0,
 * which leaves a sum of integers (never -0.0) as it is. */
void das_simd(double *out, int64_t height, int64_t width, const int64_t *data)
{
    const f64v iota = iota_f64v();
    for (int64_t i = 0; i < width; i++) {
        double i_squared = (double)(i * i);
        for (int64_t j0 = 0; j0 < height; j0 += LANES64) {
            f64v j = iota + (double)j0;
            i64v row_valid = j < (double)height;
            f64v acc = {0};
            for (int64_t k = 0; k < DAS_CHANNELS; k++) {
                f64v dk = j - (double)(k * 6);
                f64v path_k = sqrt_f64v(i_squared + dk * dk);
                for (int64_t n = 0; n < DAS_CHANNELS; n++) {
                    f64v dn = j - (double)(n * 6);
                    f64v path_n = sqrt_f64v(i_squared + dn * dn);
                    f64v t = ((path_k + path_n) * 0.05) / 1.54 * 30;
                    i64v in_range = ~(t >= DAS_SAMPLES) & row_valid;
                    t = (f64v)((i64v)t & (t == t));
                    i32h order = __builtin_convertvector(t, i32h);
                    i64v sample = gather_i64v(data, order + (int32_t)(k * DAS_SAMPLES), in_range);
                    acc += f64_from_i64v(sample);
                }
            }
            for (int l = 0; l < LANES64 && j0 + l < height; l++) out[(j0 + l) * width + i] = acc[l];
        }
    }
}

/* ------------------------------------------------------------ block sum, f32 */

enum { BLOCK = 256 };

SCALAR_C void block_sum_scalar(const float *x, int64_t n, float *sums)
{
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        float tile[BLOCK];
        for (int t = 0; t < BLOCK; t++) tile[t] = b * BLOCK + t < n ? x[b * BLOCK + t] : 0;
        for (int half = BLOCK / 2; half > 0; half /= 2)
            for (int t = 0; t < half; t++) tile[t] += tile[t + half];
        sums[b] = tile[0];
    }
}

/* The kernel's tree on a block held in BLOCK / LANES32 vectors: while the
 * half is a whole number of vectors, the upper vectors are added to the lower;
 * the last log2(LANES32) steps add the upper lanes of one vector to its lower
 * lanes.  Every element meets the same partner in the same order as in the
 * kernel, so the sums are the same bits. */
void block_sum_simd(const float *x, int64_t n, float *sums)
{
    enum { VECTORS = BLOCK / LANES32 };
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    const i32v lane = __builtin_convertvector(iota_f32v(), i32v);
    for (int64_t b = 0; b < blocks; b++) {
        f32v tile[VECTORS];
        if ((b + 1) * BLOCK <= n) {
            memcpy(tile, x + b * BLOCK, sizeof tile);
        } else {
            memset(tile, 0, sizeof tile);
            memcpy(tile, x + b * BLOCK, sizeof(float) * (size_t)(n - b * BLOCK));
        }
#pragma GCC unroll 16
        for (int half = VECTORS / 2; half > 0; half /= 2)
#pragma GCC unroll 64
            for (int t = 0; t < half; t++) tile[t] += tile[t + half];
        f32v sum = tile[0];
#pragma GCC unroll 16
        for (int half = LANES32 / 2; half > 0; half /= 2)
            sum += __builtin_shuffle(sum, lane + half);
        sums[b] = sum[0];
    }
}
