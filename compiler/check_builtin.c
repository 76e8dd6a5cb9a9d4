/*
 * check_builtin.c: the type rules of the built-in calls, for check_expr.c.
 *
 * A call names a type (a cast), a math function, an atomic or a built-in of
 * KJ_CALL_BUILTINS, whose table (name, argument counts, where it may stand,
 * how its arguments are checked, its rule) is here; print and the
 * execution-model built-ins have files of their own below this one.  Every
 * rule receives its arguments checked (check_expr.c checks them as the
 * table's KjCheckArgs says) and builds the IR the back end lowers; none
 * checks an expression itself, so the recursion of expressions stays in
 * check_expr.c.
 */
#include "checker.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ============================================================== built-ins */

static const KjAtomicElements atomic_elements[KJ_ATOMIC_COUNT] = {
#define X(id, name, elements) elements,
    KJ_ATOMIC_OPS(X)
#undef X
};

/* ==================================================================== calls */

/* T(x): the argument count is checked, and x. */
KjIrExpr *kj_check_cast(KjChecker *c, KjNode *n, const KjType *to, KjIrExpr *a)
{
    if (kj_check_is_untyped(a)) {
        if (kj_type_is_int(to) && a->type->kind == KJ_TYPE_UNTYPED_FLOAT) {
            double t = trunc(a->const_float);
            if (!(t >= -9.2233720368547758e18 && t < 9.2233720368547758e18) ||
                !kj_check_int_fits((int64_t)t, to)) {
                kj_error(c->diag, n->loc, "the constant %g does not fit in %s", a->const_float,
                         kj_type_name(to));
                return NULL;
            }
            return kj_check_int_const(c, to, (int64_t)t, n->loc);
        }
        if (to == kj_check_t_bool()) {
            bool nonzero = a->type->kind == KJ_TYPE_UNTYPED_INT ? a->const_int != 0
                                                                : a->const_float != 0;
            return kj_check_int_const(c, kj_check_t_bool(), nonzero, n->loc);
        }
        return kj_check_settle(c, a, to, n->loc);
    }
    if (!kj_check_is_scalar(a->type)) {
        kj_error(c->diag, n->loc, "cannot convert %s to %s", kj_type_name(a->type),
                 kj_type_name(to));
        return NULL;
    }
    if (kj_type_is_complex(a->type) && !kj_type_is_complex(to)) {
        kj_error(c->diag, n->loc, "cannot convert complex %s to %s; take z.real, z.imag or abs(z)",
                 kj_type_name(a->type), kj_type_name(to));
        return NULL;
    }
    if (a->type == to)
        return a;
    KjIrExpr *e = kj_check_unary_ir(c, KJ_IR_CAST, to, n->loc, a);
    return e;
}

/* complex(re, im) and polar(r, theta): two real numbers that meet as one
 * float type (integers become f64), making a c64 or c128 through `op`. */
static KjIrExpr *check_two_parts(KjChecker *c, KjNode *n, KjIrExpr **args, const char *name,
                                 KjIrOp op)
{
    KjIrExpr **a = args;
    for (int i = 0; i < 2; i++)
        if (!kj_check_is_untyped(a[i]) && !kj_check_is_real(a[i]->type)) {
            kj_error(c->diag, ((KjNode *)n->args.items[i])->loc,
                     "%s() takes real numbers, not %s", name, kj_type_name(a[i]->type));
            return NULL;
        }
    const KjType *part = kj_check_unify(c, &a[0], &a[1], n->loc, name);
    if (!part)
        return NULL;
    if (kj_type_is_int(part))
        part = kj_check_t_f64();
    if (kj_type_is_half(part)) /* no c32: half parts widen to c64's */
        part = kj_type_scalar(KJ_TYPE_F32);
    a[0] = kj_check_cast_ir(c, a[0], part);
    a[1] = kj_check_cast_ir(c, a[1], part);
    const KjType *t = kj_type_scalar(part->kind == KJ_TYPE_F64 ? KJ_TYPE_C128 : KJ_TYPE_C64);
    return kj_check_binary_ir(c, op, t, n->loc, a[0], a[1]);
}

