/*
 * local_promote.c: local() arrays whose indices are known at compile time
 * become scalar variables (registers).
 *
 * CUDA code keeps a thread's register block in a small array
 * (`let acc = local(f64, 4, 4)`) indexed by short constant loops.  As
 * memory, such an array kept a tiled matrix multiply 3 times slower than
 * with 16 scalars on cpu, kept the kernel off the SIMD lowering (which
 * takes no local()), and is `.local` memory in the PTX (issue 25, item 2).
 * This pass does what nvcc does: it unrolls the small constant loops that
 * index such an array, then replaces each of its elements by a variable.
 *
 * Needs: a checked module (before checked mode's marks or after: a load or
 * store whose constant index is in range cannot fail its check).
 * Gives: the same module, each function rewritten in place:
 *   - a candidate is an array variable whose only assignment is
 *     `let a = local(T, ...)` of at most KJ_PROMOTE_MAX_ELEMENTS elements
 *     of a scalar type that is not f16 or bf16, and which is only ever
 *     indexed (a load, a store, `a.shape[k]`: never passed to a call, bound
 *     to another name or chosen between);
 *   - every index of every access to a candidate must be built of integer
 *     constants, integer arithmetic and the variables of enclosing `for`
 *     loops that can be unrolled: constant bounds, at most
 *     KJ_PROMOTE_MAX_TRIPS iterations, no break or continue of their own, no
 *     barrier but a warp collective (unrolling one would change the barrier
 *     split's regions), the
 *     loop variable never assigned in the body;
 *   - those loops are unrolled (innermost first), each copy of the body with
 *     the loop variable replaced by its constant, while the copies stay
 *     within KJ_PROMOTE_MAX_NODES IR nodes; other loops are left alone;
 *   - a candidate whose every access then has constant indices within its
 *     shape becomes one variable per element it touches (`acc.5`): a load is
 *     a read of it, a store an assignment, and its `let` is removed
 *     (`a.shape[k]` of a candidate is its constant extent from the start, so
 *     that loops bounded by it unroll).  Elements read before any store read that
 *     variable's start value, zero; a local() array's contents before a
 *     store are unspecified (docs/language.md), so nothing defined changes.
 * The arithmetic and its order are unchanged: the same bits on every
 * target.  A function's local_bytes is left as it was (an upper bound).
 * KJIT_PROMOTE_LOCALS=0 turns the pass off.
 */
#include "kjit_compiler.h"

#include <stdlib.h>
#include <string.h>

enum {
    KJ_PROMOTE_MAX_ELEMENTS = 64, /* registers: a 4x4 block of f64 is 16 */
    KJ_PROMOTE_MAX_TRIPS = 32,
    KJ_PROMOTE_MAX_NODES = 4000, /* the nodes one unrolled loop may take */
};

typedef enum { CAND_NO, CAND_YES } CandState;

typedef struct Promote {
    KjArena *arena;
    KjIrFunction *fn;
    int var_count;
    CandState *cand;          /* per variable id */
    const KjIrExpr **alloc;   /* per variable id: its local() */
    int *sets, *refs, *uses;  /* per variable id: assignments, reads, indexed uses */
    const KjIrStmt **loops;   /* the for loops around the statement being walked */
    int depth;
    const KjIrStmt **wanted;  /* for loops to unroll */
    int wanted_count, wanted_cap;
    KjIrExpr **subst;         /* per variable id: the constant that replaces it */
    KjIrVar ***elements;      /* per variable id: a promoted array's element variables */
} Promote;

/* ------------------------------------------------------------- integers */

static int64_t wrap(int64_t v, const KjType *type)
{
    int bits = kj_type_int_bits(type);
    if (bits <= 0 || bits >= 64)
        return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1, u = (uint64_t)v & mask;
    if (kj_type_is_signed(type) && (u >> (bits - 1)))
        u |= ~mask;
    return (int64_t)u;
}

