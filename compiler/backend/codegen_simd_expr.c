/*
 * codegen_simd_expr.c: the expressions of the SIMD lowering (codegen_simd.c
 * has the statements and says what goes on lanes): a varying expression is
 * lowered to a vector of its lanes, a complex one to a pair of vectors, a
 * uniform one by the shared lowering (kj_codegen_expr) and repeated.
 * Arithmetic keeps the scalar code's rules lane by lane; conversions,
 * masked loads and stores, gathers and scatters, atomics lane by lane, math
 * (LLVM's vector intrinsics, libmvec's vector functions, or per lane) and
 * calls to the SIMD variants of plain functions.
 */
#include "codegen_simd.h"

#include <stdlib.h>

/* ============================================================ conversions */

static LLVMValueRef make_pair(Simd *s, LLVMValueRef re, LLVMValueRef im)
{
    LLVMTypeRef t = LLVMStructTypeInContext(s->g->ctx, (LLVMTypeRef[]){LLVMTypeOf(re), LLVMTypeOf(re)}, 2, 0);
    LLVMValueRef v = LLVMBuildInsertValue(s->b, LLVMGetPoison(t), re, 0, "");
    return LLVMBuildInsertValue(s->b, v, im, 1, "");
}

/*
 * 64-bit integers and f64 on hosts without AVX-512DQ, which have no packed
 * instruction for either conversion: LLVM would convert lane by lane (and
 * the saturating one with a branch per lane).  Both are exact here in a
 * few vector instructions, with the scalar code's results:
 *   i64 -> f64: hi * 2^32 + lo, the halves placed in the significands of
 *     two large powers of two (i64_to_f64); the one addition rounds once,
 *     to nearest, as the scalar conversion does;
 *   f64 -> i64, saturating: t = trunc(x), hi = floor(t / 2^32) and
 *     lo = t - hi * 2^32 are exact integers of 32 bits, converted and put
 *     together; NaN gives 0, and what is out of range the nearest bound.
 */
static bool split_64bit_conversions(Simd *s)
{
    const char *f = s->g->cpu_features ? s->g->cpu_features : "";
    return strncmp(LLVMGetTarget(s->g->mod), "x86_64", 6) == 0 && !kj_has_cpu_feature(f, "+avx512dq");
}

static LLVMValueRef vconst_f64(Simd *s, double v) { return splat_const(s, LLVMConstReal(s->g->t_f64, v)); }

/* `fast` when cond holds, else `slow`: both are built by fn on v, each
 * behind its side of a branch, and a phi joins them. */
typedef LLVMValueRef (*ConvertFn)(Simd *s, LLVMValueRef v, bool fast, bool flag);

static LLVMValueRef fast_or_slow(Simd *s, LLVMValueRef cond, ConvertFn fn, LLVMValueRef v, bool flag)
{
    LLVMBasicBlockRef fast_bb = new_block(s->g, "convert.fast"), slow_bb = new_block(s->g, "convert.slow"),
                      done = new_block(s->g, "convert.done");
    LLVMBuildCondBr(s->b, cond, fast_bb, slow_bb);
    LLVMPositionBuilderAtEnd(s->b, fast_bb);
    LLVMValueRef a = fn(s, v, true, flag);
    LLVMBasicBlockRef fast_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, slow_bb);
    LLVMValueRef b = fn(s, v, false, flag);
    LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(a), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){a, b}, (LLVMBasicBlockRef[]){fast_end, slow_end}, 2);
    return phi;
}

/* i64 -> f64 (or u64) in five instructions and no branch: the high half
 * goes into the significand of 2^84 (+ 2^63, the sign bit flipped, when
 * signed), the low half into that of 2^52; (high - their sum of biases) is
 * hi * 2^32 - 2^52 exactly (a multiple of 2^32 below 2^64 in size), and
 * adding (2^52 + lo) gives hi * 2^32 + lo rounded once, to nearest, as the
 * scalar conversion rounds.  0 gives +0.0. */
static LLVMValueRef i64_to_f64(Simd *s, LLVMValueRef v, bool is_signed)
{
    LLVMBuilderRef B = s->b;
    Gen *g = s->g;
    LLVMTypeRef f64v = vec_of(s, g->t_f64);
    LLVMValueRef high = LLVMBuildLShr(B, v, splat_const(s, LLVMConstInt(g->t_i64, 32, 0)), "");
    high = LLVMBuildXor(B, high, splat_const(s, LLVMConstInt(g->t_i64, is_signed ? 0x4530000080000000ull
                                                                                   : 0x4530000000000000ull, 0)), "");
    /* the low halves beside 2^52's high half: one blend of 32-bit lanes
     * (x86 is little-endian, so a 64-bit lane's low half comes first) */
    LLVMTypeRef halves = LLVMVectorType(g->t_i32, (unsigned)(2 * s->lanes));
    LLVMValueRef items[128], picks[128];
    for (int k = 0; k < 2 * s->lanes; k++) {
        items[k] = LLVMConstInt(g->t_i32, k % 2 ? 0x43300000u : 0, 0);
        picks[k] = const_i32(g, k % 2 ? 2 * s->lanes + k : k);
    }
    LLVMValueRef low = LLVMBuildShuffleVector(B, LLVMBuildBitCast(B, v, halves, ""),
                                              LLVMConstVector(items, (unsigned)(2 * s->lanes)),
                                              LLVMConstVector(picks, (unsigned)(2 * s->lanes)), "");
    low = LLVMBuildBitCast(B, low, vec_of(s, g->t_i64), "");
    /* 2^84 + 2^52, and 2^63 more when signed */
    double bias = is_signed ? 0x1.00000801p+84 : 0x1.00000001p+84;
    LLVMValueRef hf = LLVMBuildFSub(B, LLVMBuildBitCast(B, high, f64v, ""), vconst_f64(s, bias), "");
    return LLVMBuildFAdd(B, hf, LLVMBuildBitCast(B, low, f64v, ""), "");
}

/* What a saturating float to i64 gives a lane outside [-2^63, 2^63): NaN
 * 0, above the range the largest i64, below it the smallest. */
static LLVMValueRef i64_saturated(Simd *s, LLVMValueRef x)
{
    LLVMBuilderRef B = s->b;
    LLVMValueRef bound = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, x, LLVMConstNull(LLVMTypeOf(x)), ""),
                                         splat_const(s, LLVMConstInt(s->g->t_i64, (unsigned long long)INT64_MAX, 0)),
                                         splat_const(s, LLVMConstInt(s->g->t_i64, (unsigned long long)INT64_MIN, 0)), "");
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), LLVMConstNull(vec_of(s, s->g->t_i64)),
                           bound, "");
}

static LLVMValueRef f64_to_i64_sat_split(Simd *s, LLVMValueRef x)
{
    LLVMBuilderRef B = s->b;
    Gen *g = s->g;
    LLVMTypeRef f64v = vec_of(s, g->t_f64), i32v = vec_of(s, g->t_i32), i64v = vec_of(s, g->t_i64);
    LLVMValueRef t = kj_codegen_call_intrinsic(g, "llvm.trunc", &f64v, 1, &x, 1);
    /* in range (and not NaN): [-2^63, 2^63) */
    LLVMValueRef low_ok = LLVMBuildFCmp(B, LLVMRealOGE, t, vconst_f64(s, -9223372036854775808.0), "");
    LLVMValueRef high_ok = LLVMBuildFCmp(B, LLVMRealOLT, t, vconst_f64(s, 9223372036854775808.0), "");
    LLVMValueRef in_range = LLVMBuildAnd(B, low_ok, high_ok, "");
    LLVMValueRef safe = LLVMBuildSelect(B, in_range, t, LLVMConstNull(f64v), "");
    LLVMValueRef hf = LLVMBuildFMul(B, safe, vconst_f64(s, 1.0 / 4294967296.0), "");
    hf = kj_codegen_call_intrinsic(g, "llvm.floor", &f64v, 1, &hf, 1);
    LLVMValueRef lf = LLVMBuildFSub(B, safe, LLVMBuildFMul(B, hf, vconst_f64(s, 4294967296.0), ""), "");
    /* hi in [-2^31, 2^31); lo in [0, 2^32), converted as lo - 2^31 */
    LLVMValueRef hi = LLVMBuildFPToSI(B, hf, i32v, "");
    LLVMValueRef lo = LLVMBuildFPToSI(B, LLVMBuildFSub(B, lf, vconst_f64(s, 2147483648.0), ""), i32v, "");
    lo = LLVMBuildXor(B, lo, splat_const(s, LLVMConstInt(g->t_i32, 0x80000000u, 0)), "");
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildShl(B, LLVMBuildSExt(B, hi, i64v, ""), splat_const(s, LLVMConstInt(g->t_i64, 32, 0)), ""),
                                 LLVMBuildZExt(B, lo, i64v, ""), "");
    return LLVMBuildSelect(B, in_range, r, i64_saturated(s, x), "");
}

/* The common case first: values that fit 32 bits convert in one packed
 * instruction; the split form above takes the rest. */
static LLVMValueRef f64_to_i64_step(Simd *s, LLVMValueRef x, bool fast, bool unused)
{
    (void)unused;
    if (!fast)
        return f64_to_i64_sat_split(s, x);
    LLVMValueRef narrow = LLVMBuildFPToSI(s->b, x, vec_of(s, s->g->t_i32), "");
    return LLVMBuildSExt(s->b, narrow, vec_of(s, s->g->t_i64), "");
}

/* x86's truncating conversion of the lanes to i32 (cvttpd2dq), which answers
 * 0x80000000 for what it cannot convert (NaN, out of range); NULL where the
 * lanes are not one xmm or ymm register. */
static LLVMValueRef x86_truncate_i32(Simd *s, LLVMValueRef x)
{
    const char *f = s->g->cpu_features ? s->g->cpu_features : "";
    if (s->lanes == 4 && kj_has_cpu_feature(f, "+avx"))
        return kj_codegen_call_intrinsic(s->g, "llvm.x86.avx.cvtt.pd2dq.256", NULL, 0, &x, 1);
    if (s->lanes == 2) {
        LLVMValueRef four = kj_codegen_call_intrinsic(s->g, "llvm.x86.sse2.cvttpd2dq", NULL, 0, &x, 1);
        LLVMValueRef low[2] = {const_i32(s->g, 0), const_i32(s->g, 1)};
        return LLVMBuildShuffleVector(s->b, four, LLVMGetPoison(LLVMTypeOf(four)), LLVMConstVector(low, 2), "");
    }
    return NULL;
}

static LLVMValueRef f64_to_i64_sat(Simd *s, LLVMValueRef x)
{
    LLVMValueRef narrow = x86_truncate_i32(s, x);
    if (narrow) {
        /* No lane reads 0x80000000: each converted, and the i32 is the
         * answer (x in (-2^31 - 1, -2^31], which gives that value itself,
         * takes the slow way, which answers the same). */
        LLVMValueRef invalid = LLVMBuildICmp(s->b, LLVMIntEQ, narrow,
                                             splat_const(s, LLVMConstInt(s->g->t_i32, 0x80000000u, 0)), "");
        LLVMBasicBlockRef fast_bb = new_block(s->g, "convert.fast"), slow_bb = new_block(s->g, "convert.slow"),
                          done = new_block(s->g, "convert.done");
        LLVMBuildCondBr(s->b, any_lane(s, invalid), slow_bb, fast_bb);
        LLVMPositionBuilderAtEnd(s->b, fast_bb);
        LLVMValueRef a = LLVMBuildSExt(s->b, narrow, vec_of(s, s->g->t_i64), "");
        LLVMBuildBr(s->b, done);
        LLVMPositionBuilderAtEnd(s->b, slow_bb);
        LLVMValueRef b = f64_to_i64_sat_split(s, x);
        LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(s->b);
        LLVMBuildBr(s->b, done);
        LLVMPositionBuilderAtEnd(s->b, done);
        LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(a), "");
        LLVMAddIncoming(phi, (LLVMValueRef[]){a, b}, (LLVMBasicBlockRef[]){fast_bb, slow_end}, 2);
        return phi;
    }
    /* truncation lands in i32's range (NaN fails both tests) */
    LLVMValueRef above = LLVMBuildFCmp(s->b, LLVMRealOGT, x, vconst_f64(s, -2147483649.0), "");
    LLVMValueRef below = LLVMBuildFCmp(s->b, LLVMRealOLT, x, vconst_f64(s, 2147483648.0), "");
    return fast_or_slow(s, all_lanes(s, LLVMBuildAnd(s->b, above, below, "")), f64_to_i64_step, x, false);
}

