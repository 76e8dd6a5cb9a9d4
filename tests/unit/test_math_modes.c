/*
 * test_math_modes.c: a math built-in gives the same bits in every mode of
 * the cpu targets.  The elements of one call may run on SIMD lanes, in the
 * loop vectoriser's body or in its scalar remainder, in scalar code
 * (KJIT_CPU_SIMD=0, kjit_options.cpu_simd = 0) or on another thread
 * (parallel); glibc's libm and each of libmvec's ISAs disagree in the last
 * bits, so all of these must call one routine (docs/language.md, "Accuracy of
 * the math functions").  Each function that libmvec has, in f32 and f64, as
 * a @vectorize without a loop (the loop vectoriser's) and one whose body
 * loops (the SIMD lowering's), over an odd count of random arguments with
 * infinities, NaN and zeros among them, in six modes; and abs of a complex
 * value (hypot), the case that was reported (issue 22).  And each near libm's
 * value, under the host's ISA and (make test-unit) under AVX2 and SSE only.
 */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"

static uint64_t rng_state = 0x6a09e667f3bcc908ULL;
static double uniform01(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

typedef struct Fn {
    const char *name;
    int arity;
    double lo, hi;
} Fn;

static const Fn functions[] = {
    {"cbrt", 1, -1e3, 1e3},  {"exp", 1, -80, 80},     {"exp2", 1, -100, 100}, {"expm1", 1, -5, 5},
    {"log", 1, 0, 1e6},      {"log2", 1, 0, 1e6},     {"log10", 1, 0, 1e6},  {"log1p", 1, -0.9, 1e3},
    {"sin", 1, -100, 100},   {"cos", 1, -100, 100},   {"tan", 1, -10, 10},   {"asin", 1, -1, 1},
    {"acos", 1, -1, 1},      {"atan", 1, -50, 50},    {"sinh", 1, -20, 20},  {"cosh", 1, -20, 20},
    {"tanh", 1, -10, 10},    {"asinh", 1, -1e3, 1e3}, {"acosh", 1, 1, 1e3},  {"atanh", 1, -1, 1},
    {"erf", 1, -4, 4},       {"erfc", 1, -4, 10},     {"atan2", 2, -10, 10}, {"pow", 2, 0, 4},
    {"hypot", 2, -1e3, 1e3},
};

enum { COUNT = 1003, MODES = 6 };

typedef struct Mode {
    const char *name;
    kjit_target target;
    int simd, specialise;
} Mode;

static const Mode modes[MODES] = {
    {"cpu", KJIT_TARGET_CPU, 1, 1},        {"cpu, simd off", KJIT_TARGET_CPU, 0, 1},
    {"parallel", KJIT_TARGET_PARALLEL, 1, 1}, {"parallel, simd off", KJIT_TARGET_PARALLEL, 0, 1},
    {"cpu, unspecialised", KJIT_TARGET_CPU, 1, 0}, {"parallel, 1 thread", KJIT_TARGET_PARALLEL, 1, 1},
};

/* Runs `function` of `source` on the arrays in every mode; out[mode] gets
 * the results (COUNT elements of `size` bytes). */
static void run_modes(const char *source, const char *function, kjit_arg *args, int nargs, kjit_dtype dtype,
                      size_t size, unsigned char *out[MODES])
{
    for (int m = 0; m < MODES; m++) {
        kjit_options options;
        kjit_options_init(&options);
        options.target = modes[m].target;
        options.cpu_simd = modes[m].simd;
        options.cpu_specialise = modes[m].specialise;
        options.num_threads = m == 5 ? 1 : 3;
        kjit_context *context;
        ck_assert_int_eq(kjit_context_create(&options, &context), KJIT_OK);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "math_modes.kern", source, &module) == KJIT_OK, "%s",
                      kjit_last_error(context));
        kjit_function *fn;
        ck_assert_int_eq(kjit_module_function(module, function, &fn), KJIT_OK);
        int64_t n = COUNT;
        out[m] = malloc(COUNT * size);
        kjit_array result = kjit_array_make(out[m], dtype, 1, &n);
        ck_assert_msg(kjit_call(fn, args, nargs, &result, NULL) == KJIT_OK, "%s", kjit_last_error(context));
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}