static KjIrExpr *check_complex(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    return check_two_parts(c, n, args, "complex", KJ_IR_COMPLEX);
}

/* Integer abs, min and max: SELECTs that use their operands twice. */
static KjIrExpr *int_minmax_abs(KjChecker *c, KjMathFn fn, KjIrExpr **a, const KjType *t, KjLoc loc)
{
    int count = fn == KJ_MATH_FABS ? 1 : 2;
    for (int i = 0; i < count; i++)
        if (!kj_check_expr_is_pure(c, a[i])) {
            kj_error(c->diag, loc, "%s of an integer evaluates its argument twice, and this one has "
                     "side effects; store it in a variable first", kj_math_names[fn]);
            return NULL;
        }
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_SELECT, t, loc, 3);
    if (fn == KJ_MATH_FABS) {
        e->args[0] = kj_check_binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[0],
                                        kj_check_int_const(c, t, 0, loc));
        e->args[1] = kj_check_unary_ir(c, KJ_IR_NEG, t, loc, kj_check_clone_expr(c, a[0]));
        e->args[2] = kj_check_clone_expr(c, a[0]);
    } else {
        /* min: b < a ? b : a;  max: a < b ? b : a (the first wins ties) */
        e->args[0] = fn == KJ_MATH_FMIN
                         ? kj_check_binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[1], a[0])
                         : kj_check_binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[0], a[1]);
        e->args[1] = kj_check_clone_expr(c, a[1]);
        e->args[2] = kj_check_clone_expr(c, a[0]);
    }
    return e;
}

/* A math function of complex arguments (kj_math_complex): they meet at a
 * complex type (a real one converts: pow(z, 2.5), pow(2, z)). */
static KjIrExpr *complex_math(KjChecker *c, KjNode *n, KjMathFn fn, KjIrExpr **a)
{
    int arity = kj_math_arity[fn];
    const KjType *t = a[0]->type;
    if (arity == 2 && !(t = kj_check_unify(c, &a[0], &a[1], n->loc, kj_math_names[fn])))
        return NULL;
    if (!kj_type_is_complex(t))
        kj_die("complex_math of %s", kj_type_name(t));
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_MATH, t, n->loc, arity);
    e->math = fn;
    for (int i = 0; i < arity; i++)
        e->args[i] = a[i];
    return e;
}

/* arg(z) / phase(z): the angle of z in [-pi, pi], atan2(z.imag, z.real); a
 * real x is the complex x + 0i (0 or pi). */
static KjIrExpr *check_arg(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    KjIrExpr *a = args[0];
    if (kj_check_is_untyped(a) || kj_check_is_real(a->type)) {
        const KjType *part = kj_check_is_untyped(a) || kj_type_is_int(a->type) ||
                                     a->type->kind == KJ_TYPE_F64
                                 ? kj_check_t_f64()
                                 : a->type;
        const KjType *t = kj_type_scalar(part->kind == KJ_TYPE_F64 ? KJ_TYPE_C128 : KJ_TYPE_C64);
        if (!(a = kj_check_convert(c, a, t, n->loc, "the argument")))
            return NULL;
    }
    if (!kj_type_is_complex(a->type)) {
        kj_error(c->diag, n->loc, "%s() takes a number, not %s", n->lhs->name,
                 kj_type_name(a->type));
        return NULL;
    }
    return kj_check_unary_ir(c, KJ_IR_CARG, kj_type_complex_part(a->type), n->loc, a);
}

/* polar(r, theta): r * (cos(theta) + i sin(theta)); the parts meet as in
 * complex(re, im). */
static KjIrExpr *check_polar(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    return check_two_parts(c, n, args, "polar", KJ_IR_POLAR);
}

/* mulhi(a, b): the high half of the double-width product of two 32- or
 * 64-bit integers of one signedness (Philox's multiply; CUDA's __umulhi). */
