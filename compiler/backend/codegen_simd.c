/*
 * codegen_simd.c: the SIMD lowering of the cpu targets, as ISPC and the
 * OpenCL CPU runtimes have it: the threads of a block (threadIdx.x), or the
 * elements of a vectorized call (the PARFOR index), run side by side on the
 * lanes of the host's vector registers.
 *
 * Needs: a KERNEL without barriers or a VEC_KERNEL made by vectorize.c
 * (checked too, codegen_simd_check.c: not under the race checker), whose
 * code (and that of the functions it calls) uses nothing this file refuses
 * (kj_simd_lanes says which).  Gives: a "chunk" function
 * that runs W lanes at once, lane 0 given, the lanes past a count inactive;
 * target_cpu.c's __block and __range entries loop over chunks.
 *
 * The uniformity analysis (uniform.c) says which values vary between lanes.
 * Uniform ones stay scalar and are lowered by the shared code
 * (kj_codegen_expr) from the scalar slots of their variables; varying ones
 * are <W x T> vectors (a complex value is a pair of vectors) in slots of
 * their own.  A mask (<W x i1>) says which lanes run:
 *   - an `if` on a varying condition runs each side under its lanes' mask,
 *     skipping a side no lane takes; a uniform one stays a branch;
 *   - a loop whose exit varies runs while any lane is active; lanes leave it
 *     through its condition, `break` (a mask of broken lanes per loop),
 *     `continue` (a mask per iteration) and `return` (a mask per function);
 *     a uniform loop stays a loop of branches;
 *   - an assignment under divergence blends (select) the new value into the
 *     old under the mask; a store is a masked vector store when the index is
 *     uniform + the lane (contiguous) and the array's last stride is 1,
 *     else a masked scatter; loads likewise (masked load, gather);
 *   - after a statement that may have retired lanes, no lane left means the
 *     rest is skipped, so uniform code never runs for threads that left;
 *   - math is LLVM's vector intrinsics, libmvec's vector functions (lane
 *     counts split to the widest ISA the host has), or per lane;
 *   - atomics run lane by lane under the mask, in lane order; a call to a
 *     plain function with varying arguments calls its own SIMD variant
 *     (every scalar parameter varying, the mask last).
 * Integer division keeps the scalar rules in every lane (inactive ones
 * included: no lane traps).  No fast-math: each lane computes what the
 * scalar code computes, libmvec's results aside (the scalar code's loops
 * call the same functions when the loop vectoriser takes them).
 */
#include "codegen_simd.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ what is supported */

typedef struct Scan {
    Gen *g;
    bool ok;
    bool checked; /* checked mode: a callee's checks are refused (codegen_simd_check.c) */
    bool has_f64, has_f32, has_wide_int, has_loop;
    int depth;
    /* the root's uniformity (NULL in a callee): a 64-bit integer that is
     * uniform (a scalar) or uniform + the lane (an index whose lanes are
     * lane 0's plus 0, 1, 2 ...: contiguous accesses and their bounds tests
     * read lane 0 alone) does not make the lanes 64 bits wide */
    const KjUniformity *u;
    bool in_callee;
} Scan;

static void scan_type(Scan *sc, const KjType *t)
{
    if (!t)
        return;
    if (t->kind == KJ_TYPE_ARRAY)
        t = t->elem;
    switch (t->kind) {
    case KJ_TYPE_F16: case KJ_TYPE_BF16: sc->ok = false; break;
    case KJ_TYPE_F64: case KJ_TYPE_C128: sc->has_f64 = true; break;
    case KJ_TYPE_F32: case KJ_TYPE_C64: sc->has_f32 = true; break;
    case KJ_TYPE_I64: case KJ_TYPE_U64: sc->has_wide_int = true; break;
    default: break;
    }
}

static void scan_fn(Scan *sc, const KjIrFunction *fn, bool root);

/* The walk's hooks (ir.c), which stop it at the first thing unsupported. */
/* Whether a 64-bit integer value is an index (see Scan.u). */
static bool index_like(const Scan *sc, const KjIrExpr *e)
{
    return sc->u && !sc->in_callee && (!kj_uniform_expr_varying(sc->u, e) || kj_uniform_expr_unit(sc->u, e));
}

static bool scan_expr(KjIrWalk *w, const KjIrExpr *e)
{
    Scan *sc = w->data;
    bool wide = sc->has_wide_int;
    scan_type(sc, e->type);
    if (!wide && sc->has_wide_int && index_like(sc, e))
        sc->has_wide_int = false;
    if (sc->checked && sc->depth > 0 && e->check_site) {
        sc->ok = false;
        return false;
    }
    switch (e->op) {
    case KJ_IR_PRINT: case KJ_IR_LOCAL: case KJ_IR_SYNCTHREADS: case KJ_IR_CARG: case KJ_IR_POLAR:
    case KJ_IR_VIEW: /* a @guvectorize core's views: the scalar code walks them */
        sc->ok = false;
        return false;
    case KJ_IR_EXEC:
        if (kj_exec_form[e->exec] != KJ_EXEC_FORM_FENCE)
            sc->ok = false;
        return sc->ok;
    case KJ_IR_MATH:
        if (kj_type_is_complex(e->type) || (e->arg_count > 0 && kj_type_is_complex(e->args[0]->type)))
            sc->ok = false;
        break;
    case KJ_IR_IPOW:
        if (e->args[1]->op != KJ_IR_CONST)
            sc->ok = false;
        break;
    case KJ_IR_CALL:
        if (!e->callee || e->callee->device_use || sc->depth > 16) {
            sc->ok = false;
            return false;
        }
        sc->depth++;
        bool in_callee = sc->in_callee;
        sc->in_callee = true;
        scan_fn(sc, e->callee, false);
        sc->in_callee = in_callee;
        sc->depth--;
        break;
    default:
        break;
    }
    return sc->ok;
}

static KjIrWalkStep scan_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    Scan *sc = w->data;
    if (s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE)
        sc->has_loop = true;
    if (sc->checked && sc->depth > 0 && s->kind == KJ_IR_STMT_STORE && s->check_site)
        sc->ok = false;
    if (s->var) {
        bool wide = sc->has_wide_int;
        scan_type(sc, s->var->type);
        if (!wide && sc->has_wide_int && sc->u && !sc->in_callee &&
            (!kj_uniform_var_varying(sc->u, s->var) || kj_uniform_var_unit(sc->u, s->var)))
            sc->has_wide_int = false;
    }
    return sc->ok ? KJ_IR_WALK_ON : KJ_IR_WALK_STOP;
}

static void scan_body(Scan *sc, const KjIrStmt *body)
{
    KjIrWalk w = {.stmt = scan_stmt, .expr = scan_expr, .data = sc};
    if (sc->ok)
        kj_ir_walk_stmt(&w, body);
}

/* Array variables must stay uniform: a varying one (assigned under
 * divergence) would need a pointer per lane. */
static bool arrays_uniform_in(const KjIrFunction *fn, const KjUniformity *u)
{
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *v = fn->locals.items[i];
        if (v->type->kind == KJ_TYPE_ARRAY && kj_uniform_var_varying(u, v))
            return false;
    }
    return true;
}

static bool arrays_uniform(const KjIrFunction *fn, KjUniformSources sources)
{
    KjArena arena = {0};
    bool ok = arrays_uniform_in(fn, kj_uniform_analyze(&arena, fn, sources));
    kj_arena_free(&arena);
    return ok;
}

/* Every scalar parameter: the sources of the variant that scan_fn checks,
 * the most varying one. */
static uint64_t all_scalar_params(const KjIrFunction *fn)
{
    uint64_t params = 0;
    for (int i = 0; i < fn->param_count && i < 64; i++)
        if (fn->params[i]->type->kind != KJ_TYPE_ARRAY)
            params |= 1ull << i;
    return params;
}

static KjUniformSources callee_sources(const KjIrFunction *fn)
{
    return (KjUniformSources){.params = all_scalar_params(fn)};
}

static KjUniformSources root_sources(const KjIrFunction *fn)
{
    KjUniformSources src = {0};
    if (fn->kind == KJ_IR_FN_KERNEL)
        src.sregs = 1u << KJ_SREG_TID_X;
    else
        src.parfor_var = true;
    return src;
}

static void scan_fn(Scan *sc, const KjIrFunction *fn, bool root)
{
    if (!root && !arrays_uniform(fn, callee_sources(fn)))
        sc->ok = false;
    scan_body(sc, fn->body);
    for (int i = 0; i < fn->param_count; i++)
        scan_type(sc, fn->params[i]->type);
}

/* A VEC_KERNEL as vectorize.c makes it: one PARFOR whose body ends in
 * out[...] = scalar(...) (and, for several outputs, the stores of outputs
 * 1.. after it), the scalar function taking scalars alone (the
 * kernels of reduce.c and guvectorize.c keep the scalar code). */