/* A float to i64, saturating, on hosts with packed 64-bit conversions
 * (AVX-512DQ), where LLVM would still take llvm.fptosi.sat lane by lane with
 * a branch per lane: lanes in [-2^63, 2^63) convert as they are (a plain
 * fptosi of a value in range), the others i64_saturated's bound, so every
 * lane is the scalar code's. */
static LLVMValueRef float_to_i64_sat_packed(Simd *s, LLVMValueRef x)
{
    LLVMBuilderRef B = s->b;
    Gen *g = s->g;
    LLVMTypeRef ft = LLVMGetElementType(LLVMTypeOf(x)), i64v = vec_of(s, g->t_i64);
    LLVMValueRef low = splat_const(s, LLVMConstReal(ft, -9223372036854775808.0));
    LLVMValueRef high = splat_const(s, LLVMConstReal(ft, 9223372036854775808.0));
    LLVMValueRef in_range = LLVMBuildAnd(B, LLVMBuildFCmp(B, LLVMRealOGE, x, low, ""),
                                         LLVMBuildFCmp(B, LLVMRealOLT, x, high, ""), "");
    LLVMValueRef safe = LLVMBuildSelect(B, in_range, x, LLVMConstNull(LLVMTypeOf(x)), "");
    LLVMValueRef r = LLVMBuildFPToSI(B, safe, i64v, "");
    return LLVMBuildSelect(B, in_range, r, i64_saturated(s, x), "");
}

static bool packed_64bit_conversions(Simd *s)
{
    const char *f = s->g->cpu_features ? s->g->cpu_features : "";
    return strncmp(LLVMGetTarget(s->g->mod), "x86_64", 6) == 0 && kj_has_cpu_feature(f, "+avx512dq");
}

/* ---- narrowing rules (codegen_simd_range.c proves the ranges) */

#define I32_LOW (-((int64_t)1 << 31))
#define I32_HIGH (((int64_t)1 << 31) - 1)
#define EXACT_LOW (-((int64_t)1 << 51))
#define EXACT_HIGH (((int64_t)1 << 51) - 1)

/* x * y of 64-bit lanes whose operands both lie in [-2^31, 2^31): the
 * product of their low halves sign-extended, which never wraps and which
 * x86 makes in one vpmuldq (without AVX-512 it has no 64-bit multiply; with
 * it vpmullq is three micro-ops).  NULL when the operands are not known to
 * be that small. */
static LLVMValueRef narrow_multiply(Simd *s, KjIrExpr *e)
{
    const KjType *t = e->type;
    if (e->op != KJ_IR_MUL || !kj_type_is_int(t) || kj_type_int_bits(t) != 64 || e->args[0]->type != t ||
        e->args[1]->type != t || !kj_simd_fits(s, e->args[0], I32_LOW, I32_HIGH) ||
        !kj_simd_fits(s, e->args[1], I32_LOW, I32_HIGH))
        return NULL;
    LLVMTypeRef i32v = vec_of(s, s->g->t_i32), i64v = vec_of(s, s->g->t_i64);
    LLVMValueRef a = kj_simd_lanes_of(s, e->args[0], t), b = kj_simd_lanes_of(s, e->args[1], t);
    a = LLVMBuildSExt(s->b, LLVMBuildTrunc(s->b, a, i32v, ""), i64v, "");
    b = LLVMBuildSExt(s->b, LLVMBuildTrunc(s->b, b, i32v, ""), i64v, "");
    return LLVMBuildMul(s->b, a, b, "narrow.mul");
}

/* f64(x) for 64-bit lanes known to lie in [-2^51, 2^51): x added to the bits
 * of 1.5 * 2^52 stays inside that double's significand (no carry or borrow
 * reaches the exponent), so the sum's bits are the double 1.5 * 2^52 + x,
 * and subtracting 1.5 * 2^52 is exact (0 gives +0.0, as the conversion
 * does).  Two instructions, without the test of i64_to_f64. */
static LLVMValueRef exact_i64_to_f64(Simd *s, LLVMValueRef v)
{
    Gen *g = s->g;
    const double magic = 6755399441055744.0; /* 1.5 * 2^52: bits 0x4338000000000000 */
    LLVMValueRef biased = LLVMBuildAdd(s->b, v, splat_const(s, LLVMConstInt(g->t_i64, 0x4338000000000000ull, 0)), "");
    LLVMValueRef as_double = LLVMBuildBitCast(s->b, biased, vec_of(s, g->t_f64), "");
    return LLVMBuildFSub(s->b, as_double, vconst_f64(s, magic), "exact.f64");
}

/* A cast from a 64-bit integer to f64 whose operand is known to lie in the
 * exact range, on a host without the packed conversion.  NULL otherwise. */
static LLVMValueRef narrow_i64_to_f64(Simd *s, KjIrExpr *e)
{
    const KjType *from = e->args[0]->type;
    if (e->type->kind != KJ_TYPE_F64 || !kj_type_is_int(from) || kj_type_int_bits(from) != 64 ||
        !split_64bit_conversions(s) || !kj_simd_fits(s, e->args[0], EXACT_LOW, EXACT_HIGH))
        return NULL;
    return exact_i64_to_f64(s, kj_simd_expr(s, e->args[0]));
}

/*
 * f64(x) for a signed 64-bit unit variable whose lane 0 is at hand as a
 * scalar (a counter that gen_loop keeps so, Simd.lane0_vars), on a host
 * without the packed conversion: lane k is x0 + k, so with x0 in
 * [-2^52, 2^52) every lane is f64(x0) + k exactly (each an integer below
 * 2^53 in size), one scalar conversion and one vector addition after a
 * branch that always goes one way; other x0 take i64_to_f64.  NULL when it
 * does not apply.
 */
static LLVMValueRef unit_i64_to_f64(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    const KjIrExpr *x = e->args[0];
    if (e->type->kind != KJ_TYPE_F64 || x->op != KJ_IR_VAR || x->type->kind != KJ_TYPE_I64 ||
        !split_64bit_conversions(s))
        return NULL;
    LLVMValueRef slot = lane0_slot(s, x->var);
    if (!slot)
        return NULL;
    LLVMBuilderRef B = s->b;
    LLVMValueRef lanes = kj_simd_expr(s, e->args[0]);
    LLVMValueRef x0 = LLVMBuildLoad2(B, g->t_i64, slot, "lane0");
    /* x0 >> 52 is -1 or 0 (small immediates, where x0 + 2^52 < 2^53 needs
     * two of ten bytes) */
    LLVMValueRef top = LLVMBuildAShr(B, x0, const_i64(g, 52), "");
    LLVMValueRef near = LLVMBuildICmp(B, LLVMIntULT, LLVMBuildAdd(B, top, const_i64(g, 1), ""), const_i64(g, 2), "");
    LLVMBasicBlockRef fast_bb = new_block(g, "convert.unit"), slow_bb = new_block(g, "convert.slow"),
                      done = new_block(g, "convert.done");
    LLVMBuildCondBr(B, near, fast_bb, slow_bb);
    LLVMPositionBuilderAtEnd(B, fast_bb);
    LLVMValueRef steps = LLVMBuildSIToFP(B, iota(s, g->t_i64), vec_of(s, g->t_f64), "");
    LLVMValueRef fast = LLVMBuildFAdd(B, splat(s, LLVMBuildSIToFP(B, x0, g->t_f64, "")), steps, "");
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, slow_bb);
    LLVMValueRef slow = i64_to_f64(s, lanes, true);
    LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMValueRef phi = LLVMBuildPhi(B, vec_of(s, g->t_f64), "unit.f64");
    LLVMAddIncoming(phi, (LLVMValueRef[]){fast, slow}, (LLVMBasicBlockRef[]){fast_bb, slow_end}, 2);
    return phi;
}

/* kj_codegen_convert on vectors (f16 and bf16 never get here). */
static LLVMValueRef vconvert(Simd *s, LLVMValueRef v, const KjType *from, const KjType *to)
{
    LLVMBuilderRef B = s->b;
    if (from == to)
        return v;
    LLVMTypeRef dst = vty(s, to);
    if (kj_type_is_complex(to)) {
        const KjType *part = kj_type_complex_part(to);
        if (kj_type_is_complex(from)) {
            const KjType *fpart = kj_type_complex_part(from);
            return make_pair(s, vconvert(s, LLVMBuildExtractValue(B, v, 0, ""), fpart, part),
                             vconvert(s, LLVMBuildExtractValue(B, v, 1, ""), fpart, part));
        }
        LLVMValueRef re = vconvert(s, v, from, part);
        return make_pair(s, re, LLVMConstNull(LLVMTypeOf(re)));
    }
    if (kj_type_is_complex(from))
        return vconvert(s, LLVMBuildExtractValue(B, v, 0, ""), kj_type_complex_part(from), to);
    if (to->kind == KJ_TYPE_BOOL)
        return kj_type_is_float(from) ? LLVMBuildFCmp(B, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "")
                                      : LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    if (from->kind == KJ_TYPE_BOOL)
        return kj_type_is_float(to) ? LLVMBuildUIToFP(B, v, dst, "") : LLVMBuildZExt(B, v, dst, "");
    if (kj_type_is_int(from) && kj_type_is_int(to)) {
        int fb = kj_type_int_bits(from), tb = kj_type_int_bits(to);
        if (fb == tb)
            return v;
        if (fb > tb)
            return LLVMBuildTrunc(B, v, dst, "");
        return kj_type_is_signed(from) ? LLVMBuildSExt(B, v, dst, "") : LLVMBuildZExt(B, v, dst, "");
    }
    if (kj_type_is_int(from) && kj_type_is_float(to)) {
        if (kj_type_int_bits(from) == 64 && to->kind == KJ_TYPE_F64 && split_64bit_conversions(s))
            return i64_to_f64(s, v, kj_type_is_signed(from));
        return kj_type_is_signed(from) ? LLVMBuildSIToFP(B, v, dst, "") : LLVMBuildUIToFP(B, v, dst, "");
    }
    if (from->kind == KJ_TYPE_F64 && (to->kind == KJ_TYPE_I64) && split_64bit_conversions(s))
        return f64_to_i64_sat(s, v);
    if ((from->kind == KJ_TYPE_F64 || from->kind == KJ_TYPE_F32) && to->kind == KJ_TYPE_I64 &&
        packed_64bit_conversions(s))
        return float_to_i64_sat_packed(s, v);
    if (kj_type_is_float(from) && kj_type_is_int(to)) {
        LLVMTypeRef ts[2] = {dst, LLVMTypeOf(v)};
        return kj_codegen_call_intrinsic(s->g, kj_type_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat",
                                         ts, 2, &v, 1);
    }
    if (kj_type_is_float(from) && kj_type_is_float(to))
        return kj_type_size(to) > kj_type_size(from) ? LLVMBuildFPExt(B, v, dst, "")
                                                     : LLVMBuildFPTrunc(B, v, dst, "");
    kj_die("no vector conversion from %s to %s", kj_type_name(from), kj_type_name(to));
}

/* ============================================================ expressions */

/* e's value in every lane, of e's type: a varying value as lowered here, a
 * uniform one by the shared code and repeated. */
LLVMValueRef kj_simd_lanes_of(Simd *s, KjIrExpr *e, const KjType *to)
{
    LLVMValueRef v = simd_varying(s, e) ? kj_simd_expr(s, e) : splat(s, kj_codegen_expr(s->g, e));
    return vconvert(s, v, e->type, to);
}

/* Whether e reads memory or calls: code that must not run for no lane. */
bool kj_simd_touches_memory(const KjIrExpr *e)
{
    if (e->op == KJ_IR_LOAD || e->op == KJ_IR_CALL || e->op == KJ_IR_ATOMIC)
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (kj_simd_touches_memory(e->args[i]))
            return true;
    return false;
}

