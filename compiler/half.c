/*
 * half.c: the two 16-bit float types, f16 (IEEE binary16) and bf16
 * (bfloat16, the top half of an f32).
 *
 * They are storage types that compute as f32: kj_half_lower rewrites every
 * operation on them into the same operation on f32 operands, followed by a
 * rounding CAST back to the 16-bit type.  So the back ends only ever load,
 * store, convert and select 16-bit values, every target gives the same bits,
 * and the reference evaluator needs nothing but the conversions below.  For
 * + - * / and sqrt the result is the correctly rounded one, because f32 has
 * more than twice the precision plus two bits of either type; other math
 * functions are f32's result rounded once more.
 *
 * The C conversions (half_bits.c) are the reference the runtime, the CLI and
 * the tests use; the code generator emits the same rounding (codegen_expr.c).
 */
#include "kjit_compiler.h"

#include <math.h>

/* The conversions (kj_half_from_double, kj_half_to_double, kj_half_round)
 * are in half_bits.c, which libkjit-rt links too. */

/* ============================================================== lowering */

/*
 * kj_half_lower: f16/bf16 arithmetic -> f32 arithmetic and a rounding CAST.
 * Needs: a checked module.  Gives: a module in which no NEG, arithmetic,
 * comparison, IPOW, MATH or EXEC (shfl) node has an f16 or bf16 operand or
 * result; LOAD,
 * STORE, VAR, CONST, CAST, SELECT, CALL and the rest may still carry them.
 * The meaning is the language's (docs/language.md, "16-bit floats").
 */

static bool lowers(KjIrOp op)
{
    switch (op) {
    case KJ_IR_NEG: case KJ_IR_ADD: case KJ_IR_SUB: case KJ_IR_MUL: case KJ_IR_DIV:
    case KJ_IR_REM: case KJ_IR_EQ: case KJ_IR_NE: case KJ_IR_LT: case KJ_IR_LE:
    case KJ_IR_GT: case KJ_IR_GE: case KJ_IR_MATH: case KJ_IR_IPOW:
    case KJ_IR_EXEC: /* shfl of a 16-bit value: moved as an f32, exactly */
        return true;
    default:
        return false;
    }
}

/* After e's operands (the walk's order): e's operands are replaced, and e
 * itself rewritten in place, nodes the walk has done with. */
static bool lower_expr(KjIrWalk *w, const KjIrExpr *node)
{
    KjArena *arena = w->data;
    KjIrExpr *e = (KjIrExpr *)node;
    if (!lowers(e->op))
        return true;
    bool any = kj_type_is_half(e->type);
    for (int i = 0; i < e->arg_count; i++)
        any |= kj_type_is_half(e->args[i]->type);
    if (!any)
        return true;
    const KjType *f32 = kj_type_scalar(KJ_TYPE_F32);
    for (int i = 0; i < e->arg_count; i++) {
        KjIrExpr *a = e->args[i];
        if (!kj_type_is_half(a->type))
            continue;
        KjIrExpr *wide = kj_ir_new_expr(arena, KJ_IR_CAST, f32, a->loc, 1);
        wide->args[0] = a;
        e->args[i] = wide;
    }
    if (!kj_type_is_half(e->type))
        return true; /* a comparison, isnan ...: bool from f32 operands */
    /* e becomes the rounding CAST; a copy of it computes in f32. */
    KjIrExpr *inner = kj_ir_new_expr(arena, e->op, f32, e->loc, e->arg_count);
    KjIrExpr **args = inner->args;
    *inner = *e;
    inner->args = args;
    inner->type = f32;
    for (int i = 0; i < e->arg_count; i++)
        inner->args[i] = e->args[i];
    KjIrExpr *round = kj_ir_new_expr(arena, KJ_IR_CAST, e->type, e->loc, 1);
    round->args[0] = inner;
    *e = *round;
    return true;
}

void kj_half_lower(KjIrModule *module)
{
    KjIrWalk walk = {.expr = lower_expr, .data = module->arena};
    for (int i = 0; i < module->functions.count; i++) {
        KjIrFunction *fn = module->functions.items[i];
        kj_ir_walk_stmt(&walk, fn->body);
    }
}
