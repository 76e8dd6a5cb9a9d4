/*
 * test_halves.c: f16 and bf16 (compiler/half.c, the conversions in
 * codegen_expr.c, .npy).  The C conversions against references: GCC's
 * _Float16 for f16, a hand-written bit rounding for bf16; the compiled
 * conversions over every 16-bit pattern and random f32/f64 values on cpu and
 * parallel; vectorized adds against f32-then-round references (and NumPy's
 * own float16 add when python3 with numpy is installed); .npy files NumPy
 * writes and reads.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit_runtime.h"

enum { RANDOM_COUNT = 100000 };

static uint64_t state = 0x2545f4914f6cdd1dULL;
static uint64_t next_random(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* A float from random bits: every exponent, NaNs and infinities included. */
static float random_float(void)
{
    uint32_t bits = (uint32_t)next_random();
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static double random_double_near_halves(void)
{
    /* magnitudes where f16 and bf16 have normals, subnormals and overflow */
    double m = ldexp((double)(next_random() >> 11) / 9007199254740992.0 + 0.5,
                     (int)(next_random() % 60) - 30);
    return next_random() & 1 ? -m : m;
}

static uint16_t f16_reference(double x)
{
    _Float16 h = (_Float16)x;
    uint16_t bits;
    memcpy(&bits, &h, 2);
    return bits;
}

/* bf16 from f32 by hand: round the low 16 bits to nearest even; NaN quieted. */
static uint16_t bf16_reference(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (isnan(f))
        return (uint16_t)((bits | 0x400000) >> 16);
    bits += 0x7fff + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

static float bf16_widen_reference(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static bool same_half(uint16_t a, uint16_t b, KjTypeKind kind)
{
    if (isnan(kj_half_to_double(kind, a)))
        return isnan(kj_half_to_double(kind, b));
    return a == b;
}

/* ======================================================= C conversions */

START_TEST(f16_every_pattern_matches_float16)
{
    for (uint32_t bits = 0; bits < 65536; bits++) {
        _Float16 h;
        uint16_t b = (uint16_t)bits;
        memcpy(&h, &b, 2);
        double want = (double)h, got = kj_half_to_double(KJ_TYPE_F16, b);
        if (isnan(want)) {
            ck_assert(isnan(got));
            continue;
        }
        ck_assert_msg(got == want, "f16 0x%04x: %.17g, want %.17g", bits, got, want);
        ck_assert_uint_eq(kj_half_from_double(KJ_TYPE_F16, want), b);
    }
    for (int i = 0; i < RANDOM_COUNT; i++) {
        double x = i % 2 ? random_double_near_halves() : (double)random_float();
        ck_assert_msg(same_half(kj_half_from_double(KJ_TYPE_F16, x), f16_reference(x), KJ_TYPE_F16),
                      "f16(%.17g): 0x%04x, want 0x%04x", x, kj_half_from_double(KJ_TYPE_F16, x),
                      f16_reference(x));
    }
}
END_TEST

START_TEST(bf16_every_pattern_matches_reference)
{
    for (uint32_t bits = 0; bits < 65536; bits++) {
        uint16_t b = (uint16_t)bits;
        double want = bf16_widen_reference(b), got = kj_half_to_double(KJ_TYPE_BF16, b);
        if (isnan(want)) {
            ck_assert(isnan(got));
            continue;
        }
        ck_assert_msg(got == want, "bf16 0x%04x: %.17g, want %.17g", bits, got, want);
        ck_assert_uint_eq(kj_half_from_double(KJ_TYPE_BF16, want), b);
    }
    for (int i = 0; i < RANDOM_COUNT; i++) {
        float x = i % 2 ? (float)random_double_near_halves() : random_float();
        ck_assert_msg(same_half(kj_half_from_double(KJ_TYPE_BF16, x), bf16_reference(x), KJ_TYPE_BF16),
                      "bf16(%.9g): 0x%04x, want 0x%04x", (double)x,
                      kj_half_from_double(KJ_TYPE_BF16, x), bf16_reference(x));
    }
    /* from f64 in one rounding: just above a tie of bf16 rounds up, although
     * the value rounded to f32 first would be the tie itself */
    double above_tie = 1.0 + ldexp(1.0, -8) + ldexp(1.0, -40);
    ck_assert_uint_eq(kj_half_from_double(KJ_TYPE_BF16, above_tie), 0x3f81);
    ck_assert_uint_eq(kj_half_from_double(KJ_TYPE_BF16, 1.0 + ldexp(1.0, -8)), 0x3f80);
}
END_TEST

/* ================================================== compiled conversions */

static const char *const CONVERT_SOURCE =
    "@vectorize(f16(f32), f16(f64), f16(i32))\n"
    "fn narrow_f16(x) { return f16(x); }\n"
    "@vectorize(bf16(f32), bf16(f64), bf16(i32))\n"
    "fn narrow_bf16(x) { return bf16(x); }\n"
    "@vectorize(f32(f16), f32(bf16))\n"
    "fn widen_f32(x) { return x; }\n"
    "@vectorize(f64(f16), f64(bf16))\n"
    "fn widen_f64(x) { return x; }\n"
    "@vectorize(f16(f16, f16), bf16(bf16, bf16))\n"
    "fn add(a, b) { return a + b; }\n";

static kjit_module *module;
static kjit_function *function(const char *name);

static kjit_function *compile(kjit_context **context, kjit_target target, const char *name)
{
    kjit_options options = {.target = target, .device = -1, .opt_level = 3};
    ck_assert_int_eq(kjit_context_create(&options, context), KJIT_OK);
    ck_assert_msg(kjit_compile_string(*context, "halves.kern", CONVERT_SOURCE, &module) == KJIT_OK,
                  "%s", kjit_last_error(*context));
    return name ? function(name) : NULL;
}

static kjit_function *function(const char *name)
{
    kjit_function *fn;
    ck_assert_int_eq(kjit_module_function(module, name, &fn), KJIT_OK);
    return fn;
}

static void run(kjit_context *context, kjit_function *fn, kjit_dtype in, const void *x, const void *y,
                kjit_dtype out, void *result, int64_t n)
{
    kjit_array a = kjit_array_make((void *)x, in, 1, &n), b = kjit_array_make((void *)y, in, 1, &n);
    kjit_array r = kjit_array_make(result, out, 1, &n);
    kjit_arg args[2] = {kjit_arg_array(&a), kjit_arg_array(&b)};
    ck_assert_msg(kjit_call(fn, args, y ? 2 : 1, &r, NULL) == KJIT_OK, "%s",
                  kjit_last_error(context));
}

static void narrowing_is_rounded(kjit_target target)
{
    kjit_context *context;
    compile(&context, target, NULL);
    enum { N = RANDOM_COUNT };
    float *f = malloc(N * sizeof *f);
    double *d = malloc(N * sizeof *d);
    int32_t *ints = malloc(N * sizeof *ints);
    uint16_t *got = malloc(N * sizeof *got);
    for (int i = 0; i < N; i++) {
        f[i] = i % 2 ? (float)random_double_near_halves() : random_float();
        d[i] = random_double_near_halves();
        if (i % 7 == 0) /* ties of bf16 and f16 just off by f64 bits */
            d[i] = (1.0 + ldexp(1.0, -8) + ldexp(i % 14 ? 1.0 : -1.0, -40)) * ldexp(1.0, i % 9);
        ints[i] = (int32_t)(next_random() % 200000) - 100000;
    }
    for (int k = 0; k < 2; k++) {
        kjit_dtype to = k ? KJIT_BF16 : KJIT_F16;
        KjTypeKind kind = k ? KJ_TYPE_BF16 : KJ_TYPE_F16;
        kjit_function *fn = function(k ? "narrow_bf16" : "narrow_f16");
        run(context, fn, KJIT_F32, f, NULL, to, got, N);
        for (int i = 0; i < N; i++)
            ck_assert_msg(same_half(got[i], kj_half_from_double(kind, f[i]), kind),
                          "%s %s(f32 %.9g): 0x%04x", kjit_target_name(target), kjit_dtype_name(to),
                          (double)f[i], got[i]);
        run(context, fn, KJIT_F64, d, NULL, to, got, N);
        for (int i = 0; i < N; i++)
            ck_assert_msg(got[i] == kj_half_from_double(kind, d[i]), "%s %s(f64 %.17g): 0x%04x",
                          kjit_target_name(target), kjit_dtype_name(to), d[i], got[i]);
        run(context, fn, KJIT_I32, ints, NULL, to, got, N);
        for (int i = 0; i < N; i++)
            ck_assert_msg(got[i] == kj_half_from_double(kind, ints[i]), "%s %s(i32 %d): 0x%04x",
                          kjit_target_name(target), kjit_dtype_name(to), ints[i], got[i]);
    }
    free(f), free(d), free(ints), free(got);
    kjit_context_destroy(context);
}

static void widening_is_exact(kjit_target target)
{
    kjit_context *context;
    compile(&context, target, NULL);
    static uint16_t every[65536];
    static float f[65536];
    static double d[65536];
    for (int i = 0; i < 65536; i++)
        every[i] = (uint16_t)i;
    for (int k = 0; k < 2; k++) {
        kjit_dtype from = k ? KJIT_BF16 : KJIT_F16;
        KjTypeKind kind = k ? KJ_TYPE_BF16 : KJ_TYPE_F16;
        run(context, function("widen_f32"), from, every, NULL, KJIT_F32, f, 65536);
        run(context, function("widen_f64"), from, every, NULL, KJIT_F64, d, 65536);
        for (int i = 0; i < 65536; i++) {
            double want = kj_half_to_double(kind, (uint16_t)i);
            if (isnan(want)) {
                ck_assert(isnan(f[i]) && isnan(d[i]));
                continue;
            }
            ck_assert_msg((double)f[i] == want && d[i] == want, "%s widen %s 0x%04x",
                          kjit_target_name(target), kjit_dtype_name(from), i);
        }
    }
    kjit_context_destroy(context);
}

/* a + b as NumPy's float16 computes it: in f32, rounded to the type. */
static void add_rounds_once(kjit_target target)
{
    kjit_context *context;
    kjit_function *fn = compile(&context, target, "add");
    enum { N = RANDOM_COUNT };
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *got = malloc(N * 2);
    for (int k = 0; k < 2; k++) {
        kjit_dtype dtype = k ? KJIT_BF16 : KJIT_F16;
        KjTypeKind kind = k ? KJ_TYPE_BF16 : KJ_TYPE_F16;
        for (int i = 0; i < N; i++) {
            a[i] = kj_half_from_double(kind, random_double_near_halves());
            b[i] = kj_half_from_double(kind, random_double_near_halves());
        }
        run(context, fn, dtype, a, b, dtype, got, N);
        for (int i = 0; i < N; i++) {
            float sum = (float)kj_half_to_double(kind, a[i]) + (float)kj_half_to_double(kind, b[i]);
            uint16_t want = k ? bf16_reference(sum) : f16_reference(sum);
            ck_assert_msg(same_half(got[i], want, kind), "%s %s add 0x%04x + 0x%04x: 0x%04x, want 0x%04x",
                          kjit_target_name(target), kjit_dtype_name(dtype), a[i], b[i], got[i], want);
        }
    }
    free(a), free(b), free(got);
    kjit_context_destroy(context);
}

START_TEST(compiled_narrowing_cpu) { narrowing_is_rounded(KJIT_TARGET_CPU); }
END_TEST
START_TEST(compiled_narrowing_parallel) { narrowing_is_rounded(KJIT_TARGET_PARALLEL); }
END_TEST
START_TEST(compiled_widening) { widening_is_exact(KJIT_TARGET_CPU); widening_is_exact(KJIT_TARGET_PARALLEL); }
END_TEST
START_TEST(compiled_add) { add_rounds_once(KJIT_TARGET_CPU); add_rounds_once(KJIT_TARGET_PARALLEL); }
END_TEST

/* ======================================================= NumPy and .npy */

static char temp_dir[64];

/* NumPy writes float16 (and, with ml_dtypes, bfloat16) arrays and their sum
 * computed its own way; kjit reads them, adds, and NumPy reads the result. */
START_TEST(numpy_round_trip_and_add)
{
    strcpy(temp_dir, "/tmp/kjit-halves-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(temp_dir));
    char command[2048];
    snprintf(command, sizeof command,
             "cd %s && python3 -c \""
             "import numpy as np\n"
             "r = np.random.default_rng(5)\n"
             "a = (r.standard_normal(5000) * 100).astype(np.float16)\n"
             "b = (r.standard_normal(5000) * 0.01).astype(np.float16)\n"
             "np.save('a.npy', a); np.save('b.npy', b); np.save('sum.npy', a + b)\n"
             "try:\n"
             "    import ml_dtypes\n"
             "    x = a.astype(np.float32).astype(ml_dtypes.bfloat16)\n"
             "    y = b.astype(np.float32).astype(ml_dtypes.bfloat16)\n"
             "    np.save('x.npy', x); np.save('y.npy', y)\n"
             "    np.save('xy.npy', (x.astype(np.float32) + y.astype(np.float32)).astype(ml_dtypes.bfloat16))\n"
             "except ImportError:\n"
             "    pass\n"
             "\" 2>/dev/null",
             temp_dir);
    if (system(command) != 0) {
        snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
        ck_assert_int_eq(system(command), 0);
        return; /* no numpy: the C references above cover the arithmetic */
    }
    kjit_context *context;
    kjit_function *fn = compile(&context, KJIT_TARGET_CPU, "add");
    const char *sets[2][3] = {{"a.npy", "b.npy", "sum.npy"}, {"x.npy", "y.npy", "xy.npy"}};
    for (int k = 0; k < 2; k++) {
        char path[3][160];
        kjit_array in[3];
        char *error = NULL;
        for (int j = 0; j < 3; j++)
            snprintf(path[j], sizeof path[j], "%s/%s", temp_dir, sets[k][j]);
        if (k == 1 && access(path[0], F_OK) != 0)
            break; /* no ml_dtypes */
        for (int j = 0; j < 3; j++) {
            ck_assert_msg(kjit_npy_read(path[j], &in[j], &error) == KJIT_OK, "%s", error);
            ck_assert_int_eq(in[j].dtype, k ? KJIT_BF16 : KJIT_F16);
        }
        kjit_array got = kjit_array_make(malloc(5000 * 2), in[0].dtype, 1, in[0].shape);
        kjit_arg args[2] = {kjit_arg_array(&in[0]), kjit_arg_array(&in[1])};
        ck_assert_int_eq(kjit_call(fn, args, 2, &got, NULL), KJIT_OK);
        ck_assert_int_eq(memcmp(got.data, in[2].data, 5000 * 2), 0);
        char out[200];
        snprintf(out, sizeof out, "%s/back%d.npy", temp_dir, k);
        ck_assert_int_eq(kjit_npy_write(out, &got, &error), KJIT_OK);
        snprintf(command, sizeof command,
                 "python3 -c \"import numpy as np, sys\n"
                 "a = np.load('%s'); s = np.load('%s')\n"
                 "sys.exit(0 if a.dtype.itemsize == 2 and (a.view(np.uint16) == s.view(np.uint16)).all() else 1)\"",
                 out, path[2]);
        ck_assert_int_eq(system(command), 0);
        free(got.data);
        for (int j = 0; j < 3; j++)
            kjit_array_free(&in[j]);
    }
    kjit_context_destroy(context);
    snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

Suite *suite_halves(void)
{
    Suite *s = suite_create("halves");
    TCase *tc = tcase_create("halves");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, f16_every_pattern_matches_float16);
    tcase_add_test(tc, bf16_every_pattern_matches_reference);
    tcase_add_test(tc, compiled_narrowing_cpu);
    tcase_add_test(tc, compiled_narrowing_parallel);
    tcase_add_test(tc, compiled_widening);
    tcase_add_test(tc, compiled_add);
    tcase_add_test(tc, numpy_round_trip_and_add);
    suite_add_tcase(s, tc);
    return s;
}
