/*
 * check_type.c: the bottom of the checker: building typed IR and the
 * implicit typing every rule shares.
 *
 * The IR shorthands (a node of an op and type, constants, variable
 * references, casts, copies; whether an expression may be evaluated twice),
 * and the implicit typing: literals stay untyped constants until their
 * context settles them (kj_check_settle, kj_check_convert), and conversions
 * only widen.  These work on IR that is already checked and never on the
 * AST, so every other checker file may call them (checker.h draws the order).
 */
#include "checker.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ============================================================ IR shorthands */

/* ir.c's builders with the checker's arena. */

KjIrExpr *kj_check_new_expr(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, int n)
{
    return kj_ir_new_expr(c->arena, op, type, loc, n);
}

KjIrExpr *kj_check_unary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a)
{
    return kj_ir_unary(c->arena, op, type, loc, a);
}

KjIrExpr *kj_check_binary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
                             KjIrExpr *b)
{
    return kj_ir_binary(c->arena, op, type, loc, a, b);
}

KjIrExpr *kj_check_int_const(KjChecker *c, const KjType *type, int64_t value, KjLoc loc)
{
    return kj_ir_int_const(c->arena, type, value, loc);
}

KjIrExpr *kj_check_float_const(KjChecker *c, const KjType *type, double value, KjLoc loc)
{
    return kj_ir_float_const(c->arena, type, value, loc);
}

KjIrExpr *kj_check_var_ref(KjChecker *c, KjIrVar *var, KjLoc loc)
{
    return kj_ir_var_ref(c->arena, var, loc);
}

KjIrExpr *kj_check_cast_ir(KjChecker *c, KjIrExpr *e, const KjType *to)
{
    if (e->type == to)
        return e;
    return kj_check_unary_ir(c, KJ_IR_CAST, to, e->loc, e);
}

/* A deep copy, for lowerings that use an operand twice (x ** 3, abs of an int). */
KjIrExpr *kj_check_clone_expr(KjChecker *c, const KjIrExpr *e)
{
    KjIrExpr *copy = kj_check_new_expr(c, e->op, e->type, e->loc, e->arg_count);
    KjIrExpr **args = copy->args;
    *copy = *e;
    copy->args = args;
    for (int i = 0; i < e->arg_count; i++)
        copy->args[i] = kj_check_clone_expr(c, e->args[i]);
    return copy;
}

bool kj_check_is_read_only(const KjIrExpr *array)
{
    if (array && array->op == KJ_IR_SELECT) /* either arm may be the one chosen */
        return kj_check_is_read_only(array->args[1]) || kj_check_is_read_only(array->args[2]);
    return array && (array->op == KJ_IR_CONST_ARRAY ||
                     (array->op == KJ_IR_VAR && array->var && array->var->read_only));
}

bool kj_check_refuse_read_only(KjChecker *c, const KjIrExpr *array, KjLoc loc, const char *what)
{
    if (!kj_check_is_read_only(array))
        return false;
    while (array->op == KJ_IR_SELECT)
        array = kj_check_is_read_only(array->args[1]) ? array->args[1] : array->args[2];
    if (array->op == KJ_IR_CONST_ARRAY)
        kj_error(c->diag, loc, "%s writes the constant array '%s', which is read-only", what,
                 array->const_array->name);
    else
        kj_error(c->diag, loc, "%s writes '%s', which may name a constant array (read-only)",
                 what, array->var->name);
    return true;
}

KjIrExpr *kj_check_sreg(KjChecker *c, KjSpecialReg reg, KjLoc loc)
{
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_SREG, kj_check_t_i32(), loc, 0);
    e->sreg = reg;
    return e;
}