static bool is_lifted(const KjIrFunction *fn)
{
    const KjIrStmt *body = fn->body;
    if (!fn->scalar || fn->scalar->kind != KJ_IR_FN_SCALAR || body->kind != KJ_IR_STMT_BLOCK ||
        body->stmts.count != 1)
        return false;
    const KjIrStmt *loop = body->stmts.items[0];
    if (loop->kind != KJ_IR_STMT_PARFOR || loop->body->kind != KJ_IR_STMT_BLOCK || loop->body->stmts.count == 0)
        return false;
    /* a function of several outputs: its other outputs' stores follow */
    int extra = fn->scalar->output_count > 1 ? fn->scalar->output_count - 1 : 0;
    if (loop->body->stmts.count <= extra)
        return false;
    const KjIrStmt *last = loop->body->stmts.items[loop->body->stmts.count - 1 - extra];
    if (last->kind != KJ_IR_STMT_STORE || last->value->op != KJ_IR_CALL || last->value->callee != fn->scalar)
        return false;
    for (int i = 0; i < fn->scalar->param_count; i++)
        if (is_array(fn->scalar->params[i]->type))
            return false;
    return true;
}



/* Lanes of the widest float the code uses (else of its widest integer,
 * indices aside: see Scan.u): 4 f64 or 8 f32 in AVX2's 32 bytes. */
static int lanes_for(Gen *g, const Scan *sc)
{
    int elem = sc->has_f64 ? 8 : sc->has_f32 ? 4 : sc->has_wide_int ? 8 : 4;
    int lanes = register_bytes(g) / elem;
    return lanes < 2 ? 2 : lanes > 16 ? 16 : lanes;
}

/* Checked mode goes on lanes (codegen_simd_check.c); the race checker runs
 * every thread on its own. */
static bool lanes_refused(Gen *g) { return !g->options->cpu_simd || g->options->race; }

int kj_simd_lanes(Gen *g, KjIrFunction *fn)
{
    if (lanes_refused(g))
        return 0;
    if (fn->kind == KJ_IR_FN_KERNEL) {
        if (fn->uses_syncthreads || fn->uses_syncgrid)
            return 0;
    } else if (fn->kind != KJ_IR_FN_VEC_KERNEL || !is_lifted(fn)) {
        return 0;
    }
    KjArena arena = {0};
    KjUniformity *u = kj_uniform_analyze(&arena, fn, root_sources(fn));
    Scan sc = {.g = g, .ok = true, .checked = g->options->checks, .u = u};
    scan_fn(&sc, fn, true);
    bool ok = sc.ok && arrays_uniform_in(fn, u);
    kj_arena_free(&arena);
    if (!ok)
        return 0;
    /* A vectorized body without loops is left to the loop vectoriser, which
     * already makes SIMD code of it (add, sin, exp). */
    if (fn->kind == KJ_IR_FN_VEC_KERNEL && !sc.has_loop)
        return 0;
    return lanes_for(g, &sc);
}

int kj_simd_region_lanes(Gen *g, const KjIrStmt *region, const KjUniformity *u)
{
    if (lanes_refused(g))
        return 0;
    Scan sc = {.g = g, .ok = true, .checked = g->options->checks, .u = u};
    scan_body(&sc, region);
    return sc.ok ? lanes_for(g, &sc) : 0;
}

/* ============================================================ statements */

static void gen_stmt(Simd *s, KjIrStmt *st);

static SimdLoop *current_loop(Simd *s) { return s->loop_depth ? &s->loops[s->loop_depth - 1] : NULL; }

static LLVMBasicBlockRef skip_target(Simd *s) { return s->skip[s->skip_depth - 1]; }

static void push_skip(Simd *s, LLVMBasicBlockRef bb)
{
    if (s->skip_depth >= SIMD_MAX_DEPTH) {
        kj_codegen_error(s->g, "statements are nested too deep for the SIMD lowering%s", NULL);
        return;
    }
    s->skip[s->skip_depth++] = bb;
}

/* Whether st may retire lanes of the running region: a divergent return, or
 * a masked break or continue of the current loop.  The walk's hooks (ir.c)
 * count the loops under st, whose break and continue are their own; a
 * PARFOR's or THREADS' body is a region of its own. */
typedef struct Leaving {
    Simd *s;
    int loops;
} Leaving;

static KjIrWalkStep stop_at_leave(KjIrWalk *w, const KjIrStmt *st)
{
    Leaving *l = w->data;
    switch (st->kind) {
    case KJ_IR_STMT_RETURN:
        return kj_uniform_stmt_divergent(l->s->u, st) ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_CONTINUE: {
        SimdLoop *loop = current_loop(l->s);
        return l->loops == 0 && loop && loop->varying ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
    }
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE:
        l->loops++;
        return KJ_IR_WALK_ON;
    case KJ_IR_STMT_PARFOR: case KJ_IR_STMT_THREADS:
        return KJ_IR_WALK_SKIP;
    default:
        return KJ_IR_WALK_ON;
    }
}

static void leave_loop(KjIrWalk *w, const KjIrStmt *st)
{
    Leaving *l = w->data;
    l->loops -= st->kind == KJ_IR_STMT_FOR || st->kind == KJ_IR_STMT_WHILE;
}

static bool may_leave(Simd *s, const KjIrStmt *st)
{
    if (kj_simd_stmt_may_fail(s, st))
        return true; /* a failed check retires lanes as a return does */
    Leaving l = {s, 0};
    KjIrWalk w = {.stmt = stop_at_leave, .leave = leave_loop, .data = &l};
    return !kj_ir_walk_stmt(&w, st);
}

/* The lanes of before that have not left: returned, or broken out of or
 * continued in the current loop. */
static LLVMValueRef lanes_left(Simd *s, LLVMValueRef before)
{
    LLVMValueRef m = kj_simd_drop_failed(s, before);
    if (s->returned)
        m = mask_and_not(s, m, s->returned);
    SimdLoop *loop = current_loop(s);
    if (loop && loop->varying) {
        m = mask_and_not(s, m, loop->break_slot);
        m = mask_and_not(s, m, loop->continue_slot);
    }
    return m;
}

/* After a statement that may have retired lanes: the running mask is what
 * it was before, less the lanes that left; with none left, go on at the
 * skip target. */
static void refresh_mask(Simd *s, LLVMValueRef before)
{
    LLVMValueRef m = lanes_left(s, before);
    s->mask = m;
    LLVMBasicBlockRef go_on = new_block(s->g, "lanes.left");
    LLVMBuildCondBr(s->b, any_lane(s, m), go_on, skip_target(s));
    LLVMPositionBuilderAtEnd(s->b, go_on);
}

/* Whether st reads var outside `inside` (a loop: its body, and its
 * condition where exit_recorded). */
typedef struct ReadsOutside {
    const KjIrVar *var;
    const KjIrStmt *inside;
    bool exit_recorded;
} ReadsOutside;

static KjIrWalkStep stop_at_read_outside(KjIrWalk *w, const KjIrStmt *st)
{
    const ReadsOutside *r = w->data;
    const KjIrVar *var = r->var;
    if (st == r->inside) /* a loop's condition reads on for the lanes that left, unless they
                          * are recorded as gone (gen_loop) */
        return kj_ir_expr_reads(st->start, var) || kj_ir_expr_reads(st->stop, var) ||
                       kj_ir_expr_reads(st->step, var) ||
                       (!r->exit_recorded && kj_ir_expr_reads(st->cond, var))
                   ? KJ_IR_WALK_STOP
                   : KJ_IR_WALK_SKIP;
    return kj_ir_stmt_exprs_read(st, var, true) ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool reads_outside(const KjIrStmt *st, const KjIrVar *var, const KjIrStmt *inside, bool exit_recorded)
{
    ReadsOutside r = {var, inside, exit_recorded};
    KjIrWalk w = {.stmt = stop_at_read_outside, .data = &r};
    return !kj_ir_walk_stmt(&w, st);
}

/* Whether var's lanes outside the running ones are never read again: var
 * is read nowhere outside the plain region being emitted (see
 * assign_lanes). */
static bool dead_outside_region(Simd *s, const KjIrVar *var)
{
    return s->plain_loop && s->plain &&
           !reads_outside(s->fn->body, var, s->plain_loop, s->plain_loop == s->exit_recorded);
}

/* Whether st holds a continue of the loop it is in (an inner loop's, a
 * PARFOR's or THREADS' are their own). */
static KjIrWalkStep stop_at_continue(KjIrWalk *w, const KjIrStmt *st)
{
    switch (st->kind) {
    case KJ_IR_STMT_CONTINUE:
        return KJ_IR_WALK_STOP;
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: case KJ_IR_STMT_PARFOR: case KJ_IR_STMT_THREADS:
        return KJ_IR_WALK_SKIP;
    default:
        return KJ_IR_WALK_ON;
    }
}

static bool has_continue(const KjIrStmt *st)
{
    KjIrWalk w = {.stmt = stop_at_continue};
    return !kj_ir_walk_stmt(&w, st);
}

/*
 * var = v in the running lanes.  Under divergence the new value is blended
 * into the old, so that the lanes that do not run keep theirs; except where
 * those lanes can never read it again: in a plain region, an outermost
 * varying loop or a side of an outermost varying if (each runs at most once
 * per call), with nothing partial in between (no varying if or inner
 * varying loop, no continue: every lane running there ran all of the region
 * before it), for a variable read nowhere outside the region.  The lanes
 * that left the region, or never entered it, then never see the value (the
 * Mandelbrot iteration's z and i, delay-and-sum's loop counters need no
 * blends).
 */
static void assign_lanes(Simd *s, KjIrVar *var, LLVMValueRef v, bool divergent)
{
    LLVMValueRef slot = s->vslots[var->id];
    if (var == s->even_var)
        s->even_var = NULL;
    for (int i = 0; i < s->lane0_count; i++)
        if (s->lane0_vars[i] == var)
            s->lane0_vars[i] = NULL; /* its scalar slot no longer follows it */
    if (divergent && dead_outside_region(s, var))
        divergent = false;
    if (divergent)
        v = blend(s, s->mask, v, LLVMBuildLoad2(s->b, vty(s, var->type), slot, ""));
    LLVMBuildStore(s->b, v, slot);
}

/* Outputs 1.. of a call of several made on lanes in st (vectorize.c puts
 * it as a statement's whole value): into the caller's variables, on the
 * lanes it ran for. */
static void take_call_outputs(Simd *s, KjIrStmt *st)
{
    for (int k = 0; k < s->call_output_count; k++)
        assign_lanes(s, s->call_output_vars[k], s->call_output_values[k],
                     kj_uniform_stmt_divergent(s->u, st));
    s->call_output_count = 0;
}

static void gen_set(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    KjIrVar *var = st->var;
    if (is_array(var->type)) {
        ArrayVal a;
        kj_codegen_array(g, st->value, &a);
        ArraySlots *slots = &g->slots[var->id].array;
        LLVMBuildStore(s->b, a.data, slots->data);
        for (int k = 0; k < var->type->ndim && k < a.ndim; k++) {
            LLVMBuildStore(s->b, a.shape[k], slots->shape[k]);
            LLVMBuildStore(s->b, a.strides[k], slots->strides[k]);
        }
        return;
    }
    if (!kj_uniform_var_varying(s->u, var)) {
        LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, st->value), st->value->type, var->type);
        LLVMBuildStore(s->b, v, g->slots[var->id].scalar);
        return;
    }
    assign_lanes(s, var, kj_simd_lanes_of(s, st->value, var->type), kj_uniform_stmt_divergent(s->u, st));
}

