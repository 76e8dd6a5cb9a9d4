/*
 * test_math.c: the accuracy of the math built-ins on the cpu target.
 *
 * Every built-in, in f32 and in f64, is compiled as a @vectorize function and
 * run through its contiguous vectorized kernel (so loops take the SIMD path,
 * glibc's libmvec where it has the function) over random inputs from a domain
 * chosen per function.  The results are compared with the long double libm;
 * the error is measured in units in the last place (ULP) of the result type,
 * and the largest must stay under the bound stated in the table below.  The
 * table docs/language.md shows ("Accuracy of the math functions") is what this
 * test prints when KJIT_MATH_TABLE is set.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

static uint64_t rng_state = 0x243f6a8885a308d3ULL;
static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

typedef long double (*Ref1)(long double);
typedef long double (*Ref2)(long double, long double);

typedef struct Domain {
    double lo, hi;
    bool log_scale; /* positive range sampled uniformly in log(x) */
} Domain;

typedef struct MathCase {
    const char *name;
    int arity;
    Ref1 ref1;
    Ref2 ref2;
    Domain x64, y64, x32, y32; /* the second operand's domains for arity 2 and 3 */
    double bound64, bound32;   /* largest error allowed, in ULP */
} MathCase;

static long double fma_unused(long double x) { return x; }

/* Bounds: 4 ULP where the vector or scalar glibc routine is documented at up
 * to 4 ULP (libmvec's erff reaches 4.0 exactly, so it gets 5); exact functions
 * 0 (sqrt and fma: correctly rounded, 0.5); tgamma as glibc states it. */
