/*
 * check_operator.c: the type rules of the unary and binary operators, for the
 * checker (check_expr.c dispatches to them).
 *
 * Operands meet at a common type (kj_check_unify: untyped constants take the
 * other side's type, typed ones widen); operations on two untyped constants
 * are folded, with their overflow and division by zero reported; `**` is
 * lowered to multiplications, sqrt, IPOW or pow.
 */
#include "checker.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static int expr_size(const KjIrExpr *e)
{
    int size = 1;
    for (int i = 0; i < e->arg_count; i++)
        size += expr_size(e->args[i]);
    return size;
}

/* Folds an operation on two untyped constants; NULL (no error) when the
 * operation is not folded, and error_out set when it is an error. */
static KjIrExpr *fold_untyped(KjChecker *c, KjBinaryOp op, KjIrExpr *l, KjIrExpr *r, KjLoc loc,
                              bool *error_out)
{
    *error_out = false;
    bool ints = l->type->kind == KJ_TYPE_UNTYPED_INT && r->type->kind == KJ_TYPE_UNTYPED_INT;
    if (ints) {
        int64_t a = (int64_t)l->const_int, b = (int64_t)r->const_int, v = 0;
        bool overflow = false;
        switch (op) {
        case KJ_BIN_ADD: overflow = __builtin_add_overflow(a, b, &v); break;
        case KJ_BIN_SUB: overflow = __builtin_sub_overflow(a, b, &v); break;
        case KJ_BIN_MUL: overflow = __builtin_mul_overflow(a, b, &v); break;
        case KJ_BIN_DIV:
        case KJ_BIN_REM:
            if (b == 0) {
                kj_error(c->diag, loc, "division by zero in a constant expression");
                *error_out = true;
                return NULL;
            }
            overflow = a == INT64_MIN && b == -1;
            if (!overflow)
                v = op == KJ_BIN_DIV ? a / b : a % b;
            break;
        case KJ_BIN_BITAND: v = a & b; break;
        case KJ_BIN_BITOR: v = a | b; break;
        case KJ_BIN_BITXOR: v = a ^ b; break;
        case KJ_BIN_SHL:
        case KJ_BIN_SHR:
            if (b < 0 || b > 63) {
                kj_error(c->diag, loc, "shift count %" PRId64 " is out of range 0..63", b);
                *error_out = true;
                return NULL;
            }
            if (op == KJ_BIN_SHR)
                v = a >> b;
            else {
                v = (int64_t)((uint64_t)a << b);
                overflow = (v >> b) != a;
            }
            break;
        default:
            return NULL;
        }
        if (overflow) {
            kj_error(c->diag, loc, "the constant expression overflows 64 bits");
            *error_out = true;
            return NULL;
        }
        return kj_check_int_const(c, kj_check_t_untyped_int(), v, loc);
    }
    double a = l->type->kind == KJ_TYPE_UNTYPED_INT ? (double)(int64_t)l->const_int : l->const_float;
    double b = r->type->kind == KJ_TYPE_UNTYPED_INT ? (double)(int64_t)r->const_int : r->const_float;
    double v;
    switch (op) {
    case KJ_BIN_ADD: v = a + b; break;
    case KJ_BIN_SUB: v = a - b; break;
    case KJ_BIN_MUL: v = a * b; break;
    case KJ_BIN_DIV: v = a / b; break;
    case KJ_BIN_REM: v = fmod(a, b); break;
    default: return NULL;
    }
    return kj_check_float_const(c, kj_check_t_untyped_float(), v, loc);
}

/* Brings two operands of an arithmetic or comparison operator to one type
 * (untyped constants take the other side's type).  Returns the type, or NULL
 * after an error. */
