/*
 * split_specialise.c: a kernel's split form for one launch's block shape.
 *
 * The cpu targets compile a kernel with barriers for the block dims it is
 * launched with, as PoCL compiles a work-group function for the local size
 * (runtime/runtime_cpu.c keeps one specialised __block per shape).  With
 * blockDim a constant, the split form's control flow between regions (run
 * once per block, so uniform) often becomes constant too: the tree of a
 * block reduction, `let half = blockDim.x / 2; while half > 0 { if t < half
 * {...} syncthreads(); half = half / 2; }`, has a known trip count that LLVM
 * cannot see (a halving is no recurrence its scalar evolution knows), and
 * each level's region runs a known range of threads.
 *
 * Needs: a KERNEL with a split form (barrier_split.c) and the block dims.
 * Gives: a shallow copy of the kernel whose split is a new split form (same
 * variables) in which
 *   - blockDim.x/y/z are constants;
 *   - outside the regions, an integer or bool variable assigned a value that
 *     folds to a constant is that constant where it is read next (in
 *     conditions, region bounds, and in regions that do not assign it);
 *   - an if whose condition folds runs its one branch;
 *   - a while whose condition folds at every turn is unrolled (at most
 *     KJ_SPLIT_UNROLL_TURNS turns and KJ_SPLIT_UNROLL_REGIONS regions made
 *     in all; past that, or when the condition does not fold, the loop stays);
 *   - a region whose thread range folds to nothing is dropped;
 *   - a region whose statements guard with `X + threadIdx < n` runs as two
 *     copies, one for blocks whose every thread passes (see Guards below);
 *     in checked mode that copy's accesses that its test can prove inside
 *     their array lose their checks, the test gaining what the proof needs
 *     (see Proof).
 * Integer folding follows the code generator's semantics exactly (wrapping
 * arithmetic in the type's width, division by 0 and -1 as codegen_expr.c
 * makes them safe), so the specialised code computes what the general code
 * computes at those dims; floats are never folded.
 */
#include "kjit_compiler.h"

#include <string.h>

enum {
    KJ_SPLIT_UNROLL_TURNS = 64,    /* turns of one while */
    KJ_SPLIT_UNROLL_REGIONS = KJ_SPLIT_MAX_REGIONS, /* regions made by unrolling, in all */
};

/* What is known of each variable at a point of the code outside the regions. */
typedef struct Known {
    bool *is;
    uint64_t *value;
} Known;

enum { MAX_GUARDS = 8, MAX_PROOFS = 64, MAX_ACTIVE = 32 };

typedef struct Spec {
    KjArena *arena;
    const uint32_t *block;
    int var_count;
    int regions_left; /* the unrolling's budget */
    /* while copying a region for the block whose guards all hold: the
     * guards' conditions, each replaced by true */
    const KjIrExpr *holds[MAX_GUARDS];
    bool hold_value[MAX_GUARDS]; /* what each is replaced by (true but in x_split's proofs) */
    int hold_count;
    /* and the i64 value of the variables the guards prove do not wrap:
     * var id -> what `i64(var)` is there, NULL where not */
    KjIrExpr **widened;
    bool straight; /* the form of a kernel without barriers (kj_split_straight_line) */
    bool checked;  /* the form has check sites (checked mode) */
    /* and, while copying a region for a test of its own (the guards' copy,
     * x_split's): the guards (checked mode: accesses the copy proves inside
     * their array lose their check), the conditions that test must add for
     * those proofs, and the conditions in force where the copy is (those of
     * the enclosing ifs and selects, and of an earlier `if c { return; }`,
     * negated where the code runs when they are false) */
    const struct Guards *guards;
    KjIrExpr *proofs[MAX_PROOFS];
    int proof_count;
    const KjIrExpr *active[MAX_ACTIVE];
    bool active_not[MAX_ACTIVE];
    int active_count;
} Spec;

static bool proven_inside(Spec *S, const KjIrExpr *array, KjIrExpr *const *indices, int count);

static Known known_new(Spec *S)
{
    Known k = {kj_arena_alloc(S->arena, sizeof *k.is * (size_t)(S->var_count + 1)),
               kj_arena_alloc(S->arena, sizeof *k.value * (size_t)(S->var_count + 1))};
    return k;
}

static Known known_copy(Spec *S, Known from)
{
    Known k = known_new(S);
    memcpy(k.is, from.is, sizeof *k.is * (size_t)S->var_count);
    memcpy(k.value, from.value, sizeof *k.value * (size_t)S->var_count);
    return k;
}

static void known_set(Spec *S, Known to, Known from)
{
    memcpy(to.is, from.is, sizeof *to.is * (size_t)S->var_count);
    memcpy(to.value, from.value, sizeof *to.value * (size_t)S->var_count);
}

/* ============================================================ constants */

static bool is_int_like(const KjType *t)
{
    return t->kind == KJ_TYPE_BOOL || kj_type_is_int(t);
}

static int bits_of(const KjType *t)
{
    return t->kind == KJ_TYPE_BOOL ? 1 : kj_type_int_bits(t);
}

/* v as an int of type t: sign-extended from its width when t is signed,
 * zero-extended otherwise (the form the checker gives constants). */
static uint64_t normal(const KjType *t, uint64_t v)
{
    int bits = bits_of(t);
    if (bits >= 64)
        return v;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    v &= mask;
    if (t->kind != KJ_TYPE_BOOL && kj_type_is_signed(t) && (v >> (bits - 1)) & 1)
        v |= ~mask;
    return v;
}

static KjIrExpr *constant(Spec *S, const KjType *t, KjLoc loc, uint64_t v)
{
    return kj_ir_int_const(S->arena, t, (int64_t)normal(t, v), loc);
}

static bool is_const_int(const KjIrExpr *e)
{
    return e->op == KJ_IR_CONST && is_int_like(e->type);
}

static bool less(const KjType *t, uint64_t a, uint64_t b)
{
    return t->kind != KJ_TYPE_BOOL && kj_type_is_signed(t) ? (int64_t)a < (int64_t)b : a < b;
}

/* a op b on ints of type t, as codegen_expr.c's gen_arith computes it. */
static bool fold_binary(KjIrOp op, const KjType *t, uint64_t a, uint64_t b, uint64_t *out)
{
    bool is_signed = t->kind != KJ_TYPE_BOOL && kj_type_is_signed(t);
    int bits = bits_of(t);
    switch (op) {
    case KJ_IR_ADD: *out = a + b; return true;
    case KJ_IR_SUB: *out = a - b; return true;
    case KJ_IR_MUL: *out = a * b; return true;
    case KJ_IR_DIV:
    case KJ_IR_REM:
        if (!is_signed) {
            uint64_t d = b == 0 ? 1 : b;
            *out = op == KJ_IR_DIV ? a / d : a % d;
            return true;
        }
        if (b == 0 || normal(t, b) == normal(t, (uint64_t)-1)) {
            /* 0 and -1 divide as 1; x / -1 is -x (wrapping), x % -1 is 0 */
            *out = op == KJ_IR_REM ? 0 : b == 0 ? a : (uint64_t)0 - a;
            return true;
        }
        *out = op == KJ_IR_DIV ? (uint64_t)((int64_t)a / (int64_t)b)
                               : (uint64_t)((int64_t)a % (int64_t)b);
        return true;
    case KJ_IR_BITAND: *out = a & b; return true;
    case KJ_IR_BITOR: *out = a | b; return true;
    case KJ_IR_BITXOR: *out = a ^ b; return true;
    case KJ_IR_SHL:
    case KJ_IR_SHR: {
        unsigned n = (unsigned)(b & (uint64_t)(bits - 1));
        if (op == KJ_IR_SHL)
            *out = a << n;
        else if (is_signed)
            *out = (uint64_t)((int64_t)a >> n); /* a is sign-extended */
        else
            *out = a >> n;
        return true;
    }
    default:
        return false;
    }
}

static bool fold_compare(KjIrOp op, const KjType *t, uint64_t a, uint64_t b, bool *out)
{
    switch (op) {
    case KJ_IR_EQ: *out = a == b; return true;
    case KJ_IR_NE: *out = a != b; return true;
    case KJ_IR_LT: *out = less(t, a, b); return true;
    case KJ_IR_LE: *out = !less(t, b, a); return true;
    case KJ_IR_GT: *out = less(t, b, a); return true;
    case KJ_IR_GE: *out = !less(t, a, b); return true;
    default: return false;
    }
}

/* ============================================================ expressions */