static void compare_modes(const char *what, unsigned char *out[MODES], size_t size, const unsigned char *against)
{
    for (int m = 0; m < MODES; m++)
        for (int i = 0; i < COUNT; i++)
            ck_assert_msg(memcmp(out[m] + (size_t)i * size, against + (size_t)i * size, size) == 0,
                          "%s, %s, element %d: the bits differ from the cpu's", what, modes[m].name, i);
}

START_TEST(every_libmvec_function_same_bits_in_every_mode)
{
    for (size_t f = 0; f < sizeof functions / sizeof functions[0]; f++) {
        const Fn *fn = &functions[f];
        for (int single = 0; single < 2; single++) {
            const char *T = single ? "f32" : "f64";
            char source[1024];
            const char *params = fn->arity == 1 ? "x: %s" : "x: %s, y: %s";
            char plist[64], call[64];
            snprintf(plist, sizeof plist, params, T, T);
            snprintf(call, sizeof call, fn->arity == 1 ? "%s(s)" : "%s(s, y)", fn->name);
            snprintf(source, sizeof source,
                     "@vectorize\nfn flat(%s) -> %s { return %s(x%s); }\n"
                     "@vectorize\nfn looped(n: i64, %s) -> %s {\n"
                     "    let s = x;\n    for k in range(n) { s = s * 1.0; }\n    return %s;\n}\n",
                     plist, T, fn->name, fn->arity == 2 ? ", y" : "", plist, T, call);
            kjit_dtype dtype = single ? KJIT_F32 : KJIT_F64;
            size_t size = single ? 4 : 8;
            unsigned char *x = malloc(COUNT * size), *y = malloc(COUNT * size);
            for (int i = 0; i < COUNT; i++) {
                double a = fn->lo + (fn->hi - fn->lo) * uniform01(), b = -10 + 20 * uniform01();
                if (i % 97 == 5)
                    a = INFINITY;
                else if (i % 97 == 6)
                    a = -INFINITY;
                else if (i % 97 == 7)
                    a = NAN;
                else if (i % 97 == 8)
                    a = 0.0;
                if (single) {
                    ((float *)x)[i] = (float)a;
                    ((float *)y)[i] = (float)b;
                } else {
                    ((double *)x)[i] = a;
                    ((double *)y)[i] = b;
                }
            }
            int64_t n = COUNT;
            kjit_array xa = kjit_array_make(x, dtype, 1, &n), ya = kjit_array_make(y, dtype, 1, &n);
            kjit_arg flat_args[2] = {kjit_arg_array(&xa), kjit_arg_array(&ya)};
            kjit_arg looped_args[3] = {kjit_arg_i64(1), kjit_arg_array(&xa), kjit_arg_array(&ya)};
            unsigned char *flat[MODES], *looped[MODES];
            run_modes(source, "flat", flat_args, fn->arity, dtype, size, flat);
            run_modes(source, "looped", looped_args, fn->arity + 1, dtype, size, looped);
            char what[64];
            snprintf(what, sizeof what, "%s %s, no loop", fn->name, T);
            compare_modes(what, flat, size, flat[0]);
            snprintf(what, sizeof what, "%s %s, in a loop", fn->name, T);
            compare_modes(what, looped, size, flat[0]);
            for (int m = 0; m < MODES; m++) {
                free(flat[m]);
                free(looped[m]);
            }
            free(x);
            free(y);
        }
    }
}
END_TEST

/* The reported case: abs of a complex value after a loop (lanes) and in
 * scalar code, c128 and c64. */
