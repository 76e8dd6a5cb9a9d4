/*
 * uniform.c: the uniformity analysis.  Given which inputs of a function
 * differ between the threads (or elements) that run it side by side, it
 * says which variables, expressions and statements do too.
 *
 * Needs: a checked function (any kind), and its varying sources: special
 * registers (threadIdx.x ...), parameters, the PARFOR index.
 * Gives: for every variable, whether it is varying; for every statement,
 * whether it runs under varying control flow (divergent: some of the
 * threads may be inactive there); for every loop, whether its exit is
 * varying; for array accesses, whether the element is the same for every
 * thread (uniform), one after another (contiguous: uniform + the lane's
 * index with unit step) or anything else (general).
 *
 * The rules, run to a fixed point:
 *   - an expression is varying when an operand is, or it reads a varying
 *     source, a varying variable or a per-thread array (local()); atomics,
 *     laneid() and the warp collectives are always varying; a call is
 *     varying when an argument is or the callee has effects of its own
 *     (stores, atomics, print) or reads the thread (a device function);
 *   - an `if` on a varying condition makes both sides divergent; a loop whose
 *     exit is varying (a varying condition or bounds, a `break` or `return`
 *     under divergence inside it) makes its body divergent, and a varying
 *     `continue` does too; after a divergent break, continue or return, the
 *     rest of the enclosing block is divergent;
 *   - a variable assigned in a divergent statement is varying (the threads
 *     that skip the assignment keep their old value); so is one assigned a
 *     varying value anywhere;
 *   - a function's result is varying when some return value is, or some
 *     return is divergent.
 * The analysis is conservative: "uniform" is a promise, "varying" is not.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ pointer sets */

/* Open addressing over pointers: which statements are divergent, which
 * loops have a varying exit.  Sized once from the statement count. */
typedef struct PtrSet {
    const void **slots;
    int capacity; /* a power of two */
} PtrSet;

static unsigned ptr_hash(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(x >> 32);
}

static bool set_has(const PtrSet *s, const void *p)
{
    for (unsigned i = ptr_hash(p) & (unsigned)(s->capacity - 1);; i = (i + 1) & (unsigned)(s->capacity - 1)) {
        if (s->slots[i] == p)
            return true;
        if (!s->slots[i])
            return false;
    }
}

/* true when p was not there yet */
static bool set_add(PtrSet *s, const void *p)
{
    for (unsigned i = ptr_hash(p) & (unsigned)(s->capacity - 1);; i = (i + 1) & (unsigned)(s->capacity - 1)) {
        if (s->slots[i] == p)
            return false;
        if (!s->slots[i]) {
            s->slots[i] = p;
            return true;
        }
    }
}

/* ============================================================ the result */

struct KjUniformity {
    const KjIrFunction *fn;
    KjUniformSources sources;
    int var_count;
    bool *varying;   /* by KjIrVar.id */
    bool *not_unit;  /* by id: some assignment is not uniform + lane, or divergent */
    bool *assigned;  /* by id: assigned somewhere (params count as assigned) */
    PtrSet divergent;   /* statements */
    PtrSet loop_varying; /* FOR and WHILE statements whose exit is varying */
    PtrSet private_counter; /* FOR statements whose variable nothing outside the
                               loop (its body) reads: see walk_stmt's FOR */
    bool result_varying;
    bool divergent_return;
    bool changed;
};

static KjIrWalkStep count_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    ++*(int *)w->data;
    return KJ_IR_WALK_ON;
}

static int count_stmts(const KjIrStmt *s)
{
    int n = 0;
    KjIrWalk w = {.stmt = count_stmt, .data = &n};
    kj_ir_walk_stmt(&w, s);
    return n;
}

static void mark_var(KjUniformity *u, const KjIrVar *v)
{
    if (v->id >= 0 && v->id < u->var_count && !u->varying[v->id]) {
        u->varying[v->id] = true;
        u->changed = true;
    }
}

static void mark_not_unit(KjUniformity *u, const KjIrVar *v)
{
    if (v->id >= 0 && v->id < u->var_count && !u->not_unit[v->id]) {
        u->not_unit[v->id] = true;
        u->changed = true;
    }
}

/* ============================================================ calls */

static bool call_has_effects(const KjIrFunction *callee, int depth);