/* e has no effect and nothing checked mode checks: integer and bool
 * arithmetic (no division) on variables, constants, registers and extents. */
static bool pure(const KjIrExpr *e)
{
    switch (e->op) {
    case KJ_IR_CONST: case KJ_IR_VAR: case KJ_IR_SREG: case KJ_IR_DIM:
    case KJ_IR_NEG: case KJ_IR_NOT: case KJ_IR_BITNOT: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL:
    case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR:
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE:
    case KJ_IR_LOGAND: case KJ_IR_LOGOR: case KJ_IR_SELECT:
        break;
    case KJ_IR_CAST:
        if (!is_int_like(e->type) || !is_int_like(e->args[0]->type))
            return false;
        break;
    default:
        return false;
    }
    if (e->op != KJ_IR_SREG && e->op != KJ_IR_DIM && e->op != KJ_IR_VAR && e->op != KJ_IR_CONST &&
        !is_int_like(e->type))
        return false;
    for (int i = 0; i < e->arg_count; i++)
        if (!pure(e->args[i]))
            return false;
    return true;
}

/* Condition c (`negated`: its negation) holds where the copy is now, until
 * the caller sets active_count back. */
static void in_force(Spec *S, const KjIrExpr *c, bool negated)
{
    if (S->active_count == MAX_ACTIVE)
        return;
    S->active_not[S->active_count] = negated;
    S->active[S->active_count++] = c;
}

/* A copy of e with blockDim and the known variables (those not in `skip`)
 * replaced by constants, and the integer operations on constants folded. */
static KjIrExpr *expr(Spec *S, const KjIrExpr *e, Known k, const bool *skip)
{
    if (!e)
        return NULL;
    for (int i = 0; i < S->hold_count; i++)
        if (e == S->holds[i])
            return constant(S, e->type, e->loc, S->hold_value[i]);
    if (S->widened && e->op == KJ_IR_CAST && e->args[0]->op == KJ_IR_VAR) {
        const KjIrExpr *wide = S->widened[e->args[0]->var->id];
        if (wide && e->type == wide->type)
            return expr(S, wide, k, skip); /* a copy: each use its own nodes */
    }
    if (e->op == KJ_IR_SREG && e->sreg >= KJ_SREG_BDIM_X && e->sreg <= KJ_SREG_BDIM_Z)
        return constant(S, e->type, e->loc, S->block[e->sreg - KJ_SREG_BDIM_X]);
    if (e->op == KJ_IR_VAR && e->var->id < S->var_count && k.is[e->var->id] &&
        !(skip && skip[e->var->id]))
        return constant(S, e->type, e->loc, k.value[e->var->id]);
    KjIrExpr *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *e;
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(S->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++) {
            int outside = S->active_count;
            if (e->op == KJ_IR_SELECT && i > 0) /* an arm runs where its condition is true or false */
                in_force(S, e->args[0], i == 2);
            c->args[i] = expr(S, e->args[i], k, skip);
            S->active_count = outside;
        }
    }
    if (c->check_site && S->guards && (e->op == KJ_IR_LOAD || e->op == KJ_IR_ATOMIC) && e->arg_count > 1 &&
        e->args[0]->type->kind == KJ_TYPE_ARRAY && e->arg_count - 1 >= e->args[0]->type->ndim &&
        proven_inside(S, e->args[0], e->args + 1, e->args[0]->type->ndim))
        c->check_site = 0; /* inside the array for every thread the test lets in */
    if (c->op == KJ_IR_SELECT && is_const_int(c->args[0])) /* only the chosen arm runs */
        return c->args[0]->const_int ? c->args[1] : c->args[2];
    if (!is_int_like(c->type))
        return c;
    uint64_t v;
    switch (c->op) {
    case KJ_IR_LOGAND:
    case KJ_IR_LOGOR:
        if (is_const_int(c->args[0])) {
            bool first = c->args[0]->const_int != 0;
            if (first == (c->op == KJ_IR_LOGOR))
                return constant(S, c->type, c->loc, first);
            return c->args[1];
        }
        if (is_const_int(c->args[1])) {
            /* `a && true` is a, `a && false` false when a has no effect
             * (|| the same way round) */
            bool second = c->args[1]->const_int != 0;
            if (second != (c->op == KJ_IR_LOGOR))
                return c->args[0];
            if (pure(c->args[0]))
                return constant(S, c->type, c->loc, second);
        }
        return c;
    case KJ_IR_NOT:
        return is_const_int(c->args[0]) ? constant(S, c->type, c->loc, !c->args[0]->const_int) : c;
    case KJ_IR_NEG:
        return is_const_int(c->args[0]) ? constant(S, c->type, c->loc, 0 - c->args[0]->const_int) : c;
    case KJ_IR_BITNOT:
        return is_const_int(c->args[0]) ? constant(S, c->type, c->loc, ~c->args[0]->const_int) : c;
    case KJ_IR_CAST:
        if (!is_const_int(c->args[0]))
            return c;
        if (c->type->kind == KJ_TYPE_BOOL)
            return constant(S, c->type, c->loc, c->args[0]->const_int != 0);
        return constant(S, c->type, c->loc, c->args[0]->const_int);
    case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: {
        bool b;
        if (is_const_int(c->args[0]) && is_const_int(c->args[1]) &&
            fold_compare(c->op, c->args[0]->type, c->args[0]->const_int, c->args[1]->const_int, &b))
            return constant(S, c->type, c->loc, b);
        return c;
    }
    default:
        if (c->arg_count == 2 && is_const_int(c->args[0]) && is_const_int(c->args[1]) &&
            fold_binary(c->op, c->type, c->args[0]->const_int, c->args[1]->const_int, &v))
            return constant(S, c->type, c->loc, v);
        return c;
    }
}

/* ============================================================ statements */

/* Marks in `out` the variables s assigns (nested statements included). */
static KjIrWalkStep mark_set(KjIrWalk *w, const KjIrStmt *s)
{
    bool *out = w->data;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR || s->kind == KJ_IR_STMT_PARFOR) &&
        s->var)
        out[s->var->id] = true;
    return KJ_IR_WALK_ON;
}

static void mark_assigned(const KjIrStmt *s, bool *out)
{
    KjIrWalk w = {.stmt = mark_set, .data = out};
    kj_ir_walk_stmt(&w, s);
}

static void forget(Spec *S, Known k, const bool *assigned)
{
    for (int i = 0; i < S->var_count; i++)
        if (assigned[i])
            k.is[i] = false;
}

static KjIrStmt *new_block(Spec *S, KjLoc loc)
{
    return kj_ir_new_stmt(S->arena, KJ_IR_STMT_BLOCK, loc);
}

/* s is `if c { return; }`: the threads that go on past it fail c. */
static bool leaves_if(const KjIrStmt *s)
{
    if (s->kind != KJ_IR_STMT_IF || (s->else_stmt && (s->else_stmt->kind != KJ_IR_STMT_BLOCK ||
                                                      s->else_stmt->stmts.count > 0)))
        return false;
    const KjIrStmt *then = s->then_stmt;
    if (then && then->kind == KJ_IR_STMT_BLOCK && then->stmts.count == 1)
        then = then->stmts.items[0];
    return then && then->kind == KJ_IR_STMT_RETURN && !then->value;
}

/* A statement inside a region: a copy with its expressions folded (the
 * variables the region assigns, `skip`, are not replaced) and the ifs on
 * constants cut to their branch. */
