/*
 * ref_eval.c: the reference evaluator of the typed IR (see ref_eval.h).
 *
 * A tree walker: eval() gives an expression's value, exec() runs a statement
 * and says how control leaves it.  Both switch over every IR op and statement
 * kind with no default, so a new op in KJ_IR_OPS is a compiler warning here.
 * Nothing of the code generator is used: where the language leaves a choice
 * to the implementation (division by zero, shift counts, float to integer
 * conversion), the rule is written again here from its documentation.
 *
 * An evaluation that cannot go on (an index outside its array, the step
 * budget spent) records a reason in the status; from then on every statement
 * stops at once and expressions give zeros, so the walk unwinds normally.
 */
#include "ref_eval.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

/* ================================================================ arrays */

int ref_elem_size(KjTypeKind elem)
{
    switch (elem) {
    case KJ_TYPE_BOOL: case KJ_TYPE_I8: case KJ_TYPE_U8: return 1;
    case KJ_TYPE_I16: case KJ_TYPE_U16: case KJ_TYPE_F16: case KJ_TYPE_BF16: return 2;
    case KJ_TYPE_I32: case KJ_TYPE_U32: case KJ_TYPE_F32: return 4;
    case KJ_TYPE_I64: case KJ_TYPE_U64: case KJ_TYPE_F64: case KJ_TYPE_C64: return 8;
    case KJ_TYPE_C128: return 16;
    default: kj_die("ref_eval: no element of kind %d", (int)elem);
    }
}

RefArray ref_array_make(void *data, KjTypeKind elem, int ndim, const int64_t *shape)
{
    RefArray a;
    memset(&a, 0, sizeof a);
    a.elem = elem;
    a.ndim = ndim;
    a.data = data;
    int64_t stride = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        a.shape[k] = shape[k];
        a.strides[k] = stride;
        stride *= shape[k];
    }
    a.count = stride;
    return a;
}

RefValue ref_array_read(const RefArray *array, int64_t flat)
{
    RefValue v = {0};
    const char *p = (const char *)array->data + flat * ref_elem_size(array->elem);
    switch (array->elem) {
    case KJ_TYPE_BOOL: v.u = *(const uint8_t *)p != 0; break;
    case KJ_TYPE_I8: v.u = (uint64_t)(int64_t) * (const int8_t *)p; break;
    case KJ_TYPE_I16: v.u = (uint64_t)(int64_t) * (const int16_t *)p; break;
    case KJ_TYPE_I32: v.u = (uint64_t)(int64_t) * (const int32_t *)p; break;
    case KJ_TYPE_I64: v.u = (uint64_t) * (const int64_t *)p; break;
    case KJ_TYPE_U8: v.u = *(const uint8_t *)p; break;
    case KJ_TYPE_U16: v.u = *(const uint16_t *)p; break;
    case KJ_TYPE_U32: v.u = *(const uint32_t *)p; break;
    case KJ_TYPE_U64: v.u = *(const uint64_t *)p; break;
    case KJ_TYPE_F32: v.f = *(const float *)p; break;
    case KJ_TYPE_F64: v.f = *(const double *)p; break;
    case KJ_TYPE_C64: v.c = CMPLX(((const float *)p)[0], ((const float *)p)[1]); break;
    case KJ_TYPE_C128: v.c = CMPLX(((const double *)p)[0], ((const double *)p)[1]); break;
    case KJ_TYPE_F16: case KJ_TYPE_BF16: v.f = kj_half_to_double(array->elem, *(const uint16_t *)p); break;
    default: kj_unreachable();
    }
    return v;
}

void ref_array_write(RefArray *array, int64_t flat, RefValue v)
{
    char *p = (char *)array->data + flat * ref_elem_size(array->elem);
    switch (array->elem) {
    case KJ_TYPE_BOOL: *(uint8_t *)p = v.u != 0; break;
    case KJ_TYPE_I8: case KJ_TYPE_U8: *(uint8_t *)p = (uint8_t)v.u; break;
    case KJ_TYPE_I16: case KJ_TYPE_U16: *(uint16_t *)p = (uint16_t)v.u; break;
    case KJ_TYPE_I32: case KJ_TYPE_U32: *(uint32_t *)p = (uint32_t)v.u; break;
    case KJ_TYPE_I64: case KJ_TYPE_U64: *(uint64_t *)p = v.u; break;
    case KJ_TYPE_F32: *(float *)p = (float)v.f; break;
    case KJ_TYPE_F64: *(double *)p = v.f; break;
    case KJ_TYPE_C64:
        ((float *)p)[0] = (float)creal(v.c);
        ((float *)p)[1] = (float)cimag(v.c);
        break;
    case KJ_TYPE_C128:
        ((double *)p)[0] = creal(v.c);
        ((double *)p)[1] = cimag(v.c);
        break;
    case KJ_TYPE_F16: case KJ_TYPE_BF16:
        *(uint16_t *)p = kj_half_from_double(array->elem, v.f);
        break;
    default: kj_unreachable();
    }
}

/* ================================================================ scalars */

static bool is_float(const KjType *t) { return kj_type_is_float(t); }
static bool is_complex(const KjType *t) { return kj_type_is_complex(t); }
static bool is_signed(const KjType *t) { return kj_type_is_signed(t); }

/* Keeps an integer's value in its type: the low bits, sign- or zero-extended. */
static uint64_t wrap(const KjType *t, uint64_t v)
{
    if (t->kind == KJ_TYPE_BOOL)
        return v != 0;
    int bits = kj_type_int_bits(t);
    if (bits >= 64)
        return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    v &= mask;
    if (is_signed(t) && (v >> (bits - 1)) & 1)
        v |= ~mask;
    return v;
}

/* x rounded to f32.  Through a volatile: GCC 12.2 at -O2 drops the rounding
 * when its SLP vectorizer pairs two (double)(float) round trips, as the two
 * parts of a complex number make. */
static double to_single(double x)
{
    volatile float rounded = (float)x;
    return rounded;
}

/* f32 and c64 are the types whose parts are f32. */
static bool is_single(const KjType *t) { return t->kind == KJ_TYPE_F32 || t->kind == KJ_TYPE_C64; }

/* The result of an operation of a real type t, computed in double, rounded to
 * t as the targets round it: an f32 operation's result is an f32, an f16 or
 * bf16 one's is rounded to the type (computed in f32, docs/language.md).  For
 * + - * / % and sqrt of values of the type this is the targets' result bit
 * for bit (double holds more than twice f32's precision plus two bits), and
 * where the order of roundings decides the answer (f32 overflow to inf, a
 * difference that rounds away before a %) the evaluator decides as they do. */
static double round_to(const KjType *t, double x)
{
    if (t->kind == KJ_TYPE_F32)
        return to_single(x);
    if (kj_type_is_half(t))
        return kj_half_round(t->kind, x);
    return x;
}

/* A part of a complex operation's result or intermediate: rounded to f32 in
 * c64 (single true), kept in c128. */
static double part(bool single, double x) { return single ? to_single(x) : x; }

static double real_value(RefValue v, const KjType *t)
{
    if (is_complex(t))
        return creal(v.c);
    if (is_float(t))
        return v.f;
    if (t->kind == KJ_TYPE_BOOL || is_signed(t))
        return (double)(int64_t)v.u;
    return (double)v.u;
}

