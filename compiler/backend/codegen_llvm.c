/*
 * codegen_llvm.c: the typed IR lowered to LLVM IR, shared by the cpu target
 * (target_cpu.c; cpu_jit.c, ORC on the host) and the cuda target
 * (target_cuda.c; ptx.c, NVPTX).  This file holds the module, its functions,
 * statements and control flow, and the optimisation pipeline; codegen_expr.c
 * lowers expressions, and codegen_gen.c holds the helpers every lowering
 * file and the targets' entry points build on.  Where the targets differ it calls g->target's hooks
 * (codegen_llvm.h); it never asks which target it builds for.
 *
 * Every IR function becomes an internal "<symbol>__impl" function whose
 * arrays arrive as SSA values (data pointer, then the first ndim extents and
 * strides), so that element stores never force the descriptor to be read
 * again; the entry points kjit_runtime.h lists are thin wrappers that unpack
 * their arguments and call the impl, which the optimiser inlines.  A kernel
 * compiled for C-contiguous arrays (KjCodegenOptions.contiguous_params) gets
 * those arrays' strides computed from their shapes in its entry points, and
 * the facts reach every access through the impl's arguments, plain functions
 * it calls included once they are inlined; so is a vectorized kernel of the
 * CONTIG layout.  On cuda such an array travels as a short record, its data
 * pointer and extents (the prefix of KjArrayDesc), which keeps the launch's
 * parameter block small.  Local
 * variables are allocas in the entry block (mem2reg makes them SSA values).
 * No fast-math flags are set anywhere: IEEE semantics, no reassociation, no
 * contraction.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ============================================================ blocks */

/* Code after a terminator (break, return) goes to a fresh block nothing
 * branches to; the optimiser drops it. */
static void start_dead_block(Gen *g)
{
    LLVMPositionBuilderAtEnd(g->b, LLVMAppendBasicBlockInContext(g->ctx, g->llfn, "dead"));
}

static bool block_open(Gen *g) { return LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(g->b)) == NULL; }

static void branch_to(Gen *g, LLVMBasicBlockRef bb)
{
    if (block_open(g))
        LLVMBuildBr(g->b, bb);
}

/* ============================================================ statements */

static void gen_stmt(Gen *g, KjIrStmt *s);

static void store_var(Gen *g, KjIrVar *var, KjIrExpr *value)
{
    if (is_array(var->type)) {
        ArrayVal a;
        kj_codegen_array(g, value, &a);
        ArraySlots *s = &g->slots[var->id].array;
        LLVMBuildStore(g->b, a.data, s->data);
        for (int k = 0; k < var->type->ndim && k < a.ndim; k++) {
            LLVMBuildStore(g->b, a.shape[k], s->shape[k]);
            LLVMBuildStore(g->b, a.strides[k], s->strides[k]);
        }
        return;
    }
    LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, value), value->type, var->type);
    LLVMBuildStore(g->b, v, g->slots[var->id].scalar);
}

static void push_loop(Gen *g, LLVMBasicBlockRef break_bb, LLVMBasicBlockRef continue_bb)
{
    if (g->loop_depth >= (int)(sizeof g->loops / sizeof g->loops[0])) {
        kj_codegen_error(g, "loops are nested more than 256 deep%s", NULL);
        g->loop_depth--; /* the caller's pop keeps the count balanced */
    }
    g->loops[++g->loop_depth - 1] = (LoopTargets){break_bb, continue_bb};
}

/* Whether a loop body leaves early or holds another loop: such loops are not
 * unrolled by request. */
/* Whether s holds a loop or leaves early (break, return): the walk (ir.c)
 * stops at the first. */
static KjIrWalkStep stop_at_loop_or_leave(KjIrWalk *w, const KjIrStmt *s)
{
    switch (s->kind) {
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: case KJ_IR_STMT_PARFOR: case KJ_IR_STMT_THREADS:
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_RETURN:
        return KJ_IR_WALK_STOP;
    default:
        return KJ_IR_WALK_ON;
    }
}

static bool leaves_or_loops(const KjIrStmt *s)
{
    KjIrWalk w = {.stmt = stop_at_loop_or_leave};
    return !kj_ir_walk_stmt(&w, s);
}

/* A loop ID on the back edge, holding the properties props[0..n): the node
 * names itself, as loop IDs do. */
static void set_loop_md(Gen *g, LLVMValueRef back_edge, LLVMMetadataRef *props, int n)
{
    LLVMMetadataRef ops[4];
    ops[0] = LLVMTemporaryMDNode(g->ctx, NULL, 0);
    for (int i = 0; i < n; i++)
        ops[i + 1] = props[i];
    LLVMMetadataRef loop = LLVMMDNodeInContext2(g->ctx, ops, (size_t)n + 1);
    LLVMMetadataReplaceAllUsesWith(ops[0], loop);
    LLVMSetMetadata(back_edge, LLVMGetMDKindIDInContext(g->ctx, "llvm.loop", strlen("llvm.loop")),
                    LLVMMetadataAsValue(g->ctx, loop));
}

/*
 * An innermost `for` over constant bounds with no early exit is unrolled
 * four times (or its `unroll` times) on targets that ask for it (cuda: as nvcc does with such loops;
 * LLVM's NVPTX defaults unroll the delay-and-sum inner loop only twice, and
 * the four copies let the GPU overlap one step's square roots and division
 * with the next's, measured 48.4 to 47.1 ms on the H100).  The request is
 * loop metadata on the back edge.
 */
