/*
 * codegen_simd_threads.c: the regions of a kernel's split form on SIMD lanes.
 *
 * barrier_split.c cuts a kernel with syncthreads() into THREADS statements,
 * loops over the block's threads between its barriers.  Between two
 * barriers the threads of a block are as free as those of a kernel without
 * barriers, which codegen_simd.c runs W at a time on the lanes of the
 * host's vector registers; this file does the same for each region.
 *
 * Needs: a THREADS statement of a split form whose impl is being lowered
 * (codegen_llvm.c's gen_threads), cpu_simd on; in checked mode the failures
 * of its lanes are kept and published per chunk (codegen_simd_check.c).
 * Gives: the region as loops over threadIdx.z and .y and, inside them,
 * threadIdx.x in chunks of W lanes, each chunk the region's statements as
 * codegen_simd.c lowers a kernel's body: the whole chunks with every lane
 * on (their masks constants that fold away), then the rest under a mask.
 * Or false, with nothing emitted, when codegen_simd.c refuses something in
 * the region (kj_simd_region_lanes): gen_threads then emits its scalar loop.
 *
 * Which values vary is the uniformity of the whole split form with
 * threadIdx.x its one varying source (y and z are the same for the lanes of
 * a chunk) and local() one array for the block (the split form's per-thread
 * arrays, made before its regions): their element `thread.linear`,
 * x + blockDim.x * (y + blockDim.y * z), is contiguous in x, so a value that
 * crosses a barrier travels as one vector load and store a chunk.  A
 * uniform variable that crosses a barrier stays in its scalar slot: the
 * split form's copies of it (`s.region`) are assigned uniform values only.
 * The chunk's lanes run each statement in turn where the scalar loop ran
 * each thread's statements in turn: within a region no thread may read what
 * another writes (that needs a barrier), so only atomics' order between
 * statements differs, as it does for a kernel without barriers on lanes.
 */
#include "codegen_simd.h"

#include <stdlib.h>

/* A loop of an i32 counter from start while below stop; close_loop steps
 * it.  The builder is left in the body. */
typedef struct CountLoop {
    LLVMValueRef counter;
    LLVMBasicBlockRef cond, exit;
} CountLoop;

static CountLoop open_loop(Gen *g, LLVMValueRef start, LLVMValueRef stop, const char *name)
{
    CountLoop l = {kj_codegen_alloca_in_entry(g, g->t_i32, name), new_block(g, "threads.cond"),
                   new_block(g, "threads.exit")};
    LLVMBasicBlockRef body = new_block(g, "threads.body");
    LLVMBuildStore(g->b, start, l.counter);
    LLVMBuildBr(g->b, l.cond);
    LLVMPositionBuilderAtEnd(g->b, l.cond);
    LLVMValueRef i = LLVMBuildLoad2(g->b, g->t_i32, l.counter, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, i, stop, ""), body, l.exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    return l;
}

static LLVMValueRef close_loop(Gen *g, CountLoop l, int step)
{
    LLVMValueRef i = LLVMBuildLoad2(g->b, g->t_i32, l.counter, "");
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, i, const_i32(g, step), ""), l.counter);
    LLVMValueRef back_edge = LLVMBuildBr(g->b, l.cond);
    LLVMPositionBuilderAtEnd(g->b, l.exit);
    return back_edge;
}

/* One chunk: the region's statements for threadIdx.x in [base, base + W),
 * the lanes from `count` on off (count NULL: all on).  Returns the mask it
 * starts with. */
static LLVMValueRef emit_chunk(Simd *s, KjIrStmt *threads, LLVMValueRef base, LLVMValueRef count,
                               int64_t shared_offset)
{
    Gen *g = s->g;
    /* each copy of the region lays out the same shared() arrays */
    g->shared_offset = shared_offset;
    s->lane_base = base;
    s->mask = count ? LLVMBuildICmp(s->b, LLVMIntULT, iota(s, g->t_i32), splat(s, count), "lanes")
                    : splat_const(s, LLVMConstInt(g->t_i1, 1, 0));
    s->exit_bb = new_block(g, "chunk.done");
    s->skip_depth = 0;
    s->loop_depth = 0;
    s->full_copies = 0;
    s->plain_loop = NULL;
    s->plain = false;
    kj_simd_push_skip(s, s->exit_bb);
    if (s->returned)
        store_mask(s, s->returned, no_lanes(s));
    LLVMValueRef entry_mask = s->mask;
    kj_simd_checks_chunk_start(s); /* checked: less the threads stopped before */
    kj_simd_stmt(s, threads->body);
    if (block_open(s))
        LLVMBuildBr(s->b, s->exit_bb);
    LLVMPositionBuilderAtEnd(s->b, s->exit_bb);
    kj_simd_checks_publish(s);
    return entry_mask;
}

