/*
 * test_codegen.c: the LLVM code generator and the CPU JIT, below the runtime.
 *
 * Each test compiles a small .kern program with kj_compile_source, JITs the
 * functions it needs with kj_cpu_compile, and calls the entry points directly
 * (__entry, __range, __block, __thread) with KjArrayDesc arguments, checking
 * the results against C on random inputs: integer wrap-around and division,
 * casts (saturating float to int), complex arithmetic against complex.h, `**`,
 * control flow, calls, vectorized kernels in both layouts (with broadcasting
 * and transposed views), kernels with shared memory and atomics, and that a
 * loop over sin() calls glibc's libmvec.
 */
#include <check.h>
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------ harness */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t next_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * ((double)(next_u64() >> 11) / 9007199254740992.0); }

typedef struct Program {
    KjArena arena;
    KjIrModule *module;
    KjCpuCode *code;
    char diagnostics[4096];
} Program;

static void collect(void *user, KjSeverity severity, const char *text)
{
    Program *p = user;
    size_t len = strlen(p->diagnostics);
    snprintf(p->diagnostics + len, sizeof p->diagnostics - len, "%s", text);
}

static Program *program(const char *source)
{
    Program *p = calloc(1, sizeof *p);
    KjDiag diag = {collect, p, 0, 0};
    const char *no_stdlib[] = {NULL};
    KjSource *src = kj_source_from_string(&p->arena, "test.kern", source);
    p->module = kj_compile_source(&p->arena, src, no_stdlib, &diag);
    ck_assert_msg(p->module != NULL, "compile failed:\n%s", p->diagnostics);
    return p;
}

static KjIrFunction *function(Program *p, const char *name, int variant)
{
    for (int i = 0; i < p->module->entries.count; i++) {
        KjIrEntry *e = p->module->entries.items[i];
        if (strcmp(e->name, name) == 0)
            return e->variants.items[variant];
    }
    ck_abort_msg("no function %s", name);
    return NULL;
}

static void jit(Program *p, KjIrFunction **roots, int count)
{
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    char *error = NULL;
    p->code = kj_cpu_compile(p->module, roots, count, &options, &error);
    ck_assert_msg(p->code != NULL, "kj_cpu_compile: %s", error ? error : "?");
}

/* JITs every entry of the module (first signature of each). */
static void jit_all(Program *p)
{
    KjIrFunction *roots[64];
    int n = 0;
    for (int i = 0; i < p->module->entries.count && n < 64; i++) {
        KjIrEntry *e = p->module->entries.items[i];
        roots[n++] = e->variants.items[0];
    }
    jit(p, roots, n);
}

static void *symbol(Program *p, const KjIrFunction *fn, const char *suffix)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s", fn->symbol, suffix);
    void *address = kj_cpu_lookup(p->code, name);
    ck_assert_msg(address != NULL, "no symbol %s", name);
    return address;
}

static KjEntryFn entry(Program *p, const char *name) { return (KjEntryFn)symbol(p, function(p, name, 0), "__entry"); }

static void program_free(Program *p)
{
    kj_cpu_code_free(p->code);
    kj_arena_free(&p->arena);
    free(p);
}

static KjArrayDesc desc1(void *data, int64_t n, int64_t stride)
{
    KjArrayDesc d = {data, {n}, {stride}};
    return d;
}

/* ------------------------------------------------------------ integers */