/* Stores, atomics, print or a read of the thread, here or in a callee: the
 * walk (ir.c) stops at the first; its data is the depth of calls. */
static bool expr_without_effects(KjIrWalk *w, const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_ATOMIC: case KJ_IR_PRINT: case KJ_IR_EXEC: case KJ_IR_SREG: case KJ_IR_LOCAL:
    case KJ_IR_SYNCTHREADS:
        return false;
    case KJ_IR_CALL:
        return !(e->callee && call_has_effects(e->callee, *(int *)w->data + 1));
    default:
        return true;
    }
}

static KjIrWalkStep stop_at_store(KjIrWalk *w, const KjIrStmt *s)
{
    return s->kind == KJ_IR_STMT_STORE ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool stmt_has_effects(const KjIrStmt *s, int depth)
{
    KjIrWalk w = {.stmt = stop_at_store, .expr = expr_without_effects, .data = &depth};
    return !kj_ir_walk_stmt(&w, s);
}

/* Remembered in the callee: a function that calls another twice, each of
 * those two calls twice, and so on, would be walked once per path through
 * the call tree, 2^depth times (the checker refuses recursion, so the walk
 * ends).  A function's body does not change once checked.  A chain of calls
 * deeper than 64 is taken to have effects (the safe answer) rather than
 * walked: the walk recurses, and a file may chain thousands of functions. */
static bool call_has_effects(const KjIrFunction *callee, int depth)
{
    if (callee->effects == KJ_EFFECTS_UNKNOWN) {
        bool some = callee->device_use || depth > 64 || stmt_has_effects(callee->body, depth);
        ((KjIrFunction *)callee)->effects = some ? KJ_EFFECTS_SOME : KJ_EFFECTS_NONE;
    }
    return callee->effects == KJ_EFFECTS_SOME;
}

bool kj_uniform_call_has_effects(const KjIrFunction *callee)
{
    return call_has_effects(callee, 0);
}

/* ============================================================ expressions */

bool kj_uniform_expr_varying(const KjUniformity *u, const KjIrExpr *e)
{
    if (!e)
        return false;
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_SHARED: case KJ_IR_DYNAMIC_SHARED: case KJ_IR_SYNCTHREADS:
    case KJ_IR_CONST_ARRAY:
        return false;
    case KJ_IR_VAR:
        return kj_uniform_var_varying(u, e->var);
    case KJ_IR_SREG:
        return e->sreg < 32 && (u->sources.sregs >> e->sreg & 1u);
    case KJ_IR_LOCAL:
        return !u->sources.block_locals;
    case KJ_IR_ATOMIC: case KJ_IR_PRINT:
        return true;
    case KJ_IR_EXEC:
        return kj_exec_form[e->exec] != KJ_EXEC_FORM_FENCE;
    case KJ_IR_LOAD:
        if (u->sources.loads)
            return true;
        break;
    case KJ_IR_CALL:
        if (e->callee && (u->sources.loads || kj_uniform_call_has_effects(e->callee)))
            return true;
        break;
    default:
        break;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (kj_uniform_expr_varying(u, e->args[i]))
            return true;
    return false;
}

/* Whether e is uniform + the lane's index (unit step between threads). */
bool kj_uniform_expr_unit(const KjUniformity *u, const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_SREG:
        return e->sreg == KJ_SREG_TID_X && (u->sources.sregs >> KJ_SREG_TID_X & 1u);
    case KJ_IR_VAR:
        return kj_uniform_var_unit(u, e->var);
    case KJ_IR_CAST:
        /* widening between integers keeps the step (the lanes' values are
         * assumed not to wrap between neighbours) */
        return kj_type_is_int(e->type) && kj_type_is_int(e->args[0]->type) &&
               kj_type_int_bits(e->type) >= kj_type_int_bits(e->args[0]->type) &&
               kj_uniform_expr_unit(u, e->args[0]);
    case KJ_IR_ADD:
        if (!kj_type_is_int(e->type))
            return false;
        return (kj_uniform_expr_unit(u, e->args[0]) && !kj_uniform_expr_varying(u, e->args[1])) ||
               (kj_uniform_expr_unit(u, e->args[1]) && !kj_uniform_expr_varying(u, e->args[0]));
    case KJ_IR_SUB:
        return kj_type_is_int(e->type) && kj_uniform_expr_unit(u, e->args[0]) &&
               !kj_uniform_expr_varying(u, e->args[1]);
    default:
        return false;
    }
}