static void gen_store(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    ArrayVal a;
    kj_codegen_array(g, st->array, &a);
    bool any_varying = simd_varying(s, st->value);
    for (int k = 0; k < st->index_count; k++)
        any_varying = any_varying || simd_varying(s, st->indices[k]);
    if (!any_varying) {
        /* one element, one value: the store the threads all make */
        LLVMValueRef idx[KJ_MAX_DIMS];
        for (int k = 0; k < st->index_count && k < KJ_MAX_DIMS; k++)
            idx[k] = kj_codegen_convert(g, kj_codegen_expr(g, st->indices[k]), st->indices[k]->type,
                                        kj_type_scalar(KJ_TYPE_I64));
        LLVMValueRef v = kj_codegen_convert(g, kj_codegen_expr(g, st->value), st->value->type, a.elem);
        kj_codegen_check_index(g, st->check_site, &a, idx, st->index_count);
        LLVMValueRef p = kj_codegen_element_address(g, &a, idx, st->index_count, st->contiguous);
        LLVMBuildStore(s->b, to_mem(g, a.elem, v), p);
        return;
    }
    /* checked: the indices, the value, the check, as the scalar code */
    LLVMValueRef pre[KJ_MAX_DIMS];
    bool checked = kj_simd_pre_indices(s, st->check_site, st->indices, st->index_count, pre);
    LLVMValueRef v = kj_simd_lanes_of(s, st->value, a.elem);
    if (checked)
        kj_simd_check_index(s, st->check_site, &a, st->array, st->indices, pre, st->index_count);
    kj_simd_store(s, st->array, &a, st->indices, st->index_count, st->contiguous, v, checked ? pre : NULL);
}

/* Whether e costs little to compute for lanes that do not need it: no
 * memory, no calls, no libm function (KJ_MATH_BUILTINS' lowering column). */
/* The walk's data: the budget of assignments left (cheap_side), and whether
 * a check counts as dear (it must not run in lanes that do not take it). */
typedef struct Cheap {
    int budget;
    bool checked;
} Cheap;

static bool cheap_op(KjIrWalk *w, const KjIrExpr *e)
{
    const Cheap *c = w->data;
    if (c->checked && e->check_site)
        return false;
    switch (e->op) {
    case KJ_IR_LOAD: case KJ_IR_CALL: case KJ_IR_ATOMIC: case KJ_IR_IPOW: case KJ_IR_PRINT:
    case KJ_IR_EXEC: case KJ_IR_CABS:
        return false;
    case KJ_IR_MATH:
        return kj_codegen_math_cheap(e->math);
    default:
        return true;
    }
}

static bool cheap_expr(Simd *s, const KjIrExpr *e)
{
    Cheap c = {.checked = s->checks != NULL};
    KjIrWalk w = {.expr = cheap_op, .data = &c};
    return kj_ir_walk_expr(&w, e);
}

/* A side of an if that is a few cheap assignments: run for every lane
 * under its mask rather than behind a branch on whether any lane takes it
 * (a branch that lanes of mixed minds make hard to predict).  The walk's
 * data is the budget of assignments left. */
static KjIrWalkStep cheap_stmt(KjIrWalk *w, const KjIrStmt *st)
{
    Cheap *c = w->data;
    switch (st->kind) {
    case KJ_IR_STMT_BLOCK:
        return KJ_IR_WALK_ON;
    case KJ_IR_STMT_SET:
        return --c->budget >= 0 && !is_array(st->var->type) ? KJ_IR_WALK_ON : KJ_IR_WALK_STOP;
    case KJ_IR_STMT_IF:
        return KJ_IR_WALK_ON;
    default:
        return KJ_IR_WALK_STOP;
    }
}

static bool cheap_side(const KjIrStmt *st, Cheap *budget)
{
    KjIrWalk w = {.stmt = cheap_stmt, .expr = cheap_op, .data = budget};
    return kj_ir_walk_stmt(&w, st);
}

/* The variables a side assigns (SETs, in nested ifs too, not in loops), at
 * most 16. */
typedef struct Assigned {
    KjIrVar **vars;
    int count;
} Assigned;

static KjIrWalkStep note_assigned(KjIrWalk *w, const KjIrStmt *st)
{
    Assigned *a = w->data;
    switch (st->kind) {
    case KJ_IR_STMT_SET:
        for (int i = 0; i < a->count; i++)
            if (a->vars[i] == st->var)
                return KJ_IR_WALK_ON;
        if (a->count < 16)
            a->vars[a->count++] = st->var;
        return KJ_IR_WALK_ON;
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: case KJ_IR_STMT_PARFOR: case KJ_IR_STMT_THREADS:
        return KJ_IR_WALK_SKIP;
    default:
        return KJ_IR_WALK_ON;
    }
}

static int assigned_vars(const KjIrStmt *st, KjIrVar **vars, int count)
{
    Assigned a = {vars, count};
    KjIrWalk w = {.stmt = note_assigned, .data = &a};
    kj_ir_walk_stmt(&w, st);
    return a.count;
}

/* Whether cond is `x % 2^k == 0` (or `0 == x % 2^k`), x a signed integer
 * variable of the remainder's type and 1 <= k < its bits: *var = x, *shift = k. */
static bool multiple_test(const KjIrExpr *cond, KjIrVar **var, int *shift)
{
    if (cond->op != KJ_IR_EQ || cond->arg_count != 2)
        return false;
    const KjIrExpr *rem = cond->args[0], *zero = cond->args[1];
    if (rem->op != KJ_IR_REM) {
        const KjIrExpr *t = rem;
        rem = zero, zero = t;
    }
    if (rem->op != KJ_IR_REM || zero->op != KJ_IR_CONST || zero->const_int != 0 ||
        zero->type != rem->type || !kj_type_is_int(rem->type) || !kj_type_is_signed(rem->type))
        return false;
    const KjIrExpr *x = rem->args[0], *d = rem->args[1];
    if (x->op != KJ_IR_VAR || x->type != rem->type || x->var->type != rem->type ||
        d->op != KJ_IR_CONST || d->type != rem->type)
        return false;
    int bits = kj_type_int_bits(rem->type);
    uint64_t m = d->const_int & (bits == 64 ? ~0ull : (1ull << bits) - 1);
    if (m < 2 || (m & (m - 1)) || m >= 1ull << (bits - 1))
        return false;
    *var = x->var;
    *shift = __builtin_ctzll(m);
    return true;
}

/*
 * A varying if of cheap sides, in line.  With an else side: each side runs
 * for every lane (no blends; what a side computes in lanes not its own is
 * thrown away, and cheap sides touch no memory and nothing across lanes),
 * the then side on the variables' slots, the else side on shadows of them,
 * both starting as the variables were before the if; last, each variable
 * becomes before ? (c ? then's : else's) : as it was.  The two sides no
 * longer wait for one another, and no side's mask is formed: x = x / 2 or
 * 3 * x + 1 is a blend by c and one by the lanes running.  Without an else
 * side (or with more than 15 variables), the then side runs under its mask.
 */
