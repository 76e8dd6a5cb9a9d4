/*
 * codegen_value.c: the values of the lowering that need no expression of
 * the IR: calls of LLVM intrinsics and of external functions, the math
 * built-ins (the target's own lowering, an intrinsic, or a call to the
 * target's math library, with the libmvec variant on cpu), conversions
 * between scalar types, compares (scalars and lanes alike), and special
 * registers.  It sits on codegen_gen.c;
 * codegen_expr.c, codegen_check.c, codegen_complex.c, the SIMD lowering and
 * the targets use it, and it calls none of them (codegen_expr.c's opening
 * comment says how conversions and math calls behave).
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ compares */

/* The one table of compare predicates: floats compare ordered except !=,
 * which is true when either side is NaN (as in C); integers by their
 * signedness. */
static const LLVMRealPredicate float_predicates[] = {
    [KJ_IR_EQ] = LLVMRealOEQ, [KJ_IR_NE] = LLVMRealUNE, [KJ_IR_LT] = LLVMRealOLT,
    [KJ_IR_LE] = LLVMRealOLE, [KJ_IR_GT] = LLVMRealOGT, [KJ_IR_GE] = LLVMRealOGE};
static const LLVMIntPredicate int_predicates[][2] = { /* [op][signed] */
    [KJ_IR_EQ] = {LLVMIntEQ, LLVMIntEQ},   [KJ_IR_NE] = {LLVMIntNE, LLVMIntNE},
    [KJ_IR_LT] = {LLVMIntULT, LLVMIntSLT}, [KJ_IR_LE] = {LLVMIntULE, LLVMIntSLE},
    [KJ_IR_GT] = {LLVMIntUGT, LLVMIntSGT}, [KJ_IR_GE] = {LLVMIntUGE, LLVMIntSGE}};

LLVMValueRef kj_codegen_compare(Gen *g, LLVMBuilderRef b, KjIrOp op, const KjType *type, LLVMValueRef x,
                                LLVMValueRef y)
{
    if (op != KJ_IR_EQ && op != KJ_IR_NE && op != KJ_IR_LT && op != KJ_IR_LE && op != KJ_IR_GT && op != KJ_IR_GE)
        kj_unreachable();
    if (kj_type_is_complex(type)) {
        /* a scalar's parts named as re_of and im_of name them, a pair of
         * vectors' unnamed: LLVM's numbering of the names, and so the
         * --emit=llvm dumps, stay what they were when each lowering had
         * its own compare */
        bool lanes = LLVMGetTypeKind(LLVMStructGetTypeAtIndex(LLVMTypeOf(x), 0)) == LLVMVectorTypeKind;
        const char *re_name = lanes ? "" : "re", *im_name = lanes ? "" : "im";
        LLVMValueRef re = LLVMBuildFCmp(b, LLVMRealOEQ, LLVMBuildExtractValue(b, x, 0, re_name),
                                        LLVMBuildExtractValue(b, y, 0, re_name), "");
        LLVMValueRef im = LLVMBuildFCmp(b, LLVMRealOEQ, LLVMBuildExtractValue(b, x, 1, im_name),
                                        LLVMBuildExtractValue(b, y, 1, im_name), "");
        LLVMValueRef eq = LLVMBuildAnd(b, re, im, "");
        if (op == KJ_IR_EQ)
            return eq;
        if (op == KJ_IR_NE)
            return LLVMBuildNot(b, eq, "");
        kj_codegen_error(g, "complex values have no order%s", NULL);
        return eq;
    }
    if (kj_type_is_float(type))
        return LLVMBuildFCmp(b, float_predicates[op], x, y, "");
    return LLVMBuildICmp(b, int_predicates[op][kj_type_is_signed(type)], x, y, "");
}

/* ============================================================ intrinsics and calls */

LLVMValueRef kj_codegen_call_intrinsic(Gen *g, const char *name, LLVMTypeRef *overloads,
                                       int overload_count, LLVMValueRef *args, int arg_count)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    if (id == 0)
        kj_die("unknown LLVM intrinsic %s", name);
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, overloads, (size_t)overload_count);
    LLVMTypeRef type = LLVMIntrinsicGetType(g->ctx, id, overloads, (size_t)overload_count);
    return LLVMBuildCall2(g->b, type, fn, args, (unsigned)arg_count, "");
}

LLVMValueRef kj_codegen_extern(Gen *g, const char *name, LLVMTypeRef type)
{
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(g->mod, name, type);
        kj_codegen_add_fn_attr(g, fn, "nounwind");
    }
    return fn;
}