/* An integer or bool rounded once to f32 (not through double, which could round
 * twice). */
static double int_to_single(RefValue v, const KjType *t)
{
    volatile float rounded; /* see to_single */
    if (t->kind == KJ_TYPE_BOOL || is_signed(t))
        rounded = (float)(int64_t)v.u;
    else
        rounded = (float)v.u;
    return rounded;
}

/* Float to integer: truncation toward zero, saturating at the type's range
 * (llvm.fptosi.sat, PTX cvt.rzi); NaN, unspecified, never gets here from a
 * cast (see KJ_IR_CAST) and gives 0 as on cpu. */
static uint64_t float_to_int(double x, const KjType *to)
{
    if (isnan(x))
        return 0;
    int bits = kj_type_int_bits(to);
    double t = trunc(x);
    if (is_signed(to)) {
        double high = ldexp(1.0, bits - 1);
        if (t >= high)
            return wrap(to, ((uint64_t)1 << (bits - 1)) - 1);
        if (t <= -high)
            return wrap(to, (uint64_t)1 << (bits - 1));
        return wrap(to, (uint64_t)(int64_t)t);
    }
    if (t <= 0)
        return 0;
    if (t >= ldexp(1.0, bits))
        return bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    return (uint64_t)t;
}

RefValue ref_convert(RefValue v, const KjType *from, const KjType *to)
{
    if (from == to)
        return v;
    RefValue r = {0};
    if (is_complex(to)) {
        double re, im = 0;
        if (is_complex(from)) {
            re = creal(v.c);
            im = cimag(v.c);
        } else if (is_float(from)) {
            re = v.f;
        } else {
            re = is_single(to) ? int_to_single(v, from) : real_value(v, from);
        }
        /* Parts that were not f32 become f32: the one rounding c64 asks for. */
        if (is_single(to) && !is_single(from)) {
            re = to_single(re);
            im = to_single(im);
        }
        r.c = CMPLX(re, im);
        return r;
    }
    if (is_complex(from)) /* complex to real: the real part */
        return ref_convert((RefValue){.f = creal(v.c)}, kj_type_complex_part(from), to);
    if (to->kind == KJ_TYPE_BOOL) {
        r.u = is_float(from) ? v.f != 0 : v.u != 0; /* NaN != 0: true */
        return r;
    }
    if (kj_type_is_half(to)) { /* one rounding, from the exact value (half.c) */
        r.f = kj_half_round(to->kind, is_float(from) ? v.f : real_value(v, from));
        return r;
    }
    if (is_float(to)) {
        if (is_float(from))
            r.f = to->kind == KJ_TYPE_F32 && from->kind != KJ_TYPE_F32 ? to_single(v.f) : v.f;
        else
            r.f = to->kind == KJ_TYPE_F32 ? int_to_single(v, from) : real_value(v, from);
        return r;
    }
    /* to an integer */
    if (is_float(from))
        r.u = float_to_int(v.f, to);
    else
        r.u = wrap(to, v.u); /* from bool, or an integer: extended already, so wrap suffices */
    return r;
}

/* ================================================================ state */

typedef enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE, FLOW_RETURN, FLOW_STOP } Flow;

/* Memory shared() and local() made, freed when the block (or call) ends. */
typedef struct Owned {
    struct Owned *next;
    const KjIrExpr *expr;  /* the SHARED or LOCAL expression that made it */
    const void *owner;     /* SHARED: NULL (the block); LOCAL: the thread's frame */
    RefArray array;
} Owned;

typedef struct Thread {
    int32_t sreg[KJ_SREG_COUNT];
    int64_t id; /* from 1, unique in the launch: who stored an element last */
    ucontext_t context;
    bool waiting, done;
} Thread;

typedef struct Ev {
    RefStatus *st;
    Thread *thread;  /* the kernel thread running; NULL outside kernels */
    Owned *owned;    /* this block's shared() and every local() */
    bool lock_step;  /* threads are fibers: syncthreads() yields */
    ucontext_t scheduler;
    const KjIrFunction *kernel;
    const RefValue *kernel_args;
} Ev;

typedef struct Frame {
    const KjIrFunction *fn;
    RefValue *slots; /* by KjIrVar.id */
    RefValue ret;
} Frame;

static void fail(Ev *ev, const KjIrExpr *e, const char *fmt, ...)
{
    if (ev->st->error[0])
        return;
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (e && e->loc.src)
        snprintf(ev->st->error, sizeof ev->st->error, "%s:%d:%d: %s", e->loc.src->path, e->loc.line,
                 e->loc.col, text);
    else
        snprintf(ev->st->error, sizeof ev->st->error, "%s", text);
}

static bool stopped(const Ev *ev) { return ev->st->error[0] != '\0'; }

static void note_magnitude(Ev *ev, double m)
{
    if (isfinite(m) && m > ev->st->magnitude)
        ev->st->magnitude = m;
}

static Flow exec(Ev *ev, Frame *fr, const KjIrStmt *s);
static RefValue eval(Ev *ev, Frame *fr, const KjIrExpr *e);

/* ================================================================ arithmetic */

static RefValue int_div(const KjType *t, KjIrOp op, uint64_t a, uint64_t d)
{
    RefValue r = {0};
    if (!is_signed(t)) {
        /* x / 0 is x and x % 0 is 0: the divisor 0 counts as 1 */
        uint64_t safe = d == 0 ? 1 : d;
        r.u = op == KJ_IR_DIV ? a / safe : a % safe;
        return r;
    }
    int64_t sa = (int64_t)a, sd = (int64_t)d;
    if (sd == 0 || sd == -1) {
        /* x / -1 is -x, wrapping MIN / -1 to MIN; x % -1 and x % 0 are 0 */
        r.u = op == KJ_IR_DIV ? wrap(t, sd == 0 ? a : 0 - a) : 0;
        return r;
    }
    r.u = wrap(t, (uint64_t)(op == KJ_IR_DIV ? sa / sd : sa % sd));
    return r;
}

/* The textbook product, each product and sum rounded to the parts' type as
 * the targets compute it (no C99 Annex G recovery of infinities). */
static double complex complex_mul(bool single, double complex x, double complex y)
{
    double a = creal(x), b = cimag(x), c = creal(y), d = cimag(y);
    return CMPLX(part(single, part(single, a * c) - part(single, b * d)),
                 part(single, part(single, a * d) + part(single, b * c)));
}

/* Smith's quotient, as the language documents and the back end computes it:
 * divided through by the divisor's larger part, so nothing is squared; a zero
 * divisor gives a/+0 and b/+0. */
static double complex complex_div(bool single, double complex x, double complex y)
{
    double a = creal(x), b = cimag(x), c = creal(y), d = cimag(y);
    if (c == 0 && d == 0)
        return CMPLX(a / 0.0, b / 0.0);
#define P(v) part(single, (v))
    if (!(fabs(c) < fabs(d))) {
        double r = P(d / c), t = P(c + P(d * r));
        return CMPLX(P(P(a + P(b * r)) / t), P(P(b - P(a * r)) / t));
    }
    double r = P(c / d), t = P(d + P(c * r));
    return CMPLX(P(P(b + P(a * r)) / t), P(P(P(b * r) - a) / t));
#undef P
}

