/*
 * codegen_simd_check.c: checked mode (KjCodegenOptions.checks) on SIMD
 * lanes, for a kernel's chunks and a split form's regions.
 *
 * The scalar code leaves a thread at its first failed check and claims the
 * call's record at once (codegen_check.c).  On lanes the threads of a chunk
 * run side by side, statement by statement, so the first lane to fail in
 * time need not be the first thread in the fibers' order.  Here a failing
 * lane leaves the mask as a return does: its site, kind and operands go into
 * vectors of the chunk's own (one element per lane), the lane joins the
 * chunk's `failed` lanes, and the other lanes go on, each stopped by its own
 * checks.  At the chunk's end the lowest failed lane, the first of them in
 * the threads' order, claims the record as the scalar thread would have; in
 * a split form's region the failed lanes also set their threads' stopped
 * flags, which later regions' chunks take out of their masks.  So the same
 * thread wins the record, with the same site and operands, and the same
 * work is done, as on fibers and in the scalar loops.
 *
 * A check of a uniform value (the shared lowering's, through Gen.lane_check)
 * fails every running lane at once and leaves for where no lane is left: the
 * skip target, or, inside a part of an expression under a mask of its own
 * (lanes_under in codegen_simd_expr.c), that part's way out (Simd.escape), so
 * that the access it guards never runs.  After a lane fails in such a part,
 * the enclosing statement's lanes are its mask less the failed ones
 * (kj_simd_drop_failed).
 *
 * A statement whose checks are all indices computed from variables is
 * tested ahead (kj_simd_precheck, codegen_simd_expr.c): when every lane
 * passes, codegen_simd.c emits it as unchecked code (Simd.proven), and the
 * functions here do nothing; else as above.
 *
 * Needs: checks.c's sites; kj_simd_lanes and kj_simd_region_lanes refuse a
 * site in a function called from the lanes (its SIMD variant has no record
 * of its own), so failures happen in the root's or the region's own code.
 */
#include "codegen_simd.h"

#include <string.h>

static LLVMValueRef splat_i32(Simd *s, LLVMValueRef v) { return splat(s, v); }

/* The vector slot of a lane's record field, in the entry block. */
static LLVMValueRef lane_slot(Simd *s, LLVMTypeRef elem, const char *name)
{
    return entry_alloca(s, vec_of(s, elem), name);
}

/* The failed lanes so far (a <W x i1>). */
static LLVMValueRef failed_lanes(Simd *s) { return load_mask(s, s->checks->failed); }

LLVMValueRef kj_simd_drop_failed(Simd *s, LLVMValueRef m)
{
    if (!s->checks || s->proven)
        return m;
    return mask_and_not(s, m, s->checks->failed);
}

/* Lanes `bad` (not yet failed) fail check `site`: their record in the
 * chunk's vectors. */
static void record_lanes(Simd *s, LLVMValueRef bad, LLVMValueRef site, LLVMValueRef kind, LLVMValueRef values[3])
{
    SimdChecks *c = s->checks;
    Gen *g = s->g;
    bad = LLVMBuildAnd(s->b, bad, LLVMBuildNot(s->b, failed_lanes(s), ""), "");
    LLVMTypeRef vi32 = vec_of(s, g->t_i32), vi64 = vec_of(s, g->t_i64);
    LLVMBuildStore(s->b, LLVMBuildSelect(s->b, bad, site, LLVMBuildLoad2(s->b, vi32, c->site, ""), ""), c->site);
    LLVMBuildStore(s->b, LLVMBuildSelect(s->b, bad, kind, LLVMBuildLoad2(s->b, vi32, c->kind, ""), ""), c->kind);
    for (int k = 0; k < 3; k++)
        LLVMBuildStore(s->b, LLVMBuildSelect(s->b, bad, values[k], LLVMBuildLoad2(s->b, vi64, c->values[k], ""), ""),
                       c->values[k]);
    add_lanes(s, c->failed, bad);
}

