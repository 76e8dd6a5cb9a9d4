/*
 * ir.c: the typed IR's name tables, its builders, the one walk of its
 * statements and expressions that the passes' questions go through, and the
 * questions every pass asks of it (which expressions read a variable, which
 * parameters a function writes).  The --dump=ir
 * printer is ir_print.c, the verifier ir_verify.c, both above this file.
 */
#include "kjit_compiler.h"

#include <stdlib.h>

/* ================================================================== tables */

const char *const kj_math_names[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex, libm, libmvec, lower) name,
    KJ_MATH_BUILTINS(X)
#undef X
};

const int kj_math_arity[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex, libm, libmvec, lower) arity,
    KJ_MATH_BUILTINS(X)
#undef X
};

const bool kj_math_complex[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex, libm, libmvec, lower) complex,
    KJ_MATH_BUILTINS(X)
#undef X
};

const char *const kj_special_reg_names[KJ_SREG_COUNT] = {
#define X(id, name) name,
    KJ_SPECIAL_REGS(X)
#undef X
};

const char *const kj_exec_names[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args, form, nvvm) name,
    KJ_EXEC_OPS(X)
#undef X
};

const bool kj_exec_is_barrier[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args, form, nvvm) barrier,
    KJ_EXEC_OPS(X)
#undef X
};

const KjExecForm kj_exec_form[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args, form, nvvm) form,
    KJ_EXEC_OPS(X)
#undef X
};

const char *const kj_atomic_names[KJ_ATOMIC_COUNT] = {
#define X(id, name, elements) name,
    KJ_ATOMIC_OPS(X)
#undef X
};

static const char *const op_names[KJ_IR_OP_COUNT] = {
#define X(op) #op,
    KJ_IR_OPS(X)
#undef X
};

/* The enum's own spelling ("ADD"); the printer writes it in lower case. */
const char *kj_ir_op_name(KjIrOp op)
{
    if (op < 0 || op >= KJ_IR_OP_COUNT)
        return "?";
    return op_names[op];
}

/* ================================================================ builders */

KjIrVar *kj_ir_new_var(KjArena *arena, KjIrFunction *fn, const char *name, const KjType *type,
                       KjLoc loc)
{
    KjIrVar *var = kj_arena_alloc(arena, sizeof *var);
    var->name = name;
    var->type = type;
    var->loc = loc;
    var->id = fn->locals.count;
    kj_vec_push(arena, &fn->locals, var);
    return var;
}

KjIrExpr *kj_ir_new_expr(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, int arg_count)
{
    KjIrExpr *expr = kj_arena_alloc(arena, sizeof *expr);
    expr->op = op;
    expr->type = type;
    expr->loc = loc;
    expr->arg_count = arg_count;
    if (arg_count > 0)
        expr->args = kj_arena_alloc(arena, sizeof *expr->args * (size_t)arg_count);
    return expr;
}

KjIrExpr *kj_ir_unary(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a)
{
    KjIrExpr *e = kj_ir_new_expr(arena, op, type, loc, 1);
    e->args[0] = a;
    return e;
}

KjIrExpr *kj_ir_binary(KjArena *arena, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
                       KjIrExpr *b)
{
    KjIrExpr *e = kj_ir_new_expr(arena, op, type, loc, 2);
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

KjIrExpr *kj_ir_int_const(KjArena *arena, const KjType *type, int64_t value, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_CONST, type, loc, 0);
    e->const_int = (uint64_t)value;
    return e;
}

KjIrExpr *kj_ir_float_const(KjArena *arena, const KjType *type, double value, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_CONST, type, loc, 0);
    e->const_float = value;
    return e;
}

KjIrExpr *kj_ir_var_ref(KjArena *arena, KjIrVar *var, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_VAR, var->type, loc, 0);
    e->var = var;
    return e;
}

KjIrStmt *kj_ir_set(KjArena *arena, KjIrVar *var, KjIrExpr *value, KjLoc loc)
{
    KjIrStmt *s = kj_ir_new_stmt(arena, KJ_IR_STMT_SET, loc);
    s->var = var;
    s->value = value;
    return s;
}

KjIrExpr *kj_ir_dim(KjArena *arena, KjIrExpr *array, int dim, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_DIM, kj_type_scalar(KJ_TYPE_I64), loc, 1);
    e->args[0] = array;
    e->dim = dim;
    return e;
}

