/*
 * barrier_split.c: a kernel's split form, for the cpu targets.
 *
 * On the cpu targets the threads of a block share one OS thread.  A kernel
 * with syncthreads() used to run each of them as a fiber that switches back
 * to a scheduler at every barrier: a context switch per thread per barrier,
 * and no loop over the threads for LLVM to vectorise.  This pass does what
 * PoCL does instead ("work-item loops"): it cuts the kernel at its barriers
 * into regions and runs each region as a loop over the block's threads, so
 * that every thread has finished a region before any starts the next, which
 * is all a barrier promises.
 *
 * Needs: a checked KERNEL whose barriers are syncthreads() statements.
 * Gives: a new KERNEL (kernel->split, split_of set, added to the module)
 * that runs a whole block in one call:
 *   - a barrier is the end of a region; a maximal run of statements without
 *     barriers becomes one THREADS statement (a loop over the block's threads,
 *     z, y, x with x fastest: the fibers' order, so atomics and print keep
 *     theirs);
 *   - an if, for or while that holds a barrier stays outside the loops, run
 *     once for the block: its condition (or bounds) must be uniform, the same
 *     for every thread, so any thread's value is every thread's; the regions
 *     in its body become THREADS loops;
 *   - a variable named in more than one region, or in a region and outside
 *     the loops, crosses a barrier.  A varying one lives in an array of
 *     KJ_MAX_BLOCK_THREADS elements (a local() of the block's call, a cache
 *     line longer and aligned to one: thread_arrays_laid_out) indexed by
 *     the thread's linear index; a uniform one stays one scalar, and a region
 *     that assigns it works on a copy taken at each thread's start and written
 *     back once after the loop (every thread computes the same value, and
 *     the next thread must still start from the old one);
 *   - a varying variable assigned once, from threadIdx, blockIdx, constants
 *     and parameters never assigned (`let t = threadIdx.x;`), is computed
 *     again where another region reads it rather than kept in an array;
 *   - a region's leading uniform assignments without effects (`let sh =
 *     shared(f32, 256);`) run once before its loop, so that the variable
 *     needs no copy and later regions see one value (a shared array's layout);
 *   - a region of uniform assignments alone (`s = s / 2;`) runs once, and
 *     one that is a single `if` comparing threadIdx.x with a uniform value
 *     loops over the threads that pass it only;
 *   - other variables are private to a region and stay as they are: each
 *     thread assigns them before it reads them.
 * The pass refuses (NULL, the kernel stays on fibers) a barrier under varying
 * control flow; warp and block collectives, syncgrid(), and barriers in device
 * functions that inline_barriers.c cannot write into the kernel (a call inside
 * an expression, a return inside a helper's loop, recursion); a return, break or continue that would leave a region other than
 * at the kernel's end; a local() array that lives across a barrier; and per-
 * thread arrays past KJ_MAX_LOCAL_BYTES; and more than KJ_SPLIT_MAX_REGIONS
 * regions (LLVM's optimiser is quadratic in a function's loops).  Returning
 * before a barrier is one of these: a thread that returned would have to skip the later regions, and
 * CUDA leaves a barrier that some threads never reach undefined anyway.
 *
 * Which values vary between threads is uniform.c's answer, with every load
 * and call varying: the threads of a region run one after another, so memory
 * read by one may have changed by the next one's turn.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================ state */

typedef struct VarUse {
    int region;         /* the first region that names it; -1: none */
    bool several;       /* named in more than one region */
    bool outside;       /* named outside the regions (a condition, a bound, a loop
                           variable; a parameter's value comes from outside too) */
    bool set_in_region; /* assigned inside some region */
} VarUse;

typedef struct Split {
    KjArena *arena;
    KjIrFunction *kernel; /* the original, read only */
    KjIrFunction *fn;     /* the split form being built */
    const char *why;      /* the first reason to refuse */
    KjUniformity *uniformity;
    VarUse *uses;
    int regions;
    /* while planning a region */
    int region;
    bool region_tail;     /* nothing runs after this region */
    int region_loops;     /* loops entered inside it */
    /* while building */
    KjIrVar **map;        /* kernel variable id -> the split form's */
    KjIrVar **per_thread; /* id -> its array of per-thread values, or NULL */
    KjIrVar **copy;       /* id -> a uniform variable's copy in the region being built */
    bool *copying;        /* id -> this region works on the copy */
    KjIrVar *linear;      /* the thread's linear index in the region being built */
    int *sets;            /* id -> how many statements assign it */
    const KjIrExpr **def; /* id -> the value of its one assignment */
    bool *remade;         /* id -> recomputed from its definition where it is used */
    int64_t per_thread_bytes; /* what the per-thread arrays take */
} Split;

static void refuse(Split *S, const char *why)
{
    if (!S->why)
        S->why = why;
}

static const KjType *i64_type(void) { return kj_type_scalar(KJ_TYPE_I64); }

/* ============================================================ walking */

/* Tests of an expression for the walk (ir.c): false stops it at the first
 * expression the test is looking for. */
static bool stmt_any_expr(const KjIrStmt *s, bool (*not_it)(KjIrWalk *, const KjIrExpr *))
{
    KjIrWalk w = {.expr = not_it};
    return !kj_ir_walk_stmt(&w, s);
}

static bool not_syncthreads(KjIrWalk *w, const KjIrExpr *e)
{
    return e->op != KJ_IR_SYNCTHREADS;
}

/* A loop, a call, or more than KJ_SPLIT_PLAIN_LOADS loads: the threads of
 * a kernel without barriers that has none of them do a few statements' work
 * each.  The code for a block shape is a second compile, and costs about as
 * much as the body is large, where a one-line body's costs some tens of ms
 * and halves its time.  Six takes in a 7-point stencil (tests/bench/
 * stencil3d.kern): its blockDim constant and its whole chunks' plain loads
 * (codegen_simd.c, gen_if_full_or_masked) bring it to Numba's loop in cache
 * (0.0178 to 0.0145 ms at 32^3, docs/performance.md), where the general code
 * with both copies of its if spills. */