void kj_simd_check_lanes(Simd *s, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef values[3])
{
    if (!site || !s->checks || s->proven)
        return;
    Gen *g = s->g;
    LLVMValueRef mask = s->mask;
    bool top = mask == s->stmt_mask;
    LLVMValueRef bad = LLVMBuildAnd(s->b, mask, LLVMBuildNot(s->b, ok, ""), "check.bad");
    LLVMBasicBlockRef fail = new_block(g, "lanes.check.fail"), go_on = new_block(g, "lanes.check.ok");
    LLVMBuildCondBr(s->b, any_lane(s, bad), fail, go_on);
    LLVMPositionBuilderAtEnd(s->b, fail);
    LLVMValueRef vs[3];
    for (int k = 0; k < 3; k++)
        vs[k] = values[k] ? values[k] : LLVMConstNull(vec_of(s, g->t_i64));
    record_lanes(s, bad, splat_i32(s, const_i32(g, site)), splat_i32(s, const_i32(g, (int32_t)kind)), vs);
    /* the statement's lanes left: with none, on at the skip target */
    LLVMValueRef left = top ? LLVMBuildAnd(s->b, mask, ok, "") : kj_simd_drop_failed(s, s->stmt_mask);
    LLVMBuildCondBr(s->b, any_lane(s, left), go_on, skip_target_of(s));
    LLVMPositionBuilderAtEnd(s->b, go_on);
    s->mask = LLVMBuildAnd(s->b, mask, ok, "checked");
    if (top)
        s->stmt_mask = s->mask;
}

/* In the block where every running lane has failed (its record written):
 * leaves for the escape or the skip target, or, inside a part of an
 * expression with lanes of the statement left, goes on at go_on (from
 * `from`, where the check passed) with no lane running. */
static void all_failed(Simd *s, LLVMBasicBlockRef from, LLVMBasicBlockRef go_on, LLVMValueRef mask)
{
    if (s->escape) {
        LLVMBuildBr(s->b, s->escape);
    } else if (mask == s->stmt_mask) {
        LLVMBuildBr(s->b, skip_target_of(s));
    } else {
        LLVMBasicBlockRef cont = new_block(s->g, "lanes.none");
        LLVMBuildCondBr(s->b, any_lane(s, kj_simd_drop_failed(s, s->stmt_mask)), cont, skip_target_of(s));
        LLVMPositionBuilderAtEnd(s->b, cont);
        LLVMBuildBr(s->b, go_on);
        LLVMPositionBuilderAtEnd(s->b, go_on);
        LLVMValueRef m = LLVMBuildPhi(s->b, s->mask_type, "lanes");
        LLVMAddIncoming(m, (LLVMValueRef[]){mask, no_lanes(s)}, (LLVMBasicBlockRef[]){from, cont}, 2);
        s->mask = m;
        return;
    }
    LLVMPositionBuilderAtEnd(s->b, go_on);
}

/* Gen.lane_check: a check of uniform values fails every running lane. */
static void uniform_check(void *data, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef values[3])
{
    Simd *s = data;
    Gen *g = s->g;
    if (s->proven || (LLVMIsAConstantInt(ok) && LLVMConstIntGetZExtValue(ok)))
        return;
    LLVMValueRef mask = s->mask;
    LLVMBasicBlockRef from = LLVMGetInsertBlock(s->b);
    LLVMBasicBlockRef fail = new_block(g, "uniform.check.fail"), go_on = new_block(g, "uniform.check.ok");
    LLVMBuildCondBr(s->b, ok, go_on, fail);
    LLVMPositionBuilderAtEnd(s->b, fail);
    LLVMValueRef vs[3];
    for (int k = 0; k < 3; k++)
        vs[k] = splat(s, values[k]);
    record_lanes(s, mask, splat_i32(s, const_i32(g, site)), splat_i32(s, const_i32(g, (int32_t)kind)), vs);
    all_failed(s, from, go_on, mask);
}

/* Gen.lane_call_failed: an impl called with uniform arguments failed (its
 * record is the chunk's own, Simd.checks->own_record): every running lane
 * fails as it did. */