/* ============================================================ math */

/* A call to the target's math library by base name: "sin" -> sinf/sin, or
 * __nv_sinf/__nv_sin on cuda; vectorizable: it has vector variants. */
static LLVMValueRef call_math(Gen *g, const char *base, bool vectorizable, LLVMValueRef *args, int arity)
{
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    bool is_f32 = t == g->t_f32;
    char name[64];
    if (vectorizable && g->target->vector_math_call) {
        char libm_name[64];
        snprintf(libm_name, sizeof libm_name, "%s%s", base, is_f32 ? "f" : "");
        LLVMValueRef v = g->target->vector_math_call(g, libm_name, args, arity);
        if (v)
            return v;
    }
    snprintf(name, sizeof name, "%s%s%s", g->target->math_prefix, base, is_f32 ? "f" : "");
    LLVMTypeRef ps[3] = {t, t, t};
    LLVMTypeRef ft = LLVMFunctionType(t, ps, (unsigned)arity, 0);
    LLVMValueRef fn = kj_codegen_extern(g, name, ft);
    LLVMValueRef call = LLVMBuildCall2(g->b, ft, fn, args, (unsigned)arity, "");
    /* errno is never read, so a math call is a pure function of its operands:
     * that lets the optimiser hoist, merge and vectorise it. */
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, memory_none(g));
    return call;
}

/* The rules of KJ_MATH_BUILTINS' KJ_LOWER_RULE rows, each given the
 * built-in, its operands and their type (a scalar or a vector).
 *
 * min and max of floats: llvm.minnum / llvm.maxnum (a NaN operand gives the
 * other, as C's fmin and fmax), except that operands that compare equal give
 * the OR of their bits for min and the AND for max, so min(-0, +0) is -0 and
 * max(-0, +0) is +0.  minnum may return either zero there (LangRef), and x86
 * picks by operand order, which differed between the scalar code and each
 * vector width (a generated program, tests/genprog/regress/min_signed_zero.kern). */
static LLVMValueRef min_max(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a,
                            LLVMTypeRef t)
{
    bool is_min = math == KJ_MATH_FMIN;
    LLVMValueRef r = kj_codegen_call_intrinsic(g, is_min ? "llvm.minnum" : "llvm.maxnum", &t, 1, a, 2);
    bool vector = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
    LLVMTypeRef et = vector ? LLVMGetElementType(t) : t;
    LLVMTypeKind ek = LLVMGetTypeKind(et);
    unsigned bits = ek == LLVMDoubleTypeKind ? 64 : ek == LLVMFloatTypeKind ? 32 : 16;
    LLVMTypeRef it = LLVMIntTypeInContext(g->ctx, bits);
    if (vector)
        it = LLVMVectorType(it, LLVMGetVectorSize(t));
    LLVMValueRef x = LLVMBuildBitCast(b, a[0], it, ""), y = LLVMBuildBitCast(b, a[1], it, "");
    LLVMValueRef both = is_min ? LLVMBuildOr(b, x, y, "") : LLVMBuildAnd(b, x, y, "");
    LLVMValueRef equal = LLVMBuildFCmp(b, LLVMRealOEQ, a[0], a[1], "");
    return LLVMBuildSelect(b, equal, LLVMBuildBitCast(b, both, t, ""), r, "");
}

/* copysign(x, y) with a NaN y is |x|: a NaN's sign is not promised (LLVM folds
 * 0.0 / 0.0 to +NaN where x86's divide gives -NaN, so a specialised kernel,
 * whose block size folds, and the general one differed:
 * tests/genprog/regress/copysign_nan.kern), so copysign reads every NaN as
 * positive, in every mode and on cuda. */
static LLVMValueRef copy_sign(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a, LLVMTypeRef t)
{
    LLVMValueRef r = kj_codegen_call_intrinsic(g, "llvm.copysign", &t, 1, a, 2);
    LLVMValueRef mag = kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, a[1], a[1], "");
    return LLVMBuildSelect(b, nan, mag, r, "");
}

static LLVMValueRef frem(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a, LLVMTypeRef t)
{
    return LLVMBuildFRem(b, a[0], a[1], "");
}

static LLVMValueRef is_nan(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a, LLVMTypeRef t)
{
    return LLVMBuildFCmp(b, LLVMRealUNO, a[0], a[0], "");
}

