/*
 * codegen_expr.c: IR expressions lowered to LLVM values, for codegen_llvm.c,
 * which walks the statements.  Arithmetic, comparisons and powers; casts;
 * complex numbers; math built-ins as intrinsics or calls to the target's
 * math library (libm on cpu, libdevice on cuda); atomics; special registers;
 * array loads and the arrays that shared() and local() make.  What differs
 * between the targets (special registers, barriers, shared memory, atomic
 * orderings, some math and conversions) is asked of g->target.  The values
 * that need no expression (intrinsic and math calls, conversions, special
 * registers) are made in codegen_value.c, below this file and the checked
 * mode's and complex math's lowerings (codegen_check.c, codegen_complex.c).
 *
 * Choices a reader of the generated code should know:
 *   - Integer arithmetic wraps.  Division never traps: x / 0 gives x, x % 0
 *     gives 0, and MIN / -1 wraps to MIN, the one quotient that overflows.
 *   - Shift counts are masked to the operand's width (x << 65 is x << 1 on
 *     i64), as the x86 and PTX shift instructions do, so no shift is poison.
 *   - Float to int conversion truncates and saturates: out-of-range values
 *     clamp to the integer range.  NaN is unspecified (docs/language.md): on
 *     cpu it gives 0 (llvm.fptosi.sat); on cuda the 32- and 64-bit cases are
 *     PTX's cvt.rzi, which clamps too, and NaN gives what the GPU gives.
 *   - Complex * and / use the textbook formulas, with no rescaling: a / b
 *     overflows when |b|^2 does (about 1e154 for c128, 1e19 for c64).
 *   - No fast-math flags: IEEE semantics, no reassociation, no contraction.
 *   - On cpu, libm calls carry "vector-function-abi-variant" naming glibc's
 *     libmvec functions for the host's vector ISA, so the loop vectoriser
 *     turns a loop over sin() into calls to _ZGVeN8v_sin and kin
 *     (target_cpu.c).
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ complex */


static LLVMValueRef complex_mul(Gen *g, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a = re_of(g, x), b = im_of(g, x), c = re_of(g, y), d = im_of(g, y);
    LLVMValueRef ac = LLVMBuildFMul(g->b, a, c, ""), bd = LLVMBuildFMul(g->b, b, d, "");
    LLVMValueRef re = LLVMBuildFSub(g->b, ac, bd, "");
    LLVMValueRef ad = LLVMBuildFMul(g->b, a, d, ""), bc = LLVMBuildFMul(g->b, b, c, "");
    LLVMValueRef im = LLVMBuildFAdd(g->b, ad, bc, "");
    return make_complex(g, LLVMTypeOf(x), re, im);
}

/*
 * z * z for one variable z = a+bi: (a^2 - b^2) + 2(ab)i.  The imaginary part
 * is bit for bit ab + ba (doubling is exact, overflow included), one multiply
 * fewer, and on cuda 2(ab) + c contracts into one fma, as the same loop
 * written in CUDA C does (the Mandelbrot iteration z = z*z + c).
 */
static LLVMValueRef complex_square(Gen *g, LLVMValueRef z)
{
    LLVMValueRef a = re_of(g, z), b = im_of(g, z);
    /* The imaginary part first: in that order ptxas keeps the Mandelbrot
     * loop's parts in their own registers (12 instructions an iteration, as
     * nvcc's); the other order costs two register moves an iteration. */
    LLVMValueRef ab = LLVMBuildFMul(g->b, a, b, "");
    LLVMValueRef im = LLVMBuildFMul(g->b, ab, LLVMConstReal(LLVMTypeOf(ab), 2.0), "");
    LLVMValueRef aa = LLVMBuildFMul(g->b, a, a, ""), bb = LLVMBuildFMul(g->b, b, b, "");
    LLVMValueRef re = LLVMBuildFSub(g->b, aa, bb, "");
    return make_complex(g, LLVMTypeOf(z), re, im);
}

/* Both operands read the same scalar variable, already of the result type. */
static bool is_same_var(const KjIrExpr *x, const KjIrExpr *y, const KjType *type)
{
    return x->op == KJ_IR_VAR && y->op == KJ_IR_VAR && x->var == y->var && x->type == type &&
           y->type == type;
}

/*
 * (a+bi)/(c+di) by Smith's algorithm (1962), as NumPy does: divide through by
 * the part of the divisor that is larger in magnitude, p, so that nothing is
 * squared and no intermediate overflows or underflows before the quotient
 * itself would (the textbook (ac+bd)/(c^2+d^2) fails for |c+di| past the
 * square root of the largest float, 1.8e19 in f32).  With q the other part
 * and r = q/p (|r| <= 1), t = p + q*r:
 *   |c| >= |d|:  re = (a + b*r)/t,  im = (b - a*r)/t
 *   |c| <  |d|:  re = (b + a*r)/t,  im = (b*r - a)/t
 * which is one formula with a and b swapped.  Written with selects, not
 * branches, so that loops stay vectorised.  A zero divisor gives a/+0 and
 * b/+0 (infinities, or NaN for 0/0), as NumPy does.  docs/language.md states
 * the accuracy (measured by tests/unit/test_complex.c).
 */
static LLVMValueRef complex_div(Gen *g, LLVMValueRef x, LLVMValueRef y)
{
    LLVMBuilderRef B = g->b;
    LLVMValueRef a = re_of(g, x), b = im_of(g, x), c = re_of(g, y), d = im_of(g, y);
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstReal(t, 0.0);
    LLVMValueRef abs_c = kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, &c, 1);
    LLVMValueRef abs_d = kj_codegen_call_intrinsic(g, "llvm.fabs", &t, 1, &d, 1);
    LLVMValueRef swap = LLVMBuildFCmp(B, LLVMRealOLT, abs_c, abs_d, "");
    LLVMValueRef p = LLVMBuildSelect(B, swap, d, c, ""), q = LLVMBuildSelect(B, swap, c, d, "");
    LLVMValueRef u = LLVMBuildSelect(B, swap, b, a, ""), v = LLVMBuildSelect(B, swap, a, b, "");
    LLVMValueRef p_zero = LLVMBuildFCmp(B, LLVMRealOEQ, p, zero, "");
    LLVMValueRef r = LLVMBuildSelect(B, p_zero, zero, LLVMBuildFDiv(B, q, p, ""), "");
    LLVMValueRef den = LLVMBuildFAdd(B, p, LLVMBuildFMul(B, q, r, ""), "");
    den = LLVMBuildSelect(B, p_zero, zero, den, "");
    LLVMValueRef re = LLVMBuildFDiv(B, LLVMBuildFAdd(B, u, LLVMBuildFMul(B, v, r, ""), ""), den, "");
    /* -(a - b*r) as b*r - a, so that a zero has NumPy's sign. */
    LLVMValueRef ur = LLVMBuildFMul(B, u, r, "");
    LLVMValueRef im_num = LLVMBuildSelect(B, swap, LLVMBuildFSub(B, ur, v, ""),
                                          LLVMBuildFSub(B, v, ur, ""), "");
    LLVMValueRef im = LLVMBuildFDiv(B, im_num, den, "");
    return make_complex(g, LLVMTypeOf(x), re, im);
}