const KjType *kj_check_unify(KjChecker *c, KjIrExpr **l, KjIrExpr **r, KjLoc loc, const char *op)
{
    KjIrExpr *a = *l, *b = *r;
    if (kj_check_is_untyped(a) && kj_check_is_untyped(b)) {
        a = kj_check_settle_default(c, a);
        b = kj_check_settle_default(c, b);
        if (!a || !b)
            return NULL;
    }
    const KjType *t;
    if (kj_check_is_untyped(a) || kj_check_is_untyped(b)) {
        KjIrExpr *k = kj_check_is_untyped(a) ? a : b, *typed = k == a ? b : a;
        t = typed->type;
        if (!kj_type_is_numeric(t)) {
            kj_error(c->diag, loc, "'%s' needs numbers, not %s", op, kj_type_name(t));
            return NULL;
        }
        if (kj_type_is_int(t) && k->type->kind == KJ_TYPE_UNTYPED_FLOAT)
            t = kj_check_t_f64(); /* an int meets a float literal in f64 */
    } else {
        const char *why;
        t = kj_check_common_type(a->type, b->type, &why);
        if (!t) {
            if (why)
                kj_error(c->diag, loc, "'%s' of %s and %s: %s", op, kj_type_name(a->type),
                         kj_type_name(b->type), why);
            else
                kj_error(c->diag, loc, "'%s' needs numbers, not %s and %s", op,
                         kj_type_name(a->type), kj_type_name(b->type));
            return NULL;
        }
    }
    *l = kj_check_convert(c, a, t, loc, "the left operand");
    *r = kj_check_convert(c, b, t, loc, "the right operand");
    return *l && *r ? t : NULL;
}

/* x ** n for a small constant n as multiplications, by squaring. */
static KjIrExpr *power_chain(KjChecker *c, KjIrExpr *x, int64_t n, KjLoc loc)
{
    if (n == 1)
        return x;
    KjIrExpr *half = power_chain(c, x, n / 2, loc);
    KjIrExpr *square = kj_check_binary_ir(c, KJ_IR_MUL, x->type, loc, half,
                                          kj_check_clone_expr(c, half));
    if (n % 2)
        square = kj_check_binary_ir(c, KJ_IR_MUL, x->type, loc, square,
                                    kj_check_clone_expr(c, x));
    return square;
}

static KjIrExpr *one_of(KjChecker *c, const KjType *t, KjLoc loc)
{
    if (kj_type_is_int(t))
        return kj_check_int_const(c, t, 1, loc);
    return kj_check_float_const(c, t, 1.0, loc);
}

enum { POW_CHAIN_NODES = 64 };

/* `**`: a constant integer exponent up to 8 becomes multiplications (1/x^n
 * when negative), 0.5 becomes sqrt, an integer exponent IPOW, and the rest pow. */
