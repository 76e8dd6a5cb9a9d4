/*
 * check_expr.c: the type rules of expressions, for the checker in check.c.
 *
 * Turns each AST expression into typed IR: literals stay untyped constants
 * until their context settles them (kj_check_convert), operators meet their
 * operands at a common type, `**` and the integer abs/min/max are lowered to
 * plain ops, casts, calls of user functions (which check their callee first,
 * through kj_check_function) and the built-ins: math, complex, len, atomics and
 * the kernel registers and grid().  An erroneous expression reports once and
 * comes back as NULL, which every rule passes on quietly.
 */
#include "kjit_compiler.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ============================================================ IR shorthands */

KjIrExpr *kj_check_new_expr(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, int n)
{
    return kj_ir_new_expr(c->arena, op, type, loc, n);
}

static KjIrExpr *unary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a)
{
    KjIrExpr *e = kj_check_new_expr(c, op, type, loc, 1);
    e->args[0] = a;
    return e;
}

static KjIrExpr *binary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
                           KjIrExpr *b)
{
    KjIrExpr *e = kj_check_new_expr(c, op, type, loc, 2);
    e->args[0] = a;
    e->args[1] = b;
    return e;
}

KjIrExpr *kj_check_int_const(KjChecker *c, const KjType *type, int64_t value, KjLoc loc)
{
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_CONST, type, loc, 0);
    e->const_int = (uint64_t)value;
    return e;
}

static KjIrExpr *float_const(KjChecker *c, const KjType *type, double value, KjLoc loc)
{
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_CONST, type, loc, 0);
    e->const_float = value;
    return e;
}

KjIrExpr *kj_check_var_ref(KjChecker *c, KjIrVar *var, KjLoc loc)
{
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_VAR, var->type, loc, 0);
    e->var = var;
    return e;
}