static void gen_if_in_line(Simd *s, KjIrStmt *st, LLVMValueRef before, LLVMValueRef c)
{
    KjIrVar *vars[16];
    int count = assigned_vars(st->else_stmt, vars, assigned_vars(st->then_stmt, vars, 0));
    bool merged = st->else_stmt && count < 16;
    /* a variable whose other lanes are never read again takes no blend by
     * the lanes running */
    bool dead_outside[16];
    for (int i = 0; i < count && merged; i++)
        dead_outside[i] = dead_outside_region(s, vars[i]);
    const KjIrStmt *plain_region = s->plain_loop;
    bool plain = s->plain;
    s->plain = false;
    LLVMValueRef shadows[16], orig[16], real[16];
    if (merged)
        for (int i = 0; i < count; i++) {
            LLVMTypeRef t = vty(s, vars[i]->type);
            real[i] = s->vslots[vars[i]->id];
            shadows[i] = entry_alloca(s, t, "shadow");
            orig[i] = entry_alloca(s, t, "orig");
            LLVMValueRef v = LLVMBuildLoad2(s->b, t, real[i], "");
            LLVMBuildStore(s->b, v, shadows[i]);
            LLVMBuildStore(s->b, v, orig[i]);
        }
    KjIrVar *even_var = s->even_var;
    int even_shift = s->even_shift;
    /* (a then side under its mask leaves x / 2^k to the select that
     * LLVM would make a shift by a varying count: no faster) */
    if (!merged || !multiple_test(st->cond, &s->even_var, &s->even_shift))
        s->even_var = NULL;
    LLVMValueRef all = LLVMConstAllOnes(LLVMTypeOf(before));
    s->mask = merged ? all : LLVMBuildAnd(s->b, before, c, "then.mask");
    gen_stmt(s, st->then_stmt);
    s->even_var = NULL;
    if (merged) {
        for (int i = 0; i < count; i++)
            s->vslots[vars[i]->id] = shadows[i];
        s->mask = all;
        gen_stmt(s, st->else_stmt);
        for (int i = 0; i < count; i++) {
            LLVMTypeRef t = vty(s, vars[i]->type);
            s->vslots[vars[i]->id] = real[i];
            LLVMValueRef v = blend(s, c, LLVMBuildLoad2(s->b, t, real[i], ""),
                                   LLVMBuildLoad2(s->b, t, shadows[i], ""));
            if (before != all && !dead_outside[i])
                v = blend(s, before, v, LLVMBuildLoad2(s->b, t, orig[i], ""));
            LLVMBuildStore(s->b, v, real[i]);
        }
    } else if (st->else_stmt) {
        s->mask = LLVMBuildAnd(s->b, before, LLVMBuildNot(s->b, c, ""), "else.mask");
        gen_stmt(s, st->else_stmt);
    }
    /* the enclosing side's fact, unless this if assigns its variable */
    for (int i = 0; i < count && even_var; i++)
        if (vars[i] == even_var)
            even_var = NULL;
    if (count >= 16)
        even_var = NULL;
    s->even_var = even_var;
    s->even_shift = even_shift;
    s->plain_loop = plain_region;
    s->plain = plain;
}

/* One side of a varying if, under its lanes, ending in a branch to `out`
 * (where the builder is left).  An if that runs once per call is a plain
 * region of its own, side by side; one inside a plain region makes it
 * partial. */
static void gen_side(Simd *s, KjIrStmt *side, LLVMValueRef mask, LLVMBasicBlockRef out)
{
    const KjIrStmt *plain_region = s->plain_loop;
    bool plain = s->plain;
    bool region = s->loop_depth == 0 && !s->plain_loop;
    s->plain_loop = region ? side : plain_region;
    s->plain = region;
    s->mask = mask;
    push_skip(s, out);
    gen_stmt(s, side);
    s->skip_depth--;
    s->plain_loop = plain_region;
    s->plain = plain;
    if (block_open(s))
        LLVMBuildBr(s->b, out);
    LLVMPositionBuilderAtEnd(s->b, out);
}

/*
 * A varying if without an else side whose then side may retire lanes (`if
 * c { return i; }` in a loop).  The lanes after it are before's on the way
 * that skips the then side, the same value, and are formed again from the
 * slots only on the then side's way out, where lanes left; the two meet in
 * a wide slot.  In a loop that carries its lanes (gen_loop), an iteration
 * where no lane takes the then side costs no mask instructions but the
 * test of c.
 */
static void gen_if_leaving(Simd *s, KjIrStmt *st, LLVMValueRef before, LLVMValueRef c)
{
    Gen *g = s->g;
    LLVMValueRef after = lanes_slot(s, "if.lanes");
    store_lanes(s, after, before);
    LLVMValueRef then_mask = LLVMBuildAnd(s->b, before, c, "then.mask");
    LLVMBasicBlockRef then_bb = new_block(g, "vif.then"), then_out = new_block(g, "vif.then.out"),
                      done = new_block(g, "vif.done");
    LLVMBuildCondBr(s->b, any_lane(s, then_mask), then_bb, done);
    LLVMPositionBuilderAtEnd(s->b, then_bb);
    gen_side(s, st->then_stmt, then_mask, then_out);
    LLVMValueRef left = lanes_left(s, before);
    store_lanes(s, after, left);
    LLVMBuildCondBr(s->b, any_lane(s, left), done, skip_target(s));
    LLVMPositionBuilderAtEnd(s->b, done);
    s->mask = load_lanes(s, after);
}

/* A then side worth a second copy for when every lane takes it: straight
 * line (no loop, no way out), few nodes, and memory to reach. */
typedef struct FullSide {
    int nodes, accesses;
} FullSide;

static KjIrWalkStep full_side_stmt(KjIrWalk *w, const KjIrStmt *st)
{
    FullSide *f = w->data;
    switch (st->kind) {
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: case KJ_IR_STMT_PARFOR: case KJ_IR_STMT_THREADS:
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_CONTINUE: case KJ_IR_STMT_RETURN:
        return KJ_IR_WALK_STOP;
    default:
        f->accesses += st->kind == KJ_IR_STMT_STORE;
        return ++f->nodes > 96 ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
    }
}

static bool full_side_expr(KjIrWalk *w, const KjIrExpr *e)
{
    FullSide *f = w->data;
    f->accesses += e->op == KJ_IR_LOAD;
    return e->op != KJ_IR_CALL && ++f->nodes <= 96;
}

/* At most this many copies for full masks in one chunk of a region: a
 * stencil's one guarded side is the region's work, where a long straight
 * line of guarded stores (a register-blocked tile's write-back: 16 of them
 * after a loop over the whole depth) runs once a block, and each copy costs
 * LLVM's passes as much as the masked side (issue 25: a fifth of matmul's
 * shape on AVX-512, a third on AVX2). */
#define SIMD_FULL_COPIES 4

static bool worth_full_copy(Simd *s, const KjIrStmt *side)
{
    if (s->checks || s->loop_depth != 0 || s->lanes > 64 || s->full_copies >= SIMD_FULL_COPIES)
        return false;
    FullSide f = {0};
    KjIrWalk w = {.stmt = full_side_stmt, .expr = full_side_expr, .data = &f};
    return kj_ir_walk_stmt(&w, side) && f.accesses > 0;
}

/*
 * A varying if without else whose then side is a short straight line that
 * reaches memory (a stencil's `if x >= 1 && x < n - 1 { v[..] = u[..] + ... }`):
 * two copies of the side, one for chunks where every lane takes it, whose
 * constant mask makes its loads and stores plain ones, and the masked one for
 * the rest (the edges).  Masked loads and stores of 512 bits cost more than
 * plain ones on some CPUs (a masked store forwards to no load), and every
 * chunk of an interior block ran them.  The same lanes compute the same
 * values either way.
 */
static void gen_if_full_or_masked(Simd *s, KjIrStmt *st, LLVMValueRef before, LLVMValueRef c)
{
    Gen *g = s->g;
    LLVMValueRef then_mask = LLVMBuildAnd(s->b, before, c, "then.mask");
    LLVMBasicBlockRef pick = new_block(g, "vif.pick"), full = new_block(g, "vif.full"),
                      part = new_block(g, "vif.part"), done = new_block(g, "vif.done");
    LLVMBuildCondBr(s->b, any_lane(s, then_mask), pick, done);
    LLVMPositionBuilderAtEnd(s->b, pick);
    LLVMValueRef all = kj_codegen_call_intrinsic(g, "llvm.vector.reduce.and", &s->mask_type, 1, &then_mask, 1);
    LLVMBuildCondBr(s->b, all, full, part);
    LLVMPositionBuilderAtEnd(s->b, full);
    s->full_copies++;
    gen_side(s, st->then_stmt, LLVMConstAllOnes(s->mask_type), done);
    LLVMPositionBuilderAtEnd(s->b, part);
    gen_side(s, st->then_stmt, then_mask, done);
    s->mask = before;
}

