/*
 * test_simd_blend.c: how the SIMD lowering of the cpu targets merges lanes
 * (codegen_simd.c): integer lanes blended as bytes on x86 without AVX-512,
 * with masks of the lanes' width, narrower (i32 values beside 64-bit masks)
 * and wider (i64 values beside 32-bit masks); and outermost varying while
 * loops that record the lanes their condition retires, so that the
 * variables the condition reads and nothing after the loop reads take no
 * blend (mixed with variables that do, with break and return inside the
 * loop, and with in-line ifs whose sides assign both kinds).
 *
 * Every function runs on fresh random inputs (the seed is printed) with the
 * SIMD lowering and without, on cpu and parallel: the two must agree bit for
 * bit, and both must equal a C reference here (exact: integers, wrapping as
 * kjit's do; the f32 sums are IEEE operations in the same order).  Inputs
 * mix small values of both signs with large ones (past 32 bits, the type's
 * extremes), where a signed division's rounding and 3x + 1's wrapping show.
 * Last, on an AVX2 host without AVX-512 the Collatz loop must take the
 * integer blend (vpblendvb) and never vblendvpd.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit.h"
#include "fixture.h"
#include "kjit_tools.h"
#include "rng.h"

static uint64_t rng;

static uint64_t next_bits(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char source[] =
    /* Collatz with a cap: x is read by the condition and the body only */
    "@vectorize(i64(i64, i64), i32(i32, i32))\n"
    "fn orbit(n, cap) {\n"
    "    let x = n;\n"
    "    let steps = n * 0;\n"
    "    while x != 1 && steps < cap {\n"
    "        if x % 2 == 0 { x = x / 2; } else { x = 3 * x + 1; }\n"
    "        steps += 1;\n"
    "    }\n"
    "    return steps;\n"
    "}\n"
    "\n"
    /* x and k only inside; acc and y read after the loop; a break, a
     * return, a ternary and divisions that round negative values */
    "@vectorize(i64(i64, i64), i32(i32, i32))\n"
    "fn wander(n, d) {\n"
    "    let x = n;\n"
    "    let y = d;\n"
    "    let acc = n * 0;\n"
    "    let k = n * 0;\n"
    "    while x > d && k < 40 {\n"
    "        acc = acc + (x % 3 == 0 ? x / 3 : -x / 4);\n"
    "        if acc > 1000000 { break; }\n"
    "        if acc < -1000000 { return acc * 2 + k; }\n"
    "        if x % 2 == 0 { x = x / 2; y = y - 1; } else { x = x / 2 - 1; y = y + x % 5; }\n"
    "        k += 1;\n"
    "    }\n"
    "    return acc + y;\n"
    "}\n"
    "\n"
    /* the same loop, x read after it: x blended, k not */
    "@vectorize(i64(i64, i64), i32(i32, i32))\n"
    "fn settle(n, d) {\n"
    "    let x = n;\n"
    "    let k = n * 0;\n"
    "    while x > d && k < 40 {\n"
    "        if x % 4 == 0 { x = x / 4 - 3; } else { x = x - x / 3 - 1; }\n"
    "        k += 1;\n"
    "    }\n"
    "    return x * 64;\n"
    "}\n"
    "\n"
    /* i32 values on lanes of i64 masks */
    "@vectorize\n"
    "fn narrow(n: i64, d: i32) -> i32 {\n"
    "    let x = n;\n"
    "    let c = d;\n"
    "    let k: i32 = 0;\n"
    "    while x != 1 && k < 50 {\n"
    "        if x % 2 == 0 { x = x / 2; c = c - 3; } else { x = 3 * x + 1; c = c / 2 + i32(x % 7); }\n"
    "        k += 1;\n"
    "    }\n"
    "    return c * 100 + k;\n"
    "}\n"
    "\n"
    /* i64 values on lanes of f32 masks (8 lanes with AVX2) */
    "@vectorize\n"
    "fn wide(v: f32, n: i64) -> i64 {\n"
    "    let x = n;\n"
    "    let t = v;\n"
    "    let acc: i64 = 0;\n"
    "    while t < 100.0 && x != 0 {\n"
    "        if x % 4 == 0 { x = x / 4; acc = acc + 1; } else { x = x - x / 3; acc = acc - x % 9; }\n"
    "        t = t * 0.5 + 60.0;\n"
    "    }\n"
    "    return acc + i64(t);\n"
    "}\n";

/* ------------------------------------------------------------ references */

/* kjit's integer operations: wrapping, / truncating, % C's. */
static int64_t add64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t mul64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t neg64(int64_t a) { return (int64_t)(0 - (uint64_t)a); }
static int32_t add32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static int32_t mul32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
static int32_t neg32(int32_t a) { return (int32_t)(0 - (uint32_t)a); }