static KjIrExpr *cast_ir(KjChecker *c, KjIrExpr *e, const KjType *to)
{
    if (e->type == to)
        return e;
    return unary_ir(c, KJ_IR_CAST, to, e->loc, e);
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

static int expr_size(const KjIrExpr *e)
{
    int size = 1;
    for (int i = 0; i < e->arg_count; i++)
        size += expr_size(e->args[i]);
    return size;
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

static bool int_fits(int64_t v, const KjType *t)
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
static KjIrExpr *settle(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc)
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
        if (!int_fits(iv, to)) {
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
        KjIrExpr *k = float_const(c, to, value, e->loc);
        return k;
    }
    kj_error(c->diag, loc, "a number cannot be used as %s", kj_type_name(to));
    return NULL;
}

KjIrExpr *kj_check_settle_default(KjChecker *c, KjIrExpr *e)
{
    if (!kj_check_is_untyped(e))
        return e;
    return settle(c, e,
                  e->type->kind == KJ_TYPE_UNTYPED_INT ? kj_check_t_i64() : kj_check_t_f64(),
                  e->loc);
}

/* e converted implicitly to `to`: settled if untyped, widened with a CAST, or
 * an error naming `context` ("the argument 'x' of f", "the return value" ...). */
KjIrExpr *kj_check_convert(KjChecker *c, KjIrExpr *e, const KjType *to, KjLoc loc,
                           const char *context)
{
    if (!e || !to)
        return NULL;
    if (kj_check_is_untyped(e))
        return settle(c, e, to, loc);
    if (e->type == to)
        return e;
    if (kj_check_is_scalar(e->type) && kj_check_is_scalar(to) && widens(e->type, to))
        return cast_ir(c, e, to);
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

static int register_group_lookup(const char *name)
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
           register_group_lookup(name) >= 0 || math_lookup(name) >= 0 ||
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

/* The value of an untyped integer constant expression, for sizes and counts. */
bool kj_check_constant_int(const KjIrExpr *e, int64_t *out)
{
    if (!e || e->op != KJ_IR_CONST || e->type->kind != KJ_TYPE_UNTYPED_INT)
        return false;
    *out = (int64_t)e->const_int;
    return true;
}

/* ============================================================ expressions */

KjCheckFn *kj_check_find_function(KjChecker *c, const char *name)
{
    for (int i = 0; i < c->fns.count; i++) {
        KjCheckFn *info = c->fns.items[i];
        if (strcmp(info->decl->name, name) == 0)
            return info;
    }
    return NULL;
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

static bool loc_before(KjLoc a, KjLoc b)
{
    return a.line < b.line || (a.line == b.line && a.col < b.col);
}

/* A let or for in `node` that declares `name` after `use`, for the note that
 * explains an unknown name used before its declaration. */
static KjNode *find_declaration(KjNode *node, const char *name, KjLoc use)
{
    if (!node)
        return NULL;
    if ((node->kind == KJ_NODE_LET || node->kind == KJ_NODE_FOR) && node->name &&
        strcmp(node->name, name) == 0 && loc_before(use, node->loc))
        return node;
    for (int i = 0; i < node->body.count; i++) {
        KjNode *found = find_declaration(node->body.items[i], name, use);
        if (found)
            return found;
    }
    KjNode *parts[] = {node->then_body, node->else_body};
    for (int i = 0; i < 2; i++) {
        KjNode *found = find_declaration(parts[i], name, use);
        if (found)
            return found;
    }
    return NULL;
}

bool kj_check_is_poisoned(KjChecker *c, const KjIrVar *var)
{
    for (int i = 0; i < c->cur->poisoned.count; i++)
        if (c->cur->poisoned.items[i] == var)
            return true;
    return false;
}

KjIrExpr *kj_check_name(KjChecker *c, KjNode *n)
{
    KjCheckBinding *b = kj_check_lookup_local(c, n->name);
    if (b)
        return kj_check_is_poisoned(c, b->var) ? NULL : kj_check_var_ref(c, b->var, n->loc);
    const char *name = n->name;
    static const double constant_values[] = {
#define X(id, name, value) value,
        KJ_CONSTANT_BUILTINS(X)
#undef X
    };
    int constant = constant_lookup(name);
    if (constant >= 0)
        return float_const(c, kj_check_t_untyped_float(), constant_values[constant], n->loc);
    if (kj_check_is_kernel_constant(name))
        return kj_check_kernel_constant(c, n);
    KjCheckConst *user_constant = kj_check_find_const(c, name);
    if (user_constant)
        return kj_check_const_value(c, user_constant, n->loc);
    if (register_group_lookup(name) >= 0) {
        kj_error(c->diag, n->loc, "%s is a group of registers; use %s.x, %s.y or %s.z", name,
                 name, name, name);
        return NULL;
    }
    if (kj_type_from_name(name, strlen(name))) {
        kj_error(c->diag, n->loc, "%s is a type; to convert a value write %s(value)", name, name);
        return NULL;
    }
    if (kj_check_find_function(c, name) || math_lookup(name) >= 0 ||
        kj_check_is_builtin_name(name)) {
        kj_error(c->diag, n->loc, "'%s' is a function; call it with (...)", name);
        return NULL;
    }
    kj_error(c->diag, n->loc, "unknown name '%s'", name);
    KjNode *later = c->cur ? find_declaration(c->cur->info->decl->body, name, n->loc) : NULL;
    if (later)
        kj_note(c->diag, later->loc, "'%s' is declared later, here; declare it before its first "
                "use", name);
    return NULL;
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
    return float_const(c, kj_check_t_untyped_float(), v, loc);
}

/* Brings two operands of an arithmetic or comparison operator to one type
 * (untyped constants take the other side's type).  Returns the type, or NULL
 * after an error. */
static const KjType *unify(KjChecker *c, KjIrExpr **l, KjIrExpr **r, KjLoc loc, const char *op)
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
    KjIrExpr *square = binary_ir(c, KJ_IR_MUL, x->type, loc, half, kj_check_clone_expr(c, half));
    if (n % 2)
        square = binary_ir(c, KJ_IR_MUL, x->type, loc, square, kj_check_clone_expr(c, x));
    return square;
}

static KjIrExpr *one_of(KjChecker *c, const KjType *t, KjLoc loc)
{
    if (kj_type_is_int(t))
        return kj_check_int_const(c, t, 1, loc);
    return float_const(c, t, 1.0, loc);
}

enum { POW_CHAIN_MAX = 8, POW_CHAIN_NODES = 64 };

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
            return kj_type_is_complex(t) ? float_const(c, t, 1.0, loc) : one_of(c, t, loc);
        bool small = magnitude <= POW_CHAIN_MAX &&
                     expr_size(base) * magnitude <= POW_CHAIN_NODES &&
                     kj_check_expr_is_pure(c, base);
        if (small) {
            KjIrExpr *chain = power_chain(c, base, magnitude, loc);
            if (n < 0)
                chain = binary_ir(c, KJ_IR_DIV, t, loc,
                                  kj_type_is_complex(t) ? float_const(c, t, 1.0, loc)
                                                        : one_of(c, t, loc),
                                  chain);
            return chain;
        }
        if (kj_type_is_complex(t)) {
            KjIrExpr *e = binary_ir(c, KJ_IR_MATH, t, loc, base, float_const(c, t, (double)n, loc));
            e->math = KJ_MATH_POW;
            return e;
        }
        return binary_ir(c, KJ_IR_IPOW, t, loc, base,
                         kj_check_int_const(c, kj_check_t_i64(), n, loc));
    }
    if (exp->op == KJ_IR_CONST && exp->type->kind == KJ_TYPE_UNTYPED_FLOAT &&
        exp->const_float == 0.5) {
        const KjType *t = kj_check_is_untyped(base) ? kj_check_t_f64()
                          : kj_type_is_int(base->type) ? kj_check_t_f64() : base->type;
        base = kj_check_convert(c, base, t, loc, "the base of '**'");
        if (!base)
            return NULL;
        KjIrExpr *e = unary_ir(c, KJ_IR_MATH, t, loc, base);
        e->math = KJ_MATH_SQRT;
        return e;
    }
    if ((!kj_check_is_untyped(base) && kj_type_is_complex(base->type)) ||
        (!kj_check_is_untyped(exp) && kj_type_is_complex(exp->type))) {
        /* any other complex power: the complex pow, exp(w * log(z)) */
        const KjType *t = unify(c, &base, &exp, loc, "**");
        if (!t)
            return NULL;
        KjIrExpr *e = binary_ir(c, KJ_IR_MATH, t, loc, base, exp);
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
        return binary_ir(c, KJ_IR_IPOW, base->type, loc, base, exp);
    }
    if (int_exp && kj_type_is_int(base->type)) {
        exp = kj_check_settle_default(c, exp);
        return exp ? binary_ir(c, KJ_IR_IPOW, base->type, loc, base, exp) : NULL;
    }
    const KjType *t = unify(c, &base, &exp, loc, "**");
    if (!t)
        return NULL;
    if (kj_type_is_int(t)) {
        t = kj_check_t_f64();
        base = cast_ir(c, base, t);
        exp = cast_ir(c, exp, t);
    }
    KjIrExpr *e = binary_ir(c, KJ_IR_MATH, t, loc, base, exp);
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
        return binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
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
        return binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
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
        KjIrExpr *count = kj_check_is_untyped(r) ? settle(c, r, value->type, loc)
                                                 : cast_ir(c, r, value->type);
        return count ? binary_ir(c, binary_ir_op(op), value->type, loc, value, count) : NULL;
    }
    const KjType *t = unify(c, &l, &r, loc, spelling);
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
        return binary_ir(c, binary_ir_op(op), kj_check_t_bool(), loc, l, r);
    }
    return binary_ir(c, binary_ir_op(op), t, loc, l, r);
}

