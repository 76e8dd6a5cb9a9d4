/*
 * test_complex_math.c: the accuracy of the complex math built-ins on the cpu
 * target, measured as test_math.c measures the real ones.
 *
 * Each function, in c64 and in c128, is compiled as a @vectorize function and
 * run through its contiguous vectorized kernel over random arguments; the
 * results are compared with glibc's long double complex functions (csqrtl,
 * cexpl, ...), and the error is counted in units in the last place of the
 * part type two ways:
 *   - per part: |got - want| in ULP of that part of want (the stricter one:
 *     a tiny part beside a large one must be right too);
 *   - of the result: the larger part error in ULP of max(|re|, |im|) of want
 *     (what a normwise bound states).
 * The largest of each must stay under the table's bounds; KJIT_MATH_TABLE=1
 * prints the table that docs/language.md shows.  Then the special values
 * (branch cuts, signed zeros, infinities) are checked exactly against C99.
 */
#include <check.h>
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

static uint64_t rng_state = 0x13198a2e03707344ULL;
static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* How one part is drawn: uniform in [lo, hi], or with `log_scale` a random
 * sign times a log-uniform magnitude in [lo, hi]. */
typedef struct Range {
    double lo, hi;
    bool log_scale;
} Range;

typedef struct Box {
    Range re, im;
} Box;

typedef enum { ARG_COMPLEX, ARG_REAL_PAIR } ArgKind;

typedef struct ComplexCase {
    const char *name;  /* the row of the table */
    const char *body;  /* the .kern expression, of z (and w) */
    const char *domain;
    int arity;         /* 1: z; 2: z, w */
    Box z64, w64, z32, w32;
    /* bounds in ULP: per part, and of the result; f64 / f32 */
    double part64, part32, norm64, norm32;
} ComplexCase;

static const Range SPREAD = {1e-3, 1e3, true};

static const ComplexCase cases[] = {
    {"sqrt", "sqrt(z)", "parts +-[1e-100, 1e100] (f32: 1e-15, 1e15), log-uniform", 1,
     {{1e-100, 1e100, true}, {1e-100, 1e100, true}}, {{0}},
     {{1e-15, 1e15, true}, {1e-15, 1e15, true}}, {{0}}, 4, 4, 4, 4},
    {"exp", "exp(z)", "re [-700, 700] (f32: [-87, 88]), im [-100, 100]", 1,
     {{-700, 700, false}, {-100, 100, false}}, {{0}},
     {{-87, 88, false}, {-100, 100, false}}, {{0}}, 6, 6, 6, 6},
    {"exp(i phi)", "exp(complex(0.0, z.imag))", "phi [-1000, 1000]", 1,
     {{0, 0, false}, {-1000, 1000, false}}, {{0}},
     {{0, 0, false}, {-1000, 1000, false}}, {{0}}, 4, 4, 4, 4},
    {"log", "log(z)", "parts +-[1e-3, 1e3], log-uniform", 1, {SPREAD, SPREAD}, {{0}},
     {SPREAD, SPREAD}, {{0}}, 6, 6, 6, 6},
    {"log near |z| = 1", "log(z)", "re [0.5, 1], im [0, 0.87]", 1,
     {{0.5, 1, false}, {0, 0.87, false}}, {{0}}, {{0.5, 1, false}, {0, 0.87, false}}, {{0}},
     6, 6, 6, 6},
    {"sin", "sin(z)", "re [-100, 100], im [-20, 20]", 1,
     {{-100, 100, false}, {-20, 20, false}}, {{0}}, {{-100, 100, false}, {-20, 20, false}}, {{0}},
     6, 6, 6, 6},
    {"cos", "cos(z)", "re [-100, 100], im [-20, 20]", 1,
     {{-100, 100, false}, {-20, 20, false}}, {{0}}, {{-100, 100, false}, {-20, 20, false}}, {{0}},
     6, 6, 6, 6},
    {"tanh", "tanh(z)", "re [-30, 30], im [-100, 100]", 1,
     {{-30, 30, false}, {-100, 100, false}}, {{0}}, {{-30, 30, false}, {-100, 100, false}}, {{0}},
     8, 8, 6, 6},
    {"pow", "pow(z, w)", "z parts +-[0.1, 10] log-uniform; w re [-8, 8], im [-2, 2]", 2,
     {{0.1, 10, true}, {0.1, 10, true}}, {{-8, 8, false}, {-2, 2, false}},
     {{0.1, 10, true}, {0.1, 10, true}}, {{-8, 8, false}, {-2, 2, false}}, INFINITY, INFINITY,
     64, 64},
    {"arg", "complex(arg(z), 0.0)", "parts [-10, 10]", 1,
     {{-10, 10, false}, {-10, 10, false}}, {{0}}, {{-10, 10, false}, {-10, 10, false}}, {{0}},
     4, 4, 4, 4},
    {"polar", "polar(z.real, z.imag)", "r [0, 100], theta [-1000, 1000]", 1,
     {{0, 100, false}, {-1000, 1000, false}}, {{0}}, {{0, 100, false}, {-1000, 1000, false}},
     {{0}}, 6, 6, 6, 6},
};
enum { CASE_COUNT = sizeof cases / sizeof cases[0], N = 20000 };