static const MathCase cases[] = {
    {"sqrt", 1, sqrtl, NULL, {1e-300, 1e300, true}, {0}, {1e-30, 1e30, true}, {0}, 0.5, 0.5},
    {"cbrt", 1, cbrtl, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 4, 4},
    {"exp", 1, expl, NULL, {-700, 700, false}, {0}, {-87, 88, false}, {0}, 4, 4},
    {"exp2", 1, exp2l, NULL, {-1000, 1000, false}, {0}, {-125, 127, false}, {0}, 4, 4},
    {"expm1", 1, expm1l, NULL, {-40, 700, false}, {0}, {-20, 88, false}, {0}, 4, 4},
    {"log", 1, logl, NULL, {1e-300, 1e300, true}, {0}, {1e-30, 1e30, true}, {0}, 4, 4},
    {"log2", 1, log2l, NULL, {1e-300, 1e300, true}, {0}, {1e-30, 1e30, true}, {0}, 4, 4},
    {"log10", 1, log10l, NULL, {1e-300, 1e300, true}, {0}, {1e-30, 1e30, true}, {0}, 4, 4},
    {"log1p", 1, log1pl, NULL, {-0.9, 10, false}, {0}, {-0.9, 10, false}, {0}, 4, 4},
    {"sin", 1, sinl, NULL, {-1000, 1000, false}, {0}, {-1000, 1000, false}, {0}, 4, 4},
    {"cos", 1, cosl, NULL, {-1000, 1000, false}, {0}, {-1000, 1000, false}, {0}, 4, 4},
    {"tan", 1, tanl, NULL, {-1000, 1000, false}, {0}, {-1000, 1000, false}, {0}, 4, 4},
    {"asin", 1, asinl, NULL, {-1, 1, false}, {0}, {-1, 1, false}, {0}, 4, 4},
    {"acos", 1, acosl, NULL, {-1, 1, false}, {0}, {-1, 1, false}, {0}, 4, 4},
    {"atan", 1, atanl, NULL, {-50, 50, false}, {0}, {-50, 50, false}, {0}, 4, 4},
    {"atan2", 2, NULL, atan2l, {-10, 10, false}, {-10, 10, false}, {-10, 10, false}, {-10, 10, false}, 4, 4},
    {"sinh", 1, sinhl, NULL, {-700, 700, false}, {0}, {-88, 88, false}, {0}, 4, 4},
    {"cosh", 1, coshl, NULL, {-700, 700, false}, {0}, {-88, 88, false}, {0}, 4, 4},
    {"tanh", 1, tanhl, NULL, {-20, 20, false}, {0}, {-20, 20, false}, {0}, 4, 4},
    {"asinh", 1, asinhl, NULL, {-1e5, 1e5, false}, {0}, {-1e5, 1e5, false}, {0}, 4, 4},
    {"acosh", 1, acoshl, NULL, {1, 1e5, true}, {0}, {1, 1e5, true}, {0}, 4, 4},
    {"atanh", 1, atanhl, NULL, {-0.999, 0.999, false}, {0}, {-0.999, 0.999, false}, {0}, 4, 4},
    {"pow", 2, NULL, powl, {0.01, 100, true}, {-20, 20, false}, {0.1, 10, true}, {-20, 20, false}, 4, 4},
    {"hypot", 2, NULL, hypotl, {-1e3, 1e3, false}, {-1e3, 1e3, false}, {-1e3, 1e3, false}, {-1e3, 1e3, false}, 4, 4},
    {"floor", 1, floorl, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 0, 0},
    {"ceil", 1, ceill, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 0, 0},
    {"trunc", 1, truncl, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 0, 0},
    {"round", 1, roundl, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 0, 0},
    {"abs", 1, fabsl, NULL, {-1e6, 1e6, false}, {0}, {-1e6, 1e6, false}, {0}, 0, 0},
    {"min", 2, NULL, fminl, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, 0, 0},
    {"max", 2, NULL, fmaxl, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, 0, 0},
    {"fma", 3, fma_unused, NULL, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, 0.5, 0.5},
    {"erf", 1, erfl, NULL, {-6, 6, false}, {0}, {-6, 6, false}, {0}, 4, 5},
    {"erfc", 1, erfcl, NULL, {-6, 26, false}, {0}, {-6, 9, false}, {0}, 4, 4},
    {"lgamma", 1, lgammal, NULL, {3, 1000, false}, {0}, {3, 1000, false}, {0}, 4, 4},
    {"tgamma", 1, tgammal, NULL, {0.5, 170, false}, {0}, {0.5, 34, false}, {0}, 10, 8},
    {"copysign", 2, NULL, copysignl, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, {-100, 100, false}, 0, 0},
    {"fmod", 2, NULL, fmodl, {-1e4, 1e4, false}, {0.1, 100, false}, {-1e4, 1e4, false}, {0.1, 100, false}, 0, 0},
};
enum { CASE_COUNT = sizeof cases / sizeof cases[0], N = 20000 };

static double sample(Domain d)
{
    if (d.log_scale)
        return exp(log(d.lo) + (log(d.hi) - log(d.lo)) * uniform01());
    return d.lo + (d.hi - d.lo) * uniform01();
}

/* |got - want| in ULPs of the result type at want (subnormal spacing below
 * the smallest normal). */
static double ulp_error(long double got, long double want, bool f32)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got))
        return got == want ? 0 : INFINITY;
    if (want == 0)
        return got == 0 ? 0 : INFINITY;
    int e;
    frexpl(want, &e);
    int digits = f32 ? FLT_MANT_DIG : DBL_MANT_DIG, min_exp = f32 ? FLT_MIN_EXP : DBL_MIN_EXP;
    if (e < min_exp)
        e = min_exp;
    return (double)(fabsl(got - want) / ldexpl(1.0L, e - digits));
}

static char diagnostics[4096];
static void collect(void *user, KjSeverity severity, const char *text)
{
    size_t len = strlen(diagnostics);
    snprintf(diagnostics + len, sizeof diagnostics - len, "%s", text);
}

typedef struct Measured {
    double ulp[2]; /* f64, f32 */
    double worst_input[2];
} Measured;