/* The vector slots of the split form's varying variables, zero at the
 * region's start (each thread assigns its private variables before reading
 * them; zero keeps undefined lanes out of the blends). */
static void make_vector_slots(Simd *s)
{
    Gen *g = s->g;
    s->vslots = kj_xcalloc((size_t)g->slot_count + 1, sizeof *s->vslots);
    for (int i = 0; i < s->fn->locals.count; i++) {
        KjIrVar *v = s->fn->locals.items[i];
        if (v->id < 0 || v->id >= g->slot_count || is_array(v->type) || v->type->kind == KJ_TYPE_VOID ||
            !kj_uniform_var_varying(s->u, v))
            continue;
        s->vslots[v->id] = entry_alloca(s, vty(s, v->type), v->name);
        LLVMBuildStore(s->b, LLVMConstNull(vty(s, v->type)), s->vslots[v->id]);
    }
}

/* Array variables must be uniform here as in a kernel on lanes; in a split
 * form they are (parameters, shared() arrays, the per-thread arrays). */
static bool arrays_uniform(Simd *s)
{
    for (int i = 0; i < s->fn->locals.count; i++) {
        const KjIrVar *v = s->fn->locals.items[i];
        if (is_array(v->type) && kj_uniform_var_varying(s->u, v))
            return false;
    }
    return true;
}

/*
 * The SIMD variants of the functions the region calls with varying
 * arguments.  Defining one takes over the lowering state of the split
 * impl, which is put back afterwards.
 */
static void define_callees(Simd *s, Pending *pending, int *count)
{
    Gen *g = s->g;
    if (*count == 0)
        return;
    KjIrFunction *fn = g->fn;
    LLVMValueRef llfn = g->llfn, thread_ctx = g->thread_ctx, shared_base = g->shared_base;
    LLVMValueRef range_begin = g->range_begin, range_end = g->range_end;
    LLVMBasicBlockRef entry_bb = g->entry_bb, at = LLVMGetInsertBlock(g->b);
    VarSlot *slots = g->slots;
    int slot_count = g->slot_count, loop_depth = g->loop_depth;
    int64_t shared_offset = g->shared_offset;
    LLVMValueRef sreg[KJ_SREG_COUNT];
    memcpy(sreg, g->sreg, sizeof sreg);
    LLVMMetadataRef di_scope = g->di_scope;
    LLVMMetadataRef debug_loc = LLVMGetCurrentDebugLocation2(g->b);

    kj_simd_define_pending(g, s->lanes, pending, count);

    g->fn = fn;
    g->llfn = llfn;
    g->thread_ctx = thread_ctx;
    g->shared_base = shared_base;
    g->range_begin = range_begin;
    g->range_end = range_end;
    g->entry_bb = entry_bb;
    g->slots = slots;
    g->slot_count = slot_count;
    g->loop_depth = loop_depth;
    g->shared_offset = shared_offset;
    memcpy(g->sreg, sreg, sizeof sreg);
    g->di_scope = di_scope;
    LLVMPositionBuilderAtEnd(g->b, at);
    LLVMSetCurrentDebugLocation2(g->b, debug_loc);
}

static bool const_int_of(LLVMValueRef v, int64_t *out)
{
    if (!v || !LLVMIsAConstantInt(v))
        return false;
    *out = LLVMConstIntGetSExtValue(v);
    return true;
}

/*
 * A region whose threads along x are known when the code is made (blockDim.x
 * a constant, the range's bounds constants) as one loop of a constant count
 * over its whole chunks, then its last chunk with a constant base and a
 * constant mask, or none when the chunks fill the range (a 16x16 block's
 * rows on 4 or 8 lanes).  The code is the same size for any block: one copy
 * of the region for the whole chunks and at most one for the rest (writing
 * each chunk out made code, and compile time, grow with the block: 28 s for
 * an n-body program at 128 threads; LLVM's unroller still writes out the
 * loops that are worth it, but not a region's copy that seldom runs,
 * KjIrStmt.unroll 1).  A block of one row and one layer has
 * threadIdx.y and .z the constant 0; other blocks loop over them as
 * chunk_loops does (whose rest under a mask of unknown lanes, made for
 * every row, doubled the masked code of matmul's 16x16 shape).  False,
 * with nothing emitted, when the range along x is not known.
 */
