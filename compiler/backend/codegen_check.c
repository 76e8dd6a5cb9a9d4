/*
 * codegen_check.c: checked mode's lowering (KjCodegenOptions.checks), the
 * same on every target.
 *
 * Each impl takes two more parameters after the target's hidden ones: the
 * address of the call's KjCheckRecord (kjit_backend.h) and the address of
 * its thread's state, an i32 that its entry point allocates and zeroes (0:
 * running; 2: this thread failed a check and won the record; 1: it failed
 * one after another thread had won).  A site that checks.c marked becomes
 *
 *       br ok, %check.ok, %check.fail
 *   check.fail:
 *       cmpxchg record.failed 0 -> 1; the winner writes site, kind, values
 *       state = won ? 2 : 1; br %check.bail
 *
 * and every call of an impl is followed by a test of the state that leaves
 * for the same block.  %check.bail, one per impl, returns zero; in a kernel
 * it first writes the failing thread's block and thread into the record, in
 * a vectorized kernel the element it was computing (when this thread won).
 * So the failing thread runs nothing past its failed check, on the GPU too
 * (no trap: the context stays usable), and the other threads finish their
 * own work, each stopped by its own checks.  After inlining the state is an
 * SSA value, so a call that cannot fail costs nothing.
 *
 * A kernel's split form (barrier_split.c) runs a block's threads in loops
 * between its barriers, in the fibers' order; there a failure ends the
 * thread's turn, not the impl (kj_codegen_check_thread_bail): the thread's
 * flag keeps it out of the later regions and the others go on, so the same
 * thread wins the record and the same work is done as on fibers.
 *
 * On SIMD lanes (codegen_simd_check.c) the lanes keep their failures and
 * the lowest failed one claims the record at its chunk's end
 * (kj_codegen_check_claim); a check of a uniform value and the test after
 * a call go there through Gen.lane_check and Gen.lane_call_failed.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <string.h>

/* KjCheckRecord's fields, in order. */
enum { F_FAILED, F_SITE, F_KIND, F_WHERE, F_VALUES, F_ELEMENT, F_BLOCK, F_THREAD, F_RACE,
       F_RACE_ACCESS };

void kj_codegen_check_types(Gen *g)
{
    LLVMTypeRef three_i64 = LLVMArrayType2(g->t_i64, 3), three_i32 = LLVMArrayType2(g->t_i32, 3);
    LLVMTypeRef fields[] = {g->t_i32, g->t_i32, g->t_i32, g->t_i32,
                            three_i64, g->t_i64, three_i32, three_i32, g->t_ptr, g->t_ptr};
    g->t_check_record = LLVMStructCreateNamed(g->ctx, "KjCheckRecord");
    LLVMStructSetBody(g->t_check_record, fields, sizeof fields / sizeof fields[0], 0);
}

static bool checked(Gen *g) { return g->options->checks || g->options->race; }

int kj_codegen_check_params(Gen *g, LLVMTypeRef *types)
{
    if (!checked(g))
        return 0;
    types[0] = types[1] = g->t_ptr;
    return 2;
}

void kj_codegen_check_bind(Gen *g, unsigned first)
{
    g->check_record = g->check_state = NULL;
    g->bail_bb = NULL;
    g->element_slot = NULL;
    if (!checked(g))
        return;
    g->check_record = LLVMGetParam(g->llfn, first);
    g->check_state = LLVMGetParam(g->llfn, first + 1);
    kj_codegen_add_param_attr(g, g->llfn, first + 1, "noalias", 0);
}

int kj_codegen_check_call_args(Gen *g, LLVMValueRef *out)
{
    if (!checked(g))
        return 0;
    out[0] = g->check_record;
    out[1] = g->check_state;
    return 2;
}

int kj_codegen_check_entry_args(Gen *g, LLVMValueRef record, LLVMValueRef *out)
{
    if (!checked(g))
        return 0;
    LLVMValueRef state = LLVMBuildAlloca(g->b, g->t_i32, "check.state");
    LLVMBuildStore(g->b, const_i32(g, 0), state);
    out[0] = record;
    out[1] = state;
    return 2;
}

static LLVMValueRef field(Gen *g, int index, int element)
{
    if (element < 0)
        return LLVMBuildStructGEP2(g->b, g->t_check_record, g->check_record, (unsigned)index, "");
    LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, index), const_i32(g, element)};
    return LLVMBuildInBoundsGEP2(g->b, g->t_check_record, g->check_record, idx, 3, "");
}