static KjIrStmt *region_stmt(Spec *S, const KjIrStmt *s, Known k, const bool *skip)
{
    if (!s)
        return NULL;
    KjIrStmt *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *s;
    c->value = expr(S, s->value, k, skip);
    c->array = expr(S, s->array, k, skip);
    c->cond = expr(S, s->cond, k, skip);
    c->start = expr(S, s->start, k, skip);
    c->stop = expr(S, s->stop, k, skip);
    c->step = expr(S, s->step, k, skip);
    if (s->index_count > 0) {
        c->indices = kj_arena_alloc(S->arena, sizeof *c->indices * (size_t)s->index_count);
        for (int i = 0; i < s->index_count; i++)
            c->indices[i] = expr(S, s->indices[i], k, skip);
    }
    if (s->kind == KJ_IR_STMT_STORE && s->check_site && S->guards && s->array->type->kind == KJ_TYPE_ARRAY &&
        s->index_count == s->array->type->ndim && proven_inside(S, s->array, s->indices, s->index_count))
        c->check_site = 0;
    int outside = S->active_count;
    c->stmts = (KjVec){0};
    for (int i = 0; i < s->stmts.count; i++) {
        const KjIrStmt *item = s->stmts.items[i];
        kj_vec_push(S->arena, &c->stmts, region_stmt(S, item, k, skip));
        if (leaves_if(item)) /* the statements after it run where its condition is false */
            in_force(S, item->cond, true);
    }
    S->active_count = outside;
    if (s->kind == KJ_IR_STMT_IF && is_const_int(c->cond)) {
        bool taken = c->cond->const_int != 0;
        const KjIrStmt *branch = taken ? s->then_stmt : s->else_stmt;
        in_force(S, s->cond, !taken);
        KjIrStmt *out = branch ? region_stmt(S, branch, k, skip) : new_block(S, s->loc);
        S->active_count = outside;
        return out;
    }
    if (s->kind == KJ_IR_STMT_IF)
        in_force(S, s->cond, false);
    c->then_stmt = region_stmt(S, s->then_stmt, k, skip);
    S->active_count = outside;
    if (s->kind == KJ_IR_STMT_IF)
        in_force(S, s->cond, true);
    c->else_stmt = region_stmt(S, s->else_stmt, k, skip);
    S->active_count = outside;
    c->body = region_stmt(S, s->body, k, skip);
    return c;
}

static void control_stmt(Spec *S, const KjIrStmt *s, Known k, KjIrStmt *out);

/* Whether a region's thread range [start, stop) is known to hold no thread
 * of the block (the back end clamps it to [0, blockDim.x)). */
static bool empty_range(Spec *S, const KjIrStmt *threads)
{
    int64_t first = 0, end = S->block[0];
    if (threads->start && !is_const_int(threads->start))
        return false;
    if (threads->stop && !is_const_int(threads->stop))
        return false;
    if (threads->start && (int64_t)threads->start->const_int > first)
        first = (int64_t)threads->start->const_int;
    if (threads->stop && (int64_t)threads->stop->const_int < end)
        end = (int64_t)threads->stop->const_int;
    return first >= end;
}

/* ============================================================ guards */

/*
 * A region whose threads are known (its threadIdx.x range [a, b) constant,
 * y and z over the whole block) often guards an access with `i < n` where
 * i = X + threadIdx.x and X, n are the same for every thread (`i < len(x) ?
 * x[i] : 0`).  i grows with threadIdx.x, so when X + b - 1 does not wrap and
 * the last thread passes the test, every thread passes it; `i >= m` holds
 * for every thread when it holds for the first (X + a).  The same goes for
 * X + threadIdx.y and .z over [0, blockDim), and for each side of an `&&`
 * (`if y < h && x < w`, a 2-D kernel's test).  The region is then run as
 * `if <that> { the region, the tests true } else { the region }`: the block
 * that lies inside the array (all but the last, usually) runs without the
 * tests, and the rest as before.  Each thread computes what it did.
 */
typedef struct Guards {
    const KjIrExpr **def; /* var id -> its one assignment in the region, if any */
    int *sets;            /* var id -> assignments in the region */
    bool *early;          /* var id -> read in the region before its first assignment there */
    int64_t first[3];     /* the first thread's threadIdx.x, .y, .z: a, 0, 0 */
    int64_t last[3];      /* the last's: b - 1, blockDim.y - 1, blockDim.z - 1 */
    KjIrExpr *test;       /* the conjunction so far */
    KjIrExpr **widened;   /* var id -> i64(X) + i64(threadIdx.x), where var = X + threadIdx.x
                             in 32 bits and the test proves it does not wrap */
    /* each guard found (x_split's): the condition, its op with the
     * increasing side first, that side's X as i64, U, the axis, and whether
     * X or U reads a variable of the region (hoisted) */
    struct {
        const KjIrExpr *node;
        KjIrOp op;
        const KjIrExpr *wide, *bound;
        int axis;
        bool hoisted;
    } found[MAX_GUARDS];
    KjIrExpr *no_wrap; /* the conjunction of their no-wrap tests */
} Guards;

/* Counts the assignments of each variable in the region, and keeps the
 * value of those at its top (in blocks only, not under an if or a loop):
 * the walk's hooks (ir.c), with how many statements other than blocks the
 * walk is under. */
typedef struct RegionSets {
    Guards *G;
    int nested;
} RegionSets;

static KjIrWalkStep count_region_set(KjIrWalk *w, const KjIrStmt *s)
{
    RegionSets *r = w->data;
    if ((s->kind == KJ_IR_STMT_SET || s->kind == KJ_IR_STMT_FOR) && s->var) {
        r->G->sets[s->var->id]++;
        r->G->def[s->var->id] = r->nested == 0 && s->kind == KJ_IR_STMT_SET ? s->value : NULL;
    }
    r->nested += s->kind != KJ_IR_STMT_BLOCK;
    return KJ_IR_WALK_ON;
}

static void leave_region_set(KjIrWalk *w, const KjIrStmt *s)
{
    ((RegionSets *)w->data)->nested -= s->kind != KJ_IR_STMT_BLOCK;
}

/* (the walk meets a statement's expressions before the statement, so a
 * variable's reads before its first assignment are met before it) */
static bool note_region_read(KjIrWalk *w, const KjIrExpr *e)
{
    Guards *G = ((RegionSets *)w->data)->G;
    if (e->op == KJ_IR_VAR && G->sets[e->var->id] == 0)
        G->early[e->var->id] = true;
    return true;
}

static void count_region_sets(const KjIrStmt *region, Guards *G)
{
    RegionSets r = {G, 0};
    KjIrWalk w = {.stmt = count_region_set, .expr = note_region_read, .leave = leave_region_set, .data = &r};
    kj_ir_walk_stmt(&w, region);
}

static bool is_tid_x(const KjIrExpr *e)
{
    return e->op == KJ_IR_SREG && e->sreg == KJ_SREG_TID_X;
}

/* The axis (0 to 2) when e is threadIdx.x, .y or .z, or a conversion of it
 * (to a type of the sum it is in); else -1. */
static int tid_axis(const KjIrExpr *e)
{
    if (e->op == KJ_IR_CAST)
        e = e->args[0];
    return e->op == KJ_IR_SREG && e->sreg >= KJ_SREG_TID_X && e->sreg <= KJ_SREG_TID_Z
               ? (int)(e->sreg - KJ_SREG_TID_X)
               : -1;
}

static const KjIrExpr *through(const KjIrExpr *e, const Guards *G);

/* e is the same for every thread of the region and has no effect: no
 * threadIdx, memory, call, nor variable the region assigns but once at its
 * top, before any read, a value of that kind (the value is then the same
 * wherever the region reads the variable, and known before the region:
 * hoist). */
static bool same_for_all(const KjIrExpr *e, const Guards *G)
{
    switch (e->op) {
    case KJ_IR_SREG:
        return e->sreg != KJ_SREG_TID_X && e->sreg != KJ_SREG_TID_Y && e->sreg != KJ_SREG_TID_Z;
    case KJ_IR_VAR:
        return G->sets[e->var->id] == 0 || (through(e, G) != e && same_for_all(through(e, G), G));
    case KJ_IR_CONST: case KJ_IR_DIM: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV:
    case KJ_IR_REM: case KJ_IR_NEG: case KJ_IR_CAST: case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR:
    case KJ_IR_SHL: case KJ_IR_SHR:
        break;
    default:
        return false;
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!same_for_all(e->args[i], G))
            return false;
    return true;
}

/* Through a variable assigned once at the region's top, and not read
 * before: its value. */
static const KjIrExpr *through(const KjIrExpr *e, const Guards *G)
{
    if (e->op == KJ_IR_VAR && G->sets[e->var->id] == 1 && G->def[e->var->id] && !G->early[e->var->id])
        return G->def[e->var->id];
    return e;
}

/* Whether e reads a variable the region assigns. */
static bool reads_region(const KjIrExpr *e, const Guards *G)
{
    if (e->op == KJ_IR_VAR)
        return G->sets[e->var->id] > 0;
    for (int i = 0; i < e->arg_count; i++)
        if (reads_region(e->args[i], G))
            return true;
    return false;
}

/* Whether the X of an increasing X + threadIdx (as `increasing` reads it)
 * reads a variable the region assigns. */
static bool x_reads_region(const KjIrExpr *e, const Guards *G)
{
    e = through(e, G);
    if (e->op == KJ_IR_CAST)
        e = through(e->args[0], G);
    /* (the threadIdx side reads no variable) */
    return e->op == KJ_IR_ADD && (reads_region(e->args[0], G) || reads_region(e->args[1], G));
}