/* True when evaluating e twice is the same as evaluating it once. */
bool kj_check_expr_is_pure(KjChecker *c, const KjIrExpr *e)
{
    if (e->op == KJ_IR_ATOMIC || e->op == KJ_IR_SYNCTHREADS || e->op == KJ_IR_SHARED ||
        e->op == KJ_IR_PRINT ||
        e->op == KJ_IR_LOCAL || e->op == KJ_IR_DYNAMIC_SHARED ||
        (e->op == KJ_IR_EXEC && e->exec != KJ_EXEC_LANEID))
        return false;
    if (e->op == KJ_IR_CALL) {
        for (int i = 0; i < c->fns.count; i++) {
            KjCheckFn *info = c->fns.items[i];
            for (int v = 0; info->entry && v < info->entry->variants.count; v++)
                if (info->entry->variants.items[v] == e->callee && info->impure)
                    return false;
        }
    }
    for (int i = 0; i < e->arg_count; i++)
        if (!kj_check_expr_is_pure(c, e->args[i]))
            return false;
    return true;
}

void kj_check_note_impure(KjChecker *c)
{
    if (c->cur)
        c->cur->info->impure = true;
}
/* ========================================================= implicit typing */

/* Implicit conversions only widen: int to a larger int of the same
 * signedness, int to float, f16 or bf16 to f32 to f64, real to complex, c64
 * to c128. */
static bool widens(const KjType *from, const KjType *to)
{
    if (from == to)
        return true;
    if (kj_type_is_int(from)) {
        if (kj_type_is_int(to))
            return kj_type_is_signed(from) == kj_type_is_signed(to) &&
                   kj_type_size(from) <= kj_type_size(to);
        return kj_type_is_float(to) || kj_type_is_complex(to);
    }
    if (kj_type_is_half(from)) /* f16 and bf16 never meet each other implicitly */
        return to->kind == KJ_TYPE_F32 || to->kind == KJ_TYPE_F64 || kj_type_is_complex(to);
    if (from->kind == KJ_TYPE_F32)
        return to->kind == KJ_TYPE_F64 || kj_type_is_complex(to);
    if (from->kind == KJ_TYPE_F64)
        return to->kind == KJ_TYPE_C128;
    if (from->kind == KJ_TYPE_C64)
        return to->kind == KJ_TYPE_C128;
    return false;
}

/* The type two typed numeric operands meet at, or NULL (and *why) when they
 * do not meet without a cast. */
const KjType *kj_check_common_type(const KjType *a, const KjType *b, const char **why)
{
    *why = NULL;
    if (a == b)
        return kj_type_is_numeric(a) ? a : NULL;
    if (!kj_type_is_numeric(a) || !kj_type_is_numeric(b))
        return NULL;
    if (kj_type_is_int(a) && kj_type_is_int(b)) {
        if (kj_type_is_signed(a) != kj_type_is_signed(b)) {
            *why = "signed and unsigned integers do not mix; convert one with a cast";
            return NULL;
        }
        return kj_type_size(a) >= kj_type_size(b) ? a : b;
    }
    if (kj_type_is_complex(a) || kj_type_is_complex(b)) {
        const KjType *z = kj_type_is_complex(a) ? a : b, *other = z == a ? b : a;
        if (other->kind == KJ_TYPE_F64 || other->kind == KJ_TYPE_C128)
            return kj_type_scalar(KJ_TYPE_C128);
        return z;
    }
    if (kj_type_is_float(a) && kj_type_is_float(b)) {
        if (kj_type_is_half(a) && kj_type_is_half(b)) {
            *why = "f16 and bf16 do not mix; convert one with a cast, f16(...), bf16(...) "
                   "or f32(...)";
            return NULL;
        }
        if (a->kind == KJ_TYPE_F64 || b->kind == KJ_TYPE_F64)
            return kj_type_scalar(KJ_TYPE_F64);
        return kj_type_is_half(a) ? b : a; /* the wider: f32 over f16 and bf16 */
    }
    return kj_type_is_float(a) ? a : b; /* int with float: the float's type */
}

bool kj_check_int_fits(int64_t v, const KjType *t)
{
    int bits = kj_type_int_bits(t);
    if (kj_type_is_signed(t)) {
        if (bits == 64)
            return true;
        int64_t limit = (int64_t)1 << (bits - 1);
        return v >= -limit && v < limit;
    }
    if (v < 0)
        return false;
    return bits == 64 || (uint64_t)v < ((uint64_t)1 << bits);
}