static void request_unroll(Gen *g, const KjIrStmt *s, LLVMValueRef back_edge)
{
    if (s->unroll < 0) { /* never unrolled, on any target (KjIrStmt.unroll) */
        kj_codegen_loop_no_unroll(g, back_edge);
        return;
    }
    if (!g->target->unroll_constant_loops || s->start->op != KJ_IR_CONST ||
        s->stop->op != KJ_IR_CONST || s->step->op != KJ_IR_CONST || leaves_or_loops(s->body))
        return;
    LLVMMetadataRef count[2] = {
        LLVMMDStringInContext2(g->ctx, "llvm.loop.unroll.count", strlen("llvm.loop.unroll.count")),
        LLVMValueAsMetadata(
            LLVMConstInt(LLVMInt32TypeInContext(g->ctx), s->unroll > 0 ? (unsigned)s->unroll : 4, 0))};
    LLVMMetadataRef prop = LLVMMDNodeInContext2(g->ctx, count, 2);
    set_loop_md(g, back_edge, &prop, 1);
}

/* A FOR marked simd_lanes (reduce.c's lanes of a block) is vectorised at its
 * whole trip count and never unrolled: the vector loop then runs once, its
 * accesses to the lanes' local array fall at constant offsets, and LLVM keeps
 * the lanes in vector registers across the enclosing loop.  Left to its
 * heuristics, LLVM unrolls a constant 32-iteration loop into scalars first,
 * or vectorises a shorter width whose lanes go through the stack each step.
 * The width is a hint, not a demand (no llvm.loop.vectorize.enable): LLVM
 * takes it wherever it can vectorise the loop, and where it cannot (at the
 * sse2 level, a lane loop that reads its operand through srem and sdiv of
 * the index: "cannot identify array bounds") it leaves the loop scalar,
 * where a demand made it warn "loop not vectorized" for each such loop
 * (about 160 lines for kjit build examples/reduce.kern --emit=lib). */
static void request_simd_lanes(Gen *g, const KjIrStmt *s, LLVMValueRef back_edge)
{
    if (s->start->op != KJ_IR_CONST || s->stop->op != KJ_IR_CONST)
        kj_die("a simd_lanes loop without constant bounds");
    int64_t width = s->lanes_scalar ? 1 : (int64_t)(s->stop->const_int - s->start->const_int);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(g->ctx);
#define MD_STRING(text) LLVMMDStringInContext2(g->ctx, text, strlen(text))
    LLVMMetadataRef vf[2] = {MD_STRING("llvm.loop.vectorize.width"),
                             LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned long long)width, 0))};
    LLVMMetadataRef no_unroll[1] = {MD_STRING("llvm.loop.unroll.disable")};
#undef MD_STRING
    LLVMMetadataRef props[2] = {LLVMMDNodeInContext2(g->ctx, vf, 2),
                                LLVMMDNodeInContext2(g->ctx, no_unroll, 1)};
    set_loop_md(g, back_edge, props, 2);
}

/* A counted loop, the skeleton `for` and PARFOR share: its variable runs
 * from start by step while below stop, or above it when the step is
 * negative and the loop runs either_way. */
typedef struct CountedLoop {
    const char *name;         /* the blocks are "<name>.cond", ".body", ".inc", ".exit" */
    const char *counter_name; /* of the hidden counter's alloca */
    LLVMTypeRef type;
    LLVMValueRef start, stop, step;
    bool is_signed;
    bool either_way; /* false: upward only (PARFOR's i64 index) */
    bool nsw;        /* the increment cannot wrap */
    bool poll;       /* a cancellation poll on the back edge */
} CountedLoop;

/* The loop counts with its own hidden counter, so assigning to the loop
 * variable in the body does not change the iterations (as in Python).
 * Returns the back edge's branch. */
static LLVMValueRef gen_counted_loop(Gen *g, KjIrStmt *s, const CountedLoop *loop)
{
    LLVMTypeRef lt = loop->type;
    bool sgn = loop->is_signed;
    LLVMValueRef counter = kj_codegen_alloca_in_entry(g, lt, loop->counter_name);
    LLVMBuildStore(g->b, loop->start, counter);
    LLVMValueRef up = loop->either_way ? LLVMBuildICmp(g->b, sgn ? LLVMIntSGT : LLVMIntNE, loop->step,
                                                       LLVMConstNull(lt), "up")
                                       : NULL;
    LLVMValueRef long_loop =
        loop->poll ? kj_codegen_cancel_long_loop(g, s, lt, sgn, loop->start, loop->stop, loop->step) : NULL;

    char names[4][32];
    static const char *const parts[4] = {"cond", "body", "inc", "exit"};
    for (int k = 0; k < 4; k++)
        snprintf(names[k], sizeof names[k], "%s.%s", loop->name, parts[k]);
    LLVMBasicBlockRef cond_bb = new_block(g, names[0]), body_bb = new_block(g, names[1]),
                      inc_bb = new_block(g, names[2]), exit_bb = new_block(g, names[3]);
    LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, cond_bb);
    LLVMValueRef i = LLVMBuildLoad2(g->b, lt, counter, "i");
    LLVMValueRef go_on = LLVMBuildICmp(g->b, sgn ? LLVMIntSLT : LLVMIntULT, i, loop->stop, "");
    if (up) {
        LLVMValueRef above = LLVMBuildICmp(g->b, sgn ? LLVMIntSGT : LLVMIntUGT, i, loop->stop, "");
        go_on = LLVMBuildSelect(g->b, up, go_on, above, "");
    }
    LLVMBuildCondBr(g->b, go_on, body_bb, exit_bb);

    LLVMPositionBuilderAtEnd(g->b, body_bb);
    LLVMBuildStore(g->b, i, g->slots[s->var->id].scalar);
    push_loop(g, exit_bb, inc_bb);
    gen_stmt(g, s->body);
    kj_codegen_debug_loc(g, s->loc); /* the step and the test are the loop's line */
    g->loop_depth--;
    branch_to(g, inc_bb);

    LLVMPositionBuilderAtEnd(g->b, inc_bb);
    if (loop->poll)
        kj_codegen_cancel_poll_turn(g, counter, lt, loop->step, long_loop);
    LLVMValueRef cur = LLVMBuildLoad2(g->b, lt, counter, "");
    LLVMValueRef next = loop->nsw ? LLVMBuildNSWAdd(g->b, cur, loop->step, "")
                                  : LLVMBuildAdd(g->b, cur, loop->step, "");
    LLVMBuildStore(g->b, next, counter);
    LLVMValueRef back_edge = LLVMBuildBr(g->b, cond_bb);
    LLVMPositionBuilderAtEnd(g->b, exit_bb);
    return back_edge;
}

