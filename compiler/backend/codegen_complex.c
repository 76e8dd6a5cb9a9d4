/*
 * codegen_complex.c: the complex math built-ins (sqrt exp log pow sin cos
 * tanh of c64 and c128, arg, polar) lowered to real math calls, for
 * codegen_expr.c.  Every real call goes through kj_codegen_math, so cpu code
 * calls libm (and libmvec in vectorised loops) and cuda code libdevice,
 * exactly as the real built-ins do; no target has a lowering of its own.
 *
 * The formulas are branch-free: special cases are selects, so loops over
 * them vectorise and GPU threads do not diverge.  Branch cuts and signed
 * zeros follow C99 Annex G (and so NumPy): sqrt and log are cut along the
 * negative real axis, the sign of a zero imaginary part choosing the side
 * (sqrt(-4 - 0i) = -2i, log(-1 - 0i) = -pi i).  Infinities and NaNs get
 * C99's results where the notes below say so; elsewhere they give what the
 * formula gives.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

static LLVMValueRef re_part(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 0, "re"); }
static LLVMValueRef im_part(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 1, "im"); }

static LLVMValueRef pack(Gen *g, LLVMTypeRef ct, LLVMValueRef re, LLVMValueRef im)
{
    LLVMValueRef v = LLVMGetUndef(ct);
    v = LLVMBuildInsertValue(g->b, v, re, 0, "");
    return LLVMBuildInsertValue(g->b, v, im, 1, "");
}

/* Shorthands over one part type. */
typedef struct Cx {
    Gen *g;
    LLVMTypeRef t;  /* the part type: float or double */
    LLVMTypeRef ct; /* the complex struct */
    bool single;
} Cx;

static LLVMValueRef k(Cx *c, double v) { return LLVMConstReal(c->t, v); }
static LLVMValueRef add(Cx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(c->g->b, a, b, ""); }
static LLVMValueRef sub(Cx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(c->g->b, a, b, ""); }
static LLVMValueRef mul(Cx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(c->g->b, a, b, ""); }
static LLVMValueRef fdiv(Cx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(c->g->b, a, b, ""); }
static LLVMValueRef neg(Cx *c, LLVMValueRef a) { return LLVMBuildFNeg(c->g->b, a, ""); }
static LLVMValueRef sel(Cx *c, LLVMValueRef cond, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(c->g->b, cond, a, b, "");
}
static LLVMValueRef cmp(Cx *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(c->g->b, p, a, b, "");
}

static LLVMValueRef m1(Cx *c, KjMathFn fn, LLVMValueRef x)
{
    return kj_codegen_math(c->g, fn, &x, 1);
}

static LLVMValueRef m2(Cx *c, KjMathFn fn, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a[2] = {x, y};
    return kj_codegen_math(c->g, fn, a, 2);
}

static LLVMValueRef m3(Cx *c, KjMathFn fn, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z)
{
    LLVMValueRef a[3] = {x, y, z};
    return kj_codegen_math(c->g, fn, a, 3);
}

/*
 * exp(x + iy) = e^x (cos y + i sin y).  Where e^x alone overflows (x above
 * 709 in f64, 88 in f32) it is taken as e^(x/2) twice, so a result that
 * fits does not turn into inf.  y = 0 keeps the imaginary part exactly y
 * (exp(inf + 0i) = inf + 0i, not inf * 0).
 */
static LLVMValueRef cx_exp(Cx *c, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef big = cmp(c, LLVMRealOGT, x, k(c, c->single ? 88.0 : 709.0));
    LLVMValueRef s = m1(c, KJ_MATH_EXP, sel(c, big, mul(c, x, k(c, 0.5)), x));
    LLVMValueRef scale = sel(c, big, s, k(c, 1.0));
    LLVMValueRef re = mul(c, mul(c, s, m1(c, KJ_MATH_COS, y)), scale);
    LLVMValueRef im = mul(c, mul(c, s, m1(c, KJ_MATH_SIN, y)), scale);
    im = sel(c, cmp(c, LLVMRealOEQ, y, k(c, 0.0)), y, im);
    return pack(c->g, c->ct, re, im);
}