/* |a+bi| through hypot (libm and libmvec on cpu, libdevice on cuda), which
 * scales, so that neither a^2 nor b^2 overflows or underflows on the way. */
static LLVMValueRef complex_abs(Gen *g, LLVMValueRef z)
{
    LLVMValueRef parts[2] = {re_of(g, z), im_of(g, z)};
    return kj_codegen_math_library(g, KJ_MATH_HYPOT, parts, 2);
}

/* ============================================================ arrays */

/* A fixed-shape, row-major array (shared and local memory). */
static void array_fixed(Gen *g, LLVMValueRef data, const KjIrExpr *e, ArrayVal *out)
{
    out->ndim = e->alloc_ndim;
    out->elem = e->alloc_elem;
    out->data = data;
    int64_t stride = 1;
    for (int k = e->alloc_ndim - 1; k >= 0; k--) {
        out->shape[k] = const_i64(g, e->alloc_shape[k]);
        out->strides[k] = const_i64(g, stride);
        stride *= e->alloc_shape[k];
    }
}

/* A size from the launch (local_size.c) as an i64, by its rules: exact
 * 64-bit arithmetic, which the runtime has checked for this launch (no
 * overflow, no division by zero), so wrapping operations give its value;
 * parameters are read from their slots, which the kernel never assigns. */
static LLVMValueRef launch_size(Gen *g, const KjIrExpr *e)
{
    LLVMBuilderRef b = g->b;
    switch (e->op) {
    case KJ_IR_CONST: {
        int64_t v = 0;
        kj_local_size_const(e, &v); /* a u64 above INT64_MAX: the launch refuses it */
        return const_i64(g, v);
    }
    case KJ_IR_VAR: {
        LLVMValueRef v = LLVMBuildLoad2(b, llty(g, e->type), g->slots[e->var->id].scalar, "");
        if (kj_type_int_bits(e->type) == 64)
            return v;
        return kj_type_is_signed(e->type) ? LLVMBuildSExt(b, v, g->t_i64, "")
                                          : LLVMBuildZExt(b, v, g->t_i64, "");
    }
    case KJ_IR_DIM: /* an array parameter's extent */
        return LLVMBuildLoad2(b, g->t_i64, g->slots[e->args[0]->var->id].array.shape[e->dim], "");
    case KJ_IR_CAST: return launch_size(g, e->args[0]);
    case KJ_IR_NEG: return LLVMBuildNeg(b, launch_size(g, e->args[0]), "");
    case KJ_IR_SELECT: {
        static const LLVMIntPredicate preds[] = {[KJ_IR_LT] = LLVMIntSLT, [KJ_IR_LE] = LLVMIntSLE,
                                                 [KJ_IR_GT] = LLVMIntSGT, [KJ_IR_GE] = LLVMIntSGE,
                                                 [KJ_IR_EQ] = LLVMIntEQ, [KJ_IR_NE] = LLVMIntNE};
        const KjIrExpr *c = e->args[0];
        LLVMValueRef taken = LLVMBuildICmp(b, preds[c->op], launch_size(g, c->args[0]),
                                           launch_size(g, c->args[1]), "");
        return LLVMBuildSelect(b, taken, launch_size(g, e->args[1]), launch_size(g, e->args[2]), "");
    }
    default: break;
    }
    LLVMValueRef x = launch_size(g, e->args[0]), y = launch_size(g, e->args[1]);
    switch (e->op) {
    case KJ_IR_ADD: return LLVMBuildAdd(b, x, y, "");
    case KJ_IR_SUB: return LLVMBuildSub(b, x, y, "");
    case KJ_IR_MUL: return LLVMBuildMul(b, x, y, "");
    case KJ_IR_DIV: return LLVMBuildSDiv(b, x, y, "");
    case KJ_IR_REM: return LLVMBuildSRem(b, x, y, "");
    default: /* MATH min, max */
        return LLVMBuildSelect(b, LLVMBuildICmp(b, e->math == KJ_MATH_FMIN ? LLVMIntSLT : LLVMIntSGT,
                                                x, y, ""), x, y, "");
    }
}

/* The bytes per thread of a launch-sized local(), rounded up to 16 as the
 * runtime counts them (kj_local_launch_bytes); its extents into shape. */
static LLVMValueRef launch_local_bytes(Gen *g, const KjIrExpr *e, LLVMValueRef *shape)
{
    LLVMValueRef count = const_i64(g, kj_type_size(e->alloc_elem));
    for (int k = 0; k < e->alloc_ndim; k++) {
        LLVMValueRef n = e->alloc_size[k] ? launch_size(g, e->alloc_size[k]) : const_i64(g, e->alloc_shape[k]);
        if (shape)
            shape[k] = n;
        count = LLVMBuildMul(g->b, count, n, "");
    }
    return LLVMBuildAnd(g->b, LLVMBuildAdd(g->b, count, const_i64(g, 15), ""), const_i64(g, -16), "");
}

/* A kernel's local() sized at launch: computed in the impl's entry block
 * (the sizes read only parameters), where the cpu's dynamic stack
 * allocation is made once per call of the impl (inlined into a loop over
 * threads, LLVM frees it at each turn) and cuda's slice of the launch's
 * scratch is found. */
static void launch_local(Gen *g, const KjIrExpr *e, ArrayVal *out)
{
    LLVMBuilderRef saved = g->b, ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
    g->b = ab;
    LLVMValueRef prefix = const_i64(g, 0);
    for (int i = 0; i < e->launch_local; i++)
        prefix = LLVMBuildAdd(ab, prefix, launch_local_bytes(g, g->fn->launch_locals.items[i], NULL), "");
    out->ndim = e->alloc_ndim;
    out->elem = e->alloc_elem;
    LLVMValueRef bytes = launch_local_bytes(g, e, out->shape), stride = const_i64(g, 1);
    if (g->target->launch_local) {
        out->data = g->target->launch_local(g, prefix, bytes, kj_type_size(e->alloc_elem), &stride);
    } else {
        out->data = LLVMBuildArrayAlloca(ab, g->t_i8, bytes, "local");
        LLVMSetAlignment(out->data, 16);
    }
    for (int k = e->alloc_ndim - 1; k >= 0; k--) {
        out->strides[k] = stride;
        stride = LLVMBuildMul(ab, stride, out->shape[k], "");
    }
    g->b = saved;
    LLVMDisposeBuilder(ab);
}

static int64_t alloc_count(const KjIrExpr *e)
{
    int64_t n = 1;
    for (int k = 0; k < e->alloc_ndim; k++)
        n *= e->alloc_shape[k];
    return n;
}