static void gen_for(Gen *g, KjIrStmt *s)
{
    const KjType *t = s->var->type;
    CountedLoop loop = {.name = "for", .counter_name = "for.counter", .type = llty(g, t),
                        .is_signed = kj_type_is_signed(t), .either_way = true,
                        .poll = kj_codegen_cancel_loop(g, s)};
    loop.start = kj_codegen_convert(g, kj_codegen_expr(g, s->start), s->start->type, t);
    loop.stop = kj_codegen_convert(g, kj_codegen_expr(g, s->stop), s->stop->type, t);
    loop.step = kj_codegen_convert(g, kj_codegen_expr(g, s->step), s->step->type, t);
    LLVMValueRef back_edge = gen_counted_loop(g, s, &loop);
    if (s->simd_lanes)
        request_simd_lanes(g, s, back_edge);
    else
        request_unroll(g, s, back_edge);
}

/* PARFOR: the target says which iterations this code runs (cpu: the
 * [begin, end) the runtime hands to __range; cuda: a grid-stride loop). */
static void gen_parfor(Gen *g, KjIrStmt *s)
{
    CountedLoop loop = {.name = "parfor", .counter_name = "parfor.i", .type = g->t_i64,
                        .is_signed = true, .nsw = true};
    if (!g->target->parfor_range(g, s, &loop.start, &loop.stop, &loop.step))
        return;
    g->element_slot = g->slots[s->var->id].scalar; /* checked mode names the element */
    gen_counted_loop(g, s, &loop);
}

/*
 * THREADS: the block's threads in a loop nest, z outermost and x innermost,
 * with threadIdx read from the counters; a return ends one thread's turn.
 * Loops around it stay out of reach (the split pass leaves no break or
 * continue that would cross it).
 */
/* Checked mode, in a THREADS loop's body (the thread's indices in g->sreg):
 * skips a thread that failed a check in an earlier region, and gives the
 * way out of this thread's turn (kj_codegen_check_thread_bail).  The flags,
 * one i8 per thread of the block, are zeroed by the block's first stop
 * (kj_codegen_check_first_stop). */
static LLVMBasicBlockRef thread_bail(Gen *g, LLVMValueRef block_dims[3], LLVMBasicBlockRef next)
{
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
    LLVMValueRef linear = LLVMBuildMul(g->b, g->sreg[KJ_SREG_TID_Z], block_dims[1], "");
    linear = LLVMBuildMul(g->b, LLVMBuildAdd(g->b, linear, g->sreg[KJ_SREG_TID_Y], ""), block_dims[0], "");
    linear = LLVMBuildZExt(g->b, LLVMBuildAdd(g->b, linear, g->sreg[KJ_SREG_TID_X], ""), g->t_i64, "");
    LLVMValueRef flag = LLVMBuildInBoundsGEP2(g->b, i8, kj_codegen_check_stopped_flags(g), &linear, 1, "stopped");
    /* the flags hold something only once a thread has stopped */
    LLVMBasicBlockRef look = new_block(g, "threads.look"), run = new_block(g, "threads.run");
    LLVMBuildCondBr(g->b, kj_codegen_check_any_stopped(g), look, run);
    LLVMPositionBuilderAtEnd(g->b, look);
    LLVMValueRef stopped = LLVMBuildLoad2(g->b, i8, flag, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, stopped, LLVMConstInt(i8, 0, 0), ""), next, run);
    LLVMPositionBuilderAtEnd(g->b, run);
    return kj_codegen_check_thread_bail(g, flag, next);
}