/* ============================================================ statements */

/* Whether s reads var outside the body of `loop` (its bounds count as
 * outside: they are read before the variable is set). */
typedef struct ReadsOutside {
    const KjIrVar *var;
    const KjIrStmt *loop;
} ReadsOutside;

static KjIrWalkStep stop_at_read_outside(KjIrWalk *w, const KjIrStmt *s)
{
    const ReadsOutside *r = w->data;
    if (kj_ir_stmt_exprs_read(s, r->var, true))
        return KJ_IR_WALK_STOP;
    return s == r->loop ? KJ_IR_WALK_SKIP : KJ_IR_WALK_ON;
}

static bool reads_outside(const KjIrStmt *s, const KjIrVar *var, const KjIrStmt *loop)
{
    ReadsOutside r = {var, loop};
    KjIrWalk w = {.stmt = stop_at_read_outside, .data = &r};
    return !kj_ir_walk_stmt(&w, s);
}

/* Fills u->private_counter from the FOR statements of the function. */
static KjIrWalkStep note_private_counter(KjIrWalk *w, const KjIrStmt *s)
{
    KjUniformity *u = w->data;
    if (s->kind == KJ_IR_STMT_FOR && !reads_outside(u->fn->body, s->var, s))
        set_add(&u->private_counter, s);
    return KJ_IR_WALK_ON;
}

/* How a statement may leave under divergence: some threads break, continue
 * or return while others go on. */
enum { LEAVES_BREAK = 1, LEAVES_CONTINUE = 2, LEAVES_RETURN = 4 };

typedef struct Walk {
    bool divergent;      /* some threads of the function may be inactive here */
    bool loop_divergent; /* ... because of something inside the innermost loop */
} Walk;

static void assign(KjUniformity *u, const KjIrVar *var, const KjIrExpr *value, Walk w)
{
    if (var->id < 0 || var->id >= u->var_count)
        return;
    u->assigned[var->id] = true;
    if (w.divergent || (value && kj_uniform_expr_varying(u, value)))
        mark_var(u, var);
    if (w.divergent || !value || !kj_uniform_expr_unit(u, value))
        mark_not_unit(u, var);
}

/*
 * One round of the fixed point is a walk of the function (ir.c's walk):
 * `flow_stmt` on each statement, with what it runs under (the Walk its
 * enclosing statement gives it) and what the statements under it will run
 * under; `flow_leave` after them, with how they may leave under divergence,
 * which it hands to the enclosing statement: in a block, the rest runs
 * divergent for the threads that did not leave.  A frame per statement on
 * the way down holds both.
 */
typedef struct Frame {
    const KjIrStmt *s;
    Walk under; /* what the statements under s run under (a block's changes
                   as its statements leave) */
    int leaves; /* how the statements under s, as far as walked, may leave */
} Frame;

typedef struct Flow {
    KjUniformity *u;
    Frame *frames;
    int depth, cap;
} Flow;

/* A loop whose exit is varying (its condition or bounds, or something in it
 * that left under divergence in an earlier round) runs its body divergent. */
static Walk loop_body(KjUniformity *u, const KjIrStmt *s, Walk w, bool exit_varying)
{
    if (exit_varying && set_add(&u->loop_varying, s))
        u->changed = true;
    return (Walk){w.divergent || exit_varying, exit_varying};
}