/* isinf, isfinite: |x| against infinity (== and <: NaN is neither). */
static LLVMValueRef inf_test(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a, LLVMTypeRef t)
{
    LLVMValueRef mag = kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, a, 1);
    bool vector = LLVMGetTypeKind(t) == LLVMVectorTypeKind;
    LLVMValueRef inf = LLVMConstReal(vector ? LLVMGetElementType(t) : t, __builtin_inf());
    if (vector) {
        unsigned lanes = LLVMGetVectorSize(t);
        LLVMValueRef *each = kj_xmalloc(sizeof *each * lanes);
        for (unsigned i = 0; i < lanes; i++)
            each[i] = inf;
        inf = LLVMConstVector(each, lanes);
        free(each);
    }
    return LLVMBuildFCmp(b, math == KJ_MATH_ISINF ? LLVMRealOEQ : LLVMRealOLT, mag, inf, "");
}

/* ============================================================ the math table */

/* KJ_MATH_BUILTINS' back-end columns, by KjMathFn: the one place that says
 * how each math built-in lowers (kjit_compiler.h has the columns' meaning). */
typedef struct MathLowering {
    const char *libm;
    bool libmvec;
    const char *intrinsic; /* KJ_LOWER_LLVM's */
    LLVMValueRef (*rule)(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a, LLVMTypeRef t);
    bool cheap; /* no library call: an instruction or a few */
} MathLowering;

#define KJ_LOWER_LLVM(intrinsic) intrinsic, NULL, true
#define KJ_LOWER_RULE(rule, cheap) NULL, rule, cheap
#define KJ_LOWER_LIBM NULL, NULL, false
static const MathLowering math_lowering[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex, libm, libmvec, lower) [KJ_MATH_##id] = {libm, libmvec, lower},
    KJ_MATH_BUILTINS(X)
#undef X
};
#undef KJ_LOWER_LLVM
#undef KJ_LOWER_RULE
#undef KJ_LOWER_LIBM

/* The math built-ins that are one LLVM intrinsic or a few instructions
 * (KJ_LOWER_LLVM and KJ_LOWER_RULE), on scalars and vectors alike (the SIMD
 * lowering calls this too); NULL for the others (libm's and libmvec's
 * functions). */
LLVMValueRef kj_codegen_math_inline(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a)
{
    LLVMTypeRef t = LLVMTypeOf(a[0]);
    const MathLowering *m = &math_lowering[math];
    if (m->intrinsic)
        return kj_codegen_call_intrinsic(g, m->intrinsic, &t, 1, a, kj_math_arity[math]);
    return m->rule ? m->rule(g, b, math, a, t) : NULL;
}

bool kj_codegen_math_cheap(KjMathFn math) { return math_lowering[math].cheap; }

LLVMValueRef kj_codegen_math_library(Gen *g, KjMathFn math, LLVMValueRef *a, int arity)
{
    return call_math(g, math_lowering[math].libm, math_lowering[math].libmvec, a, arity);
}

static LLVMValueRef gen_math(Gen *g, KjMathFn math, LLVMValueRef *a, int arity)
{
    LLVMValueRef v = g->target->math ? g->target->math(g, math, a, arity) : NULL;
    if (!v)
        v = kj_codegen_math_inline(g, g->b, math, a);
    return v ? v : kj_codegen_math_library(g, math, a, arity);
}

LLVMValueRef kj_codegen_math(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity)
{
    return gen_math(g, fn, args, arity);
}

/*
 * glibc's libmvec has a routine per ISA (sse 'b', avx2 'd', avx-512 'e'), and
 * they and libm's scalar function disagree in the last bits of many results
 * (sin: libm and the SSE routine differ in 6 arguments of 10, the SSE and
 * AVX2 ones in as many).  So that every mode of one kernel gives the same
 * bits, whatever code runs each element (lanes, the loop vectoriser's body
 * or its remainder, scalar code, a split form's region), cpu code calls one
 * routine per function for the whole module: the widest ISA's.
 */