static double draw(Range r)
{
    if (r.log_scale) {
        double m = exp(log(r.lo) + (log(r.hi) - log(r.lo)) * uniform01());
        return uniform01() < 0.5 ? -m : m;
    }
    return r.lo + (r.hi - r.lo) * uniform01();
}

static long double complex reference(int c, long double complex z, long double complex w)
{
    const char *n = cases[c].body;
    if (strcmp(n, "sqrt(z)") == 0) return csqrtl(z);
    if (strcmp(n, "exp(z)") == 0) return cexpl(z);
    if (strcmp(n, "exp(complex(0.0, z.imag))") == 0) return cexpl(CMPLXL(0, cimagl(z)));
    if (strcmp(n, "log(z)") == 0) return clogl(z);
    if (strcmp(n, "sin(z)") == 0) return csinl(z);
    if (strcmp(n, "cos(z)") == 0) return ccosl(z);
    if (strcmp(n, "tanh(z)") == 0) return ctanhl(z);
    if (strcmp(n, "pow(z, w)") == 0) return cpowl(z, w);
    if (strcmp(n, "complex(arg(z), 0.0)") == 0) return CMPLXL(atan2l(cimagl(z), creall(z)), 0);
    if (strcmp(n, "polar(z.real, z.imag)") == 0)
        return CMPLXL(creall(z) * cosl(cimagl(z)), creall(z) * sinl(cimagl(z)));
    kj_die("no reference for %s", n);
}

static long double ulp_at(long double x, bool f32)
{
    int e;
    frexpl(x, &e);
    int digits = f32 ? FLT_MANT_DIG : DBL_MANT_DIG, min_exp = f32 ? FLT_MIN_EXP : DBL_MIN_EXP;
    if (e < min_exp)
        e = min_exp;
    return ldexpl(1.0L, e - digits);
}

/* The error of one part, in ULP of `scale`'s binade (the part itself: per
 * part; the larger part: of the result). */
static double part_error(long double got, long double want, long double scale, bool f32)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got))
        return got == want ? 0 : INFINITY;
    if (scale == 0)
        return got == 0 ? 0 : INFINITY;
    return (double)(fabsl(got - want) / ulp_at(scale, f32));
}

static char diagnostics[4096];
static void collect(void *user, KjSeverity severity, const char *text)
{
    (void)user;
    (void)severity;
    size_t len = strlen(diagnostics);
    snprintf(diagnostics + len, sizeof diagnostics - len, "%s", text);
}

typedef struct Measured {
    double part[2], norm[2]; /* c128, c64 */
    double complex worst_part[2], worst_norm[2];
} Measured;