static RefValue arith(Ev *ev, const KjIrExpr *e, KjIrOp op, const KjType *t, RefValue a, RefValue b)
{
    RefValue r = {0};
    if (is_complex(t)) {
        bool single = is_single(t);
        switch (op) {
        case KJ_IR_ADD:
            r.c = CMPLX(part(single, creal(a.c) + creal(b.c)), part(single, cimag(a.c) + cimag(b.c)));
            break;
        case KJ_IR_SUB:
            r.c = CMPLX(part(single, creal(a.c) - creal(b.c)), part(single, cimag(a.c) - cimag(b.c)));
            break;
        case KJ_IR_MUL: r.c = complex_mul(single, a.c, b.c); break;
        case KJ_IR_DIV: r.c = complex_div(single, a.c, b.c); break;
        default: fail(ev, e, "%s on complex operands", kj_ir_op_name(op)); break;
        }
        return r;
    }
    if (is_float(t)) {
        switch (op) {
        case KJ_IR_ADD: r.f = a.f + b.f; break;
        case KJ_IR_SUB: r.f = a.f - b.f; break;
        case KJ_IR_MUL: r.f = a.f * b.f; break;
        case KJ_IR_DIV: r.f = a.f / b.f; break;
        case KJ_IR_REM: r.f = fmod(a.f, b.f); break;
        default: fail(ev, e, "%s on float operands", kj_ir_op_name(op)); break;
        }
        r.f = round_to(t, r.f);
        return r;
    }
    int bits = kj_type_int_bits(t);
    switch (op) {
    case KJ_IR_ADD: r.u = wrap(t, a.u + b.u); break;
    case KJ_IR_SUB: r.u = wrap(t, a.u - b.u); break;
    case KJ_IR_MUL: r.u = wrap(t, a.u * b.u); break;
    case KJ_IR_DIV:
    case KJ_IR_REM: r = int_div(t, op, a.u, b.u); break;
    case KJ_IR_BITAND: r.u = a.u & b.u; break;
    case KJ_IR_BITOR: r.u = a.u | b.u; break;
    case KJ_IR_BITXOR: r.u = a.u ^ b.u; break;
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        /* The count, of any integer type, is masked to the operand's width (x86
         * and PTX do so); its low bits are the same whatever its own width. */
        unsigned count = (unsigned)(b.u & (uint64_t)(bits - 1));
        if (op == KJ_IR_SHL)
            r.u = wrap(t, a.u << count);
        else if (is_signed(t))
            r.u = wrap(t, (uint64_t)((int64_t)a.u >> count));
        else
            r.u = a.u >> count;
        break;
    }
    default: fail(ev, e, "%s on integer operands", kj_ir_op_name(op)); break;
    }
    return r;
}

static bool compare(KjIrOp op, const KjType *t, RefValue a, RefValue b)
{
    if (is_complex(t)) {
        bool eq = creal(a.c) == creal(b.c) && cimag(a.c) == cimag(b.c);
        return op == KJ_IR_EQ ? eq : !eq;
    }
    if (is_float(t)) {
        switch (op) {
        case KJ_IR_EQ: return a.f == b.f;
        case KJ_IR_NE: return a.f != b.f; /* unordered: NaN != anything */
        case KJ_IR_LT: return a.f < b.f;
        case KJ_IR_LE: return a.f <= b.f;
        case KJ_IR_GT: return a.f > b.f;
        case KJ_IR_GE: return a.f >= b.f;
        default: kj_unreachable();
        }
    }
    if (t->kind == KJ_TYPE_BOOL || !is_signed(t)) {
        switch (op) {
        case KJ_IR_EQ: return a.u == b.u;
        case KJ_IR_NE: return a.u != b.u;
        case KJ_IR_LT: return a.u < b.u;
        case KJ_IR_LE: return a.u <= b.u;
        case KJ_IR_GT: return a.u > b.u;
        case KJ_IR_GE: return a.u >= b.u;
        default: kj_unreachable();
        }
    }
    int64_t x = (int64_t)a.u, y = (int64_t)b.u;
    switch (op) {
    case KJ_IR_EQ: return x == y;
    case KJ_IR_NE: return x != y;
    case KJ_IR_LT: return x < y;
    case KJ_IR_LE: return x <= y;
    case KJ_IR_GT: return x > y;
    case KJ_IR_GE: return x >= y;
    default: kj_unreachable();
    }
}

static RefValue math(Ev *ev, const KjIrExpr *e, const RefValue *a)
{
    RefValue r = {0};
    double x = a[0].f, y = e->arg_count > 1 ? a[1].f : 0, z = e->arg_count > 2 ? a[2].f : 0;
    switch (e->math) {
    case KJ_MATH_SQRT: r.f = sqrt(x); break;
    case KJ_MATH_CBRT: r.f = cbrt(x); break;
    case KJ_MATH_EXP: r.f = exp(x); break;
    case KJ_MATH_EXP2: r.f = exp2(x); break;
    case KJ_MATH_EXPM1: r.f = expm1(x); break;
    case KJ_MATH_LOG: r.f = log(x); break;
    case KJ_MATH_LOG2: r.f = log2(x); break;
    case KJ_MATH_LOG10: r.f = log10(x); break;
    case KJ_MATH_LOG1P: r.f = log1p(x); break;
    case KJ_MATH_SIN: r.f = sin(x); break;
    case KJ_MATH_COS: r.f = cos(x); break;
    case KJ_MATH_TAN: r.f = tan(x); break;
    case KJ_MATH_ASIN: r.f = asin(x); break;
    case KJ_MATH_ACOS: r.f = acos(x); break;
    case KJ_MATH_ATAN: r.f = atan(x); break;
    case KJ_MATH_ATAN2: r.f = atan2(x, y); break;
    case KJ_MATH_SINH: r.f = sinh(x); break;
    case KJ_MATH_COSH: r.f = cosh(x); break;
    case KJ_MATH_TANH: r.f = tanh(x); break;
    case KJ_MATH_ASINH: r.f = asinh(x); break;
    case KJ_MATH_ACOSH: r.f = acosh(x); break;
    case KJ_MATH_ATANH: r.f = atanh(x); break;
    case KJ_MATH_POW: r.f = pow(x, y); break;
    case KJ_MATH_HYPOT: r.f = hypot(x, y); break;
    case KJ_MATH_FLOOR: r.f = floor(x); break;
    case KJ_MATH_CEIL: r.f = ceil(x); break;
    case KJ_MATH_TRUNC: r.f = trunc(x); break;
    case KJ_MATH_ROUND: r.f = round(x); break;
    case KJ_MATH_FABS: r.f = fabs(x); break;
    /* fmin and fmax, with -0 below +0 (docs/language.md) */
    case KJ_MATH_FMIN: r.f = x == y ? (signbit(x) ? x : y) : fmin(x, y); break;
    case KJ_MATH_FMAX: r.f = x == y ? (signbit(x) ? y : x) : fmax(x, y); break;
    /* one rounding, to the type: fmaf for f32 (a double fma then a rounding to
     * f32 could round twice) */
    case KJ_MATH_FMA: r.f = e->type->kind == KJ_TYPE_F32 ? fmaf((float)x, (float)y, (float)z)
                                                        : fma(x, y, z); break;
    case KJ_MATH_ERF: r.f = erf(x); break;
    case KJ_MATH_ERFC: r.f = erfc(x); break;
    case KJ_MATH_LGAMMA: {
        int sign;
        r.f = lgamma_r(x, &sign);
        break;
    }
    case KJ_MATH_TGAMMA: r.f = tgamma(x); break;
    case KJ_MATH_COPYSIGN: r.f = isnan(y) ? fabs(x) : copysign(x, y); break; /* a NaN reads as positive */
    case KJ_MATH_FMOD: r.f = fmod(x, y); break;
    case KJ_MATH_ISNAN: r.u = isnan(x) != 0; break;
    case KJ_MATH_ISINF: r.u = isinf(x) != 0; break;
    case KJ_MATH_ISFINITE: r.u = isfinite(x) != 0; break;
    case KJ_MATH_COUNT: fail(ev, e, "no math function %d", (int)e->math); break;
    }
    return r;
}