START_TEST(integers_wrap_and_divide_like_c)
{
    Program *p = program(
        "fn iadd(a: i32, b: i32) -> i32 { return a + b; }\n"
        "fn imul(a: i32, b: i32) -> i32 { return a * b; }\n"
        "fn idiv(a: i32, b: i32) -> i32 { return a / b; }\n"
        "fn irem(a: i32, b: i32) -> i32 { return a % b; }\n"
        "fn udiv(a: u32, b: u32) -> u32 { return a / b; }\n"
        "fn urem(a: u32, b: u32) -> u32 { return a % b; }\n"
        "fn ishl(a: i64, b: i64) -> i64 { return a << b; }\n"
        "fn ishr(a: i64, b: i64) -> i64 { return a >> b; }\n"
        "fn ushr(a: u16, b: u16) -> u16 { return a >> b; }\n"
        "fn i8add(a: i8, b: i8) -> i8 { return a - b * 3; }\n"
        "fn bits(a: u64, b: u64) -> u64 { return (a & b) | (a ^ ~b); }\n");
    jit_all(p);
    KjEntryFn iadd = entry(p, "iadd"), imul = entry(p, "imul"), idiv = entry(p, "idiv"),
              irem = entry(p, "irem"), udiv = entry(p, "udiv"), urem = entry(p, "urem"),
              ishl = entry(p, "ishl"), ishr = entry(p, "ishr"), ushr = entry(p, "ushr"),
              i8add = entry(p, "i8add"), bits = entry(p, "bits");
    for (int t = 0; t < 20000; t++) {
        int32_t a = (int32_t)next_u64(), b = (int32_t)next_u64(), r;
        if (t % 7 == 0)
            b = (int32_t)(next_u64() % 17) - 8;
        void *args[2] = {&a, &b};
        iadd(args, &r);
        ck_assert_int_eq(r, (int32_t)((uint32_t)a + (uint32_t)b));
        imul(args, &r);
        ck_assert_int_eq(r, (int32_t)((uint32_t)a * (uint32_t)b));
        if (b != 0 && !(a == INT32_MIN && b == -1)) {
            idiv(args, &r);
            ck_assert_int_eq(r, a / b);
            irem(args, &r);
            ck_assert_int_eq(r, a % b);
        }
        uint32_t ua = (uint32_t)a, ub = (uint32_t)b, ur;
        void *uargs[2] = {&ua, &ub};
        if (ub) {
            udiv(uargs, &ur);
            ck_assert_uint_eq(ur, ua / ub);
            urem(uargs, &ur);
            ck_assert_uint_eq(ur, ua % ub);
        }
        int64_t la = (int64_t)next_u64(), lb = (int64_t)(next_u64() % 200), lr;
        void *largs[2] = {&la, &lb};
        ishl(largs, &lr);
        ck_assert_int_eq(lr, (int64_t)((uint64_t)la << (lb & 63)));
        ishr(largs, &lr);
        ck_assert_int_eq(lr, la >> (lb & 63));
        uint16_t sa = (uint16_t)next_u64(), sb = (uint16_t)(next_u64() % 40), sr;
        void *sargs[2] = {&sa, &sb};
        ushr(sargs, &sr);
        ck_assert_uint_eq(sr, (uint16_t)(sa >> (sb & 15)));
        int8_t ca = (int8_t)next_u64(), cb = (int8_t)next_u64(), cr;
        void *cargs[2] = {&ca, &cb};
        i8add(cargs, &cr);
        ck_assert_int_eq(cr, (int8_t)(uint8_t)((unsigned)ca - (unsigned)cb * 3u));
        uint64_t xa = next_u64(), xb = next_u64(), xr;
        void *xargs[2] = {&xa, &xb};
        bits(xargs, &xr);
        ck_assert_uint_eq(xr, (xa & xb) | (xa ^ ~xb));
    }
    /* The documented answers where C has none (and the hardware would trap). */
    int32_t a = 12345, zero = 0, minus_one = -1, min = INT32_MIN, r;
    idiv((void *[]){&a, &zero}, &r);
    ck_assert_int_eq(r, 12345);
    irem((void *[]){&a, &zero}, &r);
    ck_assert_int_eq(r, 0);
    idiv((void *[]){&min, &minus_one}, &r);
    ck_assert_int_eq(r, INT32_MIN);
    irem((void *[]){&min, &minus_one}, &r);
    ck_assert_int_eq(r, 0);
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ casts */

START_TEST(casts_truncate_extend_and_saturate)
{
    Program *p = program(
        "fn f2i(x: f64) -> i32 { return i32(x); }\n"
        "fn f2u8(x: f64) -> u8 { return u8(x); }\n"
        "fn f2i64(x: f32) -> i64 { return i64(x); }\n"
        "fn i2i8(x: i64) -> i8 { return i8(x); }\n"
        "fn u2f(x: u64) -> f64 { return f64(x); }\n"
        "fn i8w(x: i8) -> i64 { let y: i64 = x; return y; }\n"
        "fn u8w(x: u8) -> u32 { let y: u32 = x; return y; }\n"
        "fn d2f(x: f64) -> f32 { return f32(x); }\n"
        "fn mixed(x: i32, y: f32) -> f64 { return x * y; }\n");
    jit_all(p);
    KjEntryFn f2i = entry(p, "f2i"), f2u8 = entry(p, "f2u8"), f2i64 = entry(p, "f2i64"),
              i2i8 = entry(p, "i2i8"), u2f = entry(p, "u2f"), i8w = entry(p, "i8w"),
              u8w = entry(p, "u8w"), d2f = entry(p, "d2f"), mixed = entry(p, "mixed");
    for (int t = 0; t < 5000; t++) {
        double x = uniform(-3e9, 3e9);
        int32_t r;
        f2i((void *[]){&x}, &r);
        int32_t want = x >= 2147483647.0 ? INT32_MAX : x <= -2147483648.0 ? INT32_MIN : (int32_t)x;
        ck_assert_int_eq(r, want);
        double y = uniform(-100, 400);
        uint8_t u;
        f2u8((void *[]){&y}, &u);
        ck_assert_uint_eq(u, y <= 0 ? 0 : y >= 255 ? 255 : (uint8_t)y);
        float f = (float)uniform(-1e12, 1e12);
        int64_t l;
        f2i64((void *[]){&f}, &l);
        ck_assert_int_eq(l, (int64_t)f);
        int64_t big = (int64_t)next_u64();
        int8_t c;
        i2i8((void *[]){&big}, &c);
        ck_assert_int_eq(c, (int8_t)(uint8_t)(uint64_t)big);
        uint64_t ub = next_u64();
        double d;
        u2f((void *[]){&ub}, &d);
        ck_assert(d == (double)ub);
        int8_t small = (int8_t)next_u64();
        i8w((void *[]){&small}, &l);
        ck_assert_int_eq(l, small);
        uint8_t usmall = (uint8_t)next_u64();
        uint32_t w;
        u8w((void *[]){&usmall}, &w);
        ck_assert_uint_eq(w, usmall);
        float nf;
        d2f((void *[]){&x}, &nf);
        ck_assert(nf == (float)x);
        int32_t xi = (int32_t)(next_u64() % 100000);
        float yf = (float)uniform(-10, 10);
        mixed((void *[]){&xi, &yf}, &d);
        ck_assert_msg(fabs(d - (double)xi * yf) <= 1e-6 * fabs((double)xi * yf) + 1e-30, "mixed %g", d);
    }
    /* saturation and NaN */
    double specials[] = {1e300, -1e300, NAN, INFINITY, -INFINITY, -0.99, 2147483647.5, -2147483648.9};
    int32_t expect[] = {INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN};
    for (int i = 0; i < 8; i++) {
        int32_t r;
        f2i((void *[]){&specials[i]}, &r);
        ck_assert_int_eq(r, expect[i]);
    }
    double neg = -5.5, over = 1e6;
    uint8_t u;
    f2u8((void *[]){&neg}, &u);
    ck_assert_uint_eq(u, 0);
    f2u8((void *[]){&over}, &u);
    ck_assert_uint_eq(u, 255);
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ complex */

static double rel_err(double complex got, double complex want)
{
    double scale = cabs(want) > 1e-300 ? cabs(want) : 1.0;
    return cabs(got - want) / scale;
}

START_TEST(complex_arithmetic_matches_complex_h)
{
    Program *p = program(
        "fn cx(ar: f64, ai: f64, br: f64, bi: f64) -> c128 {\n"
        "    let a = complex(ar, ai);\n"
        "    let b = complex(br, bi);\n"
        "    return a * b - a / b + conj(a) - (-b);\n"
        "}\n"
        "fn cmag(ar: f64, ai: f64) -> f64 { return abs(complex(ar, ai)); }\n"
        "fn cx32(ar: f32, ai: f32, br: f32, bi: f32) -> c64 {\n"
        "    let a = complex(ar, ai);\n"
        "    let b = complex(br, bi);\n"
        "    return a * b + a / b;\n"
        "}\n"
        "fn cube(ar: f64, ai: f64) -> c128 { let z = complex(ar, ai); return z ** 3; }\n"
        "fn parts(ar: f64, ai: f64) -> f64 { let z = complex(ar, ai) * 2.0; return z.real - z.imag; }\n");
    jit_all(p);
    KjEntryFn cx = entry(p, "cx"), cmag = entry(p, "cmag"), cx32 = entry(p, "cx32"),
              cube = entry(p, "cube"), parts = entry(p, "parts");
    for (int t = 0; t < 5000; t++) {
        double ar = uniform(-100, 100), ai = uniform(-100, 100), br = uniform(-100, 100), bi = uniform(-100, 100);
        double complex a = CMPLX(ar, ai), b = CMPLX(br, bi), want = a * b - a / b + conj(a) - (-b);
        double got[2];
        cx((void *[]){&ar, &ai, &br, &bi}, got);
        ck_assert_msg(rel_err(CMPLX(got[0], got[1]), want) < 1e-14, "cx: %g%+gi vs %g%+gi", got[0], got[1],
                      creal(want), cimag(want));
        double m;
        cmag((void *[]){&ar, &ai}, &m);
        ck_assert(fabs(m - cabs(a)) <= 1e-15 * cabs(a));
        float fr = (float)ar, fi = (float)ai, gr = (float)br, gi = (float)bi, got32[2];
        double complex fa = CMPLX(fr, fi), fb = CMPLX(gr, gi), want32 = fa * fb + fa / fb;
        cx32((void *[]){&fr, &fi, &gr, &gi}, got32);
        ck_assert_msg(rel_err(CMPLX(got32[0], got32[1]), want32) < 1e-5, "cx32");
        cube((void *[]){&ar, &ai}, got);
        ck_assert(rel_err(CMPLX(got[0], got[1]), a * a * a) < 1e-14);
        parts((void *[]){&ar, &ai}, &m);
        ck_assert(m == 2 * ar - 2 * ai);
    }
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ ** */

START_TEST(power_operator_lowering)
{
    Program *p = program(
        "fn pw(x: f64, n: i32) -> f64 { return x ** n; }\n"
        "fn pw3(x: f64) -> f64 { return x ** 3; }\n"
        "fn pwm2(x: f32) -> f32 { return x ** -2; }\n"
        "fn pwh(x: f64) -> f64 { return x ** 0.5; }\n"
        "fn pwf(x: f64, y: f64) -> f64 { return x ** y; }\n"
        "fn ipw(x: i64, n: i64) -> i64 { return x ** n; }\n");
    jit_all(p);
    KjEntryFn pw = entry(p, "pw"), pw3 = entry(p, "pw3"), pwm2 = entry(p, "pwm2"), pwh = entry(p, "pwh"),
              pwf = entry(p, "pwf"), ipw = entry(p, "ipw");
    for (int t = 0; t < 5000; t++) {
        double x = uniform(-3, 3), r;
        int32_t n = (int32_t)(next_u64() % 61) - 30;
        pw((void *[]){&x, &n}, &r);
        long double want = powl(x, n);
        ck_assert_msg(fabsl(r - want) <= 1e-14L * fabsl(want) + 1e-300L, "%g ** %d = %g", x, n, r);
        pw3((void *[]){&x}, &r);
        ck_assert(fabs(r - x * x * x) <= 1e-15 * fabs(x * x * x));
        float xf = (float)uniform(0.1, 10), rf;
        pwm2((void *[]){&xf}, &rf);
        ck_assert(fabsf(rf - 1.0f / (xf * xf)) <= 1e-6f * rf);
        double xp = uniform(0, 1e6);
        pwh((void *[]){&xp}, &r);
        ck_assert(r == sqrt(xp));
        double y = uniform(-5, 5);
        xp = uniform(0.01, 10);
        pwf((void *[]){&xp, &y}, &r);
        ck_assert(fabs(r - pow(xp, y)) <= 4e-16 * pow(xp, y));
        int64_t base = (int64_t)(next_u64() % 21) - 10, e = (int64_t)(next_u64() % 70) - 5, ir;
        ipw((void *[]){&base, &e}, &ir);
        uint64_t acc = 1;
        if (e >= 0)
            for (int64_t k = 0; k < e; k++)
                acc *= (uint64_t)base;
        else
            acc = base == 1 ? 1 : base == -1 ? (uint64_t)((-e) % 2 ? -1 : 1) : 0;
        ck_assert_int_eq(ir, (int64_t)acc);
    }
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ control flow */

static int64_t flow_reference(int64_t n)
{
    int64_t s = 0;
    for (int64_t i = n; i > -7; i -= 3) {
        if (i % 5 == 0)
            continue;
        s += i * 2;
        if (s > 100000)
            break;
    }
    int64_t j = 0;
    while (1) {
        j += 1;
        if (j > 10)
            break;
        s = s * 3 + j;
    }
    int64_t count = 0;
    for (int64_t k = 0; k < 5; k++)
        count += k;
    return s - count;
}

START_TEST(control_flow_loops_break_continue)
{
    Program *p = program(
        "fn flow(n: i64) -> i64 {\n"
        "    let s: i64 = 0;\n"
        "    for i in range(n, -7, -3) {\n"
        "        if i % 5 == 0 { continue; }\n"
        "        s += i * 2;\n"
        "        if s > 100000 { break; }\n"
        "    }\n"
        "    let j = 0;\n"
        "    while true {\n"
        "        j += 1;\n"
        "        if j > 10 { break; }\n"
        "        s = s * 3 + j;\n"
        "    }\n"
        "    let count = 0;\n"
        "    for k in range(5) { count += k; k = 100; }\n"
        "    return s - count;\n"
        "}\n"
        "fn pick(a: f64, b: f64) -> f64 { return a > b && b > 0.0 || a < -10.0 ? a - b : b * 2.0; }\n");
    jit_all(p);
    KjEntryFn flow = entry(p, "flow"), pick = entry(p, "pick");
    for (int t = 0; t < 3000; t++) {
        int64_t n = (int64_t)(next_u64() % 5000) - 50, r;
        flow((void *[]){&n}, &r);
        ck_assert_int_eq(r, flow_reference(n));
        double a = uniform(-20, 20), b = uniform(-20, 20), d;
        pick((void *[]){&a, &b}, &d);
        ck_assert(d == ((a > b && b > 0.0) || a < -10.0 ? a - b : b * 2.0));
    }
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ calls and arrays */

START_TEST(plain_calls_and_array_arguments)
{
    Program *p = program(
        "fn sq(x: f64) -> f64 { return x * x; }\n"
        "fn norm2(x: f64, y: f64) -> f64 { return sq(x) + sq(y); }\n"
        "fn sum_arr(a: f64[]) -> f64 { let s = 0.0; for i in range(len(a)) { s += a[i]; } return s; }\n"
        "fn weighted(a: f64[], w: f64) -> f64 { return sum_arr(a) * w; }\n"
        "fn trace(m: f32[,]) -> f64 {\n"
        "    let s: f64 = 0.0;\n"
        "    for i in range(m.shape[0]) { s += m[i, i]; }\n"
        "    return s;\n"
        "}\n");
    jit_all(p);
    KjEntryFn norm2 = entry(p, "norm2"), weighted = entry(p, "weighted"), trace = entry(p, "trace");
    double x = 3, y = 4, r;
    norm2((void *[]){&x, &y}, &r);
    ck_assert(r == 25);
    enum { N = 999 };
    double *data = malloc(sizeof(double) * 2 * N);
    for (int i = 0; i < 2 * N; i++)
        data[i] = uniform(-1, 1);
    /* a view of every second element */
    KjArrayDesc view = desc1(data, N, 2);
    double w = 0.5, want = 0;
    for (int i = 0; i < N; i++)
        want += data[2 * i];
    weighted((void *[]){&view, &w}, &r);
    ck_assert(fabs(r - want * 0.5) < 1e-12);
    float m[7 * 5];
    for (int i = 0; i < 35; i++)
        m[i] = (float)uniform(-1, 1);
    /* the transpose of a 7x5 matrix: 5x7 with strides {1, 5} */
    KjArrayDesc mt = {m, {5, 7}, {1, 5}};
    trace((void *[]){&mt}, &r);
    double tr = 0;
    for (int i = 0; i < 5; i++)
        tr += m[i * 5 + i];
    ck_assert(fabs(r - tr) < 1e-6);
    free(data);
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ vectorize */

static const char *const vec_source =
    "@vectorize\n"
    "fn axpb(a: f64, x: f64, b: f64) -> f64 { return a * x + b; }\n"
    "@vectorize(f32(f32, f32), f64(f64, f64))\n"
    "fn hyp(x, y) { return sqrt(x * x + y * y); }\n";

START_TEST(vectorized_contiguous_kernels)
{
    Program *p = program(vec_source);
    KjIrFunction *axpb = function(p, "axpb", 0), *hyp32 = function(p, "hyp", 0);
    KjIrFunction *k1 = kj_vectorize(p->module, axpb, (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 1u});
    KjIrFunction *k2 = kj_vectorize(p->module, hyp32, (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    ck_assert_ptr_eq(k1, kj_vectorize(p->module, axpb, (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 1u}));
    jit(p, (KjIrFunction *[]){k1, k2}, 2);
    KjRangeFn r1 = (KjRangeFn)symbol(p, k1, "__range"), r2 = (KjRangeFn)symbol(p, k2, "__range");
    enum { N = 1003 };
    double x[N], b[N], out[N], a = uniform(-2, 2);
    float fx[N], fy[N], fout[N];
    for (int i = 0; i < N; i++) {
        x[i] = uniform(-10, 10);
        b[i] = uniform(-10, 10);
        fx[i] = (float)uniform(-10, 10);
        fy[i] = (float)uniform(-10, 10);
        out[i] = NAN;
    }
    KjArrayDesc dx = desc1(x, N, 1), db = desc1(b, N, 1), dout = desc1(out, N, 1);
    /* two sub-ranges, as the parallel target hands them out */
    r1((void *[]){&a, &dx, &db, &dout}, 0, 517);
    r1((void *[]){&a, &dx, &db, &dout}, 517, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(out[i] - (a * x[i] + b[i])) <= 1e-15 * fabs(a * x[i] + b[i]) + 1e-300, "i=%d", i);
    KjArrayDesc dfx = desc1(fx, N, 1), dfy = desc1(fy, N, 1), dfo = desc1(fout, N, 1);
    r2((void *[]){&dfx, &dfy, &dfo}, 0, N);
    for (int i = 0; i < N; i++) {
        double want = sqrt((double)fx[i] * fx[i] + (double)fy[i] * fy[i]);
        ck_assert(fabs(fout[i] - want) <= 2e-7 * want);
    }
    program_free(p);
}
END_TEST

START_TEST(vectorized_strided_kernels_broadcast_and_transpose)
{
    Program *p = program(vec_source);
    KjIrFunction *axpb = function(p, "axpb", 0);
    KjIrFunction *k = kj_vectorize(p->module, axpb, (KjVecVariant){KJ_LAYOUT_STRIDED, 3, 1u});
    jit(p, &k, 1);
    KjRangeFn run = (KjRangeFn)symbol(p, k, "__range");
    enum { D0 = 3, D1 = 17, D2 = 11 };
    /* x: a transposed view of a D2 x D1 x D0 array; b: one row broadcast
     * along the first two dimensions (strides 0, 0, 1); out: every second
     * element of a larger buffer. */
    static double xs[D2 * D1 * D0], bs[D2], outs[2 * D0 * D1 * D2];
    for (int i = 0; i < D0 * D1 * D2; i++)
        xs[i] = uniform(-5, 5);
    for (int i = 0; i < D2; i++)
        bs[i] = uniform(-5, 5);
    double a = uniform(-2, 2);
    KjArrayDesc dx = {xs, {D0, D1, D2}, {1, D0, D0 * D1}};
    KjArrayDesc db = {bs, {D0, D1, D2}, {0, 0, 1}};
    KjArrayDesc dout = {outs, {D0, D1, D2}, {2 * D1 * D2, 2 * D2, 2}};
    int64_t total = D0 * D1 * D2;
    run((void *[]){&a, &dx, &db, &dout}, 0, total / 3);
    run((void *[]){&a, &dx, &db, &dout}, total / 3, total);
    for (int i = 0; i < D0; i++)
        for (int j = 0; j < D1; j++)
            for (int l = 0; l < D2; l++) {
                double want = a * xs[l * D0 * D1 + j * D0 + i] + bs[l];
                double got = outs[2 * (i * D1 * D2 + j * D2 + l)];
                ck_assert_msg(fabs(got - want) <= 1e-15 * fabs(want) + 1e-300, "(%d,%d,%d)", i, j, l);
            }
    for (int i = 0; i < D0 * D1 * D2; i++)
        ck_assert(outs[2 * i + 1] == 0.0); /* the gaps are untouched */
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ kernels */

START_TEST(kernels_with_shared_memory_and_atomics)
{
    Program *p = program(
        "@kernel\n"
        "fn kfill(x: f64[], out: f64[], total: f64[], hist: i32[], top: i64[]) {\n"
        "    let s1 = shared(f32, 3);\n"
        "    let s2 = shared(f64, 64);\n"
        "    let t = threadIdx.x;\n"
        "    let i = grid(1);\n"
        "    if i < len(x) {\n"
        "        s2[t] = x[i] * 2.0;\n"
        "        s1[t % 3] = f32(t);\n"
        "        out[i] = s2[t] + f64(blockIdx.x) * 1000.0 + f64(blockDim.x) * 1000000.0;\n"
        "        atomic_add(total, 0, x[i]);\n"
        "        atomic_add(hist, i64(t % 4), 1);\n"
        "        atomic_max(top, 0, i);\n"
        "    }\n"
        "}\n");
    KjIrFunction *k = function(p, "kfill", 0);
    ck_assert(!k->uses_syncthreads);
    jit(p, &k, 1);
    ck_assert_int_ge(k->shared_bytes, 16 + 64 * 8);
    KjThreadFn block = (KjThreadFn)symbol(p, k, "__block"), thread = (KjThreadFn)symbol(p, k, "__thread");
    enum { N = 1000, B = 64 };
    int nblocks = (N + B - 1) / B;
    static double x[N], out[N], out2[N];
    for (int i = 0; i < N; i++)
        x[i] = uniform(-1, 1);
    for (int pass = 0; pass < 2; pass++) {
        double total = 0;
        int32_t hist[4] = {0};
        int64_t top = -1;
        KjArrayDesc dx = desc1(x, N, 1), dout = desc1(pass ? out2 : out, N, 1), dt = desc1(&total, 1, 1),
                    dh = desc1(hist, 4, 1), dtop = desc1(&top, 1, 1);
        void *args[] = {&dx, &dout, &dt, &dh, &dtop};
        char *shared = aligned_alloc(16, ((size_t)k->shared_bytes + 15) & ~(size_t)15);
        for (int b = 0; b < nblocks; b++) {
            KjThreadCtx ctx = {{0, 0, 0}, {b, 0, 0}, {B, 1, 1}, {nblocks, 1, 1}, shared, NULL};
            if (pass == 0) {
                block(args, &ctx);
            } else {
                for (int t = 0; t < B; t++) {
                    ctx.thread_idx[0] = t;
                    thread(args, &ctx);
                }
            }
        }
        double *o = pass ? out2 : out;
        double want_total = 0;
        for (int i = 0; i < N; i++) {
            want_total += x[i];
            ck_assert(o[i] == x[i] * 2.0 + (i / B) * 1000.0 + B * 1000000.0);
        }
        ck_assert(fabs(total - want_total) < 1e-12);
        ck_assert_int_eq(top, N - 1);
        int32_t want_hist[4] = {0};
        for (int i = 0; i < N; i++)
            want_hist[(i % B) % 4]++;
        for (int h = 0; h < 4; h++)
            ck_assert_int_eq(hist[h], want_hist[h]);
        /* the last block's threads left their values in shared memory */
        float *s1 = (float *)shared;
        double *s2 = (double *)(shared + 16);
        int last_threads = N - (nblocks - 1) * B;
        for (int t = 0; t < last_threads; t++)
            ck_assert(s2[t] == x[(nblocks - 1) * B + t] * 2.0);
        ck_assert(s1[(last_threads - 1) % 3] == (float)(last_threads - 1));
        free(shared);
    }
    program_free(p);
}
END_TEST

/* ------------------------------------------------------------ SIMD math */

START_TEST(sin_loop_calls_libmvec)
{
    Program *p = program("@vectorize\nfn vsin(x: f64) -> f64 { return sin(x); }\n"
                         "@vectorize\nfn vexp(x: f32) -> f32 { return exp(x); }\n");
    KjIrFunction *k = kj_vectorize(p->module, function(p, "vsin", 0), (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    KjIrFunction *k32 = kj_vectorize(p->module, function(p, "vexp", 0), (KjVecVariant){KJ_LAYOUT_CONTIG, 1, 0});
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    char *error = NULL;
    size_t size = 0;
    char *text = kj_codegen_emit(p->module, (KjIrFunction *[]){k, k32}, 2, &options, KJ_EMIT_ASM, &size, &error);
    ck_assert_msg(text != NULL, "emit: %s", error ? error : "?");
    const char *host = kj_host_cpu_description();
    bool avx512 = strstr(host, "+avx512f") != NULL, avx2 = strstr(host, "+avx2") != NULL;
    const char *want64 = avx512 ? "_ZGVeN8v_sin" : avx2 ? "_ZGVdN4v_sin" : "_ZGVbN2v_sin";
    const char *want32 = avx512 ? "_ZGVeN16v_expf" : avx2 ? "_ZGVdN8v_expf" : "_ZGVbN4v_expf";
    ck_assert_msg(strstr(text, want64) != NULL, "no call to %s on %s", want64, host);
    ck_assert_msg(strstr(text, want32) != NULL, "no call to %s on %s", want32, host);
    free(text);
    /* and the JIT resolves and runs it */
    jit(p, (KjIrFunction *[]){k, k32}, 2);
    KjRangeFn run = (KjRangeFn)symbol(p, k, "__range");
    enum { N = 4099 };
    static double x[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = uniform(-100, 100);
    KjArrayDesc dx = desc1(x, N, 1), dy = desc1(y, N, 1);
    run((void *[]){&dx, &dy}, 0, N);
    for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(y[i] - sin(x[i])) <= 1e-15, "sin(%g) = %g", x[i], y[i]);
    program_free(p);
}
END_TEST

START_TEST(emit_llvm_and_object)
{
    Program *p = program("fn f(x: f64) -> f64 { return x * 2.0 + 1.0; }\n");
    KjIrFunction *f = function(p, "f", 0);
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    char *error = NULL;
    size_t size = 0;
    char *ll = kj_codegen_emit(p->module, &f, 1, &options, KJ_EMIT_LLVM, &size, &error);
    ck_assert_msg(ll && strstr(ll, "define void @f__entry"), "llvm: %s", error ? error : ll);
    free(ll);
    char *obj = kj_codegen_emit(p->module, &f, 1, &options, KJ_EMIT_OBJ, &size, &error);
    ck_assert(obj && size > 4 && memcmp(obj, "\x7f" "ELF", 4) == 0);
    free(obj);
    program_free(p);
}
END_TEST

/* Checked mode keeps a kernel with barriers in its split form (issue 25,
 * item 6): a __block entry whose regions run on SIMD lanes, each chunk's
 * lowest failed lane claiming the record (lanes.publish,
 * codegen_simd_check.c), instead of the fibers' __thread alone; race
 * checking still follows each thread on fibers. */
START_TEST(checked_kernels_with_barriers_split)
{
    Program *p = program("@kernel\nfn k(a: f64[], out: f64[]) {\n"
                         "    let tile = shared(f64, 64);\n"
                         "    let t = threadIdx.x;\n"
                         "    tile[t] = a[grid(1)];\n"
                         "    syncthreads();\n"
                         "    out[grid(1)] = tile[63 - t];\n"
                         "}\n");
    kj_checks_insert(p->module, KJ_CHECKS_VALUES);
    KjIrFunction *k = function(p, "k", 0);
    ck_assert_ptr_nonnull(kj_barrier_split(p->module, k, NULL));
    for (int race = 0; race < 2; race++) {
        KjCodegenOptions options = {KJ_CODEGEN_CPU, 0, NULL, NULL, true};
        options.cpu_simd = true;
        options.checks = true;
        options.race = race;
        char *error = NULL;
        size_t size = 0;
        char *ll = kj_codegen_emit(p->module, &k, 1, &options, KJ_EMIT_LLVM, &size, &error);
        ck_assert_msg(ll != NULL, "emit: %s", error ? error : "?");
        bool block = strstr(ll, "define void @k__block(") != NULL;
        bool lanes = strstr(ll, "lanes.publish") != NULL;
        ck_assert_msg(race ? !block : block && lanes, "race %d: __block %d, lanes publish %d", race, block,
                      lanes);
        free(ll);
    }
    program_free(p);
}
END_TEST

/* The label of the block that holds `at` in LLVM IR text (the last line
 * before it that ends in ':' after a name), into `label`. */
static void block_label(const char *ll, const char *at, char *label, size_t size)
{
    snprintf(label, size, "entry");
    for (const char *line = at; line > ll;) {
        const char *start = line - 1;
        while (start > ll && start[-1] != '\n')
            start--;
        const char *colon = memchr(start, ':', (size_t)(line - start));
        if (colon && start[0] != ' ' && colon + 1 < line && (colon[1] == ' ' || colon[1] == '\n')) {
            snprintf(label, size, "%.*s", (int)(colon - start), start);
            return;
        }
        line = start;
    }
}

/* Cancellation polls at the back edges of cpu `for` loops of a constant
 * step load the word only once in KJ_CANCEL_CPU_STRIDE turns (issue 25: the
 * load beside a block-strided loop's loads that split cache lines cost
 * 17 %): in the optimised code of a loop on SIMD lanes and of scalar loops
 * (steps of 257 and 4), every load of the word lies in a block that a test
 * of the counter's bits leads to (cancel.due), none in the loop's turn. */
START_TEST(cancel_polls_back_edges_counted)
{
    Program *p = program("@kernel\nfn k(x: f64[], out: f64[]) {\n"
                         "    let t = grid(1);\n"
                         "    let a = 0.0;\n"
                         "    for j in range(t, len(x), 257) { let d = x[j] - x[t]; a += d * d; }\n"
                         "    out[t] = a;\n"
                         "}\n"
                         "fn count_to(stop: i64) -> i64 {\n"
                         "    let k: i64 = 0;\n"
                         "    for j in range(0, stop, 4) { k = (k + j) % 1000; }\n"
                         "    return k;\n"
                         "}\n");
    KjIrFunction *roots[2] = {function(p, "k", 0), function(p, "count_to", 0)};
    for (int simd = 0; simd < 2; simd++) {
        KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
        options.cpu_simd = simd;
        options.cancel = true;
        char *error = NULL;
        size_t size = 0;
        char *ll = kj_codegen_emit(p->module, roots, 2, &options, KJ_EMIT_LLVM, &size, &error);
        ck_assert_msg(ll != NULL, "emit: %s", error ? error : "?");
        int loads = 0;
        for (const char *at = strstr(ll, "load atomic i32"); at; at = strstr(at + 1, "load atomic i32")) {
            char label[128];
            block_label(ll, at, label, sizeof label);
            ck_assert_msg(strncmp(label, "cancel.due", 10) == 0, "simd %d: the word loaded in block %s", simd,
                          label);
            loads++;
        }
        ck_assert_msg(loads >= 2, "simd %d: %d polls of the word", simd, loads);
        free(ll);
    }
    program_free(p);
}
END_TEST

/* Whether LLVM IR text has a block that adds (`fadd`), tests no counter
 * for a poll (`cancel.due?`) and branches back to itself: a turn of a loop
 * without a poll (cancel_spares_short_loops). */
static bool loop_block_without_poll(const char *ll)
{
    for (const char *line = ll; *line;) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', length);
        bool label = line[0] != ' ' && line[0] != ';' && colon && colon > line &&
                     (colon[1] == ' ' || colon + 1 == line + length);
        if (label) {
            char name[128];
            snprintf(name, sizeof name, "label %%%.*s", (int)(colon - line), line);
            /* the block: to the next blank line */
            const char *stop = strstr(line, "\n\n");
            size_t block = stop ? (size_t)(stop - line) : strlen(line);
            char *text = strndup(line, block);
            const char *last = strrchr(text, '\n');
            bool adds = strstr(text, "fadd") != NULL, polls = strstr(text, "cancel.due?") != NULL;
            bool back = last && strstr(last, " br ") && strstr(last, name);
            free(text);
            if (adds && !polls && back)
                return true;
        }
        line = end ? end + 1 : line + length;
    }
    return false;
}

/* A `for` of bounds the run decides and no loop inside (a gufunc's core:
 * 16 turns) polls only when it turns more than 4,096 times: its back edge
 * tests `cancel.long`, computed before it, and LLVM's unswitching leaves a
 * copy of the loop without the poll (issue 25: the poll's test in each turn
 * cost a fifth of a 16-element dot from Python, whose contexts are
 * cancellable).  In the optimised code of such a loop some `fadd` lies in a
 * block that reaches no load of the word before the loop's next turn; the
 * loop with a loop inside keeps its poll in every copy. */
START_TEST(cancel_spares_short_loops)
{
    Program *p = program("fn dot(a: f64[], b: f64[]) -> f64 {\n"
                         "    let s = 0.0;\n"
                         "    for i in range(len(a)) { s += a[i] * b[i]; }\n"
                         "    return s;\n"
                         "}\n");
    KjIrFunction *root = function(p, "dot", 0);
    for (int opt = 0; opt < 2; opt++) {
        KjCodegenOptions options = {KJ_CODEGEN_CPU, opt ? 3 : 0, NULL, NULL, true};
        options.cancel = true;
        char *error = NULL;
        size_t size = 0;
        char *ll = kj_codegen_emit(p->module, &root, 1, &options, KJ_EMIT_LLVM, &size, &error);
        ck_assert_msg(ll != NULL, "emit: %s", error ? error : "?");
        ck_assert_msg(strstr(ll, "cancel.long") != NULL, "O%d: no cancel.long", opt ? 3 : 0);
        if (opt)
            ck_assert_msg(loop_block_without_poll(ll), "O3: no copy of the loop without its poll");
        free(ll);
    }
    program_free(p);
}
END_TEST

/* The walk's hook: counts the loads of the array `data` names, checked and
 * not (test below). */
typedef struct LoadSites {
    const char *array;
    int checked, unchecked;
} LoadSites;

static bool count_load_sites(KjIrWalk *w, const KjIrExpr *e)
{
    LoadSites *n = w->data;
    if (e->op == KJ_IR_LOAD && e->args[0]->op == KJ_IR_VAR && strcmp(e->args[0]->var->name, n->array) == 0) {
        if (e->check_site)
            n->checked++;
        else
            n->unchecked++;
    }
    return true;
}

/* Kernel `name` of p (checked: after checked mode's sites went in), split
 * at its barriers and specialised for `block`. */
static KjIrFunction *specialised_split(Program *p, const char *name, const uint32_t block[3], bool checked)
{
    if (checked)
        kj_checks_insert(p->module, KJ_CHECKS_VALUES);
    KjIrFunction *k = function(p, name, 0);
    k->split = NULL;
    ck_assert_ptr_nonnull(kj_barrier_split(p->module, k, NULL));
    KjIrFunction *spec = kj_split_specialise(&p->arena, k, block);
    ck_assert_ptr_nonnull(spec);
    return spec;
}

/* Whether `&&` conjunction e has a term of operator op. */
static bool conjunct_of(const KjIrExpr *e, KjIrOp op)
{
    if (e->op == KJ_IR_LOGAND)
        return conjunct_of(e->args[0], op) || conjunct_of(e->args[1], op);
    return e->op == op;
}

/* Checked mode on a split form specialised for its block (split_specialise.c):
 * the region copy for the blocks that lie inside the array (`i < len(a)` for
 * the last thread) loses the check of a[i], which the test proves with the
 * first thread's i >= 0 added to it; the other copy keeps it.  Unchecked
 * code's test is as before (no lower bound). */
START_TEST(checked_split_guard_proves_index)
{
    Program *p = program("@kernel\nfn k(a: f32[], out: f32[]) {\n"
                         "    let tile = shared(f32, 64);\n"
                         "    let t = threadIdx.x;\n"
                         "    let i = blockIdx.x * 64 + t;\n"
                         "    tile[t] = i < len(a) ? a[i] : 0;\n"
                         "    syncthreads();\n"
                         "    if t == 0 { out[blockIdx.x] = tile[0] + tile[1]; }\n"
                         "}\n");
    const uint32_t block[3] = {64, 1, 1};
    for (int checked = 0; checked < 2; checked++) {
        KjIrFunction *spec = specialised_split(p, "k", block, checked);
        LoadSites n = {"a", 0, 0};
        KjIrWalk w = {.expr = count_load_sites, .data = &n};
        kj_ir_walk_stmt(&w, spec->split->body);
        /* the versioned region: its test is the body's second statement's
         * condition, after tile's assignment */
        const KjIrStmt *branch = spec->split->body->stmts.items[1];
        ck_assert_int_eq(branch->kind, KJ_IR_STMT_IF);
        bool lower = conjunct_of(branch->cond, KJ_IR_GE);
        if (checked) {
            ck_assert_msg(n.checked == 1 && n.unchecked == 1 && lower,
                          "checked: loads of a checked %d, unchecked %d; lower bound in the test %d", n.checked,
                          n.unchecked, lower);
        } else {
            ck_assert_msg(n.checked == 0 && n.unchecked == 2 && !lower,
                          "unchecked: loads of a checked %d, unchecked %d; lower bound in the test %d",
                          n.checked, n.unchecked, lower);
        }
    }
    program_free(p);
}
END_TEST

/* The same for a 3-D stencil whose guard bounds x, y and z by n =
 * u.shape[0], a variable of the region, and whose loads read x - 1, x + 1
 * (and the same on y and z): the copy for the blocks inside the guards and
 * x_split's copy for those on x's edges prove every access inside u and v
 * (the guards' bound n - 1 against each axis's extent, in the test), the
 * general copy keeps the checks.  Unchecked, the guards' copy has no if
 * left (n - 1 is known before the region). */
START_TEST(checked_split_proves_offsets_by_other_extents)
{
    Program *p = program("@kernel\nfn jacobi(u: f64[,,], v: f64[,,]) {\n"
                         "    let x, y, z = grid(3);\n"
                         "    let n = u.shape[0];\n"
                         "    if x >= 1 && y >= 1 && z >= 1 && x < n - 1 && y < n - 1 && z < n - 1 {\n"
                         "        v[z, y, x] = u[z, y, x - 1] + u[z, y, x + 1] + u[z, y - 1, x] +\n"
                         "                     u[z, y + 1, x] + u[z - 1, y, x] + u[z + 1, y, x];\n"
                         "    }\n"
                         "}\n");
    const uint32_t block[3] = {32, 4, 2};
    for (int checked = 0; checked < 2; checked++) {
        KjIrFunction *spec = specialised_split(p, "jacobi", block, checked);
        const KjIrStmt *branch = spec->split->body->stmts.items[spec->split->body->stmts.count - 1];
        ck_assert_int_eq(branch->kind, KJ_IR_STMT_IF);
        /* then: the guards' copy; else: if no guard wraps { x_split } else { general } */
        const KjIrStmt *fast = branch->then_stmt, *edge = branch->else_stmt->stmts.items[0];
        ck_assert_int_eq(edge->kind, KJ_IR_STMT_IF);
        const KjIrStmt *copies[3] = {fast, edge->then_stmt, edge->else_stmt};
        for (int c = 0; c < 3; c++) {
            LoadSites n = {"u", 0, 0};
            KjIrWalk w = {.expr = count_load_sites, .data = &n};
            kj_ir_walk_stmt(&w, copies[c]);
            bool proven = checked && c < 2;
            ck_assert_msg(n.checked + n.unchecked == 6 && n.checked == (checked && !proven ? 6 : 0),
                          "checked %d, copy %d: loads of u checked %d, unchecked %d", checked, c, n.checked,
                          n.unchecked);
        }
        if (!checked) { /* the guards' copy: the region's sets and the store, no if */
            const KjIrStmt *region = fast->stmts.items[0];
            ck_assert_int_eq(region->kind, KJ_IR_STMT_THREADS);
            const KjIrStmt *last = region->body->stmts.items[region->body->stmts.count - 1];
            while (last->kind == KJ_IR_STMT_BLOCK && last->stmts.count == 1)
                last = last->stmts.items[0];
            ck_assert_int_eq(last->kind, KJ_IR_STMT_STORE);
        }
    }
    program_free(p);
}
END_TEST

/* Code for one block shape (KjCodegenOptions.block_dims): __blocks runs a
 * chunk of blocks with the split impl inlined, and __block is a call of it
 * for ctx's one block (the impl compiled once).  The runtime calls __blocks
 * only, so __block is run here through the runtime's loop over blocks
 * (kj_cpu_run_kernel_blocks without __blocks), with blocks of a 2-D grid,
 * against __blocks and C: a tree over the block's 64 threads in shared
 * memory, scaled by blockIdx. */
START_TEST(shape_block_is_one_block_of_blocks)
{
    Program *p = program("@kernel\nfn tree(a: f64[], out: f64[]) {\n"
                         "    let sh = shared(f64, 64);\n"
                         "    let t = threadIdx.x;\n"
                         "    let b = blockIdx.x + gridDim.x * blockIdx.y;\n"
                         "    sh[t] = a[b * blockDim.x + t] * f64(blockIdx.y + 1);\n"
                         "    syncthreads();\n"
                         "    let s = blockDim.x / 2;\n"
                         "    while s > 0 {\n"
                         "        if t < s { sh[t] += sh[t + s]; }\n"
                         "        syncthreads();\n"
                         "        s = s / 2;\n"
                         "    }\n"
                         "    if t == 0 { out[b] = sh[0] + f64(blockIdx.x); }\n"
                         "}\n");
    enum { B = 64, GX = 3, GY = 4, N = B * GX * GY };
    KjDiag diag = {collect, p, 0, 0};
    KjPipelineRoot root = {.fn = function(p, "tree", 0), .split_barriers = true, .block = {B, 1, 1}};
    KjPipeline pipeline = {.arena = &p->arena, .diag = &diag, .module = p->module, .roots = &root,
                           .root_count = 1, .stop = KJ_STAGE_ROOTS, .verify = true};
    ck_assert_msg(kj_pipeline_run(&pipeline), "%s", p->diagnostics);
    ck_assert_ptr_nonnull(root.root->split);
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    options.cpu_simd = true;
    options.block_dims[0] = B, options.block_dims[1] = options.block_dims[2] = 1;
    char *error = NULL;
    size_t size = 0;
    char *ll = kj_codegen_emit(p->module, &root.root, 1, &options, KJ_EMIT_LLVM, &size, &error);
    ck_assert_msg(ll != NULL, "emit: %s", error ? error : "?");
    /* one copy of the region's tree: __block holds a call, no loads of a */
    char *block_def = strstr(ll, "define void @tree__block(");
    ck_assert_ptr_nonnull(block_def);
    char *block_end = strstr(block_def, "\n}\n");
    ck_assert_msg(block_end && strstr(block_def, "call void @tree__blocks(") < block_end &&
                      !memmem(block_def, (size_t)(block_end - block_def), "fadd", 4),
                  "__block is not a call of __blocks");
    free(ll);
    char *object = kj_cpu_compile_object(p->module, &root.root, 1, &options, &size, &error);
    ck_assert_msg(object != NULL, "compile: %s", error ? error : "?");
    p->code = kj_cpu_load_object(object, size, &error);
    free(object);
    ck_assert_msg(p->code != NULL, "load: %s", error ? error : "?");
    KjThreadFn block = (KjThreadFn)symbol(p, root.root, "__block");
    KjBlocksFn blocks = (KjBlocksFn)symbol(p, root.root, "__blocks");
    static double a[N], out[2][GX * GY];
    for (int i = 0; i < N; i++)
        a[i] = uniform(-1, 1);
    const uint32_t grid[3] = {GX, GY, 1}, dims[3] = {B, 1, 1};
    for (int way = 0; way < 2; way++) {
        KjArrayDesc da = desc1(a, N, 1), dout = desc1(out[way], GX * GY, 1);
        void *args[] = {&da, &dout};
        for (int i = 0; i < GX * GY; i++)
            out[way][i] = -1.0;
        ck_assert_int_eq(kj_cpu_run_kernel_blocks(NULL, root.root, NULL, block, way ? blocks : NULL, false,
                                                  args, grid, dims, 0, 0, &error),
                         KJIT_OK);
    }
    for (int by = 0; by < GY; by++)
        for (int bx = 0; bx < GX; bx++) {
            int b = bx + GX * by;
            double sh[B];
            for (int t = 0; t < B; t++)
                sh[t] = a[b * B + t] * (double)(by + 1);
            for (int s = B / 2; s > 0; s /= 2)
                for (int t = 0; t < s; t++)
                    sh[t] += sh[t + s];
            double want = sh[0] + (double)bx;
            ck_assert_msg(memcmp(&out[0][b], &want, sizeof want) == 0 &&
                              memcmp(&out[1][b], &want, sizeof want) == 0,
                          "block %d,%d: __block %.17g, __blocks %.17g, C %.17g", bx, by, out[0][b],
                          out[1][b], want);
        }
    program_free(p);
}
END_TEST

/* The mask barrier of hosts without AVX-512 (codegen_simd.h's
 * mask_barrier, an empty asm) says that it returns: without willreturn
 * LICM kept the store of blockIdx.x to the context in the loop over a grid
 * row's blocks of a 2-D elementwise kernel (one store more per 128 bytes).
 * It does not claim memory(none), which let LLVM move the masks out of the
 * barriers' reach (slower delay-and-sum).  Every barrier in the code for
 * 32 x 8 blocks on x86-64-v3 (there is one: the masked chunk of an edge
 * block) is so. */
START_TEST(mask_barrier_returns)
{
    Program *p = program("@kernel\nfn inc2(a: i32[,], b: i32[,]) {\n"
                         "    let j, i = grid(2);\n"
                         "    if i < a.shape[0] && j < a.shape[1] { b[i, j] = a[i, j] + 1; }\n"
                         "}\n");
    KjDiag diag = {collect, p, 0, 0};
    KjPipelineRoot root = {.fn = function(p, "inc2", 0), .split_barriers = true, .block = {32, 8, 1}};
    KjPipeline pipeline = {.arena = &p->arena, .diag = &diag, .module = p->module, .roots = &root,
                           .root_count = 1, .stop = KJ_STAGE_ROOTS, .verify = true};
    ck_assert_msg(kj_pipeline_run(&pipeline), "%s", p->diagnostics);
    KjCodegenOptions options = {KJ_CODEGEN_CPU, 3, NULL, NULL, true};
    options.cpu_simd = true;
    options.block_dims[0] = 32, options.block_dims[1] = 8, options.block_dims[2] = 1;
    options.cpu_name = "x86-64-v3";
    options.cpu_features = "+sse2,+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+sahf,+avx,+avx2,+fma,+bmi,"
                           "+bmi2,+f16c,+lzcnt,+movbe,+xsave";
    char *error = NULL;
    size_t size = 0;
    char *ll = kj_codegen_emit(p->module, &root.root, 1, &options, KJ_EMIT_LLVM, &size, &error);
    ck_assert_msg(ll != NULL, "emit: %s", error ? error : "?");
    int barriers = 0;
    for (const char *at = strstr(ll, "asm \"\", \"=x,0\""); at; at = strstr(at + 1, "asm \"\", \"=x,0\"")) {
        const char *end = strchr(at, '\n'), *hash = strchr(at, '#');
        ck_assert_msg(hash && end && hash < end, "a mask barrier without attributes: %.80s", at);
        int group = atoi(hash + 1);
        char head[32];
        snprintf(head, sizeof head, "\nattributes #%d = {", group);
        const char *attrs = strstr(ll, head);
        ck_assert_ptr_nonnull(attrs);
        const char *close = strchr(attrs + 1, '\n');
        size_t len = close ? (size_t)(close - attrs) : strlen(attrs);
        ck_assert_msg(!memmem(attrs, len, "memory(none)", 12) && memmem(attrs, len, "willreturn", 10),
                      "mask barrier's attributes: %.*s", (int)len, attrs + 1);
        barriers++;
    }
    ck_assert_msg(barriers > 0, "no mask barrier in the code for x86-64-v3");
    free(ll);
    program_free(p);
}
END_TEST

Suite *suite_codegen(void)
{
    Suite *s = suite_create("codegen");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, integers_wrap_and_divide_like_c);
    tcase_add_test(tc, casts_truncate_extend_and_saturate);
    tcase_add_test(tc, complex_arithmetic_matches_complex_h);
    tcase_add_test(tc, power_operator_lowering);
    tcase_add_test(tc, control_flow_loops_break_continue);
    tcase_add_test(tc, plain_calls_and_array_arguments);
    tcase_add_test(tc, vectorized_contiguous_kernels);
    tcase_add_test(tc, vectorized_strided_kernels_broadcast_and_transpose);
    tcase_add_test(tc, kernels_with_shared_memory_and_atomics);
    tcase_add_test(tc, sin_loop_calls_libmvec);
    tcase_add_test(tc, emit_llvm_and_object);
    tcase_add_test(tc, checked_kernels_with_barriers_split);
    tcase_add_test(tc, checked_split_guard_proves_index);
    tcase_add_test(tc, checked_split_proves_offsets_by_other_extents);
    tcase_add_test(tc, shape_block_is_one_block_of_blocks);
    tcase_add_test(tc, mask_barrier_returns);
    tcase_add_test(tc, cancel_polls_back_edges_counted);
    tcase_add_test(tc, cancel_spares_short_loops);
    suite_add_tcase(s, tc);
    return s;
}