/* The value of an integer expression of constants, or false. */
static bool const_value(const KjIrExpr *e, int64_t *out)
{
    if (!e || !kj_type_is_int(e->type))
        return false;
    int64_t a = 0, b = 0;
    switch (e->op) {
    case KJ_IR_CONST:
        *out = wrap((int64_t)e->const_int, e->type);
        return true;
    case KJ_IR_CAST:
        if (!const_value(e->args[0], &a))
            return false;
        *out = wrap(a, e->type);
        return true;
    case KJ_IR_NEG:
        if (!const_value(e->args[0], &a))
            return false;
        *out = wrap((int64_t)(0 - (uint64_t)a), e->type);
        return true;
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR:
        break;
    default:
        return false;
    }
    if (!const_value(e->args[0], &a) || !const_value(e->args[1], &b))
        return false;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int bits = kj_type_int_bits(e->type);
    bool sign = kj_type_is_signed(e->type);
    uint64_t r;
    switch (e->op) {
    case KJ_IR_ADD: r = ua + ub; break;
    case KJ_IR_SUB: r = ua - ub; break;
    case KJ_IR_MUL: r = ua * ub; break;
    case KJ_IR_BITAND: r = ua & ub; break;
    case KJ_IR_BITOR: r = ua | ub; break;
    case KJ_IR_BITXOR: r = ua ^ ub; break;
    case KJ_IR_DIV: case KJ_IR_REM:
        /* the back end's rules for 0 and -1 are left to it */
        if (b == 0 || (sign && b == -1))
            return false;
        if (sign)
            r = (uint64_t)(e->op == KJ_IR_DIV ? a / b : a % b);
        else {
            uint64_t mask = bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
            r = e->op == KJ_IR_DIV ? (ua & mask) / (ub & mask) : (ua & mask) % (ub & mask);
        }
        break;
    case KJ_IR_SHL: case KJ_IR_SHR:
        if (b < 0 || b >= bits)
            return false;
        if (e->op == KJ_IR_SHL)
            r = ua << b;
        else if (sign)
            r = (uint64_t)(a >> b); /* a is sign-extended: arithmetic */
        else
            r = (bits >= 64 ? ua : ua & (((uint64_t)1 << bits) - 1)) >> b;
        break;
    default: return false;
    }
    *out = wrap((int64_t)r, e->type);
    return true;
}

/* --------------------------------------------------------- the analysis */

/* What a loop is not unrolled across: syncthreads(), the block's and the
 * grid's collectives, whose regions the barrier split cuts, and calls of
 * functions with any barrier.  A warp collective (a shuffle, mma()) is no
 * obstacle: a kernel that uses one is never split (barrier_split.c), and an
 * unrolled loop meets the warp at the same collectives in the same order,
 * so a register block of mma() accumulators is promoted. */
static bool is_barrier(const KjIrExpr *e)
{
    return e->op == KJ_IR_SYNCTHREADS ||
           (e->op == KJ_IR_EXEC && kj_exec_is_barrier[e->exec] &&
            kj_exec_form[e->exec] != KJ_EXEC_FORM_WARP) ||
           (e->op == KJ_IR_CALL && e->callee && e->callee->uses_syncthreads);
}

static bool expr_has_barrier(KjIrWalk *w, const KjIrExpr *e)
{
    (void)w;
    return !is_barrier(e);
}

/* A break or continue of this loop (not of a loop inside it). */
static bool own_jump(const KjIrStmt *s)
{
    if (!s)
        return false;
    if (s->kind == KJ_IR_STMT_BREAK || s->kind == KJ_IR_STMT_CONTINUE)
        return true;
    if (s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_WHILE)
        return false;
    for (int i = 0; i < s->stmts.count; i++)
        if (own_jump(s->stmts.items[i]))
            return true;
    return own_jump(s->then_stmt) || own_jump(s->else_stmt) || own_jump(s->body);
}

static bool assigns(const KjIrStmt *s, const KjIrVar *var)
{
    if (!s)
        return false;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR) && s->var == var)
        return true;
    for (int i = 0; i < s->stmts.count; i++)
        if (assigns(s->stmts.items[i], var))
            return true;
    return assigns(s->then_stmt, var) || assigns(s->else_stmt, var) || assigns(s->body, var);
}