static void call_failed(void *data, LLVMBasicBlockRef from, LLVMBasicBlockRef go_on)
{
    Simd *s = data;
    Gen *g = s->g;
    SimdChecks *c = s->checks;
    LLVMValueRef site, kind, values[3];
    kj_codegen_check_take(g, c->own_record, &site, &kind, values);
    LLVMBuildStore(s->b, const_i32(g, 0), c->own_state);
    LLVMValueRef vs[3];
    for (int k = 0; k < 3; k++)
        vs[k] = splat(s, values[k]);
    record_lanes(s, s->mask, splat(s, site), splat(s, kind), vs);
    all_failed(s, from, go_on, s->mask);
}

void kj_simd_checks_begin(Simd *s, SimdChecks *c, LLVMValueRef record, bool region)
{
    Gen *g = s->g;
    *c = (SimdChecks){.record = record, .region = region, .saved_record = g->check_record,
                      .saved_state = g->check_state, .saved_bail = g->bail_bb,
                      .saved_lane_check = g->lane_check, .saved_call_failed = g->lane_call_failed,
                      .saved_lane_data = g->lane_data, .saved_element = g->element_slot};
    s->checks = NULL;
    if (!g->options->checks)
        return;
    g->element_slot = NULL; /* (an impl's) */
    /* impls called here (their arguments uniform) report to a record of
     * the chunk's own, which call_failed reads back */
    c->own_record = entry_alloca(s, g->t_check_record, "lanes.record");
    c->own_state = entry_alloca(s, g->t_i32, "lanes.state");
    LLVMBuildStore(s->b, LLVMConstNull(g->t_check_record), c->own_record);
    LLVMBuildStore(s->b, const_i32(g, 0), c->own_state);
    g->check_record = c->own_record;
    g->check_state = c->own_state;
    g->bail_bb = NULL;
    if (!record) /* code that cannot fail (a callee, a vectorized kernel) */
        return;
    c->failed = mask_slot(s, "failed.lanes");
    c->site = lane_slot(s, g->t_i32, "failed.site");
    c->kind = lane_slot(s, g->t_i32, "failed.kind");
    for (int k = 0; k < 3; k++)
        c->values[k] = lane_slot(s, g->t_i64, "failed.value");
    g->lane_check = uniform_check;
    g->lane_call_failed = call_failed;
    g->lane_data = s;
    s->checks = c;
}

void kj_simd_checks_end(Simd *s, SimdChecks *c)
{
    Gen *g = s->g;
    g->check_record = c->saved_record;
    g->check_state = c->saved_state;
    g->bail_bb = c->saved_bail;
    g->lane_check = c->saved_lane_check;
    g->lane_call_failed = c->saved_call_failed;
    g->lane_data = c->saved_lane_data;
    g->element_slot = c->saved_element;
    s->checks = NULL;
}

/* The address of the stopped flag of the chunk's lane 0 (a region's). */
static LLVMValueRef first_flag(Simd *s)
{
    Gen *g = s->g;
    LLVMValueRef dx = kj_codegen_read_sreg(g, KJ_SREG_BDIM_X), dy = kj_codegen_read_sreg(g, KJ_SREG_BDIM_Y);
    LLVMValueRef linear = LLVMBuildMul(s->b, g->sreg[KJ_SREG_TID_Z], dy, "");
    linear = LLVMBuildMul(s->b, LLVMBuildAdd(s->b, linear, g->sreg[KJ_SREG_TID_Y], ""), dx, "");
    linear = LLVMBuildZExt(s->b, LLVMBuildAdd(s->b, linear, s->lane_base, ""), g->t_i64, "");
    LLVMTypeRef i8 = LLVMInt8TypeInContext(g->ctx);
    return LLVMBuildInBoundsGEP2(s->b, i8, kj_codegen_check_stopped_flags(g), &linear, 1, "stopped");
}