static KjIrExpr *check_pow(KjChecker *c, KjIrExpr *base, KjIrExpr *exp, KjLoc loc)
{
    if (!base || !exp)
        return NULL;
    if (kj_check_is_untyped(base) && kj_check_is_untyped(exp)) {
        base = kj_check_settle_default(c, base);
        if (!base)
            return NULL;
    }
    int64_t n = 0;
    bool const_exp = kj_check_constant_int(exp, &n);
    if (!kj_check_is_untyped(base) && !kj_type_is_numeric(base->type)) {
        kj_error(c->diag, loc, "'**' needs a number, not %s", kj_type_name(base->type));
        return NULL;
    }
    if (const_exp && !kj_check_is_untyped(base)) {
        const KjType *t = base->type;
        int64_t magnitude = n < 0 ? -n : n;
        if (n < 0 && kj_type_is_int(t)) {
            kj_error(c->diag, loc, "a negative exponent on the integer type %s; write f64(x) ** %"
                     PRId64 " for a float result", kj_type_name(t), n);
            return NULL;
        }
        if (n == 0)
            return kj_type_is_complex(t) ? kj_check_float_const(c, t, 1.0, loc) : one_of(c, t, loc);
        bool small = magnitude <= KJ_POW_CHAIN_MAX &&
                     expr_size(base) * magnitude <= POW_CHAIN_NODES &&
                     kj_check_expr_is_pure(c, base);
        if (small) {
            KjIrExpr *chain = power_chain(c, base, magnitude, loc);
            if (n < 0)
                chain = kj_check_binary_ir(c, KJ_IR_DIV, t, loc,
                                           kj_type_is_complex(t)
                                               ? kj_check_float_const(c, t, 1.0, loc)
                                               : one_of(c, t, loc),
                                           chain);
            return chain;
        }
        /* A complex base beyond -8 to 8 takes the complex pow (the
         * language's rule); within it, a base that is not pure or too big
         * to copy is multiplied by the power routine (IPOW), as a float
         * base is: exp(n log z) would be less accurate, and libm's (its
         * bits follow the host's vector ISA). */
        if (kj_type_is_complex(t) && magnitude > KJ_POW_CHAIN_MAX) {
            KjIrExpr *e = kj_check_binary_ir(c, KJ_IR_MATH, t, loc, base,
                                             kj_check_float_const(c, t, (double)n, loc));
            e->math = KJ_MATH_POW;
            return e;
        }
        return kj_check_binary_ir(c, KJ_IR_IPOW, t, loc, base,
                                  kj_check_int_const(c, kj_check_t_i64(), n, loc));
    }
    if (exp->op == KJ_IR_CONST && exp->type->kind == KJ_TYPE_UNTYPED_FLOAT &&
        exp->const_float == 0.5) {
        const KjType *t = kj_check_is_untyped(base) ? kj_check_t_f64()
                          : kj_type_is_int(base->type) ? kj_check_t_f64() : base->type;
        base = kj_check_convert(c, base, t, loc, "the base of '**'");
        if (!base)
            return NULL;
        KjIrExpr *e = kj_check_unary_ir(c, KJ_IR_MATH, t, loc, base);
        e->math = KJ_MATH_SQRT;
        return e;
    }
    if ((!kj_check_is_untyped(base) && kj_type_is_complex(base->type)) ||
        (!kj_check_is_untyped(exp) && kj_type_is_complex(exp->type))) {
        /* any other complex power: the complex pow, exp(w * log(z)) */
        const KjType *t = kj_check_unify(c, &base, &exp, loc, "**");
        if (!t)
            return NULL;
        KjIrExpr *e = kj_check_binary_ir(c, KJ_IR_MATH, t, loc, base, exp);
        e->math = KJ_MATH_POW;
        return e;
    }
    if (!kj_check_is_untyped(exp) && !kj_type_is_numeric(exp->type)) {
        kj_error(c->diag, loc, "'**' needs a number as exponent, not %s", kj_type_name(exp->type));
        return NULL;
    }
    bool int_exp = (kj_check_is_untyped(exp) && exp->type->kind == KJ_TYPE_UNTYPED_INT) ||
                   kj_type_is_int(exp->type);
    if (int_exp && !kj_check_is_untyped(exp)) {
        base = kj_check_settle_default(c, base);
        if (!base)
            return NULL;
        return kj_check_binary_ir(c, KJ_IR_IPOW, base->type, loc, base, exp);
    }
    if (int_exp && kj_type_is_int(base->type)) {
        exp = kj_check_settle_default(c, exp);
        return exp ? kj_check_binary_ir(c, KJ_IR_IPOW, base->type, loc, base, exp) : NULL;
    }
    const KjType *t = kj_check_unify(c, &base, &exp, loc, "**");
    if (!t)
        return NULL;
    if (kj_type_is_int(t)) {
        t = kj_check_t_f64();
        base = kj_check_cast_ir(c, base, t);
        exp = kj_check_cast_ir(c, exp, t);
    }
    KjIrExpr *e = kj_check_binary_ir(c, KJ_IR_MATH, t, loc, base, exp);
    e->math = KJ_MATH_POW;
    return e;
}