/* Writes who failed: the kernel thread, or the vectorized kernel's element. */
static void write_where(Gen *g)
{
    KjIrFunction *fn = g->fn;
    if (fn->kind == KJ_IR_FN_KERNEL) {
        LLVMBuildStore(g->b, const_i32(g, KJ_CHECK_WHERE_THREAD), field(g, F_WHERE, -1));
        for (int k = 0; k < 3; k++) {
            LLVMBuildStore(g->b, kj_codegen_read_sreg(g, KJ_SREG_BID_X + k), field(g, F_BLOCK, k));
            LLVMBuildStore(g->b, kj_codegen_read_sreg(g, KJ_SREG_TID_X + k), field(g, F_THREAD, k));
        }
    } else if (fn->kind == KJ_IR_FN_VEC_KERNEL && g->element_slot) {
        LLVMBuildStore(g->b, const_i32(g, KJ_CHECK_WHERE_ELEMENT), field(g, F_WHERE, -1));
        LLVMValueRef i = LLVMBuildLoad2(g->b, g->t_i64, g->element_slot, "element");
        LLVMBuildStore(g->b, i, field(g, F_ELEMENT, -1));
    }
}

/* The impl's way out, made on first use. */
static LLVMBasicBlockRef bail_block(Gen *g)
{
    if (g->bail_bb)
        return g->bail_bb;
    LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
    g->bail_bb = new_block(g, "check.bail");
    LLVMPositionBuilderAtEnd(g->b, g->bail_bb);
    bool has_where = g->fn->kind == KJ_IR_FN_KERNEL ||
                     (g->fn->kind == KJ_IR_FN_VEC_KERNEL && g->element_slot);
    if (has_where) {
        LLVMBasicBlockRef write = new_block(g, "check.where"), done = new_block(g, "check.leave");
        LLVMValueRef state = LLVMBuildLoad2(g->b, g->t_i32, g->check_state, "");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, state, const_i32(g, 2), ""), write, done);
        LLVMPositionBuilderAtEnd(g->b, write);
        write_where(g);
        LLVMBuildBr(g->b, done);
        LLVMPositionBuilderAtEnd(g->b, done);
    }
    LLVMTypeRef ret = LLVMGetReturnType(LLVMGlobalGetValueType(g->llfn));
    if (LLVMGetTypeKind(ret) == LLVMVoidTypeKind)
        LLVMBuildRetVoid(g->b);
    else
        LLVMBuildRet(g->b, LLVMConstNull(ret));
    LLVMPositionBuilderAtEnd(g->b, here);
    return g->bail_bb;
}

LLVMBasicBlockRef kj_codegen_check_thread_bail(Gen *g, LLVMValueRef stopped, LLVMBasicBlockRef next)
{
    LLVMBasicBlockRef here = LLVMGetInsertBlock(g->b);
    LLVMBasicBlockRef bail = new_block(g, "check.thread_bail");
    LLVMBasicBlockRef write = new_block(g, "check.where"), done = new_block(g, "check.next_thread");
    LLVMPositionBuilderAtEnd(g->b, bail);
    LLVMValueRef state = LLVMBuildLoad2(g->b, g->t_i32, g->check_state, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, state, const_i32(g, 2), ""), write, done);
    LLVMPositionBuilderAtEnd(g->b, write);
    write_where(g);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    kj_codegen_check_first_stop(g);
    LLVMBuildStore(g->b, LLVMConstInt(LLVMInt8TypeInContext(g->ctx), 1, 0), stopped);
    LLVMBuildStore(g->b, const_i32(g, 0), g->check_state);
    LLVMBuildBr(g->b, next);
    LLVMPositionBuilderAtEnd(g->b, here);
    return bail;
}