enum { KJ_SPLIT_PLAIN_LOADS = 6 };

static KjIrWalkStep not_loop(KjIrWalk *w, const KjIrStmt *s)
{
    return s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE || s->kind == KJ_IR_STMT_PARFOR
               ? KJ_IR_WALK_STOP
               : KJ_IR_WALK_ON;
}

static bool not_call_nor_many_loads(KjIrWalk *w, const KjIrExpr *e)
{
    int *loads = w->data;
    *loads += e->op == KJ_IR_LOAD;
    return e->op != KJ_IR_CALL && *loads <= KJ_SPLIT_PLAIN_LOADS;
}

bool kj_split_straight_line(const KjIrFunction *kernel)
{
    int loads = 0;
    KjIrWalk w = {.stmt = not_loop, .expr = not_call_nor_many_loads, .data = &loads};
    return kernel->kind == KJ_IR_FN_KERNEL && !kernel->uses_syncthreads && !kernel->uses_syncgrid &&
           kj_ir_walk_stmt(&w, kernel->body);
}

/* The barriers this pass cannot split at: collectives, syncgrid(), and a
 * barrier inside a device function (its caller cannot be cut there). */
static bool not_other_barrier(KjIrWalk *w, const KjIrExpr *e)
{
    return !((e->op == KJ_IR_EXEC && kj_exec_is_barrier[e->exec]) ||
             (e->op == KJ_IR_CALL && e->callee && (e->callee->uses_syncthreads ||
                                                   e->callee->uses_syncgrid)));
}

static bool has_barrier(const KjIrStmt *s)
{
    return stmt_any_expr(s, not_syncthreads);
}

static bool is_barrier_stmt(const KjIrStmt *s)
{
    return s->kind == KJ_IR_STMT_EVAL && s->value->op == KJ_IR_SYNCTHREADS;
}

/* ============================================================ uniformity */

/* Which values differ between threads: uniform.c's analysis, with threadIdx
 * the source and every load varying (the threads of a region run one after
 * another, so memory may change between two threads' reads). */
static void analyze_uniformity(Split *S)
{
    KjUniformSources sources = {.sregs = 1u << KJ_SREG_TID_X | 1u << KJ_SREG_TID_Y |
                                         1u << KJ_SREG_TID_Z,
                                .loads = true};
    S->uniformity = kj_uniform_analyze(S->arena, S->kernel, sources);
}

static bool value_varies(Split *S, const KjIrExpr *e)
{
    return kj_uniform_expr_varying(S->uniformity, e);
}

static bool var_varies(Split *S, const KjIrVar *var)
{
    return kj_uniform_var_varying(S->uniformity, var);
}

/* ============================================================ planning */

static void use_var(Split *S, const KjIrVar *var, bool set)
{
    VarUse *u = &S->uses[var->id];
    if (S->region < 0) {
        u->outside = true;
        return;
    }
    if (u->region < 0)
        u->region = S->region;
    else if (u->region != S->region)
        u->several = true;
    if (set)
        u->set_in_region = true;
}

static bool note_var_read(KjIrWalk *w, const KjIrExpr *e)
{
    if (e->op == KJ_IR_VAR)
        use_var(w->data, e->var, false);
    return true;
}

static void note_expr(Split *S, const KjIrExpr *e)
{
    KjIrWalk reads = {.expr = note_var_read, .data = S};
    kj_ir_walk_expr(&reads, e);
}

/* Records what a statement of the current region names, and refuses what
 * would leave the region early: the walk's hooks (ir.c), which count the
 * loops they are in. */
static KjIrWalkStep note_region_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    Split *S = w->data;
    switch (s->kind) {
    case KJ_IR_STMT_SET:
        use_var(S, s->var, true);
        break;
    case KJ_IR_STMT_FOR:
        use_var(S, s->var, true);
        S->region_loops++;
        break;
    case KJ_IR_STMT_WHILE:
        S->region_loops++;
        break;
    case KJ_IR_STMT_BREAK:
    case KJ_IR_STMT_CONTINUE:
        if (S->region_loops == 0)
            refuse(S, "a break or continue leaves a loop that holds a barrier");
        break;
    case KJ_IR_STMT_RETURN:
        if (!S->region_tail)
            refuse(S, "a thread may return before a barrier");
        break;
    default:
        break;
    }
    return KJ_IR_WALK_ON;
}

static void leave_region_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    Split *S = w->data;
    S->region_loops -= s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE;
}

static void note_region(Split *S, const KjIrStmt *s)
{
    KjIrWalk w = {.stmt = note_region_stmt, .expr = note_var_read, .leave = leave_region_stmt,
                  .data = S};
    kj_ir_walk_stmt(&w, s);
}

static KjIrStmt *new_block(Split *S, KjLoc loc)
{
    return kj_ir_new_stmt(S->arena, KJ_IR_STMT_BLOCK, loc);
}

/* Statement i of a block's items and everything after it are barriers. */
static bool only_barriers_from(const KjVec *items, int i)
{
    for (; i < items->count; i++)
        if (!is_barrier_stmt(items->items[i]))
            return false;
    return true;
}

static KjIrStmt *plan(Split *S, const KjIrStmt *s, bool tail);

/* An assignment of a value the same for every thread and without effects
 * (no memory, no call: uniform with loads varying). */
static bool is_uniform_set(Split *S, const KjIrStmt *s)
{
    return s->kind == KJ_IR_STMT_SET && !var_varies(S, s->var) && !value_varies(S, s->value);
}

