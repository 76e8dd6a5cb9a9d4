/*
 * grid_rows.c: which kernels the cpu targets may run as rows of the grid
 * (issue 25 item 5).
 *
 * A kernel whose only reads of threadIdx, blockIdx and blockDim are the
 * sums grid() makes, i64(blockIdx.d) * i64(blockDim.d) + i64(threadIdx.d),
 * sees of its thread nothing but its place in the grid: how the grid is
 * cut into blocks changes no value it computes.  Without shared memory,
 * barriers, warp collectives, atomics, print and calls of device functions
 * its threads do not meet either, so they may run in any order.  The cpu
 * targets then run a row of the grid (one y and z, every x) as one range of
 * x, cut where the output's cache lines begin as a @vectorize's range is
 * (runtime/cpu.c, kj_cpu_run_rows; the back end's __xrange entry), instead
 * of block after block with each block's chunks where the grid puts them.
 *
 * The body must be sets of grid() sums and then either statements with no
 * `if` among them or one `if` (no `else`) whose condition is a conjunction
 * of sums below an array's extent, an integer parameter or a constant, the
 * elementwise kernel's
 * guard: the rows then run only the threads that pass it (the others do
 * nothing in a block either), and their code takes it as true, so that a
 * whole chunk has no mask to compute (target_cpu.c's rows chunk).
 *
 * Needs: a checked kernel.  Gives: the form's record (KjGridRows), with the
 * guard's bounds and the output whose lines the rows are cut on: the first store into an array
 * parameter whose every index is a grid() sum (directly, or through a
 * variable assigned only that), the last one of axis x.
 */
#include "kjit_compiler.h"

#include <stdint.h>
#include <string.h>

typedef struct Scan {
    int sregs[KJ_SREG_COUNT];
    int sums[3];
    bool refused;
} Scan;

static bool is_cast_of(const KjIrExpr *e, KjSpecialReg reg)
{
    return e->op == KJ_IR_CAST && e->type->kind == KJ_TYPE_I64 && e->arg_count == 1 &&
           e->args[0]->op == KJ_IR_SREG && e->args[0]->sreg == reg;
}

/* The axis of a grid() sum (kj_check_grid_component's form), or -1. */
int kj_grid_sum_axis(const KjIrExpr *e)
{
    if (!e || e->op != KJ_IR_ADD || e->arg_count != 2 || e->type->kind != KJ_TYPE_I64)
        return -1;
    const KjIrExpr *block = e->args[0];
    if (block->op != KJ_IR_MUL || block->arg_count != 2)
        return -1;
    for (int d = 0; d < 3; d++)
        if (is_cast_of(block->args[0], (KjSpecialReg)(KJ_SREG_BID_X + d)) &&
            is_cast_of(block->args[1], (KjSpecialReg)(KJ_SREG_BDIM_X + d)) &&
            is_cast_of(e->args[1], (KjSpecialReg)(KJ_SREG_TID_X + d)))
            return d;
    return -1;
}

static bool scan_expr(KjIrWalk *w, const KjIrExpr *e)
{
    Scan *sc = w->data;
    switch (e->op) {
    case KJ_IR_SREG:
        sc->sregs[e->sreg]++;
        break;
    case KJ_IR_ADD: {
        int d = kj_grid_sum_axis(e);
        if (d >= 0)
            sc->sums[d]++;
        break;
    }
    /* threads that meet, or whose order shows */
    case KJ_IR_SHARED: case KJ_IR_DYNAMIC_SHARED: case KJ_IR_SYNCTHREADS: case KJ_IR_EXEC:
    case KJ_IR_ATOMIC: case KJ_IR_PRINT: case KJ_IR_LOCAL:
        sc->refused = true;
        return false;
    case KJ_IR_CALL:
        /* a device function reads the thread (or meets others) where this
         * scan does not look */
        if (!e->callee || e->callee->device_use || e->callee->kind == KJ_IR_FN_KERNEL) {
            sc->refused = true;
            return false;
        }
        break;
    default:
        break;
    }
    return true;
}