static void gen_if(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    LLVMValueRef before = s->mask;
    bool leaves = may_leave(s, st);
    if (!simd_varying(s, st->cond)) {
        LLVMValueRef c = kj_codegen_expr(g, st->cond);
        before = s->mask;
        LLVMBasicBlockRef then_bb = new_block(g, "if.then"), done = new_block(g, "if.done");
        LLVMBasicBlockRef else_bb = st->else_stmt ? new_block(g, "if.else") : done;
        LLVMBuildCondBr(s->b, c, then_bb, else_bb);
        LLVMPositionBuilderAtEnd(s->b, then_bb);
        gen_stmt(s, st->then_stmt);
        if (block_open(s))
            LLVMBuildBr(s->b, done);
        if (st->else_stmt) {
            LLVMPositionBuilderAtEnd(s->b, else_bb);
            s->mask = before;
            gen_stmt(s, st->else_stmt);
            if (block_open(s))
                LLVMBuildBr(s->b, done);
        }
        LLVMPositionBuilderAtEnd(s->b, done);
        s->mask = before;
        if (leaves)
            refresh_mask(s, before);
        return;
    }
    /* both sides, each under its lanes, each skipped when it has none */
    LLVMValueRef c = kj_simd_lanes_of(s, st->cond, kj_type_scalar(KJ_TYPE_BOOL));
    before = s->mask; /* less the lanes whose checks in the condition failed */
    /* a few cheap assignments: both sides in line */
    Cheap budget = {.budget = 8, .checked = s->checks != NULL};
    if (cheap_side(st->then_stmt, &budget) && cheap_side(st->else_stmt, &budget)) {
        gen_if_in_line(s, st, before, c);
        s->mask = before;
        return;
    }
    if (leaves && !st->else_stmt) {
        gen_if_leaving(s, st, before, c);
        return;
    }
    if (!leaves && !st->else_stmt && worth_full_copy(s, st->then_stmt)) {
        gen_if_full_or_masked(s, st, before, c);
        return;
    }
    LLVMValueRef then_mask = LLVMBuildAnd(s->b, before, c, "then.mask");
    LLVMValueRef else_mask = LLVMBuildAnd(s->b, before, LLVMBuildNot(s->b, c, ""), "else.mask");
    LLVMBasicBlockRef then_bb = new_block(g, "vif.then"), else_check = new_block(g, "vif.else.check"),
                      done = new_block(g, "vif.done");
    LLVMBuildCondBr(s->b, any_lane(s, then_mask), then_bb, else_check);
    LLVMPositionBuilderAtEnd(s->b, then_bb);
    gen_side(s, st->then_stmt, then_mask, else_check);
    if (st->else_stmt) {
        LLVMBasicBlockRef else_bb = new_block(g, "vif.else");
        LLVMBuildCondBr(s->b, any_lane(s, else_mask), else_bb, done);
        LLVMPositionBuilderAtEnd(s->b, else_bb);
        gen_side(s, st->else_stmt, else_mask, done);
    } else {
        LLVMBuildBr(s->b, done);
        LLVMPositionBuilderAtEnd(s->b, done);
    }
    s->mask = before;
    if (leaves)
        refresh_mask(s, before);
}

static void push_loop(Simd *s, SimdLoop loop)
{
    if (s->loop_depth >= SIMD_MAX_DEPTH) {
        kj_codegen_error(s->g, "loops are nested too deep for the SIMD lowering%s", NULL);
        return;
    }
    s->loops[s->loop_depth++] = loop;
}

/*
 * Whether the outermost varying while loop st, a plain region, should
 * record the lanes its condition retires among the broken ones: a condition
 * that does not is re-tested for them every iteration, and stays false only
 * because the variables it reads keep their values in them (blended).
 * Recorded, a variable that the condition and the body read and nothing
 * after the loop does takes no blend at all (the Collatz n: its step is
 * then only the step's own instructions), for one or-not of the masks.
 */
static bool exit_frees_blends(Simd *s, const KjIrStmt *st)
{
    if (st->kind != KJ_IR_STMT_WHILE || s->loop_depth != 0 || s->plain_loop || has_continue(st->body))
        return false;
    KjIrVar *vars[16];
    int count = assigned_vars(st->body, vars, 0);
    for (int i = 0; i < count; i++)
        if (kj_uniform_var_varying(s->u, vars[i]) && kj_ir_expr_reads(st->cond, vars[i]) &&
            !reads_outside(s->fn->body, vars[i], st, true))
            return true;
    return false;
}

/* for and while.  A uniform loop is the scalar code's loop of branches (its
 * variable, if varying, set in the running lanes); a varying one runs while
 * any lane is active. */