/* Closes the run of statements [first, end) of items as one region. */
static void close_region(Split *S, KjIrStmt *out, const KjVec *items, int first, int end, bool tail)
{
    /* Its leading uniform assignments (`let sh = shared(f32, 256);`) run once,
     * before its loop: every thread would assign the same value, and the
     * variable then needs no copy, so that later regions see a value set
     * once (a shared array's fixed layout: unit stride, known extent). */
    for (; first < end && is_uniform_set(S, items->items[first]); first++) {
        note_region(S, items->items[first]);
        kj_vec_push(S->arena, &out->stmts, items->items[first]);
    }
    if (first >= end)
        return;
    const KjIrStmt *head = items->items[first];
    KjIrStmt *threads = kj_ir_new_stmt(S->arena, KJ_IR_STMT_THREADS, head->loc);
    threads->body = new_block(S, head->loc);
    S->region = S->regions++;
    S->region_tail = tail && only_barriers_from(items, end);
    S->region_loops = 0;
    for (int i = first; i < end; i++) {
        kj_vec_push(S->arena, &threads->body->stmts, items->items[i]);
        note_region(S, items->items[i]);
    }
    S->region = -1;
    kj_vec_push(S->arena, &out->stmts, threads);
}

/* A statement that holds a barrier, run once for the block. */
static KjIrStmt *plan_control(Split *S, const KjIrStmt *s, bool tail)
{
    KjIrStmt *out = kj_ir_new_stmt(S->arena, s->kind, s->loc);
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        return plan(S, s, tail);
    case KJ_IR_STMT_IF:
        if (value_varies(S, s->cond))
            refuse(S, "a barrier sits under an if whose condition differs between threads");
        note_expr(S, s->cond);
        out->cond = s->cond;
        out->then_stmt = plan(S, s->then_stmt, tail);
        out->else_stmt = s->else_stmt ? plan(S, s->else_stmt, tail) : NULL;
        return out;
    case KJ_IR_STMT_FOR:
        if (value_varies(S, s->start) || value_varies(S, s->stop) || value_varies(S, s->step) ||
            var_varies(S, s->var))
            refuse(S, "a barrier sits in a loop whose bounds differ between threads");
        note_expr(S, s->start);
        note_expr(S, s->stop);
        note_expr(S, s->step);
        use_var(S, s->var, false);
        out->var = s->var;
        out->start = s->start;
        out->stop = s->stop;
        out->step = s->step;
        out->body = plan(S, s->body, false);
        return out;
    case KJ_IR_STMT_WHILE:
        if (value_varies(S, s->cond))
            refuse(S, "a barrier sits in a loop whose condition differs between threads");
        note_expr(S, s->cond);
        out->cond = s->cond;
        out->body = plan(S, s->body, false);
        return out;
    default:
        refuse(S, "a barrier sits inside a statement the split cannot cut");
        return out;
    }
}

/* s (a block, or one statement) as regions and the control flow between them:
 * a BLOCK whose statements still point into the kernel. */
static KjIrStmt *plan(Split *S, const KjIrStmt *s, bool tail)
{
    KjIrStmt *out = new_block(S, s->loc);
    KjVec single = {0};
    const KjVec *items = &s->stmts;
    if (s->kind != KJ_IR_STMT_BLOCK) {
        kj_vec_push(S->arena, &single, (void *)s);
        items = &single;
    }
    int first = 0;
    for (int i = 0; i < items->count; i++) {
        const KjIrStmt *item = items->items[i];
        if (!has_barrier(item))
            continue;
        close_region(S, out, items, first, i, tail);
        first = i + 1;
        if (kj_uniform_stmt_divergent(S->uniformity, item))
            refuse(S, "a barrier sits under control flow that differs between threads");
        if (!is_barrier_stmt(item))
            kj_vec_push(S->arena, &out->stmts,
                        plan_control(S, item, tail && only_barriers_from(items, i + 1)));
    }
    close_region(S, out, items, first, items->count, tail);
    return out;
}

/* ============================================================ recomputing */

/*
 * A varying value that crosses a barrier costs a store and loads through its
 * per-thread array; one that is cheap to compute again from values that never
 * change (threadIdx, blockIdx, constants, parameters never assigned) is
 * instead recomputed where it is used: `let t = threadIdx.x;` or
 * `let i = blockIdx.x * blockDim.x + t;`, assigned once.
 */
static KjIrWalkStep count_set(KjIrWalk *w, const KjIrStmt *s)
{
    Split *S = w->data;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR) && s->var) {
        S->sets[s->var->id]++;
        S->def[s->var->id] = s->kind == KJ_IR_STMT_SET ? s->value : NULL;
    }
    return KJ_IR_WALK_ON;
}

static void count_sets(Split *S, const KjIrStmt *s)
{
    KjIrWalk w = {.stmt = count_set, .data = S};
    kj_ir_walk_stmt(&w, s);
}

/* The nodes of e once its variables are recomputed; -1 when it cannot be. */
static int remake_cost(Split *S, const KjIrExpr *e, int depth)
{
    if (!e || depth > 8)
        return -1;
    int cost = 1;
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_SREG:
        return 1;
    case KJ_IR_VAR: {
        const KjIrVar *v = e->var;
        if (v->is_param && S->sets[v->id] == 0)
            return 1;
        if (v->is_param || v->type->kind == KJ_TYPE_ARRAY || S->sets[v->id] != 1 || !S->def[v->id])
            return -1;
        return remake_cost(S, S->def[v->id], depth + 1);
    }
    case KJ_IR_NEG: case KJ_IR_NOT: case KJ_IR_BITNOT: case KJ_IR_ADD: case KJ_IR_SUB:
    case KJ_IR_MUL: case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_EQ:
    case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: case KJ_IR_CAST:
    case KJ_IR_SELECT: case KJ_IR_DIM:
        break;
    default:
        return -1;
    }
    for (int i = 0; i < e->arg_count; i++) {
        int c = remake_cost(S, e->args[i], depth);
        if (c < 0)
            return -1;
        cost += c;
    }
    return cost;
}

