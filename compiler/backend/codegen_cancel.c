/*
 * codegen_cancel.c: cancellation polls (KjCodegenOptions.cancel), the same
 * lowering on every target, the differences in two fields of KjTarget.
 *
 * A poll is placed where a call may otherwise run on without end: at the
 * back edge of each loop (the increment of a `for`, the test of a `while`,
 * the latch of a loop on SIMD lanes), after each call of a function that
 * has polls of its own, at the start of each region of a split kernel (its
 * barriers) and before each block of __blocks.  On cpu it is
 *
 *       %word = load ptr @kj_cancel_word, !invariant.load    (hoisted)
 *       %n = load atomic i32 %word monotonic                  (each turn)
 *       br (%n != 0), %cancel.ask, %cancel.go          (weights: rarely)
 *   cancel.ask:
 *       %stop = call (load @kj_cancel_hook)()   ; is it this thread's call?
 *       br (%stop != 0), %cancel.bail, %cancel.go
 *   cancel.bail:
 *       ret zero
 *
 * so the common cost is one load from a line no thread writes, a compare
 * and a branch predicted not taken.  At the back edge of a `for` of a
 * constant step (kj_codegen_cancel_poll_turn) even that load goes: the
 * block above runs only in turns whose counter has log2(cancel_stride)
 * chosen bits 0 (one turn in every cancel_stride in a row, turn_bits), so
 * each turn costs a test of a register and a branch.  The load cost where
 * the loop's own loads split cache lines (a block-strided loop of a stride
 * of 257 f64: 17 % with AVX-512, docs/performance.md); a counter of the
 * poll's own instead cost a register, and a period of 64 turns a
 * mispredicted branch in 64 (4 % with AVX2).  A cancelled call then stops
 * within cancel_stride turns of such a loop.  The polls keep a loop from being
 * vectorised by LLVM (it gains an exit), which is why they are an option;
 * a `for` of constant bounds and at most KJ_CANCEL_FREE_TURNS turns with no
 * loop inside has none (it ends soon), nor have reduce.c's lanes.
 *
 * On cuda (target->cancel_stride > 1) the word is a u64 global holding the
 * device address of the context's flag in mapped host memory (0 before the
 * runtime writes it: no poll), read with a volatile load every
 * cancel_stride turns of a counter, since each read crosses the bus.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

/* A constant loop of at most this many turns, with no loop in its body, is
 * not polled: its work is bounded by its body's. */
#define KJ_CANCEL_FREE_TURNS 4096