static int64_t orbit64(int64_t x, int64_t cap)
{
    int64_t steps = 0;
    while (x != 1 && steps < cap) {
        x = x % 2 == 0 ? x / 2 : add64(mul64(3, x), 1);
        steps++;
    }
    return steps;
}

static int32_t orbit32(int32_t x, int32_t cap)
{
    int32_t steps = 0;
    while (x != 1 && steps < cap) {
        x = x % 2 == 0 ? x / 2 : add32(mul32(3, x), 1);
        steps++;
    }
    return steps;
}

static int64_t wander64(int64_t n, int64_t d)
{
    int64_t x = n, y = d, acc = 0, k = 0;
    while (x > d && k < 40) {
        acc = add64(acc, x % 3 == 0 ? x / 3 : neg64(x) / 4);
        if (acc > 1000000)
            break;
        if (acc < -1000000)
            return add64(mul64(acc, 2), k);
        if (x % 2 == 0) {
            x = x / 2;
            y = add64(y, -1);
        } else {
            x = x / 2 - 1;
            y = add64(y, x % 5);
        }
        k++;
    }
    return add64(acc, y);
}

static int32_t wander32(int32_t n, int32_t d)
{
    int32_t x = n, y = d, acc = 0, k = 0;
    while (x > d && k < 40) {
        acc = add32(acc, x % 3 == 0 ? x / 3 : neg32(x) / 4);
        if (acc > 1000000)
            break;
        if (acc < -1000000)
            return add32(mul32(acc, 2), k);
        if (x % 2 == 0) {
            x = x / 2;
            y = add32(y, -1);
        } else {
            x = x / 2 - 1;
            y = add32(y, x % 5);
        }
        k++;
    }
    return add32(acc, y);
}

static int64_t settle64(int64_t x, int64_t d)
{
    int64_t k = 0;
    while (x > d && k < 40) {
        x = x % 4 == 0 ? x / 4 - 3 : add64(x, neg64(x / 3)) - 1;
        k++;
    }
    return mul64(x, 64);
}

static int32_t settle32(int32_t x, int32_t d)
{
    int32_t k = 0;
    while (x > d && k < 40) {
        x = x % 4 == 0 ? x / 4 - 3 : add32(x, neg32(x / 3)) - 1;
        k++;
    }
    return mul32(x, 64);
}

static int32_t narrow_ref(int64_t x, int32_t c)
{
    int32_t k = 0;
    while (x != 1 && k < 50) {
        if (x % 2 == 0) {
            x = x / 2;
            c = add32(c, -3);
        } else {
            x = add64(mul64(3, x), 1);
            c = add32(c / 2, (int32_t)(x % 7));
        }
        k++;
    }
    return add32(mul32(c, 100), k);
}

static int64_t wide_ref(float v, int64_t x)
{
    float t = v;
    int64_t acc = 0;
    while (t < 100.0f && x != 0) {
        if (x % 4 == 0) {
            x = x / 4;
            acc = add64(acc, 1);
        } else {
            x = add64(x, neg64(x / 3));
            acc = add64(acc, neg64(x % 9));
        }
        t = t * 0.5f + 60.0f;
    }
    return add64(acc, (int64_t)t);
}

/* ------------------------------------------------------------ inputs */

/* Small values of both signs, values past 32 bits, and the extremes. */
static int64_t pick64(void)
{
    uint64_t r = next_bits();
    switch (r % 8) {
    case 0: return INT64_MIN + (int64_t)(next_bits() % 3);
    case 1: return INT64_MAX - (int64_t)(next_bits() % 3);
    case 2: case 3: return (int64_t)(next_bits() % 2001) - 1000;
    case 4: return (int64_t)(next_bits() % 2000001) - 1000000;
    default: return (int64_t)next_bits() >> (next_bits() % 40); /* up to 64 bits, either sign */
    }
}

static int32_t pick32(void)
{
    uint64_t r = next_bits();
    switch (r % 8) {
    case 0: return INT32_MIN + (int32_t)(next_bits() % 3);
    case 1: return INT32_MAX - (int32_t)(next_bits() % 3);
    case 2: case 3: return (int32_t)(next_bits() % 2001) - 1000;
    case 4: return (int32_t)(next_bits() % 2000001) - 1000000;
    default: return (int32_t)(uint32_t)next_bits() >> (next_bits() % 20);
    }
}

/* ------------------------------------------------------------ running */