START_TEST(complex_abs_same_bits_in_every_mode)
{
    static const char source[] =
        "@vectorize\nfn labs(n: i64, z: c128) -> f64 { let s = z; for k in range(n) { s = s * 1.0; } return abs(s); }\n"
        "@vectorize\nfn labs32(n: i64, z: c64) -> f32 { let s = z; for k in range(n) { s = s * 1.0; } return abs(s); }\n";
    double *z = malloc(sizeof *z * 2 * COUNT);
    float *z32 = malloc(sizeof *z32 * 2 * COUNT);
    for (int i = 0; i < COUNT; i++) {
        double r = 3.0 * uniform01(), t = 6.283185307179586 * uniform01();
        z[2 * i] = r * cos(t);
        z[2 * i + 1] = r * sin(t);
        z32[2 * i] = (float)z[2 * i];
        z32[2 * i + 1] = (float)z[2 * i + 1];
    }
    int64_t n = COUNT;
    kjit_array za = kjit_array_make(z, KJIT_C128, 1, &n), z32a = kjit_array_make(z32, KJIT_C64, 1, &n);
    kjit_arg args[2] = {kjit_arg_i64(3), kjit_arg_array(&za)};
    kjit_arg args32[2] = {kjit_arg_i64(3), kjit_arg_array(&z32a)};
    unsigned char *out[MODES], *out32[MODES];
    run_modes(source, "labs", args, 2, KJIT_F64, 8, out);
    run_modes(source, "labs32", args32, 2, KJIT_F32, 4, out32);
    compare_modes("abs c128", out, 8, out[0]);
    compare_modes("abs c64", out32, 4, out32[0]);
    for (int i = 0; i < COUNT; i++) {
        double want = hypot(z[2 * i], z[2 * i + 1]), got = ((double *)out[0])[i];
        ck_assert_msg(fabs(got - want) <= 4e-16 * want, "abs c128 element %d: %.17g, hypot %.17g", i, got, want);
    }
    for (int m = 0; m < MODES; m++) {
        free(out[m]);
        free(out32[m]);
    }
    free(z);
    free(z32);
}
END_TEST

/*
 * Each two-argument function (and the one-argument ones with them) near
 * libm's value, on the cpu target's SIMD lanes and in the loop vectoriser's
 * code.  The modes above agree with each other whatever routine they call;
 * this is what catches a wrong routine: with KJIT_CPU_FEATURES=-avx512f the
 * code called libmvec's AVX-512 routine with its 512-bit arguments split
 * into AVX2 register pairs, and pow(x, y) gave pow(x, x).  make test-unit
 * runs this case again under -avx512f and -avx (tests/tests.mk).
 */
static double libm_value(const char *name, double x, double y)
{
    static const struct { const char *name; double (*one)(double); double (*two)(double, double); } table[] = {
        {"cbrt", cbrt, NULL},   {"exp", exp, NULL},     {"exp2", exp2, NULL},   {"expm1", expm1, NULL},
        {"log", log, NULL},     {"log2", log2, NULL},   {"log10", log10, NULL}, {"log1p", log1p, NULL},
        {"sin", sin, NULL},     {"cos", cos, NULL},     {"tan", tan, NULL},     {"asin", asin, NULL},
        {"acos", acos, NULL},   {"atan", atan, NULL},   {"sinh", sinh, NULL},   {"cosh", cosh, NULL},
        {"tanh", tanh, NULL},   {"asinh", asinh, NULL}, {"acosh", acosh, NULL}, {"atanh", atanh, NULL},
        {"erf", erf, NULL},     {"erfc", erfc, NULL},   {"atan2", NULL, atan2}, {"pow", NULL, pow},
        {"hypot", NULL, hypot},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].one ? table[i].one(x) : table[i].two(x, y);
    ck_abort_msg("no libm function %s", name);
    return 0;
}