static void gen_threads(Gen *g, KjIrStmt *s)
{
    if (!g->target->thread_loops || !g->thread_ctx || g->thread_next) {
        kj_codegen_error(g, "a loop over a block's threads outside a cpu kernel's split form%s", NULL);
        return;
    }
    LLVMValueRef saved[3], counters[3], dims[3], block_dims[3];
    LLVMBasicBlockRef conds[3], bodies[3], incs[3], exits[3];
    for (int k = 0; k < 3; k++) {
        saved[k] = g->sreg[KJ_SREG_TID_X + k];
        dims[k] = block_dims[k] = kj_codegen_read_sreg(g, KJ_SREG_BDIM_X + k);
        counters[k] = kj_codegen_alloca_in_entry(g, g->t_i32, "thread");
    }
    /* threadIdx.x from its range's start (clamped to the block) */
    LLVMValueRef first = const_i32(g, 0);
    if (s->start || s->stop) {
        LLVMValueRef wide = LLVMBuildSExt(g->b, dims[0], g->t_i64, "");
        LLVMValueRef zero = const_i64(g, 0), bounds[2] = {NULL, NULL};
        KjIrExpr *ends[2] = {s->start, s->stop};
        for (int k = 0; k < 2; k++) {
            if (!ends[k])
                continue;
            LLVMValueRef v = kj_codegen_expr(g, ends[k]);
            v = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, v, zero, ""), zero, v, "");
            v = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, v, wide, ""), wide, v, "");
            bounds[k] = LLVMBuildTrunc(g->b, v, g->t_i32, "");
        }
        if (bounds[0])
            first = bounds[0];
        if (bounds[1])
            dims[0] = bounds[1];
    }
    /* each region follows a barrier (or opens the block): the split form's
     * barriers poll here */
    kj_codegen_cancel_poll(g);
    /* a row at a time (kj_codegen_rows_first): threadIdx.y and .z are the
     * impl's parameters */
    LLVMValueRef starts[3] = {first, const_i32(g, 0), const_i32(g, 0)};
    if (kj_codegen_rows_first(g, g->fn)) {
        /* threadIdx.x given 0: one row, y and z those given; else the block */
        LLVMValueRef whole = LLVMBuildICmp(g->b, LLVMIntNE, saved[0], const_i32(g, 0), "whole");
        for (int k = 1; k < 3; k++) {
            starts[k] = LLVMBuildSelect(g->b, whole, const_i32(g, 0), saved[k], "");
            dims[k] = LLVMBuildSelect(g->b, whole, dims[k], LLVMBuildAdd(g->b, saved[k], const_i32(g, 1), ""), "");
        }
    }
    /* threadIdx.x in chunks on SIMD lanes where codegen_simd.c takes the region */
    if (kj_simd_threads(g, s, starts, dims[0], dims))
        return;
    for (int level = 2; level >= 0; level--) {
        conds[level] = new_block(g, "threads.cond");
        bodies[level] = new_block(g, "threads.body");
        incs[level] = new_block(g, "threads.next");
        exits[level] = new_block(g, "threads.exit");
        LLVMBuildStore(g->b, starts[level], counters[level]);
        LLVMBuildBr(g->b, conds[level]);
        LLVMPositionBuilderAtEnd(g->b, conds[level]);
        LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, t, dims[level], ""), bodies[level],
                        exits[level]);
        LLVMPositionBuilderAtEnd(g->b, bodies[level]);
    }
    for (int k = 0; k < 3; k++)
        g->sreg[KJ_SREG_TID_X + k] = LLVMBuildLoad2(g->b, g->t_i32, counters[k], "tid");
    /* checked mode: a thread that failed a check in an earlier region sits
     * the others out, and a failure here ends only this thread's turn */
    LLVMBasicBlockRef bail = g->bail_bb;
    if (g->check_record)
        g->bail_bb = thread_bail(g, block_dims, incs[0]);
    int loops = g->loop_depth;
    g->loop_depth = 0;
    g->thread_next = incs[0];
    gen_stmt(g, s->body);
    g->thread_next = NULL;
    g->loop_depth = loops;
    g->bail_bb = bail;
    for (int level = 0; level < 3; level++) {
        branch_to(g, incs[level]);
        LLVMPositionBuilderAtEnd(g->b, incs[level]);
        LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
        LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, t, const_i32(g, 1), ""), counters[level]);
        LLVMBuildBr(g->b, conds[level]);
        LLVMPositionBuilderAtEnd(g->b, exits[level]);
    }
    for (int k = 0; k < 3; k++)
        g->sreg[KJ_SREG_TID_X + k] = saved[k];
}