LLVMValueRef kj_codegen_element_address(Gen *g, const ArrayVal *a, LLVMValueRef *indices, int count,
                                        bool contiguous)
{
    LLVMValueRef offset;
    if (contiguous) {
        offset = indices[0];
    } else {
        offset = NULL;
        for (int k = 0; k < count; k++) {
            LLVMValueRef term = LLVMBuildNSWMul(g->b, indices[k], a->strides[k], "");
            offset = offset ? LLVMBuildNSWAdd(g->b, offset, term, "") : term;
        }
    }
    return LLVMBuildInBoundsGEP2(g->b, memty(g, a->elem), a->data, &offset, 1, "");
}

/* ============================================================ expressions */

static LLVMValueRef gen_int_div(Gen *g, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef d)
{
    LLVMTypeRef t = llty(g, type);
    LLVMValueRef zero = LLVMConstNull(t), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef is_zero = LLVMBuildICmp(g->b, LLVMIntEQ, d, zero, "");
    if (!kj_type_is_signed(type)) {
        LLVMValueRef safe = LLVMBuildSelect(g->b, is_zero, one, d, "");
        return op == KJ_IR_DIV ? LLVMBuildUDiv(g->b, a, safe, "") : LLVMBuildURem(g->b, a, safe, "");
    }
    /* Divisors 0 and -1 become 1: no trap on zero, none on MIN / -1. */
    LLVMValueRef is_minus_one = LLVMBuildICmp(g->b, LLVMIntEQ, d, LLVMConstAllOnes(t), "");
    LLVMValueRef bad = LLVMBuildOr(g->b, is_zero, is_minus_one, "");
    LLVMValueRef safe = LLVMBuildSelect(g->b, bad, one, d, "");
    if (op == KJ_IR_REM)
        return LLVMBuildSRem(g->b, a, safe, ""); /* x % -1 == 0 == x % 1 */
    LLVMValueRef q = LLVMBuildSDiv(g->b, a, safe, "");
    return LLVMBuildSelect(g->b, is_minus_one, LLVMBuildSub(g->b, zero, a, ""), q, "");
}

static LLVMValueRef gen_arith(Gen *g, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b)
{
    LLVMBuilderRef B = g->b;
    if (kj_type_is_complex(type)) {
        switch (op) {
        /* One statement per part: the order of the instructions must not
         * hang on the C compiler's order of evaluating arguments. */
        case KJ_IR_ADD: {
            LLVMValueRef re = LLVMBuildFAdd(B, re_of(g, a), re_of(g, b), "");
            LLVMValueRef im = LLVMBuildFAdd(B, im_of(g, a), im_of(g, b), "");
            return make_complex(g, LLVMTypeOf(a), re, im);
        }
        case KJ_IR_SUB: {
            LLVMValueRef re = LLVMBuildFSub(B, re_of(g, a), re_of(g, b), "");
            LLVMValueRef im = LLVMBuildFSub(B, im_of(g, a), im_of(g, b), "");
            return make_complex(g, LLVMTypeOf(a), re, im);
        }
        case KJ_IR_MUL: return complex_mul(g, a, b);
        case KJ_IR_DIV: return complex_div(g, a, b);
        default: kj_codegen_error(g, "complex operands are not supported for %s", kj_ir_op_name(op)); return a;
        }
    }
    if (kj_type_is_float(type)) {
        switch (op) {
        case KJ_IR_ADD: return LLVMBuildFAdd(B, a, b, "");
        case KJ_IR_SUB: return LLVMBuildFSub(B, a, b, "");
        case KJ_IR_MUL: return LLVMBuildFMul(B, a, b, "");
        case KJ_IR_DIV: return LLVMBuildFDiv(B, a, b, "");
        case KJ_IR_REM: return kj_codegen_math(g, KJ_MATH_FMOD, (LLVMValueRef[]){a, b}, 2);
        default: kj_codegen_error(g, "float operands are not supported for %s", kj_ir_op_name(op)); return a;
        }
    }
    switch (op) {
    case KJ_IR_ADD: return LLVMBuildAdd(B, a, b, "");
    case KJ_IR_SUB: return LLVMBuildSub(B, a, b, "");
    case KJ_IR_MUL: return LLVMBuildMul(B, a, b, "");
    case KJ_IR_DIV:
    case KJ_IR_REM: return gen_int_div(g, op, type, a, b);
    case KJ_IR_BITAND: return LLVMBuildAnd(B, a, b, "");
    case KJ_IR_BITOR: return LLVMBuildOr(B, a, b, "");
    case KJ_IR_BITXOR: return LLVMBuildXor(B, a, b, "");
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        LLVMTypeRef t = LLVMTypeOf(a);
        unsigned bits = LLVMGetIntTypeWidth(t);
        unsigned bbits = LLVMGetIntTypeWidth(LLVMTypeOf(b));
        if (bbits > bits)
            b = LLVMBuildTrunc(B, b, t, "");
        else if (bbits < bits)
            b = LLVMBuildZExt(B, b, t, "");
        b = LLVMBuildAnd(B, b, LLVMConstInt(t, bits - 1, 0), "");
        if (op == KJ_IR_SHL)
            return LLVMBuildShl(B, a, b, "");
        return kj_type_is_signed(type) ? LLVMBuildAShr(B, a, b, "") : LLVMBuildLShr(B, a, b, "");
    }
    default: kj_unreachable();
    }
}

/* Complex + - * / and z * z for codegen_simd.c, whose complex values are
 * pairs of vectors: the formulas above build on the operands' own types. */
LLVMValueRef kj_codegen_complex_arith(Gen *g, KjIrOp op, LLVMValueRef a, LLVMValueRef b)
{
    return gen_arith(g, op, kj_type_scalar(KJ_TYPE_C128), a, b);
}

LLVMValueRef kj_codegen_complex_square(Gen *g, LLVMValueRef z) { return complex_square(g, z); }

/* The constant 1 of a numeric type. */
static LLVMValueRef unit_of(Gen *g, const KjType *type)
{
    if (kj_type_is_complex(type)) {
        LLVMTypeRef pt = llty(g, kj_type_complex_part(type));
        return LLVMConstStructInContext(g->ctx, (LLVMValueRef[]){LLVMConstReal(pt, 1.0), LLVMConstNull(pt)}, 2, 0);
    }
    if (kj_type_is_float(type))
        return LLVMConstReal(llty(g, type), 1.0);
    return LLVMConstInt(llty(g, type), 1, 0);
}

/* x ** m for m from 1 to 8 as the checker's chain of products for a base it
 * can copy (check_operator.c's power_chain): (x^(m/2))^2, times x when m is
 * odd.  A base it cannot copy (too big, or not pure) comes here as IPOW, and
 * must get the same bits: x^6 is x^3 x^3, not x^2 x^4. */