static void measure_all(Measured *out)
{
    KjBuf src = {0};
    for (int c = 0; c < CASE_COUNT; c++)
        for (int f32 = 0; f32 < 2; f32++) {
            const char *t = f32 ? "c64" : "c128";
            kj_buf_printf(&src, "@vectorize\nfn m%d_%s(z: %s%s%s) -> %s { return %s; }\n", c, t, t,
                          cases[c].arity == 2 ? ", w: " : "", cases[c].arity == 2 ? t : "", t,
                          cases[c].body);
        }
    KjArena arena = {0};
    KjDiag diag = {collect, NULL, 0, 0};
    const char *no_stdlib[] = {NULL};
    KjIrModule *module = kj_compile_source(
        &arena, kj_source_from_string(&arena, "complex_math.kern", src.data), no_stdlib, &diag);
    ck_assert_msg(module != NULL, "the module does not compile:\n%s\n%s", diagnostics, src.data);
    KjIrFunction *kernels[2 * CASE_COUNT];
    for (int c = 0; c < 2 * CASE_COUNT; c++) {
        KjIrEntry *entry = module->entries.items[c];
        kernels[c] = kj_vectorize(module, entry->variants.items[0], (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    }
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, false};
    char *error = NULL;
    KjCpuCode *code = kj_cpu_compile(module, kernels, 2 * CASE_COUNT, &options, &error);
    ck_assert_msg(code != NULL, "kj_cpu_compile: %s", error ? error : "?");

    double complex *z64 = malloc(sizeof *z64 * N), *w64 = malloc(sizeof *w64 * N),
                   *o64 = malloc(sizeof *o64 * N);
    float complex *z32 = malloc(sizeof *z32 * N), *w32 = malloc(sizeof *w32 * N),
                  *o32 = malloc(sizeof *o32 * N);
    for (int c = 0; c < CASE_COUNT; c++) {
        const ComplexCase *m = &cases[c];
        for (int f32 = 0; f32 < 2; f32++) {
            KjIrFunction *k = kernels[2 * c + f32];
            char name[128];
            snprintf(name, sizeof name, "%s__range", k->symbol);
            KjRangeFn run = (KjRangeFn)kj_cpu_lookup(code, name);
            ck_assert_msg(run != NULL, "no %s", name);
            Box bz = f32 ? m->z32 : m->z64, bw = f32 ? m->w32 : m->w64;
            for (int i = 0; i < N; i++) {
                double zr = draw(bz.re), zi = draw(bz.im), wr = draw(bw.re), wi = draw(bw.im);
                z64[i] = CMPLX(zr, zi);
                w64[i] = CMPLX(wr, wi);
                z32[i] = CMPLXF((float)zr, (float)zi);
                w32[i] = CMPLXF((float)wr, (float)wi);
            }
            void *data[3] = {f32 ? (void *)z32 : (void *)z64, f32 ? (void *)w32 : (void *)w64, NULL};
            data[m->arity] = f32 ? (void *)o32 : (void *)o64;
            KjArrayDesc descs[3];
            void *args[3];
            for (int a = 0; a <= m->arity; a++) {
                descs[a] = (KjArrayDesc){data[a], {N}, {1}};
                args[a] = &descs[a];
            }
            run(args, 0, N);
            double part = 0, norm = 0;
            double complex worst_part = 0, worst_norm = 0;
            for (int i = 0; i < N; i++) {
                long double complex z = f32 ? (long double complex)z32[i] : z64[i];
                long double complex w = f32 ? (long double complex)w32[i] : w64[i];
                long double complex want = reference(c, z, w);
                long double complex got = f32 ? (long double complex)o32[i] : o64[i];
                long double big = fmaxl(fabsl(creall(want)), fabsl(cimagl(want)));
                /* results past the part type's range are not measured */
                if (big > (f32 ? FLT_MAX : DBL_MAX))
                    continue;
                double pr = part_error(creall(got), creall(want), fabsl(creall(want)), f32);
                double pi = part_error(cimagl(got), cimagl(want), fabsl(cimagl(want)), f32);
                double nr = fmax(part_error(creall(got), creall(want), big, f32),
                                 part_error(cimagl(got), cimagl(want), big, f32));
                if (fmax(pr, pi) > part) {
                    part = fmax(pr, pi);
                    worst_part = f32 ? (double complex)z32[i] : z64[i];
                }
                if (nr > norm) {
                    norm = nr;
                    worst_norm = f32 ? (double complex)z32[i] : z64[i];
                }
            }
            out[c].part[f32] = part;
            out[c].norm[f32] = norm;
            out[c].worst_part[f32] = worst_part;
            out[c].worst_norm[f32] = worst_norm;
        }
    }
    free(z64), free(w64), free(o64), free(z32), free(w32), free(o32);
    kj_cpu_code_free(code);
    kj_arena_free(&arena);
    kj_buf_free(&src);
}

START_TEST(complex_functions_within_stated_ulps)
{
    Measured measured[CASE_COUNT];
    measure_all(measured);
    if (getenv("KJIT_MATH_TABLE")) {
        fprintf(stderr, "| function | domain | c128: per part, of the result | c64: per part, of the result |\n");
        fprintf(stderr, "| --- | --- | --- | --- |\n");
        for (int c = 0; c < CASE_COUNT; c++)
            fprintf(stderr, "| %s | %s | %.2f, %.2f | %.2f, %.2f |\n", cases[c].name, cases[c].domain,
                    measured[c].part[0], measured[c].norm[0], measured[c].part[1], measured[c].norm[1]);
    }
    for (int c = 0; c < CASE_COUNT; c++)
        for (int f32 = 0; f32 < 2; f32++) {
            const Measured *m = &measured[c];
            double part_bound = f32 ? cases[c].part32 : cases[c].part64;
            double norm_bound = f32 ? cases[c].norm32 : cases[c].norm64;
            const char *t = f32 ? "c64" : "c128";
            ck_assert_msg(m->part[f32] <= part_bound, "%s %s: %.2f ULP per part at z = (%.17g, %.17g) (bound %g)",
                          cases[c].name, t, m->part[f32], creal(m->worst_part[f32]),
                          cimag(m->worst_part[f32]), part_bound);
            ck_assert_msg(m->norm[f32] <= norm_bound, "%s %s: %.2f ULP of the result at z = (%.17g, %.17g) (bound %g)",
                          cases[c].name, t, m->norm[f32], creal(m->worst_norm[f32]),
                          cimag(m->worst_norm[f32]), norm_bound);
        }
}
END_TEST

/* ================================================================ special values */

/* Bits equal, NaNs alike (any NaN matches any NaN). */
static bool same(double got, double want)
{
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    return got == want && signbit(got) == signbit(want);
}

START_TEST(branch_cuts_and_signed_zeros)
{
    const char *source = "@vectorize\nfn s(z: c128) -> c128 { return sqrt(z); }\n"
                         "@vectorize\nfn l(z: c128) -> c128 { return log(z); }\n"
                         "@vectorize\nfn ex(z: c128) -> c128 { return exp(z); }\n"
                         "@vectorize\nfn sn(z: c128) -> c128 { return sin(z); }\n"
                         "@vectorize\nfn cs(z: c128) -> c128 { return cos(z); }\n"
                         "@vectorize\nfn th(z: c128) -> c128 { return tanh(z); }\n"
                         "@vectorize\nfn a(z: c128) -> f64 { return arg(z); }\n";
    KjArena arena = {0};
    KjDiag diag = {collect, NULL, 0, 0};
    const char *no_stdlib[] = {NULL};
    KjIrModule *module =
        kj_compile_source(&arena, kj_source_from_string(&arena, "cuts.kern", source), no_stdlib, &diag);
    ck_assert_msg(module != NULL, "%s", diagnostics);
    enum { F = 7 };
    KjIrFunction *roots[F];
    for (int i = 0; i < F; i++)
        roots[i] = ((KjIrEntry *)module->entries.items[i])->variants.items[0];
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    char *error = NULL;
    KjCpuCode *code = kj_cpu_compile(module, roots, F, &options, &error);
    ck_assert_msg(code != NULL, "%s", error ? error : "?");
    const char *names[F] = {"s__entry", "l__entry", "ex__entry", "sn__entry", "cs__entry", "th__entry", "a__entry"};
    KjEntryFn fns[F];
    for (int i = 0; i < F; i++) {
        fns[i] = (KjEntryFn)kj_cpu_lookup(code, names[i]);
        ck_assert_msg(fns[i] != NULL, "no %s", names[i]);
    }
    const double z = 0.0, inf = INFINITY;
    double values[][2] = {
        {-4, z}, {-4, -z}, {z, z}, {-z, z}, {z, -z}, {-z, -z}, {-1, z}, {-1, -z}, {3, inf},
        {-3, inf}, {-inf, 2}, {inf, 2}, {-inf, -2}, {2, -inf}, {z, 800}, {-z, -800}, {800, z},
        {710, 0.5}, {1e300, 1e300}, {-1e300, -1e300}, {0.75, 0.25}, {1e-310, -1e-310}, {30, 1},
        {-400, -2}, {1, 0.6614378277661477},
    };
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        double complex in = CMPLX(values[v][0], values[v][1]);
        double complex want[F] = {csqrt(in), clog(in), cexp(in), csin(in), ccos(in), ctanh(in), carg(in)};
        for (int f = 0; f < F; f++) {
            double complex got = 0;
            double got_real = 0;
            void *argv[1] = {&in};
            fns[f](argv, f == F - 1 ? (void *)&got_real : (void *)&got);
            if (f == F - 1)
                got = got_real;
            /* the finite results may differ from glibc's in the last bits */
            double gr = creal(got), gi = cimag(got), wr = creal(want[f]), wi = cimag(want[f]);
            bool ok_re = same(gr, wr) || (isfinite(wr) && wr != 0 && fabs(gr - wr) <= 8e-16 * fabs(wr));
            bool ok_im = same(gi, wi) || (isfinite(wi) && wi != 0 && fabs(gi - wi) <= 8e-16 * fabs(wi));
            /* log's real part where |z| = 1 to the last bit: 0 or a few
             * 1e-17, both right to the input's precision */
            if (f == 1 && fabs(wr) < 1e-15)
                ok_re = fabs(gr - wr) <= 1e-16;
            ck_assert_msg(ok_re && ok_im, "%s(%g%+gi): got (%.17g, %.17g), C99 (%.17g, %.17g)",
                          names[f], values[v][0], values[v][1], gr, gi, wr, wi);
        }
    }
    kj_cpu_code_free(code);
    kj_arena_free(&arena);
}
END_TEST

Suite *suite_complex_math(void)
{
    Suite *s = suite_create("complex_math");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, complex_functions_within_stated_ulps);
    tcase_add_test(tc, branch_cuts_and_signed_zeros);
    suite_add_tcase(s, tc);
    return s;
}