static KjIrWalkStep stop_at_loop(KjIrWalk *w, const KjIrStmt *s)
{
    bool loop = s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE || s->kind == KJ_IR_STMT_PARFOR ||
                s->kind == KJ_IR_STMT_THREADS;
    return loop ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool has_loop(const KjIrStmt *s)
{
    KjIrWalk w = {.stmt = stop_at_loop};
    return !kj_ir_walk_stmt(&w, s);
}

bool kj_codegen_cancel_loop(Gen *g, const KjIrStmt *s)
{
    if (!g->options->cancel || s->simd_lanes)
        return false;
    if (s->start->op != KJ_IR_CONST || s->stop->op != KJ_IR_CONST || s->step->op != KJ_IR_CONST ||
        has_loop(s->body))
        return true;
    /* the turns of a constant loop, as the loop counts them (signed) */
    int64_t start = (int64_t)s->start->const_int, stop = (int64_t)s->stop->const_int;
    int64_t step = (int64_t)s->step->const_int;
    if (step == 0)
        return true;
    double turns = ((double)stop - (double)start) / (double)step;
    return turns > KJ_CANCEL_FREE_TURNS;
}

/* The functions a question has walked, each with its answer: a call tree
 * that doubles at each level (24 levels: 16 million paths) holds few
 * functions.  Recursion is not in the language, so the walk ends. */
typedef struct StopMemo {
    const KjIrFunction **fns;
    bool *answers;
    int count, cap;
} StopMemo;

static bool fn_may_stop(const KjIrFunction *fn, StopMemo *memo);

static bool call_cannot_stop(KjIrWalk *w, const KjIrExpr *e)
{
    return !(e->op == KJ_IR_CALL && e->callee && fn_may_stop(e->callee, w->data));
}

static KjIrWalkStep stop_at_own_loop(KjIrWalk *w, const KjIrStmt *s)
{
    bool loop = s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE || s->kind == KJ_IR_STMT_THREADS;
    return loop ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

/* Whether fn, or a function it calls, loops: only then can a call of it run
 * on without end, and only then does the caller poll after it. */
static bool fn_may_stop(const KjIrFunction *fn, StopMemo *memo)
{
    for (int i = 0; i < memo->count; i++)
        if (memo->fns[i] == fn)
            return memo->answers[i];
    KjIrWalk w = {.stmt = stop_at_own_loop, .expr = call_cannot_stop, .data = memo};
    bool answer = !kj_ir_walk_stmt(&w, fn->body);
    if (memo->count == memo->cap) {
        memo->cap = memo->cap ? 2 * memo->cap : 16;
        memo->fns = kj_xrealloc(memo->fns, sizeof *memo->fns * (size_t)memo->cap);
        memo->answers = kj_xrealloc(memo->answers, sizeof *memo->answers * (size_t)memo->cap);
    }
    memo->fns[memo->count] = fn;
    memo->answers[memo->count++] = answer;
    return answer;
}

bool kj_codegen_cancel_may_stop(Gen *g, const KjIrFunction *fn)
{
    if (!g->options->cancel || !fn)
        return false;
    StopMemo memo = {0};
    bool answer = fn_may_stop(fn, &memo);
    free(memo.fns);
    free(memo.answers);
    return answer;
}

/* The module's global of that name, made on first use. */
static LLVMValueRef cancel_global(Gen *g, const char *name, LLVMTypeRef type, unsigned space)
{
    LLVMValueRef global = LLVMGetNamedGlobal(g->mod, name);
    if (global)
        return global;
    global = LLVMAddGlobalInAddressSpace(g->mod, type, name, space);
    LLVMSetAlignment(global, 8);
    if (g->target->cancel_hook && strcmp(name, KJ_CANCEL_WORD_SYMBOL) == 0) {
        /* cpu: the word points at a zero of the module's own until the
         * runtime binds it, so that code loaded elsewhere never stops */
        LLVMValueRef zero = LLVMAddGlobal(g->mod, g->t_i32, "kj_cancel_zero");
        LLVMSetInitializer(zero, const_i32(g, 0));
        LLVMSetLinkage(zero, LLVMInternalLinkage);
        LLVMSetInitializer(global, zero);
    } else {
        LLVMSetInitializer(global, LLVMConstNull(type));
        if (!g->target->cancel_hook)
            LLVMSetExternallyInitialized(global, 1);
    }
    return global;
}

/* The function's way out, made once per function. */
static LLVMBasicBlockRef bail_block(Gen *g)
{
    if (g->cancel_fn == g->llfn && g->cancel_bail_bb)
        return g->cancel_bail_bb;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef bail = new_block(g, "cancel.bail");
    LLVMPositionBuilderAtEnd(g->b, bail);
    LLVMTypeRef ret = LLVMGetReturnType(LLVMGlobalGetValueType(g->llfn));
    if (LLVMGetTypeKind(ret) == LLVMVoidTypeKind)
        LLVMBuildRetVoid(g->b);
    else
        LLVMBuildRet(g->b, LLVMConstNull(ret));
    LLVMPositionBuilderAtEnd(g->b, here);
    g->cancel_fn = g->llfn;
    g->cancel_bail_bb = bail;
    return bail;
}

/* br cond, then, else, with `then` marked rarely taken. */
static void branch_rarely(Gen *g, LLVMValueRef cond, LLVMBasicBlockRef then_bb, LLVMBasicBlockRef else_bb)
{
    LLVMValueRef br = LLVMBuildCondBr(g->b, cond, then_bb, else_bb);
    LLVMMetadataRef ops[3] = {
        LLVMMDStringInContext2(g->ctx, "branch_weights", strlen("branch_weights")),
        LLVMValueAsMetadata(const_i32(g, 1)), LLVMValueAsMetadata(const_i32(g, 1 << 20))};
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(g->ctx, "prof", 4),
                    LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, ops, 3)));
}

static void mark_invariant(Gen *g, LLVMValueRef load)
{
    LLVMSetMetadata(load, LLVMGetMDKindIDInContext(g->ctx, "invariant.load", strlen("invariant.load")),
                    LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, NULL, 0)));
}