static KjIrWalkStep scan_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    Scan *sc = w->data;
    if (s->kind == KJ_IR_STMT_THREADS || s->kind == KJ_IR_STMT_PARFOR) {
        sc->refused = true;
        return KJ_IR_WALK_STOP;
    }
    return KJ_IR_WALK_ON;
}

static int param_index(const KjIrFunction *kernel, const KjIrVar *var)
{
    for (int p = 0; p < kernel->param_count; p++)
        if (kernel->params[p] == var)
            return p;
    return -1;
}

typedef struct Outputs {
    const KjIrFunction *kernel;
    KjGridRows *rows;
    const KjIrStmt *body;
} Outputs;

typedef struct CountSets {
    const KjIrVar *var;
    int count;
    int axis;
} CountSets;

static KjIrWalkStep count_sets(KjIrWalk *w, const KjIrStmt *s)
{
    CountSets *c = w->data;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_PARFOR) &&
        s->var == c->var) {
        c->count++;
        c->axis = s->kind == KJ_IR_STMT_SET ? kj_grid_sum_axis(s->value) : -1;
    }
    return KJ_IR_WALK_ON;
}

/* The grid axis that index e is, directly or through a variable assigned
 * nothing but one grid() sum; -1 otherwise. */
static int index_axis(const KjIrStmt *body, const KjIrExpr *e)
{
    if (e->op != KJ_IR_VAR)
        return kj_grid_sum_axis(e);
    CountSets c = {.var = e->var, .axis = -1};
    KjIrWalk w = {.stmt = count_sets, .data = &c};
    kj_ir_walk_stmt(&w, body);
    return c.count == 1 ? c.axis : -1;
}

static KjIrWalkStep find_output(KjIrWalk *w, const KjIrStmt *s)
{
    Outputs *o = w->data;
    if (o->rows->out >= 0)
        return KJ_IR_WALK_STOP;
    if (s->kind != KJ_IR_STMT_STORE || s->contiguous || s->array->op != KJ_IR_VAR ||
        s->index_count < 1 || s->index_count > KJ_MAX_DIMS)
        return KJ_IR_WALK_ON;
    int param = param_index(o->kernel, s->array->var);
    if (param < 0)
        return KJ_IR_WALK_ON;
    int8_t axes[KJ_MAX_DIMS];
    for (int k = 0; k < s->index_count; k++) {
        int axis = index_axis(o->body, s->indices[k]);
        if (axis < 0)
            return KJ_IR_WALK_ON;
        axes[k] = (int8_t)axis;
    }
    if (axes[s->index_count - 1] != 0)
        return KJ_IR_WALK_ON;
    KjGridRows *rows = o->rows;
    rows->out = param;
    rows->out_ndim = s->index_count;
    memcpy(rows->out_axis, axes, sizeof axes);
    const KjType *t = s->array->type;
    rows->out_size = kj_type_size(t->kind == KJ_TYPE_ARRAY ? t->elem : t);
    return KJ_IR_WALK_STOP;
}

/* The signed 32- or 64-bit integer parameter that e reads (as it is, or
 * widened to i64), which the body never assigns; -1 otherwise. */
static int scalar_param(const KjIrFunction *kernel, const KjIrExpr *e)
{
    if (e->op == KJ_IR_CAST && e->arg_count == 1 && e->args[0]->type->kind == KJ_TYPE_I32)
        e = e->args[0];
    if (e->op != KJ_IR_VAR || (e->type->kind != KJ_TYPE_I32 && e->type->kind != KJ_TYPE_I64))
        return -1;
    int param = param_index(kernel, e->var);
    CountSets c = {.var = e->var, .axis = -1};
    KjIrWalk w = {.stmt = count_sets, .data = &c};
    kj_ir_walk_stmt(&w, kernel->body);
    return param >= 0 && c.count == 0 ? param : -1;
}