/* The complex math built-ins: C99's (glibc's) functions, which follow the
 * same branch cuts and signed zeros; pow adds the language's rule for 0. */
static RefValue complex_math(Ev *ev, const KjIrExpr *e, const RefValue *a)
{
    RefValue r = {0};
    double complex z = a[0].c;
    switch (e->math) {
    case KJ_MATH_SQRT: r.c = csqrt(z); break;
    case KJ_MATH_EXP: r.c = cexp(z); break;
    case KJ_MATH_LOG: r.c = clog(z); break;
    case KJ_MATH_SIN: r.c = csin(z); break;
    case KJ_MATH_COS: r.c = ccos(z); break;
    case KJ_MATH_TANH: r.c = ctanh(z); break;
    case KJ_MATH_POW: {
        double complex w = a[1].c;
        if (z == 0 && w == 0)
            r.c = 1;
        else if (z == 0 && creal(w) > 0)
            r.c = 0;
        else
            r.c = cpow(z, w);
        break;
    }
    default: fail(ev, e, "no complex %s", kj_math_names[e->math]); break;
    }
    return r;
}

/* x ** n for an integer n held at run time (or a constant the checker left). */
static RefValue int_power(const KjType *t, RefValue x, int64_t n)
{
    RefValue r = {0};
    uint64_t m = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
    if (is_float(t)) {
        /* square-and-multiply, each product rounded to the type, as the
         * targets multiply (1 * x is x for a real x) */
        double acc = 1, base = x.f;
        for (; m; m >>= 1) {
            if (m & 1)
                acc = round_to(t, acc * base);
            if (m > 1)
                base = round_to(t, base * base);
        }
        r.f = n < 0 ? round_to(t, 1.0 / acc) : acc;
        return r;
    }
    if (is_complex(t)) {
        double complex acc = 1, base = x.c;
        for (; m; m >>= 1) {
            if (m & 1)
                acc = complex_mul(is_single(t), acc, base);
            if (m > 1)
                base = complex_mul(is_single(t), base, base);
        }
        r.c = n < 0 ? complex_div(is_single(t), 1, acc) : acc;
        return r;
    }
    uint64_t acc = 1, base = x.u;
    for (; m; m >>= 1) {
        if (m & 1)
            acc = wrap(t, acc * base);
        base = wrap(t, base * base);
    }
    if (n < 0) {
        /* the integer 1 / x**-n: 1 for x = 1, +-1 for x = -1, else 0 */
        bool minus_one = is_signed(t) && (int64_t)x.u == -1;
        acc = x.u == 1 ? 1 : minus_one ? acc : 0;
    }
    r.u = acc;
    return r;
}

/* ================================================================ memory */

static RefArray *new_owned_shaped(Ev *ev, const KjIrExpr *e, const void *owner,
                                  const int64_t *shape);

static RefArray *new_owned(Ev *ev, const KjIrExpr *e, const void *owner)
{
    return new_owned_shaped(ev, e, owner, e->alloc_shape);
}

/* shape: the extents (a local() sized at launch: computed from the frame) */
static RefArray *new_owned_shaped(Ev *ev, const KjIrExpr *e, const void *owner,
                                  const int64_t *shape)
{
    int64_t count = 1;
    for (int k = 0; k < e->alloc_ndim; k++)
        count *= shape[k];
    Owned *o = kj_xcalloc(1, sizeof *o);
    /* shared memory is zeroed on the cpu targets; local() arrays that are read
     * before written are a bug of the program, so zero is as good as any */
    void *data = kj_xcalloc((size_t)count, (size_t)ref_elem_size(e->alloc_elem->kind));
    o->array = ref_array_make(data, e->alloc_elem->kind, e->alloc_ndim, shape);
    o->expr = e;
    o->owner = owner;
    o->next = ev->owned;
    ev->owned = o;
    return &o->array;
}

static void free_owned(Ev *ev)
{
    while (ev->owned) {
        Owned *o = ev->owned;
        ev->owned = o->next;
        free(o->array.data);
        free(o);
    }
}

/* The array an array-typed expression names: a variable, or the memory that a
 * shared() (one per block) or local() (one per thread and expression, kept
 * across iterations as the alloca is) made. */
static RefArray *eval_array(Ev *ev, Frame *fr, const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_VAR: {
        RefArray *a = fr->slots[e->var->id].array;
        if (!a)
            fail(ev, e, "array variable %s used before it is set", e->var->name);
        return a;
    }
    case KJ_IR_SHARED:
    case KJ_IR_LOCAL: {
        const void *owner = e->op == KJ_IR_LOCAL ? (const void *)ev->thread : NULL;
        for (Owned *o = ev->owned; o; o = o->next)
            if (o->expr == e && o->owner == owner)
                return &o->array;
        /* a local() sized at launch: its sizes from the kernel's parameters,
         * which it never assigns (local_size.c) */
        int64_t shape[3];
        for (int k = 0; k < e->alloc_ndim && k < 3; k++)
            shape[k] = e->alloc_size[k]
                           ? (int64_t)ref_convert(eval(ev, fr, e->alloc_size[k]),
                                                  e->alloc_size[k]->type,
                                                  kj_type_scalar(KJ_TYPE_I64)).u
                           : e->alloc_shape[k];
        return new_owned_shaped(ev, e, owner, shape);
    }
    case KJ_IR_SELECT: {
        RefValue c = eval(ev, fr, e->args[0]);
        return eval_array(ev, fr, e->args[c.u ? 1 : 2]);
    }
    case KJ_IR_CONST_ARRAY: {
        /* one copy of the table's bytes per evaluation, for every thread */
        const void *owner = e->const_array;
        for (Owned *o = ev->owned; o; o = o->next)
            if (o->owner == owner)
                return &o->array;
        RefArray *a = new_owned(ev, e, owner);
        memcpy(a->data, e->const_array->bytes, (size_t)e->const_array->size);
        return a;
    }
    default:
        fail(ev, e, "an array from a %s expression", kj_ir_op_name(e->op));
        return NULL;
    }
}

static int64_t as_index(Ev *ev, Frame *fr, const KjIrExpr *e)
{
    RefValue v = ref_convert(eval(ev, fr, e), e->type, kj_type_scalar(KJ_TYPE_I64));
    return (int64_t)v.u;
}