/* A for loop over constant bounds: its trip count, or -1. */
static int64_t trips_of(const KjIrStmt *s)
{
    int64_t start, stop, step;
    if (s->kind != KJ_IR_STMT_FOR || s->simd_lanes || !const_value(s->start, &start) ||
        !const_value(s->stop, &stop) || !const_value(s->step, &step) || step == 0)
        return -1;
    if (step > 0)
        return stop <= start ? 0 : (int64_t)(((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step) + 1;
    return stop >= start ? 0 : (int64_t)(((uint64_t)start - (uint64_t)stop - 1) / (uint64_t)-step) + 1;
}

static bool unrollable(const KjIrStmt *s)
{
    int64_t trips = trips_of(s);
    if (trips < 0 || trips > KJ_PROMOTE_MAX_TRIPS || own_jump(s->body) || assigns(s->body, s->var))
        return false;
    KjIrWalk w = {.expr = expr_has_barrier};
    return kj_ir_walk_stmt(&w, s->body);
}

/* An index of constants and the variables of enclosing unrollable loops;
 * want: mark those loops to unroll. */
static bool index_known(Promote *P, const KjIrExpr *e, bool want)
{
    if (!e || !kj_type_is_int(e->type))
        return false;
    switch (e->op) {
    case KJ_IR_CONST:
        return true;
    case KJ_IR_VAR:
        for (int i = P->depth - 1; i >= 0; i--) {
            if (P->loops[i]->var != e->var)
                continue;
            if (!unrollable(P->loops[i]))
                return false;
            if (want) {
                for (int k = 0; k < P->wanted_count; k++)
                    if (P->wanted[k] == P->loops[i])
                        return true;
                if (P->wanted_count == P->wanted_cap) {
                    int cap = P->wanted_cap ? 2 * P->wanted_cap : 16;
                    const KjIrStmt **grown = kj_arena_alloc(P->arena, sizeof *grown * (size_t)cap);
                    if (P->wanted_count)
                        memcpy(grown, P->wanted, sizeof *grown * (size_t)P->wanted_count);
                    P->wanted = grown;
                    P->wanted_cap = cap;
                }
                P->wanted[P->wanted_count++] = P->loops[i];
            }
            return true;
        }
        return false;
    case KJ_IR_CAST: case KJ_IR_NEG:
        return index_known(P, e->args[0], want);
    case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR:
        return index_known(P, e->args[0], want) && index_known(P, e->args[1], want);
    default:
        return false;
    }
}

static bool candidate_array(const Promote *P, const KjIrExpr *array)
{
    return array && array->op == KJ_IR_VAR && P->cand[array->var->id] == CAND_YES;
}

/* One access array[indices]: a candidate's must be known. */
static void access(Promote *P, const KjIrExpr *array, KjIrExpr *const *indices, int count, bool want)
{
    if (!candidate_array(P, array))
        return;
    for (int k = 0; k < count; k++)
        if (!index_known(P, indices[k], false)) {
            P->cand[array->var->id] = CAND_NO;
            return;
        }
    if (want)
        for (int k = 0; k < count; k++)
            index_known(P, indices[k], true);
}

static void scan_expr(Promote *P, const KjIrExpr *e, bool want)
{
    if (!e)
        return;
    if (e->op == KJ_IR_LOAD)
        access(P, e->args[0], e->args + 1, e->arg_count - 1, want);
    for (int i = 0; i < e->arg_count; i++)
        scan_expr(P, e->args[i], want);
}

static void scan_stmt(Promote *P, const KjIrStmt *s, bool want)
{
    if (!s)
        return;
    const KjIrExpr *own[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        scan_expr(P, own[i], want);
    for (int i = 0; i < s->index_count; i++)
        scan_expr(P, s->indices[i], want);
    if (s->kind == KJ_IR_STMT_STORE)
        access(P, s->array, s->indices, s->index_count, want);
    for (int i = 0; i < s->stmts.count; i++)
        scan_stmt(P, s->stmts.items[i], want);
    scan_stmt(P, s->then_stmt, want);
    scan_stmt(P, s->else_stmt, want);
    if (s->body) {
        bool loop = s->kind == KJ_IR_STMT_FOR;
        if (loop)
            P->loops[P->depth++] = s;
        scan_stmt(P, s->body, want);
        P->depth -= loop;
    }
}

/* Counts of assignments, reads and indexed uses of array variables. */
static bool count_expr(KjIrWalk *w, const KjIrExpr *e)
{
    Promote *P = w->data;
    if (e->op == KJ_IR_VAR && e->var->id < P->var_count)
        P->refs[e->var->id]++;
    if ((e->op == KJ_IR_LOAD || e->op == KJ_IR_DIM) && e->args[0]->op == KJ_IR_VAR &&
        e->args[0]->var->id < P->var_count)
        P->uses[e->args[0]->var->id]++;
    return true;
}

/* A local() sized at launch (local_size.c) has no constant shape to
 * promote: its launch-sized axes have alloc_shape 0. */
static bool sized_at_launch(const KjIrExpr *alloc)
{
    for (int k = 0; k < alloc->alloc_ndim; k++)
        if (alloc->alloc_size[k])
            return true;
    return false;
}

static KjIrWalkStep count_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    Promote *P = w->data;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR) && s->var->id < P->var_count) {
        P->sets[s->var->id]++;
        if (s->kind == KJ_IR_STMT_SET && s->value->op == KJ_IR_LOCAL && !sized_at_launch(s->value))
            P->alloc[s->var->id] = s->value;
    }
    if (s->kind == KJ_IR_STMT_STORE && s->array->op == KJ_IR_VAR && s->array->var->id < P->var_count)
        P->uses[s->array->var->id]++;
    return KJ_IR_WALK_ON;
}