void kj_codegen_check_after_call(Gen *g)
{
    if (!g->check_state)
        return;
    LLVMValueRef state = LLVMBuildLoad2(g->b, g->t_i32, g->check_state, "");
    LLVMBasicBlockRef go_on = new_block(g, "call.ok"), from = LLVMGetInsertBlock(g->b);
    LLVMValueRef failed = LLVMBuildICmp(g->b, LLVMIntNE, state, const_i32(g, 0), "");
    if (g->lane_call_failed) {
        /* on lanes: every running lane fails as the callee did */
        LLVMBasicBlockRef fail = new_block(g, "call.failed");
        LLVMBuildCondBr(g->b, failed, fail, go_on);
        LLVMPositionBuilderAtEnd(g->b, fail);
        g->lane_call_failed(g->lane_data, from, go_on); /* (leaves the builder in go_on) */
        return;
    }
    LLVMBuildCondBr(g->b, failed, bail_block(g), go_on);
    LLVMPositionBuilderAtEnd(g->b, go_on);
}

LLVMValueRef kj_codegen_check_stopped_flags(Gen *g)
{
    if (g->threads_stopped)
        return g->threads_stopped;
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
    g->threads_stopped = kj_codegen_alloca_in_entry(g, LLVMArrayType2(i8, KJ_MAX_BLOCK_THREADS + 64), "threads.stopped");
    g->threads_any_stopped = kj_codegen_alloca_in_entry(g, i8, "threads.any_stopped");
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(g->entry_bb));
    LLVMBuildStore(ab, LLVMConstInt(i8, 0, 0), g->threads_any_stopped);
    LLVMDisposeBuilder(ab);
    return g->threads_stopped;
}

LLVMValueRef kj_codegen_check_any_stopped(Gen *g)
{
    kj_codegen_check_stopped_flags(g);
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
    LLVMValueRef any = LLVMBuildLoad2(g->b, i8, g->threads_any_stopped, "any_stopped");
    return LLVMBuildICmp(g->b, LLVMIntNE, any, LLVMConstInt(i8, 0, 0), "");
}

