/*
 * check_call.c: the type rules of calls, for the checker (check_expr.c
 * dispatches to them).
 *
 * A call names a type (a cast), a math function, an atomic, a built-in of
 * KJ_CALL_BUILTINS (whose rules, complex, len, conj, arg, polar, mulhi, grid
 * and syncthreads, are here; print and the execution-model built-ins have
 * files of their own) or a user function, which is checked first if it has
 * not been (kj_check_function).  The tables of built-in names are here too,
 * for the names user functions may not take.
 */
#include "kjit_compiler.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ============================================================== built-ins */

static const char *const kernel_names[] = {
#define X(name) name,
    KJ_REGISTER_GROUPS(X)
#undef X
};

static const char *const atomic_names[KJ_ATOMIC_COUNT] = {
#define X(id, name, elements) name,
    KJ_ATOMIC_OPS(X)
#undef X
};

static const KjAtomicElements atomic_elements[KJ_ATOMIC_COUNT] = {
#define X(id, name, elements) elements,
    KJ_ATOMIC_OPS(X)
#undef X
};

typedef struct Builtin {
    const char *name;
    int min_args, max_args;
    KjBuiltinWhere where;
    KjIrExpr *(*rule)(KjChecker *c, KjNode *n); /* NULL: never called as an expression */
} Builtin;

static KjIrExpr *check_complex(KjChecker *c, KjNode *n);
static KjIrExpr *check_len(KjChecker *c, KjNode *n);
static KjIrExpr *check_conj(KjChecker *c, KjNode *n);
static KjIrExpr *check_arg(KjChecker *c, KjNode *n);
static KjIrExpr *check_polar(KjChecker *c, KjNode *n);
static KjIrExpr *check_mulhi(KjChecker *c, KjNode *n);
static KjIrExpr *check_grid(KjChecker *c, KjNode *n);
static KjIrExpr *check_syncthreads(KjChecker *c, KjNode *n);

static const Builtin call_builtins[] = {
#define X(id, name, min_args, max_args, where, rule) {name, min_args, max_args, where, rule},
    KJ_CALL_BUILTINS(X)
#undef X
};

static const char *const constant_names[] = {
#define X(id, name, value) name,
    KJ_CONSTANT_BUILTINS(X)
#undef X
};

static const Builtin *builtin_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof call_builtins / sizeof *call_builtins; i++)
        if (strcmp(call_builtins[i].name, name) == 0)
            return &call_builtins[i];
    return NULL;
}

static int constant_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof constant_names / sizeof *constant_names; i++)
        if (strcmp(constant_names[i], name) == 0)
            return (int)i;
    return -1;
}

/* The value of the built-in constant `name` (pi, e, inf, nan); false if it is none. */
bool kj_check_builtin_constant(const char *name, double *value)
{
    static const double constant_values[] = {
#define X(id, name, value) value,
        KJ_CONSTANT_BUILTINS(X)
#undef X
    };
    int constant = constant_lookup(name);
    if (constant < 0)
        return false;
    *value = constant_values[constant];
    return true;
}

/* The index of the register group `name` in KJ_REGISTER_GROUPS, or -1. */
int kj_check_register_group(const char *name)
{
    for (size_t i = 0; i < sizeof kernel_names / sizeof *kernel_names; i++)
        if (strcmp(kernel_names[i], name) == 0)
            return (int)i;
    return -1;
}

static int math_lookup(const char *name)
{
    for (int i = 0; i < KJ_MATH_COUNT; i++)
        if (strcmp(kj_math_names[i], name) == 0)
            return i;
    return -1;
}

static int atomic_lookup(const char *name)
{
    for (int i = 0; i < KJ_ATOMIC_COUNT; i++)
        if (strcmp(atomic_names[i], name) == 0)
            return i;
    return -1;
}

/* Names a user function may not take. */
bool kj_check_is_builtin_name(const char *name)
{
    return builtin_lookup(name) || constant_lookup(name) >= 0 ||
           kj_check_register_group(name) >= 0 || math_lookup(name) >= 0 ||
           atomic_lookup(name) >= 0 || kj_type_from_name(name, strlen(name)) != NULL ||
           kj_check_is_kernel_constant(name);
}

static bool in_kernel(KjChecker *c)
{
    return c->cur && c->cur->ir->kind == KJ_IR_FN_KERNEL;
}

/* A kernel built-in is allowed in kernels, and in plain functions, which it
 * makes device functions (check.c's kj_check_device_use). */
