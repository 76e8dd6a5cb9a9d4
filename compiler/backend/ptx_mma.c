/*
 * ptx_mma.c: two mma() calls on the same B issued as one m16n8k4, sm_90's
 * f64 tensor-core shape twice as tall, in code bound for PTX.
 *
 * mma() is PTX's mma.sync.m8n8k4 f64 (target_cuda.c): an 8x4 A times a 4x8
 * B plus an 8x8 C.  sm_90's mma.sync.m16n8k4 f64 (PTX ISA 7.8) is, lane for
 * lane, two of them on the same B stacked along the rows (PTX's fragment
 * layouts: A's and C's rows g and g + 8):
 *
 *     X = mma(xa, b, xc0, xc1), Y = mma(ya, b, yc0, yc1)
 *       = m16n8k4 {X.d0, X.d1, Y.d0, Y.d1}, {xa, ya}, {b}, {xc0, xc1, yc0, yc1}
 *
 * A tiled matrix multiply is made of such pairs once its loops are unrolled
 * (tests/bench/matmul_tc.kern: the 8x8 tiles i and i + 1 of a column share
 * that column's B).  On an H200 the same CUDA C kernel took 3.16 ms at
 * 4096^3 with m16n8k4 against 5.05 ms with m8n8k4 (1.30x and 2.07x cuBLAS,
 * tests/bench/matmul_tc_variants.cu), and every element had the same bits
 * either way, and as cuBLAS's: the pairing keeps mma()'s results (the cpu's
 * fma chain; tests/unit/test_cuda.c compares them on the GPU).  The taller
 * k8 and k16 shapes, which would fuse chains of steps, were slower there
 * (their fragments spill registers).
 *
 * After optimisation, within one basic block, X and a later Y with the same
 * B operand are fused when every use of X's results comes after Y (or in
 * another block): then Y cannot read X, and every operand is computed
 * before Y, where the fused instruction goes.  The instruction is inline
 * PTX (LLVM 19 has no intrinsic for this shape), convergent as mma() is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_llvm.h"

static const char MMA_NAME[] = "llvm.nvvm.mma.m8n8k4.row.col.f64";

static bool is_mma(LLVMValueRef v)
{
    if (!v || !LLVMIsACallInst(v))
        return false;
    LLVMValueRef callee = LLVMGetCalledValue(v);
    size_t len;
    const char *name = callee && LLVMIsAFunction(callee) ? LLVMGetValueName2(callee, &len) : NULL;
    return name && strcmp(name, MMA_NAME) == 0;
}

/* The instructions of one block, numbered in order (a pointer hash). */
typedef struct {
    LLVMValueRef *keys;
    int *order;
    size_t mask;
} Numbering;

static size_t slot_of(const Numbering *n, LLVMValueRef v)
{
    size_t s = (size_t)(((uint64_t)(uintptr_t)v >> 4) * 0x9e3779b97f4a7c15ull) & n->mask;
    while (n->keys[s] && n->keys[s] != v)
        s = (s + 1) & n->mask;
    return s;
}

static void number_block(Numbering *n, LLVMBasicBlockRef bb)
{
    size_t count = 0;
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
        count++;
    size_t size = 16;
    while (size < 2 * count + 2)
        size *= 2;
    free(n->keys);
    free(n->order);
    n->keys = kj_xcalloc(size, sizeof *n->keys);
    n->order = kj_xcalloc(size, sizeof *n->order);
    n->mask = size - 1;
    int k = 0;
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
        size_t s = slot_of(n, i);
        n->keys[s] = i;
        n->order[s] = k++;
    }
}

/* i's place in the numbered block. */
static int place(const Numbering *n, LLVMValueRef i) { return n->order[slot_of(n, i)]; }

/* Whether call's results are only taken apart (extractvalue of d0 or d1),
 * as codegen makes them: the fused call's results replace those. */
static bool only_extracted(LLVMValueRef call)
{
    for (LLVMUseRef use = LLVMGetFirstUse(call); use; use = LLVMGetNextUse(use)) {
        LLVMValueRef extract = LLVMGetUser(use);
        if (!LLVMIsAExtractValueInst(extract) || LLVMGetNumIndices(extract) != 1 ||
            LLVMGetIndices(extract)[0] > 1)
            return false;
    }
    return true;
}

/* Whether every use of call's results comes after `point` in the block, or
 * is in another block (which the block dominates) or a phi (which reads it
 * on an edge out of the block). */