static int64_t element_count(const KjIrExpr *alloc)
{
    int64_t n = 1;
    for (int k = 0; k < alloc->alloc_ndim; k++)
        n *= alloc->alloc_shape[k];
    return n;
}

static int loop_depth_of(const KjIrStmt *s)
{
    if (!s)
        return 0;
    int most = 0;
    for (int i = 0; i < s->stmts.count; i++) {
        int d = loop_depth_of(s->stmts.items[i]);
        most = d > most ? d : most;
    }
    const KjIrStmt *subs[3] = {s->then_stmt, s->else_stmt, s->body};
    for (int k = 0; k < 3; k++) {
        int d = loop_depth_of(subs[k]);
        most = d > most ? d : most;
    }
    return most + (s->kind == KJ_IR_STMT_FOR);
}

/* ------------------------------------------------------------ unrolling */

static KjIrExpr *copy_expr(Promote *P, const KjIrExpr *e)
{
    if (!e)
        return NULL;
    KjIrExpr *c = kj_arena_alloc(P->arena, sizeof *c);
    if (e->op == KJ_IR_VAR && e->var->id < P->var_count && P->subst[e->var->id]) {
        *c = *P->subst[e->var->id];
        c->loc = e->loc;
        return c;
    }
    *c = *e;
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(P->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++)
            c->args[i] = copy_expr(P, e->args[i]);
    }
    return c;
}

static KjIrStmt *copy_stmt(Promote *P, const KjIrStmt *s)
{
    if (!s)
        return NULL;
    KjIrStmt *c = kj_arena_alloc(P->arena, sizeof *c);
    *c = *s;
    c->stmts = (KjVec){0};
    for (int i = 0; i < s->stmts.count; i++)
        kj_vec_push(P->arena, &c->stmts, copy_stmt(P, s->stmts.items[i]));
    c->value = copy_expr(P, s->value);
    c->array = copy_expr(P, s->array);
    c->cond = copy_expr(P, s->cond);
    c->start = copy_expr(P, s->start);
    c->stop = copy_expr(P, s->stop);
    c->step = copy_expr(P, s->step);
    if (s->index_count > 0) {
        c->indices = kj_arena_alloc(P->arena, sizeof *c->indices * (size_t)s->index_count);
        for (int i = 0; i < s->index_count; i++)
            c->indices[i] = copy_expr(P, s->indices[i]);
    }
    c->then_stmt = copy_stmt(P, s->then_stmt);
    c->else_stmt = copy_stmt(P, s->else_stmt);
    c->body = copy_stmt(P, s->body);
    return c;
}

static int64_t node_count(const KjIrStmt *s);

static bool count_node_expr(KjIrWalk *w, const KjIrExpr *e)
{
    (void)e;
    (*(int64_t *)w->data)++;
    return true;
}

static KjIrWalkStep count_node_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    (void)s;
    (*(int64_t *)w->data)++;
    return KJ_IR_WALK_ON;
}

static int64_t node_count(const KjIrStmt *s)
{
    int64_t n = 0;
    KjIrWalk w = {.stmt = count_node_stmt, .expr = count_node_expr, .data = &n};
    kj_ir_walk_stmt(&w, s);
    return n;
}

static bool wanted(const Promote *P, const KjIrStmt *s)
{
    for (int k = 0; k < P->wanted_count; k++)
        if (P->wanted[k] == s)
            return true;
    return false;
}

/* s with the wanted loops under it unrolled, in place (a loop statement
 * becomes a block of copies of its body). */