KjIrExpr *kj_ir_load(KjArena *arena, KjIrExpr *array, KjIrExpr **indices, int count,
                     bool contiguous, KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_LOAD, array->type->elem, loc, 1 + count);
    e->args[0] = array;
    for (int k = 0; k < count; k++)
        e->args[1 + k] = indices[k];
    e->contiguous = contiguous;
    return e;
}

KjIrStmt *kj_ir_store(KjArena *arena, KjIrExpr *array, KjIrExpr **indices, int count,
                      KjIrExpr *value, bool contiguous, KjLoc loc)
{
    KjIrStmt *s = kj_ir_new_stmt(arena, KJ_IR_STMT_STORE, loc);
    s->array = array;
    s->value = value;
    s->contiguous = contiguous;
    s->index_count = count;
    s->indices = kj_arena_alloc(arena, sizeof *s->indices * (size_t)count);
    for (int k = 0; k < count; k++)
        s->indices[k] = indices[k];
    return s;
}

KjIrExpr *kj_ir_call(KjArena *arena, KjIrFunction *callee, const KjType *type, int arg_count,
                     KjLoc loc)
{
    KjIrExpr *e = kj_ir_new_expr(arena, KJ_IR_CALL, type, loc, arg_count);
    e->callee = callee;
    return e;
}

KjIrStmt *kj_ir_new_stmt(KjArena *arena, KjIrStmtKind kind, KjLoc loc)
{
    KjIrStmt *stmt = kj_arena_alloc(arena, sizeof *stmt);
    stmt->kind = kind;
    stmt->loc = loc;
    return stmt;
}

/* ================================================================= walking */

bool kj_ir_walk_expr(KjIrWalk *w, const KjIrExpr *e)
{
    if (!e)
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (!kj_ir_walk_expr(w, e->args[i]))
            return false;
    return !w->expr || w->expr(w, e);
}