static void measure_all(Measured *out)
{
    /* One module holds every function in both types. */
    KjBuf src = {0};
    for (int c = 0; c < CASE_COUNT; c++) {
        const MathCase *m = &cases[c];
        for (int f32 = 0; f32 < 2; f32++) {
            const char *t = f32 ? "f32" : "f64";
            const char *params = m->arity == 1 ? "x: %s" : m->arity == 2 ? "x: %s, y: %s" : "x: %s, y: %s, z: %s";
            const char *call = m->arity == 1 ? "x" : m->arity == 2 ? "x, y" : "x, y, z";
            kj_buf_printf(&src, "@vectorize\nfn m_%s_%s(", m->name, t);
            kj_buf_printf(&src, params, t, t, t);
            kj_buf_printf(&src, ") -> %s { return %s(%s); }\n", t, m->name, call);
        }
    }
    KjArena arena = {0};
    KjDiag diag = {collect, NULL, 0, 0};
    const char *no_stdlib[] = {NULL};
    KjIrModule *module = kj_compile_source(&arena, kj_source_from_string(&arena, "math.kern", src.data),
                                           no_stdlib, &diag);
    ck_assert_msg(module != NULL, "the math module does not compile:\n%s", diagnostics);
    KjIrFunction *kernels[2 * CASE_COUNT];
    for (int c = 0; c < 2 * CASE_COUNT; c++) {
        KjIrEntry *entry = module->entries.items[c];
        kernels[c] = kj_vectorize(module, entry->variants.items[0], (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    }
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, false};
    char *error = NULL;
    KjCpuCode *code = kj_cpu_compile(module, kernels, 2 * CASE_COUNT, &options, &error);
    ck_assert_msg(code != NULL, "kj_cpu_compile: %s", error ? error : "?");

    double *in64[3], *out64 = malloc(sizeof(double) * N);
    float *in32[3], *out32 = malloc(sizeof(float) * N);
    for (int k = 0; k < 3; k++) {
        in64[k] = malloc(sizeof(double) * N);
        in32[k] = malloc(sizeof(float) * N);
    }
    for (int c = 0; c < CASE_COUNT; c++) {
        const MathCase *m = &cases[c];
        for (int f32 = 0; f32 < 2; f32++) {
            KjIrFunction *k = kernels[2 * c + f32];
            char name[128];
            snprintf(name, sizeof name, "%s__range", k->symbol);
            KjRangeFn run = (KjRangeFn)kj_cpu_lookup(code, name);
            ck_assert_msg(run != NULL, "no %s", name);
            Domain dx = f32 ? m->x32 : m->x64, dy = f32 ? m->y32 : m->y64;
            for (int i = 0; i < N; i++)
                for (int a = 0; a < m->arity; a++) {
                    double v = sample(a == 0 ? dx : dy);
                    in64[a][i] = v;
                    in32[a][i] = (float)v;
                }
            KjArrayDesc descs[4];
            void *args[4];
            for (int a = 0; a <= m->arity; a++) {
                void *data = a == m->arity ? (f32 ? (void *)out32 : (void *)out64)
                                           : (f32 ? (void *)in32[a] : (void *)in64[a]);
                descs[a] = (KjArrayDesc){data, {N}, {1}};
                args[a] = &descs[a];
            }
            run(args, 0, N);
            double worst = 0, worst_x = 0;
            for (int i = 0; i < N; i++) {
                long double x = f32 ? in32[0][i] : in64[0][i];
                long double y = m->arity > 1 ? (f32 ? in32[1][i] : in64[1][i]) : 0;
                long double want;
                if (m->arity == 3) /* fma's reference must round once, to the result type */
                    want = f32 ? fmaf(in32[0][i], in32[1][i], in32[2][i]) : fma(in64[0][i], in64[1][i], in64[2][i]);
                else
                    want = m->arity == 1 ? m->ref1(x) : m->ref2(x, y);
                long double got = f32 ? out32[i] : out64[i];
                double err = ulp_error(got, want, f32);
                if (err > worst) {
                    worst = err;
                    worst_x = (double)x;
                }
            }
            out[c].ulp[f32] = worst;
            out[c].worst_input[f32] = worst_x;
        }
    }
    for (int k = 0; k < 3; k++) {
        free(in64[k]);
        free(in32[k]);
    }
    free(out64);
    free(out32);
    kj_cpu_code_free(code);
    kj_arena_free(&arena);
    kj_buf_free(&src);
}

START_TEST(math_functions_within_stated_ulps)
{
    Measured measured[CASE_COUNT];
    measure_all(measured);
    if (getenv("KJIT_MATH_TABLE")) {
        fprintf(stderr, "| function | domain (f64) | max ULP f64 | domain (f32) | max ULP f32 |\n");
        fprintf(stderr, "| --- | --- | --- | --- | --- |\n");
        for (int c = 0; c < CASE_COUNT; c++)
            fprintf(stderr, "| %s | [%g, %g] | %.2f | [%g, %g] | %.2f |\n", cases[c].name, cases[c].x64.lo,
                    cases[c].x64.hi, measured[c].ulp[0], cases[c].x32.lo, cases[c].x32.hi, measured[c].ulp[1]);
    }
    for (int c = 0; c < CASE_COUNT; c++) {
        ck_assert_msg(measured[c].ulp[0] <= cases[c].bound64, "%s f64: %.2f ULP at x = %.17g (bound %g)",
                      cases[c].name, measured[c].ulp[0], measured[c].worst_input[0], cases[c].bound64);
        ck_assert_msg(measured[c].ulp[1] <= cases[c].bound32, "%s f32: %.2f ULP at x = %.9g (bound %g)",
                      cases[c].name, measured[c].ulp[1], measured[c].worst_input[1], cases[c].bound32);
    }
}
END_TEST

/* isnan, isinf, isfinite on the values that tell them apart. */
START_TEST(classification_functions)
{
    KjArena arena = {0};
    KjDiag diag = {collect, NULL, 0, 0};
    const char *no_stdlib[] = {NULL};
    KjIrModule *module = kj_compile_source(
        &arena,
        kj_source_from_string(&arena, "cls.kern",
                              "fn cls(x: f64) -> i64 {\n"
                              "    return (isnan(x) ? 1 : 0) + (isinf(x) ? 2 : 0) + (isfinite(x) ? 4 : 0);\n"
                              "}\n"
                              "fn cls32(x: f32) -> i64 {\n"
                              "    return (isnan(x) ? 1 : 0) + (isinf(x) ? 2 : 0) + (isfinite(x) ? 4 : 0);\n"
                              "}\n"),
        no_stdlib, &diag);
    ck_assert_msg(module != NULL, "%s", diagnostics);
    KjIrFunction *roots[2] = {((KjIrEntry *)module->entries.items[0])->variants.items[0],
                              ((KjIrEntry *)module->entries.items[1])->variants.items[0]};
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    char *error = NULL;
    KjCpuCode *code = kj_cpu_compile(module, roots, 2, &options, &error);
    ck_assert_msg(code != NULL, "%s", error ? error : "?");
    KjEntryFn cls = (KjEntryFn)kj_cpu_lookup(code, "cls__entry");
    KjEntryFn cls32 = (KjEntryFn)kj_cpu_lookup(code, "cls32__entry");
    ck_assert(cls && cls32);
    double values[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -1.5, DBL_MAX, DBL_TRUE_MIN};
    for (int i = 0; i < 8; i++) {
        int64_t r, r32;
        float f = (float)values[i];
        cls((void *[]){&values[i]}, &r);
        cls32((void *[]){&f}, &r32);
        int want = (isnan(values[i]) ? 1 : 0) + (isinf(values[i]) ? 2 : 0) + (isfinite(values[i]) ? 4 : 0);
        int want32 = (isnan(f) ? 1 : 0) + (isinf(f) ? 2 : 0) + (isfinite(f) ? 4 : 0);
        ck_assert_int_eq(r, want);
        ck_assert_int_eq(r32, want32);
    }
    kj_cpu_code_free(code);
    kj_arena_free(&arena);
}
END_TEST

Suite *suite_math(void)
{
    Suite *s = suite_create("math");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, math_functions_within_stated_ulps);
    tcase_add_test(tc, classification_functions);
    suite_add_tcase(s, tc);
    return s;
}