static void gen_stmt(Gen *g, KjIrStmt *s)
{
    if (!block_open(g))
        start_dead_block(g);
    if (s->kind != KJ_IR_STMT_BLOCK)
        kj_codegen_debug_loc(g, s->loc);
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++)
            gen_stmt(g, s->stmts.items[i]);
        return;
    case KJ_IR_STMT_EVAL:
        kj_codegen_expr(g, s->value);
        return;
    case KJ_IR_STMT_SET:
        store_var(g, s->var, s->value);
        return;
    case KJ_IR_STMT_STORE: {
        ArrayVal a;
        kj_codegen_array(g, s->array, &a);
        LLVMValueRef idx[KJ_MAX_DIMS];
        for (int k = 0; k < s->index_count && k < KJ_MAX_DIMS; k++)
            idx[k] = kj_codegen_convert(g, kj_codegen_expr(g, s->indices[k]), s->indices[k]->type,
                                        kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, s->value), s->value->type, a.elem);
        kj_codegen_check_index(g, s->check_site, &a, idx, s->index_count);
        LLVMValueRef p = kj_codegen_element_address(g, &a, idx, s->index_count, s->contiguous);
        kj_codegen_race_access(g, s->race_site, KJ_CHECK_WRITE, p, idx, s->index_count);
        LLVMBuildStore(g->b, to_mem(g, a.elem, v), p);
        return;
    }
    case KJ_IR_STMT_IF: {
        LLVMValueRef c = kj_codegen_expr(g, s->cond);
        LLVMBasicBlockRef then_bb = new_block(g, "if.then"), done = new_block(g, "if.done");
        LLVMBasicBlockRef else_bb = s->else_stmt ? new_block(g, "if.else") : done;
        LLVMBuildCondBr(g->b, c, then_bb, else_bb);
        LLVMPositionBuilderAtEnd(g->b, then_bb);
        gen_stmt(g, s->then_stmt);
        branch_to(g, done);
        if (s->else_stmt) {
            LLVMPositionBuilderAtEnd(g->b, else_bb);
            gen_stmt(g, s->else_stmt);
            branch_to(g, done);
        }
        LLVMPositionBuilderAtEnd(g->b, done);
        return;
    }
    case KJ_IR_STMT_FOR:
        gen_for(g, s);
        return;
    case KJ_IR_STMT_WHILE: {
        LLVMBasicBlockRef cond_bb = new_block(g, "while.cond"), body_bb = new_block(g, "while.body"),
                          exit_bb = new_block(g, "while.exit");
        LLVMBuildBr(g->b, cond_bb);
        LLVMPositionBuilderAtEnd(g->b, cond_bb);
        kj_codegen_cancel_poll_turn(g, NULL, NULL, NULL, NULL); /* continue comes here too */
        LLVMBuildCondBr(g->b, kj_codegen_expr(g, s->cond), body_bb, exit_bb);
        LLVMPositionBuilderAtEnd(g->b, body_bb);
        push_loop(g, exit_bb, cond_bb);
        gen_stmt(g, s->body);
        kj_codegen_debug_loc(g, s->loc); /* the test is the loop's line */
        g->loop_depth--;
        branch_to(g, cond_bb);
        LLVMPositionBuilderAtEnd(g->b, exit_bb);
        return;
    }
    case KJ_IR_STMT_BREAK:
    case KJ_IR_STMT_CONTINUE:
        if (g->loop_depth == 0) {
            kj_codegen_error(g, "break or continue outside a loop%s", NULL);
            return;
        }
        LLVMBuildBr(g->b, s->kind == KJ_IR_STMT_BREAK ? g->loops[g->loop_depth - 1].break_bb
                                                      : g->loops[g->loop_depth - 1].continue_bb);
        return;
    case KJ_IR_STMT_RETURN:
        if (g->thread_next) { /* a kernel: ends this thread's turn of a THREADS loop */
            LLVMBuildBr(g->b, g->thread_next);
            return;
        }
        if (s->value && g->fn->output_count > 1) {
            /* outputs 1.. from their variables (return (z, n) has set them) */
            LLVMValueRef r = LLVMGetUndef(kj_codegen_outputs_type(g, g->fn, NULL, NULL));
            r = LLVMBuildInsertValue(g->b, r, kj_codegen_expr(g, s->value), 0, "");
            for (int k = 1; k < g->fn->output_count; k++) {
                const KjIrVar *v = g->fn->outputs[k];
                r = LLVMBuildInsertValue(g->b, r, LLVMBuildLoad2(g->b, llty(g, v->type),
                                                                 g->slots[v->id].scalar, ""),
                                         (unsigned)k, "");
            }
            LLVMBuildRet(g->b, r);
        } else if (s->value && g->fn->ret->kind != KJ_TYPE_VOID)
            LLVMBuildRet(g->b, kj_codegen_convert(g, kj_codegen_expr(g, s->value), s->value->type, g->fn->ret));
        else
            LLVMBuildRetVoid(g->b);
        return;
    case KJ_IR_STMT_PARFOR:
        gen_parfor(g, s);
        return;
    case KJ_IR_STMT_THREADS:
        gen_threads(g, s);
        return;
    default:
        kj_unreachable();
    }
}

/* ============================================================ functions */

/* The impl's parameters: each IR parameter (an array as data, shape[ndim],
 * strides[ndim]), then the target's hidden ones (cpu kernels: ctx and
 * threadIdx.x/y/z; cpu vectorized kernels: the [begin, end) range). */
static LLVMTypeRef impl_type(Gen *g, const KjIrFunction *fn)
{
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)kj_codegen_impl_arg_capacity(fn));
    int n = kj_codegen_param_types(g, fn, NULL, ps);
    if (g->target->hidden_params)
        n += g->target->hidden_params(g, fn, ps + n);
    n += kj_codegen_check_params(g, ps + n);
    LLVMTypeRef ret = fn->kind == KJ_IR_FN_KERNEL || fn->kind == KJ_IR_FN_VEC_KERNEL ? g->t_void : llty(g, fn->ret);
    if (fn->output_count > 1) /* several outputs: a struct of them, in order */
        ret = kj_codegen_outputs_type(g, fn, NULL, NULL);
    LLVMTypeRef type = LLVMFunctionType(ret, ps, (unsigned)n, 0);
    free(ps);
    return type;
}

/* A PLAIN function a pass made for several functions to call (KjIrFunction.
 * noinline): never inlined, and its arrays' data pointers nocapture (no kjit
 * function can keep an array it is given), so that a caller's local array it
 * is given stays a local that nothing else can address: LLVM's alias analysis
 * holds an array whose address escapes to a call as one any pointer may
 * reach, and then versions the caller's vectorised loops for overlaps. */
static void keep_out_of_line(Gen *g, const KjIrFunction *fn, LLVMValueRef impl)
{
    kj_codegen_add_fn_attr(g, impl, "noinline");
    unsigned p = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        if (is_array(t)) {
            kj_codegen_add_param_attr(g, impl, p, "nocapture", 0);
            p += 1 + 2 * (unsigned)t->ndim;
        } else {
            p++;
        }
    }
}

static void declare_impl(Gen *g, KjIrFunction *fn)
{
    FnInfo *info = &g->fns[g->fn_count++];
    info->ir = fn;
    info->impl_type = impl_type(g, fn);
    char name[512];
    snprintf(name, sizeof name, "%s__impl", fn->symbol);
    info->impl = LLVMAddFunction(g->mod, name, info->impl_type);
    LLVMSetLinkage(info->impl, LLVMInternalLinkage);
    kj_codegen_set_common_attrs(g, info->impl);
    /* Scalar bodies of vectorized functions and kernel bodies are inlined into
     * their loops and entry points; that is what lets the loop vectoriser see
     * the whole element computation.  Plain functions are left to the inliner. */
    if (fn->kind != KJ_IR_FN_PLAIN)
        kj_codegen_add_fn_attr(g, info->impl, "alwaysinline");
    else if (fn->noinline)
        keep_out_of_line(g, fn, info->impl);
}