static LLVMValueRef ipow_chain(Gen *g, const KjType *type, LLVMValueRef x, uint64_t m)
{
    if (m == 1)
        return x;
    LLVMValueRef half = ipow_chain(g, type, x, m / 2);
    LLVMValueRef square = gen_arith(g, KJ_IR_MUL, type, half, half);
    return m % 2 ? gen_arith(g, KJ_IR_MUL, type, square, x) : square;
}

/* x ** n for a constant n: square-and-multiply unrolled at compile time (up
 * to 8, the chain of products the checker makes). */
static LLVMValueRef ipow_const(Gen *g, const KjType *type, LLVMValueRef x, int64_t n)
{
    LLVMValueRef one = unit_of(g, type);
    uint64_t m = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    LLVMValueRef result = NULL, base = x;
    if (m >= 1 && m <= KJ_POW_CHAIN_MAX) {
        result = ipow_chain(g, type, x, m);
        m = 0;
    }
    while (m) {
        if (m & 1)
            result = result ? gen_arith(g, KJ_IR_MUL, type, result, base) : base;
        m >>= 1;
        if (m)
            base = gen_arith(g, KJ_IR_MUL, type, base, base);
    }
    if (!result)
        result = one;
    if (n < 0)
        result = gen_arith(g, KJ_IR_DIV, type, one, result);
    return result;
}

/* x ** n for a run-time integer n: a square-and-multiply loop.  A negative n
 * gives 1 / x**-n for floats and complex; for integers it gives 0 unless |x|
 * is 1 (what the integer 1 / x**-n truncates to). */