static KjIrExpr *check_mulhi(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    KjIrExpr **a = args;
    if (kj_check_is_untyped(a[0]) && kj_check_is_untyped(a[1])) {
        kj_error(c->diag, n->loc, "mulhi() of two literals: give one of them a type, "
                 "as in mulhi(u32(a), b)");
        return NULL;
    }
    const KjType *t = kj_check_unify(c, &a[0], &a[1], n->loc, "mulhi");
    if (!t)
        return NULL;
    if (!kj_type_is_int(t) || kj_type_int_bits(t) < 32) {
        kj_error(c->diag, n->loc, "mulhi() takes 32- or 64-bit integers, not %s",
                 kj_type_name(t));
        return NULL;
    }
    return kj_check_binary_ir(c, KJ_IR_MULHI, t, n->loc, a[0], a[1]);
}

/* A math function: the argument count is checked, and the arguments a. */
KjIrExpr *kj_check_math(KjChecker *c, KjNode *n, KjMathFn fn, KjIrExpr **a)
{
    const char *name = kj_math_names[fn];
    int arity = kj_math_arity[fn];
    bool predicate = fn == KJ_MATH_ISNAN || fn == KJ_MATH_ISINF || fn == KJ_MATH_ISFINITE;
    bool int_ok = fn == KJ_MATH_FABS || fn == KJ_MATH_FMIN || fn == KJ_MATH_FMAX;
    if (fn == KJ_MATH_FABS && kj_type_is_complex(a[0]->type))
        return kj_check_unary_ir(c, KJ_IR_CABS, kj_type_complex_part(a[0]->type), n->loc, a[0]);
    if (kj_math_complex[fn])
        for (int i = 0; i < arity; i++)
            if (!kj_check_is_untyped(a[i]) && kj_type_is_complex(a[i]->type))
                return complex_math(c, n, fn, a);
    /* The widest typed float wins; typed ints go to it (f64 if no float). */
    const KjType *t = NULL, *int_type = NULL;
    bool any_float_const = false;
    for (int i = 0; i < arity; i++) {
        const KjType *at = a[i]->type;
        KjLoc loc = ((KjNode *)n->args.items[i])->loc;
        if (kj_check_is_untyped(a[i])) {
            any_float_const = any_float_const || at->kind == KJ_TYPE_UNTYPED_FLOAT;
            continue;
        }
        if (kj_type_is_complex(at)) {
            kj_error(c->diag, loc, "%s takes real numbers; complex %s is not supported%s", name,
                     kj_type_name(at),
                     fn == KJ_MATH_FABS ? ""
                                        : " (abs, sqrt, exp, log, pow, sin, cos and tanh take "
                                          "complex)");
            return NULL;
        }
        if (!kj_check_is_real(at)) {
            kj_error(c->diag, loc, "%s takes numbers, not %s", name, kj_type_name(at));
            return NULL;
        }
        if (kj_type_is_float(at)) {
            const char *why = NULL;
            const KjType *wider = t ? kj_check_common_type(t, at, &why) : at;
            if (!wider) {
                kj_error(c->diag, loc, "%s of %s and %s: %s", name, kj_type_name(t),
                         kj_type_name(at), why);
                return NULL;
            }
            t = wider;
        }
        else if (!int_type)
            int_type = at;
        else {
            const char *why;
            const KjType *common = kj_check_common_type(int_type, at, &why);
            if (!common && int_ok && !t) {
                kj_error(c->diag, n->loc, "%s of %s and %s: %s", name, kj_type_name(int_type),
                         kj_type_name(at), why);
                return NULL;
            }
            int_type = common ? common : int_type;
        }
    }
    if (!t && int_ok && !any_float_const) {
        t = int_type ? int_type : kj_check_t_i64();
        for (int i = 0; i < arity; i++)
            if (!(a[i] = kj_check_convert(c, a[i], t, n->loc, "the argument")))
                return NULL;
        return int_minmax_abs(c, fn, a, t, n->loc);
    }
    if (!t)
        t = kj_check_t_f64();
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_MATH, predicate ? kj_check_t_bool() : t, n->loc,
                                    arity);
    e->math = fn;
    for (int i = 0; i < arity; i++) {
        e->args[i] = kj_check_convert(c, a[i], t, ((KjNode *)n->args.items[i])->loc,
                                      "the argument");
        if (!e->args[i])
            return NULL;
    }
    return e;
}

