/*
 * test_complex.c: complex division and abs, on the cpu and parallel targets
 * (the cuda suite, test_cuda.c, runs the same checks through
 * kj_test_complex_on on a GPU).
 *
 * Over random operands whose magnitudes span most of each type's range (parts
 * of related and of unrelated sizes), the quotient of c64 and c128 division
 * (Smith's algorithm, through a vectorized function and a kernel) is compared
 * with the exact quotient computed in binary128; the error is normwise,
 * |q - exact| / |exact|, in units of the part type's epsilon (2^-24, 2^-53).
 * abs is compared with sqrt(a^2 + b^2) in long double, in ULP of the result,
 * up to the edge of overflow and into the subnormals.  Then the cases of
 * issue 16: (1e20+1e20j)/(1e20+1e20j) in c64 is 1, (1+1j)/(1e-25+1e-25j) is
 * 1e25, c128 past 1e154 works, and a 6th-order Butterworth response in c64 has
 * the analytic magnitude 1/sqrt(1 + (w/wc)^12) at every frequency.
 *
 * KJIT_COMPLEX_TABLE=1 prints the largest errors seen (docs/language.md
 * quotes them).
 */
#include <check.h>
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit.h"
#include "kjit_tools.h"
#include "fixture.h"

/* Largest errors allowed: division normwise in epsilons, abs in ULP.  Smith's
 * algorithm rounds 6 to 8 times on the way; the measured figures are well
 * under these (docs/language.md). */
#define DIV_BOUND 4.0
#define ABS_BOUND 2.0
/* libdevice's hypot is documented at up to 2 ULP (f64) and 3 ULP (f32). */
#define ABS_BOUND_CUDA 3.0