static KjIrOp binary_ir_op(KjBinaryOp op)
{
    switch (op) {
    case KJ_BIN_ADD: return KJ_IR_ADD;
    case KJ_BIN_SUB: return KJ_IR_SUB;
    case KJ_BIN_MUL: return KJ_IR_MUL;
    case KJ_BIN_DIV: return KJ_IR_DIV;
    case KJ_BIN_REM: return KJ_IR_REM;
    case KJ_BIN_BITAND: return KJ_IR_BITAND;
    case KJ_BIN_BITOR: return KJ_IR_BITOR;
    case KJ_BIN_BITXOR: return KJ_IR_BITXOR;
    case KJ_BIN_SHL: return KJ_IR_SHL;
    case KJ_BIN_SHR: return KJ_IR_SHR;
    case KJ_BIN_EQ: return KJ_IR_EQ;
    case KJ_BIN_NE: return KJ_IR_NE;
    case KJ_BIN_LT: return KJ_IR_LT;
    case KJ_BIN_LE: return KJ_IR_LE;
    case KJ_BIN_GT: return KJ_IR_GT;
    case KJ_BIN_GE: return KJ_IR_GE;
    case KJ_BIN_LOGAND: return KJ_IR_LOGAND;
    case KJ_BIN_LOGOR: return KJ_IR_LOGOR;
    default: kj_unreachable();
    }
}

/* The type rules of every binary operator, on operands already checked. */
KjIrExpr *kj_check_binary_values(KjChecker *c, KjBinaryOp op, KjIrExpr *l, KjIrExpr *r, KjLoc loc)
{
    if (!l || !r)
        return NULL;
    const char *spelling = kj_binary_op_spelling(op);
    if (l->type == kj_type_void() || r->type == kj_type_void()) {
        kj_error(c->diag, loc, "an operand of '%s' is a call that returns nothing", spelling);
        return NULL;
    }
    if (kj_check_is_array(l->type) || kj_check_is_array(r->type)) {
        kj_error(c->diag, loc, "'%s' works on single values, not arrays (%s); index the array, "
                 "or use a @vectorize function", spelling,
                 kj_type_name(kj_check_is_array(l->type) ? l->type : r->type));
        return NULL;
    }
    if (op == KJ_BIN_POW)
        return check_pow(c, l, r, loc);
    if (op == KJ_BIN_LOGAND || op == KJ_BIN_LOGOR) {
        if (l->type != kj_check_t_bool() || r->type != kj_check_t_bool()) {
            kj_error(c->diag, loc, "'%s' needs bool operands, not %s and %s", spelling,
                     kj_type_name(l->type), kj_type_name(r->type));
            return NULL;
        }
        return kj_check_binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
    }
    bool bitwise = op == KJ_BIN_BITAND || op == KJ_BIN_BITOR || op == KJ_BIN_BITXOR;
    bool shift = op == KJ_BIN_SHL || op == KJ_BIN_SHR;
    bool compare = op >= KJ_BIN_EQ && op <= KJ_BIN_GE;
    bool equality = op == KJ_BIN_EQ || op == KJ_BIN_NE;
    if (kj_check_is_untyped(l) && kj_check_is_untyped(r) && !compare) {
        if ((bitwise || shift) &&
            (l->type->kind != KJ_TYPE_UNTYPED_INT || r->type->kind != KJ_TYPE_UNTYPED_INT)) {
            kj_error(c->diag, loc, "'%s' needs integers", spelling);
            return NULL;
        }
        bool error;
        KjIrExpr *folded = fold_untyped(c, op, l, r, loc, &error);
        if (folded || error)
            return folded;
    }
    if (equality && l->type == kj_check_t_bool() && r->type == kj_check_t_bool())
        return kj_check_binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
    if (l->type == kj_check_t_bool() || r->type == kj_check_t_bool()) {
        kj_error(c->diag, loc, "'%s' does not take bool operands%s", spelling,
                 compare ? "" : " (convert with i32(b) if you mean 0 or 1)");
        return NULL;
    }
    if (shift) {
        /* The result has the left operand's type; the count is converted to it. */
        KjIrExpr *value = kj_check_settle_default(c, l);
        if (!value)
            return NULL;
        if (!kj_type_is_int(value->type) || (!kj_check_is_untyped(r) && !kj_type_is_int(r->type)) ||
            (kj_check_is_untyped(r) && r->type->kind != KJ_TYPE_UNTYPED_INT)) {
            kj_error(c->diag, loc, "'%s' needs integers, not %s and %s", spelling,
                     kj_type_name(value->type), kj_type_name(r->type));
            return NULL;
        }
        KjIrExpr *count = kj_check_is_untyped(r) ? kj_check_settle(c, r, value->type, loc)
                                                 : kj_check_cast_ir(c, r, value->type);
        return count ? kj_check_binary_ir(c, binary_ir_op(op), value->type, loc, value, count)
                     : NULL;
    }
    const KjType *t = kj_check_unify(c, &l, &r, loc, spelling);
    if (!t)
        return NULL;
    if (bitwise && !kj_type_is_int(t)) {
        kj_error(c->diag, loc, "'%s' needs integers, not %s", spelling, kj_type_name(t));
        return NULL;
    }
    if (op == KJ_BIN_REM && kj_type_is_complex(t)) {
        kj_error(c->diag, loc, "'%%' is not defined for complex numbers");
        return NULL;
    }
    if (compare) {
        if (kj_type_is_complex(t) && !equality) {
            kj_error(c->diag, loc, "complex numbers have no order; compare abs(z) or z.real "
                     "instead");
            return NULL;
        }
        return kj_check_binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
    }
    return kj_check_binary_ir(c, binary_ir_op(op), t, loc, l, r);
}

