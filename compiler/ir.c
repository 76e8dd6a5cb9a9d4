/*
 * ir.c: the typed IR's name tables, its builders, and the questions every
 * pass asks of it (which expressions read a variable).  The --dump=ir
 * printer is ir_print.c, the verifier ir_verify.c, both above this file.
 */
#include "kjit_compiler.h"

/* ================================================================== tables */

const char *const kj_math_names[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex) name,
    KJ_MATH_BUILTINS(X)
#undef X
};

const int kj_math_arity[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex) arity,
    KJ_MATH_BUILTINS(X)
#undef X
};

const bool kj_math_complex[KJ_MATH_COUNT] = {
#define X(id, name, arity, complex) complex,
    KJ_MATH_BUILTINS(X)
#undef X
};

const char *const kj_special_reg_names[KJ_SREG_COUNT] = {
#define X(id, name) name,
    KJ_SPECIAL_REGS(X)
#undef X
};

const char *const kj_exec_names[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args) name,
    KJ_EXEC_OPS(X)
#undef X
};

const bool kj_exec_is_barrier[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args) barrier,
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

KjIrStmt *kj_ir_new_stmt(KjArena *arena, KjIrStmtKind kind, KjLoc loc)
{
    KjIrStmt *stmt = kj_arena_alloc(arena, sizeof *stmt);
    stmt->kind = kind;
    stmt->loc = loc;
    return stmt;
}

bool kj_ir_expr_reads(const KjIrExpr *e, const KjIrVar *var)
{
    if (!e)
        return false;
    if (e->op == KJ_IR_VAR && e->var == var)
        return true;
    for (int i = 0; i < e->arg_count; i++)
        if (kj_ir_expr_reads(e->args[i], var))
            return true;
    return false;
}

bool kj_ir_stmt_exprs_read(const KjIrStmt *s, const KjIrVar *var, bool store_target)
{
    const KjIrExpr *array =
        !store_target && s->kind == KJ_IR_STMT_STORE && s->array->op == KJ_IR_VAR ? NULL : s->array;
    const KjIrExpr *es[] = {s->value, array, s->cond, s->start, s->stop, s->step};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        if (kj_ir_expr_reads(es[i], var))
            return true;
    for (int i = 0; i < s->index_count; i++)
        if (kj_ir_expr_reads(s->indices[i], var))
            return true;
    return false;
}