static KjIrExpr *check_unary(KjChecker *c, KjNode *n)
{
    /* -9223372036854775808 is the one literal whose magnitude is not an i64. */
    if (n->unary_op == KJ_UN_NEG && n->lhs && n->lhs->kind == KJ_NODE_INT_LIT &&
        n->lhs->int_value == (uint64_t)INT64_MAX + 1)
        return kj_check_int_const(c, kj_check_t_untyped_int(), INT64_MIN, n->loc);
    KjIrExpr *a = kj_check_expr(c, n->lhs);
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
                return float_const(c, a->type, -a->const_float, n->loc);
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
        return unary_ir(c, KJ_IR_NEG, a->type, n->loc, a);
    case KJ_UN_NOT:
        if (a->type != kj_check_t_bool()) {
            kj_error(c->diag, n->loc, "'!' needs a bool, not %s (compare instead: x != 0)",
                     kj_type_name(a->type));
            return NULL;
        }
        return unary_ir(c, KJ_IR_NOT, kj_check_t_bool(), n->loc, a);
    case KJ_UN_BITNOT:
        if (kj_check_is_untyped(a) && a->type->kind == KJ_TYPE_UNTYPED_INT)
            return kj_check_int_const(c, a->type, ~(int64_t)a->const_int, n->loc);
        if (!kj_type_is_int(a->type)) {
            kj_error(c->diag, n->loc, "'~' needs an integer, not %s", kj_type_name(a->type));
            return NULL;
        }
        return unary_ir(c, KJ_IR_BITNOT, a->type, n->loc, a);
    default:
        kj_unreachable();
    }
}