static KjIrWalkStep flow_stmt(KjIrWalk *walk, const KjIrStmt *s)
{
    Flow *f = walk->data;
    KjUniformity *u = f->u;
    Walk w = f->depth ? f->frames[f->depth - 1].under : (Walk){false, false};
    if (w.divergent && set_add(&u->divergent, s))
        u->changed = true;
    Frame frame = {s, w, 0};
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        break;
    case KJ_IR_STMT_EVAL: case KJ_IR_STMT_STORE: case KJ_IR_STMT_SET:
        if (s->kind == KJ_IR_STMT_SET)
            assign(u, s->var, s->value, w);
        /* a call of several outputs (vectorize.c) sets its variables too,
         * as varying as the call */
        if (s->value && s->value->op == KJ_IR_CALL && s->value->call_outputs)
            for (int k = 1; k < s->value->callee->output_count; k++)
                assign(u, s->value->call_outputs[k], s->value, w);
        break;
    case KJ_IR_STMT_IF:
        if (kj_uniform_expr_varying(u, s->cond))
            frame.under = (Walk){true, true};
        break;
    case KJ_IR_STMT_FOR: {
        bool exit_varying = kj_uniform_expr_varying(u, s->start) ||
                            kj_uniform_expr_varying(u, s->stop) ||
                            kj_uniform_expr_varying(u, s->step) ||
                            set_has(&u->loop_varying, s);
        /* A counter read only in its loop's body: every thread that runs
         * the body has just been given it, so the threads that skip the loop
         * (divergence outside it) never read it.  Under a uniform exit it is
         * the same in every running thread: uniform.  Under a varying exit
         * the lowering steps it in every lane (never blended): from a start
         * of uniform + lane by a uniform step it stays uniform + lane. */
        bool private_counter = set_has(&u->private_counter, s);
        Walk at = w;
        at.divergent = (w.divergent && !private_counter) || exit_varying;
        if (exit_varying && private_counter && !kj_uniform_expr_varying(u, s->step) &&
            kj_uniform_expr_unit(u, s->start) && s->var->id >= 0 && s->var->id < u->var_count) {
            u->assigned[s->var->id] = true;
            mark_var(u, s->var);
        } else {
            assign(u, s->var, exit_varying ? NULL : s->start, at);
        }
        if (exit_varying)
            mark_var(u, s->var);
        frame.under = loop_body(u, s, w, exit_varying);
        break;
    }
    case KJ_IR_STMT_WHILE:
        frame.under = loop_body(u, s, w, kj_uniform_expr_varying(u, s->cond) ||
                                             set_has(&u->loop_varying, s));
        break;
    case KJ_IR_STMT_PARFOR:
        if (s->var->id >= 0 && s->var->id < u->var_count) {
            u->assigned[s->var->id] = true;
            if (u->sources.parfor_var)
                mark_var(u, s->var);
            else
                mark_not_unit(u, s->var);
            if (w.divergent)
                mark_not_unit(u, s->var);
        }
        frame.under = (Walk){w.divergent, false};
        break;
    case KJ_IR_STMT_THREADS:
        /* a split form's loop over the threads (barrier_split.c): a return
         * in it ends the thread's part of this region (barrier_split.c
         * splits only kernels whose returns come after the last barrier);
         * what follows runs once for the block, every thread done, so it is
         * not divergent (it copies the uniform variables the region set
         * back to their scalar slots: campaign seed 600903): flow_leave
         * hands nothing up */
        frame.under = (Walk){w.divergent, false};
        break;
    case KJ_IR_STMT_BREAK:
        frame.leaves = w.loop_divergent ? LEAVES_BREAK : 0;
        break;
    case KJ_IR_STMT_CONTINUE:
        frame.leaves = w.loop_divergent ? LEAVES_CONTINUE : 0;
        break;
    case KJ_IR_STMT_RETURN:
        if (s->value && kj_uniform_expr_varying(u, s->value) && !u->result_varying) {
            u->result_varying = true;
            u->changed = true;
        }
        if (w.divergent) {
            if (!u->divergent_return || !u->result_varying)
                u->changed = true;
            u->divergent_return = true;
            u->result_varying = true;
            frame.leaves = LEAVES_RETURN;
        }
        break;
    case KJ_IR_STMT_COUNT:
        kj_unreachable();
    }
    if (f->depth == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 32;
        f->frames = kj_xrealloc(f->frames, sizeof *f->frames * (size_t)f->cap);
    }
    f->frames[f->depth++] = frame;
    return KJ_IR_WALK_ON;
}