/* Whether e may be lowered twice, once with every lane on: no operator
 * that lowers its operands under masks of their own (the copies would
 * double at each level), no call or atomic. */
static bool copyable(const KjIrExpr *e)
{
    if (e->op == KJ_IR_SELECT || e->op == KJ_IR_LOGAND || e->op == KJ_IR_LOGOR || e->op == KJ_IR_CALL ||
        e->op == KJ_IR_ATOMIC)
        return false;
    for (int i = 0; i < e->arg_count; i++)
        if (!copyable(e->args[i]))
            return false;
    return true;
}

/* e's lanes when every lane of `mask` (not a constant) may be on: e with
 * every lane on (its loads plain) when they all are, else under the mask,
 * else zero.  The usual case (`i < n ? x[i] : 0` inside the array) then
 * pays one test. */
static LLVMValueRef lanes_all_some_none(Simd *s, KjIrExpr *e, const KjType *to, LLVMValueRef mask)
{
    Gen *g = s->g;
    LLVMBasicBlockRef all_bb = new_block(g, "lanes.all"), test_bb = new_block(g, "lanes.test"),
                      some_bb = new_block(g, "lanes.some"), done = new_block(g, "lanes.done");
    LLVMValueRef stmt_mask = s->stmt_mask;
    LLVMBasicBlockRef outer, escape = kj_simd_escape_open(s, &outer);
    LLVMBuildCondBr(s->b, all_lanes(s, mask), all_bb, test_bb);
    LLVMPositionBuilderAtEnd(s->b, all_bb);
    s->mask = LLVMConstAllOnes(s->mask_type);
    LLVMValueRef all = kj_simd_lanes_of(s, e, to);
    LLVMBasicBlockRef all_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    s->stmt_mask = stmt_mask;
    LLVMPositionBuilderAtEnd(s->b, test_bb);
    LLVMBuildCondBr(s->b, any_lane(s, mask), some_bb, done);
    LLVMPositionBuilderAtEnd(s->b, some_bb);
    s->mask = mask;
    LLVMValueRef some = kj_simd_lanes_of(s, e, to);
    LLVMBasicBlockRef some_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    s->stmt_mask = stmt_mask;
    bool escaped = kj_simd_escape_close(s, escape, outer, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    LLVMValueRef v = LLVMBuildPhi(s->b, LLVMTypeOf(all), "");
    LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(all));
    LLVMAddIncoming(v, (LLVMValueRef[]){all, zero, some, zero},
                    (LLVMBasicBlockRef[]){all_end, test_bb, some_end, escape}, escaped ? 4 : 3);
    return v;
}

/* e under `mask`: evaluated only when some lane is in it, when it touches
 * memory (a uniform load behind `i < n &&` must not run for no lane);
 * all_path: with a copy for every lane on (lanes_all_some_none). */
static LLVMValueRef lanes_under_as(Simd *s, KjIrExpr *e, const KjType *to, LLVMValueRef mask, bool all_path)
{
    LLVMValueRef saved = s->mask, stmt_mask = s->stmt_mask;
    s->mask = mask;
    LLVMValueRef v;
    if (!kj_simd_touches_memory(e)) {
        v = kj_simd_lanes_of(s, e, to);
    } else if (all_path && !LLVMIsConstant(mask) && copyable(e)) {
        v = lanes_all_some_none(s, e, to, mask);
    } else {
        LLVMBasicBlockRef before = LLVMGetInsertBlock(s->b);
        LLVMBasicBlockRef run = new_block(s->g, "lanes.run"), done = new_block(s->g, "lanes.done");
        LLVMBasicBlockRef outer, escape = kj_simd_escape_open(s, &outer);
        LLVMBuildCondBr(s->b, any_lane(s, mask), run, done);
        LLVMPositionBuilderAtEnd(s->b, run);
        LLVMValueRef r = kj_simd_lanes_of(s, e, to);
        LLVMBasicBlockRef run_end = LLVMGetInsertBlock(s->b);
        LLVMBuildBr(s->b, done);
        s->stmt_mask = stmt_mask;
        bool escaped = kj_simd_escape_close(s, escape, outer, done);
        LLVMPositionBuilderAtEnd(s->b, done);
        v = LLVMBuildPhi(s->b, LLVMTypeOf(r), "");
        LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(r));
        LLVMAddIncoming(v, (LLVMValueRef[]){zero, r, zero}, (LLVMBasicBlockRef[]){before, run_end, escape},
                        escaped ? 3 : 2);
    }
    s->stmt_mask = stmt_mask;
    /* the lanes that failed a check in e are gone (checked mode) */
    s->mask = kj_simd_expr_may_fail(s, e) ? kj_simd_drop_failed(s, saved) : saved;
    if (saved == stmt_mask)
        s->stmt_mask = s->mask;
    return v;
}

static LLVMValueRef lanes_under(Simd *s, KjIrExpr *e, const KjType *to, LLVMValueRef mask)
{
    return lanes_under_as(s, e, to, mask, true);
}

/*
 * c ? a : b when a side touches memory: when every running lane takes one
 * side, that side alone with every lane on (no masks, no blend), else both
 * under their masks and blended.  Both sides copyable (see copyable).
 */
static LLVMValueRef select_one_side(Simd *s, KjIrExpr *e, LLVMValueRef c)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    LLVMValueRef saved = s->mask;
    LLVMValueRef then_mask = LLVMBuildAnd(B, saved, c, "");
    LLVMValueRef else_mask = LLVMBuildAnd(B, saved, LLVMBuildNot(B, c, ""), "");
    LLVMBasicBlockRef then_bb = new_block(g, "select.then"), test_bb = new_block(g, "select.test"),
                      else_bb = new_block(g, "select.else"), mixed_bb = new_block(g, "select.mixed"),
                      done = new_block(g, "select.done");
    LLVMValueRef vals[4];
    LLVMBasicBlockRef from[4];
    LLVMValueRef stmt_mask = s->stmt_mask;
    LLVMBasicBlockRef outer, escape = kj_simd_escape_open(s, &outer);
    LLVMBuildCondBr(B, all_lanes(s, then_mask), then_bb, test_bb);
    LLVMPositionBuilderAtEnd(B, then_bb);
    s->mask = LLVMConstAllOnes(s->mask_type);
    vals[0] = kj_simd_lanes_of(s, e->args[1], e->type);
    from[0] = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, done);
    s->stmt_mask = stmt_mask;
    LLVMPositionBuilderAtEnd(B, test_bb);
    LLVMBuildCondBr(B, all_lanes(s, else_mask), else_bb, mixed_bb);
    LLVMPositionBuilderAtEnd(B, else_bb);
    s->mask = LLVMConstAllOnes(s->mask_type);
    vals[1] = kj_simd_lanes_of(s, e->args[2], e->type);
    from[1] = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, done);
    s->stmt_mask = stmt_mask;
    bool escaped = kj_simd_escape_close(s, escape, outer, done);
    LLVMPositionBuilderAtEnd(B, mixed_bb);
    s->mask = saved;
    LLVMValueRef a = lanes_under_as(s, e->args[1], e->type, then_mask, false);
    LLVMValueRef b = lanes_under_as(s, e->args[2], e->type, else_mask, false);
    vals[2] = blend(s, c, a, b);
    from[2] = LLVMGetInsertBlock(B);
    LLVMBuildBr(B, done);
    LLVMPositionBuilderAtEnd(B, done);
    LLVMValueRef v = LLVMBuildPhi(B, LLVMTypeOf(vals[0]), "");
    vals[3] = LLVMConstNull(LLVMTypeOf(vals[0]));
    from[3] = escape;
    LLVMAddIncoming(v, vals, from, escaped ? 4 : 3);
    s->stmt_mask = stmt_mask;
    s->mask = kj_simd_expr_may_fail(s, e) ? kj_simd_drop_failed(s, saved) : saved;
    if (saved == stmt_mask)
        s->stmt_mask = s->mask;
    return v;
}

/* Whether e is one load in every lane whose array and indices read no
 * memory: lowered under a mask, it is one masked load or gather that
 * touches only the active lanes' elements, safe for any mask, none on
 * included (a uniform load is a scalar one, which is not). */
static bool lone_varying_load(Simd *s, const KjIrExpr *e)
{
    if (e->op != KJ_IR_LOAD || !simd_varying(s, e) || kj_type_is_complex(e->type))
        return false;
    for (int i = 0; i < e->arg_count; i++)
        if (kj_simd_touches_memory(e->args[i]))
            return false;
    return true;
}

/*
 * c ? a[..] : k, the guarded load (a tile's `r < n ? a[r, k] : 0.0`): the
 * load under the lanes of c, the other side (no memory) in every lane,
 * blended.  One masked load or gather for every case of c, where
 * select_one_side makes three paths (every lane, none, mixed) each with its
 * own copy of the access (issue 25: a third of matmul's block shape).  The
 * bits are the same: the active lanes load what they would unmasked.
 */
static LLVMValueRef select_guarded_load(Simd *s, KjIrExpr *e, LLVMValueRef c, int load_side)
{
    LLVMBuilderRef B = s->b;
    LLVMValueRef saved = s->mask, stmt_mask = s->stmt_mask;
    LLVMValueRef lanes = load_side == 1 ? c : LLVMBuildNot(B, c, "");
    LLVMValueRef other = kj_simd_lanes_of(s, e->args[3 - load_side], e->type);
    s->mask = LLVMBuildAnd(B, saved, lanes, "");
    LLVMValueRef loaded = kj_simd_lanes_of(s, e->args[load_side], e->type);
    s->mask = saved;
    s->stmt_mask = stmt_mask;
    return load_side == 1 ? blend(s, c, loaded, other) : blend(s, c, other, loaded);
}

/* Which side of select e is a guarded load (1 or 2; 0: neither): a lone
 * varying load on one side, no memory on the other, outside checked mode
 * (whose checks under a mask of their own want select_one_side's paths). */
static int guarded_load_side(Simd *s, const KjIrExpr *e)
{
    if (s->checks || simd_switched_off(KJ_SIMD_GUARDED_LOADS))
        return 0;
    for (int side = 1; side <= 2; side++)
        if (lone_varying_load(s, e->args[side]) && !kj_simd_touches_memory(e->args[3 - side]))
            return side;
    return 0;
}

static LLVMValueRef vint_div(Simd *s, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef d)
{
    LLVMBuilderRef B = s->b;
    LLVMTypeRef t = vty(s, type);
    LLVMValueRef zero = LLVMConstNull(t), one = splat_const(s, LLVMConstInt(llty(s->g, type), 1, 0));
    LLVMValueRef is_zero = LLVMBuildICmp(B, LLVMIntEQ, d, zero, "");
    if (!kj_type_is_signed(type)) {
        LLVMValueRef safe = LLVMBuildSelect(B, is_zero, one, d, "");
        return op == KJ_IR_DIV ? LLVMBuildUDiv(B, a, safe, "") : LLVMBuildURem(B, a, safe, "");
    }
    /* as gen_int_div: divisors 0 and -1 become 1 (in inactive lanes too) */
    LLVMValueRef is_minus_one = LLVMBuildICmp(B, LLVMIntEQ, d, LLVMConstAllOnes(t), "");
    LLVMValueRef safe = LLVMBuildSelect(B, LLVMBuildOr(B, is_zero, is_minus_one, ""), one, d, "");
    if (op == KJ_IR_REM)
        return LLVMBuildSRem(B, a, safe, "");
    LLVMValueRef q = LLVMBuildSDiv(B, a, safe, "");
    return LLVMBuildSelect(B, is_minus_one, LLVMBuildSub(B, zero, a, ""), q, "");
}

/* e is x / 2^k with x the variable that the enclosing then side knows a
 * multiple of 2^j, k <= j (Simd.even_var): k, as the quotient is exact and
 * an arithmetic shift gives it; else 0. */