static LLVMValueRef gen_ipow(Gen *g, const KjType *type, LLVMValueRef x, LLVMValueRef n, const KjType *ntype)
{
    n = kj_codegen_convert(g, n, ntype, kj_type_scalar(KJ_TYPE_I64));
    LLVMTypeRef t = llty(g, type);
    LLVMValueRef one = unit_of(g, type);
    LLVMValueRef neg = LLVMBuildICmp(g->b, LLVMIntSLT, n, const_i64(g, 0), "");
    LLVMValueRef mag = LLVMBuildSelect(g->b, neg, LLVMBuildSub(g->b, const_i64(g, 0), n, ""), n, "");

    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef loop = new_block(g, "ipow.loop"), done = new_block(g, "ipow.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, mag, const_i64(g, 0), ""), done, loop);

    LLVMPositionBuilderAtEnd(g->b, loop);
    LLVMValueRef acc = LLVMBuildPhi(g->b, t, "acc");
    LLVMValueRef base = LLVMBuildPhi(g->b, t, "base");
    LLVMValueRef m = LLVMBuildPhi(g->b, g->t_i64, "m");
    LLVMValueRef odd = LLVMBuildTrunc(g->b, m, g->t_i1, "");
    LLVMValueRef acc2 = LLVMBuildSelect(g->b, odd, gen_arith(g, KJ_IR_MUL, type, acc, base), acc, "");
    LLVMValueRef base2 = gen_arith(g, KJ_IR_MUL, type, base, base);
    LLVMValueRef m2 = LLVMBuildLShr(g->b, m, const_i64(g, 1), "");
    LLVMBasicBlockRef loop_end = LLVMGetInsertBlock(g->b);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, m2, const_i64(g, 0), ""), done, loop);
    LLVMAddIncoming(acc, (LLVMValueRef[]){one, acc2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    LLVMAddIncoming(base, (LLVMValueRef[]){x, base2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    LLVMAddIncoming(m, (LLVMValueRef[]){mag, m2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);

    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef r = LLVMBuildPhi(g->b, t, "pow");
    LLVMAddIncoming(r, (LLVMValueRef[]){one, acc2}, (LLVMBasicBlockRef[]){pre, loop_end}, 2);
    if (kj_type_is_int(type)) {
        /* 1 / x**m for m > 0: 1 when x is 1, +-1 when x is -1, else 0. */
        LLVMValueRef is_one = LLVMBuildICmp(g->b, LLVMIntEQ, x, one, "");
        LLVMValueRef is_m1 = LLVMBuildICmp(g->b, LLVMIntEQ, x, LLVMConstAllOnes(t), "");
        LLVMValueRef inv = LLVMBuildSelect(g->b, is_one, one,
                                           LLVMBuildSelect(g->b, is_m1, r, LLVMConstNull(t), ""), "");
        return LLVMBuildSelect(g->b, neg, inv, r, "");
    }
    return LLVMBuildSelect(g->b, neg, gen_arith(g, KJ_IR_DIV, type, one, r), r, "");
}

/*
 * Float atomic_min and atomic_max: a compare-and-swap loop around the min and
 * max built-ins' rule (kj_codegen_math_inline: a NaN operand loses to a
 * number, and -0 is below +0).  LLVM's own expansion of atomicrmw fmin/fmax
 * is the same loop around llvm.minnum/maxnum, which may keep either zero:
 * the SSE and AVX-512 code of one kernel kept different ones
 * (tests/genprog/regress/atomic_max_zero.kern).  Returns the old value.
 */
static LLVMValueRef atomic_min_max_float(Gen *g, bool is_min, const KjType *t, LLVMValueRef ptr,
                                         LLVMValueRef v, LLVMAtomicOrdering order)
{
    LLVMBuilderRef b = g->b;
    LLVMTypeRef ft = llty(g, t), it = LLVMIntTypeInContext(g->ctx, (unsigned)kj_type_size(t) * 8);
    LLVMValueRef first = LLVMBuildLoad2(b, it, ptr, "atomic.first");
    LLVMSetOrdering(first, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(first, (unsigned)kj_type_size(t));
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LLVMBasicBlockRef loop = new_block(g, "atomic.cas"), done = new_block(g, "atomic.done");
    LLVMBuildBr(b, loop);
    LLVMPositionBuilderAtEnd(b, loop);
    LLVMValueRef seen = LLVMBuildPhi(b, it, "atomic.seen");
    LLVMValueRef ops[2] = {LLVMBuildBitCast(b, seen, ft, ""), v};
    LLVMValueRef want = kj_codegen_math_inline(g, b, is_min ? KJ_MATH_FMIN : KJ_MATH_FMAX, ops);
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(b, ptr, seen, LLVMBuildBitCast(b, want, it, ""), order,
                                               order, 0);
    LLVMValueRef now = LLVMBuildExtractValue(b, pair, 0, "");
    LLVMAddIncoming(seen, (LLVMValueRef[]){first, now}, (LLVMBasicBlockRef[]){pre, loop}, 2);
    LLVMBuildCondBr(b, LLVMBuildExtractValue(b, pair, 1, ""), done, loop);
    LLVMPositionBuilderAtEnd(b, done);
    return LLVMBuildBitCast(b, seen, ft, "");
}

/* Atomics are one atomicrmw each, or a cmpxchg for CAS.  LLVM expands the
 * ones a target has no instruction for (the wrapping inc and dec, f64 add on
 * old GPUs) into compare-and-swap loops; float min and max are the loop
 * above.  kj_codegen_atomic_at is the operation on one element at `ptr` (v,
 * and swap for CAS, of type t), shared with the SIMD lowering's lane-by-lane
 * atomics; it returns the old value. */
LLVMValueRef kj_codegen_atomic_at(Gen *g, KjAtomicOp atomic, const KjType *t, LLVMValueRef ptr,
                                  LLVMValueRef v, LLVMValueRef swap)
{
    LLVMAtomicOrdering order = g->target->atomic_ordering;
    bool is_float = kj_type_is_float(t), sgn = kj_type_is_signed(t);
    if (is_float && (atomic == KJ_ATOMIC_MIN || atomic == KJ_ATOMIC_MAX))
        return atomic_min_max_float(g, atomic == KJ_ATOMIC_MIN, t, ptr, v, order);
    LLVMAtomicRMWBinOp op;
    switch (atomic) {
    case KJ_ATOMIC_ADD: op = is_float ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
    case KJ_ATOMIC_SUB: op = is_float ? LLVMAtomicRMWBinOpFSub : LLVMAtomicRMWBinOpSub; break;
    case KJ_ATOMIC_MIN: op = is_float ? LLVMAtomicRMWBinOpFMin : sgn ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
    case KJ_ATOMIC_MAX: op = is_float ? LLVMAtomicRMWBinOpFMax : sgn ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
    case KJ_ATOMIC_EXCH: op = LLVMAtomicRMWBinOpXchg; break;
    case KJ_ATOMIC_AND: op = LLVMAtomicRMWBinOpAnd; break;
    case KJ_ATOMIC_OR: op = LLVMAtomicRMWBinOpOr; break;
    case KJ_ATOMIC_XOR: op = LLVMAtomicRMWBinOpXor; break;
    case KJ_ATOMIC_INC: op = LLVMAtomicRMWBinOpUIncWrap; break;
    case KJ_ATOMIC_DEC: op = LLVMAtomicRMWBinOpUDecWrap; break;
    case KJ_ATOMIC_CAS: {
        LLVMTypeRef it = is_float ? LLVMIntTypeInContext(g->ctx, (unsigned)kj_type_size(t) * 8) : llty(g, t);
        LLVMValueRef cmp = is_float ? LLVMBuildBitCast(g->b, v, it, "") : v;
        LLVMValueRef nw = is_float ? LLVMBuildBitCast(g->b, swap, it, "") : swap;
        LLVMValueRef pair = LLVMBuildAtomicCmpXchg(g->b, ptr, cmp, nw, order, order, 0);
        LLVMValueRef old = LLVMBuildExtractValue(g->b, pair, 0, "");
        return is_float ? LLVMBuildBitCast(g->b, old, llty(g, t), "") : old;
    }
    default: kj_unreachable();
    }
    return LLVMBuildAtomicRMW(g->b, op, ptr, v, order, 0);
}

static KJ_NOINLINE LLVMValueRef gen_atomic(Gen *g, KjIrExpr *e)
{
    ArrayVal a;
    kj_codegen_array(g, e->args[0], &a);
    int ndim = a.ndim;
    LLVMValueRef idx[KJ_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        idx[k] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[1 + k]), e->args[1 + k]->type,
                                    kj_type_scalar(KJ_TYPE_I64));
    kj_codegen_check_index(g, e->check_site, &a, idx, ndim);
    LLVMValueRef ptr = kj_codegen_element_address(g, &a, idx, ndim, false);
    kj_codegen_race_access(g, e->race_site, KJ_CHECK_ATOMIC, ptr, idx, ndim);
    LLVMValueRef v = kj_codegen_expr(g, e->args[1 + ndim]);
    const KjType *t = e->type;
    if (!kj_type_is_int(t) && !kj_type_is_float(t)) {
        kj_codegen_error(g, "atomics on %s are not supported", kj_type_name(t));
        return v;
    }
    LLVMValueRef swap = e->atomic == KJ_ATOMIC_CAS ? kj_codegen_expr(g, e->args[2 + ndim]) : NULL;
    return kj_codegen_atomic_at(g, e->atomic, t, ptr, v, swap);
}

/* Calls nest as deep as expressions do: a small frame, and the heap for a call
 * that passes arrays of many dimensions. */
static KJ_NOINLINE LLVMValueRef gen_call(Gen *g, KjIrExpr *e)
{
    FnInfo *info = kj_codegen_fn_info(g, e->callee);
    LLVMValueRef args[16];
    LLVMValueRef *many = NULL;
    int cap = kj_codegen_impl_arg_capacity(e->callee);
    LLVMValueRef *out = args;
    if (cap > (int)(sizeof args / sizeof args[0]))
        out = many = kj_xmalloc(sizeof(LLVMValueRef) * (size_t)cap);
    int n = 0;
    for (int i = 0; i < e->arg_count; i++) {
        const KjType *pt = e->callee->params[i]->type;
        if (is_array(e->args[i]->type)) {
            ArrayVal a;
            kj_codegen_array(g, e->args[i], &a);
            n += kj_codegen_array_args(&a, out + n);
        } else {
            out[n++] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[i]), e->args[i]->type, pt);
        }
    }
    if (g->target->hidden_args)
        n += g->target->hidden_args(g, e->callee, out + n);
    n += kj_codegen_check_call_args(g, out + n);
    LLVMValueRef call = LLVMBuildCall2(g->b, info->impl_type, info->impl, out, (unsigned)n, "");
    free(many);
    kj_codegen_check_after_call(g);
    /* a callee that stopped for a cancellation returned a zero value:
     * nothing here may use it */
    if (kj_codegen_cancel_may_stop(g, e->callee))
        kj_codegen_cancel_poll(g);
    if (e->callee->output_count > 1) {
        /* several outputs: the impl returns them in a struct (codegen_llvm.c);
         * outputs 1.. go to the caller's variables */
        for (int k = 1; k < e->callee->output_count; k++)
            if (e->call_outputs)
                LLVMBuildStore(g->b, LLVMBuildExtractValue(g->b, call, (unsigned)k, ""),
                               g->slots[e->call_outputs[k]->id].scalar);
        call = LLVMBuildExtractValue(g->b, call, 0, "");
    }
    return call;
}

static LLVMValueRef gen_short_circuit(Gen *g, KjIrExpr *e)
{
    bool is_and = e->op == KJ_IR_LOGAND;
    LLVMValueRef lhs = kj_codegen_expr(g, e->args[0]);
    LLVMBasicBlockRef lhs_end = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef rhs_bb = new_block(g, is_and ? "and.rhs" : "or.rhs"), done = new_block(g, "logic.done");
    if (is_and)
        LLVMBuildCondBr(g->b, lhs, rhs_bb, done);
    else
        LLVMBuildCondBr(g->b, lhs, done, rhs_bb);
    LLVMPositionBuilderAtEnd(g->b, rhs_bb);
    LLVMValueRef rhs = kj_codegen_expr(g, e->args[1]);
    LLVMBasicBlockRef rhs_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef phi = LLVMBuildPhi(g->b, g->t_i1, "");
    LLVMValueRef short_value = LLVMConstInt(g->t_i1, is_and ? 0 : 1, 0);
    LLVMAddIncoming(phi, (LLVMValueRef[]){short_value, rhs}, (LLVMBasicBlockRef[]){lhs_end, rhs_end}, 2);
    return phi;
}

static LLVMValueRef gen_select(Gen *g, KjIrExpr *e)
{
    LLVMValueRef cond = kj_codegen_expr(g, e->args[0]);
    LLVMBasicBlockRef then_bb = new_block(g, "sel.then"), else_bb = new_block(g, "sel.else"),
                      done = new_block(g, "sel.done");
    LLVMBuildCondBr(g->b, cond, then_bb, else_bb);
    LLVMPositionBuilderAtEnd(g->b, then_bb);
    LLVMValueRef a = kj_codegen_convert(g, kj_codegen_expr(g, e->args[1]), e->args[1]->type, e->type);
    LLVMBasicBlockRef then_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, else_bb);
    LLVMValueRef b = kj_codegen_convert(g, kj_codegen_expr(g, e->args[2]), e->args[2]->type, e->type);
    LLVMBasicBlockRef else_end = LLVMGetInsertBlock(g->b);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    LLVMValueRef phi = LLVMBuildPhi(g->b, llty(g, e->type), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){a, b}, (LLVMBasicBlockRef[]){then_end, else_end}, 2);
    return phi;
}