static bool can_remake(Split *S, const KjIrVar *var)
{
    if (var->is_param || var->type->kind == KJ_TYPE_ARRAY || S->sets[var->id] != 1 ||
        !S->def[var->id])
        return false;
    int cost = remake_cost(S, S->def[var->id], 0);
    return cost > 0 && cost <= 24;
}

/* ============================================================ building */

static KjIrExpr *var_ref(Split *S, KjIrVar *var, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(S->arena, KJ_IR_VAR, var->type, loc, 0);
    e->var = var;
    return e;
}

static KjIrStmt *set_var(Split *S, KjIrVar *var, KjIrExpr *value, KjLoc loc)
{
    KjIrStmt *s = kj_ir_new_stmt(S->arena, KJ_IR_STMT_SET, loc);
    s->var = var;
    s->value = value;
    return s;
}

static KjIrExpr *as_i64(Split *S, KjIrExpr *e)
{
    KjIrExpr *c = kj_ir_new_expr(S->arena, KJ_IR_CAST, i64_type(), e->loc, 1);
    c->args[0] = e;
    return c;
}

static KjIrExpr *sreg64(Split *S, KjSpecialReg reg, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(S->arena, KJ_IR_SREG, kj_type_scalar(KJ_TYPE_I32), loc, 0);
    e->sreg = reg;
    return as_i64(S, e);
}

static KjIrExpr *binary(Split *S, KjIrOp op, KjIrExpr *a, KjIrExpr *b)
{
    KjIrExpr *e = kj_ir_new_expr(S->arena, op, a->type, a->loc, 2);
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

/* x + blockDim.x * (y + blockDim.y * z): the thread's place in the block, the
 * index of its element in the per-thread arrays (and CUDA's linear order). */
static KjIrExpr *linear_thread_index(Split *S, KjLoc loc)
{
    KjIrExpr *yz = binary(S, KJ_IR_ADD, sreg64(S, KJ_SREG_TID_Y, loc),
                          binary(S, KJ_IR_MUL, sreg64(S, KJ_SREG_BDIM_Y, loc),
                                 sreg64(S, KJ_SREG_TID_Z, loc)));
    return binary(S, KJ_IR_ADD, sreg64(S, KJ_SREG_TID_X, loc),
                  binary(S, KJ_IR_MUL, sreg64(S, KJ_SREG_BDIM_X, loc), yz));
}

/* The element of var's per-thread array that belongs to this thread. */
static KjIrExpr *per_thread_load(Split *S, const KjIrVar *var, KjLoc loc)
{
    KjIrVar *array = S->per_thread[var->id];
    KjIrExpr *e = kj_ir_new_expr(S->arena, KJ_IR_LOAD, var->type, loc, 2);
    e->args[0] = var_ref(S, array, loc);
    e->args[1] = var_ref(S, S->linear, loc);
    return e;
}

static KjIrStmt *per_thread_store(Split *S, const KjIrVar *var, KjIrExpr *value, KjLoc loc)
{
    KjIrStmt *s = kj_ir_new_stmt(S->arena, KJ_IR_STMT_STORE, loc);
    s->array = var_ref(S, S->per_thread[var->id], loc);
    s->indices = kj_arena_alloc(S->arena, sizeof *s->indices);
    s->indices[0] = var_ref(S, S->linear, loc);
    s->index_count = 1;
    s->value = value;
    return s;
}

/*
 * A remade variable's definition, as a region computes it again: every
 * variable it reads is remade too, whether or not that one crosses a barrier
 * itself (`let y = threadIdx.y; let sy = y + 1;` with only sy read after the
 * barrier: the region after it never assigns y, so its y would be another
 * thread's).  remake_cost has checked that each is a parameter never
 * assigned or a variable assigned once.
 */
static KjIrExpr *remake_expr(Split *S, const KjIrExpr *e)
{
    if (e->op == KJ_IR_VAR) {
        if (e->var->is_param)
            return var_ref(S, S->map[e->var->id], e->loc);
        return remake_expr(S, S->def[e->var->id]);
    }
    KjIrExpr *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *e;
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(S->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++)
            c->args[i] = remake_expr(S, e->args[i]);
    }
    return c;
}

/* A copy of e in the split form; in_region: as a thread of a region sees it. */
static KjIrExpr *build_expr(Split *S, const KjIrExpr *e, bool in_region)
{
    if (!e)
        return NULL;
    if (e->op == KJ_IR_VAR) {
        int id = e->var->id;
        if (in_region && S->remade[id])
            return remake_expr(S, S->def[id]);
        if (in_region && S->per_thread[id])
            return per_thread_load(S, e->var, e->loc);
        if (in_region && S->copying[id])
            return var_ref(S, S->copy[id], e->loc);
        return var_ref(S, S->map[id], e->loc);
    }
    KjIrExpr *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *e;
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(S->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++)
            c->args[i] = build_expr(S, e->args[i], in_region);
    }
    return c;
}

static KjIrStmt *build_stmt(Split *S, const KjIrStmt *s, bool in_region);

/* A statement of a region, for one thread. */
static KjIrStmt *build_region_stmt(Split *S, const KjIrStmt *s)
{
    if (s->kind == KJ_IR_STMT_SET && S->per_thread[s->var->id])
        return per_thread_store(S, s->var, build_expr(S, s->value, true), s->loc);
    if (s->kind == KJ_IR_STMT_SET && S->copying[s->var->id])
        return set_var(S, S->copy[s->var->id], build_expr(S, s->value, true), s->loc);
    if (s->kind == KJ_IR_STMT_FOR && (S->per_thread[s->var->id] || S->copying[s->var->id]))
        refuse(S, "a loop variable lives across a barrier");
    return build_stmt(S, s, true);
}