static void gen_loop(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    LLVMBuilderRef B = s->b;
    bool is_for = st->kind == KJ_IR_STMT_FOR;
    bool loop_varying = kj_uniform_loop_varying(s->u, st);
    LLVMValueRef before = s->mask;
    const KjType *t = is_for ? st->var->type : NULL;
    bool sgn = t && kj_type_is_signed(t);

    /* the counter: scalar when the bounds are uniform, else one per lane */
    bool lane_counter = is_for && (simd_varying(s, st->start) || simd_varying(s, st->stop) || simd_varying(s, st->step));
    LLVMValueRef counter = NULL, stop = NULL, step = NULL, down = NULL;
    LLVMTypeRef ct = NULL;
    /* a counter of uniform + lane stepped uniformly to a uniform end: lane
     * 0's value, a scalar, the lanes made from it where they are read */
    bool unit_counter = lane_counter && kj_uniform_var_unit(s->u, st->var) && !simd_varying(s, st->stop) &&
                        !simd_varying(s, st->step);
    if (is_for) {
        if (unit_counter) {
            ct = llty(g, t);
            counter = entry_alloca(s, ct, "for.base");
            LLVMBuildStore(B, LLVMBuildExtractElement(B, kj_simd_lanes_of(s, st->start, t), const_i32(g, 0), ""),
                           counter);
            stop = kj_codegen_convert(g, kj_codegen_expr(g, st->stop), st->stop->type, t);
            step = kj_codegen_convert(g, kj_codegen_expr(g, st->step), st->step->type, t);
        } else if (lane_counter) {
            ct = vty(s, t);
            counter = entry_alloca(s, ct, "for.lanes");
            LLVMBuildStore(B, kj_simd_lanes_of(s, st->start, t), counter);
            stop = kj_simd_lanes_of(s, st->stop, t);
            step = kj_simd_lanes_of(s, st->step, t);
        } else {
            ct = llty(g, t);
            counter = entry_alloca(s, ct, "for.counter");
            LLVMBuildStore(B, kj_codegen_convert(g, kj_codegen_expr(g, st->start), st->start->type, t), counter);
            stop = kj_codegen_convert(g, kj_codegen_expr(g, st->stop), st->stop->type, t);
            step = kj_codegen_convert(g, kj_codegen_expr(g, st->step), st->step->type, t);
        }
        LLVMValueRef up = LLVMBuildICmp(B, sgn ? LLVMIntSGT : LLVMIntNE, step, LLVMConstNull(ct), "up");
        /* below stop going up, above it going down: with down all ones,
         * i ^ down < stop ^ down either way (~ reverses the order), one
         * compare in the loop instead of two and a select of masks */
        down = LLVMBuildSExt(B, LLVMBuildNot(B, up, ""), ct, "down");
        stop = LLVMBuildXor(B, stop, down, "");
    }
    SimdLoop loop = {.varying = loop_varying};
    /* A varying loop with a uniform count and no continue (`for i in
     * range(n)` left by return or break) carries its running lanes from
     * the end of one iteration to the next in a wide slot, rather than
     * forming them at the head from the lanes that broke: lanes only leave
     * it, so when none is left the body goes to the exit (not the latch),
     * the head needs no test of them (no code runs for no lane, so the
     * first iteration has some), and an iteration in which no lane leaves
     * (gen_if_leaving) hands on the same mask, with no instruction. */
    LLVMValueRef carried = NULL;
    if (loop_varying && is_for && !lane_counter && !has_continue(st->body)) {
        carried = lanes_slot(s, "loop.lanes");
        store_lanes(s, carried, before);
    }
    /* the lanes still in a loop whose exit is recorded (exit_frees_blends) */
    LLVMValueRef alive = NULL;
    if (loop_varying) {
        loop.break_slot = mask_slot(s, "break.lanes");
        loop.continue_slot = mask_slot(s, "continue.lanes");
        store_mask(s, loop.break_slot, no_lanes(s));
        if (!is_for && cheap_expr(s, st->cond) && exit_frees_blends(s, st)) {
            s->exit_recorded = st;
            alive = mask_slot(s, "alive.lanes");
            store_mask(s, alive, LLVMConstAllOnes(s->mask_type));
        }
    }
    LLVMBasicBlockRef head = new_block(g, "loop.head"), body = new_block(g, "loop.body"),
                      latch = new_block(g, "loop.latch"), exit = new_block(g, "loop.exit");
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, head);
    if (!loop_varying && kj_simd_stmt_may_fail(s, st)) {
        /* every lane runs the turns of a uniform loop, less those failed */
        s->mask = kj_simd_drop_failed(s, before);
        s->stmt_mask = s->mask;
    }

    LLVMValueRef go_on = NULL, i = NULL;
    if (is_for) {
        i = LLVMBuildLoad2(B, ct, counter, "i");
        if (unit_counter) {
            LLVMBuildStore(B, i, g->slots[st->var->id].scalar);
            i = LLVMBuildAdd(B, splat(s, i), iota(s, ct), "i.lanes");
            go_on = LLVMBuildICmp(B, sgn ? LLVMIntSLT : LLVMIntULT, LLVMBuildXor(B, i, splat(s, down), ""),
                                  splat(s, stop), "");
        } else {
            go_on = LLVMBuildICmp(B, sgn ? LLVMIntSLT : LLVMIntULT, LLVMBuildXor(B, i, down, ""), stop, "");
        }
    }
    if (!loop_varying) {
        if (!is_for)
            go_on = kj_codegen_expr(g, st->cond);
        LLVMBuildCondBr(B, go_on, body, exit);
        LLVMPositionBuilderAtEnd(B, body);
    } else {
        /* lanes that returned inside the loop are among the broken ones */
        LLVMValueRef active = carried ? NULL : kj_simd_drop_failed(s, mask_and_not(s, before, loop.break_slot));
        if (!is_for) {
            /* the condition under the lanes still in the loop; one that
             * touches memory only while there are some */
            if (kj_simd_touches_memory(st->cond)) {
                LLVMBasicBlockRef cond_bb = new_block(g, "loop.cond");
                LLVMBuildCondBr(B, any_lane(s, active), cond_bb, exit);
                LLVMPositionBuilderAtEnd(B, cond_bb);
            }
            s->mask = active;
            s->stmt_mask = active;
            push_skip(s, exit); /* every lane left failed a check in the condition */
            go_on = kj_simd_lanes_of(s, st->cond, kj_type_scalar(KJ_TYPE_BOOL));
            s->skip_depth--;
            active = s->mask;
        } else if (!lane_counter) {
            /* a uniform count ends the loop for every lane at once */
            LLVMBasicBlockRef counted = new_block(g, "loop.counted");
            LLVMBuildCondBr(B, go_on, counted, exit);
            LLVMPositionBuilderAtEnd(B, counted);
            go_on = splat_const(s, LLVMConstInt(g->t_i1, 1, 0));
            if (carried)
                active = load_lanes(s, carried);
        }
        /* lanes whose condition fails leave for good, as by break; a
         * condition of no memory needs no record: it stays false for them,
         * the variables it reads being blended (reads_outside), unless a
         * record spares those blends: then the lanes still alive are kept,
         * one mask that the body's blends use as it is */
        bool counted = is_for && !lane_counter; /* go_on is every lane: nothing to record */
        if (!counted && (is_for || !cheap_expr(s, st->cond)))
            add_lanes(s, loop.break_slot, LLVMBuildAnd(B, active, LLVMBuildNot(B, go_on, ""), ""));
        if (!counted)
            active = LLVMBuildAnd(B, active, go_on, "active");
        if (alive) {
            /* (the condition, cheap, ran in the lanes that left too) the
             * masks and-ed as the wide ones they are, so that no compare
             * narrows the slot's for it */
            LLVMValueRef kept = LLVMBuildLoad2(B, s->slot_mask_type, alive, "");
            LLVMValueRef now = LLVMBuildAnd(B, kept, LLVMBuildSExt(B, active, s->slot_mask_type, ""), "");
            LLVMBuildStore(B, wide_masks(s) ? mask_barrier(s, now) : now, alive);
            active = load_mask(s, alive);
        }
        if (carried)
            LLVMBuildBr(B, body);
        else
            LLVMBuildCondBr(B, any_lane(s, active), body, exit);
        LLVMPositionBuilderAtEnd(B, body);
        store_mask(s, loop.continue_slot, no_lanes(s));
        s->mask = active;
    }
    const KjIrStmt *plain_loop = s->plain_loop;
    bool plain = s->plain;
    if (loop_varying && s->loop_depth == 0 && !s->plain_loop) {
        s->plain_loop = st;
        s->plain = !has_continue(st->body);
    } else if (loop_varying) {
        s->plain = false; /* lanes leave this inner loop and read on after it */
    }
    int lane0_count = s->lane0_count;
    if (unit_counter && s->lane0_count < SIMD_MAX_LANE0)
        s->lane0_vars[s->lane0_count++] = st->var;
    if (is_for) {
        if (kj_uniform_var_unit(s->u, st->var))
            LLVMBuildStore(B, i, s->vslots[st->var->id]); /* uniform + lane in every lane */
        else if (kj_uniform_var_varying(s->u, st->var))
            assign_lanes(s, st->var, lane_counter ? i : splat(s, i), true);
        else
            LLVMBuildStore(B, i, g->slots[st->var->id].scalar);
    }
    loop.break_bb = exit;
    loop.continue_bb = latch;
    push_loop(s, loop);
    if (loop_varying)
        push_skip(s, carried ? exit : latch);
    bool counted = is_for && s->checks && s->for_depth < SIMD_MAX_DEPTH;
    if (counted)
        s->for_stack[s->for_depth++] = st;
    gen_stmt(s, st->body);
    if (counted)
        s->for_depth--;
    s->lane0_count = lane0_count;
    if (loop_varying)
        s->skip_depth--;
    if (carried && block_open(s))
        store_lanes(s, carried, s->mask);
    s->loop_depth--;
    s->plain_loop = plain_loop;
    s->plain = plain;
    if (block_open(s))
        LLVMBuildBr(B, latch);
    LLVMPositionBuilderAtEnd(B, latch);
    kj_codegen_debug_loc(g, st->loc);
    if (!is_for || kj_codegen_cancel_loop(g, st))
        kj_codegen_cancel_poll_turn(g, counter, ct, step, NULL);
    if (is_for) {
        LLVMValueRef cur = LLVMBuildLoad2(B, ct, counter, "");
        LLVMBuildStore(B, LLVMBuildAdd(B, cur, step, ""), counter);
    }
    LLVMBuildBr(B, head);
    LLVMPositionBuilderAtEnd(B, exit);
    s->mask = before;
    if (may_leave(s, st))
        refresh_mask(s, before);
}

static void gen_leave(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    if (st->kind == KJ_IR_STMT_RETURN) {
        if (st->value && s->result) {
            LLVMValueRef v = kj_simd_lanes_of(s, st->value, s->fn->ret);
            LLVMValueRef old = LLVMBuildLoad2(s->b, vty(s, s->fn->ret), s->result, "");
            LLVMBuildStore(s->b, blend(s, s->mask, v, old), s->result);
        }
        if (kj_uniform_stmt_divergent(s->u, st)) {
            add_lanes(s, s->returned, s->mask);
            /* and out of every varying loop around: their heads then test
             * one mask, not two */
            for (int k = 0; k < s->loop_depth; k++)
                if (s->loops[k].varying)
                    add_lanes(s, s->loops[k].break_slot, s->mask);
            LLVMBuildBr(s->b, skip_target(s));
        } else {
            LLVMBuildBr(s->b, s->exit_bb);
        }
        start_dead_block(s);
        return;
    }
    SimdLoop *loop = current_loop(s);
    if (!loop) {
        kj_codegen_error(g, "break or continue outside a loop%s", NULL);
        return;
    }
    bool is_break = st->kind == KJ_IR_STMT_BREAK;
    if (loop->varying) {
        add_lanes(s, is_break ? loop->break_slot : loop->continue_slot, s->mask);
        LLVMBuildBr(s->b, skip_target(s));
    } else {
        LLVMBuildBr(s->b, is_break ? loop->break_bb : loop->continue_bb);
    }
    start_dead_block(s);
}

/* A vectorized kernel's PARFOR: one chunk of its elements, lane k element
 * lane_base + k (target_cpu.c's __range walks the chunks). */
static void gen_parfor(Simd *s, KjIrStmt *st, LLVMValueRef first)
{
    LLVMValueRef index = LLVMBuildAdd(s->b, splat(s, first), iota(s, s->g->t_i64), "element");
    LLVMBuildStore(s->b, index, s->vslots[st->var->id]);
    gen_stmt(s, st->body);
}

static void gen_assign(Simd *s, KjIrStmt *st)
{
    if (st->kind == KJ_IR_STMT_SET)
        gen_set(s, st);
    else
        gen_store(s, st);
    take_call_outputs(s, st);
}

/* Checked mode: a SET or STORE whose checks were tested ahead (`passes`,
 * kj_simd_precheck) twice: without checks when every running lane passes
 * them (the unchecked code, its masks as they were), else as checked code,
 * each lane stopped at its own first failure. */
static void gen_prechecked(Simd *s, KjIrStmt *st, LLVMValueRef passes)
{
    Gen *g = s->g;
    LLVMValueRef mask = s->mask;
    KjIrVar *even_var = s->even_var;
    const KjIrVar *lane0[SIMD_MAX_LANE0];
    memcpy(lane0, s->lane0_vars, sizeof lane0);
    LLVMBasicBlockRef fast = new_block(g, "stmt.passes"), slow = new_block(g, "stmt.checks"),
                      done = new_block(g, "stmt.done");
    LLVMBuildCondBr(s->b, passes, fast, slow);
    LLVMValueRef masks[2];
    LLVMBasicBlockRef ends[2];
    int n = 0;
    for (int copy = 0; copy < 2; copy++) {
        LLVMPositionBuilderAtEnd(s->b, copy == 0 ? fast : slow);
        s->mask = s->stmt_mask = mask;
        s->even_var = even_var;
        memcpy(s->lane0_vars, lane0, sizeof lane0);
        s->proven = copy == 0;
        gen_assign(s, st);
        s->proven = false;
        if (block_open(s)) {
            masks[n] = s->mask;
            ends[n++] = LLVMGetInsertBlock(s->b);
            LLVMBuildBr(s->b, done);
        }
    }
    LLVMPositionBuilderAtEnd(s->b, done);
    if (n == 0) {
        s->mask = no_lanes(s);
    } else if (n == 1 || masks[0] == masks[1]) {
        s->mask = masks[0];
    } else {
        LLVMValueRef phi = LLVMBuildPhi(s->b, s->mask_type, "lanes");
        LLVMAddIncoming(phi, masks, ends, n);
        s->mask = phi;
    }
    s->stmt_mask = s->mask;
}