static void define_impl(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    g->fn = fn;
    g->llfn = info->impl;
    g->loop_depth = 0;
    g->thread_ctx = g->shared_base = g->launch_scratch = g->range_begin = g->range_end = NULL;
    g->thread_next = NULL;
    g->threads_stopped = g->threads_any_stopped = NULL;
    g->cancel_fn = NULL;
    g->cancel_bail_bb = NULL;
    g->shared_offset = 0;
    memset(g->sreg, 0, sizeof g->sreg);

    int max_id = -1;
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        if (v->id > max_id)
            max_id = v->id;
    }
    for (int i = 0; i < fn->param_count; i++)
        if (fn->params[i]->id > max_id)
            max_id = fn->params[i]->id;
    g->slot_count = max_id + 1;
    g->slots = kj_xcalloc((size_t)g->slot_count + 1, sizeof(VarSlot));

    kj_codegen_debug_function(g, g->llfn, fn->name, fn->loc);
    g->entry_bb = new_block(g, "entry");
    LLVMBasicBlockRef start = new_block(g, "start");
    LLVMPositionBuilderAtEnd(g->b, g->entry_bb);
    LLVMBuildBr(g->b, start);
    LLVMPositionBuilderBefore(g->b, LLVMGetBasicBlockTerminator(g->entry_bb));

    /* Slots for every variable; scalars start at zero so that no read sees undef. */
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        VarSlot *s = &g->slots[v->id];
        if (is_array(v->type)) {
            s->array.data = LLVMBuildAlloca(g->b, g->t_ptr, v->name);
            LLVMBuildStore(g->b, LLVMConstNull(g->t_ptr), s->array.data);
            for (int k = 0; k < v->type->ndim; k++) {
                s->array.shape[k] = LLVMBuildAlloca(g->b, g->t_i64, "shape");
                s->array.strides[k] = LLVMBuildAlloca(g->b, g->t_i64, "stride");
                LLVMBuildStore(g->b, const_i64(g, 0), s->array.shape[k]);
                LLVMBuildStore(g->b, const_i64(g, 0), s->array.strides[k]);
            }
        } else if (v->type->kind != KJ_TYPE_VOID) {
            s->scalar = LLVMBuildAlloca(g->b, llty(g, v->type), v->name);
            LLVMBuildStore(g->b, zero_of(g, v->type), s->scalar);
        }
    }
    unsigned p = 0;
    for (int i = 0; i < fn->param_count; i++) {
        KjIrVar *v = fn->params[i];
        VarSlot *s = &g->slots[v->id];
        if (is_array(v->type)) {
            if (!s->array.data) {
                s->array.data = LLVMBuildAlloca(g->b, g->t_ptr, v->name);
                for (int k = 0; k < v->type->ndim; k++) {
                    s->array.shape[k] = LLVMBuildAlloca(g->b, g->t_i64, "shape");
                    s->array.strides[k] = LLVMBuildAlloca(g->b, g->t_i64, "stride");
                }
            }
            p = kj_codegen_bind_array_param(g, p, &s->array, v->type->ndim);
        } else {
            if (!s->scalar)
                s->scalar = LLVMBuildAlloca(g->b, llty(g, v->type), v->name);
            LLVMBuildStore(g->b, LLVMGetParam(g->llfn, p++), s->scalar);
        }
    }
    if (g->target->bind_hidden_params)
        g->target->bind_hidden_params(g, fn, p);
    LLVMTypeRef hidden[8];
    kj_codegen_check_bind(g, p + (g->target->hidden_params ? (unsigned)g->target->hidden_params(g, fn, hidden) : 0));

    LLVMPositionBuilderAtEnd(g->b, start);
    gen_stmt(g, fn->body);
    if (block_open(g)) {
        LLVMTypeRef rt = LLVMGetReturnType(info->impl_type);
        if (rt == g->t_void)
            LLVMBuildRetVoid(g->b);
        else /* the checker proves every path returns; this block is dead */
            LLVMBuildRet(g->b, LLVMConstNull(rt));
    }
    if (g->target->finish_impl)
        g->target->finish_impl(g, fn);
    kj_codegen_check_shared(g, fn);
    free(g->slots);
    g->slots = NULL;
}

/* ============================================================ reachability */

/* Not ir.c's walk: the order in which this finds functions is their order
 * in the module, and it meets a store's value before its array and indices
 * (the walk has them the other way round), so going through the walk would
 * reorder the functions of `a[f(i)] = g(i)` in the LLVM it emits. */

static void mark_expr(KjIrFunction **seen, int *count, int cap, KjIrExpr *e);
static void mark_fn(KjIrFunction **seen, int *count, int cap, KjIrFunction *fn);

static void mark_stmt(KjIrFunction **seen, int *count, int cap, KjIrStmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->stmts.count; i++)
        mark_stmt(seen, count, cap, s->stmts.items[i]);
    KjIrExpr *es[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        mark_expr(seen, count, cap, es[i]);
    for (int i = 0; i < s->index_count; i++)
        mark_expr(seen, count, cap, s->indices[i]);
    mark_stmt(seen, count, cap, s->then_stmt);
    mark_stmt(seen, count, cap, s->else_stmt);
    mark_stmt(seen, count, cap, s->body);
}

static void mark_expr(KjIrFunction **seen, int *count, int cap, KjIrExpr *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->arg_count; i++)
        mark_expr(seen, count, cap, e->args[i]);
    if (e->op == KJ_IR_CALL && e->callee)
        mark_fn(seen, count, cap, e->callee);
}

static void mark_fn(KjIrFunction **seen, int *count, int cap, KjIrFunction *fn)
{
    for (int i = 0; i < *count; i++)
        if (seen[i] == fn)
            return;
    if (*count >= cap)
        kj_die("too many functions");
    seen[(*count)++] = fn;
    mark_stmt(seen, count, cap, fn->body);
}