static KjIrStmt *build_stmt(Split *S, const KjIrStmt *s, bool in_region)
{
    if (!s)
        return NULL;
    KjIrStmt *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *s;
    c->stmts = (KjVec){0};
    for (int i = 0; i < s->stmts.count; i++) {
        const KjIrStmt *item = s->stmts.items[i];
        kj_vec_push(S->arena, &c->stmts,
                    in_region ? build_region_stmt(S, item) : build_stmt(S, item, false));
    }
    if (s->var)
        c->var = S->map[s->var->id];
    c->value = build_expr(S, s->value, in_region);
    c->array = build_expr(S, s->array, in_region);
    c->cond = build_expr(S, s->cond, in_region);
    c->start = build_expr(S, s->start, in_region);
    c->stop = build_expr(S, s->stop, in_region);
    c->step = build_expr(S, s->step, in_region);
    if (s->index_count > 0) {
        c->indices = kj_arena_alloc(S->arena, sizeof *c->indices * (size_t)s->index_count);
        for (int i = 0; i < s->index_count; i++)
            c->indices[i] = build_expr(S, s->indices[i], in_region);
    }
    if (in_region) {
        c->then_stmt = s->then_stmt ? build_region_stmt(S, s->then_stmt) : NULL;
        c->else_stmt = s->else_stmt ? build_region_stmt(S, s->else_stmt) : NULL;
        c->body = s->body ? build_region_stmt(S, s->body) : NULL;
    } else {
        c->then_stmt = build_stmt(S, s->then_stmt, false);
        c->else_stmt = build_stmt(S, s->else_stmt, false);
        c->body = build_stmt(S, s->body, false);
    }
    return c;
}

/* The walk's hook: a region that assigns a uniform variable works on its copy. */
static KjIrWalkStep note_uniform_set(KjIrWalk *w, const KjIrStmt *s)
{
    Split *S = w->data;
    if (s->kind == KJ_IR_STMT_SET && S->copy[s->var->id])
        S->copying[s->var->id] = true;
    return KJ_IR_WALK_ON;
}

/* A region of uniform assignments only (`s = s / 2;` between two barriers):
 * every thread would compute the same values, without effects, so they are
 * computed once. */
static bool region_is_uniform(Split *S, const KjIrStmt *planned)
{
    for (int i = 0; i < planned->body->stmts.count; i++) {
        const KjIrStmt *item = planned->body->stmts.items[i];
        if (item->kind != KJ_IR_STMT_SET || var_varies(S, item->var) ||
            value_varies(S, item->value) || S->per_thread[item->var->id])
            return false;
    }
    return true;
}

/* In the split form, a value the same for every thread: no threadIdx, no
 * memory, no per-thread array, no call. */
static bool built_uniform(Split *S, const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_SREG:
        return e->sreg != KJ_SREG_TID_X && e->sreg != KJ_SREG_TID_Y && e->sreg != KJ_SREG_TID_Z;
    case KJ_IR_LOAD: case KJ_IR_CALL: case KJ_IR_ATOMIC: case KJ_IR_EXEC: case KJ_IR_LOCAL:
    case KJ_IR_PRINT:
        return false;
    case KJ_IR_VAR:
        return e->var != S->linear;
    default:
        break;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!built_uniform(S, e->args[i]))
            return false;
    return true;
}

static bool is_thread_x(const KjIrExpr *e)
{
    if (e->op == KJ_IR_CAST && kj_type_is_int(e->type) && kj_type_int_bits(e->type) >= 32)
        e = e->args[0];
    return e->op == KJ_IR_SREG && e->sreg == KJ_SREG_TID_X;
}

static KjIrExpr *plus_one(Split *S, KjIrExpr *e)
{
    KjIrExpr *one = kj_ir_new_expr(S->arena, KJ_IR_CONST, i64_type(), e->loc, 0);
    one->const_int = 1;
    return binary(S, KJ_IR_ADD, e, one);
}

/* e (of the original kernel) has no effect and nothing that checked mode
 * checks (checks.c), so a thread may skip it: constants, variables,
 * registers and extents, arithmetic without a check site (no integer
 * division, shift or float-to-integer conversion), and loads of a shared()
 * tile at constant indices inside its shape (`tile[0]`). */
static bool skippable(Split *S, const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_VAR: case KJ_IR_SREG:
        return true;
    case KJ_IR_DIM:
        return e->args[0]->op == KJ_IR_VAR;
    case KJ_IR_CAST:
        if (kj_type_is_int(e->type) && !kj_type_is_int(e->args[0]->type) &&
            e->args[0]->type->kind != KJ_TYPE_BOOL)
            return false; /* a float to an integer: checked */
        break;
    case KJ_IR_NEG: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL:
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE:
        break;
    case KJ_IR_LOAD: {
        /* the tile, or a variable assigned it once (an inlined parameter) */
        const KjIrExpr *alloc = e->args[0];
        for (int depth = 0; alloc && alloc->op == KJ_IR_VAR && depth < 4; depth++)
            alloc = S->sets[alloc->var->id] == 1 ? S->def[alloc->var->id] : NULL;
        if (!alloc || alloc->op != KJ_IR_SHARED || alloc->alloc_ndim != e->arg_count - 1)
            return false;
        for (int k = 1; k < e->arg_count; k++)
            if (e->args[k]->op != KJ_IR_CONST || (int64_t)e->args[k]->const_int < 0 ||
                (int64_t)e->args[k]->const_int >= alloc->alloc_shape[k - 1])
                return false;
        return true;
    }
    default:
        return false;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!skippable(S, e->args[i]))
            return false;
    return true;
}