/* A same_for_all e as it is computed before the region: a copy with the
 * variables the region assigns replaced by their values. */
static KjIrExpr *hoist(Spec *S, const KjIrExpr *e, const Guards *G)
{
    if (e->op == KJ_IR_VAR && G->sets[e->var->id] > 0 && through(e, G) != e)
        return hoist(S, through(e, G), G);
    KjIrExpr *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *e;
    if (e->arg_count > 0) {
        c->args = kj_arena_alloc(S->arena, sizeof *c->args * (size_t)e->arg_count);
        for (int i = 0; i < e->arg_count; i++)
            c->args[i] = hoist(S, e->args[i], G);
    }
    return c;
}

/*
 * When e is X + threadIdx.x, .y or .z (either order, through a variable and
 * a widening cast) in a signed type of 32 or 64 bits, X the same for every
 * thread: the test that it does not wrap up to the last thread, and e's
 * value for the first and the last thread along that axis (X + first, X +
 * last in e's type, exact under that test), all i64.
 */
static bool increasing(Spec *S, const KjIrExpr *e, const Guards *G, KjIrExpr **no_wrap, KjIrExpr **at_first,
                       KjIrExpr **at_last, const KjIrVar **narrow_var, int *axis_out, int *bits_out)
{
    e = through(e, G);
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    *narrow_var = NULL;
    if (e->op == KJ_IR_CAST && kj_type_is_int(e->type) && kj_type_is_signed(e->type) &&
        kj_type_int_bits(e->type) == 64) {
        if (e->args[0]->op == KJ_IR_VAR)
            *narrow_var = e->args[0]->var;
        const KjIrExpr *inner = through(e->args[0], G);
        if (!kj_type_is_int(inner->type) || !kj_type_is_signed(inner->type) || kj_type_int_bits(inner->type) != 32)
            return false;
        e = inner;
    }
    if (!kj_type_is_int(e->type) || !kj_type_is_signed(e->type) ||
        (kj_type_int_bits(e->type) != 32 && kj_type_int_bits(e->type) != 64))
        return false;
    const KjIrExpr *x = NULL;
    int axis = tid_axis(e);
    if (axis < 0 && e->op == KJ_IR_ADD && (axis = tid_axis(e->args[1])) >= 0)
        x = e->args[0];
    else if (axis < 0 && e->op == KJ_IR_ADD && (axis = tid_axis(e->args[0])) >= 0)
        x = e->args[1];
    if (axis < 0)
        return false;
    *axis_out = axis;
    int64_t last = G->last[axis];
    if (x && !same_for_all(x, G))
        return false;
    int bits = kj_type_int_bits(e->type);
    *bits_out = bits;
    KjIrExpr *wide = NULL;
    if (x) {
        wide = hoist(S, x, G);
        if (bits == 32) {
            KjIrExpr *c = kj_ir_new_expr(S->arena, KJ_IR_CAST, i64, x->loc, 1);
            c->args[0] = wide;
            wide = c;
        }
    } else {
        wide = constant(S, i64, e->loc, 0);
    }
    uint64_t limit = bits == 32 ? (uint64_t)INT32_MAX - (uint64_t)last : (uint64_t)INT64_MAX - (uint64_t)last;
    *no_wrap = kj_ir_new_expr(S->arena, KJ_IR_LE, kj_type_scalar(KJ_TYPE_BOOL), e->loc, 2);
    (*no_wrap)->args[0] = wide;
    (*no_wrap)->args[1] = constant(S, i64, e->loc, limit);
    *at_last = kj_ir_new_expr(S->arena, KJ_IR_ADD, i64, e->loc, 2);
    (*at_last)->args[0] = wide;
    (*at_last)->args[1] = constant(S, i64, e->loc, (uint64_t)last);
    *at_first = kj_ir_new_expr(S->arena, KJ_IR_ADD, i64, e->loc, 2);
    (*at_first)->args[0] = wide;
    (*at_first)->args[1] = constant(S, i64, e->loc, (uint64_t)G->first[axis]);
    return true;
}

static KjIrExpr *binary(Spec *S, KjIrOp op, const KjType *t, KjIrExpr *l, KjIrExpr *r)
{
    KjIrExpr *e = kj_ir_new_expr(S->arena, op, t, l->loc, 2);
    e->args[0] = l;
    e->args[1] = r;
    return e;
}