static KjIrExpr *check_ternary(KjChecker *c, KjNode *n)
{
    KjIrExpr *cond = kj_check_expr(c, n->cond);
    KjIrExpr *a = kj_check_expr(c, n->lhs);
    KjIrExpr *b = kj_check_expr(c, n->rhs);
    if (!cond || !a || !b)
        return NULL;
    if (cond->type != kj_check_t_bool()) {
        kj_error(c->diag, n->cond->loc, "the condition of '?:' must be bool, not %s",
                 kj_type_name(cond->type));
        return NULL;
    }
    /* An array is a place, not a value: the back end lowers arrays only from
     * variables, parameters and shared()/local(), never a choice between two. */
    if (kj_check_is_array(a->type) || kj_check_is_array(b->type)) {
        kj_error(c->diag, n->loc, "'?:' chooses between single values, not arrays (%s); index "
                 "each arm (c ? a[i] : b[i]), or use if/else with the array in each branch",
                 kj_type_name(kj_check_is_array(a->type) ? a->type : b->type));
        return NULL;
    }
    const KjType *t;
    if (a->type == b->type && !kj_check_is_untyped(a))
        t = a->type;
    else if (a->type == kj_check_t_bool() || b->type == kj_check_t_bool()) {
        kj_error(c->diag, n->loc, "the two arms of '?:' are %s and %s; they must have one type",
                 kj_type_name(a->type), kj_type_name(b->type));
        return NULL;
    } else if (!(t = unify(c, &a, &b, n->loc, "?:")))
        return NULL;
    if (t == kj_type_void()) {
        kj_error(c->diag, n->loc, "the arms of '?:' must have values");
        return NULL;
    }
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_SELECT, t, n->loc, 3);
    e->args[0] = cond;
    e->args[1] = a;
    e->args[2] = b;
    return e;
}