/* One term of a guard, x < bound (x <= bound: bound + 1), into rows. */
static bool guard_term(const KjIrFunction *kernel, const KjIrExpr *e, KjGridRows *rows)
{
    const KjIrExpr *x = NULL, *bound = NULL;
    int64_t add = 0;
    switch (e->op) {
    case KJ_IR_LOGAND:
        return guard_term(kernel, e->args[0], rows) && guard_term(kernel, e->args[1], rows);
    case KJ_IR_LT: x = e->args[0], bound = e->args[1]; break;
    case KJ_IR_LE: x = e->args[0], bound = e->args[1], add = 1; break;
    case KJ_IR_GT: x = e->args[1], bound = e->args[0]; break;
    case KJ_IR_GE: x = e->args[1], bound = e->args[0], add = 1; break;
    default: return false;
    }
    if (x->type->kind != KJ_TYPE_I64 || bound->type->kind != KJ_TYPE_I64 ||
        rows->bound_count == KJ_GRID_ROWS_BOUNDS)
        return false;
    int axis = index_axis(kernel->body, x);
    if (axis < 0)
        return false;
    KjGridRowsBound b = {.axis = (int8_t)axis, .param = -1};
    if (bound->op == KJ_IR_CONST) {
        if ((int64_t)bound->const_int == INT64_MAX)
            return false;
        b.add = (int64_t)bound->const_int + add;
    } else if (bound->op == KJ_IR_DIM && bound->args[0]->op == KJ_IR_VAR &&
               (b.param = param_index(kernel, bound->args[0]->var)) >= 0) {
        b.dim = bound->dim;
        b.add = add;
    } else if ((b.param = scalar_param(kernel, bound)) >= 0) {
        b.dim = -1;
        b.dim_bytes = (int8_t)kj_type_size(kernel->params[b.param]->type);
        b.add = add;
    } else {
        return false;
    }
    rows->bounds[rows->bound_count++] = b;
    return true;
}

/* The body's form: sets of grid() sums, then either a guard (an `if`
 * without `else` that is the last statement, of guard_term's terms) or
 * statements none of which is an `if`. */
static bool find_guard(const KjIrFunction *kernel, KjGridRows *rows)
{
    const KjIrStmt *body = kernel->body;
    if (body->kind != KJ_IR_STMT_BLOCK)
        return false;
    int i = 0;
    while (i < body->stmts.count) {
        const KjIrStmt *st = body->stmts.items[i];
        if (st->kind != KJ_IR_STMT_SET || kj_grid_sum_axis(st->value) < 0)
            break;
        i++;
    }
    if (i == body->stmts.count - 1) {
        const KjIrStmt *st = body->stmts.items[i];
        if (st->kind == KJ_IR_STMT_IF) {
            if (st->else_stmt || !guard_term(kernel, st->cond, rows))
                return false;
            rows->guard = st;
            return true;
        }
    }
    for (; i < body->stmts.count; i++)
        if (((const KjIrStmt *)body->stmts.items[i])->kind == KJ_IR_STMT_IF)
            return false;
    return true;
}

KjGridRows kj_grid_rows(const KjIrFunction *kernel)
{
    KjGridRows rows = {.out = -1};
    if (!kernel || kernel->kind != KJ_IR_FN_KERNEL || kernel->uses_syncthreads ||
        kernel->uses_syncgrid || kernel->uses_dynamic_shared || kernel->shared_bytes ||
        kernel->local_bytes || kernel->launch_locals.count || kernel->split_of)
        return rows;
    Scan sc = {0};
    KjIrWalk w = {.stmt = scan_stmt, .expr = scan_expr, .data = &sc};
    kj_ir_walk_stmt(&w, kernel->body);
    if (sc.refused)
        return rows;
    for (int d = 0; d < 3; d++) {
        /* each sum holds one of each of its axis's three registers: equal
         * counts leave none outside a sum */
        if (sc.sregs[KJ_SREG_TID_X + d] != sc.sums[d] || sc.sregs[KJ_SREG_BID_X + d] != sc.sums[d] ||
            sc.sregs[KJ_SREG_BDIM_X + d] != sc.sums[d] || sc.sregs[KJ_SREG_GDIM_X + d] != 0)
            return rows;
    }
    if (!find_guard(kernel, &rows))
        return (KjGridRows){.out = -1};
    rows.ok = true;
    Outputs o = {.kernel = kernel, .rows = &rows, .body = kernel->body};
    KjIrWalk find = {.stmt = find_output, .data = &o};
    kj_ir_walk_stmt(&find, kernel->body);
    return rows;
}