/*
 * A region `threads { v = E; ...; if threadIdx.x == 0 { ... } }` (a helper's
 * result read by every thread and written by the first: `let total =
 * tree_sum(tile, t); if t == 0 { sums[b] = total; }` once inlined) whose
 * variables v are read nowhere but in the if's side (and the later such
 * assignments), and whose values E
 * every thread may skip (skippable): the assignments move into the side,
 * which thread 0 runs, and the region is then the one `if` that
 * narrow_to_condition narrows to thread 0.  Thread 0 computes the same
 * values; the others' were never read.  planned: the region's statements
 * in the original kernel, items: the same built (none before them: no
 * linear index, no uniform copies).
 */
static void sink_into_first_thread(Split *S, const KjIrStmt *planned, KjVec *items)
{
    int n = planned->body->stmts.count;
    if (n < 2 || items->count != n)
        return;
    const KjIrStmt *last = planned->body->stmts.items[n - 1];
    KjIrStmt *built_if = items->items[n - 1];
    if (last->kind != KJ_IR_STMT_IF || last->else_stmt || built_if->kind != KJ_IR_STMT_IF)
        return;
    const KjIrExpr *c = built_if->cond; /* (a copy of threadIdx.x there is threadIdx.x) */
    const KjIrExpr *x = c->op == KJ_IR_EQ ? c->args[0] : NULL, *bound = x ? c->args[1] : NULL;
    if (x && !is_thread_x(x) && is_thread_x(bound)) {
        const KjIrExpr *swap = x;
        x = bound;
        bound = swap;
    }
    /* thread 0 passes it, and runs what the others skip */
    if (!x || !is_thread_x(x) || bound->op != KJ_IR_CONST || bound->const_int != 0)
        return;
    for (int i = 0; i < n - 1; i++) {
        const KjIrStmt *set = planned->body->stmts.items[i];
        if (set->kind != KJ_IR_STMT_SET || S->sets[set->var->id] != 1 || S->per_thread[set->var->id] ||
            S->copy[set->var->id] || !skippable(S, set->value))
            return;
        /* read only by what moves (the later assignments and the side): named
         * in this region alone, and not in the if's condition */
        const VarUse *u = &S->uses[set->var->id];
        if (u->several || u->outside || kj_ir_expr_reads(last->cond, set->var))
            return;
    }
    KjIrStmt *side = new_block(S, built_if->loc);
    for (int i = 0; i < n - 1; i++)
        kj_vec_push(S->arena, &side->stmts, items->items[i]);
    kj_vec_push(S->arena, &side->stmts, built_if->then_stmt);
    built_if->then_stmt = side;
    items->items[0] = built_if;
    items->count = 1;
}

/*
 * A region that is one `if` on threadIdx.x against a uniform value
 * (`if t < s { ... }`, `if t == 0 { ... }`) loops only over the threads that
 * pass it: the tree of a reduction then walks s threads, not the block.
 */
static void narrow_to_condition(Split *S, KjIrStmt *threads)
{
    KjVec *items = &threads->body->stmts;
    if (items->count != 1)
        return;
    KjIrStmt *only = items->items[0];
    if (only->kind != KJ_IR_STMT_IF || only->else_stmt)
        return;
    KjIrExpr *c = only->cond;
    KjIrOp op = c->op;
    if (op != KJ_IR_LT && op != KJ_IR_LE && op != KJ_IR_GT && op != KJ_IR_GE && op != KJ_IR_EQ)
        return;
    KjIrExpr *x = c->args[0], *bound = c->args[1];
    if (!is_thread_x(x)) { /* u < x is x > u */
        KjIrExpr *swap = x;
        x = bound;
        bound = swap;
        op = op == KJ_IR_LT ? KJ_IR_GT : op == KJ_IR_LE ? KJ_IR_GE : op == KJ_IR_GT ? KJ_IR_LT
           : op == KJ_IR_GE ? KJ_IR_LE : op;
    }
    if (!is_thread_x(x) || !kj_type_is_int(bound->type) || !built_uniform(S, bound) ||
        (!kj_type_is_signed(bound->type) && kj_type_int_bits(bound->type) >= 64))
        return; /* (a u64 bound past INT64_MAX would not survive the i64 range) */
    KjIrExpr *u = bound->type == i64_type() ? bound : as_i64(S, bound);
    switch (op) {
    case KJ_IR_LT: threads->stop = u; break;
    case KJ_IR_LE: threads->stop = plus_one(S, u); break;
    case KJ_IR_GT: threads->start = plus_one(S, u); break;
    case KJ_IR_GE: threads->start = u; break;
    default: threads->start = u; threads->stop = plus_one(S, u); break; /* EQ */
    }
    threads->body = only->then_stmt;
}

/* One region: `threads { linear = ...; copies; the statements }`, then the
 * uniform variables it assigned, written back once.  Appended to out. */
static void build_region(Split *S, KjIrStmt *out, const KjIrStmt *planned)
{
    if (region_is_uniform(S, planned)) {
        for (int i = 0; i < planned->body->stmts.count; i++)
            kj_vec_push(S->arena, &out->stmts, build_stmt(S, planned->body->stmts.items[i], false));
        return;
    }
    int count = S->kernel->locals.count;
    memset(S->copying, 0, sizeof *S->copying * (size_t)count);
    KjIrWalk uniform_sets = {.stmt = note_uniform_set, .data = S};
    kj_ir_walk_stmt(&uniform_sets, planned->body);

    KjIrStmt *threads = kj_ir_new_stmt(S->arena, KJ_IR_STMT_THREADS, planned->loc);
    KjIrStmt *body = new_block(S, planned->loc);
    threads->body = body;
    if (S->per_thread_bytes > 0)
        kj_vec_push(S->arena, &body->stmts, set_var(S, S->linear, linear_thread_index(S, planned->loc),
                                                    planned->loc));
    for (int id = 0; id < count; id++)
        if (S->copying[id])
            kj_vec_push(S->arena, &body->stmts,
                        set_var(S, S->copy[id], var_ref(S, S->map[id], planned->loc), planned->loc));
    for (int i = 0; i < planned->body->stmts.count; i++)
        kj_vec_push(S->arena, &body->stmts, build_region_stmt(S, planned->body->stmts.items[i]));
    sink_into_first_thread(S, planned, &body->stmts);
    narrow_to_condition(S, threads);
    kj_vec_push(S->arena, &out->stmts, threads);
    for (int id = 0; id < count; id++)
        if (S->copying[id])
            kj_vec_push(S->arena, &out->stmts,
                        set_var(S, S->map[id], var_ref(S, S->copy[id], planned->loc), planned->loc));
    memset(S->copying, 0, sizeof *S->copying * (size_t)count);
}