enum { COUNT = 200000 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double signed_power_of_ten(double lo, double hi)
{
    double m = pow(10.0, lo + (hi - lo) * uniform01());
    return uniform01() < 0.5 ? -m : m;
}

/* A random complex number of magnitude 10^[-e, e]: a third with parts of the
 * same size (uniform angle), a third with parts of unrelated sizes, a third
 * on or near an axis. */
static double complex random_complex(double e)
{
    double kind = uniform01();
    if (kind < 1.0 / 3) {
        double m = fabs(signed_power_of_ten(-e, e)), angle = 2 * M_PI * uniform01();
        return CMPLX(m * cos(angle), m * sin(angle));
    }
    if (kind < 2.0 / 3)
        return CMPLX(signed_power_of_ten(-e, e), signed_power_of_ten(-e, e));
    double m = signed_power_of_ten(-e, e), small = m * signed_power_of_ten(-12, -3);
    return uniform01() < 0.5 ? CMPLX(m, small) : CMPLX(small, m);
}

/* The exact quotient, to 113 bits: products of doubles are exact in
 * binary128, and its exponent range holds c^2 + d^2 for any double. */
static void exact_quotient(double complex x, double complex y, long double *re, long double *im)
{
    __float128 a = creal(x), b = cimag(x), c = creal(y), d = cimag(y);
    __float128 den = c * c + d * d;
    *re = (long double)((a * c + b * d) / den);
    *im = (long double)((b * c - a * d) / den);
}

static double normwise_error(double re, double im, long double want_re, long double want_im,
                             double epsilon)
{
    long double dr = (long double)re - want_re, di = (long double)im - want_im;
    long double size = sqrtl(want_re * want_re + want_im * want_im);
    if (size == 0)
        return re == 0 && im == 0 ? 0 : INFINITY;
    return (double)(sqrtl(dr * dr + di * di) / size / epsilon);
}

static double ulp_error(double got, long double want, bool is_f32)
{
    int exponent;
    frexpl(want, &exponent);
    long double ulp = ldexpl(1.0L, exponent - (is_f32 ? 24 : 53));
    long double smallest = is_f32 ? (long double)FLT_TRUE_MIN : (long double)DBL_TRUE_MIN;
    if (ulp < smallest)
        ulp = smallest;
    return (double)(fabsl((long double)got - want) / ulp);
}

static const char complex_source[] =
    "@vectorize(c64(c64, c64), c128(c128, c128))\n"
    "fn cdiv(x, y) { return x / y; }\n"
    "@vectorize(f32(c64), f64(c128))\n"
    "fn cabs(z) { return abs(z); }\n"
    "@kernel\n"
    "fn cdiv_kernel(x: c128[], y: c128[], out: c128[]) {\n"
    "    let i = grid(1);\n"
    "    if i < len(x) { out[i] = x[i] / y[i]; }\n"
    "}\n"
    "// |H(jw)| of a 6th-order Butterworth low-pass filter with cut-off wc,\n"
    "// from its poles, in c64: the denominator reaches wc^6 ~ 6e22.\n"
    "@vectorize\n"
    "fn butter6(w: f32, wc: f32) -> f32 {\n"
    "    let s = complex(f32(0), w);\n"
    "    let den: c64 = 1;\n"
    "    for k in range(1, 7) {\n"
    "        let theta = pi * f32(2 * k + 5) / 12.0;\n"
    "        den = den * (s - complex(wc * cos(theta), wc * sin(theta)));\n"
    "    }\n"
    "    return abs(complex(wc ** 6, f32(0)) / den);\n"
    "}\n";

/* out = name(inputs...) elementwise over n elements of the given dtypes. */
static void call(Fixture *f, const char *name, int nin, void **inputs, kjit_dtype in_dtype,
                 void *out, kjit_dtype out_dtype, int64_t n)
{
    kjit_array arrays[2];
    kjit_arg args[2];
    for (int i = 0; i < nin; i++) {
        arrays[i] = kjit_array_make(inputs[i], in_dtype, 1, &n);
        args[i] = kjit_arg_array(&arrays[i]);
    }
    kjit_array result = kjit_array_make(out, out_dtype, 1, &n);
    ck_assert_msg(kjit_call(fixture_fn(f, name), args, nin, &result, NULL) == KJIT_OK,
                  "%s on %s: %s", name, kjit_target_name(f->target), kjit_last_error(f->context));
}

static bool print_table(void)
{
    const char *env = getenv("KJIT_COMPLEX_TABLE");
    return env && *env && strcmp(env, "0") != 0;
}

/* Random c64 and c128 quotients, through the vectorized function (and, for
 * c128, a kernel, whose code is not vectorised). */
static void division_is_accurate(Fixture *f)
{
    double *x = malloc(COUNT * 2 * sizeof(double)), *y = malloc(COUNT * 2 * sizeof(double));
    double *q = malloc(COUNT * 2 * sizeof(double)), *q_kernel = malloc(COUNT * 2 * sizeof(double));
    float *x32 = malloc(COUNT * 2 * sizeof(float)), *y32 = malloc(COUNT * 2 * sizeof(float));
    float *q32 = malloc(COUNT * 2 * sizeof(float));
    /* c128: magnitudes 1e-150 .. 1e150, quotients within the range. */
    for (int i = 0; i < COUNT; i++) {
        double complex a = random_complex(150), b = random_complex(150);
        x[2 * i] = creal(a), x[2 * i + 1] = cimag(a);
        y[2 * i] = creal(b), y[2 * i + 1] = cimag(b);
    }
    /* c64: magnitudes 1e-15 .. 1e15, rounded to f32 first. */
    for (int i = 0; i < COUNT; i++) {
        double complex a = random_complex(15), b = random_complex(15);
        x32[2 * i] = (float)creal(a), x32[2 * i + 1] = (float)cimag(a);
        y32[2 * i] = (float)creal(b), y32[2 * i + 1] = (float)cimag(b);
    }
    call(f, "cdiv", 2, (void *[]){x, y}, KJIT_C128, q, KJIT_C128, COUNT);
    call(f, "cdiv", 2, (void *[]){x32, y32}, KJIT_C64, q32, KJIT_C64, COUNT);
    int64_t n = COUNT;
    kjit_array X = kjit_array_make(x, KJIT_C128, 1, &n), Y = kjit_array_make(y, KJIT_C128, 1, &n);
    kjit_array Q = kjit_array_make(q_kernel, KJIT_C128, 1, &n);
    kjit_arg args[3] = {kjit_arg_array(&X), kjit_arg_array(&Y), kjit_arg_array(&Q)};
    uint32_t grid[3] = {(COUNT + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    ck_assert_msg(kjit_launch(fixture_fn(f, "cdiv_kernel"), grid, block, args, 3, NULL) == KJIT_OK,
                  "%s", kjit_last_error(f->context));
    ck_assert_int_eq(kjit_synchronize(f->context), KJIT_OK);

    double worst128 = 0, worst_kernel = 0, worst64 = 0;
    for (int i = 0; i < COUNT; i++) {
        long double re, im;
        exact_quotient(CMPLX(x[2 * i], x[2 * i + 1]), CMPLX(y[2 * i], y[2 * i + 1]), &re, &im);
        double e = normwise_error(q[2 * i], q[2 * i + 1], re, im, DBL_EPSILON);
        double ek = normwise_error(q_kernel[2 * i], q_kernel[2 * i + 1], re, im, DBL_EPSILON);
        ck_assert_msg(e <= DIV_BOUND && ek <= DIV_BOUND,
                      "c128 (%.17g%+.17gj)/(%.17g%+.17gj) on %s: %.17g%+.17gj (kernel "
                      "%.17g%+.17gj), exact %.17Lg%+.17Lgj: %.2f / %.2f eps",
                      x[2 * i], x[2 * i + 1], y[2 * i], y[2 * i + 1], kjit_target_name(f->target),
                      q[2 * i], q[2 * i + 1], q_kernel[2 * i], q_kernel[2 * i + 1], re, im, e, ek);
        worst128 = e > worst128 ? e : worst128;
        worst_kernel = ek > worst_kernel ? ek : worst_kernel;

        exact_quotient(CMPLX(x32[2 * i], x32[2 * i + 1]), CMPLX(y32[2 * i], y32[2 * i + 1]), &re,
                       &im);
        e = normwise_error(q32[2 * i], q32[2 * i + 1], re, im, FLT_EPSILON);
        ck_assert_msg(e <= DIV_BOUND,
                      "c64 (%.9g%+.9gj)/(%.9g%+.9gj) on %s: %.9g%+.9gj, exact %.9Lg%+.9Lgj: %.2f eps",
                      x32[2 * i], x32[2 * i + 1], y32[2 * i], y32[2 * i + 1],
                      kjit_target_name(f->target), q32[2 * i], q32[2 * i + 1], re, im, e);
        worst64 = e > worst64 ? e : worst64;
    }
    if (print_table())
        printf("complex division on %s: c128 %.2f eps (kernel %.2f), c64 %.2f eps, normwise\n",
               kjit_target_name(f->target), worst128, worst_kernel, worst64);
    free(x), free(y), free(q), free(q_kernel), free(x32), free(y32), free(q32);
}

/* abs over magnitudes from the subnormals to the edge of overflow. */
static void abs_is_accurate(Fixture *f)
{
    double *z = malloc(COUNT * 2 * sizeof(double)), *r = malloc(COUNT * sizeof(double));
    float *z32 = malloc(COUNT * 2 * sizeof(float)), *r32 = malloc(COUNT * sizeof(float));
    for (int i = 0; i < COUNT; i++) {
        /* |z| up to 1e308 (the largest double is 1.8e308) and 3e38 in f32 */
        double complex a = random_complex(1);
        double scale = pow(10.0, -310 + 617.9 * uniform01());
        double scale32 = pow(10.0, -40 + 78.4 * uniform01());
        double m = cabs(a);
        z[2 * i] = creal(a) / m * scale, z[2 * i + 1] = cimag(a) / m * scale;
        z32[2 * i] = (float)(creal(a) / m * scale32), z32[2 * i + 1] = (float)(cimag(a) / m * scale32);
    }
    call(f, "cabs", 1, (void *[]){z}, KJIT_C128, r, KJIT_F64, COUNT);
    call(f, "cabs", 1, (void *[]){z32}, KJIT_C64, r32, KJIT_F32, COUNT);
    double bound = f->target == KJIT_TARGET_CUDA ? ABS_BOUND_CUDA : ABS_BOUND;
    double worst = 0, worst32 = 0;
    for (int i = 0; i < COUNT; i++) {
        long double a = z[2 * i], b = z[2 * i + 1];
        long double want = sqrtl(a * a + b * b);
        double e = ulp_error(r[i], want, false);
        ck_assert_msg(e <= bound, "abs(%.17g%+.17gj) on %s: %.17g, want %.17Lg (%.2f ULP)", z[2 * i],
                      z[2 * i + 1], kjit_target_name(f->target), r[i], want, e);
        worst = e > worst ? e : worst;
        a = z32[2 * i], b = z32[2 * i + 1];
        want = sqrtl(a * a + b * b);
        if (want > FLT_MAX)
            continue; /* rounds to infinity or to FLT_MAX: either is right */
        e = ulp_error(r32[i], want, true);
        ck_assert_msg(e <= bound, "abs(%.9g%+.9gj) on %s: %.9g, want %.9Lg (%.2f ULP)", z32[2 * i],
                      z32[2 * i + 1], kjit_target_name(f->target), r32[i], want, e);
        worst32 = e > worst32 ? e : worst32;
    }
    if (print_table())
        printf("complex abs on %s: c128 %.2f ULP, c64 %.2f ULP\n", kjit_target_name(f->target),
               worst, worst32);
    free(z), free(r), free(z32), free(r32);
}

/* The cases of issue 16, where the textbook formula gave NaN or infinity. */
static void large_and_small_quotients(Fixture *f)
{
    float x32[] = {1e20f, 1e20f, 1, 1, 3e37f, -2e37f, 1e-30f, 1e-30f};
    float y32[] = {1e20f, 1e20f, 1e-25f, 1e-25f, 1e37f, 1e37f, 1e30f, -1e30f};
    double want32[][2] = {{1, 0}, {1e25, 0}, {0.5, -2.5}, {0, 1e-60}};
    float q32[8];
    call(f, "cdiv", 2, (void *[]){x32, y32}, KJIT_C64, q32, KJIT_C64, 4);
    for (int i = 0; i < 4; i++) {
        /* 1e-60 underflows to 0 in f32: compare normwise with an absolute floor */
        double size = hypot(want32[i][0], want32[i][1]);
        double err = hypot(q32[2 * i] - want32[i][0], q32[2 * i + 1] - want32[i][1]);
        ck_assert_msg(err <= 4 * FLT_EPSILON * size + FLT_MIN,
                      "c64 quotient %d on %s: %.9g%+.9gj, want %.9g%+.9gj", i,
                      kjit_target_name(f->target), q32[2 * i], q32[2 * i + 1], want32[i][0],
                      want32[i][1]);
    }
    double x[] = {1e300, 1e300, 1, 1, 1e200, 2e200, 0, 1e200, 1e155, -1e155};
    double y[] = {1e300, 1e300, 1e-300, 1e-300, 3e200, 4e200, 1e-200, 1e200, 1e-155, 1e-155};
    double want[][2] = {{1, 0}, {1e300, 0}, {0.44, 0.08}, {1, 0}};
    double q[10];
    call(f, "cdiv", 2, (void *[]){x, y}, KJIT_C128, q, KJIT_C128, 5);
    for (int i = 0; i < 4; i++) {
        double size = hypot(want[i][0], want[i][1]);
        double err = hypot(q[2 * i] - want[i][0], q[2 * i + 1] - want[i][1]);
        ck_assert_msg(err <= 4 * DBL_EPSILON * size, "c128 quotient %d on %s: %.17g%+.17gj", i,
                      kjit_target_name(f->target), q[2 * i], q[2 * i + 1]);
    }
    /* (1e155 - 1e155j)/(1e-155 + 1e-155j) = -1e310j: past the range, an
     * infinite imaginary part and a zero real part, never NaN. */
    ck_assert_msg(q[8] == 0 && isinf(q[9]) && q[9] < 0, "c128 quotient 4 on %s: %g%+gj",
                  kjit_target_name(f->target), q[8], q[9]);
    /* A zero divisor gives infinities (NaN for 0/0), as NumPy does. */
    double zx[] = {1, -2, 0, 0}, zy[] = {0, 0, 0, 0}, zq[4];
    call(f, "cdiv", 2, (void *[]){zx, zy}, KJIT_C128, zq, KJIT_C128, 2);
    ck_assert_msg(isinf(zq[0]) && zq[0] > 0 && isinf(zq[1]) && zq[1] < 0 && isnan(zq[2]) &&
                      isnan(zq[3]), "division by zero on %s: %g%+gj, %g%+gj",
                  kjit_target_name(f->target), zq[0], zq[1], zq[2], zq[3]);
}

/* 1/sqrt(1 + (w/wc)^12), for w from 10 to 1e5 rad/s around wc = 2 pi 1000:
 * the textbook division gave NaN at every frequency. */
static void butterworth_response(Fixture *f)
{
    enum { N = 1000 };
    float w[N], wc[N], h[N];
    for (int i = 0; i < N; i++) {
        w[i] = (float)pow(10.0, 1.0 + 4.0 * i / (N - 1));
        wc[i] = (float)(2 * M_PI * 1000);
    }
    call(f, "butter6", 2, (void *[]){w, wc}, KJIT_F32, h, KJIT_F32, N);
    for (int i = 0; i < N; i++) {
        double want = 1 / sqrt(1 + pow((double)w[i] / (double)wc[i], 12));
        /* six f32 products, sines and cosines of the poles: 1e-5 relative */
        ck_assert_msg(fabs(h[i] - want) <= 1e-5 * want, "|H(%g j)| on %s: %.9g, want %.9g", w[i],
                      kjit_target_name(f->target), h[i], want);
    }
}

void kj_test_complex_on(kjit_target target);

/* Every check on one target; test_cuda.c calls it for cuda. */
void kj_test_complex_on(kjit_target target)
{
    Fixture f = fixture_open(target, "complex.kern", complex_source);
    large_and_small_quotients(&f);
    butterworth_response(&f);
    division_is_accurate(&f);
    abs_is_accurate(&f);
    fixture_close(&f);
}

START_TEST(complex_division_and_abs_cpu)
{
    kj_test_complex_on(KJIT_TARGET_CPU);
}
END_TEST

START_TEST(complex_division_and_abs_parallel)
{
    kj_test_complex_on(KJIT_TARGET_PARALLEL);
}
END_TEST

/*
 * z ** n for a constant n from -8 to 8 is multiplications (docs/language.md,
 * "Powers") whatever the base is: a base too big to copy into a chain of
 * products (64 IR nodes over the power), or not pure, went to the complex
 * pow, exp(n log z), which is less
 * accurate and calls libm, whose routine (and so whose last bits) follows
 * the host's vector ISA: the campaign's seeds 552, 1619, 1877 and 910049
 * differed between SSE, AVX2 and AVX-512 there.  The power of such a base
 * must give the bits of the power of a variable, in c64 and c128, on SIMD
 * lanes and in scalar code; and in f64 too, whose IPOW multiplied x^6 as
 * x^2 x^4 where the variable's chain is x^3 x^3.
 */
START_TEST(integer_power_of_a_load_is_multiplications)
{
    /* J and K index a with more than 20 IR nodes each: a base of two loads is
     * too big to copy into a chain of products (64 nodes at most) */
#define J "a[((i * 7 + 3) ^ (i >> 1) ^ (i * 5) ^ (i + 11)) % len(a)]"
#define K "a[((i * 3 + 1) ^ (i >> 2) ^ (i * 9) ^ (i + 5)) % len(a)]"
#define JB "b[((i * 7 + 3) ^ (i >> 1) ^ (i * 5) ^ (i + 11)) % len(b)]"
#define KB "b[((i * 3 + 1) ^ (i >> 2) ^ (i * 9) ^ (i + 5)) % len(b)]"
    static const char source[] =
        "@kernel\nfn powers(a: c64[], b: c128[], p: c64[], q: c64[], r: c128[], s: c128[], u: f64[], v: f64[]) {\n"
        "    let i = i64(blockIdx.x) * i64(blockDim.x) + i64(threadIdx.x);\n"
        "    if i < len(a) {\n"
        "        p[3 * i] = (" J " + " K ") ** 3; p[3 * i + 1] = (" J " * " K ") ** -2;\n"
        "        p[3 * i + 2] = " J " ** 7;\n"
        "        let z = " J " + " K "; let z1 = " J " * " K "; let z2 = " J ";\n"
        "        q[3 * i] = z ** 3; q[3 * i + 1] = z1 ** -2; q[3 * i + 2] = z2 ** 7;\n"
        "        r[2 * i] = (" JB " - " KB ") ** 3; r[2 * i + 1] = " KB " ** 5;\n"
        "        let w = " JB " - " KB "; let w2 = " KB ";\n"
        "        s[2 * i] = w ** 3; s[2 * i + 1] = w2 ** 5;\n"
        "        u[2 * i] = (" JB ".real + " KB ".imag) ** 6; u[2 * i + 1] = " JB ".imag ** -7;\n"
        "        let f = " JB ".real + " KB ".imag; let f1 = " JB ".imag;\n"
        "        v[2 * i] = f ** 6; v[2 * i + 1] = f1 ** -7;\n"
        "    }\n"
        "}\n";
#undef J
#undef K
#undef JB
#undef KB
    enum { N = 509 };
    static float complex a[N], p[3 * N], q[3 * N];
    static double complex b[N], r[2 * N], s[2 * N];
    static double u[2 * N], v[2 * N];
    for (int i = 0; i < N; i++) {
        double complex z = random_complex(3);
        a[i] = (float complex)z;
        b[i] = z;
    }
    for (int simd = 0; simd < 2; simd++) {
        kjit_options options;
        kjit_options_init(&options);
        options.cpu_simd = simd;
        kjit_context *context;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "powers.kern", source, &module) == KJIT_OK, "%s",
                      kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, "powers", &fn), KJIT_OK);
        int64_t n = N, n3 = 3 * N, n2 = 2 * N;
        kjit_array A = kjit_array_make(a, KJIT_C64, 1, &n), B = kjit_array_make(b, KJIT_C128, 1, &n);
        kjit_array P = kjit_array_make(p, KJIT_C64, 1, &n3), Q = kjit_array_make(q, KJIT_C64, 1, &n3);
        kjit_array R = kjit_array_make(r, KJIT_C128, 1, &n2), S = kjit_array_make(s, KJIT_C128, 1, &n2);
        kjit_array U = kjit_array_make(u, KJIT_F64, 1, &n2), V = kjit_array_make(v, KJIT_F64, 1, &n2);
        kjit_arg args[8] = {kjit_arg_array(&A), kjit_arg_array(&B), kjit_arg_array(&P), kjit_arg_array(&Q),
                            kjit_arg_array(&R), kjit_arg_array(&S), kjit_arg_array(&U), kjit_arg_array(&V)};
        uint32_t grid[3] = {(N + 63) / 64, 1, 1}, block[3] = {64, 1, 1};
        ck_assert_msg(kjit_launch(fn, grid, block, args, 8, NULL) == KJIT_OK, "%s", kjit_last_error(context));
        ck_assert_int_eq(kjit_synchronize(context), KJIT_OK);
        for (int i = 0; i < 3 * N; i++)
            ck_assert_msg(memcmp(&p[i], &q[i], sizeof p[i]) == 0,
                          "c64 power %d of element %d, simd %d: %a%+ai against %a%+ai", i % 3, i / 3, simd,
                          crealf(p[i]), cimagf(p[i]), crealf(q[i]), cimagf(q[i]));
        for (int i = 0; i < 2 * N; i++)
            ck_assert_msg(memcmp(&r[i], &s[i], sizeof r[i]) == 0,
                          "c128 power %d of element %d, simd %d: %a%+ai against %a%+ai", i % 2, i / 2, simd,
                          creal(r[i]), cimag(r[i]), creal(s[i]), cimag(s[i]));
        for (int i = 0; i < 2 * N; i++)
            ck_assert_msg(memcmp(&u[i], &v[i], sizeof u[i]) == 0, "f64 power %d of element %d, simd %d: %a against %a",
                          i % 2, i / 2, simd, u[i], v[i]);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
    /* and no pow in the checked IR */
    char path[] = "/tmp/kjit_powers_XXXXXX.kern";
    fixture_temp_file(path, 5, source);
    kjit_stage_options stage;
    kjit_stage_options_init(&stage);
    char *ir = NULL, *error = NULL;
    size_t size = 0;
    kjit_status status = kjit_stage_file(path, KJIT_STAGE_IR, &stage, &ir, &size, &error);
    unlink(path);
    ck_assert_msg(status == KJIT_OK, "%s", error ? error : "?");
    ck_assert_msg(strstr(ir, "math.pow") == NULL, "a constant integer power went to pow:\n%s", ir);
    free(ir);
}
END_TEST

Suite *suite_complex(void)
{
    Suite *suite = suite_create("complex");
    TCase *tcase = tcase_create("complex");
    tcase_set_timeout(tcase, 120);
    tcase_add_test(tcase, complex_division_and_abs_cpu);
    tcase_add_test(tcase, complex_division_and_abs_parallel);
    tcase_add_test(tcase, integer_power_of_a_load_is_multiplications);
    suite_add_tcase(suite, tcase);
    return suite;
}