static int exact_shift(const Simd *s, const KjIrExpr *e)
{
    if (!s->even_var || e->op != KJ_IR_DIV || e->args[0]->op != KJ_IR_VAR || e->args[0]->var != s->even_var ||
        e->args[0]->type != e->type || e->args[1]->op != KJ_IR_CONST || e->args[1]->type != e->type ||
        !kj_type_is_int(e->type) || !kj_type_is_signed(e->type))
        return 0;
    int bits = kj_type_int_bits(e->type);
    uint64_t m = e->args[1]->const_int & (bits == 64 ? ~0ull : (1ull << bits) - 1);
    if (m < 2 || (m & (m - 1)))
        return 0;
    int k = __builtin_ctzll(m);
    return k <= s->even_shift ? k : 0;
}

/* gen_arith on vectors; b of the result's type except a shift's count. */
static LLVMValueRef varith(Simd *s, KjIrOp op, const KjType *type, LLVMValueRef a, LLVMValueRef b,
                           const KjType *btype)
{
    LLVMBuilderRef B = s->b;
    if (kj_type_is_complex(type))
        return kj_codegen_complex_arith(s->g, op, a, b);
    if (kj_type_is_float(type)) {
        switch (op) {
        case KJ_IR_ADD: return LLVMBuildFAdd(B, a, b, "");
        case KJ_IR_SUB: return LLVMBuildFSub(B, a, b, "");
        case KJ_IR_MUL: return LLVMBuildFMul(B, a, b, "");
        case KJ_IR_DIV: return LLVMBuildFDiv(B, a, b, "");
        case KJ_IR_REM: return LLVMBuildFRem(B, a, b, "");
        default: kj_unreachable();
        }
    }
    switch (op) {
    case KJ_IR_ADD: return LLVMBuildAdd(B, a, b, "");
    case KJ_IR_SUB: return LLVMBuildSub(B, a, b, "");
    case KJ_IR_MUL: return LLVMBuildMul(B, a, b, "");
    case KJ_IR_DIV: case KJ_IR_REM: return vint_div(s, op, type, a, b);
    case KJ_IR_BITAND: return LLVMBuildAnd(B, a, b, "");
    case KJ_IR_BITOR: return LLVMBuildOr(B, a, b, "");
    case KJ_IR_BITXOR: return LLVMBuildXor(B, a, b, "");
    case KJ_IR_SHL: case KJ_IR_SHR: {
        int bits = kj_type_int_bits(type), bbits = kj_type_int_bits(btype);
        LLVMTypeRef t = vty(s, type);
        if (bbits > bits)
            b = LLVMBuildTrunc(B, b, t, "");
        else if (bbits < bits)
            b = LLVMBuildZExt(B, b, t, "");
        b = LLVMBuildAnd(B, b, splat_const(s, LLVMConstInt(llty(s->g, type), (unsigned)bits - 1, 0)), "");
        if (op == KJ_IR_SHL)
            return LLVMBuildShl(B, a, b, "");
        return kj_type_is_signed(type) ? LLVMBuildAShr(B, a, b, "") : LLVMBuildLShr(B, a, b, "");
    }
    default: kj_unreachable();
    }
}

/* A uniform flag in every lane, as a mask of the lanes' width (see
 * widen_mask): a splat of an i1 would be combined with the compares' masks
 * in bytes, repacked per use. */
static LLVMValueRef uniform_lanes(Simd *s, LLVMValueRef flag)
{
    if (LLVMIsConstant(flag))
        return splat(s, flag);
    return narrow_mask(s, widen_mask(s, splat(s, flag)));
}

/*
 * A compare of a widened narrow integer with a uniform value of the wide
 * type (`i64(i) < len(a)`, i an i32) made in the narrow type, as many lanes
 * to a register as the narrow type holds: the uniform side is clamped to
 * the narrow type's range, and where it lies outside that range every lane
 * has the same answer.  NULL when e is not such a compare.
 */
static LLVMValueRef narrow_compare(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    const KjType *t = e->args[0]->type;
    if (!kj_type_is_int(t) || kj_type_int_bits(t) != 64)
        return NULL;
    KjIrOp op = e->op;
    KjIrExpr *cast = e->args[0], *other = e->args[1];
    if (cast->op != KJ_IR_CAST) { /* u < i64(x) is i64(x) > u */
        cast = e->args[1];
        other = e->args[0];
        op = op == KJ_IR_LT ? KJ_IR_GT : op == KJ_IR_LE ? KJ_IR_GE : op == KJ_IR_GT ? KJ_IR_LT
           : op == KJ_IR_GE ? KJ_IR_LE : op;
    }
    if (cast->op != KJ_IR_CAST || cast->type != t || !simd_varying(s, cast) || simd_varying(s, other))
        return NULL;
    const KjType *n = cast->args[0]->type;
    if (!kj_type_is_int(n) || kj_type_int_bits(n) > 32 || n->kind == KJ_TYPE_BOOL)
        return NULL;
    bool wide_signed = kj_type_is_signed(t), narrow_signed = kj_type_is_signed(n);
    /* the narrow values must keep their order in the wide type */
    if (narrow_signed && !wide_signed)
        return NULL;
    int bits = kj_type_int_bits(n);
    LLVMTypeRef nt = llty(g, n), wt = g->t_i64;
    long long lo = narrow_signed ? -(1ll << (bits - 1)) : 0;
    long long hi = narrow_signed ? (1ll << (bits - 1)) - 1 : (long long)((1ull << bits) - 1);
    LLVMValueRef lo_w = LLVMConstInt(wt, (unsigned long long)lo, 1), hi_w = LLVMConstInt(wt, (unsigned long long)hi, 1);
    LLVMValueRef u = kj_codegen_convert(g, kj_codegen_expr(g, other), other->type, t);
    LLVMValueRef above = LLVMBuildICmp(B, wide_signed ? LLVMIntSGT : LLVMIntUGT, u, hi_w, "above");
    LLVMValueRef below = narrow_signed || wide_signed
                             ? LLVMBuildICmp(B, wide_signed ? LLVMIntSLT : LLVMIntULT, u, lo_w, "below")
                             : LLVMConstInt(g->t_i1, 0, 0);
    LLVMValueRef c = LLVMBuildSelect(B, above, hi_w, LLVMBuildSelect(B, below, lo_w, u, ""), "");
    LLVMValueRef x = kj_simd_expr(s, cast->args[0]);
    LLVMValueRef cmp = kj_codegen_compare(g, B, op, n, x, splat(s, LLVMBuildTrunc(B, c, nt, "")));
    /* the answer of every lane where u lies outside, as lane logic with the
     * uniform flags repeated (made once outside a loop; a select on the
     * flag stayed in the loop, a branch and the mask repacked per chunk) */
    LLVMValueRef A = uniform_lanes(s, above), Bw = uniform_lanes(s, below);
    switch (op) {
    case KJ_IR_LT: return LLVMBuildOr(B, cmp, A, "");
    case KJ_IR_LE: return LLVMBuildOr(B, LLVMBuildAnd(B, cmp, LLVMBuildNot(B, Bw, ""), ""), A, "");
    case KJ_IR_GT: return LLVMBuildOr(B, cmp, Bw, "");
    case KJ_IR_GE: return LLVMBuildOr(B, LLVMBuildAnd(B, cmp, LLVMBuildNot(B, A, ""), ""), Bw, "");
    default: { /* EQ, NE: no lane equals a value outside the narrow range */
        LLVMValueRef out = LLVMBuildOr(B, A, Bw, "");
        return op == KJ_IR_EQ ? LLVMBuildAnd(B, cmp, LLVMBuildNot(B, out, ""), "") : LLVMBuildOr(B, cmp, out, "");
    }
    }
}

/* ---- math */

/* fn applied lane by lane through the scalar lowering. */
static LLVMValueRef math_per_lane(Simd *s, KjMathFn fn, LLVMValueRef *a, int arity)
{
    LLVMValueRef out = NULL;
    for (int k = 0; k < s->lanes; k++) {
        LLVMValueRef lane[3];
        for (int i = 0; i < arity; i++)
            lane[i] = LLVMBuildExtractElement(s->b, a[i], const_i32(s->g, k), "");
        LLVMValueRef r = kj_codegen_math(s->g, fn, lane, arity);
        if (!out)
            out = LLVMGetPoison(vec_of(s, LLVMTypeOf(r)));
        out = LLVMBuildInsertElement(s->b, out, r, const_i32(s->g, k), "");
    }
    return out;
}

/* Lanes [first, first + count) of v. */
static LLVMValueRef sub_vector(Simd *s, LLVMValueRef v, int first, int count)
{
    LLVMValueRef idx[64];
    for (int k = 0; k < count; k++)
        idx[k] = const_i32(s->g, first + k);
    return LLVMBuildShuffleVector(s->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(idx, (unsigned)count), "");
}

/* A libmvec function: the one routine kj_codegen_libmvec_routine names
 * (the scalar code calls it too, so every lane gets the scalar code's bits),
 * called on each piece of its width; fewer lanes than that are widened with
 * copies of lane 0 and narrowed again after. */
static LLVMValueRef math_libmvec(Simd *s, KjMathFn fn, const char *libm, LLVMValueRef *a, int arity)
{
    Gen *g = s->g;
    LLVMTypeRef elem = LLVMGetElementType(LLVMTypeOf(a[0]));
    bool is_f32 = elem == g->t_f32;
    char libm_name[64], name[96];
    snprintf(libm_name, sizeof libm_name, "%s%s", libm, is_f32 ? "f" : "");
    int piece;
    LLVMValueRef callee = kj_codegen_libmvec_routine(g, libm_name, elem, arity, &piece, name);
    if (!callee || (s->lanes > piece && s->lanes % piece != 0))
        return math_per_lane(s, fn, a, arity);
    LLVMTypeRef pt = LLVMVectorType(elem, (unsigned)piece);
    LLVMTypeRef ps[2] = {pt, pt};
    LLVMTypeRef ft = LLVMFunctionType(pt, ps, (unsigned)arity, 0);
    if (s->lanes < piece) {
        LLVMValueRef wide[64], narrow[64], args[2];
        for (int k = 0; k < piece; k++)
            wide[k] = const_i32(g, k < s->lanes ? k : 0);
        for (int k = 0; k < s->lanes; k++)
            narrow[k] = const_i32(g, k);
        for (int j = 0; j < arity; j++)
            args[j] = LLVMBuildShuffleVector(s->b, a[j], LLVMGetPoison(LLVMTypeOf(a[j])),
                                             LLVMConstVector(wide, (unsigned)piece), "");
        LLVMValueRef r = LLVMBuildCall2(s->b, ft, callee, args, (unsigned)arity, "");
        return LLVMBuildShuffleVector(s->b, r, LLVMGetPoison(pt), LLVMConstVector(narrow, (unsigned)s->lanes), "");
    }
    LLVMValueRef out = LLVMGetPoison(LLVMTypeOf(a[0]));
    for (int first = 0; first < s->lanes; first += piece) {
        LLVMValueRef args[2];
        for (int j = 0; j < arity; j++)
            args[j] = piece == s->lanes ? a[j] : sub_vector(s, a[j], first, piece);
        LLVMValueRef r = LLVMBuildCall2(s->b, ft, callee, args, (unsigned)arity, "");
        if (piece == s->lanes)
            return r;
        for (int k = 0; k < piece; k++)
            out = LLVMBuildInsertElement(s->b, out, LLVMBuildExtractElement(s->b, r, const_i32(g, k), ""),
                                         const_i32(g, first + k), "");
    }
    return out;
}

static LLVMValueRef vmath(Simd *s, KjMathFn fn, LLVMValueRef *a, int arity)
{
    Gen *g = s->g;
    LLVMValueRef v = kj_codegen_math_inline(g, s->b, fn, a);
    if (v)
        return v;
    bool libmvec;
    const char *libm = kj_codegen_math_libm(fn, &libmvec);
    if (libmvec && (g->vec_sse || g->vec_avx2 || g->vec_avx512))
        return math_libmvec(s, fn, libm, a, arity);
    return math_per_lane(s, fn, a, arity);
}

/* x ** n for a constant n, as ipow_const: square-and-multiply. */
/* x ** m for m from 1 to 8: the checker's chain of products (codegen_expr.c's
 * ipow_chain), so that lanes and scalar code multiply in one order. */