/* a + b as a rounded sum and its exact rounding error (Knuth's TwoSum). */
static LLVMValueRef two_sum(Cx *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *err)
{
    LLVMValueRef s = add(c, a, b);
    LLVMValueRef bb = sub(c, s, a);
    *err = add(c, sub(c, a, sub(c, s, bb)), sub(c, b, bb));
    return s;
}

/* x * x rounded, and its exact rounding error.  The product is an fma with a
 * +0 addend: cuda contracts a multiply into the add that uses it, which
 * would round hi^2 - 1 once while the error term assumes x * x rounded. */
static LLVMValueRef exact_square(Cx *c, LLVMValueRef x, LLVMValueRef *err)
{
    LLVMValueRef sq = m3(c, KJ_MATH_FMA, x, x, k(c, 0.0));
    *err = m3(c, KJ_MATH_FMA, x, x, neg(c, sq));
    return sq;
}

/*
 * log(z) = log|z| + i arg(z).  Near the unit circle (0.7 < |z| < 1.5),
 * log|z| = log1p(hi^2 + lo^2 - 1) / 2, the argument summed from the exact
 * squares and exact sums (double the part's precision), so the real part
 * keeps its relative accuracy where log|z| is close to zero.
 */
static LLVMValueRef cx_log(Cx *c, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = m1(c, KJ_MATH_FABS, x), ay = m1(c, KJ_MATH_FABS, y);
    LLVMValueRef hi = m2(c, KJ_MATH_FMAX, ax, ay), lo = m2(c, KJ_MATH_FMIN, ax, ay);
    LLVMValueRef r = m2(c, KJ_MATH_HYPOT, x, y);
    LLVMValueRef hh_err, ll_err, e1, e2;
    LLVMValueRef hh = exact_square(c, hi, &hh_err), ll = exact_square(c, lo, &ll_err);
    LLVMValueRef s1 = two_sum(c, hh, k(c, -1.0), &e1);
    LLVMValueRef s2 = two_sum(c, s1, ll, &e2);
    LLVMValueRef sum = add(c, s2, add(c, add(c, e1, e2), add(c, hh_err, ll_err)));
    LLVMValueRef near_one = mul(c, k(c, 0.5), m1(c, KJ_MATH_LOG1P, sum));
    LLVMValueRef near = LLVMBuildAnd(c->g->b, cmp(c, LLVMRealOGT, r, k(c, 0.7)),
                                     cmp(c, LLVMRealOLT, r, k(c, 1.5)), "");
    LLVMValueRef re = sel(c, near, near_one, m1(c, KJ_MATH_LOG, r));
    return pack(c->g, c->ct, re, m2(c, KJ_MATH_ATAN2, y, x));
}

/*
 * sqrt(z), Kahan's way: t = sqrt((|x| + |z|) / 2); for x >= 0 the root is
 * t + i y/(2t), else |y|/(2t) + i copysign(t, y), so neither part comes
 * from a cancelling difference.  Inputs above a quarter of the largest
 * float are scaled by 1/4 first (and t by 2) so |x| + |z| cannot overflow,
 * and tiny ones up (t down) so subnormals lose no bits.
 * sqrt(+-0 + yi) with y = +-0 is +0 + yi, sqrt(x + inf i) is inf + inf i.
 */