/* The storage offset of an element, or -1 (and a failure) outside the array. */
static int64_t element_offset(Ev *ev, Frame *fr, const KjIrExpr *at, RefArray *a,
                              KjIrExpr *const *indices, int count, bool contiguous)
{
    int64_t idx[KJ_MAX_DIMS];
    for (int k = 0; k < count && k < KJ_MAX_DIMS; k++)
        idx[k] = as_index(ev, fr, indices[k]);
    if (!a || stopped(ev))
        return -1;
    if (contiguous) {
        if (idx[0] < 0 || idx[0] >= a->count) {
            fail(ev, at, "flat index %lld outside an array of %lld", (long long)idx[0],
                 (long long)a->count);
            return -1;
        }
        return idx[0];
    }
    if (count != a->ndim) {
        fail(ev, at, "%d indices for a %d-D array", count, a->ndim);
        return -1;
    }
    int64_t offset = 0;
    for (int k = 0; k < count; k++) {
        if (idx[k] < 0 || idx[k] >= a->shape[k]) {
            fail(ev, at, "index %lld outside dimension %d of extent %lld", (long long)idx[k], k,
                 (long long)a->shape[k]);
            return -1;
        }
        offset += idx[k] * a->strides[k];
    }
    if (offset < 0 || offset >= a->count) {
        fail(ev, at, "element %lld outside the storage of %lld", (long long)offset,
             (long long)a->count);
        return -1;
    }
    return offset;
}

/* A plain store.  In a kernel, two threads storing different values into one
 * element of a parameter array make that element racy. */
static void store(Ev *ev, RefArray *a, int64_t offset, RefValue v)
{
    if (ev->thread && a->writer) {
        int size = ref_elem_size(a->elem);
        unsigned char before[16], after[16];
        memcpy(before, (char *)a->data + offset * size, (size_t)size);
        ref_array_write(a, offset, v);
        memcpy(after, (char *)a->data + offset * size, (size_t)size);
        int64_t last = a->writer[offset];
        if (last && last != ev->thread->id && memcmp(before, after, (size_t)size) != 0)
            a->racy[offset] = true;
        a->writer[offset] = ev->thread->id;
        return;
    }
    ref_array_write(a, offset, v);
}

static RefValue atomic(Ev *ev, Frame *fr, const KjIrExpr *e)
{
    RefValue zero = {0};
    RefArray *a = eval_array(ev, fr, e->args[0]);
    int ndim = e->args[0]->type->ndim;
    /* one index per dimension, as an element access */
    int64_t offset = element_offset(ev, fr, e, a, e->args + 1, ndim, false);
    RefValue v = ref_convert(eval(ev, fr, e->args[1 + ndim]), e->args[1 + ndim]->type, e->type);
    RefValue nv = zero;
    if (e->atomic == KJ_ATOMIC_CAS)
        nv = ref_convert(eval(ev, fr, e->args[2 + ndim]), e->args[2 + ndim]->type, e->type);
    if (!a || offset < 0 || stopped(ev))
        return zero;
    RefValue old = ref_array_read(a, offset), now = old;
    const KjType *t = e->type;
    switch (e->atomic) {
    case KJ_ATOMIC_ADD:
    case KJ_ATOMIC_SUB: {
        bool add = e->atomic == KJ_ATOMIC_ADD;
        if (is_float(t))
            now.f = add ? old.f + v.f : old.f - v.f;
        else
            now.u = wrap(t, add ? old.u + v.u : old.u - v.u);
        break;
    }
    case KJ_ATOMIC_MIN:
    case KJ_ATOMIC_MAX: {
        bool take_v;
        if (is_float(t)) {
            /* a NaN loses to a number (minnum / maxnum), and -0 is below +0,
             * as for the min and max built-ins */
            double x = old.f, y = v.f;
            if (e->atomic == KJ_ATOMIC_MIN)
                now.f = x == y ? (signbit(x) ? x : y) : fmin(x, y);
            else
                now.f = x == y ? (signbit(x) ? y : x) : fmax(x, y);
            break;
        }
        take_v = e->atomic == KJ_ATOMIC_MIN ? compare(KJ_IR_LT, t, v, old) : compare(KJ_IR_GT, t, v, old);
        if (take_v)
            now = v;
        break;
    }
    case KJ_ATOMIC_EXCH: now = v; break;
    case KJ_ATOMIC_AND: now.u = old.u & v.u; break;
    case KJ_ATOMIC_OR: now.u = old.u | v.u; break;
    case KJ_ATOMIC_XOR: now.u = old.u ^ v.u; break;
    /* CUDA's atomicInc and atomicDec, on unsigned values */
    case KJ_ATOMIC_INC: now.u = old.u >= v.u ? 0 : old.u + 1; break;
    case KJ_ATOMIC_DEC: now.u = old.u == 0 || old.u > v.u ? v.u : old.u - 1; break;
    case KJ_ATOMIC_CAS: {
        /* compares the stored bits with the expected value's bits in memory */
        unsigned char expected[16];
        RefArray probe = *a;
        probe.data = expected;
        probe.count = 1;
        ref_array_write(&probe, 0, v);
        int size = ref_elem_size(a->elem);
        if (memcmp(expected, (char *)a->data + offset * size, (size_t)size) == 0)
            now = nv;
        break;
    }
    case KJ_ATOMIC_COUNT: fail(ev, e, "no atomic op %d", (int)e->atomic); break;
    }
    ref_array_write(a, offset, now);
    return old;
}

/* ================================================================ calls */

/* outs (may be NULL): a function of several outputs' outputs 1.., from
 * their variables as it returned (return (z, n) sets them). */
static RefValue call_outputs(Ev *ev, const KjIrFunction *fn, const RefValue *args, RefValue *outs)
{
    int nslots = fn->locals.count > 0 ? fn->locals.count : 1;
    RefValue slots[nslots];
    memset(slots, 0, sizeof slots);
    for (int i = 0; i < fn->param_count; i++)
        slots[fn->params[i]->id] = args[i];
    Frame fr = {.fn = fn, .slots = slots};
    exec(ev, &fr, fn->body);
    for (int k = 1; outs && k < fn->output_count; k++)
        outs[k] = slots[fn->outputs[k]->id];
    return fr.ret;
}

static RefValue call(Ev *ev, const KjIrFunction *fn, const RefValue *args)
{
    return call_outputs(ev, fn, args, NULL);
}

/* ================================================================ expressions */