/* An index: any integer type, widened or converted to i64. */
static KjIrExpr *check_index_value(KjChecker *c, KjNode *n)
{
    KjIrExpr *i = kj_check_expr(c, n);
    if (!i)
        return NULL;
    if (kj_check_is_untyped(i)) {
        if (i->type->kind == KJ_TYPE_UNTYPED_INT && (int64_t)i->const_int < 0) {
            kj_error(c->diag, n->loc, "negative index %" PRId64 ": arrays are indexed from 0 and "
                     "there is no indexing from the end", (int64_t)i->const_int);
            return NULL;
        }
        return settle(c, i, kj_check_t_i64(), n->loc);
    }
    if (!kj_type_is_int(i->type)) {
        kj_error(c->diag, n->loc, "an index must be an integer, not %s", kj_type_name(i->type));
        return NULL;
    }
    return cast_ir(c, i, kj_check_t_i64());
}

/* a.shape[k] */
static KjIrExpr *check_shape(KjChecker *c, KjNode *n, KjIrExpr *array)
{
    if (n->args.count != 1) {
        kj_error(c->diag, n->loc, "shape takes one index: a.shape[k]");
        return NULL;
    }
    KjNode *k_node = n->args.items[0];
    KjIrExpr *k = kj_check_expr(c, k_node);
    if (!k || !array)
        return NULL;
    int64_t dim;
    if (!kj_check_constant_int(k, &dim)) {
        kj_error(c->diag, k_node->loc, "the index of shape must be a constant integer");
        return NULL;
    }
    if (dim < 0 || dim >= array->type->ndim) {
        kj_error(c->diag, k_node->loc, "shape[%" PRId64 "] of %s: the array has %d dimension%s",
                 dim, kj_type_name(array->type), array->type->ndim,
                 array->type->ndim == 1 ? "" : "s");
        return NULL;
    }
    KjIrExpr *e = unary_ir(c, KJ_IR_DIM, kj_check_t_i64(), n->loc, array);
    e->dim = (int)dim;
    return e;
}

KjIrExpr *kj_check_index(KjChecker *c, KjNode *n)
{
    KjNode *target = n->lhs;
    if (target->kind == KJ_NODE_MEMBER && strcmp(target->name, "shape") == 0) {
        KjIrExpr *array = kj_check_expr(c, target->lhs);
        if (array && !kj_check_is_array(array->type)) {
            kj_error(c->diag, target->loc, "shape belongs to arrays, not to %s",
                     kj_type_name(array->type));
            return NULL;
        }
        return check_shape(c, n, array);
    }
    KjIrExpr *array = kj_check_expr(c, target);
    KjIrExpr **indices = kj_arena_alloc(c->arena, sizeof *indices * (size_t)(n->args.count + 1));
    bool ok = array != NULL;
    for (int i = 0; i < n->args.count; i++) {
        indices[i] = check_index_value(c, n->args.items[i]);
        ok = ok && indices[i];
    }
    if (!ok)
        return NULL;
    if (!kj_check_is_array(array->type)) {
        kj_error(c->diag, n->loc, "only arrays can be indexed; this is %s",
                 kj_type_name(array->type));
        return NULL;
    }
    if (n->args.count != array->type->ndim) {
        kj_error(c->diag, n->loc, "%s needs %d ind%s, got %d", kj_type_name(array->type),
                 array->type->ndim, array->type->ndim == 1 ? "ex" : "ices", n->args.count);
        return NULL;
    }
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_LOAD, array->type->elem, n->loc, 1 + n->args.count);
    e->args[0] = array;
    for (int i = 0; i < n->args.count; i++)
        e->args[1 + i] = indices[i];
    return e;
}

static KjIrExpr *sreg(KjChecker *c, KjSpecialReg reg, KjLoc loc)
{
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_SREG, kj_check_t_i32(), loc, 0);
    e->sreg = reg;
    return e;
}