void kj_codegen_check_first_stop(Gen *g)
{
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
    LLVMValueRef flags = kj_codegen_check_stopped_flags(g);
    LLVMBasicBlockRef first = new_block(g, "check.first_stop"), done = new_block(g, "check.stopped");
    LLVMBuildCondBr(g->b, kj_codegen_check_any_stopped(g), done, first);
    LLVMPositionBuilderAtEnd(g->b, first);
    LLVMBuildMemSet(g->b, flags, LLVMConstInt(i8, 0, 0), const_i64(g, KJ_MAX_BLOCK_THREADS + 64), 1);
    LLVMBuildStore(g->b, LLVMConstInt(i8, 1, 0), g->threads_any_stopped);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

static LLVMValueRef field_of(Gen *g, LLVMValueRef record, int index, int element)
{
    LLVMValueRef saved = g->check_record;
    g->check_record = record;
    LLVMValueRef p = field(g, index, element);
    g->check_record = saved;
    return p;
}

/* Takes the record (failed 0 -> 1) and, where this thread won it, writes
 * the site, the kind and the values: the builder is left in that writing
 * block; the block returned (named `lost`) is where the others go. */
static LLVMBasicBlockRef claim_record(Gen *g, LLVMValueRef site, LLVMValueRef kind,
                                      LLVMValueRef values[3], const char *lost)
{
    LLVMAtomicOrdering order = g->target->atomic_ordering;
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(g->b, field(g, F_FAILED, -1), const_i32(g, 0),
                                               const_i32(g, 1), order, order, 0);
    LLVMValueRef won = LLVMBuildExtractValue(g->b, pair, 1, "won");
    LLVMBasicBlockRef write = new_block(g, "check.write"), other = new_block(g, lost);
    LLVMBuildCondBr(g->b, won, write, other);
    LLVMPositionBuilderAtEnd(g->b, write);
    LLVMBuildStore(g->b, site, field(g, F_SITE, -1));
    LLVMBuildStore(g->b, kind, field(g, F_KIND, -1));
    for (int k = 0; k < 3; k++)
        LLVMBuildStore(g->b, values[k], field(g, F_VALUES, k));
    return other;
}

void kj_codegen_check_claim(Gen *g, LLVMValueRef site, LLVMValueRef kind, LLVMValueRef values[3],
                            LLVMValueRef thread_x, LLVMValueRef element)
{
    LLVMBasicBlockRef done = claim_record(g, site, kind, values, "check.claimed");
    if (element) {
        LLVMBuildStore(g->b, const_i32(g, KJ_CHECK_WHERE_ELEMENT), field(g, F_WHERE, -1));
        LLVMBuildStore(g->b, element, field(g, F_ELEMENT, -1));
    } else {
        LLVMBuildStore(g->b, const_i32(g, KJ_CHECK_WHERE_THREAD), field(g, F_WHERE, -1));
        for (int k = 0; k < 3; k++) {
            LLVMBuildStore(g->b, kj_codegen_read_sreg(g, KJ_SREG_BID_X + k), field(g, F_BLOCK, k));
            LLVMBuildStore(g->b, k == 0 ? thread_x : kj_codegen_read_sreg(g, KJ_SREG_TID_X + k),
                           field(g, F_THREAD, k));
        }
    }
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

void kj_codegen_check_take(Gen *g, LLVMValueRef record, LLVMValueRef *site, LLVMValueRef *kind,
                           LLVMValueRef values[3])
{
    *site = LLVMBuildLoad2(g->b, g->t_i32, field_of(g, record, F_SITE, -1), "site");
    *kind = LLVMBuildLoad2(g->b, g->t_i32, field_of(g, record, F_KIND, -1), "kind");
    for (int k = 0; k < 3; k++)
        values[k] = LLVMBuildLoad2(g->b, g->t_i64, field_of(g, record, F_VALUES, k), "");
    LLVMBuildStore(g->b, const_i32(g, 0), field_of(g, record, F_FAILED, -1));
}

/*
 * Checked rows first.  kj_codegen_rows_first's __blocks runs a row of
 * threads of each block of a grid row before the next row, not block after
 * block, so the first failure in time need not be the first in the blocks'
 * order, the one that wins the record on the cpu target.  Each row's call
 * gets a record of its own; after the call, a failure there is kept when it
 * comes before the one kept so far, and at the end the one kept claims the
 * call's record.  A straight-line kernel's threads share nothing (no shared
 * memory, no barrier), and every thread still runs until its own checks
 * stop it, so the failure kept is the one that block after block would have
 * written.
 */
LLVMValueRef kj_codegen_check_row_record(Gen *g, LLVMValueRef record, LLVMValueRef *kept)
{
    LLVMValueRef row = LLVMBuildAlloca(g->b, g->t_check_record, "row.record");
    LLVMBuildMemCpy(g->b, row, 8, record, 8, LLVMSizeOf(g->t_check_record));
    LLVMBuildStore(g->b, const_i32(g, 0), field_of(g, row, F_FAILED, -1));
    *kept = LLVMBuildAlloca(g->b, g->t_check_record, "kept.record");
    LLVMBuildStore(g->b, const_i32(g, 0), field_of(g, *kept, F_FAILED, -1));
    return row;
}

/* A failure's place in the blocks' order: its block's and thread's linear
 * indices, x fastest (i64). */
static void order_of(Gen *g, LLVMValueRef record, LLVMValueRef gx, LLVMValueRef gy, const uint32_t dims[3],
                     LLVMValueRef *block, LLVMValueRef *thread)
{
    LLVMValueRef b[3], t[3];
    for (int k = 0; k < 3; k++) {
        b[k] = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, field_of(g, record, F_BLOCK, k), ""), g->t_i64, "");
        t[k] = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, field_of(g, record, F_THREAD, k), ""), g->t_i64, "");
    }
    *block = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, LLVMBuildAdd(g->b, LLVMBuildMul(g->b, b[2], gy, ""), b[1], ""), gx, ""),
                          b[0], "block.order");
    LLVMValueRef ty = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, t[2], const_i64(g, dims[1]), ""), t[1], "");
    *thread = LLVMBuildAdd(g->b, LLVMBuildMul(g->b, ty, const_i64(g, dims[0]), ""), t[0], "thread.order");
}

/* The fields a claim writes, in `to` from `from` (not `failed`). */
static void copy_failure(Gen *g, LLVMValueRef to, LLVMValueRef from)
{
    static const struct { int field, count; bool wide; } fields[] = {
        {F_SITE, 0, false}, {F_KIND, 0, false}, {F_WHERE, 0, false}, {F_VALUES, 3, true},
        {F_ELEMENT, 0, true}, {F_BLOCK, 3, false}, {F_THREAD, 3, false}};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        LLVMTypeRef t = fields[i].wide ? g->t_i64 : g->t_i32;
        for (int k = fields[i].count ? 0 : -1; k < fields[i].count; k++)
            LLVMBuildStore(g->b, LLVMBuildLoad2(g->b, t, field_of(g, from, fields[i].field, k), ""),
                           field_of(g, to, fields[i].field, k));
    }
}