/* ============================================================ print */

LLVMValueRef kj_codegen_string(Gen *g, const char *text)
{
    LLVMValueRef init = LLVMConstStringInContext(g->ctx, text, (unsigned)strlen(text), 0);
    LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, LLVMTypeOf(init), "kj.str",
                                                  g->target->string_address_space);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(gv, 1);
    if (g->target->string_address_space == 0)
        return gv;
    return LLVMConstAddrSpaceCast(gv, g->t_ptr);
}

/* The values of a PRINT promoted as C's varargs are (check_print.c wrote the
 * format for them): ints to i32 or i64, floats to double, a complex to two
 * doubles, a bool to the string "true" or "false". */
static KJ_NOINLINE void gen_print(Gen *g, KjIrExpr *e)
{
    LLVMValueRef values[64];
    int count = 0;
    for (int i = 0; i < e->arg_count && count < 63; i++) {
        const KjType *t = e->args[i]->type;
        LLVMValueRef v = kj_codegen_expr(g, e->args[i]);
        if (t->kind == KJ_TYPE_BOOL) {
            values[count++] = LLVMBuildSelect(g->b, v, kj_codegen_string(g, "true"),
                                              kj_codegen_string(g, "false"), "");
        } else if (kj_type_is_int(t)) {
            if (kj_type_int_bits(t) < 32)
                v = kj_type_is_signed(t) ? LLVMBuildSExt(g->b, v, g->t_i32, "")
                                         : LLVMBuildZExt(g->b, v, g->t_i32, "");
            values[count++] = v;
        } else if (kj_type_is_complex(t)) {
            LLVMValueRef re = re_of(g, v), im = im_of(g, v);
            if (t->kind == KJ_TYPE_C64) {
                re = LLVMBuildFPExt(g->b, re, g->t_f64, "");
                im = LLVMBuildFPExt(g->b, im, g->t_f64, "");
            }
            values[count++] = re;
            values[count++] = im;
        } else {
            /* C's varargs take every float as a double (f16 and bf16 too,
             * through their own conversions). */
            values[count++] = t->kind == KJ_TYPE_F64
                                  ? v
                                  : kj_codegen_convert(g, v, t, kj_type_scalar(KJ_TYPE_F64));
        }
    }
    g->target->print(g, kj_codegen_string(g, e->format), values, count);
}

/* An element of an array (its ArrayVal lives here, not in kj_codegen_expr's
 * frame, which every level of an expression pays). */
static KJ_NOINLINE LLVMValueRef gen_load(Gen *g, KjIrExpr *e)
{
    ArrayVal a;
    kj_codegen_array(g, e->args[0], &a);
    LLVMValueRef idx[KJ_MAX_DIMS];
    int count = e->arg_count - 1;
    for (int k = 0; k < count && k < KJ_MAX_DIMS; k++)
        idx[k] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[1 + k]), e->args[1 + k]->type,
                                    kj_type_scalar(KJ_TYPE_I64));
    kj_codegen_check_index(g, e->check_site, &a, idx, count);
    LLVMValueRef p = kj_codegen_element_address(g, &a, idx, count, e->contiguous);
    kj_codegen_race_access(g, e->race_site, KJ_CHECK_READ, p, idx, count);
    LLVMValueRef load = LLVMBuildLoad2(g->b, memty(g, e->type), p, "");
    if (e->align_bytes > 0)
        LLVMSetAlignment(load, (unsigned)e->align_bytes);
    return from_mem(g, e->type, load);
}

static KJ_NOINLINE LLVMValueRef gen_dim(Gen *g, KjIrExpr *e)
{
    ArrayVal a;
    kj_codegen_array(g, e->args[0], &a);
    if (e->dim < 0 || e->dim >= a.ndim) {
        kj_codegen_error(g, "dimension out of range%s", NULL);
        return const_i64(g, 0);
    }
    return a.shape[e->dim];
}

static LLVMValueRef expr_value(Gen *g, KjIrExpr *e);