static KjIrExpr *check_member(KjChecker *c, KjNode *n)
{
    KjNode *target = n->lhs;
    if (target->kind == KJ_NODE_NAME && !kj_check_lookup_local(c, target->name)) {
        for (int g = 0; g < 4; g++) {
            if (strcmp(target->name, kernel_names[g]) != 0)
                continue;
            const char *axis = n->name;
            if (strlen(axis) != 1 || axis[0] < 'x' || axis[0] > 'z') {
                kj_error(c->diag, n->loc, "%s has .x, .y and .z, not .%s", target->name, axis);
                return NULL;
            }
            char what[32];
            snprintf(what, sizeof what, "%s.%s", target->name, axis);
            if (!kj_check_require_kernel(c, n->loc, what))
                return NULL;
            return sreg(c, (KjSpecialReg)(g * 3 + (axis[0] - 'x')), n->loc);
        }
    }
    KjIrExpr *value = kj_check_expr(c, target);
    if (!value)
        return NULL;
    if (kj_check_is_array(value->type) && strcmp(n->name, "shape") == 0) {
        kj_error(c->diag, n->loc, "shape needs an index: a.shape[k] (len(a) is a.shape[0])");
        return NULL;
    }
    bool real = strcmp(n->name, "real") == 0, imag = strcmp(n->name, "imag") == 0;
    if ((real || imag) && kj_type_is_complex(value->type))
        return unary_ir(c, real ? KJ_IR_REAL : KJ_IR_IMAG, kj_type_complex_part(value->type),
                        n->loc, value);
    if (real || imag)
        kj_error(c->diag, n->loc, ".%s belongs to complex numbers, not to %s", n->name,
                 kj_type_name(value->type));
    else
        kj_error(c->diag, n->loc, "%s has no member '%s'", kj_type_name(value->type), n->name);
    return NULL;
}

/* ----------------------------------------------------------------- calls */

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
                !int_fits((int64_t)t, to)) {
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
        return settle(c, a, to, n->loc);
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
    KjIrExpr *e = unary_ir(c, KJ_IR_CAST, to, n->loc, a);
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
    const KjType *part = unify(c, &a[0], &a[1], n->loc, name);
    if (!part)
        return NULL;
    if (kj_type_is_int(part))
        part = kj_check_t_f64();
    if (kj_type_is_half(part)) /* no c32: half parts widen to c64's */
        part = kj_type_scalar(KJ_TYPE_F32);
    a[0] = cast_ir(c, a[0], part);
    a[1] = cast_ir(c, a[1], part);
    const KjType *t = kj_type_scalar(part->kind == KJ_TYPE_F64 ? KJ_TYPE_C128 : KJ_TYPE_C64);
    return binary_ir(c, op, t, n->loc, a[0], a[1]);
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
        e->args[0] = binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[0],
                               kj_check_int_const(c, t, 0, loc));
        e->args[1] = unary_ir(c, KJ_IR_NEG, t, loc, kj_check_clone_expr(c, a[0]));
        e->args[2] = kj_check_clone_expr(c, a[0]);
    } else {
        /* min: b < a ? b : a;  max: a < b ? b : a (the first wins ties) */
        e->args[0] = fn == KJ_MATH_FMIN
                         ? binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[1], a[0])
                         : binary_ir(c, KJ_IR_LT, kj_check_t_bool(), loc, a[0], a[1]);
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
    if (arity == 2 && !(t = unify(c, &a[0], &a[1], n->loc, kj_math_names[fn])))
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
    return unary_ir(c, KJ_IR_CARG, kj_type_complex_part(a->type), n->loc, a);
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
    const KjType *t = unify(c, &a[0], &a[1], n->loc, "mulhi");
    if (!t)
        return NULL;
    if (!kj_type_is_int(t) || kj_type_int_bits(t) < 32) {
        kj_error(c->diag, n->loc, "mulhi() takes 32- or 64-bit integers, not %s",
                 kj_type_name(t));
        return NULL;
    }
    return binary_ir(c, KJ_IR_MULHI, t, n->loc, a[0], a[1]);
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
        return unary_ir(c, KJ_IR_CABS, kj_type_complex_part(a[0]->type), n->loc, a[0]);
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
    KjIrExpr *e = unary_ir(c, KJ_IR_DIM, kj_check_t_i64(), n->loc, a);
    e->dim = 0;
    return e;
}