/* a && b, either NULL for true */
static KjIrExpr *both(Spec *S, KjIrExpr *a, KjIrExpr *b)
{
    if (!a || !b)
        return a ? a : b;
    KjIrExpr *e = kj_ir_new_expr(S->arena, KJ_IR_LOGAND, kj_type_scalar(KJ_TYPE_BOOL), b->loc, 2);
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

/* Comparison c taken as `op` (its own, or its negation's): as `A op' U`,
 * U the same for every thread and an i64 (the sides swapped where U is on
 * the left, op' mirrored), or false. */
static bool bound_compare(const KjIrExpr *c, KjIrOp op, const Guards *G, const KjIrExpr **a, KjIrOp *op_out,
                          const KjIrExpr **u)
{
    if (c->arg_count != 2 || (op != KJ_IR_LT && op != KJ_IR_LE && op != KJ_IR_GT && op != KJ_IR_GE))
        return false;
    *a = c->args[0];
    *u = c->args[1];
    if (!same_for_all(*u, G)) { /* U op A: A op' U */
        *a = c->args[1];
        *u = c->args[0];
        op = op == KJ_IR_LT ? KJ_IR_GT : op == KJ_IR_LE ? KJ_IR_GE : op == KJ_IR_GT ? KJ_IR_LT : KJ_IR_LE;
    }
    *op_out = op;
    return (*u)->type == kj_type_scalar(KJ_TYPE_I64) && same_for_all(*u, G);
}

/* A condition `A < U`, `A <= U`, `A > U` or `A >= U`, or one with the
 * sides swapped (A increasing, U the same for every thread, compared as
 * i64), or an `&&` of such (each side on its own): added to G's test and to
 * the conditions taken as true. */
static void note_guard(Spec *S, const KjIrExpr *c, Guards *G)
{
    if (c->op == KJ_IR_LOGAND && c->arg_count == 2) {
        note_guard(S, c->args[0], G);
        note_guard(S, c->args[1], G);
        return;
    }
    KjIrOp op;
    const KjIrExpr *a, *u;
    if (S->hold_count >= MAX_GUARDS || !bound_compare(c, c->op, G, &a, &op, &u))
        return;
    KjIrExpr *no_wrap, *at_first, *at_last;
    const KjIrVar *narrow_var;
    int axis, bits;
    if (!increasing(S, a, G, &no_wrap, &at_first, &at_last, &narrow_var, &axis, &bits))
        return;
    bool hoisted = reads_region(u, G) || x_reads_region(a, G);
    u = hoist(S, u, G);
    /* an upper bound holds for all when it holds for the last thread, a
     * lower one when it holds for the first */
    KjIrExpr *cmp = kj_ir_new_expr(S->arena, op, c->type, c->loc, 2);
    cmp->args[0] = op == KJ_IR_LT || op == KJ_IR_LE ? at_last : at_first;
    cmp->args[1] = (KjIrExpr *)u;
    G->test = both(S, G->test, both(S, no_wrap, cmp));
    G->no_wrap = both(S, G->no_wrap, no_wrap);
    G->found[S->hold_count].node = c;
    G->found[S->hold_count].op = op;
    G->found[S->hold_count].wide = at_last->args[0];
    G->found[S->hold_count].bound = u;
    G->found[S->hold_count].axis = axis;
    G->found[S->hold_count].hoisted = hoisted;
    S->hold_value[S->hold_count] = true;
    S->holds[S->hold_count++] = c;
    /* i64(var) is at_last's X + i64(threadIdx.x) where the test holds: the
     * index of each lane without a widening of its own */
    if (narrow_var) {
        KjIrExpr *tid = kj_ir_new_expr(S->arena, KJ_IR_SREG, kj_type_scalar(KJ_TYPE_I32), c->loc, 0);
        tid->sreg = (KjSpecialReg)(KJ_SREG_TID_X + axis);
        KjIrExpr *wide_tid = kj_ir_new_expr(S->arena, KJ_IR_CAST, at_last->type, c->loc, 1);
        wide_tid->args[0] = tid;
        KjIrExpr *sum = kj_ir_new_expr(S->arena, KJ_IR_ADD, at_last->type, c->loc, 2);
        sum->args[0] = at_last->args[0];
        sum->args[1] = wide_tid;
        G->widened[narrow_var->id] = sum;
    }
}

/* a and b compute the same value at one point of one thread: the same
 * pure operations on the same variables, registers and constants. */
static bool same_expr(const KjIrExpr *a, const KjIrExpr *b)
{
    if (a == b)
        return true;
    if (a->op != b->op || a->type != b->type || a->arg_count != b->arg_count)
        return false;
    switch (a->op) {
    case KJ_IR_CONST:
        return a->const_int == b->const_int && kj_type_is_int(a->type);
    case KJ_IR_VAR:
        return a->var == b->var;
    case KJ_IR_SREG:
        return a->sreg == b->sreg;
    case KJ_IR_DIM:
        if (a->dim != b->dim)
            return false;
        break;
    case KJ_IR_CAST: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV: case KJ_IR_REM:
    case KJ_IR_NEG: case KJ_IR_BITAND: case KJ_IR_BITOR: case KJ_IR_BITXOR: case KJ_IR_SHL: case KJ_IR_SHR:
    case KJ_IR_LT: case KJ_IR_LE: case KJ_IR_GT: case KJ_IR_GE: case KJ_IR_EQ: case KJ_IR_NE:
        break;
    default:
        return false;
    }
    for (int i = 0; i < a->arg_count; i++)
        if (!same_expr(a->args[i], b->args[i]))
            return false;
    return true;
}

/*
 * Checked mode.  While copying a region for a test of its own, an access
 * whose every index stays inside the array for every thread that runs it
 * loses its check, and the test gains what the proof needs, all of it the
 * same for every thread.  An index is V + d, V = X + threadIdx.<axis> (as
 * increasing reads it) and d a constant, in the array's extent D along it:
 *   - above, by a guard in force where the access is, `V < U` (or <=):
 *     U <= D - d, or by the block's threads, V <= X + last: X + last + d < D;
 *   - below, by a guard `V >= L` (or >): L >= -d, or by the threads,
 *     V >= X + first: X + first + d >= 0;
 * and V + d does not wrap in its type (a guard's V is the value it tested;
 * the threads' side needs X + last + d within the type).  Both sides may
 * come from either, the guards from the copy's enclosing ifs and selects
 * (Spec.active), so the proof holds in any copy the test guards, whatever
 * the region's other guards do.
 */
typedef struct Proof {
    Spec *S;
    KjLoc loc;
    KjIrExpr *conds[4 * KJ_MAX_DIMS];
    int count;
} Proof;

enum { MAX_OFFSET = 1 << 30 };

/* e as V + d for a constant d of at most MAX_OFFSET either way (d = 0 when
 * e is no such sum), through a widening of a 32-bit sum to i64. */
static const KjIrExpr *offset_part(const KjIrExpr *e, int64_t *d)
{
    *d = 0;
    if (e->op == KJ_IR_CAST && e->type == kj_type_scalar(KJ_TYPE_I64) && e->args[0]->type == kj_type_scalar(KJ_TYPE_I32)) {
        const KjIrExpr *v = offset_part(e->args[0], d);
        return *d ? v : e;
    }
    if (e->arg_count != 2 || (e->op != KJ_IR_ADD && e->op != KJ_IR_SUB))
        return e;
    int at = is_const_int(e->args[1]) ? 1 : e->op == KJ_IR_ADD && is_const_int(e->args[0]) ? 0 : -1;
    if (at < 0)
        return e;
    int64_t v = (int64_t)e->args[at]->const_int;
    if (v > MAX_OFFSET || v < -MAX_OFFSET)
        return e;
    *d = e->op == KJ_IR_SUB ? -v : v;
    return e->args[1 - at];
}

/* Whether condition c (`negated`: its negation) says `V op B`, V = X +
 * threadIdx.<axis> in `bits` and B the same for every thread, op an upper
 * bound (< or <=) or a lower one (> or >=) as `upper` asks; B hoisted. */
static bool guard_of(Spec *S, const KjIrExpr *c, bool negated, const KjIrExpr *X, int axis, int bits, bool upper,
                     KjIrOp *op, KjIrExpr **bound)
{
    if (c->op == KJ_IR_NOT)
        return guard_of(S, c->args[0], !negated, X, axis, bits, upper, op, bound);
    if (c->op == (negated ? KJ_IR_LOGOR : KJ_IR_LOGAND) && c->arg_count == 2)
        return guard_of(S, c->args[0], negated, X, axis, bits, upper, op, bound) ||
               guard_of(S, c->args[1], negated, X, axis, bits, upper, op, bound);
    KjIrOp o = c->op;
    if (negated) /* on integers (bound_compare takes i64 only) */
        o = o == KJ_IR_LT ? KJ_IR_GE : o == KJ_IR_LE ? KJ_IR_GT : o == KJ_IR_GT ? KJ_IR_LE : o == KJ_IR_GE ? KJ_IR_LT : o;
    const Guards *G = S->guards;
    const KjIrExpr *a, *u;
    if (!bound_compare(c, o, G, &a, &o, &u) || upper != (o == KJ_IR_LT || o == KJ_IR_LE))
        return false;
    KjIrExpr *no_wrap, *at_first, *at_last;
    const KjIrVar *narrow_var;
    int a_axis, a_bits;
    if (!increasing(S, a, G, &no_wrap, &at_first, &at_last, &narrow_var, &a_axis, &a_bits) || a_axis != axis ||
        a_bits != bits || !same_expr(at_last->args[0], X))
        return false;
    *op = o;
    *bound = hoist(S, u, G);
    return true;
}

static bool guard_in_force(Spec *S, const KjIrExpr *X, int axis, int bits, bool upper, KjIrOp *op, KjIrExpr **bound)
{
    for (int i = S->active_count - 1; i >= 0; i--)
        if (guard_of(S, S->active[i], S->active_not[i], X, axis, bits, upper, op, bound))
            return true;
    return false;
}

static KjIrExpr *i64_const(Proof *P, int64_t v)
{
    return constant(P->S, kj_type_scalar(KJ_TYPE_I64), P->loc, (uint64_t)v);
}

/* e + v as i64 (folded when e is a constant; v is small, so it does not
 * wrap where the proof takes it). */
static KjIrExpr *plus(Proof *P, KjIrExpr *e, int64_t v)
{
    if (v == 0)
        return e;
    if (is_const_int(e))
        return i64_const(P, (int64_t)((uint64_t)e->const_int + (uint64_t)v));
    return binary(P->S, KJ_IR_ADD, kj_type_scalar(KJ_TYPE_I64), e, i64_const(P, v));
}

/* The proof needs `l op r` (i64): false when that is false whatever runs. */
static bool require(Proof *P, KjIrOp op, KjIrExpr *l, KjIrExpr *r)
{
    if (is_const_int(l) && is_const_int(r)) {
        bool holds = false;
        fold_compare(op, kj_type_scalar(KJ_TYPE_I64), l->const_int, r->const_int, &holds);
        return holds;
    }
    if (P->count == (int)(sizeof P->conds / sizeof P->conds[0]))
        return false;
    P->conds[P->count++] = binary(P->S, op, kj_type_scalar(KJ_TYPE_BOOL), l, r);
    return true;
}

/* Index k of an access to `array`: whether it is V + d with a proof as
 * above, whose conditions go into P. */
static bool index_inside(Proof *P, const KjIrExpr *array, int k, const KjIrExpr *index)
{
    Spec *S = P->S;
    int64_t d;
    const KjIrExpr *v = offset_part(index, &d);
    KjIrExpr *no_wrap, *at_first, *at_last;
    const KjIrVar *narrow_var;
    int axis, bits;
    if (!increasing(S, v, S->guards, &no_wrap, &at_first, &at_last, &narrow_var, &axis, &bits))
        return false;
    KjIrExpr *X = at_last->args[0];
    int64_t first = S->guards->first[axis], last = S->guards->last[axis], up = d > 0 ? d : 0;
    int64_t limit = bits == 32 ? INT32_MAX : INT64_MAX;
    KjIrExpr *extent = kj_ir_new_expr(S->arena, KJ_IR_DIM, kj_type_scalar(KJ_TYPE_I64), P->loc, 1);
    extent->args[0] = (KjIrExpr *)array;
    extent->dim = k;
    KjIrOp op;
    KjIrExpr *bound;
    bool ok = true;
    if (guard_in_force(S, X, axis, bits, true, &op, &bound)) {
        /* V <= U - 1 (or U): V + d <= U - 1 + up */
        KjIrOp below = op == KJ_IR_LT ? KJ_IR_LE : KJ_IR_LT;
        if (!(op == KJ_IR_LT && up == 0 && same_expr(bound, extent)))
            ok = ok && require(P, below, bound, up ? binary(S, KJ_IR_SUB, extent->type, extent, i64_const(P, up)) : extent);
        if (bits == 32)
            ok = ok && require(P, below, bound, i64_const(P, ((int64_t)1 << 31) - up));
    } else {
        ok = ok && require(P, KJ_IR_LE, X, i64_const(P, limit - last - up)) &&
             require(P, KJ_IR_LT, plus(P, X, last + d), extent);
    }
    if (guard_in_force(S, X, axis, bits, false, &op, &bound))
        ok = ok && require(P, KJ_IR_GE, bound, i64_const(P, op == KJ_IR_GE ? -d : -d - 1));
    else
        ok = ok && require(P, KJ_IR_LE, X, i64_const(P, limit - last)) &&
             require(P, KJ_IR_GE, X, i64_const(P, -(first + d)));
    return ok;
}

/* Whether every index of an access to `array` is proven inside it (above);
 * the proof's conditions join Spec.proofs. */
static bool proven_inside(Spec *S, const KjIrExpr *array, KjIrExpr *const *indices, int count)
{
    if (array->op != KJ_IR_VAR || count <= 0 || count > KJ_MAX_DIMS || S->guards->sets[array->var->id] != 0)
        return false;
    Proof P = {S, array->loc, {0}, 0};
    for (int k = 0; k < count; k++)
        if (!index_inside(&P, array, k, indices[k]))
            return false;
    if (S->proof_count + P.count > MAX_PROOFS)
        return false;
    for (int i = 0; i < P.count; i++) {
        bool known = false;
        for (int j = 0; j < S->proof_count && !known; j++)
            known = same_expr(S->proofs[j], P.conds[i]);
        if (!known)
            S->proofs[S->proof_count++] = P.conds[i];
    }
    return true;
}

/* The conjunction of the proofs' conditions (NULL: none), taken. */
static KjIrExpr *take_proofs(Spec *S)
{
    KjIrExpr *test = NULL;
    for (int i = 0; i < S->proof_count; i++)
        test = both(S, test, S->proofs[i]);
    S->proof_count = 0;
    return test;
}

/* Not ir.c's walk: the order in which guards are found is the order of the
 * region's test (G->test's conjunction) and of the conditions taken as true,
 * both printed by --dump=vec --block and compiled; this meets an if's
 * condition before the statement's other expressions, the expressions in
 * the order value, array, cond, start, stop, step, indices, and a select
 * before its operands, where the walk has the operands first and a store's
 * array and indices before its value, so the walk would write the test in
 * another order. */
static void find_guards(Spec *S, const KjIrStmt *s, Guards *G);

static void find_guard_exprs(Spec *S, const KjIrExpr *e, Guards *G)
{
    if (!e)
        return;
    if (e->op == KJ_IR_SELECT)
        note_guard(S, e->args[0], G);
    for (int i = 0; i < e->arg_count; i++)
        find_guard_exprs(S, e->args[i], G);
}

static void find_guards(Spec *S, const KjIrStmt *s, Guards *G)
{
    if (!s)
        return;
    if (s->kind == KJ_IR_STMT_IF)
        note_guard(S, s->cond, G);
    const KjIrExpr *es[] = {s->value, s->array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        find_guard_exprs(S, es[i], G);
    for (int i = 0; i < s->index_count; i++)
        find_guard_exprs(S, s->indices[i], G);
    for (int i = 0; i < s->stmts.count; i++)
        find_guards(S, s->stmts.items[i], G);
    find_guards(S, s->then_stmt, G);
    find_guards(S, s->else_stmt, G);
    find_guards(S, s->body, G);
}

/*
 * A block that fails its test (on the grid's right or left edge, most
 * often) need not run all its chunks under the tests' masks.  A guard on x,
 * `X + threadIdx.x < U` (or <=, or a lower bound), holds for the threads of
 * a range [a, h) of x, h known before the region runs; when the region does
 * nothing in the threads that fail it (their copy, the guard false, is
 * assignments and returns only), it is enough to run the threads of x in
 * [lo, hi), those passing every guard on x, with those guards true: whole
 * chunks of plain loads and stores, and at most one under a mask of the
 * count.  The threads with an effect run in the order they did, so the
 * answers are the same bits.  At most one guard on each side of x (with two,
 * which one a thread fails is not known); the guards on y and z stay, the
 * same for a chunk's lanes.  Only in the form of a kernel without barriers,
 * whose region's variables are dead after it, and only when no guard's
 * index wraps in the block (the caller tests the guards' no_wrap).  A guard
 * whose X or U reads the region's variables (hoisted) stays in the region,
 * a mask of the lanes, but in checked mode: the 3-D stencil's `x < n - 1`,
 * n = u.shape[0], as the range's end made its edge blocks 4% (32^3) to 8%
 * (128^3) slower unchecked, and as a mask 1.4 times slower checked (the
 * checked form's registers spill in the masked loop).
 */

/* s leaves nothing behind: assignments of pure values, returns, and ifs
 * on pure conditions of those. */
static bool no_effect(const KjIrStmt *s)
{
    if (!s)
        return true;
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++)
            if (!no_effect(s->stmts.items[i]))
                return false;
        return true;
    case KJ_IR_STMT_SET:
        return pure(s->value);
    case KJ_IR_STMT_RETURN:
        return !s->value;
    case KJ_IR_STMT_IF:
        return pure(s->cond) && no_effect(s->then_stmt) && no_effect(s->else_stmt);
    default:
        return false;
    }
}