static KjIrExpr *check_len(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    KjIrExpr *a = args[0];
    if (!kj_check_is_array(a->type)) {
        kj_error(c->diag, n->loc, "len() takes an array, not %s", kj_type_name(a->type));
        return NULL;
    }
    KjIrExpr *e = kj_check_unary_ir(c, KJ_IR_DIM, kj_check_t_i64(), n->loc, a);
    e->dim = 0;
    return e;
}

static KjIrExpr *check_conj(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    KjIrExpr *a = args[0];
    if (kj_type_is_complex(a->type))
        return kj_check_unary_ir(c, KJ_IR_CONJ, a->type, n->loc, a);
    if (kj_check_is_untyped(a) || kj_check_is_real(a->type))
        return a; /* the conjugate of a real number is itself */
    kj_error(c->diag, n->loc, "conj() takes a number, not %s", kj_type_name(a->type));
    return NULL;
}

/* grid(n) / gridsize(n): the count must be a constant 1..3. */
bool kj_check_grid_count(KjChecker *c, KjNode *n, const char *name, KjIrExpr *a, int64_t *count)
{
    if (!a)
        return false;
    if (!kj_check_constant_int(a, count) || *count < 1 || *count > 3) {
        kj_error(c->diag, n->loc, "%s() takes a constant 1, 2 or 3", name);
        return false;
    }
    return true;
}

/* The special register `first` + axis (KJ_SPECIAL_REGS run x, y, z), in i64. */
static KjIrExpr *sreg_i64(KjChecker *c, KjSpecialReg first, int axis, KjLoc loc)
{
    return kj_check_cast_ir(c, kj_check_sreg(c, (KjSpecialReg)(first + axis), loc),
                            kj_check_t_i64());
}

/* Component `axis` of grid(n) (absolute thread index) or gridsize(n) (threads
 * in the grid), computed in i64. */
KjIrExpr *kj_check_grid_component(KjChecker *c, bool size, int axis, KjLoc loc)
{
    const KjType *i64 = kj_check_t_i64();
    if (size)
        return kj_check_binary_ir(c, KJ_IR_MUL, i64, loc, sreg_i64(c, KJ_SREG_BDIM_X, axis, loc),
                                  sreg_i64(c, KJ_SREG_GDIM_X, axis, loc));
    KjIrExpr *block = kj_check_binary_ir(c, KJ_IR_MUL, i64, loc,
                                         sreg_i64(c, KJ_SREG_BID_X, axis, loc),
                                         sreg_i64(c, KJ_SREG_BDIM_X, axis, loc));
    return kj_check_binary_ir(c, KJ_IR_ADD, i64, loc, block,
                              sreg_i64(c, KJ_SREG_TID_X, axis, loc));
}

static bool is_atomic_elem(const KjType *t, KjAtomicOp op)
{
    bool wide_int = t->kind == KJ_TYPE_I32 || t->kind == KJ_TYPE_I64 || t->kind == KJ_TYPE_U32 ||
                    t->kind == KJ_TYPE_U64;
    switch (atomic_elements[op]) {
    case KJ_ATOMIC_NUMBERS: return wide_int || (kj_type_is_float(t) && !kj_type_is_half(t));
    case KJ_ATOMIC_INTS: return wide_int;
    case KJ_ATOMIC_UNSIGNED: return t->kind == KJ_TYPE_U32 || t->kind == KJ_TYPE_U64;
    }
    return false;
}

static const char *atomic_elements_text(KjAtomicOp op)
{
    switch (atomic_elements[op]) {
    case KJ_ATOMIC_NUMBERS: return "32- and 64-bit integers and floats";
    case KJ_ATOMIC_INTS: return "32- and 64-bit integers";
    case KJ_ATOMIC_UNSIGNED: return "u32 and u64";
    }
    return "?";
}

/*
 * atomic_op(a, i, v...) on a 1-D array with a flat index, or
 * atomic_op(a[i, j, ...], v...) on an element of an array of any rank.  The
 * IR holds the array, one i64 index per dimension, then the values.
 */