static void gen_stmt(Simd *s, KjIrStmt *st)
{
    Gen *g = s->g;
    if (!block_open(s))
        start_dead_block(s);
    if (st->kind != KJ_IR_STMT_BLOCK)
        kj_codegen_debug_loc(g, st->loc);
    s->stmt_mask = s->mask; /* checked mode: the lanes the statement starts with */
    s->escape = NULL;
    switch (st->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < st->stmts.count; i++)
            gen_stmt(s, st->stmts.items[i]);
        return;
    case KJ_IR_STMT_EVAL:
        if (simd_varying(s, st->value))
            kj_simd_expr(s, st->value);
        else
            kj_codegen_expr(g, st->value);
        take_call_outputs(s, st);
        return;
    case KJ_IR_STMT_SET:
    case KJ_IR_STMT_STORE: {
        LLVMValueRef passes = kj_simd_precheck(s, st);
        if (passes)
            gen_prechecked(s, st, passes);
        else
            gen_assign(s, st);
        return;
    }
    case KJ_IR_STMT_IF:
        if (st == g->rows_guard) /* the rows run only the threads that pass it */
            gen_stmt(s, st->then_stmt);
        else
            gen_if(s, st);
        return;
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE: {
        KjIrStmt **loops; /* a loop split over groups of its accumulators */
        int count;
        if (kj_simd_fission(s, st, &loops, &count)) {
            for (int i = 0; i < count; i++)
                gen_loop(s, loops[i]);
        } else {
            gen_loop(s, st);
        }
        return;
    }
    case KJ_IR_STMT_BREAK: case KJ_IR_STMT_CONTINUE: case KJ_IR_STMT_RETURN: gen_leave(s, st); return;
    case KJ_IR_STMT_PARFOR:
        kj_codegen_error(g, "a parallel loop inside a function on SIMD lanes%s", NULL);
        return;
    case KJ_IR_STMT_THREADS: /* split forms are lowered by codegen_llvm.c */
        kj_codegen_error(g, "a loop over a block's threads inside a function on SIMD lanes%s", NULL);
        return;
    case KJ_IR_STMT_COUNT:
        break;
    }
    kj_unreachable();
}

/* ============================================================ functions */

/* Slots of every variable: scalar ones for uniform variables and arrays
 * (the shared lowering reads those), vectors for varying ones; all start
 * at zero. */
static void make_slots(Simd *s)
{
    Gen *g = s->g;
    KjIrFunction *fn = s->fn;
    int max_id = -1;
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        if (v->id > max_id)
            max_id = v->id;
    }
    g->slot_count = max_id + 1;
    g->slots = kj_xcalloc((size_t)g->slot_count + 1, sizeof(VarSlot));
    s->vslots = kj_xcalloc((size_t)g->slot_count + 1, sizeof *s->vslots);
    for (int i = 0; i < fn->locals.count; i++) {
        KjIrVar *v = fn->locals.items[i];
        VarSlot *slot = &g->slots[v->id];
        if (is_array(v->type)) {
            slot->array.data = LLVMBuildAlloca(s->b, g->t_ptr, v->name);
            LLVMBuildStore(s->b, LLVMConstNull(g->t_ptr), slot->array.data);
            for (int k = 0; k < v->type->ndim; k++) {
                slot->array.shape[k] = LLVMBuildAlloca(s->b, g->t_i64, "shape");
                slot->array.strides[k] = LLVMBuildAlloca(s->b, g->t_i64, "stride");
                LLVMBuildStore(s->b, const_i64(g, 0), slot->array.shape[k]);
                LLVMBuildStore(s->b, const_i64(g, 0), slot->array.strides[k]);
            }
        } else if (v->type->kind != KJ_TYPE_VOID) {
            if (kj_uniform_var_varying(s->u, v)) {
                s->vslots[v->id] = LLVMBuildAlloca(s->b, vty(s, v->type), v->name);
                LLVMBuildStore(s->b, LLVMConstNull(vty(s, v->type)), s->vslots[v->id]);
            }
            /* a scalar slot too: kj_codegen_expr of a uniform expression
             * never reads it for a varying variable, but it must exist */
            slot->scalar = LLVMBuildAlloca(s->b, llty(g, v->type), v->name);
            LLVMBuildStore(s->b, zero_of(g, v->type), slot->scalar);
        }
    }
}

/* The parameters, from index 0: arrays into their slots, scalars into
 * theirs (vectors for a callee, repeated for a varying one of a root). */
static unsigned bind_params(Simd *s)
{
    Gen *g = s->g;
    KjIrFunction *fn = s->fn;
    unsigned p = 0;
    for (int i = 0; i < fn->param_count; i++) {
        KjIrVar *v = fn->params[i];
        VarSlot *slot = &g->slots[v->id];
        if (is_array(v->type)) {
            p = kj_codegen_bind_array_param(g, p, &slot->array, v->type->ndim);
            continue;
        }
        LLVMValueRef x = LLVMGetParam(g->llfn, p++);
        if (s->role == ROLE_CALLEE && i < 64 && (s->varying_params >> i & 1u)) {
            LLVMBuildStore(s->b, x, s->vslots[v->id]);
        } else {
            LLVMBuildStore(s->b, x, slot->scalar);
            if (s->vslots[v->id])
                LLVMBuildStore(s->b, splat(s, x), s->vslots[v->id]);
        }
    }
    return p;
}

/* Every mask used in a block other than its own reaches it wide (see
 * widen_mask): widened once after its definition, narrowed before each use.
 * Phis of masks are left as they are. */
/* Whether slot is one of the function's mask allocas (break, continue,
 * returned), not a variable's that happens to have their type. */
static bool is_mask_slot(Simd *s, LLVMValueRef slot)
{
    for (int i = 0; i < s->mask_slot_count; i++)
        if (s->mask_slots[i] == slot)
            return true;
    return false;
}

void kj_simd_widen_crossing_masks(Simd *s, LLVMValueRef entry_mask, LLVMBasicBlockRef first_bb)
{
    LLVMBuilderRef b = s->b;
    for (LLVMBasicBlockRef bb = first_bb; bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef def = LLVMGetFirstInstruction(bb); def; def = LLVMGetNextInstruction(def)) {
            /* the lanes a chunk starts with become a constant once inlined
             * into the entry's loop over whole chunks: left in the open */
            if (LLVMTypeOf(def) != s->mask_type || LLVMIsAPHINode(def) || def == entry_mask)
                continue;
            LLVMValueRef wide = NULL;
            LLVMUseRef next;
            for (LLVMUseRef use = LLVMGetFirstUse(def); use; use = next) {
                next = LLVMGetNextUse(use);
                LLVMValueRef user = LLVMGetUser(use);
                if (LLVMIsAPHINode(user) || !LLVMIsAInstruction(user) || LLVMGetInstructionParent(user) == bb)
                    continue;
                if (!wide) {
                    /* a mask narrowed from a wide one (a mask slot's, or a
                     * barrier's) crosses as that one */
                    LLVMValueRef from = LLVMGetNumOperands(def) > 0 ? LLVMGetOperand(def, 0) : NULL;
                    bool from_wide = from && LLVMTypeOf(from) == s->slot_mask_type &&
                                     (LLVMIsALoadInst(from) || (LLVMIsACallInst(from) &&
                                                                LLVMIsAInlineAsm(LLVMGetCalledValue(from))));
                    if (LLVMGetInstructionOpcode(def) == LLVMICmp && LLVMGetICmpPredicate(def) == LLVMIntSLT &&
                        from_wide && LLVMIsNull(LLVMGetOperand(def, 1)) &&
                        (!LLVMIsALoadInst(from) || is_mask_slot(s, LLVMGetOperand(from, 0)))) {
                        wide = from;
                    } else {
                        LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(def));
                        wide = widen_mask(s, def);
                    }
                }
                /* the mask's lanes made all ones or zero again (a byte
                 * blend's, blend_bytes) are the wide ones, cut or extended
                 * to their width: no compare remakes them */
                if (LLVMGetInstructionOpcode(user) == LLVMSExt) {
                    LLVMPositionBuilderBefore(b, user);
                    unsigned to = LLVMGetIntTypeWidth(LLVMGetElementType(LLVMTypeOf(user)));
                    unsigned from = LLVMGetIntTypeWidth(LLVMGetElementType(s->slot_mask_type));
                    LLVMValueRef same = to == from ? wide
                                        : to < from ? LLVMBuildTrunc(b, wide, LLVMTypeOf(user), "")
                                                    : LLVMBuildSExt(b, wide, LLVMTypeOf(user), "");
                    LLVMReplaceAllUsesWith(user, same);
                    continue;
                }
                LLVMPositionBuilderBefore(b, user);
                LLVMValueRef narrow = narrow_mask(s, wide);
                for (unsigned k = 0; k < (unsigned)LLVMGetNumOperands(user); k++)
                    if (LLVMGetOperand(user, k) == def)
                        LLVMSetOperand(user, k, narrow);
            }
        }
    }
}