static bool known_chunks(Simd *s, KjIrStmt *threads, LLVMValueRef first[3], LLVMValueRef stop,
                         LLVMValueRef dims[3], int64_t shared_offset)
{
    Gen *g = s->g;
    int64_t from, to, dy, dz, y0, z0;
    if (!const_int_of(first[0], &from) || !const_int_of(stop, &to))
        return false;
    bool one_row = const_int_of(dims[1], &dy) && const_int_of(dims[2], &dz) && dy == 1 && dz == 1 &&
                   const_int_of(first[1], &y0) && const_int_of(first[2], &z0) && y0 == 0 && z0 == 0;
    /* KJIT_SIMD_ROW_CHUNKS=0: blocks of one row only, not the seldom-run copy */
    if (simd_switched_off(KJ_SIMD_ROW_CHUNKS) && (!one_row || threads->unroll == 1))
        return false;
    if (to <= from)
        return true; /* no thread runs it */
    CountLoop z = {0}, y = {0};
    if (one_row) {
        g->sreg[KJ_SREG_TID_Z] = const_i32(g, 0);
        g->sreg[KJ_SREG_TID_Y] = const_i32(g, 0);
    } else {
        z = open_loop(g, first[2], dims[2], "thread.z");
        g->sreg[KJ_SREG_TID_Z] = LLVMBuildLoad2(g->b, g->t_i32, z.counter, "tid.z");
        y = open_loop(g, first[1], dims[1], "thread.y");
        g->sreg[KJ_SREG_TID_Y] = LLVMBuildLoad2(g->b, g->t_i32, y.counter, "tid.y");
    }
    int64_t whole = (to - from) / s->lanes, rest = from + whole * s->lanes;
    if (whole == 1) {
        emit_chunk(s, threads, const_i32(g, (int32_t)from), NULL, shared_offset);
    } else if (whole > 1) {
        CountLoop x = open_loop(g, const_i32(g, (int32_t)from), const_i32(g, (int32_t)rest), "thread.x");
        emit_chunk(s, threads, LLVMBuildLoad2(g->b, g->t_i32, x.counter, "tid.x"), NULL, shared_offset);
        LLVMValueRef back_edge = close_loop(g, x, s->lanes);
        if (threads->unroll == 1) /* a copy that seldom runs (KjIrStmt.unroll): one chunk's code */
            kj_codegen_loop_no_unroll(g, back_edge);
    }
    if (rest < to)
        emit_chunk(s, threads, const_i32(g, (int32_t)rest), const_i32(g, (int32_t)(to - rest)), shared_offset);
    if (!one_row) {
        close_loop(g, y, 1);
        close_loop(g, z, 1);
    }
    return true;
}

/* The region as loops over threadIdx.z and .y ([from, dims), from 0 but
 * for kj_codegen_rows_first's one row) and, inside them, threadIdx.x in
 * whole chunks from from[0], then the rest under a mask.  Returns the
 * rest's mask. */
static LLVMValueRef chunk_loops(Simd *s, KjIrStmt *threads, LLVMValueRef from[3], LLVMValueRef stop,
                                LLVMValueRef dims[3], int64_t shared_offset)
{
    Gen *g = s->g;
    int lanes = s->lanes;
    CountLoop z = open_loop(g, from[2], dims[2], "thread.z");
    g->sreg[KJ_SREG_TID_Z] = LLVMBuildLoad2(g->b, g->t_i32, z.counter, "tid.z");
    CountLoop y = open_loop(g, from[1], dims[1], "thread.y");
    g->sreg[KJ_SREG_TID_Y] = LLVMBuildLoad2(g->b, g->t_i32, y.counter, "tid.y");
    LLVMValueRef first = from[0];
    /* whole chunks while x <= stop - W, then the rest (x < stop) */
    LLVMValueRef last = LLVMBuildSub(g->b, stop, const_i32(g, lanes - 1), "");
    LLVMValueRef whole_end =
        LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, stop, first, ""), last, first, "");
    CountLoop x = open_loop(g, first, whole_end, "thread.x");
    emit_chunk(s, threads, LLVMBuildLoad2(g->b, g->t_i32, x.counter, "tid.x"), NULL, shared_offset);
    close_loop(g, x, lanes);
    LLVMValueRef rest_first = LLVMBuildLoad2(g->b, g->t_i32, x.counter, "tid.x");
    LLVMBasicBlockRef rest = new_block(g, "threads.rest"), done = new_block(g, "threads.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, rest_first, stop, ""), rest, done);
    LLVMPositionBuilderAtEnd(g->b, rest);
    /* the rest's mask is left in the open, as the chunk function's is */
    LLVMValueRef tail_mask = emit_chunk(s, threads, rest_first, LLVMBuildSub(g->b, stop, rest_first, ""),
                                        shared_offset);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
    close_loop(g, y, 1);
    close_loop(g, z, 1);
    return tail_mask;
}