LLVMValueRef kj_codegen_libmvec_routine(Gen *g, const char *libm_name, LLVMTypeRef elem, int arity,
                                        int *lanes, char *name)
{
    struct { bool ok; char isa; int lanes_f64; } isas[3] = {
        {g->vec_avx512, 'e', 8}, {g->vec_avx2, 'd', 4}, {g->vec_sse, 'b', 2}};
    for (int i = 0; i < 3; i++) {
        if (!isas[i].ok)
            continue;
        *lanes = isas[i].lanes_f64 * (elem == g->t_f32 ? 2 : 1);
        snprintf(name, 96, "_ZGV%cN%d%s_%s", isas[i].isa, *lanes, arity == 1 ? "v" : "vv", libm_name);
        LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
        if (fn)
            return fn;
        LLVMTypeRef vt = LLVMVectorType(elem, (unsigned)*lanes);
        LLVMTypeRef ps[2] = {vt, vt};
        fn = LLVMAddFunction(g->mod, name, LLVMFunctionType(vt, ps, (unsigned)arity, 0));
        kj_codegen_add_fn_attr(g, fn, "nounwind");
        LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, memory_none(g));
        /* kept in llvm.compiler.used: the loop vectoriser needs the
         * declaration, and no pass may drop it while only an attribute names it */
        if (g->used_count == g->used_cap) {
            g->used_cap = g->used_cap ? 2 * g->used_cap : 32;
            g->used = kj_xrealloc(g->used, sizeof *g->used * (size_t)g->used_cap);
        }
        g->used[g->used_count++] = fn;
        return fn;
    }
    *lanes = 0;
    return NULL;
}

const char *kj_codegen_math_libm(KjMathFn fn, bool *libmvec)
{
    *libmvec = math_lowering[fn].libmvec;
    return math_lowering[fn].libm;
}

/* ============================================================ conversions */

/* f16 and bf16 (half.c has the rules).  Every conversion goes through f32:
 * widening is exact; narrowing from f32 rounds once, to nearest even.  An f64
 * is first narrowed to f32 rounding to odd (truncate, then set the last bit
 * when inexact), which keeps the second rounding from being a double one.
 * bf16 is converted with integer operations, so no target needs a libcall or
 * a bf16 instruction; f16 uses fpext/fptrunc (F16C or cvt.f16.f32). */
static LLVMValueRef f64_to_f32_odd(Gen *g, LLVMValueRef x)
{
    LLVMBuilderRef B = g->b;
    LLVMValueRef r = LLVMBuildFPTrunc(B, x, g->t_f32, "");
    LLVMValueRef back = LLVMBuildFPExt(B, r, g->t_f64, "");
    LLVMValueRef inexact = LLVMBuildFCmp(B, LLVMRealONE, back, x, ""); /* false for NaN */
    LLVMValueRef fabs_back = kj_codegen_call_intrinsic(g, "llvm.fabs", &g->t_f64, 1, &back, 1);
    LLVMValueRef fabs_x = kj_codegen_call_intrinsic(g, "llvm.fabs", &g->t_f64, 1, &x, 1);
    LLVMValueRef away = LLVMBuildFCmp(B, LLVMRealOGT, fabs_back, fabs_x, "");
    LLVMValueRef bits = LLVMBuildBitCast(B, r, g->t_i32, "");
    LLVMValueRef toward = LLVMBuildSelect(B, away, LLVMBuildSub(B, bits, LLVMConstInt(g->t_i32, 1, 0), ""), bits, "");
    LLVMValueRef odd = LLVMBuildOr(B, toward, LLVMConstInt(g->t_i32, 1, 0), "");
    return LLVMBuildBitCast(B, LLVMBuildSelect(B, inexact, odd, bits, ""), g->t_f32, "");
}