static RefValue eval_op(Ev *ev, Frame *fr, const KjIrExpr *e)
{
    RefValue r = {0};
    const KjType *t = e->type;
    switch (e->op) {
    case KJ_IR_CONST:
        if (is_complex(t))
            r.c = CMPLX(e->const_float, e->const_imag);
        else if (is_float(t))
            r.f = e->const_float;
        else
            r.u = wrap(t, e->const_int);
        return r;
    case KJ_IR_VAR:
        return fr->slots[e->var->id];
    case KJ_IR_NEG: {
        RefValue a = ref_convert(eval(ev, fr, e->args[0]), e->args[0]->type, t);
        if (is_complex(t))
            r.c = CMPLX(-creal(a.c), -cimag(a.c));
        else if (is_float(t))
            r.f = -a.f;
        else
            r.u = wrap(t, 0 - a.u);
        return r;
    }
    case KJ_IR_NOT:
        r.u = eval(ev, fr, e->args[0]).u == 0;
        return r;
    case KJ_IR_BITNOT:
        r.u = wrap(t, ~ref_convert(eval(ev, fr, e->args[0]), e->args[0]->type, t).u);
        return r;
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR: {
        RefValue a = ref_convert(eval(ev, fr, e->args[0]), e->args[0]->type, t);
        RefValue b = eval(ev, fr, e->args[1]);
        if (e->op != KJ_IR_SHL && e->op != KJ_IR_SHR)
            b = ref_convert(b, e->args[1]->type, t);
        return arith(ev, e, e->op, t, a, b);
    }
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        const KjType *ot = e->args[0]->type;
        RefValue a = eval(ev, fr, e->args[0]);
        RefValue b = ref_convert(eval(ev, fr, e->args[1]), e->args[1]->type, ot);
        r.u = compare(e->op, ot, a, b);
        return r;
    }
    case KJ_IR_LOGAND:
    case KJ_IR_LOGOR: {
        bool a = eval(ev, fr, e->args[0]).u != 0;
        if (e->op == KJ_IR_LOGAND ? !a : a)
            r.u = a; /* short circuit: the right side is not evaluated */
        else
            r.u = eval(ev, fr, e->args[1]).u != 0;
        return r;
    }
    case KJ_IR_SELECT: {
        if (t->kind == KJ_TYPE_ARRAY) { /* let src = c ? a : b; */
            r.array = eval_array(ev, fr, e);
            return r;
        }
        int arm = eval(ev, fr, e->args[0]).u ? 1 : 2;
        return ref_convert(eval(ev, fr, e->args[arm]), e->args[arm]->type, t);
    }
    case KJ_IR_CAST: {
        RefValue v = eval(ev, fr, e->args[0]);
        /* NaN to an integer is unspecified (0 on cpu, the GPU's own value on
         * cuda): such an input is drawn again, like an index out of range. */
        if (kj_type_is_float(e->args[0]->type) && kj_type_is_int(t) && isnan(v.f)) {
            fail(ev, e, "NaN converted to %s (unspecified)", kj_type_name(t));
            return v;
        }
        return ref_convert(v, e->args[0]->type, t);
    }
    case KJ_IR_CALL: {
        const KjIrFunction *callee = e->callee;
        RefValue args[e->arg_count > 0 ? e->arg_count : 1];
        for (int i = 0; i < e->arg_count; i++) {
            const KjType *pt = callee->params[i]->type;
            if (pt->kind == KJ_TYPE_ARRAY)
                args[i].array = eval_array(ev, fr, e->args[i]);
            else
                args[i] = ref_convert(eval(ev, fr, e->args[i]), e->args[i]->type, pt);
        }
        if (stopped(ev))
            return r;
        return ref_convert(call(ev, callee, args), callee->ret, t);
    }
    case KJ_IR_MATH: {
        RefValue a[3] = {{0}};
        const KjType *ft = e->args[0]->type;
        for (int i = 0; i < e->arg_count && i < 3; i++)
            a[i] = ref_convert(eval(ev, fr, e->args[i]), e->args[i]->type, ft);
        if (is_complex(t)) {
            r = complex_math(ev, e, a);
            if (is_single(t))
                r.c = CMPLX(to_single(creal(r.c)), to_single(cimag(r.c)));
            return r;
        }
        r = math(ev, e, a);
        if (is_float(t))
            r.f = round_to(t, r.f);
        return r;
    }
    case KJ_IR_IPOW: {
        RefValue x = ref_convert(eval(ev, fr, e->args[0]), e->args[0]->type, t);
        int64_t n = (int64_t)ref_convert(eval(ev, fr, e->args[1]), e->args[1]->type,
                                         kj_type_scalar(KJ_TYPE_I64)).u;
        return int_power(t, x, n);
    }
    case KJ_IR_COMPLEX: {
        const KjType *part = kj_type_complex_part(t);
        double re = ref_convert(eval(ev, fr, e->args[0]), e->args[0]->type, part).f;
        double im = ref_convert(eval(ev, fr, e->args[1]), e->args[1]->type, part).f;
        r.c = CMPLX(re, im);
        return r;
    }
    case KJ_IR_REAL:
        r.f = creal(eval(ev, fr, e->args[0]).c);
        return r;
    case KJ_IR_IMAG:
        r.f = cimag(eval(ev, fr, e->args[0]).c);
        return r;
    case KJ_IR_CONJ: {
        double complex z = eval(ev, fr, e->args[0]).c;
        r.c = CMPLX(creal(z), -cimag(z));
        return r;
    }
    case KJ_IR_CABS: {
        double complex z = eval(ev, fr, e->args[0]).c;
        r.f = hypot(creal(z), cimag(z));
        return r;
    }
    case KJ_IR_CARG:
        r.f = carg(eval(ev, fr, e->args[0]).c);
        return r;
    case KJ_IR_POLAR: {
        double m = eval(ev, fr, e->args[0]).f, theta = eval(ev, fr, e->args[1]).f;
        r.c = CMPLX(m * cos(theta), m * sin(theta));
        return r;
    }
    case KJ_IR_MULHI: {
        uint64_t a = eval(ev, fr, e->args[0]).u, b = eval(ev, fr, e->args[1]).u;
        int bits = kj_type_int_bits(t);
        if (is_signed(t))
            r.u = wrap(t, (uint64_t)(((__int128)(int64_t)a * (int64_t)b) >> bits));
        else
            r.u = wrap(t, (uint64_t)(((unsigned __int128)a * b) >> bits));
        return r;
    }
    case KJ_IR_LOAD: {
        RefArray *a = eval_array(ev, fr, e->args[0]);
        int64_t offset = element_offset(ev, fr, e, a, e->args + 1, e->arg_count - 1, e->contiguous);
        if (offset < 0)
            return r;
        return ref_convert(ref_array_read(a, offset), kj_type_scalar(a->elem), t);
    }
    case KJ_IR_DIM: {
        RefArray *a = eval_array(ev, fr, e->args[0]);
        if (!a)
            return r;
        if (e->dim < 0 || e->dim >= a->ndim) {
            fail(ev, e, "dimension %d of a %d-D array", e->dim, a->ndim);
            return r;
        }
        r.u = (uint64_t)a->shape[e->dim];
        return r;
    }
    case KJ_IR_SREG:
        if (!ev->thread) {
            fail(ev, e, "%s outside a kernel", kj_special_reg_names[e->sreg]);
            return r;
        }
        r.u = wrap(t, (uint64_t)(int64_t)ev->thread->sreg[e->sreg]);
        return r;
    case KJ_IR_SHARED:
    case KJ_IR_LOCAL:
    case KJ_IR_CONST_ARRAY:
        r.array = eval_array(ev, fr, e);
        return r;
    case KJ_IR_ATOMIC:
        return atomic(ev, fr, e);
    case KJ_IR_SYNCTHREADS:
        if (!ev->thread || !ev->lock_step) {
            fail(ev, e, "syncthreads() outside a lock-step kernel run");
            return r;
        }
        ev->thread->waiting = true;
        swapcontext(&ev->thread->context, &ev->scheduler);
        return r;
    case KJ_IR_PRINT:
        /* Its values are evaluated (they may fail); the text is the
         * targets' business, compared by the golden .out files. */
        for (int i = 0; i < e->arg_count && !ev->st->error[0]; i++)
            eval(ev, fr, e->args[i]);
        return r;
    case KJ_IR_EXEC:
        /* laneid(): the thread's linear index in its block, modulo 32 */
        if (e->exec == KJ_EXEC_LANEID && ev->thread) {
            const int32_t *s = ev->thread->sreg;
            int64_t linear = s[KJ_SREG_TID_X] + (int64_t)s[KJ_SREG_BDIM_X] *
                             (s[KJ_SREG_TID_Y] + (int64_t)s[KJ_SREG_BDIM_Y] * s[KJ_SREG_TID_Z]);
            r.u = wrap(t, (uint64_t)(linear % 32));
            return r;
        }
        /* fall through */
    case KJ_IR_DYNAMIC_SHARED:
    case KJ_IR_VIEW:
        /* Warp, block and grid collectives and the launch's dynamic shared
         * memory are checked by test_exec.c against references of their own;
         * views (the guvectorize pass's) by test_guvectorize.c. */
        fail(ev, e, "the evaluator does not model %s", kj_ir_op_name(e->op));
        return r;
    case KJ_IR_OP_COUNT:
        break;
    }
    fail(ev, e, "unknown IR op %d", (int)e->op);
    return r;
}