KjIrExpr *kj_check_unary(KjChecker *c, KjNode *n, KjIrExpr *a)
{
    if (!a)
        return NULL;
    if (a->type == kj_type_void() || kj_check_is_array(a->type)) {
        kj_error(c->diag, n->loc, "'%s' needs a single value, not %s",
                 kj_unary_op_spelling(n->unary_op),
                 a->type == kj_type_void() ? "a call that returns nothing" : kj_type_name(a->type));
        return NULL;
    }
    switch (n->unary_op) {
    case KJ_UN_PLUS:
        if (a->type == kj_check_t_bool()) {
            kj_error(c->diag, n->loc, "unary '+' needs a number, not bool");
            return NULL;
        }
        return a;
    case KJ_UN_NEG:
        if (kj_check_is_untyped(a)) {
            if (a->type->kind == KJ_TYPE_UNTYPED_FLOAT)
                return kj_check_float_const(c, a->type, -a->const_float, n->loc);
            if ((int64_t)a->const_int == INT64_MIN) {
                kj_error(c->diag, n->loc, "the constant expression overflows 64 bits");
                return NULL;
            }
            return kj_check_int_const(c, a->type, -(int64_t)a->const_int, n->loc);
        }
        if (!kj_type_is_numeric(a->type)) {
            kj_error(c->diag, n->loc, "unary '-' needs a number, not %s", kj_type_name(a->type));
            return NULL;
        }
        return kj_check_unary_ir(c, KJ_IR_NEG, a->type, n->loc, a);
    case KJ_UN_NOT:
        if (a->type != kj_check_t_bool()) {
            kj_error(c->diag, n->loc, "'!' needs a bool, not %s (compare instead: x != 0)",
                     kj_type_name(a->type));
            return NULL;
        }
        return kj_check_unary_ir(c, KJ_IR_NOT, kj_check_t_bool(), n->loc, a);
    case KJ_UN_BITNOT:
        if (kj_check_is_untyped(a) && a->type->kind == KJ_TYPE_UNTYPED_INT)
            return kj_check_int_const(c, a->type, ~(int64_t)a->const_int, n->loc);
        if (!kj_type_is_int(a->type)) {
            kj_error(c->diag, n->loc, "'~' needs an integer, not %s", kj_type_name(a->type));
            return NULL;
        }
        return kj_check_unary_ir(c, KJ_IR_BITNOT, a->type, n->loc, a);
    default:
        kj_unreachable();
    }
}