/* A fresh copy of e (nothing replaced). */
static KjIrExpr *copy(Spec *S, const KjIrExpr *e)
{
    return expr(S, e, known_new(S), NULL);
}

/* The end of the threads of [a, b) that pass guard g: for an upper bound
 * the first that fails it, for a lower the first that passes, as an i64.
 * With W its X and U its bound, `W + t < U` holds for t < U - W: a when U
 * <= W + a, b when U > W + b - 1, else U - W (<= and > one more).  Neither
 * sum wraps under no_wrap, and U - W is in [a, b] where it is taken. */
static KjIrExpr *guard_edge(Spec *S, const Guards *G, int g, int64_t a, int64_t b)
{
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64), *boolean = kj_type_scalar(KJ_TYPE_BOOL);
    KjIrOp op = G->found[g].op;
    KjLoc loc = G->found[g].node->loc;
    bool strict = op == KJ_IR_LT || op == KJ_IR_GE; /* t < U - W, t >= U - W */
    KjIrExpr *at_a = binary(S, KJ_IR_ADD, i64, copy(S, G->found[g].wide), constant(S, i64, loc, (uint64_t)a));
    KjIrExpr *at_last = binary(S, KJ_IR_ADD, i64, copy(S, G->found[g].wide), constant(S, i64, loc, (uint64_t)(b - 1)));
    KjIrExpr *value = binary(S, KJ_IR_SUB, i64, copy(S, G->found[g].bound), copy(S, G->found[g].wide));
    if (!strict)
        value = binary(S, KJ_IR_ADD, i64, value, constant(S, i64, loc, 1));
    KjIrExpr *inner = kj_ir_new_expr(S->arena, KJ_IR_SELECT, i64, loc, 3);
    inner->args[0] = binary(S, strict ? KJ_IR_GT : KJ_IR_GE, boolean, copy(S, G->found[g].bound), at_last);
    inner->args[1] = constant(S, i64, loc, (uint64_t)b);
    inner->args[2] = value;
    KjIrExpr *outer = kj_ir_new_expr(S->arena, KJ_IR_SELECT, i64, loc, 3);
    outer->args[0] = binary(S, strict ? KJ_IR_LE : KJ_IR_LT, boolean, copy(S, G->found[g].bound), at_a);
    outer->args[1] = constant(S, i64, loc, (uint64_t)a);
    outer->args[2] = inner;
    return outer;
}

/* c's body with the guards of G on x (those of `found` with that axis) as
 * `value`, or only guard `only` when it is not -1. */