static bool used_after(const Numbering *n, LLVMValueRef call, int point)
{
    LLVMBasicBlockRef bb = LLVMGetInstructionParent(call);
    for (LLVMUseRef use = LLVMGetFirstUse(call); use; use = LLVMGetNextUse(use)) {
        LLVMValueRef extract = LLVMGetUser(use);
        for (LLVMUseRef u = LLVMGetFirstUse(extract); u; u = LLVMGetNextUse(u)) {
            LLVMValueRef user = LLVMGetUser(u);
            if (LLVMIsAPHINode(user) || LLVMGetInstructionParent(user) != bb)
                continue;
            if (place(n, user) <= point)
                return false;
        }
    }
    return true;
}

/* The first pair of the block in the order of X: X at calls[*x], Y at
 * calls[*y]; false when there is none. */
static bool find_pair(const Numbering *n, LLVMValueRef *calls, int count, int *x, int *y)
{
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            if (LLVMGetOperand(calls[j], 1) == LLVMGetOperand(calls[i], 1) &&
                only_extracted(calls[i]) && only_extracted(calls[j]) &&
                used_after(n, calls[i], place(n, calls[j]))) {
                *x = i;
                *y = j;
                return true;
            }
    return false;
}

/* Replaces X and Y by one m16n8k4 just before Y. */
static void fuse(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    LLVMContextRef ctx = LLVMGetTypeContext(LLVMTypeOf(x));
    LLVMTypeRef f64 = LLVMDoubleTypeInContext(ctx);
    LLVMTypeRef fields[4] = {f64, f64, f64, f64};
    LLVMTypeRef params[7] = {f64, f64, f64, f64, f64, f64, f64};
    LLVMTypeRef fn_type = LLVMFunctionType(LLVMStructTypeInContext(ctx, fields, 4, 0), params, 7, 0);
    static const char text[] = "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 "
                               "{$0, $1, $2, $3}, {$4, $5}, {$6}, {$7, $8, $9, $10};";
    static const char constraints[] = "=d,=d,=d,=d,d,d,d,d,d,d,d";
    LLVMValueRef code = LLVMGetInlineAsm(fn_type, (char *)text, sizeof text - 1,
                                         (char *)constraints, sizeof constraints - 1, 0, 0,
                                         LLVMInlineAsmDialectATT, 0);
    LLVMValueRef args[7] = {LLVMGetOperand(x, 0), LLVMGetOperand(y, 0), LLVMGetOperand(x, 1),
                            LLVMGetOperand(x, 2), LLVMGetOperand(x, 3), LLVMGetOperand(y, 2),
                            LLVMGetOperand(y, 3)};
    LLVMPositionBuilderBefore(b, y);
    LLVMValueRef call = LLVMBuildCall2(b, fn_type, code, args, 7, "mma16");
    unsigned kind = LLVMGetEnumAttributeKindForName("convergent", 10);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateEnumAttribute(ctx, kind, 0));
    LLVMValueRef d[4];
    for (unsigned q = 0; q < 4; q++)
        d[q] = LLVMBuildExtractValue(b, call, q, "");
    LLVMValueRef rows[2] = {x, y};
    for (int r = 0; r < 2; r++) {
        LLVMUseRef use;
        while ((use = LLVMGetFirstUse(rows[r]))) {
            LLVMValueRef extract = LLVMGetUser(use);
            LLVMReplaceAllUsesWith(extract, d[2 * r + LLVMGetIndices(extract)[0]]);
            LLVMInstructionEraseFromParent(extract);
        }
        LLVMInstructionEraseFromParent(rows[r]);
    }
}

static void fuse_block(LLVMBasicBlockRef bb, LLVMBuilderRef b)
{
    Numbering n = {0};
    LLVMValueRef *calls = NULL;
    size_t cap = 0;
    for (;;) {
        int count = 0;
        for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
            if (is_mma(i)) {
                if ((size_t)count == cap) {
                    cap = cap ? 2 * cap : 64;
                    calls = kj_xrealloc(calls, cap * sizeof *calls);
                }
                calls[count++] = i;
            }
        if (count < 2)
            break;
        number_block(&n, bb);
        int x, y;
        if (!find_pair(&n, calls, count, &x, &y))
            break;
        fuse(b, calls[x], calls[y]);
    }
    free(calls);
    free(n.keys);
    free(n.order);
}

void kj_ptx_fuse_mma(LLVMModuleRef mod, const char *arch)
{
    int number = 0;
    if (!arch || sscanf(arch, "sm_%d", &number) != 1 || number < 90)
        return;
    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetModuleContext(mod));
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
            fuse_block(bb, b);
    LLVMDisposeBuilder(b);
}