bool kj_check_require_kernel(KjChecker *c, KjLoc loc, const char *what)
{
    if (in_kernel(c))
        return true;
    if (c->cur && c->cur->info->decl->kind == KJ_FN_GUVECTORIZE) {
        kj_error(c->diag, loc, "%s is only available in kernels and the plain functions they "
                 "call; '%s' is @guvectorize", what, c->cur->ir->name);
        return false;
    }
    if (c->cur && c->cur->ir->kind == KJ_IR_FN_PLAIN) {
        kj_check_device_use(c, what, loc);
        return true;
    }
    if (c->cur && c->cur->ir->kind == KJ_IR_FN_SCALAR)
        kj_error(c->diag, loc, "%s is only available in kernels and the plain functions they "
                 "call; '%s' is @vectorize", what, c->cur->ir->name);
    else
        kj_error(c->diag, loc, "%s is only available in kernels and the plain functions they "
                 "call", what);
    return false;
}

/* ==================================================================== calls */

bool kj_check_arg_count_is(KjChecker *c, KjNode *n, const char *name, int low, int high)
{
    int count = n->args.count;
    if (count >= low && count <= high)
        return true;
    if (low == high)
        kj_error(c->diag, n->loc, "%s takes %d argument%s, got %d", name, low, low == 1 ? "" : "s",
                 count);
    else
        kj_error(c->diag, n->loc, "%s takes %d to %d arguments, got %d", name, low, high, count);
    return false;
}

/* Checks every argument; false if any is an error. */
static bool check_args(KjChecker *c, KjNode *n, KjIrExpr **out)
{
    bool ok = true;
    for (int i = 0; i < n->args.count; i++) {
        out[i] = kj_check_expr(c, n->args.items[i]);
        if (out[i] && out[i]->type == kj_type_void()) {
            kj_error(c->diag, ((KjNode *)n->args.items[i])->loc,
                     "this call returns nothing; it cannot be an argument");
            out[i] = NULL;
        }
        ok = ok && out[i];
    }
    return ok;
}