void kj_simd_checks_chunk_start(Simd *s)
{
    SimdChecks *c = s->checks;
    if (!c)
        return;
    Gen *g = s->g;
    store_mask(s, c->failed, no_lanes(s));
    /* the lanes' records start afresh too: nothing of one chunk's lives on
     * into the next (as SSA values, through loops around regions) */
    LLVMTypeRef vi32 = vec_of(s, g->t_i32), vi64 = vec_of(s, g->t_i64);
    LLVMBuildStore(s->b, LLVMConstNull(vi32), c->site);
    LLVMBuildStore(s->b, LLVMConstNull(vi32), c->kind);
    for (int k = 0; k < 3; k++)
        LLVMBuildStore(s->b, LLVMConstNull(vi64), c->values[k]);
    s->stmt_mask = s->mask;
    if (!c->region)
        return;
    c->flags = first_flag(s);
    if (!c->stopped_before)
        return; /* no thread of the block has stopped (kj_simd_threads' test) */
    /* threads that failed in an earlier region sit this one out */
    LLVMValueRef mask = s->mask;
    LLVMTypeRef bytes = vec_of(s, LLVMInt8TypeInContext(g->ctx));
    LLVMValueRef flags = LLVMBuildLoad2(s->b, bytes, c->flags, "stopped");
    LLVMSetAlignment(flags, 1);
    LLVMValueRef stopped = LLVMBuildICmp(s->b, LLVMIntNE, flags, LLVMConstNull(bytes), "");
    s->mask = LLVMBuildAnd(s->b, mask, LLVMBuildNot(s->b, stopped, ""), "running");
    LLVMBasicBlockRef run = new_block(g, "chunk.run");
    LLVMBuildCondBr(s->b, any_lane(s, s->mask), run, s->exit_bb);
    LLVMPositionBuilderAtEnd(s->b, run);
    s->stmt_mask = s->mask;
}

void kj_simd_checks_publish(Simd *s)
{
    SimdChecks *c = s->checks;
    if (!c)
        return;
    Gen *g = s->g;
    LLVMValueRef failed = failed_lanes(s);
    LLVMTypeRef bits = LLVMIntTypeInContext(g->ctx, (unsigned)s->lanes);
    LLVMValueRef set = LLVMBuildBitCast(s->b, failed, bits, "");
    LLVMBasicBlockRef publish = new_block(g, "lanes.publish"), done = new_block(g, "lanes.published");
    LLVMBuildCondBr(s->b, LLVMBuildICmp(s->b, LLVMIntNE, set, LLVMConstNull(bits), ""), publish, done);
    LLVMPositionBuilderAtEnd(s->b, publish);
    /* the lowest failed lane is the first of them in the threads' order */
    LLVMValueRef args[2] = {set, LLVMConstInt(g->t_i1, 1, 0)};
    LLVMValueRef lane = kj_codegen_call_intrinsic(g, "llvm.cttz", &bits, 1, args, 2);
    lane = s->lanes < 32 ? LLVMBuildZExt(s->b, lane, g->t_i32, "lane") : LLVMBuildTrunc(s->b, lane, g->t_i32, "lane");
    LLVMTypeRef vi32 = vec_of(s, g->t_i32), vi64 = vec_of(s, g->t_i64);
    LLVMValueRef site = LLVMBuildExtractElement(s->b, LLVMBuildLoad2(s->b, vi32, c->site, ""), lane, "site");
    LLVMValueRef kind = LLVMBuildExtractElement(s->b, LLVMBuildLoad2(s->b, vi32, c->kind, ""), lane, "kind");
    LLVMValueRef values[3];
    for (int k = 0; k < 3; k++)
        values[k] = LLVMBuildExtractElement(s->b, LLVMBuildLoad2(s->b, vi64, c->values[k], ""), lane, "");
    LLVMValueRef saved = g->check_record;
    g->check_record = c->record;
    kj_codegen_check_claim(g, site, kind, values, LLVMBuildAdd(s->b, s->lane_base, lane, "thread"), NULL);
    g->check_record = saved;
    if (c->region && c->flags) {
        kj_codegen_check_first_stop(g);
        LLVMTypeRef bytes = vec_of(s, LLVMInt8TypeInContext(g->ctx));
        LLVMValueRef old = LLVMBuildLoad2(s->b, bytes, c->flags, "");
        LLVMSetAlignment(old, 1);
        LLVMValueRef st = LLVMBuildStore(s->b, LLVMBuildOr(s->b, old, LLVMBuildZExt(s->b, failed, bytes, ""), ""),
                                         c->flags);
        LLVMSetAlignment(st, 1);
    }
    LLVMBuildBr(s->b, done);
    LLVMPositionBuilderAtEnd(s->b, done);
}

