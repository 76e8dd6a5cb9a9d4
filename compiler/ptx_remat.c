/*
 * ptx_remat.c: cheap values recomputed next to their late uses, in kernels
 * bound for PTX.
 *
 * A kernel computes its coordinates from special registers at the top and
 * uses them again at the end, to store its result; between the two, its math
 * runs with the coordinates, and the extents read from its array parameters,
 * held in registers.  nvcc's compiler recomputes such values where they are
 * used late and ptxas does not: the LLA kernel took 38 registers from kjit
 * and 30 from nvcc, which lowered its occupancy and cost 7%.  So, after
 * optimisation and before the NVPTX back end, each use of a cheap value in
 * a block other than its own gets a copy made just before the use.  Cheap
 * means: a special-register read (tid, ctaid, ...), a load from a by-value
 * kernel parameter that is only ever read (ld.param), and integer arithmetic
 * or casts over such values and constants, a few levels deep.  A block in a
 * loop gets no copies: there a copy would run on every iteration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_llvm.h"

#define MAX_DEPTH 6

typedef struct Remat {
    LLVMValueRef fn;
    LLVMBuilderRef builder;
    unsigned byval_kind;
    /* the copies made for the block being rewritten: original -> copy */
    LLVMValueRef *from, *to;
    int count, capacity;
} Remat;

#define SREG_PREFIX "llvm.nvvm.read.ptx.sreg."

/* "tid.x" when v reads one of a thread's coordinates (tid, ntid, ctaid,
 * nctaid), else NULL. */
static const char *coordinate_read(LLVMValueRef v)
{
    if (!LLVMIsACallInst(v))
        return NULL;
    LLVMValueRef callee = LLVMGetCalledValue(v);
    size_t len;
    const char *name = callee ? LLVMGetValueName2(callee, &len) : NULL;
    if (!name || strncmp(name, SREG_PREFIX, strlen(SREG_PREFIX)) != 0)
        return NULL;
    const char *reg = name + strlen(SREG_PREFIX);
    static const char *const known[] = {"tid.", "ntid.", "ctaid.", "nctaid."};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strncmp(reg, known[i], strlen(known[i])) == 0 && strlen(reg) == strlen(known[i]) + 1)
            return reg;
    return NULL;
}

/* A read of special register `reg` that the back end cannot merge with
 * another: machine CSE would otherwise fold the copies back into the first
 * read, and the value would be live across the kernel again.  Inline
 * assembly is never merged. */
static LLVMValueRef build_coordinate_read(Remat *r, const char *reg)
{
    LLVMContextRef context = LLVMGetModuleContext(LLVMGetGlobalParent(r->fn));
    LLVMTypeRef type = LLVMFunctionType(LLVMInt32TypeInContext(context), NULL, 0, 0);
    char text[64];
    snprintf(text, sizeof text, "mov.u32 $0, %%%s;", reg);
    LLVMValueRef read = LLVMGetInlineAsm(type, text, strlen(text), "=r", 2, 0, 0,
                                         LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(r->builder, type, read, NULL, 0, "");
}

/* A by-value parameter that the kernel only reads, through GEPs and loads. */
static bool only_read(LLVMValueRef v)
{
    for (LLVMUseRef u = LLVMGetFirstUse(v); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef user = LLVMGetUser(u);
        if (LLVMIsALoadInst(user))
            continue;
        if (!LLVMIsAGetElementPtrInst(user) || LLVMGetOperand(user, 0) != v || !only_read(user))
            return false;
    }
    return true;
}

static bool is_readonly_byval(Remat *r, LLVMValueRef v)
{
    if (!LLVMIsAArgument(v) || LLVMGetParamParent(v) != r->fn)
        return false;
    unsigned index = 0;
    for (LLVMValueRef p = LLVMGetFirstParam(r->fn); p && p != v; p = LLVMGetNextParam(p))
        index++;
    return LLVMGetEnumAttributeAtIndex(r->fn, index + 1, r->byval_kind) != NULL && only_read(v);
}

/* A constant-offset address inside a read-only by-value parameter. */
static bool is_param_address(Remat *r, LLVMValueRef v)
{
    if (LLVMIsAArgument(v))
        return is_readonly_byval(r, v);
    if (!LLVMIsAGetElementPtrInst(v))
        return false;
    for (unsigned i = 1; i < (unsigned)LLVMGetNumOperands(v); i++)
        if (!LLVMIsAConstantInt(LLVMGetOperand(v, i)))
            return false;
    return is_param_address(r, LLVMGetOperand(v, 0));
}

static bool cheap(Remat *r, LLVMValueRef v, int depth)
{
    if (LLVMIsAConstant(v))
        return true;
    if (!LLVMIsAInstruction(v) || depth > MAX_DEPTH)
        return false;
    if (coordinate_read(v))
        return true;
    switch (LLVMGetInstructionOpcode(v)) {
    case LLVMLoad:
        return !LLVMGetVolatile(v) && is_param_address(r, LLVMGetOperand(v, 0));
    case LLVMGetElementPtr:
        return is_param_address(r, v);
    case LLVMZExt:
    case LLVMSExt:
    case LLVMTrunc:
    case LLVMAdd:
    case LLVMSub:
    case LLVMMul:
    case LLVMShl:
    case LLVMLShr:
    case LLVMAShr:
    case LLVMAnd:
    case LLVMOr:
        for (int i = 0; i < LLVMGetNumOperands(v); i++)
            if (!cheap(r, LLVMGetOperand(v, i), depth + 1))
                return false;
        return true;
    default:
        return false;
    }
}

/* v's copy for the block being rewritten, made before `before` if new; v
 * itself when it is defined in that block or is not an instruction. */
static LLVMValueRef copy_of(Remat *r, LLVMValueRef v, LLVMBasicBlockRef block, LLVMValueRef before)
{
    if (!LLVMIsAInstruction(v) || LLVMGetInstructionParent(v) == block)
        return v;
    for (int i = 0; i < r->count; i++)
        if (r->from[i] == v)
            return r->to[i];
    LLVMValueRef copy;
    const char *reg = coordinate_read(v);
    if (reg) {
        LLVMPositionBuilderBefore(r->builder, before);
        copy = build_coordinate_read(r, reg);
    } else {
        copy = LLVMInstructionClone(v);
        for (int i = 0; i < LLVMGetNumOperands(v); i++) {
            LLVMValueRef operand = LLVMGetOperand(v, i);
            if (LLVMIsAInstruction(operand))
                LLVMSetOperand(copy, (unsigned)i, copy_of(r, operand, block, before));
        }
        LLVMPositionBuilderBefore(r->builder, before);
        LLVMInsertIntoBuilder(r->builder, copy);
    }
    if (r->count == r->capacity) {
        r->capacity = r->capacity ? 2 * r->capacity : 16;
        r->from = kj_xrealloc(r->from, sizeof *r->from * (size_t)r->capacity);
        r->to = kj_xrealloc(r->to, sizeof *r->to * (size_t)r->capacity);
    }
    r->from[r->count] = v;
    r->to[r->count++] = copy;
    return copy;
}

typedef struct BlockIndex {
    LLVMBasicBlockRef block;
    int index;
} BlockIndex;

static int by_block(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const BlockIndex *)a)->block;
    uintptr_t y = (uintptr_t)((const BlockIndex *)b)->block;
    return (x > y) - (x < y);
}