/* The planned tree as the split form's statements. */
static KjIrStmt *build_planned(Split *S, const KjIrStmt *planned)
{
    if (!planned)
        return NULL;
    switch (planned->kind) {
    case KJ_IR_STMT_BLOCK: {
        KjIrStmt *out = new_block(S, planned->loc);
        for (int i = 0; i < planned->stmts.count; i++) {
            const KjIrStmt *item = planned->stmts.items[i];
            if (item->kind == KJ_IR_STMT_THREADS)
                build_region(S, out, item);
            else
                kj_vec_push(S->arena, &out->stmts, build_planned(S, item));
        }
        return out;
    }
    case KJ_IR_STMT_SET: /* a region's leading uniform assignment, run once */
        return build_stmt(S, planned, false);
    case KJ_IR_STMT_IF:
    case KJ_IR_STMT_FOR:
    case KJ_IR_STMT_WHILE: {
        KjIrStmt *c = kj_ir_new_stmt(S->arena, planned->kind, planned->loc);
        c->var = planned->var ? S->map[planned->var->id] : NULL;
        c->cond = build_expr(S, planned->cond, false);
        c->start = build_expr(S, planned->start, false);
        c->stop = build_expr(S, planned->stop, false);
        c->step = build_expr(S, planned->step, false);
        c->then_stmt = build_planned(S, planned->then_stmt);
        c->else_stmt = build_planned(S, planned->else_stmt);
        c->body = build_planned(S, planned->body);
        return c;
    }
    default:
        kj_unreachable();
    }
}

/* ============================================================ the pass */

/*
 * The per-thread arrays' layout.  A region runs a chunk of threads at a
 * time, so a variable that crosses a barrier is one vector load and store
 * of its array a chunk, and the loop of matmul.kern's 16 accumulators loads
 * and stores 16 of them (a thread's at the same index of each array) per
 * step of its tile loop.  Arrays of KJ_MAX_BLOCK_THREADS elements, a power
 * of two, put those 16 at the same address modulo 4 KiB: the same set of
 * the L1 cache (64 sets of 64-byte lines, 12 ways on the AVX-512 machines),
 * so that the 16 evicted one another, and 16-byte alignment split each
 * 64-byte vector across two lines.  Each array is one cache line longer and
 * aligned to a line, so that consecutive arrays start a line apart modulo 4
 * KiB and a chunk's vector is one line (docs/performance.md, 2026-11-28,
 * issue 25: matmul f64 512 on AVX-512, 7.1 to 6.1 ms).  The same bits:
 * only where the values live moves.  KJIT_SIMD_THREAD_ARRAYS=0 gives the
 * layout before, for measuring (KJ_SIMD_SWITCHES, in the cache key).
 */
enum { LINE_BYTES = 64 };

static bool thread_arrays_laid_out(void)
{
    const char *env = getenv(KJ_SIMD_THREAD_ARRAYS);
    return !(env && strcmp(env, "0") == 0);
}

/* The split form's variables: a copy of each of the kernel's (same ids),
 * then the per-thread arrays, the copies of uniform ones, and the linear
 * index.  Returns the bytes the per-thread arrays take per block. */
static int64_t make_variables(Split *S, KjIrStmt *prologue)
{
    KjIrFunction *kernel = S->kernel, *fn = S->fn;
    int count = kernel->locals.count;
    S->map = kj_arena_alloc(S->arena, sizeof *S->map * (size_t)(count + 1));
    S->per_thread = kj_arena_alloc(S->arena, sizeof *S->per_thread * (size_t)(count + 1));
    S->copy = kj_arena_alloc(S->arena, sizeof *S->copy * (size_t)(count + 1));
    S->copying = kj_arena_alloc(S->arena, sizeof *S->copying * (size_t)(count + 1));
    S->remade = kj_arena_alloc(S->arena, sizeof *S->remade * (size_t)(count + 1));
    S->sets = kj_arena_alloc(S->arena, sizeof *S->sets * (size_t)(count + 1));
    S->def = kj_arena_alloc(S->arena, sizeof *S->def * (size_t)(count + 1));
    count_sets(S, kernel->body);
    for (int i = 0; i < count; i++) {
        const KjIrVar *v = kernel->locals.items[i];
        KjIrVar *c = kj_ir_new_var(S->arena, fn, v->name, v->type, v->loc);
        c->is_param = v->is_param;
        S->map[i] = c;
    }
    fn->params = kj_arena_alloc(S->arena, sizeof *fn->params * (size_t)(kernel->param_count + 1));
    for (int i = 0; i < kernel->param_count; i++)
        fn->params[i] = S->map[kernel->params[i]->id];
    fn->param_count = kernel->param_count;

    int64_t bytes = 0;
    for (int i = 0; i < count; i++) {
        const KjIrVar *v = kernel->locals.items[i];
        VarUse *u = &S->uses[i];
        bool crosses = u->several || (u->outside && u->region >= 0);
        if (!crosses)
            continue;
        if (!var_varies(S, v)) {
            if (u->set_in_region)
                S->copy[i] = kj_ir_new_var(S->arena, fn, kj_arena_printf(S->arena, "%s.region", v->name),
                                           v->type, v->loc);
            continue;
        }
        if (v->type->kind == KJ_TYPE_ARRAY) {
            refuse(S, "a local() array lives across a barrier");
            continue;
        }
        if (can_remake(S, v)) {
            S->remade[i] = true;
            continue;
        }
        const KjType *array_type = kj_type_array(v->type, 1);
        KjIrVar *array = kj_ir_new_var(S->arena, fn, kj_arena_printf(S->arena, "%s.threads", v->name),
                                       array_type, v->loc);
        S->per_thread[i] = array;
        KjIrExpr *alloc = kj_ir_new_expr(S->arena, KJ_IR_LOCAL, array_type, v->loc, 0);
        alloc->alloc_elem = v->type;
        alloc->alloc_ndim = 1;
        alloc->alloc_shape[0] = KJ_MAX_BLOCK_THREADS;
        if (thread_arrays_laid_out()) {
            int64_t size = kj_type_size(v->type);
            alloc->alloc_shape[0] += (LINE_BYTES + size - 1) / size;
            alloc->align_bytes = LINE_BYTES;
        }
        kj_vec_push(S->arena, &prologue->stmts, set_var(S, array, alloc, v->loc));
        bytes += (alloc->alloc_shape[0] * kj_type_size(v->type) + LINE_BYTES - 1) & ~(int64_t)(LINE_BYTES - 1);
    }
    S->linear = kj_ir_new_var(S->arena, fn, "thread.linear", i64_type(), kernel->loc);
    return bytes;
}