bool kj_check_atomic_count(KjChecker *c, KjNode *n, KjAtomicOp op)
{
    const char *name = kj_atomic_names[op];
    int values = op == KJ_ATOMIC_CAS ? 2 : 1;
    KjNode *first = n->args.count > 0 ? n->args.items[0] : NULL;
    bool element = first && first->kind == KJ_NODE_INDEX;
    int count = values + (element ? 1 : 2);
    if (!kj_check_require_kernel(c, n->loc, name))
        return false;
    if (n->args.count != count) {
        kj_error(c->diag, n->loc, "%s takes %d arguments, got %d (%s)", name, count,
                 n->args.count,
                 element ? (values == 2 ? "the element, the expected value and the new one"
                                        : "the element and the value")
                         : (values == 2 ? "the array, the index, the expected value and the "
                                          "new one"
                                        : "the array, the index and the value"));
        return false;
    }
    return true;
}

KjIrExpr *kj_check_atomic(KjChecker *c, KjNode *n, KjAtomicOp op, KjIrExpr **a)
{
    const char *name = kj_atomic_names[op];
    int values = op == KJ_ATOMIC_CAS ? 2 : 1;
    KjNode *first = n->args.items[0];
    bool element = first->kind == KJ_NODE_INDEX;
    const KjType *array;
    if (element) {
        if (a[0]->op != KJ_IR_LOAD) {
            kj_error(c->diag, first->loc, "%s takes an array element: %s(a[i, j], v)", name, name);
            return NULL;
        }
        array = a[0]->args[0]->type;
    } else {
        array = a[0]->type;
        if (!kj_check_is_array(array)) {
            kj_error(c->diag, first->loc, "%s works on an array, not %s", name,
                     kj_type_name(array));
            return NULL;
        }
        if (array->ndim != 1) {
            kj_error(c->diag, first->loc, "%s on %s takes the element, one index per dimension: "
                     "%s(a[%s], v)", name, kj_type_name(array), name,
                     array->ndim == 2 ? "i, j" : "i, j, k");
            return NULL;
        }
    }
    if (kj_check_refuse_read_only(c, element ? a[0]->args[0] : a[0], first->loc, name))
        return NULL;
    if (!is_atomic_elem(array->elem, op)) {
        kj_error(c->diag, n->loc, "%s does not work on %s elements (%s)", name,
                 kj_type_name(array->elem), atomic_elements_text(op));
        return NULL;
    }
    int ndim = array->ndim;
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_ATOMIC, array->elem, n->loc, 1 + ndim + values);
    e->atomic = op;
    bool ok = true;
    if (element) {
        for (int k = 0; k <= ndim; k++)
            e->args[k] = a[0]->args[k];
    } else {
        e->args[0] = a[0];
        if (kj_check_is_untyped(a[1]) || kj_type_is_int(a[1]->type))
            e->args[1] = kj_check_is_untyped(a[1])
                             ? kj_check_settle(c, a[1], kj_check_t_i64(), n->loc)
                             : kj_check_cast_ir(c, a[1], kj_check_t_i64());
        else
            kj_error(c->diag, ((KjNode *)n->args.items[1])->loc, "the index of %s must be an "
                     "integer, not %s", name, kj_type_name(a[1]->type));
        ok = e->args[1] != NULL;
    }
    int first_value = element ? 1 : 2;
    for (int i = 0; i < values; i++) {
        KjNode *node = n->args.items[first_value + i];
        e->args[1 + ndim + i] = kj_check_convert(c, a[first_value + i], array->elem, node->loc,
                                                 "the value");
        ok = ok && e->args[1 + ndim + i];
    }
    kj_check_note_impure(c);
    return ok ? e : NULL;
}

/* grid(n) / gridsize(n) as an expression: n must be 1 (a let takes more apart). */
static KjIrExpr *check_grid(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    const char *name = n->lhs->name;
    int64_t count;
    if (!kj_check_grid_count(c, n, name, args[0], &count))
        return NULL;
    if (count != 1) {
        kj_error(c->diag, n->loc, "%s(%" PRId64 ") gives %" PRId64 " values; take them apart "
                 "with let %s = %s(%" PRId64 ");", name, count, count,
                 count == 2 ? "x, y" : "x, y, z", name, count);
        return NULL;
    }
    return kj_check_grid_component(c, b->id == KJ_BUILTIN_GRIDSIZE, 0, n->loc);
}