static RefValue eval(Ev *ev, Frame *fr, const KjIrExpr *e)
{
    if (stopped(ev)) {
        RefValue zero = {0};
        return zero;
    }
    RefValue v = eval_op(ev, fr, e);
    double m;
    if (is_float(e->type))
        m = fabs(v.f);
    else if (is_complex(e->type))
        m = fmax(fabs(creal(v.c)), fabs(cimag(v.c)));
    else
        return v;
    note_magnitude(ev, m);
    /* f32 arithmetic rounds where the reference does not: what it feeds
     * carries f32-sized errors */
    bool exact = e->op == KJ_IR_VAR || e->op == KJ_IR_CONST || e->op == KJ_IR_LOAD ||
                 e->op == KJ_IR_SELECT || e->op == KJ_IR_NEG || e->op == KJ_IR_REAL ||
                 e->op == KJ_IR_IMAG || e->op == KJ_IR_CONJ ||
                 (e->op == KJ_IR_CAST && is_single(e->args[0]->type));
    if (is_single(e->type) && !exact && isfinite(m)) {
        if (m > ev->st->single_magnitude)
            ev->st->single_magnitude = m;
        /* the range is f32's even where the precision is not: a value f32
         * cannot hold overflows, as the f32 arithmetic does */
        if (is_float(e->type) && isinf(to_single(v.f)))
            v.f = to_single(v.f);
        else if (is_complex(e->type) && isinf(to_single(m)))
            v.c = CMPLX(to_single(creal(v.c)), to_single(cimag(v.c)));
    }
    return v;
}

/* ================================================================ statements */

static bool spend_step(Ev *ev, const KjIrStmt *s)
{
    int64_t budget = ev->st->budget > 0 ? ev->st->budget : 20000000;
    if (++ev->st->steps > budget) {
        if (!stopped(ev))
            snprintf(ev->st->error, sizeof ev->st->error,
                     "%s:%d: ran past the budget of %lld steps (a loop too long to compare)",
                     s->loc.src ? s->loc.src->path : "?", s->loc.line, (long long)budget);
        return false;
    }
    return true;
}

static Flow loop_body(Ev *ev, Frame *fr, const KjIrStmt *body, bool *leave)
{
    Flow f = exec(ev, fr, body);
    *leave = f == FLOW_BREAK || f == FLOW_RETURN || f == FLOW_STOP;
    return f == FLOW_BREAK ? FLOW_NEXT : f;
}

static Flow exec(Ev *ev, Frame *fr, const KjIrStmt *s)
{
    if (stopped(ev) || !spend_step(ev, s))
        return FLOW_STOP;
    Flow f = FLOW_NEXT;
    bool leave = false;
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++) {
            f = exec(ev, fr, s->stmts.items[i]);
            if (f != FLOW_NEXT)
                return f;
        }
        return FLOW_NEXT;
    case KJ_IR_STMT_EVAL:
        eval(ev, fr, s->value);
        break;
    case KJ_IR_STMT_SET:
        if (s->var->type->kind == KJ_TYPE_ARRAY)
            fr->slots[s->var->id].array = eval_array(ev, fr, s->value);
        else
            fr->slots[s->var->id] = ref_convert(eval(ev, fr, s->value), s->value->type, s->var->type);
        break;
    case KJ_IR_STMT_STORE: {
        RefArray *a = eval_array(ev, fr, s->array);
        int64_t offset = element_offset(ev, fr, s->array, a, s->indices, s->index_count, s->contiguous);
        RefValue v = eval(ev, fr, s->value);
        if (offset >= 0 && !stopped(ev))
            store(ev, a, offset, ref_convert(v, s->value->type, kj_type_scalar(a->elem)));
        break;
    }
    case KJ_IR_STMT_IF:
        if (eval(ev, fr, s->cond).u)
            f = exec(ev, fr, s->then_stmt);
        else if (s->else_stmt)
            f = exec(ev, fr, s->else_stmt);
        break;
    case KJ_IR_STMT_FOR: {
        /* A hidden counter from start, stop and step evaluated once; the
         * counter wraps in the loop variable's type. */
        const KjType *t = s->var->type;
        RefValue i = ref_convert(eval(ev, fr, s->start), s->start->type, t);
        RefValue stop = ref_convert(eval(ev, fr, s->stop), s->stop->type, t);
        RefValue step = ref_convert(eval(ev, fr, s->step), s->step->type, t);
        RefValue zero = {0};
        bool up = is_signed(t) ? compare(KJ_IR_GT, t, step, zero) : step.u != 0;
        while (!stopped(ev) && compare(up ? KJ_IR_LT : KJ_IR_GT, t, i, stop)) {
            if (!spend_step(ev, s))
                return FLOW_STOP;
            fr->slots[s->var->id] = i;
            f = loop_body(ev, fr, s->body, &leave);
            if (leave)
                break;
            i.u = wrap(t, i.u + step.u);
        }
        break;
    }
    case KJ_IR_STMT_WHILE:
        while (!stopped(ev) && eval(ev, fr, s->cond).u) {
            if (!spend_step(ev, s))
                return FLOW_STOP;
            f = loop_body(ev, fr, s->body, &leave);
            if (leave)
                break;
        }
        break;
    case KJ_IR_STMT_BREAK:
        return FLOW_BREAK;
    case KJ_IR_STMT_CONTINUE:
        return FLOW_CONTINUE;
    case KJ_IR_STMT_RETURN:
        if (s->value && fr->fn->ret->kind != KJ_TYPE_VOID)
            fr->ret = ref_convert(eval(ev, fr, s->value), s->value->type, fr->fn->ret);
        return FLOW_RETURN;
    case KJ_IR_STMT_PARFOR: {
        /* the vectorize pass's index space, walked in order */
        int64_t stop = as_index(ev, fr, s->stop);
        for (int64_t i = 0; i < stop && !stopped(ev); i++) {
            if (!spend_step(ev, s))
                return FLOW_STOP;
            fr->slots[s->var->id].u = (uint64_t)i;
            f = loop_body(ev, fr, s->body, &leave);
            if (leave)
                break;
        }
        break;
    }
    case KJ_IR_STMT_THREADS: /* kernels' split forms: not evaluated here */
        fail(ev, NULL, "the reference evaluator runs no loop over a block's threads");
        break;
    case KJ_IR_STMT_COUNT:
        break;
    }
    if (stopped(ev))
        return FLOW_STOP;
    /* a loop's last `continue` ends with the loop; any other flow goes up */
    bool is_loop = s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE ||
                   s->kind == KJ_IR_STMT_PARFOR;
    return is_loop && f == FLOW_CONTINUE ? FLOW_NEXT : f;
}