static LLVMValueRef f32_to_half(Gen *g, LLVMValueRef x, const KjType *to)
{
    LLVMBuilderRef B = g->b;
    if (to->kind == KJ_TYPE_F16)
        return LLVMBuildFPTrunc(B, x, g->t_f16, "");
    LLVMValueRef bits = LLVMBuildBitCast(B, x, g->t_i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(B, LLVMBuildLShr(B, bits, LLVMConstInt(g->t_i32, 16, 0), ""),
                                    LLVMConstInt(g->t_i32, 1, 0), "");
    LLVMValueRef rounded = LLVMBuildAdd(B, bits, LLVMBuildAdd(B, lsb, LLVMConstInt(g->t_i32, 0x7fff, 0), ""), "");
    LLVMValueRef quiet = LLVMBuildOr(B, bits, LLVMConstInt(g->t_i32, 0x400000, 0), "");
    LLVMValueRef nan = LLVMBuildFCmp(B, LLVMRealUNO, x, x, "");
    LLVMValueRef chosen = LLVMBuildSelect(B, nan, quiet, rounded, "");
    LLVMValueRef top = LLVMBuildTrunc(B, LLVMBuildLShr(B, chosen, LLVMConstInt(g->t_i32, 16, 0), ""), g->t_i16, "");
    return LLVMBuildBitCast(B, top, g->t_bf16, "");
}

static LLVMValueRef half_to_f32(Gen *g, LLVMValueRef x, const KjType *from)
{
    LLVMBuilderRef B = g->b;
    if (from->kind == KJ_TYPE_F16)
        return LLVMBuildFPExt(B, x, g->t_f32, "");
    LLVMValueRef bits = LLVMBuildZExt(B, LLVMBuildBitCast(B, x, g->t_i16, ""), g->t_i32, "");
    return LLVMBuildBitCast(B, LLVMBuildShl(B, bits, LLVMConstInt(g->t_i32, 16, 0), ""), g->t_f32, "");
}

static LLVMValueRef convert_half(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to)
{
    const KjType *f32 = kj_type_scalar(KJ_TYPE_F32), *f64 = kj_type_scalar(KJ_TYPE_F64);
    if (kj_type_is_half(from)) {
        LLVMValueRef wide = half_to_f32(g, v, from);
        return kj_codegen_convert(g, wide, f32, to);
    }
    /* to is f16 or bf16 */
    LLVMValueRef x;
    if (from->kind == KJ_TYPE_F32)
        x = v;
    else if (from->kind == KJ_TYPE_F64)
        x = f64_to_f32_odd(g, v);
    else
        x = f64_to_f32_odd(g, kj_codegen_convert(g, v, from, f64));
    return f32_to_half(g, x, to);
}

LLVMValueRef kj_codegen_convert(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to)
{
    if (from == to)
        return v;
    if ((kj_type_is_half(from) || kj_type_is_half(to)) && !kj_type_is_complex(to) &&
        !kj_type_is_complex(from))
        return convert_half(g, v, from, to);
    LLVMTypeRef dst = llty(g, to);
    if (kj_type_is_complex(to)) {
        const KjType *part = kj_type_complex_part(to);
        if (kj_type_is_complex(from)) {
            const KjType *fpart = kj_type_complex_part(from);
            return make_complex(g, dst, kj_codegen_convert(g, re_of(g, v), fpart, part),
                                kj_codegen_convert(g, im_of(g, v), fpart, part));
        }
        return make_complex(g, dst, kj_codegen_convert(g, v, from, part), LLVMConstNull(llty(g, part)));
    }
    if (kj_type_is_complex(from)) /* complex to real: the real part */
        return kj_codegen_convert(g, re_of(g, v), kj_type_complex_part(from), to);
    if (to->kind == KJ_TYPE_BOOL) {
        if (kj_type_is_float(from))
            return LLVMBuildFCmp(g->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
        return LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    }
    if (from->kind == KJ_TYPE_BOOL) {
        if (kj_type_is_float(to))
            return LLVMBuildUIToFP(g->b, v, dst, "");
        return LLVMBuildZExt(g->b, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_int(to)) {
        int fb = kj_type_int_bits(from), tb = kj_type_int_bits(to);
        if (fb == tb)
            return v;
        if (fb > tb)
            return LLVMBuildTrunc(g->b, v, dst, "");
        return kj_type_is_signed(from) ? LLVMBuildSExt(g->b, v, dst, "") : LLVMBuildZExt(g->b, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_float(to))
        return kj_type_is_signed(from) ? LLVMBuildSIToFP(g->b, v, dst, "") : LLVMBuildUIToFP(g->b, v, dst, "");
    if (kj_type_is_float(from) && kj_type_is_int(to)) {
        if (g->target->float_to_int) {
            LLVMValueRef r = g->target->float_to_int(g, v, from, to);
            if (r)
                return r;
        }
        LLVMTypeRef ts[2] = {dst, LLVMTypeOf(v)};
        return kj_codegen_call_intrinsic(g, kj_type_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", ts, 2, &v, 1);
    }
    if (kj_type_is_float(from) && kj_type_is_float(to))
        return kj_type_size(to) > kj_type_size(from) ? LLVMBuildFPExt(g->b, v, dst, "")
                                                     : LLVMBuildFPTrunc(g->b, v, dst, "");
    kj_die("no conversion from %s to %s", kj_type_name(from), kj_type_name(to));
}

/* ============================================================ special registers */

LLVMValueRef kj_codegen_read_sreg(Gen *g, KjSpecialReg reg) { return g->target->read_sreg(g, reg); }