/* KjIrExpr.opaque: v through the target's empty inline asm, or a freeze. */
static LLVMValueRef opaque_value(Gen *g, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    const char *constraints = g->target->opaque_i64;
    if (!constraints || t != g->t_i64)
        return LLVMBuildFreeze(g->b, v, "opaque");
    LLVMTypeRef type = LLVMFunctionType(t, &t, 1, 0);
    LLVMValueRef code = LLVMGetInlineAsm(type, "", 0, (char *)constraints, strlen(constraints),
                                         0, 0, LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(g->b, type, code, &v, 1, "opaque");
}

LLVMValueRef kj_codegen_expr(Gen *g, KjIrExpr *e)
{
    LLVMValueRef v = expr_value(g, e);
    return e->opaque ? opaque_value(g, v) : v;
}

static LLVMValueRef expr_value(Gen *g, KjIrExpr *e)
{
    LLVMBuilderRef B = g->b;
    switch (e->op) {
    case KJ_IR_CONST:
        if (kj_type_is_complex(e->type)) {
            LLVMTypeRef pt = llty(g, kj_type_complex_part(e->type));
            return LLVMConstStructInContext(g->ctx, (LLVMValueRef[]){LLVMConstReal(pt, e->const_float), LLVMConstReal(pt, e->const_imag)}, 2, 0);
        }
        if (kj_type_is_float(e->type))
            return LLVMConstReal(llty(g, e->type), e->const_float);
        if (e->type->kind == KJ_TYPE_BOOL)
            return LLVMConstInt(g->t_i1, e->const_int != 0, 0);
        return LLVMConstInt(llty(g, e->type), e->const_int, 0);
    case KJ_IR_VAR:
        if (is_array(e->type))
            break;
        return LLVMBuildLoad2(B, llty(g, e->type), g->slots[e->var->id].scalar, e->var->name);
    case KJ_IR_NEG: {
        LLVMValueRef x = kj_codegen_expr(g, e->args[0]);
        if (kj_type_is_complex(e->type))
            return make_complex(g, LLVMTypeOf(x), LLVMBuildFNeg(B, re_of(g, x), ""), LLVMBuildFNeg(B, im_of(g, x), ""));
        return kj_type_is_float(e->type) ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
    }
    case KJ_IR_NOT:
    case KJ_IR_BITNOT: return LLVMBuildNot(B, kj_codegen_expr(g, e->args[0]), "");
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR: {
        if (e->op == KJ_IR_MUL && kj_type_is_complex(e->type) && is_same_var(e->args[0], e->args[1], e->type))
            return complex_square(g, kj_codegen_expr(g, e->args[0]));
        LLVMValueRef a = kj_codegen_convert(g, kj_codegen_expr(g, e->args[0]), e->args[0]->type, e->type);
        LLVMValueRef b = kj_codegen_expr(g, e->args[1]);
        if (e->op != KJ_IR_SHL && e->op != KJ_IR_SHR)
            b = kj_codegen_convert(g, b, e->args[1]->type, e->type);
        kj_codegen_check_operands(g, e, a, b);
        return gen_arith(g, e->op, e->type, a, b);
    }
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        const KjType *t = e->args[0]->type;
        LLVMValueRef a = kj_codegen_expr(g, e->args[0]);
        LLVMValueRef b = kj_codegen_convert(g, kj_codegen_expr(g, e->args[1]), e->args[1]->type, t);
        return kj_codegen_compare(g, g->b, e->op, t, a, b);
    }
    case KJ_IR_LOGAND:
    case KJ_IR_LOGOR: return gen_short_circuit(g, e);
    case KJ_IR_SELECT: return gen_select(g, e);
    case KJ_IR_CAST: {
        LLVMValueRef v = kj_codegen_expr(g, e->args[0]);
        kj_codegen_check_operands(g, e, v, NULL);
        return kj_codegen_convert(g, v, e->args[0]->type, e->type);
    }
    case KJ_IR_CALL: return gen_call(g, e);
    case KJ_IR_MATH: {
        LLVMValueRef a[3];
        const KjType *ft = e->args[0]->type;
        for (int i = 0; i < e->arg_count && i < 3; i++)
            a[i] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[i]), e->args[i]->type, ft);
        if (kj_type_is_complex(e->type))
            return kj_codegen_complex_math(g, e->math, a, e->arg_count);
        return kj_codegen_math(g, e->math, a, e->arg_count);
    }
    case KJ_IR_IPOW: {
        LLVMValueRef x = kj_codegen_convert(g, kj_codegen_expr(g, e->args[0]), e->args[0]->type, e->type);
        if (e->args[1]->op == KJ_IR_CONST && kj_type_is_int(e->args[1]->type)) {
            int64_t n = kj_type_is_signed(e->args[1]->type) || e->args[1]->const_int <= INT64_MAX
                            ? (int64_t)e->args[1]->const_int : INT64_MAX;
            if (kj_type_int_bits(e->args[1]->type) < 64 && kj_type_is_signed(e->args[1]->type)) {
                int bits = kj_type_int_bits(e->args[1]->type);
                n = (int64_t)(e->args[1]->const_int << (64 - bits)) >> (64 - bits);
            }
            if (n >= -64 && n <= 64)
                return ipow_const(g, e->type, x, n);
        }
        LLVMValueRef n = kj_codegen_expr(g, e->args[1]);
        kj_codegen_check_operands(g, e, x, n);
        return gen_ipow(g, e->type, x, n, e->args[1]->type);
    }
    case KJ_IR_COMPLEX: {
        const KjType *part = kj_type_complex_part(e->type);
        LLVMValueRef re = kj_codegen_convert(g, kj_codegen_expr(g, e->args[0]), e->args[0]->type, part);
        LLVMValueRef im = kj_codegen_convert(g, kj_codegen_expr(g, e->args[1]), e->args[1]->type, part);
        return make_complex(g, llty(g, e->type), re, im);
    }
    case KJ_IR_REAL: return re_of(g, kj_codegen_expr(g, e->args[0]));
    case KJ_IR_IMAG: return im_of(g, kj_codegen_expr(g, e->args[0]));
    case KJ_IR_CONJ: {
        LLVMValueRef z = kj_codegen_expr(g, e->args[0]);
        return make_complex(g, LLVMTypeOf(z), re_of(g, z), LLVMBuildFNeg(B, im_of(g, z), ""));
    }
    case KJ_IR_CABS: return complex_abs(g, kj_codegen_expr(g, e->args[0]));
    case KJ_IR_CARG: return kj_codegen_complex_arg(g, kj_codegen_expr(g, e->args[0]));
    case KJ_IR_POLAR: {
        LLVMValueRef r = kj_codegen_expr(g, e->args[0]);
        return kj_codegen_polar(g, llty(g, e->type), r, kj_codegen_expr(g, e->args[1]));
    }
    case KJ_IR_MULHI: {
        /* in twice the width (x86's one-operand mul), or the target's own */
        LLVMValueRef a = kj_codegen_expr(g, e->args[0]);
        LLVMValueRef b = kj_codegen_expr(g, e->args[1]);
        unsigned bits = (unsigned)kj_type_int_bits(e->type);
        bool sgn = kj_type_is_signed(e->type);
        LLVMValueRef own = g->target->mulhi ? g->target->mulhi(g, a, b, bits, sgn) : NULL;
        if (own)
            return own;
        LLVMTypeRef wide = LLVMIntTypeInContext(g->ctx, 2 * bits);
        LLVMValueRef wa = sgn ? LLVMBuildSExt(B, a, wide, "") : LLVMBuildZExt(B, a, wide, "");
        LLVMValueRef wb = sgn ? LLVMBuildSExt(B, b, wide, "") : LLVMBuildZExt(B, b, wide, "");
        LLVMValueRef product = LLVMBuildMul(B, wa, wb, "");
        LLVMValueRef high = LLVMBuildLShr(B, product, LLVMConstInt(wide, bits, 0), "");
        return LLVMBuildTrunc(B, high, llty(g, e->type), "mulhi");
    }
    case KJ_IR_LOAD: return gen_load(g, e);
    case KJ_IR_DIM: return gen_dim(g, e);
    case KJ_IR_SREG: return kj_codegen_read_sreg(g, e->sreg);
    case KJ_IR_ATOMIC: return gen_atomic(g, e);
    case KJ_IR_SYNCTHREADS:
        kj_codegen_race_barrier(g, e->race_site);
        g->target->syncthreads(g);
        return NULL;
    case KJ_IR_EXEC: {
        LLVMValueRef args[5] = {0}; /* mma()'s mask and four operands, the most */
        for (int i = 0; i < e->arg_count && i < 5; i++)
            args[i] = kj_codegen_expr(g, e->args[i]);
        kj_codegen_race_barrier(g, e->race_site);
        return g->target->exec(g, e->exec, e->type, args, e->arg_count);
    }
    case KJ_IR_PRINT:
        gen_print(g, e);
        return NULL;
    case KJ_IR_SHARED:
    case KJ_IR_LOCAL:
        break;
    default:
        break;
    }
    kj_codegen_error(g, "the code generator cannot lower this %s expression", kj_ir_op_name(e->op));
    return e->type->kind == KJ_TYPE_VOID || is_array(e->type) ? NULL : zero_of(g, e->type);
}