static KjIrExpr *check_cast(KjChecker *c, KjNode *n, const KjType *to)
{
    if (!kj_check_arg_count_is(c, n, kj_type_name(to), 1, 1))
        return NULL;
    KjIrExpr *a;
    if (!check_args(c, n, &a))
        return NULL;
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
static KjIrExpr *check_two_parts(KjChecker *c, KjNode *n, const char *name, KjIrOp op)
{
    KjIrExpr *a[2];
    if (!check_args(c, n, a))
        return NULL;
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

static KjIrExpr *check_complex(KjChecker *c, KjNode *n)
{
    return check_two_parts(c, n, "complex", KJ_IR_COMPLEX);
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
static KjIrExpr *check_arg(KjChecker *c, KjNode *n)
{
    KjIrExpr *a;
    if (!check_args(c, n, &a))
        return NULL;
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
static KjIrExpr *check_polar(KjChecker *c, KjNode *n)
{
    return check_two_parts(c, n, "polar", KJ_IR_POLAR);
}

/* mulhi(a, b): the high half of the double-width product of two 32- or
 * 64-bit integers of one signedness (Philox's multiply; CUDA's __umulhi). */
static KjIrExpr *check_mulhi(KjChecker *c, KjNode *n)
{
    KjIrExpr *a[2];
    if (!check_args(c, n, a))
        return NULL;
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

static KjIrExpr *check_math(KjChecker *c, KjNode *n, KjMathFn fn)
{
    const char *name = kj_math_names[fn];
    int arity = kj_math_arity[fn];
    if (!kj_check_arg_count_is(c, n, name, arity, arity))
        return NULL;
    KjIrExpr *a[3];
    if (!check_args(c, n, a))
        return NULL;
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

static KjIrExpr *check_len(KjChecker *c, KjNode *n)
{
    KjIrExpr *a;
    if (!check_args(c, n, &a))
        return NULL;
    if (!kj_check_is_array(a->type)) {
        kj_error(c->diag, n->loc, "len() takes an array, not %s", kj_type_name(a->type));
        return NULL;
    }
    KjIrExpr *e = kj_check_unary_ir(c, KJ_IR_DIM, kj_check_t_i64(), n->loc, a);
    e->dim = 0;
    return e;
}

static KjIrExpr *check_conj(KjChecker *c, KjNode *n)
{
    KjIrExpr *a;
    if (!check_args(c, n, &a))
        return NULL;
    if (kj_type_is_complex(a->type))
        return kj_check_unary_ir(c, KJ_IR_CONJ, a->type, n->loc, a);
    if (kj_check_is_untyped(a) || kj_check_is_real(a->type))
        return a; /* the conjugate of a real number is itself */
    kj_error(c->diag, n->loc, "conj() takes a number, not %s", kj_type_name(a->type));
    return NULL;
}

/* grid(n) / gridsize(n): the count must be a constant 1..3. */
bool kj_check_grid_count(KjChecker *c, KjNode *n, const char *name, int64_t *count)
{
    if (!kj_check_arg_count_is(c, n, name, 1, 1))
        return false;
    KjIrExpr *a = kj_check_expr(c, n->args.items[0]);
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
static KjIrExpr *check_atomic(KjChecker *c, KjNode *n, KjAtomicOp op)
{
    const char *name = atomic_names[op];
    int values = op == KJ_ATOMIC_CAS ? 2 : 1;
    KjNode *first = n->args.count > 0 ? n->args.items[0] : NULL;
    bool element = first && first->kind == KJ_NODE_INDEX;
    int count = values + (element ? 1 : 2);
    if (!kj_check_require_kernel(c, n->loc, name))
        return NULL;
    if (n->args.count != count) {
        kj_error(c->diag, n->loc, "%s takes %d arguments, got %d (%s)", name, count,
                 n->args.count,
                 element ? (values == 2 ? "the element, the expected value and the new one"
                                        : "the element and the value")
                         : (values == 2 ? "the array, the index, the expected value and the "
                                          "new one"
                                        : "the array, the index and the value"));
        return NULL;
    }
    KjIrExpr *a[4];
    if (!check_args(c, n, a))
        return NULL;
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
static KjIrExpr *check_grid(KjChecker *c, KjNode *n)
{
    const char *name = n->lhs->name;
    int64_t count;
    if (!kj_check_grid_count(c, n, name, &count))
        return NULL;
    if (count != 1) {
        kj_error(c->diag, n->loc, "%s(%" PRId64 ") gives %" PRId64 " values; take them apart "
                 "with let %s = %s(%" PRId64 ");", name, count, count,
                 count == 2 ? "x, y" : "x, y, z", name, count);
        return NULL;
    }
    return kj_check_grid_component(c, strcmp(name, "gridsize") == 0, 0, n->loc);
}

static KjIrExpr *check_syncthreads(KjChecker *c, KjNode *n)
{
    c->cur->ir->uses_syncthreads = true;
    kj_check_note_impure(c);
    return kj_check_new_expr(c, KJ_IR_SYNCTHREADS, kj_type_void(), n->loc, 0);
}

/* A call of a KJ_CALL_BUILTINS entry: where it may appear, its argument
 * count, then its rule. */
static KjIrExpr *check_builtin_call(KjChecker *c, KjNode *n, const Builtin *b)
{
    char what[48];
    snprintf(what, sizeof what, "%s()", b->name);
    if ((b->where == KJ_IN_KERNEL || b->where == KJ_IN_LET) &&
        !kj_check_require_kernel(c, n->loc, what))
        return NULL;
    if (b->where == KJ_IN_LET) {
        kj_error(c->diag, n->loc, "%s() makes an array for a let: let buffer = %s(f32, 256);",
                 b->name, b->name);
        return NULL;
    }
    if (b->where == KJ_IN_FOR) {
        kj_error(c->diag, n->loc, "%s() only appears in a for loop: for i in range(n) { }",
                 b->name);
        return NULL;
    }
    if (!kj_check_arg_count_is(c, n, b->name, b->min_args, b->max_args))
        return NULL;
    return b->rule(c, n);
}

/* A function is visible in its own file and in the files that import its file. */
static bool visible_from(KjChecker *c, KjCheckFn *fn)
{
    KjCheckFile *here = kj_check_current_file(c);
    if (!here || fn->file == here)
        return true;
    for (int i = 0; i < here->imports.count; i++)
        if (here->imports.items[i] == fn->file)
            return true;
    return false;
}

static KjIrExpr *check_user_call(KjChecker *c, KjNode *n, KjCheckFn *callee);

KjIrExpr *kj_check_call(KjChecker *c, KjNode *n)
{
    const char *name = n->lhs->name;
    if (kj_check_lookup_local(c, name)) {
        kj_error(c->diag, n->loc, "'%s' is a variable, not a function", name);
        return NULL;
    }
    const KjType *cast_to = kj_type_from_name(name, strlen(name));
    if (cast_to)
        return check_cast(c, n, cast_to);
    int math = math_lookup(name);
    if (math >= 0)
        return check_math(c, n, (KjMathFn)math);
    int atomic = atomic_lookup(name);
    if (atomic >= 0)
        return check_atomic(c, n, (KjAtomicOp)atomic);
    const Builtin *builtin = builtin_lookup(name);
    if (builtin)
        return check_builtin_call(c, n, builtin);
    if (constant_lookup(name) >= 0 || kj_check_find_const(c, name)) {
        kj_error(c->diag, n->loc, "'%s' is a constant, not a function", name);
        return NULL;
    }
    KjCheckFn *callee = kj_check_find_function(c, name);
    if (!callee) {
        kj_error(c->diag, n->loc, "unknown function '%s'", name);
        return NULL;
    }
    return check_user_call(c, n, callee);
}

static KjIrExpr *check_user_call(KjChecker *c, KjNode *n, KjCheckFn *callee)
{
    const char *name = callee->decl->name;
    if (!visible_from(c, callee)) {
        kj_error(c->diag, n->loc, "'%s' is defined in %s, which this file does not import", name,
                 callee->file->ast->src->path);
        return NULL;
    }
    if (callee->decl->kind == KJ_FN_KERNEL) {
        kj_error(c->diag, n->loc, "'%s' is a @kernel; kernels are launched from the host, not "
                 "called", name);
        kj_note(c->diag, callee->decl->loc, "'%s' is declared here", name);
        return NULL;
    }
    if ((callee->decl->kind == KJ_FN_VECTORIZE || callee->decl->kind == KJ_FN_REDUCE ||
         callee->decl->kind == KJ_FN_GUVECTORIZE) &&
        callee->decl->signature_count > 1) {
        kj_error(c->diag, n->loc, "'%s' has %d signatures, so it cannot be called as a %s "
                 "function; write a plain fn for that", name, callee->decl->signature_count,
                 callee->decl->kind == KJ_FN_GUVECTORIZE ? "plain" : "scalar");
        kj_note(c->diag, callee->decl->loc, "'%s' is declared here", name);
        return NULL;
    }
    KjIrExpr **args = kj_arena_alloc(c->arena, sizeof *args * (size_t)(n->args.count + 1));
    bool ok = check_args(c, n, args);
    if (callee->bad)
        return NULL;
    if (callee->state == KJ_CHECK_FN_CHECKING) {
        KjBuf chain = {0};
        int start = 0;
        for (int i = 0; i < c->stack.count; i++)
            if (c->stack.items[i] == callee)
                start = i;
        for (int i = start; i < c->stack.count; i++)
            kj_buf_printf(&chain, "%s -> ", ((KjCheckFn *)c->stack.items[i])->decl->name);
        kj_buf_printf(&chain, "%s", name);
        kj_error(c->diag, n->loc, "recursion is not allowed: %s", chain.data);
        kj_buf_free(&chain);
        return NULL;
    }
    if (callee->state == KJ_CHECK_FN_UNCHECKED && c->stack.count >= KJ_MAX_CALL_DEPTH) {
        /* checking a callee before its caller recurses: bounded here */
        kj_error(c->diag, n->loc, "calls nested too deeply: this call starts a chain of more "
                 "than %d calls", KJ_MAX_CALL_DEPTH);
        return NULL;
    }
    if (callee->state == KJ_CHECK_FN_UNCHECKED)
        kj_check_function(c, callee);
    if (callee->bad || callee->entry->variants.count != 1)
        return NULL;
    KjIrFunction *target = callee->entry->variants.items[0];
    if (n->args.count != target->param_count) {
        kj_error(c->diag, n->loc, "'%s' takes %d argument%s, got %d", name, target->param_count,
                 target->param_count == 1 ? "" : "s", n->args.count);
        kj_note(c->diag, callee->decl->loc, "'%s' is declared here", name);
        return NULL;
    }
    if (!ok)
        return NULL;
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_CALL, target->ret, n->loc, n->args.count);
    e->callee = target;
    /* The callee's local() arrays (and its callees') are on this thread's
     * stack while it runs: the most any call takes counts toward ours. */
    if (target->local_bytes > c->cur->call_local_bytes) {
        c->cur->call_local_bytes = target->local_bytes;
        c->cur->call_local_loc = n->loc;
    }
    if (target->call_depth + 1 > c->cur->ir->call_depth) {
        if (target->call_depth + 1 > KJ_MAX_CALL_DEPTH) {
            kj_error(c->diag, n->loc, "calls nested too deeply: this call starts a chain of more "
                     "than %d calls", KJ_MAX_CALL_DEPTH);
            return NULL;
        }
        c->cur->ir->call_depth = target->call_depth + 1;
    }
    for (int i = 0; i < n->args.count; i++) {
        char context[160];
        snprintf(context, sizeof context, "argument %d ('%s') of %s", i + 1,
                 target->params[i]->name, name);
        e->args[i] = kj_check_convert(c, args[i], target->params[i]->type,
                                      ((KjNode *)n->args.items[i])->loc, context);
        ok = ok && e->args[i];
    }
    if (callee->impure)
        kj_check_note_impure(c);
    if (ok && target->device_use && !kj_check_device_call(c, target, n->loc))
        return NULL;
    return ok ? e : NULL;
}