static KjIrExpr *check_conj(KjChecker *c, KjNode *n)
{
    KjIrExpr *a;
    if (!check_args(c, n, &a))
        return NULL;
    if (kj_type_is_complex(a->type))
        return unary_ir(c, KJ_IR_CONJ, a->type, n->loc, a);
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

/* Component `axis` of grid(n) (absolute thread index) or gridsize(n) (threads
 * in the grid), computed in i64. */
KjIrExpr *kj_check_grid_component(KjChecker *c, bool size, int axis, KjLoc loc)
{
    const KjType *i64 = kj_check_t_i64();
    if (size)
        return binary_ir(c, KJ_IR_MUL, i64, loc, cast_ir(c, sreg(c, KJ_SREG_BDIM_X + axis, loc), i64),
                         cast_ir(c, sreg(c, KJ_SREG_GDIM_X + axis, loc), i64));
    KjIrExpr *block = binary_ir(c, KJ_IR_MUL, i64, loc,
                                cast_ir(c, sreg(c, KJ_SREG_BID_X + axis, loc), i64),
                                cast_ir(c, sreg(c, KJ_SREG_BDIM_X + axis, loc), i64));
    return binary_ir(c, KJ_IR_ADD, i64, loc, block,
                     cast_ir(c, sreg(c, KJ_SREG_TID_X + axis, loc), i64));
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
            e->args[1] = kj_check_is_untyped(a[1]) ? settle(c, a[1], kj_check_t_i64(), n->loc)
                                                   : cast_ir(c, a[1], kj_check_t_i64());
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

static KjIrExpr *check_user_call(KjChecker *c, KjNode *n, KjCheckFn *callee);

static KjIrExpr *check_call(KjChecker *c, KjNode *n)
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

KjIrExpr *kj_check_expr(KjChecker *c, KjNode *n)
{
    if (!n)
        return NULL;
    switch (n->kind) {
    case KJ_NODE_INT_LIT:
        if (n->int_value > (uint64_t)INT64_MAX) /* only u64 holds it */
            return kj_check_int_const(c, kj_type_scalar(KJ_TYPE_U64), (int64_t)n->int_value,
                                      n->loc);
        return kj_check_int_const(c, kj_check_t_untyped_int(), (int64_t)n->int_value, n->loc);
    case KJ_NODE_FLOAT_LIT:
        return float_const(c, kj_check_t_untyped_float(), n->float_value, n->loc);
    case KJ_NODE_BOOL_LIT:
        return kj_check_int_const(c, kj_check_t_bool(), n->int_value != 0, n->loc);
    case KJ_NODE_NAME:
        return kj_check_name(c, n);
    case KJ_NODE_UNARY:
        return check_unary(c, n);
    case KJ_NODE_BINARY: {
        KjIrExpr *l = kj_check_expr(c, n->lhs);
        KjIrExpr *r = kj_check_expr(c, n->rhs);
        return kj_check_binary_values(c, n->binary_op, l, r, n->loc);
    }
    case KJ_NODE_TERNARY:
        return check_ternary(c, n);
    case KJ_NODE_CALL:
        if (!n->lhs || n->lhs->kind != KJ_NODE_NAME) {
            kj_error(c->diag, n->loc, "only a function or a type name can be called");
            return NULL;
        }
        return check_call(c, n);
    case KJ_NODE_INDEX:
        return kj_check_index(c, n);
    case KJ_NODE_MEMBER:
        return check_member(c, n);
    case KJ_NODE_STRING_LIT:
        kj_error(c->diag, n->loc, "a string can only be printed: print(\"text\", x)");
        return NULL;
    default:
        kj_error(c->diag, n->loc, "expected an expression");
        return NULL;
    }
}
