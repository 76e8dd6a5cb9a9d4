/*
 * codegen_mma.c: mma(), the warp's f64 matrix multiply-accumulate, made of
 * shuffles and fused multiply-adds, for cuda before sm_80, which lacks
 * mma.sync's f64 form.  The cpu targets do the same operations in one
 * meeting of the warp (runtime/cpu.c's warp_mma).
 *
 * The warp multiplies an 8x4 A by a 4x8 B and adds an 8x8 C, in PTX's
 * mma.m8n8k4.row.col.f64 layout: lane l = 4 g + t (g = l >> 2, t = l & 3)
 * holds A[g][t], B[t][g] and C[g][2t], C[g][2t + 1], and gets D[g][2t] and
 * D[g][2t + 1] back.  So A[g][k] is lane 4 g + k's a, and B[k][n] is lane
 * 4 n + k's b: each lane reads four a and eight b by shuffles (12) and
 * computes
 *
 *     d_i = fma(A[g][3], B[3][n_i], fma(A[g][2], B[2][n_i],
 *           fma(A[g][1], B[1][n_i], fma(A[g][0], B[0][n_i], c_i))))
 *
 * for n_i = 2t + i: the order docs/language.md defines, k = 0 to 3 from C.
 * Every target that emulates runs exactly these operations, so their bits
 * agree (a source lane that is absent gives the lane's own value, as a
 * shuffle's does); the GPU's instruction may round its own way.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

LLVMValueRef kj_codegen_mma_shuffled(Gen *g, LLVMValueRef *args, LLVMValueRef lane,
                                     KjMmaShuffle shuffle)
{
    LLVMValueRef mask = args[0], a = args[1], b = args[2], d[2] = {args[3], args[4]};
    LLVMValueRef group = LLVMBuildLShr(g->b, lane, const_i32(g, 2), "mma.g");
    LLVMValueRef thread = LLVMBuildAnd(g->b, lane, const_i32(g, 3), "mma.t");
    LLVMValueRef a_base = LLVMBuildShl(g->b, group, const_i32(g, 2), "");  /* 4 g */
    LLVMValueRef b_base = LLVMBuildShl(g->b, thread, const_i32(g, 3), ""); /* 4 (2 t) */
    for (int k = 0; k < 4; k++) {
        LLVMValueRef ak = shuffle(g, mask, a, LLVMBuildAdd(g->b, a_base, const_i32(g, k), ""));
        for (int i = 0; i < 2; i++) {
            LLVMValueRef source = LLVMBuildAdd(g->b, b_base, const_i32(g, 4 * i + k), "");
            LLVMValueRef bk = shuffle(g, mask, b, source);
            d[i] = kj_codegen_math(g, KJ_MATH_FMA, (LLVMValueRef[]){ak, bk, d[i]}, 3);
        }
    }
    return make_complex(g, llty(g, kj_type_scalar(KJ_TYPE_C128)), d[0], d[1]);
}