void kj_simd_mask_types(Simd *s)
{
    Gen *g = s->g;
    s->mask_type = vec_of(s, g->t_i1);
    int mask_bits = register_bytes(g) * 8 / s->lanes;
    s->slot_mask_type = vec_of(s, LLVMIntTypeInContext(g->ctx, (unsigned)(mask_bits < 8 ? 8 : mask_bits > 64 ? 64 : mask_bits)));
    const char *triple = LLVMGetTarget(g->mod);
    s->wide_masks = strncmp(triple, "x86_64", 6) == 0 && register_bytes(g) < 64;
}

/* Defines llfn, fn's code on s->lanes lanes in role. */
static void define(Gen *g, KjIrFunction *fn, Role role, uint64_t varying_params, int lanes, LLVMValueRef llfn,
                   Pending *pending, int *pending_count)
{
    Simd simd = {.g = g, .b = g->b, .lanes = lanes, .role = role, .fn = fn, .pending = pending,
                 .pending_count = pending_count, .varying_params = varying_params};
    Simd *s = &simd;
    SimdChecks checks;
    kj_simd_mask_types(s);
    KjUniformSources sources = role == ROLE_CALLEE ? (KjUniformSources){.params = varying_params}
                                                   : root_sources(fn);
    s->u = kj_uniform_analyze(&s->arena, fn, sources);

    g->fn = fn;
    g->llfn = llfn;
    g->loop_depth = 0;
    g->thread_ctx = g->shared_base = g->range_begin = g->range_end = NULL;
    g->shared_offset = 0;
    memset(g->sreg, 0, sizeof g->sreg);
    kj_codegen_debug_function(g, llfn, fn->name, fn->loc);
    g->entry_bb = new_block(g, "entry");
    LLVMBasicBlockRef start = new_block(g, "start");
    LLVMPositionBuilderAtEnd(s->b, g->entry_bb);
    LLVMBuildBr(s->b, start);
    LLVMPositionBuilderBefore(s->b, LLVMGetBasicBlockTerminator(g->entry_bb));
    make_slots(s);
    unsigned p = bind_params(s);
    LLVMValueRef count = NULL, first = NULL, record = NULL;
    if (role == ROLE_KERNEL) {
        g->target->bind_hidden_params(g, fn, p); /* ctx, threadIdx.x/y/z, as the impl's */
        s->lane_base = LLVMGetParam(llfn, p + 1);
        count = LLVMGetParam(llfn, p + 4);
        if (g->options->checks)
            record = LLVMGetParam(llfn, p + 5);
    } else if (role == ROLE_VEC_KERNEL) {
        first = LLVMGetParam(llfn, p);
        count = LLVMGetParam(llfn, p + 1);
    }
    if (kj_uniform_divergent_return(s->u)) {
        s->returned = mask_slot(s, "returned");
        store_mask(s, s->returned, no_lanes(s));
    }
    /* checked mode: only a kernel's own code can fail on lanes (kj_simd_lanes) */
    kj_simd_checks_begin(s, &checks, record, false);
    if (role == ROLE_CALLEE && fn->ret->kind != KJ_TYPE_VOID) {
        s->result = LLVMBuildAlloca(s->b, vty(s, fn->ret), "result");
        LLVMBuildStore(s->b, LLVMConstNull(vty(s, fn->ret)), s->result);
    }

    LLVMPositionBuilderAtEnd(s->b, start);
    if (role == ROLE_CALLEE)
        s->mask = LLVMGetParam(llfn, p);
    else
        s->mask = LLVMBuildICmp(s->b, LLVMIntULT, iota(s, g->t_i32), splat(s, count), "lanes");
    LLVMValueRef entry_mask = s->mask;
    s->exit_bb = new_block(g, "exit");
    push_skip(s, s->exit_bb);
    kj_simd_checks_chunk_start(s);
    if (role == ROLE_VEC_KERNEL)
        gen_parfor(s, fn->body->stmts.items[0], first);
    else
        gen_stmt(s, fn->body);
    if (block_open(s))
        LLVMBuildBr(s->b, s->exit_bb);
    LLVMPositionBuilderAtEnd(s->b, s->exit_bb);
    kj_simd_checks_publish(s);
    if (s->result && fn->output_count > 1) {
        /* several outputs: outputs 1.. from their variables, each lane's as
         * it returned (a lane that has returned assigns nothing more) */
        LLVMValueRef r = LLVMGetUndef(kj_simd_outputs_type(s, fn));
        r = LLVMBuildInsertValue(s->b, r, LLVMBuildLoad2(s->b, vty(s, fn->ret), s->result, ""), 0, "");
        for (int k = 1; k < fn->output_count; k++) {
            KjIrExpr *read = kj_ir_var_ref(&s->arena, fn->outputs[k], fn->loc);
            r = LLVMBuildInsertValue(s->b, r, kj_simd_lanes_of(s, read, fn->outputs[k]->type),
                                     (unsigned)k, "");
        }
        LLVMBuildRet(s->b, r);
    } else if (s->result)
        LLVMBuildRet(s->b, LLVMBuildLoad2(s->b, vty(s, fn->ret), s->result, ""));
    else
        LLVMBuildRetVoid(s->b);
    if (wide_masks(s))
        kj_simd_widen_crossing_masks(s, entry_mask, LLVMGetFirstBasicBlock(g->llfn));
    kj_simd_checks_end(s, &checks);
    kj_codegen_check_shared(g, fn);
    free(g->slots);
    g->slots = NULL;
    free(s->vslots);
    kj_arena_free(&s->arena);
}

static LLVMValueRef define_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type, const char *suffix);

LLVMValueRef kj_simd_define_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type)
{
    return define_chunk(g, fn, lanes, type, "simd");
}

LLVMValueRef kj_simd_define_rows_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type)
{
    g->rows_guard = fn->grid_rows.guard;
    LLVMValueRef chunk = define_chunk(g, fn, lanes, type, "rows");
    g->rows_guard = NULL;
    return chunk;
}

static LLVMValueRef define_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type, const char *suffix)
{
    Simd probe = {.g = g, .lanes = lanes};
    LLVMTypeRef extra[6];
    int extra_count;
    if (fn->kind == KJ_IR_FN_KERNEL) {
        extra[0] = g->t_ptr;
        extra[1] = extra[2] = extra[3] = extra[4] = g->t_i32;
        extra_count = 5;
        if (g->options->checks) /* checked mode: the call's KjCheckRecord */
            extra[extra_count++] = g->t_ptr;
    } else {
        extra[0] = g->t_i64;
        extra[1] = g->t_i32;
        extra_count = 2;
    }
    *type = kj_simd_function_type(&probe, fn, 0, g->t_void, extra, extra_count);
    char symbol[480], name[512];
    kj_kernel_variant_symbol(fn, kj_codegen_root_contiguous(g, fn), symbol, sizeof symbol);
    snprintf(name, sizeof name, "%s__%s%d", symbol, suffix, lanes);
    LLVMValueRef chunk = LLVMAddFunction(g->mod, name, *type);
    LLVMSetLinkage(chunk, LLVMInternalLinkage);
    kj_simd_function_attrs(g, chunk);
    if (fn->kind == KJ_IR_FN_KERNEL)
        kj_codegen_add_param_attr(g, chunk, (unsigned)((int)LLVMCountParamTypes(*type) - extra_count), "noalias", 0);

    Pending pending[SIMD_MAX_PENDING];
    int pending_count = 0;
    define(g, fn, fn->kind == KJ_IR_FN_KERNEL ? ROLE_KERNEL : ROLE_VEC_KERNEL, 0, lanes, chunk, pending,
           &pending_count);
    kj_simd_define_pending(g, lanes, pending, &pending_count);
    return chunk;
}

void kj_simd_define_pending(Gen *g, int lanes, Pending *pending, int *pending_count)
{
    /* the SIMD variants of the functions called with varying arguments,
     * and of those they call */
    for (int i = 0; i < *pending_count && !g->error; i++) {
        char name[512];
        kj_simd_callee_name(pending[i].fn, lanes, pending[i].varying_params, name, sizeof name);
        LLVMValueRef callee = LLVMGetNamedFunction(g->mod, name);
        if (LLVMCountBasicBlocks(callee) == 0)
            define(g, pending[i].fn, ROLE_CALLEE, pending[i].varying_params, lanes, callee, pending,
                   pending_count);
    }
}

void kj_simd_stmt(Simd *s, KjIrStmt *st) { gen_stmt(s, st); }

void kj_simd_push_skip(Simd *s, LLVMBasicBlockRef bb) { push_skip(s, bb); }