static void poll_host(Gen *g, LLVMBasicBlockRef go_on)
{
    LLVMValueRef global = cancel_global(g, KJ_CANCEL_WORD_SYMBOL, g->t_ptr, 0);
    LLVMValueRef word = LLVMBuildLoad2(g->b, g->t_ptr, global, "cancel.word");
    mark_invariant(g, word);
    LLVMValueRef n = LLVMBuildLoad2(g->b, g->t_i32, word, "cancel.n");
    LLVMSetOrdering(n, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(n, 4);
    LLVMBasicBlockRef ask = new_block(g, "cancel.ask");
    branch_rarely(g, LLVMBuildICmp(g->b, LLVMIntNE, n, const_i32(g, 0), ""), ask, go_on);
    LLVMPositionBuilderAtEnd(g->b, ask);
    LLVMValueRef hook_global = cancel_global(g, KJ_CANCEL_HOOK_SYMBOL, g->t_ptr, 0);
    LLVMValueRef hook = LLVMBuildLoad2(g->b, g->t_ptr, hook_global, "cancel.hook");
    LLVMBasicBlockRef call_bb = new_block(g, "cancel.call");
    LLVMBuildCondBr(g->b, LLVMBuildIsNotNull(g->b, hook, ""), call_bb, go_on);
    LLVMPositionBuilderAtEnd(g->b, call_bb);
    LLVMValueRef stop = LLVMBuildCall2(g->b, LLVMFunctionType(g->t_i32, NULL, 0, 0), hook, NULL, 0, "cancel.stop");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, stop, const_i32(g, 0), ""), bail_block(g), go_on);
}

static void poll_device(Gen *g, LLVMBasicBlockRef go_on)
{
    unsigned stride = g->target->cancel_stride;
    LLVMValueRef counter = kj_codegen_alloca_in_entry(g, g->t_i32, "cancel.turns");
    /* zero once, in the entry block, where the alloca is */
    LLVMBuilderRef entry = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(entry, LLVMGetBasicBlockTerminator(g->entry_bb));
    LLVMBuildStore(entry, const_i32(g, 0), counter);
    LLVMDisposeBuilder(entry);
    LLVMValueRef turns = LLVMBuildAdd(g->b, LLVMBuildLoad2(g->b, g->t_i32, counter, ""), const_i32(g, 1), "");
    LLVMBuildStore(g->b, turns, counter);
    LLVMValueRef due = LLVMBuildICmp(g->b, LLVMIntEQ,
                                     LLVMBuildAnd(g->b, turns, const_i32(g, (int32_t)stride - 1), ""),
                                     const_i32(g, 0), "");
    LLVMBasicBlockRef read = new_block(g, "cancel.read"), test = new_block(g, "cancel.test");
    branch_rarely(g, due, read, go_on);
    LLVMPositionBuilderAtEnd(g->b, read);
    LLVMValueRef global = cancel_global(g, KJ_CANCEL_WORD_SYMBOL, g->t_i64, g->target->cancel_word_space);
    LLVMValueRef address = LLVMBuildLoad2(g->b, g->t_i64, global, "cancel.address");
    mark_invariant(g, address);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, address, const_i64(g, 0), ""), test, go_on);
    LLVMPositionBuilderAtEnd(g->b, test);
    LLVMValueRef flag = LLVMBuildIntToPtr(g->b, address, g->t_ptr, "");
    LLVMValueRef n = LLVMBuildLoad2(g->b, g->t_i32, flag, "cancel.flag");
    LLVMSetVolatile(n, 1);
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, n, const_i32(g, 0), ""), bail_block(g), go_on);
}

void kj_codegen_cancel_poll(Gen *g)
{
    if (!g->options->cancel || LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(g->b)))
        return;
    LLVMBasicBlockRef go_on = new_block(g, "cancel.go");
    if (g->target->cancel_hook)
        poll_host(g, go_on);
    else
        poll_device(g, go_on);
    LLVMPositionBuilderAtEnd(g->b, go_on);
}

/* The bits of a `for` counter that run through every value once in
 * cancel_stride turns: with a constant step of s = odd * 2^k, counter >> k
 * moves by the odd number each turn, so its low log2(cancel_stride) bits
 * take each value once in any cancel_stride turns in a row; 0 where the
 * counter is too narrow for them. */
static uint64_t turn_bits(Gen *g, LLVMTypeRef type, LLVMValueRef step)
{
    unsigned stride = g->target->cancel_stride;
    if (LLVMGetTypeKind(type) != LLVMIntegerTypeKind || !LLVMIsAConstantInt(step) || stride < 2 ||
        (stride & (stride - 1)))
        return 0;
    unsigned width = LLVMGetIntTypeWidth(type);
    uint64_t magnitude = (uint64_t)LLVMConstIntGetSExtValue(step);
    if ((int64_t)magnitude < 0)
        magnitude = -magnitude;
    if (width > 64 || magnitude == 0)
        return 0;
    unsigned low = (unsigned)__builtin_ctzll(magnitude), bits = (unsigned)__builtin_ctz(stride);
    if (low + bits >= width)
        return 0;
    return (uint64_t)(stride - 1) << low;
}