/* ---- what may fail */

static bool stop_at_site(KjIrWalk *w, const KjIrExpr *e)
{
    (void)w;
    return e->check_site == 0;
}

static KjIrWalkStep stop_at_store_site(KjIrWalk *w, const KjIrStmt *st)
{
    (void)w;
    return st->kind == KJ_IR_STMT_STORE && st->check_site ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

bool kj_simd_expr_may_fail(const Simd *s, const KjIrExpr *e)
{
    if (!s->checks || s->proven || !e)
        return false;
    KjIrWalk w = {.expr = stop_at_site};
    return !kj_ir_walk_expr(&w, e);
}

bool kj_simd_stmt_may_fail(const Simd *s, const KjIrStmt *st)
{
    if (!s->checks || s->proven)
        return false;
    KjIrWalk w = {.stmt = stop_at_store_site, .expr = stop_at_site};
    return !kj_ir_walk_stmt(&w, st);
}

/* ---- the checks of operations on lanes, as codegen_check.c's */

/* The walk's hook: the shared() array that every assignment of var (the
 * data's) makes, or (void *)1 when there is another or they differ. */
typedef struct SharedOf {
    const KjIrVar *var;
    const KjIrExpr *alloc;
} SharedOf;

static KjIrWalkStep note_shared(KjIrWalk *w, const KjIrStmt *st)
{
    SharedOf *o = w->data;
    if (st->kind != KJ_IR_STMT_SET || st->var != o->var)
        return KJ_IR_WALK_ON;
    const KjIrExpr *v = st->value;
    bool same = v->op == KJ_IR_SHARED && (!o->alloc || (o->alloc != (const KjIrExpr *)1 &&
                                                       o->alloc->alloc_ndim == v->alloc_ndim &&
                                                       !memcmp(o->alloc->alloc_shape, v->alloc_shape,
                                                               sizeof v->alloc_shape[0] * (size_t)v->alloc_ndim)));
    o->alloc = same ? v : (const KjIrExpr *)1;
    return KJ_IR_WALK_ON;
}

/* Axis k's extent of the array `array` names when it is a static shared()
 * array, whose shape the code knows (the loaded ArrayVal does not show it
 * in a split form, where the tile is a variable): -1 otherwise. */
static int64_t fixed_extent(Simd *s, const KjIrExpr *array, int k)
{
    const KjIrExpr *alloc = NULL;
    if (array && array->op == KJ_IR_SHARED) {
        alloc = array;
    } else if (array && array->op == KJ_IR_VAR && array->var->id >= 0 && array->var->id < s->fn->locals.count) {
        SimdChecks *c = s->checks;
        if (!c->shared_of)
            c->shared_of = kj_arena_alloc(&s->arena, sizeof *c->shared_of * (size_t)(s->fn->locals.count + 1));
        const KjIrExpr **slot = &c->shared_of[array->var->id];
        if (!*slot) {
            SharedOf o = {array->var, NULL};
            for (int i = 0; i < s->fn->param_count; i++)
                if (s->fn->params[i] == array->var)
                    o.alloc = (const KjIrExpr *)1;
            KjIrWalk w = {.stmt = note_shared, .data = &o};
            kj_ir_walk_stmt(&w, s->fn->body);
            *slot = o.alloc ? o.alloc : (const KjIrExpr *)1;
        }
        alloc = *slot == (const KjIrExpr *)1 ? NULL : *slot;
    }
    return alloc && k < alloc->alloc_ndim ? alloc->alloc_shape[k] : -1;
}

void kj_simd_check_index(Simd *s, int site, const ArrayVal *a, const KjIrExpr *array, KjIrExpr **exprs,
                         LLVMValueRef *indices, int count)
{
    if (!site || !s->checks || s->proven)
        return;
    Gen *g = s->g;
    /* every axis in every lane (a uniform index repeated), tested at once;
     * an axis whose index the ranges keep inside a shape known here cannot
     * fail and is left out (a shared() tile indexed by threadIdx.x) */
    LLVMValueRef oks[KJ_MAX_DIMS], values[KJ_MAX_DIMS][3], all = NULL;
    bool tested[KJ_MAX_DIMS];
    for (int k = 0; k < count && k < a->ndim && k < KJ_MAX_DIMS; k++) {
        tested[k] = false;
        int64_t n = LLVMIsAConstantInt(a->shape[k]) ? LLVMConstIntGetSExtValue(a->shape[k])
                                                    : fixed_extent(s, array, k);
        if (n > 0 && kj_simd_fits(s, exprs[k], 0, n - 1))
            continue;
        LLVMValueRef idx = indices[k];
        if (LLVMGetTypeKind(LLVMTypeOf(idx)) != LLVMVectorTypeKind)
            idx = splat(s, idx);
        LLVMValueRef shape = splat(s, a->shape[k]);
        oks[k] = LLVMBuildICmp(s->b, LLVMIntULT, idx, shape, "");
        values[k][0] = idx;
        values[k][1] = shape;
        values[k][2] = splat(s, const_i64(g, k));
        tested[k] = true;
        all = all ? LLVMBuildAnd(s->b, all, oks[k], "") : oks[k];
    }
    if (!all)
        return;
    LLVMValueRef mask = s->mask;
    bool top = mask == s->stmt_mask;
    LLVMValueRef bad = LLVMBuildAnd(s->b, mask, LLVMBuildNot(s->b, all, ""), "check.bad");
    LLVMBasicBlockRef fail = new_block(g, "lanes.check.fail"), go_on = new_block(g, "lanes.check.ok");
    LLVMBuildCondBr(s->b, any_lane(s, bad), fail, go_on);
    LLVMPositionBuilderAtEnd(s->b, fail);
    /* each lane's first failing axis, as the scalar code tests them */
    LLVMValueRef site_v = splat_i32(s, const_i32(g, site)), kind_v = splat_i32(s, const_i32(g, KJ_CHECK_INDEX));
    for (int k = 0; k < count && k < a->ndim && k < KJ_MAX_DIMS; k++)
        if (tested[k])
            record_lanes(s, LLVMBuildAnd(s->b, mask, LLVMBuildNot(s->b, oks[k], ""), ""), site_v, kind_v, values[k]);
    LLVMValueRef left = top ? LLVMBuildAnd(s->b, mask, all, "") : kj_simd_drop_failed(s, s->stmt_mask);
    LLVMBuildCondBr(s->b, any_lane(s, left), go_on, skip_target_of(s));
    LLVMPositionBuilderAtEnd(s->b, go_on);
    s->mask = LLVMBuildAnd(s->b, mask, all, "checked");
    if (top)
        s->stmt_mask = s->mask;
}

static LLVMValueRef lanes_i64(Simd *s, LLVMValueRef v, const KjType *type)
{
    LLVMTypeRef vi64 = vec_of(s, s->g->t_i64);
    if (kj_type_int_bits(type) == 64)
        return v;
    return kj_type_is_signed(type) ? LLVMBuildSExt(s->b, v, vi64, "") : LLVMBuildZExt(s->b, v, vi64, "");
}

static LLVMValueRef vconst_int(Simd *s, LLVMTypeRef t, uint64_t v) { return splat_const(s, LLVMConstInt(t, v, 0)); }

void kj_simd_check_operands(Simd *s, const KjIrExpr *e, LLVMValueRef a, LLVMValueRef b)
{
    if (!e->check_site || !s->checks || s->proven)
        return;
    Gen *g = s->g;
    const KjType *t = e->type;
    LLVMTypeRef vi64 = vec_of(s, g->t_i64);
    switch (e->op) {
    case KJ_IR_DIV:
    case KJ_IR_REM: {
        LLVMTypeRef lt = llty(g, t);
        LLVMValueRef ok = LLVMBuildICmp(s->b, LLVMIntNE, b, LLVMConstNull(LLVMTypeOf(b)), "");
        if (e->op == KJ_IR_DIV && kj_type_is_signed(t)) {
            int bits = kj_type_int_bits(t);
            LLVMValueRef min = vconst_int(s, lt, (uint64_t)1 << (bits - 1));
            LLVMValueRef overflow = LLVMBuildAnd(s->b, LLVMBuildICmp(s->b, LLVMIntEQ, a, min, ""),
                                                 LLVMBuildICmp(s->b, LLVMIntEQ, b, LLVMConstAllOnes(LLVMTypeOf(b)), ""), "");
            ok = LLVMBuildAnd(s->b, ok, LLVMBuildNot(s->b, overflow, ""), "");
        }
        LLVMValueRef values[3] = {lanes_i64(s, a, t), lanes_i64(s, b, t), vconst_int(s, g->t_i64, e->op == KJ_IR_REM)};
        kj_simd_check_lanes(s, e->check_site, KJ_CHECK_DIVIDE, ok, values);
        return;
    }
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        LLVMValueRef count = lanes_i64(s, b, e->args[1]->type);
        LLVMValueRef width = vconst_int(s, g->t_i64, (uint64_t)kj_type_int_bits(t));
        LLVMValueRef ok = LLVMBuildICmp(s->b, LLVMIntULT, count, width, "");
        LLVMValueRef values[3] = {count, width, NULL};
        kj_simd_check_lanes(s, e->check_site, KJ_CHECK_SHIFT, ok, values);
        return;
    }
    case KJ_IR_CAST: {
        /* as codegen_check.c's convert_ok, in every lane: compared in f64 */
        LLVMTypeRef vf64 = vec_of(s, g->t_f64);
        LLVMValueRef x = a;
        if (LLVMTypeOf(x) != vf64)
            x = LLVMBuildFPExt(s->b, x, vf64, "");
        int bits = kj_type_int_bits(t);
        double hi = bits == 64 ? 18446744073709551616.0 : (double)((uint64_t)1 << bits);
        LLVMValueRef above;
        if (kj_type_is_signed(t)) {
            hi /= 2;
            double min = -hi;
            above = bits == 64 ? LLVMBuildFCmp(s->b, LLVMRealOGE, x, splat_const(s, LLVMConstReal(g->t_f64, min)), "")
                               : LLVMBuildFCmp(s->b, LLVMRealOGT, x, splat_const(s, LLVMConstReal(g->t_f64, min - 1)), "");
        } else {
            above = LLVMBuildFCmp(s->b, LLVMRealOGT, x, splat_const(s, LLVMConstReal(g->t_f64, -1.0)), "");
        }
        LLVMValueRef below = LLVMBuildFCmp(s->b, LLVMRealOLT, x, splat_const(s, LLVMConstReal(g->t_f64, hi)), "");
        LLVMValueRef values[3] = {LLVMBuildBitCast(s->b, x, vi64, ""), vconst_int(s, g->t_i64, (uint64_t)bits),
                                  vconst_int(s, g->t_i64, kj_type_is_signed(t))};
        kj_simd_check_lanes(s, e->check_site, KJ_CHECK_CONVERT, LLVMBuildAnd(s->b, above, below, ""), values);
        return;
    }
    default:
        return;
    }
}

/* ---- a part of an expression under a mask of its own */

LLVMBasicBlockRef kj_simd_escape_open(Simd *s, LLVMBasicBlockRef *saved)
{
    *saved = s->escape;
    if (!s->checks)
        return NULL;
    s->escape = new_block(s->g, "lanes.escape");
    return s->escape;
}

bool kj_simd_escape_close(Simd *s, LLVMBasicBlockRef escape, LLVMBasicBlockRef saved, LLVMBasicBlockRef done)
{
    s->escape = saved;
    if (!escape)
        return false;
    if (!LLVMGetFirstUse(LLVMBasicBlockAsValue(escape))) {
        LLVMDeleteBasicBlock(escape);
        return false;
    }
    /* every lane of the part failed: on with the statement's others */
    LLVMBasicBlockRef here = LLVMGetInsertBlock(s->b);
    LLVMPositionBuilderAtEnd(s->b, escape);
    LLVMBuildCondBr(s->b, any_lane(s, kj_simd_drop_failed(s, s->stmt_mask)), done, skip_target_of(s));
    LLVMPositionBuilderAtEnd(s->b, here);
    return true;
}
