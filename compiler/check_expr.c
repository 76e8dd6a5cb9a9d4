/*
 * check_expr.c: the type rules of expressions, for the checker in check.c.
 *
 * Turns each AST expression into typed IR.  This file holds what every rule
 * shares and the expressions that are neither operators nor calls: the IR
 * shorthands, the implicit typing (literals stay untyped constants until their
 * context settles them, kj_check_convert; conversions only widen), names,
 * indexing and a.shape[k], members (threadIdx.x, z.real), the ternary, and
 * kj_check_expr, which dispatches on the node.  Operators are in
 * check_operator.c, casts, built-ins and calls in check_call.c.  An erroneous
 * expression reports once and comes back as NULL, which every rule passes on
 * quietly.
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

KjIrExpr *kj_check_unary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a)
{
    KjIrExpr *e = kj_check_new_expr(c, op, type, loc, 1);
    e->args[0] = a;
    return e;
}

KjIrExpr *kj_check_binary_ir(KjChecker *c, KjIrOp op, const KjType *type, KjLoc loc, KjIrExpr *a,
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

KjIrExpr *kj_check_float_const(KjChecker *c, const KjType *type, double value, KjLoc loc)
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

/* ==================================================================== names */

KjCheckFn *kj_check_find_function(KjChecker *c, const char *name)
{
    for (int i = 0; i < c->fns.count; i++) {
        KjCheckFn *info = c->fns.items[i];
        if (strcmp(info->decl->name, name) == 0)
            return info;
    }
    return NULL;
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
    double constant_value;
    if (kj_check_builtin_constant(name, &constant_value))
        return kj_check_float_const(c, kj_check_t_untyped_float(), constant_value, n->loc);
    if (kj_check_is_kernel_constant(name))
        return kj_check_kernel_constant(c, n);
    KjCheckConst *user_constant = kj_check_find_const(c, name);
    if (user_constant)
        return kj_check_const_value(c, user_constant, n->loc);
    if (kj_check_register_group(name) >= 0) {
        kj_error(c->diag, n->loc, "%s is a group of registers; use %s.x, %s.y or %s.z", name,
                 name, name, name);
        return NULL;
    }
    if (kj_type_from_name(name, strlen(name))) {
        kj_error(c->diag, n->loc, "%s is a type; to convert a value write %s(value)", name, name);
        return NULL;
    }
    if (kj_check_find_function(c, name) || kj_check_is_builtin_name(name)) {
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

/* ======================================== the ternary, indexing and members */

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
    } else if (!(t = kj_check_unify(c, &a, &b, n->loc, "?:")))
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
        return kj_check_settle(c, i, kj_check_t_i64(), n->loc);
    }
    if (!kj_type_is_int(i->type)) {
        kj_error(c->diag, n->loc, "an index must be an integer, not %s", kj_type_name(i->type));
        return NULL;
    }
    return kj_check_cast_ir(c, i, kj_check_t_i64());
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
    KjIrExpr *e = kj_check_unary_ir(c, KJ_IR_DIM, kj_check_t_i64(), n->loc, array);
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

static KjIrExpr *check_member(KjChecker *c, KjNode *n)
{
    KjNode *target = n->lhs;
    int group = target->kind == KJ_NODE_NAME && !kj_check_lookup_local(c, target->name)
                    ? kj_check_register_group(target->name)
                    : -1;
    if (group >= 0) {
        const char *axis = n->name;
        if (strlen(axis) != 1 || axis[0] < 'x' || axis[0] > 'z') {
            kj_error(c->diag, n->loc, "%s has .x, .y and .z, not .%s", target->name, axis);
            return NULL;
        }
        char what[32];
        snprintf(what, sizeof what, "%s.%s", target->name, axis);
        if (!kj_check_require_kernel(c, n->loc, what))
            return NULL;
        return kj_check_sreg(c, (KjSpecialReg)(group * 3 + (axis[0] - 'x')), n->loc);
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
        return kj_check_unary_ir(c, real ? KJ_IR_REAL : KJ_IR_IMAG,
                                 kj_type_complex_part(value->type), n->loc, value);
    if (real || imag)
        kj_error(c->diag, n->loc, ".%s belongs to complex numbers, not to %s", n->name,
                 kj_type_name(value->type));
    else
        kj_error(c->diag, n->loc, "%s has no member '%s'", kj_type_name(value->type), n->name);
    return NULL;
}

/* ================================================================= dispatch */

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
        return kj_check_float_const(c, kj_check_t_untyped_float(), n->float_value, n->loc);
    case KJ_NODE_BOOL_LIT:
        return kj_check_int_const(c, kj_check_t_bool(), n->int_value != 0, n->loc);
    case KJ_NODE_NAME:
        return kj_check_name(c, n);
    case KJ_NODE_UNARY:
        return kj_check_unary(c, n);
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
        return kj_check_call(c, n);
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