/* A parameter that varies after its start gets its per-thread array filled
 * with the value it was passed, in a region of its own before the body. */
static void fill_parameters(Split *S, KjIrStmt *prologue)
{
    KjIrStmt *fill = NULL;
    for (int i = 0; i < S->kernel->param_count; i++) {
        int id = S->kernel->params[i]->id;
        if (!S->per_thread[id])
            continue;
        if (!fill) {
            fill = kj_ir_new_stmt(S->arena, KJ_IR_STMT_THREADS, S->kernel->loc);
            fill->body = new_block(S, S->kernel->loc);
            kj_vec_push(S->arena, &fill->body->stmts,
                        set_var(S, S->linear, linear_thread_index(S, S->kernel->loc), S->kernel->loc));
        }
        kj_vec_push(S->arena, &fill->body->stmts,
                    per_thread_store(S, S->kernel->params[i],
                                     var_ref(S, S->map[id], S->kernel->loc), S->kernel->loc));
    }
    if (fill)
        kj_vec_push(S->arena, &prologue->stmts, fill);
}

KjIrFunction *kj_barrier_split(KjIrModule *module, KjIrFunction *kernel, const char **why)
{
    Split split = {.arena = module->arena, .kernel = kernel, .region = -1}, *S = &split;
    if (kernel->split)
        return kernel->split;
    KjIrFunction *original = kernel;
    if (kernel->kind != KJ_IR_FN_KERNEL)
        refuse(S, "not a kernel");
    else if (!kernel->uses_syncthreads && !kj_split_straight_line(kernel))
        refuse(S, "the kernel has no syncthreads(), and a loop, a call or more than 6 loads");
    else if (kernel->launch_locals.count > 0)
        /* each thread's sized by the launch: a stack of its own (a fiber) */
        refuse(S, "the kernel has a local() sized at launch");
    else if (!kernel->uses_syncgrid && kj_kernel_calls_barrier_helper(kernel)) {
        /* its helpers' barriers written into it (inline_barriers.c), so that
         * they cut it as its own would; the original stays for the fibers */
        const char *inline_why = NULL;
        kernel = kj_inline_barrier_helpers(module->arena, kernel, &inline_why);
        if (!kernel) {
            refuse(S, inline_why);
            kernel = original;
        }
        S->kernel = kernel;
    }
    if (!S->why && (kernel->uses_syncgrid || stmt_any_expr(kernel->body, not_other_barrier)))
        refuse(S, "the kernel uses a collective, syncgrid() or a device function with a barrier");
    if (!S->why) {
        analyze_uniformity(S);
        S->uses = kj_arena_alloc(S->arena, sizeof *S->uses * (size_t)(kernel->locals.count + 1));
        for (int i = 0; i < kernel->locals.count; i++) {
            S->uses[i].region = -1;
            S->uses[i].outside = ((KjIrVar *)kernel->locals.items[i])->is_param;
        }
    }
    KjIrStmt *planned = S->why ? NULL : plan(S, kernel->body, true);
    if (!S->why && S->regions > KJ_SPLIT_MAX_REGIONS)
        refuse(S, "more regions between barriers than KJ_SPLIT_MAX_REGIONS (64)");

    KjIrFunction *fn = NULL;
    if (!S->why) {
        fn = kj_arena_alloc(S->arena, sizeof *fn);
        *fn = *kernel;
        fn->symbol = kj_arena_printf(S->arena, "%s__split", kernel->symbol);
        fn->locals = (KjVec){0};
        fn->split = NULL;
        fn->split_of = original;
        fn->uses_syncthreads = false;
        fn->body = new_block(S, kernel->body->loc);
        KjIrStmt *prologue = fn->body;
        S->fn = fn;
        int64_t bytes = make_variables(S, prologue);
        S->per_thread_bytes = bytes;
        if (kernel->local_bytes + bytes > KJ_MAX_LOCAL_BYTES)
            refuse(S, "the values that live across barriers take too much memory");
        fn->local_bytes = kernel->local_bytes + bytes;
        fill_parameters(S, prologue);
        KjIrStmt *body = build_planned(S, planned);
        for (int i = 0; i < body->stmts.count; i++)
            kj_vec_push(S->arena, &fn->body->stmts, body->stmts.items[i]);
    }
    if (why)
        *why = S->why;
    if (S->why)
        return NULL;
    kj_vec_push(S->arena, &module->functions, fn);
    original->split = fn;
    return fn;
}