/* ================================================================ entry points */

bool ref_call(const KjIrFunction *fn, const RefValue *args, RefValue *result, RefStatus *status)
{
    return ref_call_outputs(fn, args, result, status);
}

bool ref_call_outputs(const KjIrFunction *fn, const RefValue *args, RefValue *result,
                      RefStatus *status)
{
    memset(status->error, 0, sizeof status->error);
    status->magnitude = 0;
    status->single_magnitude = 0;
    status->steps = 0;
    status->lock_step = false;
    Ev ev;
    memset(&ev, 0, sizeof ev);
    ev.st = status;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        if (is_float(t))
            note_magnitude(&ev, fabs(args[i].f));
        else if (is_complex(t))
            note_magnitude(&ev, fmax(fabs(creal(args[i].c)), fabs(cimag(args[i].c))));
    }
    RefValue outs[KJ_MAX_VEC_OUTPUTS] = {{0}};
    RefValue r = call_outputs(&ev, fn, args, outs);
    free_owned(&ev);
    if (result) {
        *result = r;
        for (int k = 1; k < fn->output_count; k++)
            result[k] = outs[k];
    }
    return !stopped(&ev);
}

/* The fiber body of one kernel thread: the scheduler made it current. */
static _Thread_local Ev *fiber_ev;

static void run_thread(Ev *ev)
{
    call(ev, ev->kernel, ev->kernel_args);
    ev->thread->done = true;
}

static void fiber_main(void)
{
    run_thread(fiber_ev);
    /* returning resumes uc_link: the scheduler */
}

enum { FIBER_STACK = 256 * 1024 };

/* One block: threads in order, or as fibers that run to the next barrier in
 * turn, all of them, before any goes past it. */
static void run_block(Ev *ev, Thread *threads, int count, char *stacks)
{
    if (!ev->lock_step) {
        for (int t = 0; t < count && !stopped(ev); t++) {
            ev->thread = &threads[t];
            run_thread(ev);
        }
        return;
    }
    for (int t = 0; t < count; t++) {
        getcontext(&threads[t].context);
        threads[t].context.uc_stack.ss_sp = stacks + (size_t)t * FIBER_STACK;
        threads[t].context.uc_stack.ss_size = FIBER_STACK;
        threads[t].context.uc_link = &ev->scheduler;
        makecontext(&threads[t].context, fiber_main, 0);
    }
    for (;;) {
        int live = 0;
        for (int t = 0; t < count && !stopped(ev); t++) {
            if (threads[t].done)
                continue;
            threads[t].waiting = false;
            ev->thread = &threads[t];
            fiber_ev = ev;
            swapcontext(&ev->scheduler, &threads[t].context);
            if (!threads[t].done)
                live++;
        }
        /* every live thread waits at a barrier now (a finished thread counts as
         * arrived, as on the cpu targets): the next phase begins */
        if (live == 0 || stopped(ev))
            return;
    }
}

bool ref_launch(const KjIrFunction *fn, const RefValue *args, const uint32_t grid[3],
                const uint32_t block[3], RefStatus *status)
{
    memset(status->error, 0, sizeof status->error);
    status->magnitude = 0;
    status->single_magnitude = 0;
    status->steps = 0;
    Ev ev;
    memset(&ev, 0, sizeof ev);
    ev.st = status;
    ev.kernel = fn;
    ev.kernel_args = args;
    ev.lock_step = fn->uses_syncthreads;
    status->lock_step = ev.lock_step;
    for (int i = 0; i < fn->param_count; i++) {
        RefArray *a = fn->params[i]->type->kind == KJ_TYPE_ARRAY ? args[i].array : NULL;
        if (a && a->racy)
            a->writer = kj_xcalloc((size_t)a->count, sizeof *a->writer);
        else if (!a)
            note_magnitude(&ev, is_float(fn->params[i]->type) ? fabs(args[i].f) : 0);
    }
    int per_block = (int)(block[0] * block[1] * block[2]);
    Thread *threads = kj_xcalloc((size_t)per_block, sizeof *threads);
    char *stacks = ev.lock_step ? kj_xmalloc((size_t)per_block * FIBER_STACK) : NULL;
    int64_t block_index = 0;
    for (uint32_t bz = 0; bz < grid[2] && !stopped(&ev); bz++)
        for (uint32_t by = 0; by < grid[1] && !stopped(&ev); by++)
            for (uint32_t bx = 0; bx < grid[0] && !stopped(&ev); bx++, block_index++) {
                int n = 0;
                for (uint32_t tz = 0; tz < block[2]; tz++)
                    for (uint32_t ty = 0; ty < block[1]; ty++)
                        for (uint32_t tx = 0; tx < block[0]; tx++, n++) {
                            Thread *t = &threads[n];
                            memset(t, 0, sizeof *t);
                            int32_t v[KJ_SREG_COUNT] = {
                                [KJ_SREG_TID_X] = (int32_t)tx, [KJ_SREG_TID_Y] = (int32_t)ty,
                                [KJ_SREG_TID_Z] = (int32_t)tz, [KJ_SREG_BID_X] = (int32_t)bx,
                                [KJ_SREG_BID_Y] = (int32_t)by, [KJ_SREG_BID_Z] = (int32_t)bz,
                                [KJ_SREG_BDIM_X] = (int32_t)block[0], [KJ_SREG_BDIM_Y] = (int32_t)block[1],
                                [KJ_SREG_BDIM_Z] = (int32_t)block[2], [KJ_SREG_GDIM_X] = (int32_t)grid[0],
                                [KJ_SREG_GDIM_Y] = (int32_t)grid[1], [KJ_SREG_GDIM_Z] = (int32_t)grid[2]};
                            memcpy(t->sreg, v, sizeof v);
                            t->id = block_index * per_block + n + 1;
                        }
                run_block(&ev, threads, per_block, stacks);
                ev.thread = NULL;
                free_owned(&ev);
            }
    free(stacks);
    free(threads);
    for (int i = 0; i < fn->param_count; i++) {
        RefArray *a = fn->params[i]->type->kind == KJ_TYPE_ARRAY ? args[i].array : NULL;
        if (a && a->writer) {
            free(a->writer);
            a->writer = NULL;
        }
    }
    return !stopped(&ev);
}