bool kj_simd_threads(Gen *g, KjIrStmt *threads, LLVMValueRef first[3], LLVMValueRef stop, LLVMValueRef dims[3])
{
    Pending pending[SIMD_MAX_PENDING];
    int pending_count = 0;
    Simd simd = {.g = g, .b = g->b, .role = ROLE_KERNEL, .fn = g->fn, .pending = pending,
                 .pending_count = &pending_count};
    Simd *s = &simd;
    KjUniformSources sources = {.sregs = 1u << KJ_SREG_TID_X, .block_locals = true};
    s->u = kj_uniform_analyze(&s->arena, s->fn, sources);
    s->lanes = kj_simd_region_lanes(g, threads->body, s->u);
    if (!s->lanes || !arrays_uniform(s)) {
        kj_arena_free(&s->arena);
        return false;
    }
    kj_simd_mask_types(s);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(g->b);
    make_vector_slots(s);
    if (kj_uniform_divergent_return(s->u))
        s->returned = mask_slot(s, "returned");
    /* checked mode: a failing lane ends its thread's turn, and later
     * regions skip it, as the scalar loops' kj_codegen_check_thread_bail */
    SimdChecks checks;
    kj_simd_checks_begin(s, &checks, g->check_record, true);

    LLVMValueRef saved[3];
    for (int k = 0; k < 3; k++)
        saved[k] = g->sreg[KJ_SREG_TID_X + k];
    int loops = g->loop_depth;
    g->loop_depth = 0;
    int64_t shared_offset = g->shared_offset;
    LLVMValueRef tail_mask = NULL;
    int64_t end;
    if (const_int_of(stop, &end) && end > 0)
        s->tid_x_end = end; /* for the ranges of codegen_simd_range.c */
    /* checked mode: the region twice, as its masks start with every lane
     * (constants that fold away) while no thread of the block has stopped,
     * and as they leave the stopped threads out once one has */
    LLVMBasicBlockRef stopped = NULL, done = NULL;
    if (s->checks) {
        LLVMBasicBlockRef clean = new_block(g, "threads.clean");
        stopped = new_block(g, "threads.stopped");
        done = new_block(g, "threads.done");
        LLVMBuildCondBr(g->b, kj_codegen_check_any_stopped(g), stopped, clean);
        LLVMPositionBuilderAtEnd(g->b, clean);
    }
    for (int copy = s->checks ? 0 : 1; copy < 2; copy++) {
        checks.stopped_before = copy == 1;
        if (!known_chunks(s, threads, first, stop, dims, shared_offset))
            tail_mask = chunk_loops(s, threads, first, stop, dims, shared_offset);
        if (done) {
            LLVMBuildBr(g->b, done);
            LLVMPositionBuilderAtEnd(g->b, copy == 0 ? stopped : done);
        }
    }
    for (int k = 0; k < 3; k++)
        g->sreg[KJ_SREG_TID_X + k] = saved[k];
    g->loop_depth = loops;

    if (wide_masks(s)) { /* (moves the builder) */
        LLVMBasicBlockRef after = LLVMGetInsertBlock(g->b);
        kj_simd_widen_crossing_masks(s, tail_mask, from);
        LLVMPositionBuilderAtEnd(g->b, after);
    }
    kj_simd_checks_end(s, &checks);
    define_callees(s, pending, &pending_count);
    free(s->vslots);
    kj_arena_free(&s->arena);
    return true;
}