static void flow_leave(KjIrWalk *walk, const KjIrStmt *s)
{
    Flow *f = walk->data;
    int leaves = f->frames[--f->depth].leaves;
    switch (s->kind) {
    case KJ_IR_STMT_FOR: case KJ_IR_STMT_WHILE:
        /* something in the body leaves under divergence: the loop's exit is
         * varying, and the next round walks the body again as divergent */
        if (leaves && set_add(&f->u->loop_varying, s))
            f->u->changed = true;
        leaves &= LEAVES_RETURN;
        break;
    case KJ_IR_STMT_PARFOR:
        leaves &= LEAVES_RETURN;
        break;
    case KJ_IR_STMT_THREADS:
        leaves = 0;
        break;
    default:
        break;
    }
    if (!leaves || f->depth == 0)
        return;
    Frame *up = &f->frames[f->depth - 1];
    up->leaves |= leaves;
    if (up->s->kind == KJ_IR_STMT_BLOCK) {
        /* the rest of the block runs for the threads that did not leave */
        up->under.divergent = true;
        if (leaves & (LEAVES_BREAK | LEAVES_CONTINUE))
            up->under.loop_divergent = true;
    }
}

KjUniformity *kj_uniform_analyze(KjArena *arena, const KjIrFunction *fn, KjUniformSources sources)
{
    KjUniformity *u = kj_arena_alloc(arena, sizeof *u);
    u->fn = fn;
    u->sources = sources;
    int max_id = -1;
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *v = fn->locals.items[i];
        if (v->id > max_id)
            max_id = v->id;
    }
    for (int i = 0; i < fn->param_count; i++)
        if (fn->params[i]->id > max_id)
            max_id = fn->params[i]->id;
    u->var_count = max_id + 1;
    u->varying = kj_arena_alloc(arena, (size_t)u->var_count + 1);
    u->not_unit = kj_arena_alloc(arena, (size_t)u->var_count + 1);
    u->assigned = kj_arena_alloc(arena, (size_t)u->var_count + 1);
    int capacity = 16;
    while (capacity < 2 * count_stmts(fn->body) + 2)
        capacity *= 2;
    u->divergent = (PtrSet){kj_arena_alloc(arena, sizeof(void *) * (size_t)capacity), capacity};
    u->loop_varying = (PtrSet){kj_arena_alloc(arena, sizeof(void *) * (size_t)capacity), capacity};
    u->private_counter = (PtrSet){kj_arena_alloc(arena, sizeof(void *) * (size_t)capacity), capacity};
    KjIrWalk counters = {.stmt = note_private_counter, .data = u};
    kj_ir_walk_stmt(&counters, fn->body);

    for (int i = 0; i < fn->param_count; i++) {
        const KjIrVar *p = fn->params[i];
        u->assigned[p->id] = true;
        u->not_unit[p->id] = true; /* a varying parameter's lanes are anything */
        if (i < 64 && (sources.params >> i & 1u))
            u->varying[p->id] = true;
    }
    Flow flow = {.u = u};
    KjIrWalk walk = {.stmt = flow_stmt, .leave = flow_leave, .data = &flow};
    do {
        u->changed = false;
        kj_ir_walk_stmt(&walk, fn->body);
    } while (u->changed);
    free(flow.frames);
    return u;
}

bool kj_uniform_var_varying(const KjUniformity *u, const KjIrVar *var)
{
    return var->id >= 0 && var->id < u->var_count && u->varying[var->id];
}

bool kj_uniform_var_unit(const KjUniformity *u, const KjIrVar *var)
{
    return kj_uniform_var_varying(u, var) && !u->not_unit[var->id] && u->assigned[var->id];
}

bool kj_uniform_stmt_divergent(const KjUniformity *u, const KjIrStmt *s)
{
    return set_has(&u->divergent, s);
}

bool kj_uniform_loop_varying(const KjUniformity *u, const KjIrStmt *loop)
{
    return set_has(&u->loop_varying, loop);
}

bool kj_uniform_result_varying(const KjUniformity *u) { return u->result_varying; }

bool kj_uniform_divergent_return(const KjUniformity *u) { return u->divergent_return; }

KjAccessKind kj_uniform_access(const KjUniformity *u, KjIrExpr *const *indices, int count)
{
    bool any = false;
    for (int k = 0; k < count; k++)
        if (kj_uniform_expr_varying(u, indices[k]))
            any = true;
    if (!any)
        return KJ_ACCESS_UNIFORM;
    for (int k = 0; k + 1 < count; k++)
        if (kj_uniform_expr_varying(u, indices[k]))
            return KJ_ACCESS_GENERAL;
    return kj_uniform_expr_unit(u, indices[count - 1]) ? KJ_ACCESS_CONTIGUOUS : KJ_ACCESS_GENERAL;
}