static void unroll(Promote *P, KjIrStmt *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->stmts.count; i++)
        unroll(P, s->stmts.items[i]);
    unroll(P, s->then_stmt);
    unroll(P, s->else_stmt);
    unroll(P, s->body);
    if (s->kind != KJ_IR_STMT_FOR || !wanted(P, s))
        return;
    int64_t trips = trips_of(s), start, step;
    const_value(s->start, &start);
    const_value(s->step, &step);
    if (trips < 0 || trips * node_count(s->body) > KJ_PROMOTE_MAX_NODES)
        return;
    KjIrStmt *block = kj_ir_new_stmt(P->arena, KJ_IR_STMT_BLOCK, s->loc);
    int id = s->var->id;
    for (int64_t t = 0; t < trips; t++) {
        int64_t value = wrap((int64_t)((uint64_t)start + (uint64_t)t * (uint64_t)step), s->var->type);
        P->subst[id] = kj_ir_int_const(P->arena, s->var->type, value, s->loc);
        kj_vec_push(P->arena, &block->stmts, copy_stmt(P, s->body));
    }
    P->subst[id] = NULL;
    *s = *block;
}

/* ------------------------------------------------------ scalar replacement */

/* The flat element an access names, or -1. */
static int64_t flat_index(const KjIrExpr *alloc, KjIrExpr *const *indices, int count)
{
    if (count != alloc->alloc_ndim)
        return -1;
    int64_t flat = 0;
    for (int k = 0; k < count; k++) {
        int64_t v;
        if (!const_value(indices[k], &v) || v < 0 || v >= alloc->alloc_shape[k])
            return -1;
        flat = flat * alloc->alloc_shape[k] + v;
    }
    return flat;
}

/* Whether every access of a candidate has constant indices in range. */
static void check_expr(Promote *P, const KjIrExpr *e)
{
    if (!e)
        return;
    if (e->op == KJ_IR_LOAD && candidate_array(P, e->args[0]) &&
        flat_index(P->alloc[e->args[0]->var->id], e->args + 1, e->arg_count - 1) < 0)
        P->cand[e->args[0]->var->id] = CAND_NO;
    for (int i = 0; i < e->arg_count; i++)
        check_expr(P, e->args[i]);
}

static void check_stmt(Promote *P, const KjIrStmt *s)
{
    if (!s)
        return;
    const KjIrExpr *own[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        check_expr(P, own[i]);
    for (int i = 0; i < s->index_count; i++)
        check_expr(P, s->indices[i]);
    if (s->kind == KJ_IR_STMT_STORE && candidate_array(P, s->array) &&
        flat_index(P->alloc[s->array->var->id], s->indices, s->index_count) < 0)
        P->cand[s->array->var->id] = CAND_NO;
    for (int i = 0; i < s->stmts.count; i++)
        check_stmt(P, s->stmts.items[i]);
    check_stmt(P, s->then_stmt);
    check_stmt(P, s->else_stmt);
    check_stmt(P, s->body);
}

static KjIrVar *element_var(Promote *P, const KjIrVar *array, int64_t flat)
{
    KjIrVar **vars = P->elements[array->id];
    if (!vars) {
        int64_t n = element_count(P->alloc[array->id]);
        vars = P->elements[array->id] = kj_arena_alloc(P->arena, sizeof *vars * (size_t)n);
    }
    if (!vars[flat])
        vars[flat] = kj_ir_new_var(P->arena, P->fn,
                                   kj_arena_printf(P->arena, "%s.%lld", array->name, (long long)flat),
                                   array->type->elem, array->loc);
    return vars[flat];
}

static void replace_expr(Promote *P, KjIrExpr *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->arg_count; i++)
        replace_expr(P, e->args[i]);
    if (e->op == KJ_IR_LOAD && candidate_array(P, e->args[0])) {
        const KjIrVar *array = e->args[0]->var;
        KjIrVar *var = element_var(P, array, flat_index(P->alloc[array->id], e->args + 1, e->arg_count - 1));
        KjLoc loc = e->loc;
        *e = *kj_ir_var_ref(P->arena, var, loc);
    }
}

