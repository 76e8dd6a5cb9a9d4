/*
 * ptx_branches.c: floating-point work that LLVM speculated under a select is
 * put back under a branch, in code bound for PTX.
 *
 * libdevice's sin and cos end by choosing between the sine and the cosine
 * polynomial's last step, then between the value and its negation.  LLVM's
 * optimiser computes both sides and selects (it counts an fma as cheap);
 * nvcc's compiler branches, and on the GPU, where a warp usually agrees on
 * the choice, the branch runs one side only.  In the LLA kernel (four such
 * functions a thread) the selects left kjit 5-6% behind nvcc; turning three
 * of them back into branches by hand halved that.  So, after optimisation,
 * `x = c ? A : B`, where A or B is a floating-point operation used only by the
 * select, becomes a diamond: A in the block taken when c holds, B in the
 * other, and a phi where the select was.
 */
#include <string.h>

#include "codegen_llvm.h"

/* fadd, fsub, fmul, fdiv, fneg, or a call of an fma or fmuladd. */
static bool is_fp_operation(LLVMValueRef v)
{
    switch (LLVMGetInstructionOpcode(v)) {
    case LLVMFAdd:
    case LLVMFSub:
    case LLVMFMul:
    case LLVMFDiv:
    case LLVMFNeg:
        return true;
    case LLVMCall: {
        LLVMValueRef callee = LLVMGetCalledValue(v);
        size_t len;
        const char *name = callee ? LLVMGetValueName2(callee, &len) : NULL;
        return name && (strncmp(name, "llvm.fma.", 9) == 0 ||
                        strncmp(name, "llvm.fmuladd.", 13) == 0 ||
                        strncmp(name, "llvm.nvvm.fma.", 14) == 0);
    }
    default:
        return false;
    }
}

/* An operand that can move under the branch: an FP operation in the
 * select's block whose only user is the select. */
static bool movable(LLVMValueRef operand, LLVMValueRef select)
{
    if (!LLVMIsAInstruction(operand) || LLVMIsAPHINode(operand) ||
        LLVMGetInstructionParent(operand) != LLVMGetInstructionParent(select) ||
        !is_fp_operation(operand))
        return false;
    LLVMUseRef use = LLVMGetFirstUse(operand);
    return use && !LLVMGetNextUse(use) && LLVMGetUser(use) == select;
}

static bool worth_a_branch(LLVMValueRef select)
{
    LLVMTypeRef type = LLVMTypeOf(select);
    LLVMTypeKind kind = LLVMGetTypeKind(type);
    if (kind != LLVMFloatTypeKind && kind != LLVMDoubleTypeKind)
        return false;
    LLVMValueRef cond = LLVMGetOperand(select, 0);
    if (LLVMGetTypeKind(LLVMTypeOf(cond)) != LLVMIntegerTypeKind)
        return false;
    return movable(LLVMGetOperand(select, 1), select) ||
           movable(LLVMGetOperand(select, 2), select);
}

/* An alloca after `after` in the entry block would stop being static if the
 * block were split there. */
static bool alloca_after(LLVMValueRef after)
{
    for (LLVMValueRef i = LLVMGetNextInstruction(after); i; i = LLVMGetNextInstruction(i))
        if (LLVMIsAAllocaInst(i))
            return true;
    return false;
}

static void move_to_end(LLVMBuilderRef b, LLVMValueRef inst, LLVMBasicBlockRef block)
{
    LLVMInstructionRemoveFromParent(inst);
    LLVMPositionBuilderAtEnd(b, block);
    LLVMInsertIntoBuilder(b, inst);
}

/*
 * Splits `select`'s block: what comes before it moves to a new head block
 * (predecessors retargeted, phis with it), the moved operands to a "then"
 * and an "else" block, and the original block, which keeps the select's
 * successors and so every phi that names it, starts with the phi.
 */
static void branch_select(LLVMValueRef fn, LLVMBuilderRef b, LLVMValueRef select)
{
    LLVMContextRef context = LLVMGetTypeContext(LLVMTypeOf(select));
    LLVMBasicBlockRef join = LLVMGetInstructionParent(select);
    LLVMValueRef cond = LLVMGetOperand(select, 0);
    LLVMValueRef on_true = LLVMGetOperand(select, 1), on_false = LLVMGetOperand(select, 2);
    bool move_true = movable(on_true, select), move_false = movable(on_false, select);

    LLVMBasicBlockRef head = LLVMInsertBasicBlockInContext(context, join, "unspec.head");
    LLVMBasicBlockRef then_block = LLVMInsertBasicBlockInContext(context, join, "unspec.then");
    LLVMBasicBlockRef else_block = LLVMInsertBasicBlockInContext(context, join, "unspec.else");

    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
        unsigned count = term ? LLVMGetNumSuccessors(term) : 0;
        for (unsigned s = 0; s < count; s++)
            if (LLVMGetSuccessor(term, s) == join)
                LLVMSetSuccessor(term, s, head);
    }
    for (LLVMValueRef inst = LLVMGetFirstInstruction(join); inst != select;) {
        LLVMValueRef next = LLVMGetNextInstruction(inst);
        if (!(move_true && inst == on_true) && !(move_false && inst == on_false))
            move_to_end(b, inst, head);
        inst = next;
    }
    if (move_true)
        move_to_end(b, on_true, then_block);
    if (move_false)
        move_to_end(b, on_false, else_block);

    LLVMPositionBuilderAtEnd(b, head);
    LLVMBuildCondBr(b, cond, then_block, else_block);
    LLVMPositionBuilderAtEnd(b, then_block);
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, else_block);
    LLVMBuildBr(b, join);

    LLVMPositionBuilderBefore(b, select);
    LLVMValueRef phi = LLVMBuildPhi(b, LLVMTypeOf(select), "");
    LLVMValueRef values[2] = {on_true, on_false};
    LLVMBasicBlockRef blocks[2] = {then_block, else_block};
    LLVMAddIncoming(phi, values, blocks, 2);
    LLVMReplaceAllUsesWith(select, phi);
    LLVMInstructionEraseFromParent(select);
}

static void branch_function(LLVMValueRef fn, LLVMBuilderRef b)
{
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef inst = LLVMGetFirstInstruction(bb); inst;) {
            LLVMValueRef next = LLVMGetNextInstruction(inst);
            if (LLVMGetInstructionOpcode(inst) == LLVMSelect && worth_a_branch(inst) &&
                !(bb == entry && alloca_after(inst))) {
                /* What follows the select stays in bb: go on scanning there. */
                branch_select(fn, b, inst);
                entry = LLVMGetEntryBasicBlock(fn);
                next = LLVMGetFirstInstruction(bb);
                while (next && LLVMIsAPHINode(next))
                    next = LLVMGetNextInstruction(next);
            }
            inst = next;
        }
    }
}

void kj_ptx_branch_selects(LLVMModuleRef mod)
{
    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetModuleContext(mod));
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        if (!LLVMIsDeclaration(fn))
            branch_function(fn, b);
    LLVMDisposeBuilder(b);
}