static LLVMValueRef vipow_chain(Simd *s, const KjType *type, LLVMValueRef x, uint64_t m)
{
    if (m == 1)
        return x;
    LLVMValueRef half = vipow_chain(s, type, x, m / 2);
    LLVMValueRef square = varith(s, KJ_IR_MUL, type, half, half, type);
    return m % 2 ? varith(s, KJ_IR_MUL, type, square, x, type) : square;
}

static LLVMValueRef vipow_const(Simd *s, const KjType *type, LLVMValueRef x, int64_t n)
{
    LLVMValueRef one;
    if (kj_type_is_complex(type)) {
        LLVMTypeRef pt = vty(s, kj_type_complex_part(type));
        one = make_pair(s, splat_const(s, LLVMConstReal(LLVMGetElementType(pt), 1.0)), LLVMConstNull(pt));
    } else if (kj_type_is_float(type)) {
        one = splat_const(s, LLVMConstReal(llty(s->g, type), 1.0));
    } else {
        one = splat_const(s, LLVMConstInt(llty(s->g, type), 1, 0));
    }
    uint64_t m = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    LLVMValueRef result = NULL, base = x;
    if (m >= 1 && m <= KJ_POW_CHAIN_MAX) {
        result = vipow_chain(s, type, x, m);
        m = 0;
    }
    while (m) {
        if (m & 1)
            result = result ? varith(s, KJ_IR_MUL, type, result, base, type) : base;
        m >>= 1;
        if (m)
            base = varith(s, KJ_IR_MUL, type, base, base, type);
    }
    if (!result)
        result = one;
    if (n < 0)
        result = varith(s, KJ_IR_DIV, type, one, result, type);
    return result;
}

/* ---- memory */

/* Index k of an access, in every lane (an i64 vector): as lowered before
 * its check (Simd.pre_index, checked mode), else lowered here. */
static LLVMValueRef index_lanes(Simd *s, KjIrExpr **indices, int k)
{
    if (s->pre_index && s->pre_for == indices) {
        LLVMValueRef v = s->pre_index[k];
        return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind ? v : splat(s, v);
    }
    return kj_simd_lanes_of(s, indices[k], kj_type_scalar(KJ_TYPE_I64));
}

/* Uniform index k of an access (an i64), likewise. */
static LLVMValueRef index_scalar(Simd *s, KjIrExpr **indices, int k)
{
    if (s->pre_index && s->pre_for == indices && LLVMGetTypeKind(LLVMTypeOf(s->pre_index[k])) != LLVMVectorTypeKind)
        return s->pre_index[k];
    return kj_codegen_convert(s->g, kj_codegen_expr(s->g, indices[k]), indices[k]->type, kj_type_scalar(KJ_TYPE_I64));
}

bool kj_simd_pre_indices(Simd *s, int site, KjIrExpr **indices, int count, LLVMValueRef *pre)
{
    if (!site || !s->checks || s->proven)
        return false;
    for (int k = 0; k < count && k < KJ_MAX_DIMS; k++)
        pre[k] = simd_varying(s, indices[k]) ? kj_simd_lanes_of(s, indices[k], kj_type_scalar(KJ_TYPE_I64))
                                             : index_scalar(s, indices, k);
    return true;
}

/* The element offsets of a[indices] in every lane (i64 vector), and whether
 * they are known to run lane by lane (contiguous) when the last stride is 1. */
static LLVMValueRef offsets(Simd *s, const ArrayVal *a, KjIrExpr **indices, int count, bool flat)
{
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    (void)i64;
    if (flat)
        return index_lanes(s, indices, 0);
    LLVMValueRef offset = NULL;
    for (int k = 0; k < count; k++) {
        LLVMValueRef term = LLVMBuildMul(s->b, index_lanes(s, indices, k), splat(s, a->strides[k]), "");
        offset = offset ? LLVMBuildAdd(s->b, offset, term, "") : term;
    }
    return offset;
}

static LLVMValueRef align_of(Simd *s, const KjType *elem)
{
    return const_i32(s->g, (int32_t)kj_type_size(elem));
}

/* Runs `contiguous` when the lanes' elements are neighbours (the access is
 * uniform + lane and, unless flat, the last stride is 1), else `general`:
 * the two build the access at the offsets and return its value (or NULL). */
typedef LLVMValueRef (*AccessFn)(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value, bool contiguous);

/* A gather or scatter on an array whose last stride only the call knows:
 * with a stride of 1 (nearly always) the last index is the offset as it is,
 * without the 64-bit multiply by the stride that hosts without AVX-512 make
 * in seven instructions; both ways are built and the stride picks one at
 * run time (a test the optimiser can take out of loops). */
static LLVMValueRef unit_stride_or_not(Simd *s, const ArrayVal *a, KjIrExpr **indices, int count,
                                      LLVMValueRef value, AccessFn fn, bool private_memory)
{
    LLVMValueRef rest = count > 1 ? offsets(s, a, indices, count - 1, false) : NULL;
    LLVMValueRef last = index_lanes(s, indices, count - 1);
    s->access_private = private_memory; /* (after the indices: their loads set it too) */
    LLVMValueRef unit = LLVMBuildICmp(s->b, LLVMIntEQ, a->strides[count - 1], const_i64(s->g, 1), "");
    LLVMBasicBlockRef yes = new_block(s->g, "gather.unit"), no = new_block(s->g, "gather.strided"),
                      done = new_block(s->g, "gather.done");
    LLVMBuildCondBr(s->b, unit, yes, no);
    LLVMValueRef r[2];
    LLVMBasicBlockRef ends[2];
    for (int k = 0; k < 2; k++) {
        LLVMPositionBuilderAtEnd(s->b, k == 0 ? yes : no);
        LLVMValueRef offs = k == 0 ? last : LLVMBuildMul(s->b, last, splat(s, a->strides[count - 1]), "");
        if (rest)
            offs = LLVMBuildAdd(s->b, rest, offs, "");
        r[k] = fn(s, a, offs, value, false);
        ends[k] = LLVMGetInsertBlock(s->b);
        LLVMBuildBr(s->b, done);
    }
    LLVMPositionBuilderAtEnd(s->b, done);
    if (!r[0])
        return NULL;
    LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(r[0]), "");
    LLVMAddIncoming(phi, r, ends, 2);
    return phi;
}

static LLVMValueRef access(Simd *s, const ArrayVal *a, KjIrExpr **indices, int count, bool flat,
                          LLVMValueRef value, AccessFn fn, bool private_memory)
{
    /* A block-private array is a shared() or local() allocation (a variable
     * only ever assigned one), laid out in C order with a last stride of 1
     * where the target allocates it itself (cuda's launch-sized local()
     * may interleave threads): that stride as a constant, so that no test
     * of it and no gather side are built, which -O3 would fold away only
     * after its slowest passes had worked through them (issue 25: the
     * carried variables' per-thread arrays doubled matmul's shape). */
    ArrayVal unit_a;
    if (private_memory && !flat && count > 0 && !s->g->target->launch_local &&
        !LLVMIsAConstantInt(a->strides[count - 1])) {
        unit_a = *a;
        unit_a.strides[count - 1] = const_i64(s->g, 1);
        a = &unit_a;
    }
    bool contiguous = kj_uniform_access(s->u, indices, count) == KJ_ACCESS_CONTIGUOUS;
    if (!contiguous && !flat && !LLVMIsAConstantInt(a->strides[count - 1]))
        return unit_stride_or_not(s, a, indices, count, value, fn, private_memory);
    if (!contiguous || flat) {
        LLVMValueRef offs = offsets(s, a, indices, count, flat);
        s->access_private = private_memory; /* (after the indices: their loads set it too) */
        return fn(s, a, offs, value, contiguous);
    }
    /* the uniform indices' part of the offset once, as a scalar; the last
     * index is lane 0's + the lane's index in every lane (unit), so the
     * general side's offsets are lane 0's + iota * stride: no multiply of
     * 64-bit lanes (AVX2 has none) */
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    LLVMValueRef base = const_i64(s->g, 0);
    for (int k = 0; k + 1 < count; k++) {
        LLVMValueRef idx = index_scalar(s, indices, k);
        base = LLVMBuildAdd(s->b, base, LLVMBuildMul(s->b, idx, a->strides[k], ""), "");
    }
    (void)i64;
    LLVMValueRef last = index_lanes(s, indices, count - 1);
    s->access_private = private_memory;
    /* a stride that only the call knows: both ways, picked at run time (the
     * contiguous variants' constant stride folds the test away) */
    LLVMValueRef unit = LLVMBuildICmp(s->b, LLVMIntEQ, a->strides[count - 1], const_i64(s->g, 1), "");
    LLVMBasicBlockRef yes = new_block(s->g, "access.contiguous"), no = new_block(s->g, "access.general"),
                      done = new_block(s->g, "access.done");
    LLVMBuildCondBr(s->b, unit, yes, no);
    LLVMPositionBuilderAtEnd(s->b, yes);
    LLVMValueRef r1 = fn(s, a, LLVMBuildAdd(s->b, splat(s, base), last, ""), value, true);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, no);
    LLVMValueRef stride = a->strides[count - 1];
    LLVMValueRef last0 = LLVMBuildExtractElement(s->b, last, const_i32(s->g, 0), "");
    LLVMValueRef first = LLVMBuildAdd(s->b, base, LLVMBuildMul(s->b, last0, stride, ""), "");
    LLVMValueRef offs = LLVMBuildAdd(s->b, splat(s, first),
                                     LLVMBuildMul(s->b, iota(s, s->g->t_i64), splat(s, stride), ""), "");
    LLVMValueRef r2 = fn(s, a, offs, value, false);
    LLVMBasicBlockRef no_end = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    if (!r1)
        return NULL;
    LLVMValueRef phi = LLVMBuildPhi(s->b, LLVMTypeOf(r1), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){r1, r2}, (LLVMBasicBlockRef[]){yes_end, no_end}, 2);
    return phi;
}

/*
 * Block-private memory: shared() and local() arrays, which only the OS
 * thread running the block touches while it runs (each block has its own
 * shared memory, on the parallel target too).  A masked access to W
 * neighbours that all lie inside such an array may then read every lane
 * and, to store, write the inactive lanes' own elements back: a plain
 * load and a blend instead of a masked load or store (vmaskmovps, slow on
 * AMD, and the masked store on Intel too).  Other memory keeps its masks
 * (another thread may be writing the inactive lanes' elements).
 */
static bool private_alloc(const KjIrExpr *e)
{
    return e && (e->op == KJ_IR_SHARED || e->op == KJ_IR_DYNAMIC_SHARED || e->op == KJ_IR_LOCAL);
}

/* The walk's hook (ir.c): each array variable is private (1) while every
 * assignment of it is a shared() or local(), else -1; the data is the
 * array of KjIrVar.id's answers. */
typedef struct PrivateVars {
    signed char *vars;
    int count;
} PrivateVars;

static KjIrWalkStep scan_private_stmt(KjIrWalk *w, const KjIrStmt *st)
{
    PrivateVars *p = w->data;
    if (st->kind == KJ_IR_STMT_SET && st->var && st->var->id >= 0 && st->var->id < p->count &&
        is_array(st->var->type))
        p->vars[st->var->id] = p->vars[st->var->id] >= 0 && private_alloc(st->value) ? 1 : -1;
    return KJ_IR_WALK_ON;
}

static void scan_private(const KjIrStmt *st, signed char *vars, int count)
{
    PrivateVars p = {vars, count};
    KjIrWalk w = {.stmt = scan_private_stmt, .data = &p};
    kj_ir_walk_stmt(&w, st);
}

/* Whether the array expression is block-private memory. */
static bool private_array(Simd *s, const KjIrExpr *array)
{
    if (!array || s->role == ROLE_CALLEE)
        return private_alloc(array);
    if (array->op != KJ_IR_VAR)
        return private_alloc(array);
    int count = s->fn->locals.count;
    if (!s->private_vars) {
        s->private_vars = kj_arena_alloc(&s->arena, (size_t)count + 1);
        for (int i = 0; i < s->fn->param_count; i++)
            if (s->fn->params[i]->id >= 0 && s->fn->params[i]->id < count)
                s->private_vars[s->fn->params[i]->id] = -1;
        scan_private(s->fn->body, s->private_vars, count);
    }
    int id = array->var->id;
    return id >= 0 && id < count && s->private_vars[id] > 0;
}