/*
 * A `for` whose turns the run decides (`range(len(a))`) polls at its back
 * edge even when it turns 16 times in a gufunc's core, and the test of the
 * counter there, two instructions and a branch in every turn, cost a fifth
 * of a 16-element dot's loop (issue 25: Python's contexts are cancellable).
 * Such a loop, when kj_codegen_cancel_poll_turn polls it by its counter's
 * bits and its body has no loop, gets this i1, computed before it: whether
 * it turns more than KJ_CANCEL_FREE_TURNS times (as a constant loop of that
 * many turns has no poll).  The back edge tests it before the counter, a
 * condition the loop does not change, so LLVM's unswitching makes two
 * copies of the loop, the short one without the poll; a call still stops
 * within KJ_CANCEL_FREE_TURNS turns of such a loop, or cancel_stride turns
 * of a longer one.  NULL where the loop polls as before.  The span of the
 * bounds is taken in 128 bits (no difference of two 64-bit bounds wraps
 * there).
 */
LLVMValueRef kj_codegen_cancel_long_loop(Gen *g, const KjIrStmt *s, LLVMTypeRef type, bool is_signed,
                                         LLVMValueRef start, LLVMValueRef stop, LLVMValueRef step)
{
    /* (turn_bits is 0 unless the step is a constant) */
    if (!g->options->cancel || !g->target->cancel_hook || !turn_bits(g, type, step) || has_loop(s->body))
        return NULL;
    LLVMTypeRef wide = LLVMIntTypeInContext(g->ctx, 128);
    LLVMValueRef (*extend)(LLVMBuilderRef, LLVMValueRef, LLVMTypeRef, const char *) =
        is_signed ? LLVMBuildSExt : LLVMBuildZExt;
    LLVMValueRef span = LLVMBuildSub(g->b, extend(g->b, stop, wide, ""), extend(g->b, start, wide, ""), "");
    /* span / step > FREE as span > FREE * step (below it for a step below
     * 0): no division, which on 128 bits would be a call */
    __int128 by = is_signed ? (__int128)LLVMConstIntGetSExtValue(step) : (__int128)LLVMConstIntGetZExtValue(step);
    unsigned __int128 bound = (unsigned __int128)(by * KJ_CANCEL_FREE_TURNS);
    uint64_t words[2] = {(uint64_t)bound, (uint64_t)(bound >> 64)};
    LLVMValueRef limit = LLVMConstIntOfArbitraryPrecision(wide, 2, words);
    return LLVMBuildICmp(g->b, by > 0 ? LLVMIntSGT : LLVMIntSLT, span, limit, "cancel.long");
}

void kj_codegen_cancel_poll_turn(Gen *g, LLVMValueRef counter_slot, LLVMTypeRef type, LLVMValueRef step,
                                 LLVMValueRef long_loop)
{
    if (!g->options->cancel || LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(g->b)))
        return;
    uint64_t bits = g->target->cancel_hook && counter_slot && step ? turn_bits(g, type, step) : 0;
    if (!bits) {
        kj_codegen_cancel_poll(g);
        return;
    }
    LLVMBasicBlockRef due_bb = new_block(g, "cancel.due"), go_on = new_block(g, "cancel.go");
    if (long_loop) { /* kj_codegen_cancel_long_loop's */
        LLVMBasicBlockRef count = new_block(g, "cancel.count");
        LLVMBuildCondBr(g->b, long_loop, count, go_on);
        LLVMPositionBuilderAtEnd(g->b, count);
    }
    /* cpu: a test of the counter each turn (no load, no register of its
     * own), the word's load in one turn of cancel_stride */
    LLVMValueRef counter = LLVMBuildLoad2(g->b, type, counter_slot, "");
    LLVMValueRef due = LLVMBuildICmp(g->b, LLVMIntEQ,
                                     LLVMBuildAnd(g->b, counter, LLVMConstInt(type, bits, 0), ""),
                                     LLVMConstNull(type), "cancel.due?");
    branch_rarely(g, due, due_bb, go_on);
    LLVMPositionBuilderAtEnd(g->b, due_bb);
    poll_host(g, go_on);
    LLVMPositionBuilderAtEnd(g->b, go_on);
}