/*
 * A constant array's data: one read-only global per array and module, named
 * by its symbol, holding its bytes as the checker laid them out.  On cuda it
 * is in constant memory (.const, cached and broadcast to a warp) while the
 * module's tables fit the 64 KiB a kernel may have there, else in global
 * memory; on cpu in read-only data.
 */
static LLVMValueRef const_array_data(Gen *g, const KjIrConstArray *k)
{
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, k->symbol);
    unsigned space = g->target->string_address_space;
    if (g->target->const_array_space_bytes > 0 &&
        g->const_array_bytes <= g->target->const_array_space_bytes)
        space = g->target->const_array_space;
    if (!gv) {
        LLVMValueRef init = LLVMConstStringInContext(g->ctx, (const char *)k->bytes,
                                                     (unsigned)k->size, 1);
        gv = LLVMAddGlobalInAddressSpace(g->mod, LLVMTypeOf(init), k->symbol, space);
        LLVMSetInitializer(gv, init);
        LLVMSetGlobalConstant(gv, 1);
        LLVMSetLinkage(gv, LLVMPrivateLinkage);
        LLVMSetAlignment(gv, 16);
    }
    return space == 0 ? gv : LLVMConstAddrSpaceCast(gv, g->t_ptr);
}

void kj_codegen_array(Gen *g, KjIrExpr *e, ArrayVal *out)
{
    memset(out, 0, sizeof *out);
    switch (e->op) {
    case KJ_IR_VAR: {
        const KjType *t = e->var->type;
        ArraySlots *s = &g->slots[e->var->id].array;
        out->ndim = t->ndim;
        out->elem = t->elem;
        out->data = LLVMBuildLoad2(g->b, g->t_ptr, s->data, "data");
        for (int k = 0; k < t->ndim; k++) {
            out->shape[k] = LLVMBuildLoad2(g->b, g->t_i64, s->shape[k], "shape");
            out->strides[k] = LLVMBuildLoad2(g->b, g->t_i64, s->strides[k], "stride");
        }
        return;
    }
    case KJ_IR_LOCAL: {
        if (e->alloc_size[0] || e->alloc_size[1] || e->alloc_size[2]) {
            launch_local(g, e, out);
            return;
        }
        LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
        LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
        LLVMTypeRef at = LLVMArrayType2(memty(g, e->alloc_elem), (uint64_t)alloc_count(e));
        LLVMValueRef mem = LLVMBuildAlloca(ab, at, "local");
        LLVMSetAlignment(mem, e->align_bytes ? (unsigned)e->align_bytes : 16);
        LLVMDisposeBuilder(ab);
        array_fixed(g, mem, e, out);
        return;
    }
    case KJ_IR_SHARED:
        array_fixed(g, g->target->shared_array(g, e->alloc_elem, alloc_count(e), e->shared_offset), e, out);
        return;
    case KJ_IR_CONST_ARRAY:
        array_fixed(g, const_array_data(g, e->const_array), e, out);
        return;
    case KJ_IR_SELECT: {
        /* c ? a : b between arrays (the value of a let or a re-binding): the
         * record of either, field by field.  Making an array record reads
         * nothing and has no effect, so both arms are made. */
        LLVMValueRef c = kj_codegen_expr(g, e->args[0]);
        ArrayVal a, b;
        kj_codegen_array(g, e->args[1], &a);
        kj_codegen_array(g, e->args[2], &b);
        *out = a;
        out->data = LLVMBuildSelect(g->b, c, a.data, b.data, "array");
        for (int k = 0; k < a.ndim; k++) {
            out->shape[k] = LLVMBuildSelect(g->b, c, a.shape[k], b.shape[k], "");
            out->strides[k] = LLVMBuildSelect(g->b, c, a.strides[k], b.strides[k], "");
        }
        return;
    }
    case KJ_IR_VIEW: {
        /* The sub-array at leading indices: the element they address, and
         * the remaining extents and strides (guvectorize.c's operand cores). */
        ArrayVal base;
        kj_codegen_array(g, e->args[0], &base);
        int k = e->arg_count - 1;
        LLVMValueRef index[KJ_MAX_DIMS];
        for (int i = 0; i < k; i++)
            index[i] = kj_codegen_expr(g, e->args[1 + i]);
        out->ndim = base.ndim - k;
        out->elem = base.elem;
        out->data = kj_codegen_element_address(g, &base, index, k, false);
        for (int d = 0; d < out->ndim; d++)
            out->shape[d] = base.shape[k + d];
        LLVMValueRef stride = const_i64(g, 1);
        for (int d = out->ndim - 1; d >= 0; d--) {
            if (e->contiguous) { /* C order: from the extents */
                out->strides[d] = stride;
                stride = LLVMBuildNSWMul(g->b, stride, out->shape[d], "");
            } else {
                out->strides[d] = base.strides[k + d];
            }
        }
        return;
    }
    case KJ_IR_DYNAMIC_SHARED: {
        LLVMValueRef bytes;
        out->ndim = 1;
        out->elem = e->alloc_elem;
        out->data = g->target->dynamic_shared(g, &bytes);
        out->shape[0] = LLVMBuildUDiv(g->b, bytes, const_i64(g, kj_type_size(e->alloc_elem)), "");
        out->strides[0] = const_i64(g, 1);
        return;
    }
    default:
        kj_codegen_error(g, "the code generator cannot make an array from a %s expression", kj_ir_op_name(e->op));
        out->ndim = e->type->ndim;
        out->elem = e->type->elem;
        out->data = LLVMConstNull(g->t_ptr);
        for (int k = 0; k < out->ndim; k++)
            out->shape[k] = out->strides[k] = const_i64(g, 0);
        return;
    }
}