bool kj_ir_walk_own_exprs(KjIrWalk *w, const KjIrStmt *s)
{
    if (!kj_ir_walk_expr(w, s->array))
        return false;
    for (int i = 0; i < s->index_count; i++)
        if (!kj_ir_walk_expr(w, s->indices[i]))
            return false;
    const KjIrExpr *es[] = {s->value, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        if (!kj_ir_walk_expr(w, es[i]))
            return false;
    return true;
}

bool kj_ir_walk_stmt(KjIrWalk *w, const KjIrStmt *s)
{
    if (!s)
        return true;
    if (!kj_ir_walk_own_exprs(w, s))
        return false;
    KjIrWalkStep step = w->stmt ? w->stmt(w, s) : KJ_IR_WALK_ON;
    if (step != KJ_IR_WALK_ON)
        return step == KJ_IR_WALK_SKIP;
    for (int i = 0; i < s->stmts.count; i++)
        if (!kj_ir_walk_stmt(w, s->stmts.items[i]))
            return false;
    if (!kj_ir_walk_stmt(w, s->then_stmt) || !kj_ir_walk_stmt(w, s->else_stmt) ||
        !kj_ir_walk_stmt(w, s->body))
        return false;
    if (w->leave)
        w->leave(w, s);
    return true;
}

/* ======================================================= reads of a variable */

static bool not_var(KjIrWalk *w, const KjIrExpr *e)
{
    return !(e->op == KJ_IR_VAR && e->var == w->data);
}

bool kj_ir_expr_reads(const KjIrExpr *e, const KjIrVar *var)
{
    KjIrWalk w = {.expr = not_var, .data = (void *)var};
    return !kj_ir_walk_expr(&w, e);
}

bool kj_ir_stmt_exprs_read(const KjIrStmt *s, const KjIrVar *var, bool store_target)
{
    KjIrWalk w = {.expr = not_var, .data = (void *)var};
    if (!store_target && s->kind == KJ_IR_STMT_STORE && s->array->op == KJ_IR_VAR) {
        KjIrStmt own = *s; /* the store's own expressions but its target */
        own.array = NULL;
        return !kj_ir_walk_own_exprs(&w, &own);
    }
    return !kj_ir_walk_own_exprs(&w, s);
}

/* ======================================================= parameters written */

/* Which parameters an array-typed expression may name: a bit per parameter
 * (from 32 on, none: the caller counts them written). */
static uint32_t array_origin(const KjIrExpr *e, const uint32_t *origin)
{
    if (!e)
        return 0;
    switch (e->op) {
    case KJ_IR_VAR: return origin[e->var->id];
    case KJ_IR_VIEW: return array_origin(e->args[0], origin);
    case KJ_IR_SELECT: return array_origin(e->args[1], origin) | array_origin(e->args[2], origin);
    default: return 0; /* shared(), local(): the function's own memory */
    }
}

/* Each callee's answer once per question: a call tree that doubles at each
 * level (24 levels: 16 million paths) holds few functions. */
typedef struct WrittenMemo {
    const KjIrFunction **fns;
    uint32_t *masks;
    int count, cap;
} WrittenMemo;

typedef struct WriteWalk {
    uint32_t *origin;
    uint32_t written;
    bool changed; /* an origin grew (the first walk, to a fixed point) */
    int depth;    /* of calls, for a program that recurses */
    WrittenMemo *memo;
} WriteWalk;

static uint32_t params_written(const KjIrFunction *fn, int depth, WrittenMemo *memo);

static bool expr_writes(KjIrWalk *walk, const KjIrExpr *e)
{
    WriteWalk *w = walk->data;
    if (e->op == KJ_IR_ATOMIC)
        w->written |= array_origin(e->args[0], w->origin);
    bool passes_array = false;
    for (int i = 0; i < e->arg_count; i++)
        passes_array |= e->args[i]->type->kind == KJ_TYPE_ARRAY;
    if (e->op == KJ_IR_CALL && e->callee && passes_array) {
        uint32_t callee = w->depth > 64 ? UINT32_MAX : 0;
        if (!callee)
            callee = params_written(e->callee, w->depth + 1, w->memo);
        for (int i = 0; i < e->arg_count; i++)
            if (e->args[i]->type->kind == KJ_TYPE_ARRAY && (i >= 32 || (callee >> i & 1)))
                w->written |= array_origin(e->args[i], w->origin);
    }
    return true;
}

static KjIrWalkStep stmt_writes(KjIrWalk *walk, const KjIrStmt *s)
{
    WriteWalk *w = walk->data;
    if (s->kind == KJ_IR_STMT_STORE)
        w->written |= array_origin(s->array, w->origin);
    if (s->kind == KJ_IR_STMT_SET && s->var && s->var->type->kind == KJ_TYPE_ARRAY) {
        uint32_t grown = w->origin[s->var->id] | array_origin(s->value, w->origin);
        w->changed |= grown != w->origin[s->var->id];
        w->origin[s->var->id] = grown;
    }
    return KJ_IR_WALK_ON;
}

static uint32_t params_written(const KjIrFunction *fn, int depth, WrittenMemo *memo)
{
    for (int i = 0; i < memo->count; i++)
        if (memo->fns[i] == fn)
            return memo->masks[i];
    int count = fn->locals.count;
    for (int i = 0; i < count; i++) {
        const KjIrVar *var = fn->locals.items[i];
        if (var->id >= count)
            count = var->id + 1;
    }
    WriteWalk w = {.origin = kj_xcalloc((size_t)(count ? count : 1), sizeof(uint32_t)),
                   .depth = depth, .memo = memo};
    for (int i = 0; i < fn->param_count && i < 32; i++)
        w.origin[fn->params[i]->id] = 1u << i;
    /* `let b = a;` may come after a store through b in a loop: walk until
     * the origins stop growing (each walk adds a bit or stops). */
    KjIrWalk walk = {.stmt = stmt_writes, .expr = expr_writes, .data = &w};
    do {
        w.changed = false;
        w.written = 0;
        kj_ir_walk_stmt(&walk, fn->body);
    } while (w.changed);
    free(w.origin);
    if (memo->count == memo->cap) {
        memo->cap = memo->cap ? 2 * memo->cap : 16;
        memo->fns = kj_xrealloc(memo->fns, sizeof *memo->fns * (size_t)memo->cap);
        memo->masks = kj_xrealloc(memo->masks, sizeof *memo->masks * (size_t)memo->cap);
    }
    memo->fns[memo->count] = fn;
    memo->masks[memo->count++] = w.written;
    return w.written;
}

uint32_t kj_ir_params_written_at(const KjIrFunction *fn, int depth)
{
    WrittenMemo memo = {0};
    uint32_t written = params_written(fn, depth, &memo);
    free(memo.fns);
    free(memo.masks);
    return written;
}

uint32_t kj_ir_params_written(const KjIrFunction *fn)
{
    return kj_ir_params_written_at(fn, 0);
}