/* Whether a block-private array holds the W elements from `first` on (the
 * elements of a contiguous array, which private ones are: shape[0] times
 * strides[0]). */
static LLVMValueRef lanes_inside(Simd *s, const ArrayVal *a, LLVMValueRef first)
{
    Gen *g = s->g;
    LLVMValueRef total = a->ndim > 1 ? LLVMBuildMul(s->b, a->shape[0], a->strides[0], "") : a->shape[0];
    LLVMValueRef low = LLVMBuildICmp(s->b, LLVMIntSGE, first, const_i64(g, 0), "");
    LLVMValueRef high = LLVMBuildICmp(s->b, LLVMIntSLE, first, LLVMBuildSub(s->b, total, const_i64(g, s->lanes), ""), "");
    return LLVMBuildAnd(s->b, low, high, "inside");
}

/* k when the mask is a constant with lanes [0, k) on and the others off
 * (a chunk's mask in code for one block shape); -1 otherwise. */
static int prefix_lanes(Simd *s, LLVMValueRef mask)
{
    if (!LLVMIsConstant(mask))
        return -1;
    int k = 0;
    for (int i = 0; i < s->lanes; i++) {
        LLVMValueRef lane = LLVMGetAggregateElement(mask, (unsigned)i);
        if (!lane || !LLVMIsAConstantInt(lane))
            return -1;
        bool on = LLVMConstIntGetZExtValue(lane) != 0;
        if (on && k != i)
            return -1;
        k += on;
    }
    return k;
}

/* The access of the first k lanes at p as a plain access of k elements
 * (those lanes' own, so no other memory is touched): what a masked one
 * would do, without vmaskmov (slow on AMD) or a masked store's branches. */
static KJ_NOINLINE LLVMValueRef prefix_access(Simd *s, const ArrayVal *a, LLVMValueRef p, LLVMValueRef value, int k)
{
    Gen *g = s->g;
    LLVMTypeRef et = memty(g, a->elem), mt = vec_of(s, et), nt = LLVMVectorType(et, (unsigned)k);
    unsigned align = (unsigned)kj_type_size(a->elem);
    LLVMValueRef idx[64];
    if (value) {
        for (int i = 0; i < k; i++)
            idx[i] = const_i32(g, i);
        LLVMValueRef part = LLVMBuildShuffleVector(s->b, value, LLVMGetUndef(mt), LLVMConstVector(idx, (unsigned)k), "");
        LLVMSetAlignment(LLVMBuildStore(s->b, part, p), align);
        return NULL;
    }
    LLVMValueRef v = LLVMBuildLoad2(s->b, nt, p, "");
    LLVMSetAlignment(v, align);
    for (int i = 0; i < s->lanes && i < 64; i++)
        idx[i] = const_i32(g, i < k ? i : k);
    return LLVMBuildShuffleVector(s->b, v, LLVMConstNull(nt), LLVMConstVector(idx, (unsigned)s->lanes), "");
}

/* The masked load (value NULL) or store of the lanes at p. */
static KJ_NOINLINE LLVMValueRef masked_access(Simd *s, const ArrayVal *a, LLVMValueRef p, LLVMValueRef value)
{
    Gen *g = s->g;
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    LLVMTypeRef ts[2] = {mt, g->t_ptr};
    int k = s->lanes <= 64 ? prefix_lanes(s, s->mask) : -1;
    if (k == 0)
        return value ? NULL : LLVMConstNull(mt);
    if (k > 0 && k < s->lanes)
        return prefix_access(s, a, p, value, k);
    if (value) {
        LLVMValueRef args[4] = {value, p, align_of(s, a->elem), s->mask};
        kj_codegen_call_intrinsic(g, "llvm.masked.store", ts, 2, args, 4);
        return NULL;
    }
    LLVMValueRef args[4] = {p, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
    return kj_codegen_call_intrinsic(g, "llvm.masked.load", ts, 2, args, 4);
}

/*
 * The lanes at p, all inside a block-private array, the inactive ones zero:
 * a load only as wide as the highest active lane needs (W, W/2, ... 1
 * lanes).  The last store to these elements was often a whole vector at a
 * lower address (the level before in a tree of halves): a narrower load
 * lies inside it, and the store forwards to it, where a W-wide load that
 * overlaps it only in part waits until the store has reached the cache.
 */
static LLVMValueRef inside_load(Simd *s, const ArrayVal *a, LLVMValueRef p)
{
    Gen *g = s->g;
    LLVMTypeRef et = memty(g, a->elem), mt = vec_of(s, et);
    unsigned align = (unsigned)kj_type_size(a->elem);
    LLVMTypeRef bits_t = LLVMIntTypeInContext(g->ctx, (unsigned)s->lanes);
    LLVMValueRef bits = LLVMBuildBitCast(s->b, s->mask, bits_t, "");
    LLVMBasicBlockRef done = new_block(g, "inside.done");
    LLVMValueRef vals[32];
    LLVMBasicBlockRef from[32];
    int n = 0;
    for (int k = s->lanes; k >= 1 && n < 32; k /= 2) {
        LLVMBasicBlockRef here = new_block(g, "inside.load"), narrower = k > 1 ? new_block(g, "inside.narrower") : NULL;
        if (narrower) {
            LLVMValueRef high = LLVMBuildLShr(s->b, bits, LLVMConstInt(bits_t, (unsigned)(k / 2), 0), "");
            LLVMBuildCondBr(s->b, LLVMBuildICmp(s->b, LLVMIntEQ, high, LLVMConstNull(bits_t), ""), narrower, here);
        } else {
            LLVMBuildBr(s->b, here);
        }
        LLVMPositionBuilderAtEnd(s->b, here);
        LLVMTypeRef nt = LLVMVectorType(et, (unsigned)k);
        LLVMValueRef v = LLVMBuildLoad2(s->b, nt, p, "");
        LLVMSetAlignment(v, align);
        if (k < s->lanes) {
            /* lanes k.. from a zero vector's first */
            LLVMValueRef idx[64];
            for (int i = 0; i < s->lanes && i < 64; i++)
                idx[i] = const_i32(g, i < k ? i : k);
            v = LLVMBuildShuffleVector(s->b, v, LLVMConstNull(nt), LLVMConstVector(idx, (unsigned)s->lanes), "");
        }
        vals[n] = LLVMBuildSelect(s->b, s->mask, v, LLVMConstNull(mt), "");
        from[n++] = LLVMGetInsertBlock(s->b);
        LLVMBuildBr(s->b, done);
        if (narrower)
            LLVMPositionBuilderAtEnd(s->b, narrower);
    }
    LLVMPositionBuilderAtEnd(s->b, done);
    LLVMValueRef v = LLVMBuildPhi(s->b, mt, "");
    LLVMAddIncoming(v, vals, from, (unsigned)n);
    return v;
}

/*
 * A contiguous load or store of the lanes at p, when s->mask is not a
 * constant, on x86 without AVX-512 (where a masked store of bytes is a
 * branch per lane, and vmaskmov is slow on AMD): a plain load or store
 * when every lane is on (any array), or
 * when the lanes lie inside a block-private array (blended), else the
 * masked one.  value NULL: a load, whose result it returns.
 */
static LLVMValueRef contiguous_access(Simd *s, const ArrayVal *a, LLVMValueRef p, LLVMValueRef first,
                                      LLVMValueRef value)
{
    Gen *g = s->g;
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    unsigned align = (unsigned)kj_type_size(a->elem);
    if (LLVMIsConstant(s->mask) || !s->wide_masks) /* AVX-512's masked accesses are quick */
        return masked_access(s, a, p, value);
    bool inside = s->access_private;
    LLVMBasicBlockRef plain_bb = new_block(g, inside ? "access.inside" : "access.all"),
                      masked_bb = new_block(g, "access.masked"), done = new_block(g, "access.joined");
    LLVMBuildCondBr(s->b, inside ? lanes_inside(s, a, first) : all_lanes(s, s->mask), plain_bb, masked_bb);
    LLVMPositionBuilderAtEnd(s->b, plain_bb);
    LLVMValueRef plain = NULL;
    if (value) {
        LLVMValueRef v = value;
        if (inside) {
            LLVMValueRef old = LLVMBuildLoad2(s->b, mt, p, "");
            LLVMSetAlignment(old, align);
            v = LLVMBuildSelect(s->b, s->mask, value, old, "");
        }
        LLVMSetAlignment(LLVMBuildStore(s->b, v, p), align);
    } else {
        if (inside) {
            plain = inside_load(s, a, p);
        } else {
            plain = LLVMBuildLoad2(s->b, mt, p, "");
            LLVMSetAlignment(plain, align);
        }
    }
    plain_bb = LLVMGetInsertBlock(s->b);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, masked_bb);
    LLVMValueRef masked = masked_access(s, a, p, value);
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
    if (value)
        return NULL;
    LLVMValueRef v = LLVMBuildPhi(s->b, mt, "");
    LLVMAddIncoming(v, (LLVMValueRef[]){plain, masked}, (LLVMBasicBlockRef[]){plain_bb, masked_bb}, 2);
    return v;
}

/* A complex element's parts in every lane: the addresses of part `part`
 * (0 real, 1 imaginary) of the elements at offs. */
static LLVMValueRef part_addresses(Simd *s, const ArrayVal *a, LLVMValueRef offs, int part)
{
    LLVMValueRef idx[2] = {offs, const_i32(s->g, part)};
    return LLVMBuildGEP2(s->b, llty(s->g, a->elem), a->data, idx, 2, "");
}

/* Complex elements go part by part through gathers and scatters. */
static LLVMValueRef complex_access(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value)
{
    Gen *g = s->g;
    const KjType *part_type = kj_type_complex_part(a->elem);
    LLVMTypeRef pt = vty(s, part_type);
    LLVMTypeRef ts[2] = {pt, vec_of(s, g->t_ptr)};
    LLVMValueRef parts[2];
    for (int k = 0; k < 2; k++) {
        LLVMValueRef ps = part_addresses(s, a, offs, k);
        if (value) {
            LLVMValueRef args[4] = {LLVMBuildExtractValue(s->b, value, (unsigned)k, ""), ps,
                                    align_of(s, part_type), s->mask};
            kj_codegen_call_intrinsic(g, "llvm.masked.scatter", ts, 2, args, 4);
        } else {
            LLVMValueRef args[4] = {ps, align_of(s, part_type), s->mask, LLVMConstNull(pt)};
            parts[k] = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, args, 4);
        }
    }
    return value ? NULL : make_pair(s, parts[0], parts[1]);
}

static LLVMValueRef load_at(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef unused, bool contiguous)
{
    (void)unused;
    Gen *g = s->g;
    if (kj_type_is_complex(a->elem))
        return complex_access(s, a, offs, NULL);
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    LLVMValueRef v;
    if (contiguous) {
        LLVMValueRef first = LLVMBuildExtractElement(s->b, offs, const_i32(g, 0), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a->elem), a->data, &first, 1, "");
        v = contiguous_access(s, a, p, first, NULL);
    } else {
        LLVMValueRef ps = LLVMBuildGEP2(s->b, memty(g, a->elem), a->data, &offs, 1, "");
        LLVMTypeRef ts[2] = {mt, vec_of(s, g->t_ptr)};
        if (s->wide_masks) {
            /* Without AVX-512 LLVM expands a masked gather into a branch
             * per lane: when every lane is active (the usual case), an
             * unmasked one, lane by lane without branches. */
            LLVMBasicBlockRef all_bb = new_block(g, "gather.all"), some_bb = new_block(g, "gather.some"),
                              done = new_block(g, "gather.done");
            LLVMBuildCondBr(s->b, all_lanes(s, s->mask), all_bb, some_bb);
            LLVMPositionBuilderAtEnd(s->b, all_bb);
            LLVMValueRef all_args[4] = {ps, align_of(s, a->elem), LLVMConstAllOnes(s->mask_type), LLVMConstNull(mt)};
            LLVMValueRef all = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, all_args, 4);
            LLVMBuildBr(s->b, done);
            LLVMPositionBuilderAtEnd(s->b, some_bb);
            LLVMValueRef some_args[4] = {ps, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
            LLVMValueRef some = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, some_args, 4);
            LLVMBuildBr(s->b, done);
            LLVMPositionBuilderAtEnd(s->b, done);
            v = LLVMBuildPhi(s->b, mt, "");
            LLVMAddIncoming(v, (LLVMValueRef[]){all, some}, (LLVMBasicBlockRef[]){all_bb, some_bb}, 2);
        } else {
            LLVMValueRef args[4] = {ps, align_of(s, a->elem), s->mask, LLVMConstNull(mt)};
            v = kj_codegen_call_intrinsic(g, "llvm.masked.gather", ts, 2, args, 4);
        }
    }
    if (a->elem->kind == KJ_TYPE_BOOL)
        v = LLVMBuildICmp(s->b, LLVMIntNE, v, LLVMConstNull(mt), "");
    return v;
}