static LLVMValueRef cx_sqrt(Cx *c, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef ax = m1(c, KJ_MATH_FABS, x), ay = m1(c, KJ_MATH_FABS, y);
    double quarter_max = c->single ? 3.4028234663852886e38 / 4 : 1.7976931348623157e308 / 4;
    /* below the smallest normal times 2^(digits + 1), scaled up by an even
     * power of two so subnormal parts keep their bits */
    double tiny = c->single ? 0x1p-101 : 0x1p-968;
    double up = c->single ? 0x1p50 : 0x1p108, down = c->single ? 0x1p-25 : 0x1p-54;
    LLVMValueRef most = m2(c, KJ_MATH_FMAX, ax, ay);
    LLVMValueRef big = cmp(c, LLVMRealOGT, most, k(c, quarter_max));
    LLVMValueRef small = cmp(c, LLVMRealOLT, most, k(c, tiny));
    LLVMValueRef s = sel(c, big, k(c, 0.25), sel(c, small, k(c, up), k(c, 1.0)));
    LLVMValueRef r = m2(c, KJ_MATH_HYPOT, mul(c, x, s), mul(c, y, s));
    LLVMValueRef t = m1(c, KJ_MATH_SQRT, mul(c, add(c, mul(c, ax, s), r), k(c, 0.5)));
    t = mul(c, t, sel(c, big, k(c, 2.0), sel(c, small, k(c, down), k(c, 1.0))));
    LLVMValueRef two_t = mul(c, t, k(c, 2.0));
    LLVMValueRef right = cmp(c, LLVMRealOGE, x, k(c, 0.0));
    LLVMValueRef re = sel(c, right, t, fdiv(c, ay, two_t));
    LLVMValueRef im = sel(c, right, fdiv(c, y, two_t), m2(c, KJ_MATH_COPYSIGN, t, y));
    LLVMValueRef zero = cmp(c, LLVMRealOEQ, t, k(c, 0.0));
    re = sel(c, zero, k(c, 0.0), re);
    im = sel(c, zero, y, im);
    LLVMValueRef inf = LLVMConstReal(c->t, __builtin_inf());
    LLVMValueRef y_inf = cmp(c, LLVMRealOEQ, ay, inf);
    return pack(c->g, c->ct, sel(c, y_inf, inf, re), sel(c, y_inf, y, im));
}

/*
 * sin(x + iy) = sin x cosh y + i cos x sinh y;
 * cos(x + iy) = cos x cosh y - i sin x sinh y.
 * x = +-0 gives the zero part its C99 sign even where cosh y or sinh y is
 * infinite (sin(0 + 1000i) = 0 + inf i, not NaN).
 */
static LLVMValueRef cx_sin_cos(Cx *c, LLVMValueRef x, LLVMValueRef y, bool is_cos)
{
    LLVMValueRef sx = m1(c, KJ_MATH_SIN, x), cx = m1(c, KJ_MATH_COS, x);
    LLVMValueRef ch = m1(c, KJ_MATH_COSH, y), sh = m1(c, KJ_MATH_SINH, y);
    LLVMValueRef x_zero = cmp(c, LLVMRealOEQ, x, k(c, 0.0));
    if (!is_cos) {
        LLVMValueRef re = sel(c, x_zero, x, mul(c, sx, ch));
        return pack(c->g, c->ct, re, mul(c, cx, sh));
    }
    LLVMValueRef signed_zero = neg(c, mul(c, x, m2(c, KJ_MATH_COPYSIGN, k(c, 1.0), y)));
    LLVMValueRef im = sel(c, x_zero, signed_zero, neg(c, mul(c, sx, sh)));
    return pack(c->g, c->ct, mul(c, cx, ch), im);
}

/*
 * tanh(x + iy), Kahan's formula (as FreeBSD's ctanh): with t = tan y,
 * b = 1 + t^2, s = sinh x, r = sqrt(1 + s^2),
 *     tanh z = (b r s + i t) / (1 + b s^2),
 * which has no cancellation.  For |x| above 22 (f64) or 9 (f32) the real
 * part is +-1 to the last bit, and sinh would overflow further out.
 */
static LLVMValueRef cx_tanh(Cx *c, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef t = m1(c, KJ_MATH_TAN, y);
    LLVMValueRef b = add(c, k(c, 1.0), mul(c, t, t));
    LLVMValueRef s = m1(c, KJ_MATH_SINH, x);
    LLVMValueRef ss = mul(c, s, s);
    LLVMValueRef r = m1(c, KJ_MATH_SQRT, add(c, k(c, 1.0), ss));
    LLVMValueRef den = add(c, k(c, 1.0), mul(c, b, ss));
    LLVMValueRef re = fdiv(c, mul(c, mul(c, b, r), s), den);
    LLVMValueRef im = fdiv(c, t, den);
    LLVMValueRef big = cmp(c, LLVMRealOGT, m1(c, KJ_MATH_FABS, x), k(c, c->single ? 9.0 : 22.0));
    /* where 1 + b s^2 overflows (|x| > 355, or 44 in f32) the imaginary
     * part, below the smallest normal, is t / inf: a zero of t's sign */
    re = sel(c, big, m2(c, KJ_MATH_COPYSIGN, k(c, 1.0), x), re);
    return pack(c->g, c->ct, re, im);
}