static void replace_stmt(Promote *P, KjIrStmt *s)
{
    if (!s)
        return;
    KjIrExpr *own[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (own[i] != s->array || s->kind != KJ_IR_STMT_STORE)
            replace_expr(P, own[i]);
    for (int i = 0; i < s->index_count; i++)
        replace_expr(P, s->indices[i]);
    if (s->kind == KJ_IR_STMT_STORE && candidate_array(P, s->array)) {
        const KjIrVar *array = s->array->var;
        KjIrVar *var = element_var(P, array, flat_index(P->alloc[array->id], s->indices, s->index_count));
        *s = *kj_ir_set(P->arena, var, s->value, s->loc);
    } else if (s->kind == KJ_IR_STMT_SET && s->value->op == KJ_IR_LOCAL && s->var->id < P->var_count &&
               P->cand[s->var->id] == CAND_YES) {
        *s = *kj_ir_new_stmt(P->arena, KJ_IR_STMT_BLOCK, s->loc);
    }
    for (int i = 0; i < s->stmts.count; i++)
        replace_stmt(P, s->stmts.items[i]);
    replace_stmt(P, s->then_stmt);
    replace_stmt(P, s->else_stmt);
    replace_stmt(P, s->body);
}

/* ---------------------------------------------------------------- driver */

/* a.shape[k] of a candidate is its constant extent (a loop's bounds may be
 * written so), whether or not the array is promoted in the end. */
static bool fold_dims(KjIrWalk *w, const KjIrExpr *e)
{
    Promote *P = w->data;
    if (e->op == KJ_IR_DIM && e->args[0]->op == KJ_IR_VAR && e->args[0]->var->id < P->var_count &&
        P->cand[e->args[0]->var->id] == CAND_YES) {
        const KjIrExpr *alloc = P->alloc[e->args[0]->var->id];
        KjIrExpr *c = (KjIrExpr *)e; /* the walk hands out its nodes to be rewritten */
        *c = *kj_ir_int_const(P->arena, e->type, alloc->alloc_shape[e->dim], e->loc);
    }
    return true;
}

static void promote_function(KjArena *arena, KjIrFunction *fn)
{
    if (fn->local_bytes == 0 || !fn->body)
        return;
    int n = fn->locals.count;
    Promote promote = {.arena = arena, .fn = fn, .var_count = n}, *P = &promote;
    P->cand = kj_arena_alloc(arena, sizeof *P->cand * (size_t)(n + 1));
    P->alloc = kj_arena_alloc(arena, sizeof *P->alloc * (size_t)(n + 1));
    P->sets = kj_arena_alloc(arena, sizeof *P->sets * (size_t)(n + 1));
    P->refs = kj_arena_alloc(arena, sizeof *P->refs * (size_t)(n + 1));
    P->uses = kj_arena_alloc(arena, sizeof *P->uses * (size_t)(n + 1));
    KjIrWalk w = {.stmt = count_stmt, .expr = count_expr, .data = P};
    kj_ir_walk_stmt(&w, fn->body);
    bool any = false;
    for (int i = 0; i < n; i++) {
        const KjIrVar *v = fn->locals.items[i];
        const KjIrExpr *alloc = P->alloc[v->id];
        /* only indexed: every read of the name is the array of an access */
        bool ok = alloc && P->sets[v->id] == 1 && !v->is_param && P->refs[v->id] == P->uses[v->id] &&
                  element_count(alloc) <= KJ_PROMOTE_MAX_ELEMENTS &&
                  !kj_type_is_half(alloc->alloc_elem) && alloc->alloc_elem->kind != KJ_TYPE_VOID;
        P->cand[v->id] = ok ? CAND_YES : CAND_NO;
        any = any || ok;
    }
    if (!any)
        return;
    KjIrWalk dims = {.expr = fold_dims, .data = P};
    kj_ir_walk_stmt(&dims, fn->body);
    P->loops = kj_arena_alloc(arena, sizeof *P->loops * (size_t)(loop_depth_of(fn->body) + 1));
    scan_stmt(P, fn->body, false); /* drops candidates with unknown indices */
    any = false;
    for (int i = 0; i < n; i++)
        any = any || P->cand[i] == CAND_YES;
    if (!any)
        return;
    scan_stmt(P, fn->body, true); /* the loops the others need */
    P->subst = kj_arena_alloc(arena, sizeof *P->subst * (size_t)(n + 1));
    unroll(P, fn->body);
    check_stmt(P, fn->body);
    P->elements = kj_arena_alloc(arena, sizeof *P->elements * (size_t)(n + 1));
    replace_stmt(P, fn->body);
}

/* KJIT_PROMOTE_LOCALS=0: the arrays stay in memory (to measure what the
 * pass gives); module->locals_in_memory records it for the cache key
 * (api_support.c), so cached code of the other setting is not reused. */
static bool promote_locals_default(void)
{
    const char *env = getenv("KJIT_PROMOTE_LOCALS");
    return !(env && strcmp(env, "0") == 0);
}

void kj_promote_locals(KjIrModule *module)
{
    if (module->locals_promoted)
        return;
    module->locals_promoted = true;
    if (!promote_locals_default()) {
        module->locals_in_memory = true;
        return;
    }
    for (int i = 0; i < module->functions.count; i++)
        promote_function(module->arena, module->functions.items[i]);
}