static KjIrStmt *with_x_guards(Spec *S, const KjIrStmt *c, Guards *G, int found, int only, bool value)
{
    S->hold_count = 0;
    for (int i = 0; i < found; i++)
        if (G->found[i].axis == 0 && (!G->found[i].hoisted || S->checked) && (only < 0 || i == only)) {
            S->holds[S->hold_count] = G->found[i].node;
            S->hold_value[S->hold_count++] = value;
        }
    S->widened = G->widened;
    KjIrStmt *body = region_stmt(S, c->body, known_new(S), NULL);
    S->widened = NULL;
    S->hold_count = 0;
    return body;
}

/* The region c of a block that fails its test, run over the threads of x
 * that pass its guards on x, or NULL (see above); *proof: the test of the
 * accesses it proves inside their arrays (checked mode). */
static KjIrStmt *x_split(Spec *S, const KjIrStmt *c, Guards *G, int found, int64_t a, int64_t b, KjIrExpr **proof)
{
    int upper = -1, lower = -1;
    for (int i = 0; i < found; i++) {
        if (G->found[i].axis != 0 || (G->found[i].hoisted && !S->checked))
            continue;
        KjIrOp op = G->found[i].op;
        int *side = op == KJ_IR_LT || op == KJ_IR_LE ? &upper : &lower;
        if (*side >= 0)
            return NULL;
        *side = i;
    }
    if ((upper < 0 && lower < 0) || S->regions_left <= 1)
        return NULL;
    int sides[2] = {lower, upper};
    for (int k = 0; k < 2; k++)
        if (sides[k] >= 0 && !no_effect(with_x_guards(S, c, G, found, sides[k], false)))
            return NULL;
    KjIrStmt *run = kj_arena_alloc(S->arena, sizeof *run);
    *run = *c;
    S->guards = G;
    run->body = with_x_guards(S, c, G, found, -1, true);
    S->guards = NULL;
    *proof = take_proofs(S);
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    run->start = lower >= 0 ? guard_edge(S, G, lower, a, b) : constant(S, i64, c->loc, (uint64_t)a);
    run->stop = upper >= 0 ? guard_edge(S, G, upper, a, b) : constant(S, i64, c->loc, (uint64_t)b);
    S->regions_left--;
    return run;
}

/* The region c (folded, its thread range [a, b) of the block's x) as
 * `if guards hold { c with them true } else { c }`, or c alone; in the
 * form of a kernel without barriers, the else `if no guard wraps { the
 * threads of x that pass (x_split) } else { c }` where it can. */
static KjIrStmt *version_on_guards(Spec *S, KjIrStmt *c, int64_t a, int64_t b)
{
    if (b <= a || S->regions_left <= 1)
        return c;
    Guards G = {kj_arena_alloc(S->arena, sizeof *G.def * (size_t)(S->var_count + 1)),
                kj_arena_alloc(S->arena, sizeof *G.sets * (size_t)(S->var_count + 1)),
                kj_arena_alloc(S->arena, sizeof *G.early * (size_t)(S->var_count + 1)),
                {a, 0, 0}, {b - 1, (int64_t)S->block[1] - 1, (int64_t)S->block[2] - 1}, NULL,
                kj_arena_alloc(S->arena, sizeof *G.widened * (size_t)(S->var_count + 1))};
    count_region_sets(c->body, &G);
    S->hold_count = 0;
    find_guards(S, c->body, &G);
    if (!G.test) {
        S->hold_count = 0;
        return c;
    }
    int found = S->hold_count;
    KjIrStmt *fast = kj_arena_alloc(S->arena, sizeof *fast);
    *fast = *c;
    S->widened = G.widened;
    S->guards = &G;
    fast->body = region_stmt(S, c->body, known_new(S), NULL);
    S->guards = NULL;
    S->widened = NULL;
    S->hold_count = 0;
    G.test = both(S, G.test, take_proofs(S));
    S->regions_left--;
    KjIrStmt *branch = kj_ir_new_stmt(S->arena, KJ_IR_STMT_IF, c->loc);
    branch->cond = G.test;
    branch->then_stmt = new_block(S, c->loc);
    kj_vec_push(S->arena, &branch->then_stmt->stmts, fast);
    branch->else_stmt = new_block(S, c->loc);
    KjIrExpr *proof = NULL;
    KjIrStmt *passing = S->straight ? x_split(S, c, &G, found, a, b, &proof) : NULL;
    c->unroll = 1; /* the last block, at most: its loops stay loops */
    if (passing) {
        KjIrStmt *edge = kj_ir_new_stmt(S->arena, KJ_IR_STMT_IF, c->loc);
        edge->cond = both(S, copy(S, G.no_wrap), proof);
        edge->then_stmt = new_block(S, c->loc);
        kj_vec_push(S->arena, &edge->then_stmt->stmts, passing);
        edge->else_stmt = new_block(S, c->loc);
        kj_vec_push(S->arena, &edge->else_stmt->stmts, c);
        kj_vec_push(S->arena, &branch->else_stmt->stmts, edge);
    } else {
        kj_vec_push(S->arena, &branch->else_stmt->stmts, c);
    }
    return branch;
}

static void threads_stmt(Spec *S, const KjIrStmt *s, Known k, KjIrStmt *out)
{
    bool *assigned = kj_arena_alloc(S->arena, sizeof *assigned * (size_t)(S->var_count + 1));
    mark_assigned(s->body, assigned);
    KjIrStmt *c = kj_arena_alloc(S->arena, sizeof *c);
    *c = *s;
    /* the bounds are evaluated once, before the loop */
    c->start = expr(S, s->start, k, NULL);
    c->stop = expr(S, s->stop, k, NULL);
    c->body = region_stmt(S, s->body, k, assigned);
    forget(S, k, assigned);
    if (empty_range(S, c))
        return;
    S->regions_left--;
    int64_t a = 0, b = S->block[0];
    if ((!c->start || is_const_int(c->start)) && (!c->stop || is_const_int(c->stop))) {
        if (c->start && (int64_t)c->start->const_int > a)
            a = (int64_t)c->start->const_int;
        if (c->stop && (int64_t)c->stop->const_int < b)
            b = (int64_t)c->stop->const_int;
        kj_vec_push(S->arena, &out->stmts, version_on_guards(S, c, a, b));
        return;
    }
    kj_vec_push(S->arena, &out->stmts, c);
}

/* Unrolls `while cond { body }` into out when cond folds at every turn and
 * the budget allows; otherwise leaves k and out as they were. */
static bool unroll_while(Spec *S, const KjIrStmt *s, Known k, KjIrStmt *out)
{
    Known turn = known_copy(S, k);
    KjIrStmt *unrolled = new_block(S, s->loc);
    int budget = S->regions_left;
    for (int turns = 0;; turns++) {
        KjIrExpr *cond = expr(S, s->cond, turn, NULL);
        if (!is_const_int(cond) || turns > KJ_SPLIT_UNROLL_TURNS || S->regions_left < 0) {
            S->regions_left = budget;
            return false;
        }
        if (!cond->const_int)
            break;
        control_stmt(S, s->body, turn, unrolled);
    }
    for (int i = 0; i < unrolled->stmts.count; i++)
        kj_vec_push(S->arena, &out->stmts, unrolled->stmts.items[i]);
    known_set(S, k, turn);
    return true;
}

/* A statement outside the regions (run once for the block), appended to out
 * as the dims and k make it; k follows it. */