static LLVMValueRef store_at(Simd *s, const ArrayVal *a, LLVMValueRef offs, LLVMValueRef value, bool contiguous)
{
    Gen *g = s->g;
    if (kj_type_is_complex(a->elem))
        return complex_access(s, a, offs, value);
    LLVMTypeRef mt = vec_of(s, memty(g, a->elem));
    if (a->elem->kind == KJ_TYPE_BOOL)
        value = LLVMBuildZExt(s->b, value, mt, "");
    if (contiguous) {
        LLVMValueRef first = LLVMBuildExtractElement(s->b, offs, const_i32(g, 0), "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a->elem), a->data, &first, 1, "");
        contiguous_access(s, a, p, first, value);
    } else {
        /* lanes that meet at one element store in lane order: the last
         * active lane's value stays, as when the threads run one by one */
        LLVMValueRef ps = LLVMBuildGEP2(s->b, memty(g, a->elem), a->data, &offs, 1, "");
        LLVMTypeRef ts[2] = {mt, vec_of(s, g->t_ptr)};
        LLVMValueRef args[4] = {value, ps, align_of(s, a->elem), s->mask};
        kj_codegen_call_intrinsic(g, "llvm.masked.scatter", ts, 2, args, 4);
    }
    return NULL;
}

/* ---- lane by lane */

/* An atomic for each active lane, in lane order. */
static LLVMValueRef vatomic(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    ArrayVal a;
    kj_codegen_array(g, e->args[0], &a);
    int ndim = a.ndim;
    LLVMValueRef pre[KJ_MAX_DIMS];
    if (kj_simd_pre_indices(s, e->check_site, e->args + 1, ndim, pre)) {
        kj_simd_check_index(s, e->check_site, &a, e->args[0], e->args + 1, pre, ndim);
        s->pre_index = pre;
        s->pre_for = e->args + 1;
    }
    LLVMValueRef offs = offsets(s, &a, e->args + 1, ndim, false);
    s->pre_index = NULL;
    LLVMValueRef value = kj_simd_lanes_of(s, e->args[1 + ndim], e->type);
    LLVMValueRef swap = e->atomic == KJ_ATOMIC_CAS ? kj_simd_lanes_of(s, e->args[2 + ndim], e->type) : NULL;
    LLVMValueRef result_slot = entry_alloca(s, vty(s, e->type), "atomic.old");
    LLVMBuildStore(s->b, LLVMConstNull(vty(s, e->type)), result_slot);
    for (int k = 0; k < s->lanes; k++) {
        LLVMValueRef lane = const_i32(g, k);
        LLVMBasicBlockRef run = new_block(g, "atomic.lane"), next = new_block(g, "atomic.next");
        LLVMBuildCondBr(s->b, LLVMBuildExtractElement(s->b, s->mask, lane, ""), run, next);
        LLVMPositionBuilderAtEnd(s->b, run);
        LLVMValueRef off = LLVMBuildExtractElement(s->b, offs, lane, "");
        LLVMValueRef p = LLVMBuildInBoundsGEP2(s->b, memty(g, a.elem), a.data, &off, 1, "");
        LLVMValueRef v = LLVMBuildExtractElement(s->b, value, lane, "");
        LLVMValueRef nv = swap ? LLVMBuildExtractElement(s->b, swap, lane, "") : NULL;
        LLVMValueRef old = kj_codegen_atomic_at(g, e->atomic, e->type, p, v, nv);
        LLVMValueRef all = LLVMBuildLoad2(s->b, vty(s, e->type), result_slot, "");
        LLVMBuildStore(s->b, LLVMBuildInsertElement(s->b, all, old, lane, ""), result_slot);
        LLVMBuildBr(s->b, next);
        LLVMPositionBuilderAtEnd(s->b, next);
    }
    return LLVMBuildLoad2(s->b, vty(s, e->type), result_slot, "");
}

/* ---- calls */

void kj_simd_function_attrs(Gen *g, LLVMValueRef fn)
{
    kj_codegen_add_fn_attr(g, fn, "nounwind");
    if (g->cpu_name && *g->cpu_name)
        kj_codegen_add_string_attr(g, fn, "target-cpu", g->cpu_name);
    if (g->cpu_features && *g->cpu_features)
        kj_codegen_add_string_attr(g, fn, "target-features", g->cpu_features);
    g->target->function_attrs(g, fn);
    kj_codegen_add_fn_attr(g, fn, "alwaysinline");
}

/* Parameters of fn's SIMD function: arrays as in its impl, scalars as
 * vectors when their bit is in `vector_scalars`, then `extra`. */
LLVMTypeRef kj_simd_function_type(Simd *s, const KjIrFunction *fn, uint64_t vector_scalars, LLVMTypeRef ret,
                             const LLVMTypeRef *extra, int extra_count)
{
    Gen *g = s->g;
    LLVMTypeRef *scalars = kj_xmalloc(sizeof *scalars * (size_t)(fn->param_count + 1));
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        scalars[i] = is_array(t) ? NULL : i < 64 && (vector_scalars >> i & 1u) ? vty(s, t) : llty(g, t);
    }
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)(kj_codegen_impl_arg_capacity(fn) + extra_count));
    int n = kj_codegen_param_types(g, fn, scalars, ps);
    free(scalars);
    for (int i = 0; i < extra_count; i++)
        ps[n++] = extra[i];
    LLVMTypeRef ft = LLVMFunctionType(ret, ps, (unsigned)n, 0);
    free(ps);
    return ft;
}

static LLVMTypeRef vector_of(void *s, const KjType *t) { return vty((Simd *)s, t); }

LLVMTypeRef kj_simd_outputs_type(Simd *s, const KjIrFunction *fn)
{
    return kj_codegen_outputs_type(s->g, fn, vector_of, s);
}

static LLVMTypeRef callee_type(Simd *s, const KjIrFunction *fn, uint64_t varying_params)
{
    LLVMTypeRef ret = fn->ret->kind == KJ_TYPE_VOID ? s->g->t_void : vty(s, fn->ret);
    if (fn->output_count > 1)
        ret = kj_simd_outputs_type(s, fn);
    return kj_simd_function_type(s, fn, varying_params, ret, &s->mask_type, 1);
}

void kj_simd_callee_name(const KjIrFunction *fn, int lanes, uint64_t varying_params, char *buf, size_t size)
{
    snprintf(buf, size, "%s__simd%d_%llx", fn->symbol, lanes, (unsigned long long)varying_params);
}

static KJ_NOINLINE LLVMValueRef vcall(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    KjIrFunction *callee = e->callee;
    uint64_t varying_params = 0;
    for (int i = 0; i < e->arg_count && i < 64; i++)
        if (!is_array(e->args[i]->type) && simd_varying(s, e->args[i]))
            varying_params |= 1ull << i;
    char name[512];
    kj_simd_callee_name(callee, s->lanes, varying_params, name, sizeof name);
    LLVMTypeRef ft = callee_type(s, callee, varying_params);
    LLVMValueRef fn = LLVMGetNamedFunction(g->mod, name);
    if (!fn) {
        fn = LLVMAddFunction(g->mod, name, ft);
        LLVMSetLinkage(fn, LLVMInternalLinkage);
        kj_simd_function_attrs(g, fn);
        if (*s->pending_count >= SIMD_MAX_PENDING)
            kj_codegen_error(g, "too many functions called on SIMD lanes%s", NULL);
        else
            s->pending[(*s->pending_count)++] = (Pending){callee, varying_params};
    }
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)kj_codegen_impl_arg_capacity(callee));
    int n = 0;
    for (int i = 0; i < e->arg_count; i++) {
        if (is_array(e->args[i]->type)) {
            ArrayVal a;
            kj_codegen_array(g, e->args[i], &a);
            n += kj_codegen_array_args(&a, args + n);
        } else if (i < 64 && (varying_params >> i & 1u)) {
            args[n++] = kj_simd_lanes_of(s, e->args[i], callee->params[i]->type);
        } else {
            args[n++] = kj_codegen_convert(g, kj_codegen_expr(g, e->args[i]), e->args[i]->type,
                                           callee->params[i]->type);
        }
    }
    args[n++] = s->mask;
    LLVMValueRef r = LLVMBuildCall2(s->b, ft, fn, args, (unsigned)n, "");
    free(args);
    if (kj_codegen_cancel_may_stop(g, callee))
        kj_codegen_cancel_poll(g);
    if (callee->output_count > 1) {
        /* outputs 1.., for the caller's variables: the statement that holds
         * the call assigns them (codegen_simd.c, take_call_outputs) */
        for (int k = 1; e->call_outputs && k < callee->output_count &&
                        s->call_output_count < KJ_MAX_VEC_OUTPUTS; k++) {
            s->call_output_vars[s->call_output_count] = e->call_outputs[k];
            s->call_output_values[s->call_output_count++] =
                LLVMBuildExtractValue(s->b, r, (unsigned)k, "");
        }
        r = LLVMBuildExtractValue(s->b, r, 0, "");
    }
    return r;
}

/* ---- the expression switch */

/* An element in every lane (its ArrayVal lives here, not in kj_simd_expr's
 * frame, which every level of an expression pays). */
static KJ_NOINLINE LLVMValueRef vload(Simd *s, KjIrExpr *e)
{
    ArrayVal a;
    kj_codegen_array(s->g, e->args[0], &a);
    LLVMValueRef pre[KJ_MAX_DIMS];
    if (kj_simd_pre_indices(s, e->check_site, e->args + 1, e->arg_count - 1, pre)) {
        kj_simd_check_index(s, e->check_site, &a, e->args[0], e->args + 1, pre, e->arg_count - 1);
        s->pre_index = pre;
        s->pre_for = e->args + 1;
    }
    LLVMValueRef v = access(s, &a, e->args + 1, e->arg_count - 1, e->contiguous, NULL, load_at,
                            private_array(s, e->args[0]));
    s->pre_index = NULL;
    return v;
}