START_TEST(every_libmvec_function_near_libm)
{
    const char *features = getenv("KJIT_CPU_FEATURES");
    for (int single = 0; single < 2; single++) {
        const char *T = single ? "f32" : "f64";
        size_t nfn = sizeof functions / sizeof functions[0];
        char *source = malloc(nfn * 400);
        size_t len = 0;
        for (size_t f = 0; f < nfn; f++) {
            const char *name = functions[f].name;
            const char *second = functions[f].arity == 2 ? ", y" : "";
            len += (size_t)sprintf(source + len,
                                   "@vectorize\nfn flat_%s(x: %s, y: %s) -> %s { return %s(x%s); }\n"
                                   "@vectorize\nfn looped_%s(n: i64, x: %s, y: %s) -> %s {\n"
                                   "    let s = x;\n    for k in range(n) { s = s * 1.0; }\n"
                                   "    return %s(s%s);\n}\n",
                                   name, T, T, T, name, second, name, T, T, T, name, second);
        }
        kjit_context *context;
        ck_assert_int_eq(kjit_context_create(NULL, &context), KJIT_OK);
        kjit_module *module;
        ck_assert_msg(kjit_compile_string(context, "near_libm.kern", source, &module) == KJIT_OK, "%s",
                      kjit_last_error(context));
        kjit_dtype dtype = single ? KJIT_F32 : KJIT_F64;
        size_t size = single ? 4 : 8;
        unsigned char *x = malloc(COUNT * size), *y = malloc(COUNT * size), *out = malloc(COUNT * size);
        for (size_t f = 0; f < nfn; f++) {
            const Fn *fn = &functions[f];
            for (int i = 0; i < COUNT; i++) {
                double a = fn->lo + (fn->hi - fn->lo) * uniform01(), b = -10 + 20 * uniform01();
                if (i % 97 == 5)
                    a = INFINITY;
                else if (i % 97 == 7)
                    a = NAN;
                if (single) {
                    ((float *)x)[i] = (float)a;
                    ((float *)y)[i] = (float)b;
                } else {
                    ((double *)x)[i] = a;
                    ((double *)y)[i] = b;
                }
            }
            int64_t n = COUNT;
            kjit_array xa = kjit_array_make(x, dtype, 1, &n), ya = kjit_array_make(y, dtype, 1, &n);
            kjit_array result = kjit_array_make(out, dtype, 1, &n);
            for (int looped = 0; looped < 2; looped++) {
                char name[64];
                snprintf(name, sizeof name, "%s_%s", looped ? "looped" : "flat", fn->name);
                kjit_function *kf;
                ck_assert_int_eq(kjit_module_function(module, name, &kf), KJIT_OK);
                kjit_arg flat_args[2] = {kjit_arg_array(&xa), kjit_arg_array(&ya)};
                kjit_arg looped_args[3] = {kjit_arg_i64(1), kjit_arg_array(&xa), kjit_arg_array(&ya)};
                ck_assert_msg(kjit_call(kf, looped ? looped_args : flat_args, looped ? 3 : 2, &result, NULL) ==
                                  KJIT_OK,
                              "%s", kjit_last_error(context));
                for (int i = 0; i < COUNT; i++) {
                    double a = single ? ((float *)x)[i] : ((double *)x)[i];
                    double b = single ? ((float *)y)[i] : ((double *)y)[i];
                    double want = libm_value(fn->name, a, b);
                    double got = single ? ((float *)out)[i] : ((double *)out)[i];
                    if (single)
                        want = (float)want;
                    bool ok = isnan(want) ? isnan(got)
                              : isinf(want) ? got == want
                                            : fabs(got - want) <= (single ? 4e-6 : 1e-14) * fabs(want) +
                                                                      (single ? 1e-37 : 1e-300);
                    ck_assert_msg(ok, "%s(%s) %s (KJIT_CPU_FEATURES=%s), element %d: %s(%.9g, %.9g) = %.17g, libm %.17g",
                                  name, T, looped ? "on lanes" : "vectorised loop", features ? features : "",
                                  i, fn->name, a, b, got, want);
                }
            }
        }
        free(x);
        free(y);
        free(out);
        free(source);
        kjit_module_free(module);
        kjit_context_destroy(context);
    }
}
END_TEST

Suite *suite_math_modes(void)
{
    Suite *s = suite_create("math_modes");
    TCase *c = tcase_create("modes");
    tcase_set_timeout(c, 300);
    tcase_add_test(c, every_libmvec_function_same_bits_in_every_mode);
    tcase_add_test(c, complex_abs_same_bits_in_every_mode);
    suite_add_tcase(s, c);
    TCase *libm = tcase_create("libm");
    tcase_set_timeout(libm, 300);
    tcase_add_test(libm, every_libmvec_function_near_libm);
    suite_add_tcase(s, libm);
    return s;
}