static KjIrExpr *check_syncthreads(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    c->cur->ir->uses_syncthreads = true;
    kj_check_note_impure(c);
    return kj_check_new_expr(c, KJ_IR_SYNCTHREADS, kj_type_void(), n->loc, 0);
}

/* ================================================================ the table */

/* How each rule of KJ_CALL_BUILTINS takes its arguments (KjCheckArgs). */
#define ARGS_check_complex KJ_CHECK_ARGS_VALUES
#define ARGS_check_len KJ_CHECK_ARGS_VALUES
#define ARGS_check_conj KJ_CHECK_ARGS_VALUES
#define ARGS_check_arg KJ_CHECK_ARGS_VALUES
#define ARGS_check_polar KJ_CHECK_ARGS_VALUES
#define ARGS_check_mulhi KJ_CHECK_ARGS_VALUES
#define ARGS_check_syncthreads KJ_CHECK_ARGS_VALUES
#define ARGS_check_grid KJ_CHECK_ARGS_EXPRS
#define ARGS_kj_check_exec KJ_CHECK_ARGS_EXPRS
#define ARGS_kj_check_print KJ_CHECK_ARGS_PRINT
#define ARGS_NULL KJ_CHECK_ARGS_VALUES
/* Whether a let may take a rule's call apart into its components
 * (let x, y = grid(2);, made by kj_check_grid_component; mma()'s two results,
 * kj_check_mma, is the one of KJ_EXEC_OPS that says so). */
#define APART_check_complex false
#define APART_check_len false
#define APART_check_conj false
#define APART_check_arg false
#define APART_check_polar false
#define APART_check_mulhi false
#define APART_check_syncthreads false
#define APART_check_grid true
#define APART_kj_check_print false
#define APART_NULL false

/* The rules of the math and atomics rows, and an atomic's count. */
static KjIrExpr *math_rule(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    return kj_check_math(c, n, b->math, args);
}

static KjIrExpr *atomic_rule(KjChecker *c, KjNode *n, const KjCheckBuiltin *b, KjIrExpr **args)
{
    return kj_check_atomic(c, n, b->atomic, args);
}

static bool atomic_count(KjChecker *c, KjNode *n, const KjCheckBuiltin *b)
{
    return kj_check_atomic_count(c, n, b->atomic);
}

static const KjCheckBuiltin call_builtins[] = {
#define X(id, name, min_args, max_args, where, rule) \
    {name, min_args, max_args, where, ARGS_##rule, rule, KJ_BUILTIN_##id, 0, APART_##rule},
    KJ_CALL_BUILTINS(X)
#undef X
#define X(id, name, barrier, min_args, max_args, form, nvvm) \
    {name, min_args, max_args, KJ_IN_KERNEL, ARGS_kj_check_exec, kj_check_exec, KJ_BUILTIN_EXEC, \
     KJ_EXEC_##id, KJ_EXEC_##id == KJ_EXEC_MMA},
    KJ_EXEC_OPS(X)
#undef X
#define X(row, text, arity, complex, libm, libmvec, lower)                                         \
    {.name = text, .min_args = arity, .max_args = arity, .where = KJ_IN_ANY,                      \
     .args = KJ_CHECK_ARGS_VALUES, .rule = math_rule, .id = KJ_BUILTIN_MATH, .math = KJ_MATH_##row},
    KJ_MATH_BUILTINS(X)
#undef X
/* an atomic's count rule asks for a kernel, naming it without "()" */
#define X(row, text, elements)                                                                     \
    {.name = text, .where = KJ_IN_ANY, .args = KJ_CHECK_ARGS_VALUES, .rule = atomic_rule,          \
     .id = KJ_BUILTIN_ATOMIC, .atomic = KJ_ATOMIC_##row, .count = atomic_count},
    KJ_ATOMIC_OPS(X)
#undef X
};

const KjCheckBuiltin *kj_check_builtin_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof call_builtins / sizeof *call_builtins; i++)
        if (strcmp(call_builtins[i].name, name) == 0)
            return &call_builtins[i];
    return NULL;
}