/* An untyped constant given the type `to`; NULL and an error if it does not fit. */
KjIrExpr *kj_check_settle(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc)
{
    bool is_int = e->type->kind == KJ_TYPE_UNTYPED_INT;
    int64_t iv = (int64_t)e->const_int;
    double fv = is_int ? (double)iv : e->const_float;
    if (kj_type_is_int(to)) {
        if (!is_int) {
            kj_error(c->diag, loc, "the float constant %g cannot be %s without a cast; write %s(...)",
                     fv, kj_type_name(to), kj_type_name(to));
            return NULL;
        }
        if (!kj_check_int_fits(iv, to)) {
            kj_error(c->diag, loc, "the constant %" PRId64 " does not fit in %s", iv,
                     kj_type_name(to));
            return NULL;
        }
        return kj_check_int_const(c, to, iv, e->loc);
    }
    if (kj_type_is_float(to) || kj_type_is_complex(to)) {
        bool single = to->kind == KJ_TYPE_F32 || to->kind == KJ_TYPE_C64;
        if (single && isfinite(fv) && fabs(fv) > FLT_MAX) {
            kj_error(c->diag, loc, "the constant %g does not fit in %s", fv, kj_type_name(to));
            return NULL;
        }
        double value = single ? (double)(float)fv : fv;
        if (kj_type_is_half(to)) {
            value = kj_half_round(to->kind, fv);
            if (isfinite(fv) && isinf(value)) {
                kj_error(c->diag, loc, "the constant %g does not fit in %s", fv, kj_type_name(to));
                return NULL;
            }
        }
        KjIrExpr *k = kj_check_float_const(c, to, value, e->loc);
        return k;
    }
    kj_error(c->diag, loc, "a number cannot be used as %s", kj_type_name(to));
    return NULL;
}

KjIrExpr *kj_check_settle_default(KjChecker *c, KjIrExpr *e)
{
    if (!kj_check_is_untyped(e))
        return e;
    const KjType *to =
        e->type->kind == KJ_TYPE_UNTYPED_INT ? kj_check_t_i64() : kj_check_t_f64();
    return kj_check_settle(c, e, to, e->loc);
}

/* e converted implicitly to `to`: settled if untyped, widened with a CAST, or
 * an error naming `context` ("the argument 'x' of f", "the return value" ...). */
KjIrExpr *kj_check_convert(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc,
                           const char *context)
{
    if (!e || !to)
        return NULL;
    if (kj_check_is_untyped(e))
        return kj_check_settle(c, e, to, loc);
    if (e->type == to)
        return e;
    if (kj_check_is_scalar(e->type) && kj_check_is_scalar(to) && widens(e->type, to))
        return kj_check_cast_ir(c, e, to);
    if (kj_check_is_array(to) || kj_check_is_array(e->type))
        kj_error(c->diag, loc, "%s must be %s, not %s", context, kj_type_name(to),
                 kj_type_name(e->type));
    else if (e->type == kj_type_void())
        kj_error(c->diag, loc, "%s must be %s, but this call returns nothing", context,
                 kj_type_name(to));
    else
        kj_error(c->diag, loc, "%s must be %s, not %s (only widening is implicit; write %s(...) "
                 "to convert)", context, kj_type_name(to), kj_type_name(e->type),
                 kj_type_name(to));
    return NULL;
}

/* A value that will be stored or passed on: untyped constants take their
 * default type, and a value of nothing (a void call) is an error. */
KjIrExpr *kj_check_need_value(KjChecker *c, KjIrExpr *e, KjLoc loc)
{
    if (!e)
        return NULL;
    if (e->type == kj_type_void()) {
        kj_error(c->diag, loc, "this call returns nothing; it has no value to use");
        return NULL;
    }
    return kj_check_settle_default(c, e);
}

/* The value of an untyped integer constant expression, for sizes and counts. */
bool kj_check_constant_int(const KjIrExpr *e, int64_t *out)
{
    if (!e || e->op != KJ_IR_CONST || e->type->kind != KJ_TYPE_UNTYPED_INT)
        return false;
    *out = (int64_t)e->const_int;
    return true;
}