static int index_of(const BlockIndex *sorted, int n, LLVMBasicBlockRef block)
{
    BlockIndex key = {block, 0};
    const BlockIndex *found = bsearch(&key, sorted, (size_t)n, sizeof key, by_block);
    return found ? found->index : -1;
}

/* in_loop[i]: block i can reach itself (a depth-first walk from each block). */
static bool *blocks_in_loops(LLVMBasicBlockRef *blocks, int n)
{
    BlockIndex *sorted = kj_xmalloc(sizeof *sorted * (size_t)n);
    for (int i = 0; i < n; i++)
        sorted[i] = (BlockIndex){blocks[i], i};
    qsort(sorted, (size_t)n, sizeof *sorted, by_block);
    bool *in_loop = kj_xcalloc((size_t)n, sizeof *in_loop);
    bool *seen = kj_xmalloc(sizeof *seen * (size_t)n);
    int *stack = kj_xmalloc(sizeof *stack * ((size_t)n + 1));
    for (int b = 0; b < n; b++) {
        memset(seen, 0, sizeof *seen * (size_t)n);
        int top = 0;
        stack[top++] = b;
        while (top > 0 && !in_loop[b]) {
            LLVMValueRef term = LLVMGetBasicBlockTerminator(blocks[stack[--top]]);
            unsigned count = term ? LLVMGetNumSuccessors(term) : 0;
            for (unsigned s = 0; s < count; s++) {
                int y = index_of(sorted, n, LLVMGetSuccessor(term, s));
                if (y == b)
                    in_loop[b] = true;
                else if (y >= 0 && !seen[y]) {
                    seen[y] = true;
                    stack[top++] = y;
                }
            }
        }
    }
    free(stack);
    free(seen);
    free(sorted);
    return in_loop;
}

static void remat_function(Remat *r)
{
    int n = (int)LLVMCountBasicBlocks(r->fn);
    if (n < 2)
        return;
    LLVMBasicBlockRef *blocks = kj_xmalloc(sizeof *blocks * (size_t)n);
    LLVMGetBasicBlocks(r->fn, blocks);
    bool *in_loop = blocks_in_loops(blocks, n);
    for (int b = 0; b < n; b++) {
        if (in_loop[b])
            continue;
        r->count = 0;
        for (LLVMValueRef inst = LLVMGetFirstInstruction(blocks[b]); inst;
             inst = LLVMGetNextInstruction(inst)) {
            if (LLVMIsAPHINode(inst))
                continue;
            for (int i = 0; i < LLVMGetNumOperands(inst); i++) {
                LLVMValueRef operand = LLVMGetOperand(inst, i);
                if (!LLVMIsAInstruction(operand) ||
                    LLVMGetInstructionParent(operand) == blocks[b] || !cheap(r, operand, 0))
                    continue;
                LLVMSetOperand(inst, (unsigned)i, copy_of(r, operand, blocks[b], inst));
            }
        }
    }
    free(in_loop);
    free(blocks);
}

void kj_ptx_rematerialize(LLVMModuleRef mod)
{
    Remat r = {0};
    r.builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(mod));
    r.byval_kind = LLVMGetEnumAttributeKindForName("byval", 5);
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        if (LLVMIsDeclaration(fn) || LLVMGetFunctionCallConv(fn) != LLVMPTXKernelCallConv)
            continue;
        r.fn = fn;
        remat_function(&r);
    }
    free(r.from);
    free(r.to);
    LLVMDisposeBuilder(r.builder);
}