void kj_codegen_check_keep_row(Gen *g, LLVMValueRef row, LLVMValueRef kept, LLVMValueRef gx, LLVMValueRef gy,
                               const uint32_t dims[3])
{
    LLVMBasicBlockRef compare = new_block(g, "row.failed"), first = new_block(g, "row.first"),
                      keep = new_block(g, "row.keep"), done = new_block(g, "row.checked");
    LLVMValueRef failed = LLVMBuildLoad2(g->b, g->t_i32, field_of(g, row, F_FAILED, -1), "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, failed, const_i32(g, 0), ""), compare, done);
    LLVMPositionBuilderAtEnd(g->b, compare);
    LLVMValueRef have = LLVMBuildLoad2(g->b, g->t_i32, field_of(g, kept, F_FAILED, -1), "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, have, const_i32(g, 0), ""), keep, first);
    LLVMPositionBuilderAtEnd(g->b, first);
    LLVMValueRef rb, rt, kb, kt;
    order_of(g, row, gx, gy, dims, &rb, &rt);
    order_of(g, kept, gx, gy, dims, &kb, &kt);
    LLVMValueRef before = LLVMBuildOr(g->b, LLVMBuildICmp(g->b, LLVMIntULT, rb, kb, ""),
                                      LLVMBuildAnd(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, rb, kb, ""),
                                                   LLVMBuildICmp(g->b, LLVMIntULT, rt, kt, ""), ""),
                                      "before");
    LLVMBasicBlockRef free_row = new_block(g, "row.free");
    LLVMBuildCondBr(g->b, before, keep, free_row);
    LLVMPositionBuilderAtEnd(g->b, keep);
    copy_failure(g, kept, row);
    LLVMBuildStore(g->b, const_i32(g, 1), field_of(g, kept, F_FAILED, -1));
    LLVMBuildBr(g->b, free_row);
    LLVMPositionBuilderAtEnd(g->b, free_row);
    LLVMBuildStore(g->b, const_i32(g, 0), field_of(g, row, F_FAILED, -1));
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

void kj_codegen_check_claim_kept(Gen *g, LLVMValueRef record, LLVMValueRef kept)
{
    LLVMBasicBlockRef claim = new_block(g, "kept.claim"), write = new_block(g, "kept.write"),
                      done = new_block(g, "kept.done");
    LLVMValueRef have = LLVMBuildLoad2(g->b, g->t_i32, field_of(g, kept, F_FAILED, -1), "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, have, const_i32(g, 0), ""), claim, done);
    LLVMPositionBuilderAtEnd(g->b, claim);
    LLVMAtomicOrdering order = g->target->atomic_ordering;
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(g->b, field_of(g, record, F_FAILED, -1), const_i32(g, 0),
                                               const_i32(g, 1), order, order, 0);
    LLVMBuildCondBr(g->b, LLVMBuildExtractValue(g->b, pair, 1, "won"), write, done);
    LLVMPositionBuilderAtEnd(g->b, write);
    copy_failure(g, record, kept);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

void kj_codegen_check(Gen *g, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef v0,
                      LLVMValueRef v1, LLVMValueRef v2)
{
    if (!site || !g->check_record)
        return;
    LLVMValueRef values[3] = {v0 ? v0 : const_i64(g, 0), v1 ? v1 : const_i64(g, 0), v2 ? v2 : const_i64(g, 0)};
    if (g->lane_check) {
        g->lane_check(g->lane_data, site, kind, ok, values);
        return;
    }
    LLVMBasicBlockRef fail = new_block(g, "check.fail"), go_on = new_block(g, "check.ok");
    LLVMBuildCondBr(g->b, ok, go_on, fail);

    LLVMPositionBuilderAtEnd(g->b, fail);
    LLVMBasicBlockRef lost = claim_record(g, const_i32(g, site), const_i32(g, (int32_t)kind), values,
                                          "check.lost");
    LLVMBuildStore(g->b, const_i32(g, 2), g->check_state);
    LLVMBuildBr(g->b, bail_block(g));

    LLVMPositionBuilderAtEnd(g->b, lost);
    LLVMBuildStore(g->b, const_i32(g, 1), g->check_state);
    LLVMBuildBr(g->b, bail_block(g));

    LLVMPositionBuilderAtEnd(g->b, go_on);
}

void kj_codegen_check_index(Gen *g, int site, const ArrayVal *a, LLVMValueRef *indices, int count)
{
    if (!site || !g->check_record)
        return;
    /* A negative index is a large unsigned one: one comparison per axis. */
    for (int k = 0; k < count && k < a->ndim; k++) {
        LLVMValueRef ok = LLVMBuildICmp(g->b, LLVMIntULT, indices[k], a->shape[k], "");
        kj_codegen_check(g, site, KJ_CHECK_INDEX, ok, indices[k], a->shape[k], const_i64(g, k));
    }
}

/* An integer operand widened to i64 by its own signedness. */
static LLVMValueRef to_i64(Gen *g, LLVMValueRef v, const KjType *type)
{
    if (kj_type_int_bits(type) == 64)
        return v;
    return kj_type_is_signed(type) ? LLVMBuildSExt(g->b, v, g->t_i64, "")
                                   : LLVMBuildZExt(g->b, v, g->t_i64, "");
}

/* Whether float x truncates to a value integer type `to` holds (false for
 * NaN: every comparison is ordered).  Compared in f64, which holds every f32
 * exactly and every bound below exactly. */
static LLVMValueRef convert_ok(Gen *g, LLVMValueRef x, const KjType *to)
{
    if (LLVMTypeOf(x) != g->t_f64)
        x = LLVMBuildFPExt(g->b, x, g->t_f64, "");
    int bits = kj_type_int_bits(to);
    double hi = bits == 64 ? 18446744073709551616.0 : (double)((uint64_t)1 << bits);
    LLVMValueRef above;
    if (kj_type_is_signed(to)) {
        hi /= 2;
        double min = -hi;
        /* Above MIN - 1; for 64 bits MIN - 1 is no double: at least MIN. */
        above = bits == 64 ? LLVMBuildFCmp(g->b, LLVMRealOGE, x, LLVMConstReal(g->t_f64, min), "")
                           : LLVMBuildFCmp(g->b, LLVMRealOGT, x, LLVMConstReal(g->t_f64, min - 1), "");
    } else {
        above = LLVMBuildFCmp(g->b, LLVMRealOGT, x, LLVMConstReal(g->t_f64, -1.0), "");
    }
    LLVMValueRef below = LLVMBuildFCmp(g->b, LLVMRealOLT, x, LLVMConstReal(g->t_f64, hi), "");
    return LLVMBuildAnd(g->b, above, below, "");
}

void kj_codegen_check_operands(Gen *g, const KjIrExpr *e, LLVMValueRef a, LLVMValueRef b)
{
    if (!e->check_site || !g->check_record)
        return;
    const KjType *t = e->type;
    LLVMValueRef ok;
    switch (e->op) {
    case KJ_IR_DIV:
    case KJ_IR_REM: {
        LLVMTypeRef lt = llty(g, t);
        ok = LLVMBuildICmp(g->b, LLVMIntNE, b, LLVMConstNull(lt), "");
        if (e->op == KJ_IR_DIV && kj_type_is_signed(t)) {
            /* MIN / -1: the one quotient that overflows */
            int bits = kj_type_int_bits(t);
            LLVMValueRef min = LLVMConstInt(lt, (uint64_t)1 << (bits - 1), 0);
            LLVMValueRef overflow = LLVMBuildAnd(
                g->b, LLVMBuildICmp(g->b, LLVMIntEQ, a, min, ""),
                LLVMBuildICmp(g->b, LLVMIntEQ, b, LLVMConstAllOnes(lt), ""), "");
            ok = LLVMBuildAnd(g->b, ok, LLVMBuildNot(g->b, overflow, ""), "");
        }
        kj_codegen_check(g, e->check_site, KJ_CHECK_DIVIDE, ok, to_i64(g, a, t), to_i64(g, b, t),
                         const_i64(g, e->op == KJ_IR_REM));
        return;
    }
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        LLVMValueRef count = to_i64(g, b, e->args[1]->type);
        LLVMValueRef width = const_i64(g, kj_type_int_bits(t));
        ok = LLVMBuildICmp(g->b, LLVMIntULT, count, width, "");
        kj_codegen_check(g, e->check_site, KJ_CHECK_SHIFT, ok, count, width, NULL);
        return;
    }
    case KJ_IR_IPOW: {
        LLVMValueRef n = to_i64(g, b, e->args[1]->type);
        ok = LLVMBuildICmp(g->b, LLVMIntSGE, n, const_i64(g, 0), "");
        kj_codegen_check(g, e->check_site, KJ_CHECK_POWER, ok, n, NULL, NULL);
        return;
    }
    case KJ_IR_CAST: {
        /* through the conversions of codegen_expr.c: f16 and bf16 have no
         * fpext to f64 every target lowers without a libcall */
        LLVMValueRef wide = kj_codegen_convert(g, a, e->args[0]->type, kj_type_scalar(KJ_TYPE_F64));
        ok = convert_ok(g, wide, t);
        kj_codegen_check(g, e->check_site, KJ_CHECK_CONVERT, ok,
                         LLVMBuildBitCast(g->b, wide, g->t_i64, ""),
                         const_i64(g, kj_type_int_bits(t)), const_i64(g, kj_type_is_signed(t)));
        return;
    }
    default:
        return;
    }
}

/* ------------------------------------------------------------------ races */

/*
 * Race checking: before an access to an array element and at a barrier, a
 * kernel (and each device function it calls, which has the thread's ctx)
 * calls record->race_access(record, ctx, address, indices, site, flags);
 * a non-zero answer means the call has failed (a race, or diverging
 * barriers) and the thread leaves as after a failed check, through
 * %check.bail, without writing the record (the runtime's race state holds
 * the report).  Plain functions have no ctx and pass NULL: the runtime
 * knows which thread runs (a fiber of its own), or that none does (a call
 * from the host, a vectorized call) and then has nothing to check.
 */
static void race_call(Gen *g, int site, KjCheckKind kind, LLVMValueRef address,
                      LLVMValueRef *indices, int count)
{
    LLVMValueRef index_array = LLVMConstNull(g->t_ptr);
    if (count > 0) {
        LLVMTypeRef at = LLVMArrayType2(g->t_i64, (unsigned)count);
        index_array = kj_codegen_alloca_in_entry(g, at, "race.indices");
        for (int k = 0; k < count; k++) {
            LLVMValueRef idx[2] = {const_i32(g, 0), const_i32(g, k)};
            LLVMBuildStore(g->b, indices[k], LLVMBuildInBoundsGEP2(g->b, at, index_array, idx, 2, ""));
        }
    }
    LLVMTypeRef params[] = {g->t_ptr, g->t_ptr, g->t_ptr, g->t_ptr, g->t_i32, g->t_i32};
    LLVMTypeRef ft = LLVMFunctionType(g->t_i32, params, 6, 0);
    LLVMValueRef fn = LLVMBuildLoad2(g->b, g->t_ptr, field(g, F_RACE_ACCESS, -1), "race.access");
    LLVMValueRef args[] = {g->check_record, g->thread_ctx ? g->thread_ctx : LLVMConstNull(g->t_ptr),
                           address ? address : LLVMConstNull(g->t_ptr), index_array,
                           const_i32(g, site), const_i32(g, (int32_t)kind | count << 8)};
    LLVMValueRef failed = LLVMBuildCall2(g->b, ft, fn, args, 6, "race");
    LLVMBasicBlockRef stop = new_block(g, "race.stop"), go_on = new_block(g, "race.ok");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, failed, const_i32(g, 0), ""), stop, go_on);
    LLVMPositionBuilderAtEnd(g->b, stop);
    LLVMBuildStore(g->b, const_i32(g, 1), g->check_state);
    LLVMBuildBr(g->b, bail_block(g));
    LLVMPositionBuilderAtEnd(g->b, go_on);
}

void kj_codegen_race_access(Gen *g, int site, KjCheckKind kind, LLVMValueRef address,
                            LLVMValueRef *indices, int count)
{
    if (!site || !g->options->race || !g->check_record)
        return;
    race_call(g, site, kind, address, indices, count);
}

void kj_codegen_race_barrier(Gen *g, int site)
{
    if (!site || !g->options->race || !g->check_record || !g->thread_ctx)
        return;
    race_call(g, site, KJ_CHECK_BARRIER, NULL, NULL, 0);
}