/* ============================================================ the module */

static void init_types(Gen *g)
{
    LLVMContextRef c = g->ctx;
    g->t_void = LLVMVoidTypeInContext(c);
    g->t_i1 = LLVMInt1TypeInContext(c);
    g->t_i8 = LLVMInt8TypeInContext(c);
    g->t_i16 = LLVMInt16TypeInContext(c);
    g->t_i32 = LLVMInt32TypeInContext(c);
    g->t_i64 = LLVMInt64TypeInContext(c);
    g->t_f32 = LLVMFloatTypeInContext(c);
    g->t_f64 = LLVMDoubleTypeInContext(c);
    g->t_f16 = LLVMHalfTypeInContext(c);
    g->t_bf16 = LLVMBFloatTypeInContext(c);
    g->t_ptr = LLVMPointerTypeInContext(c, 0);
    g->t_c64 = LLVMStructTypeInContext(c, (LLVMTypeRef[]){g->t_f32, g->t_f32}, 2, 0);
    g->t_c128 = LLVMStructTypeInContext(c, (LLVMTypeRef[]){g->t_f64, g->t_f64}, 2, 0);
    LLVMTypeRef dims = LLVMArrayType2(g->t_i64, KJ_MAX_DIMS);
    g->t_desc = LLVMStructCreateNamed(c, "KjArrayDesc");
    LLVMStructSetBody(g->t_desc, (LLVMTypeRef[]){g->t_ptr, dims, dims}, 3, 0);
    LLVMTypeRef three = LLVMArrayType2(g->t_i32, 3);
    g->t_thread_ctx = LLVMStructCreateNamed(c, "KjThreadCtx");
    kj_codegen_check_types(g);
    LLVMStructSetBody(g->t_thread_ctx, (LLVMTypeRef[]){three, three, three, three, g->t_ptr, g->t_ptr, g->t_ptr,
                                                       g->t_ptr, g->t_ptr, g->t_i64, g->t_ptr}, 11, 0);
}

LLVMModuleRef kj_codegen_module(const KjTarget *target, LLVMContextRef context, LLVMTargetMachineRef machine, KjIrModule *module,
                                KjIrFunction **roots, int root_count, const KjCodegenOptions *options,
                                char **error)
{
    Gen gen = {0}, *g = &gen;
    g->ctx = context;
    g->options = options;
    g->target = target;
    g->const_array_bytes = module->const_array_bytes;
    g->mod = LLVMModuleCreateWithNameInContext("kjit", context);
    g->b = LLVMCreateBuilderInContext(context);
    init_types(g);

    char *triple = LLVMGetTargetMachineTriple(machine);
    LLVMSetTarget(g->mod, triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(machine);
    LLVMSetModuleDataLayout(g->mod, layout);
    LLVMDisposeTargetData(layout);
    char *cpu = LLVMGetTargetMachineCPU(machine);
    char *features = LLVMGetTargetMachineFeatureString(machine);
    g->cpu_name = cpu;
    g->cpu_features = features;
    if (g->target->setup_module)
        g->target->setup_module(g, triple);

    kj_codegen_debug_begin(g, root_count > 0 ? roots[0]->loc.src : NULL);
    int cap = module->functions.count + root_count + 1;
    KjIrFunction **reach = kj_xcalloc((size_t)cap, sizeof *reach);
    int reach_count = 0;
    for (int i = 0; i < root_count; i++) {
        mark_fn(reach, &reach_count, cap, roots[i]);
        if (kj_codegen_uses_split(g, roots[i]))
            mark_fn(reach, &reach_count, cap, roots[i]->split);
    }
    g->fns = kj_xcalloc((size_t)reach_count + 1, sizeof(FnInfo));
    for (int i = 0; i < reach_count; i++)
        declare_impl(g, reach[i]);
    for (int i = 0; i < g->fn_count && !g->error; i++)
        define_impl(g, &g->fns[i]);
    for (int i = 0; i < root_count && !g->error; i++)
        g->target->emit_entries(g, kj_codegen_fn_info(g, roots[i]));

    if (g->used_count > 0) {
        LLVMTypeRef at = LLVMArrayType2(g->t_ptr, (uint64_t)g->used_count);
        LLVMValueRef used = LLVMAddGlobal(g->mod, at, "llvm.compiler.used");
        LLVMSetLinkage(used, LLVMAppendingLinkage);
        LLVMSetSection(used, "llvm.metadata");
        LLVMSetInitializer(used, LLVMConstArray2(g->t_ptr, g->used, (uint64_t)g->used_count));
    }
    free(g->used);
    kj_codegen_debug_end(g);

    if (!g->error && options->verify) {
        char *message = NULL;
        if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &message)) {
            kj_codegen_error(g, "LLVM verifier: %s", message);
        }
        LLVMDisposeMessage(message);
    }

    LLVMDisposeBuilder(g->b);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    free(reach);
    free(g->fns);
    if (g->error) {
        LLVMDisposeModule(g->mod);
        if (error)
            *error = g->error;
        else
            free(g->error);
        return NULL;
    }
    return g->mod;
}