LLVMValueRef kj_simd_expr(Simd *s, KjIrExpr *e)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    if (!simd_varying(s, e))
        return splat(s, kj_codegen_expr(g, e));
    switch (e->op) {
    case KJ_IR_VAR:
        return LLVMBuildLoad2(B, vty(s, e->type), s->vslots[e->var->id], e->var->name);
    case KJ_IR_NEG: {
        LLVMValueRef x = kj_simd_expr(s, e->args[0]);
        if (kj_type_is_complex(e->type))
            return make_pair(s, LLVMBuildFNeg(B, LLVMBuildExtractValue(B, x, 0, ""), ""),
                             LLVMBuildFNeg(B, LLVMBuildExtractValue(B, x, 1, ""), ""));
        return kj_type_is_float(e->type) ? LLVMBuildFNeg(B, x, "") : LLVMBuildNeg(B, x, "");
    }
    case KJ_IR_NOT: case KJ_IR_BITNOT:
        return LLVMBuildNot(B, kj_simd_expr(s, e->args[0]), "");
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR: {
        if (e->op == KJ_IR_MUL && kj_type_is_complex(e->type) && e->args[0]->op == KJ_IR_VAR &&
            e->args[1]->op == KJ_IR_VAR && e->args[0]->var == e->args[1]->var &&
            e->args[0]->type == e->type && e->args[1]->type == e->type)
            return kj_codegen_complex_square(g, kj_simd_expr(s, e->args[0]));
        LLVMValueRef narrow = narrow_multiply(s, e);
        if (narrow)
            return narrow;
        int k = exact_shift(s, e);
        if (k > 0)
            return LLVMBuildAShr(B, kj_simd_expr(s, e->args[0]),
                                 splat_const(s, LLVMConstInt(llty(g, e->type), (unsigned)k, 0)), "");
        LLVMValueRef a = kj_simd_lanes_of(s, e->args[0], e->type);
        bool shift = e->op == KJ_IR_SHL || e->op == KJ_IR_SHR;
        const KjType *bt = shift ? e->args[1]->type : e->type;
        LLVMValueRef b = kj_simd_lanes_of(s, e->args[1], bt);
        kj_simd_check_operands(s, e, a, b);
        return varith(s, e->op, e->type, a, b, bt);
    }
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        const KjType *t = e->args[0]->type;
        LLVMValueRef narrow = narrow_compare(s, e);
        if (narrow)
            return narrow;
        LLVMValueRef a = kj_simd_lanes_of(s, e->args[0], t);
        LLVMValueRef b = kj_simd_lanes_of(s, e->args[1], t);
        return kj_codegen_compare(g, B, e->op, t, a, b);
    }
    case KJ_IR_LOGAND: case KJ_IR_LOGOR: {
        bool is_and = e->op == KJ_IR_LOGAND;
        LLVMValueRef l = kj_simd_lanes_of(s, e->args[0], e->type);
        LLVMValueRef rhs_mask = LLVMBuildAnd(B, s->mask, is_and ? l : LLVMBuildNot(B, l, ""), "");
        LLVMValueRef r = lanes_under(s, e->args[1], e->type, rhs_mask);
        return is_and ? LLVMBuildAnd(B, l, r, "") : LLVMBuildOr(B, l, r, "");
    }
    case KJ_IR_SELECT: {
        LLVMValueRef c = kj_simd_lanes_of(s, e->args[0], kj_type_scalar(KJ_TYPE_BOOL));
        int load_side = LLVMIsConstant(c) ? 0 : guarded_load_side(s, e);
        if (load_side)
            return select_guarded_load(s, e, c, load_side);
        if ((kj_simd_touches_memory(e->args[1]) || kj_simd_touches_memory(e->args[2])) && copyable(e->args[1]) &&
            copyable(e->args[2]) && !LLVMIsConstant(c))
            return select_one_side(s, e, c);
        LLVMValueRef a = lanes_under(s, e->args[1], e->type, LLVMBuildAnd(B, s->mask, c, ""));
        LLVMValueRef b = lanes_under(s, e->args[2], e->type, LLVMBuildAnd(B, s->mask, LLVMBuildNot(B, c, ""), ""));
        return blend(s, c, a, b);
    }
    case KJ_IR_CAST: {
        LLVMValueRef narrow = narrow_i64_to_f64(s, e);
        if (!narrow)
            narrow = unit_i64_to_f64(s, e);
        if (narrow)
            return narrow;
        LLVMValueRef x = kj_simd_expr(s, e->args[0]);
        kj_simd_check_operands(s, e, x, NULL);
        return vconvert(s, x, e->args[0]->type, e->type);
    }
    case KJ_IR_CALL:
        return vcall(s, e);
    case KJ_IR_MATH: {
        LLVMValueRef a[3];
        const KjType *ft = e->args[0]->type;
        for (int i = 0; i < e->arg_count && i < 3; i++)
            a[i] = kj_simd_lanes_of(s, e->args[i], ft);
        return vmath(s, e->math, a, e->arg_count);
    }
    case KJ_IR_IPOW: {
        LLVMValueRef x = kj_simd_lanes_of(s, e->args[0], e->type);
        int64_t n = (int64_t)e->args[1]->const_int;
        if (kj_type_int_bits(e->args[1]->type) < 64 && kj_type_is_signed(e->args[1]->type)) {
            int bits = kj_type_int_bits(e->args[1]->type);
            n = (int64_t)(e->args[1]->const_int << (64 - bits)) >> (64 - bits);
        } else if (!kj_type_is_signed(e->args[1]->type) && e->args[1]->const_int > INT64_MAX) {
            n = INT64_MAX;
        }
        return vipow_const(s, e->type, x, n);
    }
    case KJ_IR_COMPLEX: {
        const KjType *part = kj_type_complex_part(e->type);
        LLVMValueRef re = kj_simd_lanes_of(s, e->args[0], part);
        LLVMValueRef im = kj_simd_lanes_of(s, e->args[1], part);
        return make_pair(s, re, im);
    }
    case KJ_IR_REAL: return LLVMBuildExtractValue(B, kj_simd_expr(s, e->args[0]), 0, "re");
    case KJ_IR_IMAG: return LLVMBuildExtractValue(B, kj_simd_expr(s, e->args[0]), 1, "im");
    case KJ_IR_CONJ: {
        LLVMValueRef z = kj_simd_expr(s, e->args[0]);
        return make_pair(s, LLVMBuildExtractValue(B, z, 0, ""), LLVMBuildFNeg(B, LLVMBuildExtractValue(B, z, 1, ""), ""));
    }
    case KJ_IR_CABS: {
        LLVMValueRef z = kj_simd_expr(s, e->args[0]);
        LLVMValueRef parts[2] = {LLVMBuildExtractValue(B, z, 0, ""), LLVMBuildExtractValue(B, z, 1, "")};
        return vmath(s, KJ_MATH_HYPOT, parts, 2);
    }
    case KJ_IR_MULHI: {
        LLVMValueRef a = kj_simd_lanes_of(s, e->args[0], e->type), b = kj_simd_lanes_of(s, e->args[1], e->type);
        unsigned bits = (unsigned)kj_type_int_bits(e->type);
        LLVMTypeRef wide = vec_of(s, LLVMIntTypeInContext(g->ctx, 2 * bits));
        bool sgn = kj_type_is_signed(e->type);
        LLVMValueRef wa = sgn ? LLVMBuildSExt(B, a, wide, "") : LLVMBuildZExt(B, a, wide, "");
        LLVMValueRef wb = sgn ? LLVMBuildSExt(B, b, wide, "") : LLVMBuildZExt(B, b, wide, "");
        LLVMValueRef high = LLVMBuildLShr(B, LLVMBuildMul(B, wa, wb, ""),
                                          splat_const(s, LLVMConstInt(LLVMGetElementType(wide), bits, 0)), "");
        return LLVMBuildTrunc(B, high, vty(s, e->type), "mulhi");
    }
    case KJ_IR_LOAD:
        return vload(s, e);
    case KJ_IR_SREG:
        /* only threadIdx.x varies: lane k of the chunk is lane_base + k */
        return LLVMBuildAdd(B, splat(s, s->lane_base), iota(s, g->t_i32), "tid.x");
    case KJ_IR_ATOMIC:
        return vatomic(s, e);
    default:
        break;
    }
    kj_codegen_error(g, "the SIMD lowering cannot lower this %s expression", kj_ir_op_name(e->op));
    return LLVMGetPoison(vty(s, e->type));
}


void kj_simd_store(Simd *s, const KjIrExpr *array, const ArrayVal *a, KjIrExpr **indices, int count, bool flat,
                   LLVMValueRef value, LLVMValueRef *pre)
{
    s->pre_index = pre;
    s->pre_for = indices;
    access(s, a, indices, count, flat, value, store_at, private_array(s, array));
    s->pre_index = NULL;
}

/* ---- a statement's checks tested ahead */

/* Integer arithmetic on variables, registers and constants, without a check
 * of its own: an index that can be computed ahead of its access, in lanes
 * that may not reach it (it wraps, divides safely, reads nothing). */
static bool index_ahead(const KjIrExpr *e)
{
    if (e->check_site || !e->type || !kj_type_is_int(e->type))
        return false;
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_VAR: case KJ_IR_SREG:
        return true;
    case KJ_IR_DIM:
        return e->args[0]->op == KJ_IR_VAR;
    case KJ_IR_CAST: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_NEG: case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR:
        for (int i = 0; i < e->arg_count; i++)
            if (!index_ahead(e->args[i]))
                return false;
        return true;
    default:
        return false;
    }
}

enum { PRECHECK_MAX = 16 };

/* The walk's data: the accesses of a statement whose checks can be tested
 * ahead, or ok false. */
typedef struct Ahead {
    bool ok;
    int count;
    const KjIrExpr *array[PRECHECK_MAX];
    KjIrExpr *const *indices[PRECHECK_MAX];
    int ndim[PRECHECK_MAX];
} Ahead;

static void note_access(Ahead *a, const KjIrExpr *array, KjIrExpr *const *indices, int count)
{
    if (a->count == PRECHECK_MAX || array->op != KJ_IR_VAR || array->type->kind != KJ_TYPE_ARRAY ||
        count != array->type->ndim || count > KJ_MAX_DIMS) {
        a->ok = false;
        return;
    }
    for (int k = 0; k < count; k++)
        if (!index_ahead(indices[k])) {
            a->ok = false;
            return;
        }
    a->array[a->count] = array;
    a->indices[a->count] = indices;
    a->ndim[a->count++] = count;
}

static bool note_ahead(KjIrWalk *w, const KjIrExpr *e)
{
    Ahead *a = w->data;
    if (e->op == KJ_IR_CALL || e->op == KJ_IR_ATOMIC || e->op == KJ_IR_PRINT || e->op == KJ_IR_EXEC)
        a->ok = false;
    else if (e->check_site && e->op != KJ_IR_LOAD)
        a->ok = false;
    else if (e->check_site)
        note_access(a, e->args[0], e->args + 1, e->arg_count - 1);
    return a->ok;
}

LLVMValueRef kj_simd_precheck(Simd *s, const KjIrStmt *st)
{
    if (!s->checks || s->proven || s->mask != s->stmt_mask ||
        (st->kind != KJ_IR_STMT_SET && st->kind != KJ_IR_STMT_STORE) ||
        (st->kind == KJ_IR_STMT_SET && st->var->type->kind == KJ_TYPE_ARRAY))
        return NULL;
    Ahead a = {.ok = true};
    if (st->kind == KJ_IR_STMT_STORE && st->check_site)
        note_access(&a, st->array, st->indices, st->index_count);
    KjIrWalk w = {.expr = note_ahead, .data = &a};
    if (!a.ok || !kj_ir_walk_own_exprs(&w, st) || !a.ok || a.count < 2)
        return NULL; /* one check tests as cheaply where it stands */
    Gen *g = s->g;
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    LLVMValueRef lanes_ok = NULL, uniform_ok = NULL;
    for (int i = 0; i < a.count; i++) {
        ArrayVal v;
        kj_codegen_array(g, (KjIrExpr *)a.array[i], &v);
        for (int k = 0; k < a.ndim[i]; k++) {
            KjIrExpr *e = a.indices[i][k];
            if (simd_varying(s, e)) {
                LLVMValueRef idx = kj_simd_lanes_of(s, e, i64);
                LLVMValueRef ok = LLVMBuildICmp(s->b, LLVMIntULT, idx, splat(s, v.shape[k]), "");
                lanes_ok = lanes_ok ? LLVMBuildAnd(s->b, lanes_ok, ok, "") : ok;
            } else {
                LLVMValueRef idx = kj_codegen_convert(g, kj_codegen_expr(g, e), e->type, i64);
                LLVMValueRef ok = LLVMBuildICmp(s->b, LLVMIntULT, idx, v.shape[k], "");
                uniform_ok = uniform_ok ? LLVMBuildAnd(s->b, uniform_ok, ok, "") : ok;
            }
        }
    }
    /* no running lane fails: the mask less the passing lanes is empty */
    LLVMValueRef all = LLVMConstInt(g->t_i1, 1, 0);
    if (lanes_ok)
        all = LLVMBuildNot(s->b, any_lane(s, LLVMBuildAnd(s->b, s->mask, LLVMBuildNot(s->b, lanes_ok, ""), "")), "");
    if (uniform_ok)
        all = LLVMBuildAnd(s->b, all, uniform_ok, "");
    return all;
}