/* name(a, b) over n elements into out[simd], with and without the lowering. */
static void call_both(Pair *p, const char *name, kjit_dtype ta, const void *a, kjit_dtype tb, const void *b,
                      kjit_dtype tout, void *out[2], int64_t n)
{
    int64_t shape[1] = {n};
    for (int simd = 0; simd < 2; simd++) {
        kjit_function *fn = pair_fn(p, simd, name);
        kjit_array aa = kjit_array_make((void *)a, ta, 1, shape), ab = kjit_array_make((void *)b, tb, 1, shape),
                   ao = kjit_array_make(out[simd], tout, 1, shape);
        kjit_arg args[2] = {kjit_arg_array(&aa), kjit_arg_array(&ab)};
        ck_assert_msg(kjit_call(fn, args, 2, &ao, NULL) == KJIT_OK, "%s: %s", name,
                      kjit_last_error(p->context[simd]));
    }
}

/* Lengths that leave partial chunks of 4 and 8 lanes. */
static const int64_t lengths[] = {1, 5, 11, 333, 2001};
enum { LENGTHS = sizeof lengths / sizeof lengths[0] };

static void blends_on(kjit_target target)
{
    rng_seed(&rng, "simd_blend");
    Pair p = pair_open(target, "simd_blend.kern", source);
    for (int l = 0; l < LENGTHS; l++) {
        int64_t n = lengths[l];
        int64_t *a64 = malloc((size_t)n * 8), *b64 = malloc((size_t)n * 8), *o64[2];
        int32_t *a32 = malloc((size_t)n * 4), *b32 = malloc((size_t)n * 4), *o32[2];
        float *f = malloc((size_t)n * 4);
        for (int s = 0; s < 2; s++) {
            o64[s] = malloc((size_t)n * 8);
            o32[s] = malloc((size_t)n * 4);
        }
        void *out64[2] = {o64[0], o64[1]}, *out32[2] = {o32[0], o32[1]};

        /* orbit: caps from 0 to 300; the seeds of every kind */
        for (int64_t i = 0; i < n; i++) {
            a64[i] = pick64();
            b64[i] = (int64_t)(next_bits() % 301);
            a32[i] = pick32();
            b32[i] = (int32_t)(next_bits() % 301);
        }
        call_both(&p, "orbit", KJIT_I64, a64, KJIT_I64, b64, KJIT_I64, out64, n);
        call_both(&p, "orbit", KJIT_I32, a32, KJIT_I32, b32, KJIT_I32, out32, n);
        ck_assert(memcmp(o64[0], o64[1], (size_t)n * 8) == 0);
        ck_assert(memcmp(o32[0], o32[1], (size_t)n * 4) == 0);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(o64[1][i] == orbit64(a64[i], b64[i]), "orbit(%lld, %lld): %lld, want %lld",
                          (long long)a64[i], (long long)b64[i], (long long)o64[1][i],
                          (long long)orbit64(a64[i], b64[i]));
            ck_assert_msg(o32[1][i] == orbit32(a32[i], b32[i]), "orbit i32(%d, %d): %d, want %d", a32[i], b32[i],
                          o32[1][i], orbit32(a32[i], b32[i]));
        }

        /* wander and settle: bounds d of every kind too */
        for (int64_t i = 0; i < n; i++) {
            a64[i] = pick64();
            b64[i] = next_bits() % 2 ? pick64() : (int64_t)(next_bits() % 201) - 100;
            a32[i] = pick32();
            b32[i] = next_bits() % 2 ? pick32() : (int32_t)(next_bits() % 201) - 100;
        }
        call_both(&p, "wander", KJIT_I64, a64, KJIT_I64, b64, KJIT_I64, out64, n);
        call_both(&p, "wander", KJIT_I32, a32, KJIT_I32, b32, KJIT_I32, out32, n);
        ck_assert(memcmp(o64[0], o64[1], (size_t)n * 8) == 0);
        ck_assert(memcmp(o32[0], o32[1], (size_t)n * 4) == 0);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(o64[1][i] == wander64(a64[i], b64[i]), "wander(%lld, %lld): %lld, want %lld",
                          (long long)a64[i], (long long)b64[i], (long long)o64[1][i],
                          (long long)wander64(a64[i], b64[i]));
            ck_assert_msg(o32[1][i] == wander32(a32[i], b32[i]), "wander i32(%d, %d): %d, want %d", a32[i],
                          b32[i], o32[1][i], wander32(a32[i], b32[i]));
        }
        call_both(&p, "settle", KJIT_I64, a64, KJIT_I64, b64, KJIT_I64, out64, n);
        call_both(&p, "settle", KJIT_I32, a32, KJIT_I32, b32, KJIT_I32, out32, n);
        ck_assert(memcmp(o64[0], o64[1], (size_t)n * 8) == 0);
        ck_assert(memcmp(o32[0], o32[1], (size_t)n * 4) == 0);
        for (int64_t i = 0; i < n; i++) {
            ck_assert_msg(o64[1][i] == settle64(a64[i], b64[i]), "settle(%lld, %lld): %lld, want %lld",
                          (long long)a64[i], (long long)b64[i], (long long)o64[1][i],
                          (long long)settle64(a64[i], b64[i]));
            ck_assert_msg(o32[1][i] == settle32(a32[i], b32[i]), "settle i32(%d, %d): %d, want %d", a32[i],
                          b32[i], o32[1][i], settle32(a32[i], b32[i]));
        }

        /* narrow: i64 seeds, i32 counters; wide: f32 clocks, i64 values */
        for (int64_t i = 0; i < n; i++) {
            a64[i] = pick64();
            b32[i] = pick32();
            f[i] = (float)(next_bits() % 20001) / 100.0f - 50.0f; /* [-50, 150] */
        }
        call_both(&p, "narrow", KJIT_I64, a64, KJIT_I32, b32, KJIT_I32, out32, n);
        ck_assert(memcmp(o32[0], o32[1], (size_t)n * 4) == 0);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(o32[1][i] == narrow_ref(a64[i], b32[i]), "narrow(%lld, %d): %d, want %d",
                          (long long)a64[i], b32[i], o32[1][i], narrow_ref(a64[i], b32[i]));
        call_both(&p, "wide", KJIT_F32, f, KJIT_I64, a64, KJIT_I64, out64, n);
        ck_assert(memcmp(o64[0], o64[1], (size_t)n * 8) == 0);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(o64[1][i] == wide_ref(f[i], a64[i]), "wide(%a, %lld): %lld, want %lld", (double)f[i],
                          (long long)a64[i], (long long)o64[1][i], (long long)wide_ref(f[i], a64[i]));

        for (int s = 0; s < 2; s++) {
            free(o64[s]);
            free(o32[s]);
        }
        free(a64);
        free(b64);
        free(a32);
        free(b32);
        free(f);
    }
    pair_close(&p);
}