/*
 * The lean pipeline of a module whose roots are all reduce.c's kernels
 * (KjIrFunction.unchecked), at opt_level 2 and 3.  Those kernels are
 * generated code of one known shape: loops over the steps of a block, the
 * lanes' loops that the loop vectoriser makes whole vectors of (cpu), the
 * copies their `unroll` asks for (cuda), a tree.  -O3's pipeline spends
 * most of their compile time in passes that find nothing in them (its
 * InstCombine alone ran eight times, 40% of the PTX compile of
 * examples/reduce.kern); this one runs what their code needs: scalars out
 * of memory, their loops in form, the lanes' loops vectorised, the
 * requested copies made, the lanes' array kept in registers across the
 * steps (licm, then sroa, after the vectoriser).  No pass here changes an
 * operation or its order that -O3 keeps, so the results are the same bits
 * (a kernel's answer never depends on the pipeline: no fast-math flags);
 * KJIT_REDUCE_O3=1 (kj_reduce_knobs) gives -O3's pipeline back, for
 * measuring.
 */
#define INSTCOMBINE "instcombine<no-verify-fixpoint>"
static const char lean_pipeline[] =
    "cgscc(inline),function(sroa,early-cse," INSTCOMBINE ",simplifycfg,"
    "loop-mssa(loop-rotate,licm),loop(indvars),loop-vectorize,loop-unroll," INSTCOMBINE
    ",simplifycfg,loop-mssa(licm),sroa," INSTCOMBINE "),globaldce";
#undef INSTCOMBINE

bool kj_codegen_lean_roots(KjIrFunction *const *roots, int root_count, int opt_level)
{
    if (opt_level < 2 || root_count < 1 || kj_reduce_knobs().o3)
        return false;
    for (int i = 0; i < root_count; i++)
        if (!roots[i]->unchecked)
            return false;
    return true;
}

/*
 * After the passes, on x86: a part of a vector taken as an integer of the
 * vector's bits, `extractelement (bitcast <N x T> v to <M x iW>), c` whose
 * value is only bitcast back to <N/M x T> (or to T), is that part of v as a
 * shuffle (or an element): SROA and instcombine leave the first form where a
 * stack array's vector halves are read (the block sum's tree in registers,
 * impl_owns_shared in target_cpu.c), and LLVM 19's x86 back end moves each
 * such integer through general registers, twenty instructions a tree where
 * the shuffle is one.  The same bits: on a little-endian machine part c of
 * the integers holds elements c * N/M to (c + 1) * N/M - 1.
 */
static void halves_as_shuffles(LLVMModuleRef mod)
{
    LLVMContextRef c = LLVMGetModuleContext(mod);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
            LLVMValueRef next;
            for (LLVMValueRef use = LLVMGetFirstInstruction(bb); use; use = next) {
                next = LLVMGetNextInstruction(use);
                /* use = bitcast (extractelement (bitcast v to <M x iW>), k) to <K x T> or T */
                if (LLVMGetInstructionOpcode(use) != LLVMBitCast)
                    continue;
                LLVMValueRef part = LLVMGetOperand(use, 0);
                if (!LLVMIsAExtractElementInst(part) || !LLVMIsAConstantInt(LLVMGetOperand(part, 1)))
                    continue;
                LLVMValueRef whole = LLVMGetOperand(part, 0);
                if (!LLVMIsABitCastInst(whole))
                    continue;
                LLVMValueRef v = LLVMGetOperand(whole, 0);
                LLVMTypeRef vt = LLVMTypeOf(v), wt = LLVMTypeOf(whole), ut = LLVMTypeOf(use);
                if (LLVMGetTypeKind(vt) != LLVMVectorTypeKind || LLVMGetTypeKind(wt) != LLVMVectorTypeKind)
                    continue;
                LLVMTypeRef elem = LLVMGetElementType(vt);
                unsigned n = LLVMGetVectorSize(vt), m = LLVMGetVectorSize(wt);
                unsigned k = (unsigned)LLVMConstIntGetZExtValue(LLVMGetOperand(part, 1));
                if (m == 0 || n % m != 0 || k >= m || n / m > 64)
                    continue;
                unsigned per = n / m;
                bool as_vector = LLVMGetTypeKind(ut) == LLVMVectorTypeKind && LLVMGetVectorSize(ut) == per &&
                                 LLVMGetElementType(ut) == elem;
                bool as_element = per == 1 && ut == elem;
                if (!as_vector && !as_element)
                    continue;
                LLVMPositionBuilderBefore(b, use);
                LLVMValueRef made;
                if (as_element) {
                    made = LLVMBuildExtractElement(b, v, LLVMConstInt(i32, k, 0), "");
                } else {
                    LLVMValueRef lanes[64];
                    for (unsigned i = 0; i < per; i++)
                        lanes[i] = LLVMConstInt(i32, k * per + i, 0);
                    made = LLVMBuildShuffleVector(b, v, LLVMGetPoison(vt), LLVMConstVector(lanes, per), "");
                }
                LLVMReplaceAllUsesWith(use, made);
                LLVMInstructionEraseFromParent(use);
                if (!LLVMGetFirstUse(part))
                    LLVMInstructionEraseFromParent(part);
                if (!LLVMGetFirstUse(whole))
                    LLVMInstructionEraseFromParent(whole);
            }
        }
    LLVMDisposeBuilder(b);
}

bool kj_codegen_optimize(LLVMModuleRef mod, LLVMTargetMachineRef machine, int opt_level, bool lean,
                         char **error)
{
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(opts, opt_level >= 2);
    LLVMPassBuilderOptionsSetLoopInterleaving(opts, opt_level >= 2);
    LLVMErrorRef err = LLVMRunPasses(mod, lean ? lean_pipeline : pipeline, machine, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (err) {
        char *msg = LLVMGetErrorMessage(err);
        if (error)
            *error = kj_xstrdup(msg);
        LLVMDisposeErrorMessage(msg);
        return false;
    }
    char *triple = LLVMGetTargetMachineTriple(machine);
    if (strncmp(triple, "x86_64", 6) == 0)
        halves_as_shuffles(mod);
    LLVMDisposeMessage(triple);
    return true;
}