static void control_stmt(Spec *S, const KjIrStmt *s, Known k, KjIrStmt *out)
{
    if (!s)
        return;
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++)
            control_stmt(S, s->stmts.items[i], k, out);
        return;
    case KJ_IR_STMT_THREADS:
        threads_stmt(S, s, k, out);
        return;
    case KJ_IR_STMT_SET: {
        KjIrStmt *c = region_stmt(S, s, k, NULL);
        kj_vec_push(S->arena, &out->stmts, c);
        int id = s->var->id;
        k.is[id] = is_const_int(c->value) && is_int_like(s->var->type);
        k.value[id] = k.is[id] ? c->value->const_int : 0;
        return;
    }
    case KJ_IR_STMT_IF: {
        KjIrExpr *cond = expr(S, s->cond, k, NULL);
        if (is_const_int(cond)) {
            control_stmt(S, cond->const_int ? s->then_stmt : s->else_stmt, k, out);
            return;
        }
        KjIrStmt *c = kj_ir_new_stmt(S->arena, KJ_IR_STMT_IF, s->loc);
        c->cond = cond;
        Known other = known_copy(S, k);
        c->then_stmt = new_block(S, s->loc);
        control_stmt(S, s->then_stmt, k, c->then_stmt);
        if (s->else_stmt) {
            c->else_stmt = new_block(S, s->loc);
            control_stmt(S, s->else_stmt, other, c->else_stmt);
        }
        /* what both branches leave the same */
        for (int i = 0; i < S->var_count; i++)
            k.is[i] = k.is[i] && other.is[i] && k.value[i] == other.value[i];
        kj_vec_push(S->arena, &out->stmts, c);
        return;
    }
    case KJ_IR_STMT_WHILE:
    case KJ_IR_STMT_FOR: {
        if (s->kind == KJ_IR_STMT_WHILE && unroll_while(S, s, k, out))
            return;
        /* the loop stays: what it assigns is unknown in it and after it */
        bool *assigned = kj_arena_alloc(S->arena, sizeof *assigned * (size_t)(S->var_count + 1));
        mark_assigned(s, assigned);
        forget(S, k, assigned);
        KjIrStmt *c = kj_ir_new_stmt(S->arena, s->kind, s->loc);
        c->var = s->var;
        c->cond = expr(S, s->cond, k, NULL);
        c->start = expr(S, s->start, k, NULL);
        c->stop = expr(S, s->stop, k, NULL);
        c->step = expr(S, s->step, k, NULL);
        c->simd_lanes = s->simd_lanes;
        c->unroll = s->unroll;
        c->body = new_block(S, s->loc);
        control_stmt(S, s->body, known_copy(S, k), c->body);
        kj_vec_push(S->arena, &out->stmts, c);
        return;
    }
    default: {
        bool *assigned = kj_arena_alloc(S->arena, sizeof *assigned * (size_t)(S->var_count + 1));
        mark_assigned(s, assigned);
        kj_vec_push(S->arena, &out->stmts, region_stmt(S, s, k, assigned));
        forget(S, k, assigned);
        return;
    }
    }
}

static bool no_site(KjIrWalk *w, const KjIrExpr *e)
{
    (void)w;
    return !e->check_site;
}

static KjIrWalkStep stop_at_site(KjIrWalk *w, const KjIrStmt *s)
{
    (void)w;
    return s->check_site ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool has_check_sites(const KjIrStmt *body)
{
    KjIrWalk w = {.stmt = stop_at_site, .expr = no_site};
    return !kj_ir_walk_stmt(&w, body);
}

/* The form of a kernel without barriers: one region, last, after
 * assignments only (so nothing reads its variables after it). */
static bool one_region(const KjIrFunction *kernel)
{
    if (!kj_split_straight_line(kernel))
        return false;
    const KjVec *items = &kernel->split->body->stmts;
    for (int i = 0; i < items->count; i++) {
        const KjIrStmt *item = items->items[i];
        if (i == items->count - 1 ? item->kind != KJ_IR_STMT_THREADS : item->kind != KJ_IR_STMT_SET)
            return false;
    }
    return items->count > 0;
}

KjIrFunction *kj_split_specialise(KjArena *arena, const KjIrFunction *kernel, const uint32_t block[3])
{
    const KjIrFunction *split = kernel->split;
    if (!split)
        return NULL;
    Spec spec = {.arena = arena, .block = block, .var_count = split->locals.count,
                 .regions_left = KJ_SPLIT_UNROLL_REGIONS, .straight = one_region(kernel),
                 .checked = has_check_sites(split->body)},
         *S = &spec;
    KjIrFunction *fn = kj_arena_alloc(arena, sizeof *fn);
    *fn = *split;
    fn->effects = KJ_EFFECTS_UNKNOWN; /* a new body */
    fn->body = new_block(S, split->body->loc);
    control_stmt(S, split->body, known_new(S), fn->body);
    KjIrFunction *root = kj_arena_alloc(arena, sizeof *root);
    *root = *kernel;
    root->split = fn;
    return root;
}

/* ============================================================ shared memory */

/*
 * Whether the specialised split form writes every element of every shared()
 * array in its first region before anything reads it, so that the runtime
 * need not zero the block's static shared memory: the form starts with
 * assignments without effects (the arrays' among them), then a region (or
 * the two copies of one that version_on_guards makes) whose threads [0, N)
 * each store `arr[threadIdx.x]` at the region's top level, for each 1-D
 * array of N elements, N at most the threads it runs; the
 * region reads no shared array, and nothing calls a function (whose
 * shared() arrays this would not see).
 */
static bool not_call(KjIrWalk *w, const KjIrExpr *e) { return e->op != KJ_IR_CALL; }

static bool stmt_calls(const KjIrStmt *s)
{
    KjIrWalk w = {.expr = not_call};
    return !kj_ir_walk_stmt(&w, s);
}

/* Whether s reads var: names it anywhere but as the array a store writes. */
static KjIrWalkStep stop_at_read(KjIrWalk *w, const KjIrStmt *s)
{
    return kj_ir_stmt_exprs_read(s, w->data, false) ? KJ_IR_WALK_STOP : KJ_IR_WALK_ON;
}

static bool stmt_reads(const KjIrStmt *s, const KjIrVar *var)
{
    KjIrWalk w = {.stmt = stop_at_read, .data = (void *)var};
    return !kj_ir_walk_stmt(&w, s);
}

static bool is_thread_x_index(const KjIrExpr *e)
{
    if (e->op == KJ_IR_CAST && kj_type_is_int(e->type) && kj_type_int_bits(e->type) == 64)
        e = e->args[0];
    return is_tid_x(e);
}

/* Whether the region `threads` (of blocks of `block`) stores every element
 * of each of the `count` arrays, and reads none of them. */
static bool region_writes(const KjIrStmt *threads, const uint32_t block[3], KjIrVar *const *arrays,
                          const int64_t *sizes, int count)
{
    if (threads->kind != KJ_IR_STMT_THREADS)
        return false;
    if (threads->start && (!is_const_int(threads->start) || (int64_t)threads->start->const_int > 0))
        return false;
    int64_t end = block[0];
    if (threads->stop) {
        if (!is_const_int(threads->stop))
            return false;
        if ((int64_t)threads->stop->const_int < end)
            end = (int64_t)threads->stop->const_int;
    }
    const KjVec *items = &threads->body->stmts;
    for (int a = 0; a < count; a++) {
        if (sizes[a] > end)
            return false;
        /* a store at the region's top runs for every thread (no thread
         * leaves a region early but at the kernel's end, after which no
         * region reads anything) */
        bool stored = false;
        for (int i = 0; i < items->count && !stored; i++) {
            const KjIrStmt *item = items->items[i];
            stored = item->kind == KJ_IR_STMT_STORE && item->array->op == KJ_IR_VAR &&
                     item->array->var == arrays[a] && item->index_count == 1 &&
                     is_thread_x_index(item->indices[0]);
        }
        if (!stored)
            return false;
        if (stmt_reads(threads->body, arrays[a]))
            return false;
    }
    return true;
}

bool kj_split_writes_shared(const KjIrFunction *root, const uint32_t block[3])
{
    const KjIrFunction *split = root->split;
    if (!split || root->uses_dynamic_shared || stmt_calls(split->body))
        return false;
    KjIrVar *arrays[16];
    int64_t sizes[16];
    int count = 0;
    int64_t bytes = 0;
    const KjVec *items = &split->body->stmts;
    int i = 0;
    for (; i < items->count; i++) {
        const KjIrStmt *item = items->items[i];
        if (item->kind != KJ_IR_STMT_SET)
            break;
        const KjIrExpr *v = item->value;
        if (v->op == KJ_IR_SHARED) {
            if (count == 16 || v->alloc_ndim != 1)
                return false;
            arrays[count] = item->var;
            sizes[count++] = v->alloc_shape[0];
            bytes += (v->alloc_shape[0] * kj_type_size(v->alloc_elem) + 15) & ~(int64_t)15;
        } else if (v->op == KJ_IR_LOAD) {
            return false;
        }
    }
    /* every shared() array of the kernel is one of those */
    if (count == 0 || i == items->count || bytes < root->shared_bytes)
        return false;
    const KjIrStmt *first = items->items[i];
    if (first->kind == KJ_IR_STMT_IF && first->else_stmt && first->then_stmt->stmts.count == 1 &&
        first->else_stmt->stmts.count == 1)
        return region_writes(first->then_stmt->stmts.items[0], block, arrays, sizes, count) &&
               region_writes(first->else_stmt->stmts.items[0], block, arrays, sizes, count);
    return region_writes(first, block, arrays, sizes, count);
}