START_TEST(integer_blends_and_recorded_exits_cpu) { blends_on(KJIT_TARGET_CPU); }
END_TEST
START_TEST(integer_blends_and_recorded_exits_parallel) { blends_on(KJIT_TARGET_PARALLEL); }
END_TEST

/* ------------------------------------------------------------ the code made */

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* On AVX2 without AVX-512 the Collatz step blends its i64 lanes with the
 * integer vpblendvb: vblendvpd, a floating-point instruction, would cost
 * a bypass delay each way on the loop's critical path. */
START_TEST(collatz_blends_as_integers)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx512f")) {
        printf("simd_blend: skipped: the host is not AVX2 without AVX-512\n");
        return;
    }
    const char *features = getenv("KJIT_CPU_FEATURES");
    if (features && *features) {
        printf("simd_blend: skipped: KJIT_CPU_FEATURES changes the instruction set\n");
        return;
    }
    kjit_stage_options options;
    kjit_stage_options_init(&options);
    char *bytes = NULL, *error = NULL;
    size_t size = 0;
    ck_assert_msg(kjit_stage_file("tests/bench/simd.kern", KJIT_STAGE_ASM, &options, &bytes, &size, &error) ==
                      KJIT_OK,
                  "%s", error ? error : "?");
    const char *start = strstr(bytes, "\ncollatz__v0c__range:");
    ck_assert_msg(start, "no collatz__v0c__range in the assembly");
    const char *end = strstr(start + 1, "\n.Lfunc_end");
    ck_assert(end);
    char *text = strndup(start, (size_t)(end - start));
    ck_assert_msg(count_of(text, "vpblendvb") >= 2, "%d vpblendvb", count_of(text, "vpblendvb"));
    ck_assert_msg(count_of(text, "vblendvpd") == 0, "%d vblendvpd", count_of(text, "vblendvpd"));
    free(text);
    free(bytes);
#else
    printf("simd_blend: skipped: not an x86-64 host\n");
#endif
}
END_TEST

Suite *suite_simd_blend(void)
{
    Suite *s = suite_create("simd_blend");
    TCase *tc = tcase_create("blends");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, integer_blends_and_recorded_exits_cpu);
    tcase_add_test(tc, integer_blends_and_recorded_exits_parallel);
    tcase_add_test(tc, collatz_blends_as_integers);
    suite_add_tcase(s, tc);
    return s;
}