/*
 * pow(z, w) = exp(w log z), with the products of the textbook complex
 * multiply.  0 ** 0 = 1 and 0 ** w = 0 for w with a positive real part (the
 * formula gives NaN there); other powers of 0 give what the formula gives.
 */
static LLVMValueRef cx_pow(Cx *c, LLVMValueRef z, LLVMValueRef w)
{
    LLVMValueRef x = re_part(c->g, z), y = im_part(c->g, z);
    LLVMValueRef u = re_part(c->g, w), v = im_part(c->g, w);
    LLVMValueRef l = cx_log(c, x, y);
    LLVMValueRef lr = re_part(c->g, l), li = im_part(c->g, l);
    LLVMValueRef pr = sub(c, mul(c, u, lr), mul(c, v, li));
    LLVMValueRef pi = add(c, mul(c, u, li), mul(c, v, lr));
    LLVMValueRef p = cx_exp(c, pr, pi);
    LLVMBuilderRef B = c->g->b;
    LLVMValueRef z_zero = LLVMBuildAnd(B, cmp(c, LLVMRealOEQ, x, k(c, 0.0)),
                                       cmp(c, LLVMRealOEQ, y, k(c, 0.0)), "");
    LLVMValueRef w_zero = LLVMBuildAnd(B, cmp(c, LLVMRealOEQ, u, k(c, 0.0)),
                                       cmp(c, LLVMRealOEQ, v, k(c, 0.0)), "");
    LLVMValueRef zero_re = sel(c, w_zero, k(c, 1.0), k(c, 0.0));
    LLVMValueRef zero_case = LLVMBuildAnd(
        B, z_zero, LLVMBuildOr(B, w_zero, cmp(c, LLVMRealOGT, u, k(c, 0.0)), ""), "");
    return pack(c->g, c->ct, sel(c, zero_case, zero_re, re_part(c->g, p)),
                sel(c, zero_case, k(c, 0.0), im_part(c->g, p)));
}

static Cx cx_for(Gen *g, LLVMValueRef z)
{
    LLVMTypeRef ct = LLVMTypeOf(z);
    LLVMTypeRef t = LLVMStructGetTypeAtIndex(ct, 0);
    return (Cx){g, t, ct, t == g->t_f32};
}

LLVMValueRef kj_codegen_complex_math(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity)
{
    Cx c = cx_for(g, args[0]);
    LLVMValueRef x = re_part(g, args[0]), y = im_part(g, args[0]);
    switch (fn) {
    case KJ_MATH_SQRT: return cx_sqrt(&c, x, y);
    case KJ_MATH_EXP: return cx_exp(&c, x, y);
    case KJ_MATH_LOG: return cx_log(&c, x, y);
    case KJ_MATH_SIN: return cx_sin_cos(&c, x, y, false);
    case KJ_MATH_COS: return cx_sin_cos(&c, x, y, true);
    case KJ_MATH_TANH: return cx_tanh(&c, x, y);
    case KJ_MATH_POW:
        if (arity != 2)
            kj_unreachable();
        return cx_pow(&c, args[0], args[1]);
    default: kj_die("no complex %s", kj_math_names[fn]);
    }
}

/* arg(z) = atan2(z.imag, z.real), in [-pi, pi]: -0 imaginary parts give -pi
 * on the negative real axis, as C99's carg. */
LLVMValueRef kj_codegen_complex_arg(Gen *g, LLVMValueRef z)
{
    Cx c = cx_for(g, z);
    return m2(&c, KJ_MATH_ATAN2, im_part(g, z), re_part(g, z));
}

/* polar(r, theta) = r cos theta + i r sin theta. */
LLVMValueRef kj_codegen_polar(Gen *g, LLVMTypeRef complex_type, LLVMValueRef r, LLVMValueRef theta)
{
    LLVMTypeRef t = LLVMTypeOf(r);
    Cx c = {g, t, complex_type, t == g->t_f32};
    return pack(g, complex_type, mul(&c, r, m1(&c, KJ_MATH_COS, theta)),
                mul(&c, r, m1(&c, KJ_MATH_SIN, theta)));
}
