/*
 * check.c: name resolution and type checking, from the AST to the typed IR.
 *
 * Needs: parsed files without syntax errors (the main file and, through the
 * module loader, everything it imports).
 * Guarantees: either errors in the diag and NULL, or a module in which every
 * expression has a settled type (no untyped literal is left), every implicit
 * conversion is an explicit CAST, `**`, grid() and the integer abs/min/max are
 * lowered to plain ops, and module->functions lists callees before callers.
 *
 * Function bodies are checked on demand: a call to a function that is not
 * checked yet checks it first, so the order of module->functions comes out
 * right by itself and the chain of functions being checked is the chain a
 * recursion error names.  Statements are checked one by one; an erroneous
 * expression comes back as NULL, which every rule passes on quietly, so that
 * one mistake gives one error and the next statement is still checked.
 *
 * This file is the top of the checker (checker.h draws the stack): the entry
 * point and the work above expressions: statements, constants, function
 * declarations and signatures, the on-demand checking of bodies (handed down
 * to check_expr.c as KjChecker.check_function), and the module.  Expressions
 * and calls are in check_expr.c, names and scopes in check_scope.c.
 */
#include "checker.h"

#include <inttypes.h>
#include <string.h>

/* ============================================================= statements */

static void emit(KjChecker *c, KjIrStmt *s)
{
    kj_vec_push(c->arena, c->cur->out, s);
}

static bool check_stmt(KjChecker *c, KjNode *n);

/* Checks the statements of a block into `out` in a new scope.  Statements
 * after one that never falls through are checked but left out of the IR.
 * Returns whether control can reach the end of the block. */
static bool check_block_into(KjChecker *c, KjNode *block, KjVec *out, KjIrVar *bind,
                             KjLoc bind_loc)
{
    KjCheckScope scope;
    kj_check_push_scope(c, &scope);
    if (bind) {
        KjCheckBinding *b = kj_arena_alloc(c->arena, sizeof *b);
        *b = (KjCheckBinding){bind->name, bind, bind_loc};
        kj_vec_push(c->arena, &scope.bindings, b);
    }
    KjVec *saved = c->cur->out;
    KjVec dead = {0};
    c->cur->out = out;
    bool reachable = true;
    for (int i = 0; block && i < block->body.count; i++) {
        if (!reachable)
            c->cur->out = &dead;
        if (!check_stmt(c, block->body.items[i]))
            reachable = false;
    }
    c->cur->out = saved;
    kj_check_pop_scope(c);
    return reachable;
}

static KjIrStmt *new_block(KjChecker *c, KjLoc loc)
{
    return kj_ir_new_stmt(c->arena, KJ_IR_STMT_BLOCK, loc);
}

static KjIrExpr *check_condition(KjChecker *c, KjNode *n, const char *what)
{
    KjIrExpr *cond = kj_check_expr(c, n);
    if (cond && cond->type != kj_check_t_bool()) {
        kj_error(c->diag, n->loc, "the condition of %s must be bool, not %s%s", what,
                 kj_type_name(cond->type),
                 kj_type_is_numeric(cond->type) || kj_check_is_untyped(cond)
                     ? " (compare: x != 0)"
                     : "");
        return NULL;
    }
    return cond;
}

/* let x = shared(T, n[, m]) / local(T, n[, m]): static arrays, a kernel's
 * block-wide ones and a thread's own (in kernels and plain functions);
 * let x = shared(T): the launch's dynamic shared memory as a T[].
 * shared() belongs to the kernel itself: a device function would need a slice
 * of every calling kernel's shared block at one offset, so it takes the array
 * as a parameter instead. */
/* A size of local() that is not a constant: in a kernel, one the launch
 * gives (local_size.c); reported at loc when it is not. */
static bool launch_size(KjChecker *c, const KjIrExpr *size, KjLoc loc)
{
    if (c->cur->ir->kind != KJ_IR_FN_KERNEL) {
        kj_error(c->diag, loc, "the sizes of local() in the plain function '%s' must be constant "
                 "integers; only a kernel's local() may take its size from the launch (a "
                 "parameter of the kernel)", c->cur->ir->name);
        return false;
    }
    const KjIrExpr *bad = kj_local_size_refusal(size);
    if (bad) {
        char what[160];
        if (bad->op == KJ_IR_VAR)
            snprintf(what, sizeof what, "'%s' is a variable of the kernel, not a parameter",
                     bad->var->name);
        else if (bad->op == KJ_IR_SREG)
            snprintf(what, sizeof what, "%s differs between threads",
                     kj_special_reg_names[bad->sreg]);
        else if (bad->op == KJ_IR_LOAD)
            snprintf(what, sizeof what, "a value loaded from an array is not known at launch");
        else
            snprintf(what, sizeof what, "this %s is not one of them",
                     kj_type_is_int(bad->type) ? "expression" : kj_type_name(bad->type));
        kj_error(c->diag, bad->loc, "a local() sized at launch takes constants, integer "
                 "parameters of the kernel and extents of its array parameters, with + - * / %%, "
                 "min, max and integer conversions: %s", what);
        return false;
    }
    return true;
}

static KjIrExpr *check_alloc(KjChecker *c, KjNode *call, const KjCheckBuiltin *b)
{
    bool shared = b->id == KJ_BUILTIN_SHARED;
    const char *name = b->name;
    if (shared && c->cur && c->cur->ir->kind == KJ_IR_FN_PLAIN) {
        kj_error(c->diag, call->loc, "shared() is declared in the kernel itself, not in the plain "
                 "function '%s'; declare it in the kernel and pass the array as an argument",
                 c->cur->ir->name);
        return NULL;
    }
    /* local() is stack memory: any plain function may have it */
    bool plain = c->cur && c->cur->ir->kind == KJ_IR_FN_PLAIN;
    if (!shared && !plain && !(c->cur && c->cur->ir->kind == KJ_IR_FN_KERNEL)) {
        kj_error(c->diag, call->loc, "local() is only available in kernels and plain functions%s%s%s",
                 c->cur ? "; '" : "", c->cur ? c->cur->ir->name : "",
                 c->cur ? "' is @vectorize" : "");
        return NULL;
    }
    if ((shared && !kj_check_require_kernel(c, call->loc, "shared()")) ||
        !kj_check_arg_count_is(c, call, name, b->min_args, b->max_args))
        return NULL;
    KjNode *type_node = call->args.items[0];
    const KjType *elem = type_node->kind == KJ_NODE_NAME
                             ? kj_type_from_name(type_node->name, strlen(type_node->name))
                             : NULL;
    if (!elem) {
        kj_error(c->diag, type_node->loc, "the first argument of %s() is an element type, such as "
                 "f32", name);
        return NULL;
    }
    if (call->args.count == 1) {
        /* Sized at launch (kjit run --shared-bytes, kjit_launch_ex). */
        KjIrExpr *e = kj_check_new_expr(c, KJ_IR_DYNAMIC_SHARED, kj_type_array(elem, 1),
                                        call->loc, 0);
        e->alloc_elem = elem;
        c->cur->ir->uses_dynamic_shared = true;
        return e;
    }
    int ndim = call->args.count - 1;
    KjIrExpr *e = kj_check_new_expr(c, shared ? KJ_IR_SHARED : KJ_IR_LOCAL,
                                    kj_type_array(elem, ndim), call->loc, 0);
    e->alloc_elem = elem;
    e->alloc_ndim = ndim;
    int64_t total = kj_type_size(elem);
    bool at_launch = false;
    for (int i = 0; i < ndim; i++) {
        KjNode *size_node = call->args.items[1 + i];
        KjIrExpr *size = kj_check_expr(c, size_node);
        int64_t value;
        if (!size)
            return NULL;
        /* an untyped constant, or a typed integer one (const N: i32 = 64;) */
        bool typed = size->op == KJ_IR_CONST && kj_type_is_int(size->type);
        if (typed)
            value = kj_type_is_signed(size->type) || (int64_t)size->const_int >= 0
                        ? (int64_t)size->const_int : -1;
        if (!typed && !kj_check_constant_int(size, &value) && !shared &&
            kj_type_is_int(size->type)) {
            if (!launch_size(c, size, size_node->loc))
                return NULL;
            e->alloc_size[i] = size; /* alloc_shape[i] stays 0 */
            at_launch = true;
            continue;
        }
        if ((!typed && !kj_check_constant_int(size, &value)) || value < 1 || value > (1 << 24)) {
            kj_error(c->diag, size_node->loc, "the sizes of %s() must be constant integers from "
                     "1 to 16777216%s", name,
                     shared ? "" : ", or integers from the launch (a kernel's parameters)");
            return NULL;
        }
        e->alloc_shape[i] = value;
        total *= value;
    }
    if (at_launch) {
        /* sized at launch: its bytes are added up by each launch
         * (kj_local_launch_bytes), not into local_bytes */
        e->launch_local = c->cur->ir->launch_locals.count;
        kj_vec_push(c->arena, &c->cur->ir->launch_locals, e);
        return e;
    }
    if (total > ((int64_t)1 << 30)) {
        kj_error(c->diag, call->loc, "%s() of %" PRId64 " bytes is too large", name, total);
        return NULL;
    }
    if (shared) {
        e->shared_offset = c->cur->ir->shared_bytes;
        c->cur->ir->shared_bytes += kj_shared_slice_bytes(total);
        return e;
    }
    /* Each local() is its own 16-byte aligned stack slot in the back end. */
    int64_t *local_bytes = &c->cur->ir->local_bytes;
    *local_bytes += (total + 15) & ~(int64_t)15;
    if (*local_bytes > KJ_MAX_LOCAL_BYTES) {
        kj_error(c->diag, call->loc, "the local() arrays of this kernel take %" PRId64 " bytes "
                 "per thread with this one; the most is %d (512 KiB, as on CUDA): use shared() "
                 "or an array parameter", *local_bytes, KJ_MAX_LOCAL_BYTES);
        return NULL;
    }
    return e;
}

/* The entry of the one table of built-in calls (check_builtin.c) that the
 * call n names, unless a variable of that name hides it; NULL when n is no
 * call of a built-in.  A let takes apart the calls whose entries say so (the
 * grid's), or makes the arrays of the KJ_IN_LET ones (shared(), local()). */
static const KjCheckBuiltin *builtin_called(KjChecker *c, KjNode *n)
{
    if (!n || n->kind != KJ_NODE_CALL || !n->lhs || n->lhs->kind != KJ_NODE_NAME)
        return NULL;
    const KjCheckBuiltin *b = kj_check_builtin_lookup(n->lhs->name);
    return b && !kj_check_lookup_local(c, b->name) ? b : NULL;
}

static void emit_set(KjChecker *c, KjIrVar *var, KjIrExpr *value, KjLoc loc)
{
    emit(c, kj_ir_set(c->arena, var, value, loc));
}

/*
 * The values a let or an assignment of `count` names takes apart from the
 * call `call` of built-in b (let x, y = grid(2);, d0, d1 = mma(a, b, c0, c1);)
 * into out[0..count), each an expression of its component; false after an
 * error, reported at `loc` (the statement's) when the counts differ.  mma()'s
 * pair is computed once, into a temporary, before either is read.
 */
static bool take_apart(KjChecker *c, KjNode *call, const KjCheckBuiltin *b, int count, KjLoc loc,
                       KjIrExpr **out)
{
    char what[32];
    snprintf(what, sizeof what, "%s()", b->name);
    if (b->id == KJ_BUILTIN_EXEC) { /* mma(), the one warp op taken apart */
        if (count != 2) {
            kj_error(c->diag, loc, "mma() gives 2 values, but %d names receive them", count);
            return false;
        }
        KjIrExpr *args[4];
        if (!kj_check_require_kernel(c, call->loc, what) ||
            !kj_check_arg_count_is(c, call, b->name, b->min_args, b->max_args))
            return false;
        for (int i = 0; i < 4; i++)
            args[i] = kj_check_expr(c, call->args.items[i]);
        KjIrExpr *pair = kj_check_mma(c, call, args);
        if (!pair)
            return false;
        KjIrVar *tmp = kj_ir_new_var(c->arena, c->cur->ir, "mma", pair->type, call->loc);
        emit_set(c, tmp, pair, call->loc);
        out[0] = kj_check_unary_ir(c, KJ_IR_REAL, kj_check_t_f64(), call->loc,
                                   kj_check_var_ref(c, tmp, call->loc));
        out[1] = kj_check_unary_ir(c, KJ_IR_IMAG, kj_check_t_f64(), call->loc,
                                   kj_check_var_ref(c, tmp, call->loc));
        return true;
    }
    bool gridsize = b->id == KJ_BUILTIN_GRIDSIZE;
    int64_t number;
    if (!kj_check_require_kernel(c, call->loc, what) ||
        !kj_check_arg_count_is(c, call, b->name, b->min_args, b->max_args) ||
        !kj_check_grid_count(c, call, b->name, kj_check_expr(c, call->args.items[0]), &number))
        return false;
    if (number != count) {
        kj_error(c->diag, loc, "%s(%" PRId64 ") gives %" PRId64 " value%s, but %d names "
                 "receive them", b->name, number, number, number == 1 ? "" : "s", count);
        return false;
    }
    for (int i = 0; i < count; i++)
        out[i] = kj_check_grid_component(c, gridsize, i, call->loc);
    return true;
}

static void check_let(KjChecker *c, KjNode *n)
{
    const char *first = n->names.count > 0 ? n->names.items[0] : n->name;
    if (n->names.count > 1) {
        const KjCheckBuiltin *b = builtin_called(c, n->rhs);
        KjIrExpr *values[3];
        if (!b || !b->takes_apart) {
            kj_error(c->diag, n->loc, "only grid(n), gridsize(n) and mma() can be taken apart "
                     "by let");
            return;
        }
        if (!take_apart(c, n->rhs, b, n->names.count, n->loc, values)) {
            /* declared even after the error, so later uses do not report it again */
            for (int i = 0; i < n->names.count; i++)
                kj_vec_push(c->arena, &c->cur->poisoned,
                            kj_check_declare(c, n->names.items[i], kj_check_t_i64(), n->loc));
            return;
        }
        for (int i = 0; i < n->names.count; i++) {
            KjIrVar *var = kj_check_declare(c, n->names.items[i], values[i]->type, n->loc);
            emit_set(c, var, values[i], n->loc);
        }
        return;
    }
    KjIrExpr *value = NULL;
    const KjCheckBuiltin *b = builtin_called(c, n->rhs);
    if (b && b->where == KJ_IN_LET)
        value = check_alloc(c, n->rhs, b);
    else {
        c->array_choice = n->rhs; /* let src = c ? a : b; */
        value = kj_check_expr(c, n->rhs);
        c->array_choice = NULL;
    }
    const KjType *type = n->declared_type;
    if (value && type)
        value = kj_check_convert(c, value, type, n->rhs->loc, "the initial value");
    else if (value)
        value = kj_check_need_value(c, value, n->rhs->loc);
    if (!type)
        type = value ? value->type : NULL;
    /* Declared even after an error, so later uses do not report it again. */
    KjIrVar *var = kj_check_declare(c, first, type ? type : kj_check_t_i64(), n->loc);
    var->read_only = kj_check_is_read_only(value);
    if (!value || !type) {
        kj_vec_push(c->arena, &c->cur->poisoned, var);
        return;
    }
    emit_set(c, var, value, n->loc);
}

static KjBinaryOp compound_op(KjTokenKind kind)
{
    switch (kind) {
    case KJ_TOK_PLUS_ASSIGN: return KJ_BIN_ADD;
    case KJ_TOK_MINUS_ASSIGN: return KJ_BIN_SUB;
    case KJ_TOK_STAR_ASSIGN: return KJ_BIN_MUL;
    case KJ_TOK_SLASH_ASSIGN: return KJ_BIN_DIV;
    case KJ_TOK_PERCENT_ASSIGN: return KJ_BIN_REM;
    case KJ_TOK_AMP_ASSIGN: return KJ_BIN_BITAND;
    case KJ_TOK_PIPE_ASSIGN: return KJ_BIN_BITOR;
    case KJ_TOK_CARET_ASSIGN: return KJ_BIN_BITXOR;
    case KJ_TOK_SHL_ASSIGN: return KJ_BIN_SHL;
    case KJ_TOK_SHR_ASSIGN: return KJ_BIN_SHR;
    default: kj_unreachable();
    }
}

/* An index used twice by a compound assignment: pure indices are copied,
 * others computed once into a temporary. */
static KjIrExpr *reusable(KjChecker *c, KjIrExpr *e, KjIrExpr **second)
{
    if (kj_check_expr_is_pure(c, e)) {
        *second = kj_check_clone_expr(c, e);
        return e;
    }
    KjIrVar *tmp = kj_ir_new_var(c->arena, c->cur->ir, "tmp", e->type, e->loc);
    emit_set(c, tmp, e, e->loc);
    *second = kj_check_var_ref(c, tmp, e->loc);
    return kj_check_var_ref(c, tmp, e->loc);
}

/*
 * `src = other;` re-binds an array variable that a let declared (never a
 * parameter) to another array of the same element type and rank: the
 * variable then names that array (no elements are copied).  A variable
 * bound to writable arrays may not be re-bound to a read-only one (a
 * constant array): stores through it were allowed.  The value, converted,
 * or NULL after an error at loc.
 */
static KjIrExpr *array_rebinding(KjChecker *c, KjIrVar *var, KjIrExpr *value, KjLoc loc,
                                 bool compound)
{
    if (compound) {
        kj_error(c->diag, loc, "'%s' is an array: it takes no arithmetic; re-bind it with = or "
                 "assign its elements", var->name);
        return NULL;
    }
    if (var->is_param) {
        kj_error(c->diag, loc, "the array parameter '%s' cannot be re-bound; bind a let to it "
                 "and re-bind that (let src = %s; ... src = other;)", var->name, var->name);
        return NULL;
    }
    if (!value)
        return NULL;
    if (value->type != var->type) {
        kj_error(c->diag, loc, "'%s' is %s; it can be re-bound only to another %s, not %s",
                 var->name, kj_type_name(var->type), kj_type_name(var->type),
                 kj_type_name(value->type));
        return NULL;
    }
    if (kj_check_is_read_only(value) && !var->read_only) {
        kj_error(c->diag, loc, "'%s' names writable arrays; re-binding it to a read-only "
                 "constant array would let its stores write that (bind a new let instead)",
                 var->name);
        return NULL;
    }
    return value;
}

/* a, b = x, y: every value into a temporary first, then each target (a
 * variable) from its temporary, so that a, b = b, a swaps. */
static void check_multiple_assign(KjChecker *c, KjNode *n)
{
    int count = n->args.count < n->body.count ? n->args.count : n->body.count;
    /* d0, d1 = mma(a, b, d0, d1);: one call whose values are taken apart
     * (take_apart fills apart[] only when the counts match: at most 3) */
    KjIrExpr *apart[3];
    const KjCheckBuiltin *b = n->body.count == 1 ? builtin_called(c, n->body.items[0]) : NULL;
    if (n->body.count == 1 && n->args.count > 1) {
        if (!b || !b->takes_apart) {
            kj_error(c->diag, n->loc, "%d targets but 1 value: a, b = x, y; assigns one value "
                     "to each (only grid(n), gridsize(n) and mma() give several)", n->args.count);
            return;
        }
        if (!take_apart(c, n->body.items[0], b, n->args.count, n->loc, apart))
            return;
        count = n->args.count;
    }
    KjIrVar *temps[64];
    KjCheckBinding *bindings[64];
    if (count > 64) {
        kj_error(c->diag, n->loc, "a multiple assignment has at most 64 targets");
        return;
    }
    bool ok = true;
    for (int i = 0; i < count; i++) {
        KjNode *target = n->args.items[i];
        KjNode *value_node = n->body.items[n->body.count == 1 ? 0 : i];
        bindings[i] = NULL;
        temps[i] = NULL;
        if (target->kind != KJ_NODE_NAME) {
            kj_error(c->diag, target->loc, "a multiple assignment assigns variables; assign an "
                     "element on its own (a[i] = ...;)");
            ok = false;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (n->args.items[j] && ((KjNode *)n->args.items[j])->kind == KJ_NODE_NAME &&
                strcmp(((KjNode *)n->args.items[j])->name, target->name) == 0) {
                kj_error(c->diag, target->loc, "'%s' is assigned twice in one multiple "
                         "assignment", target->name);
                ok = false;
            }
        KjCheckBinding *b = kj_check_lookup_local(c, target->name);
        if (!b) {
            if (kj_check_find_const(c, target->name))
                kj_error(c->diag, target->loc, "'%s' is a constant; it cannot be assigned",
                         target->name);
            else
                kj_check_name(c, target);
            ok = false;
            continue;
        }
        bindings[i] = b;
        bool array = kj_check_is_array(b->var->type);
        KjIrExpr *value;
        if (n->body.count == 1) { /* a component taken apart above */
            value = apart[i];
        } else {
            c->array_choice = array ? value_node : NULL;
            value = kj_check_expr(c, value_node);
            c->array_choice = NULL;
        }
        if (kj_check_is_poisoned(c, b->var)) {
            ok = false;
            continue;
        }
        if (array) {
            value = array_rebinding(c, b->var, value, value_node->loc, false);
        } else {
            char context[160];
            snprintf(context, sizeof context, "the value assigned to '%s'", target->name);
            value = kj_check_convert(c, value, b->var->type, value_node->loc, context);
        }
        if (!value) {
            ok = false;
            continue;
        }
        temps[i] = kj_ir_new_var(c->arena, c->cur->ir, "swap", b->var->type, value_node->loc);
        temps[i]->read_only = kj_check_is_read_only(value);
        emit_set(c, temps[i], value, value_node->loc);
    }
    for (int i = 0; ok && i < count; i++)
        emit_set(c, bindings[i]->var, kj_check_var_ref(c, temps[i], n->loc), n->loc);
}

static void check_assign(KjChecker *c, KjNode *n)
{
    KjNode *target = n->lhs;
    bool compound = n->assign_op != KJ_TOK_ASSIGN;
    if (n->args.count > 1) {
        check_multiple_assign(c, n);
        return;
    }
    if (target->kind == KJ_NODE_NAME) {
        KjCheckBinding *b = kj_check_lookup_local(c, target->name);
        bool array = b && kj_check_is_array(b->var->type);
        c->array_choice = array ? n->rhs : NULL;
        KjIrExpr *rhs = kj_check_expr(c, n->rhs);
        c->array_choice = NULL;
        if (!b && kj_check_find_const(c, target->name)) {
            kj_error(c->diag, n->loc, "'%s' is a constant; it cannot be assigned", target->name);
            return;
        }
        if (!b) {
            kj_check_name(c, target); /* says what the name is instead */
            return;
        }
        if (array) {
            KjIrExpr *value = kj_check_is_poisoned(c, b->var)
                                  ? NULL
                                  : array_rebinding(c, b->var, rhs, n->loc, compound);
            if (value)
                emit_set(c, b->var, value, n->loc);
            return;
        }
        if (!rhs || kj_check_is_poisoned(c, b->var))
            return;
        KjIrExpr *value = rhs;
        if (compound)
            value = kj_check_binary_values(c, compound_op(n->assign_op),
                                           kj_check_var_ref(c, b->var, target->loc), rhs,
                                           n->loc);
        char context[160];
        snprintf(context, sizeof context, "the value assigned to '%s'", target->name);
        value = kj_check_convert(c, value, b->var->type, n->rhs->loc, context);
        if (value)
            emit_set(c, b->var, value, n->loc);
        return;
    }
    if (target->kind == KJ_NODE_INDEX) {
        if (target->lhs->kind == KJ_NODE_MEMBER && strcmp(target->lhs->name, "shape") == 0) {
            kj_error(c->diag, n->loc, "the shape of an array cannot be assigned");
            return;
        }
        KjIrExpr *load = kj_check_index(c, target);
        KjIrExpr *rhs = kj_check_expr(c, n->rhs);
        if (!load || !rhs)
            return;
        if (kj_check_refuse_read_only(c, load->args[0], n->loc, "this assignment"))
            return;
        KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_STORE, n->loc);
        s->array = load->args[0];
        s->index_count = load->arg_count - 1;
        s->indices = kj_arena_alloc(c->arena, sizeof *s->indices * (size_t)s->index_count);
        KjIrExpr *value = rhs;
        if (compound) {
            KjIrExpr *again;
            s->array = reusable(c, s->array, &again);
            KjIrExpr *reload = kj_check_new_expr(c, KJ_IR_LOAD, load->type, load->loc,
                                                 load->arg_count);
            reload->args[0] = again;
            for (int i = 0; i < s->index_count; i++) {
                s->indices[i] = reusable(c, load->args[1 + i], &again);
                reload->args[1 + i] = again;
            }
            value = kj_check_binary_values(c, compound_op(n->assign_op), reload, rhs, n->loc);
        } else {
            for (int i = 0; i < s->index_count; i++)
                s->indices[i] = load->args[1 + i];
        }
        s->value = kj_check_convert(c, value, load->type, n->rhs->loc, "the value stored");
        if (s->value) {
            kj_check_note_impure(c);
            emit(c, s);
        }
        return;
    }
    if (target->kind == KJ_NODE_MEMBER &&
        (strcmp(target->name, "real") == 0 || strcmp(target->name, "imag") == 0)) {
        kj_error(c->diag, n->loc, "the parts of a complex number cannot be assigned; build a new "
                 "one: z = complex(re, im)");
        return;
    }
    kj_error(c->diag, n->loc, "only a variable or an array element can be assigned");
}

static bool check_for(KjChecker *c, KjNode *n)
{
    int count = n->args.count;
    if (count < 1 || count > 3) {
        kj_error(c->diag, n->loc, "range() takes 1 to 3 arguments, got %d", count);
        return true;
    }
    KjIrExpr *a[3];
    bool ok = true;
    for (int i = 0; i < count; i++) {
        a[i] = kj_check_expr(c, n->args.items[i]);
        if (a[i] && !kj_check_is_untyped(a[i]) && !kj_type_is_int(a[i]->type)) {
            kj_error(c->diag, ((KjNode *)n->args.items[i])->loc,
                     "range() takes integers, not %s", kj_type_name(a[i]->type));
            a[i] = NULL;
        } else if (a[i] && a[i]->type->kind == KJ_TYPE_UNTYPED_FLOAT) {
            kj_error(c->diag, ((KjNode *)n->args.items[i])->loc, "range() takes integers, not %g",
                     a[i]->const_float);
            a[i] = NULL;
        }
        ok = ok && a[i];
    }
    /* The loop variable takes the bounds' type: the widest typed bound, i64
     * when every bound is a literal. */
    const KjType *t = NULL;
    for (int i = 0; ok && i < count; i++) {
        if (kj_check_is_untyped(a[i]))
            continue;
        const char *why = NULL;
        const KjType *common = t ? kj_check_common_type(t, a[i]->type, &why) : a[i]->type;
        if (!common) {
            kj_error(c->diag, n->loc, "the bounds of range() are %s and %s: %s", kj_type_name(t),
                     kj_type_name(a[i]->type), why ? why : "they do not mix");
            ok = false;
        }
        t = common;
    }
    if (!t)
        t = kj_check_t_i64();
    KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_FOR, n->loc);
    if (ok) {
        KjIrExpr *start =
            count >= 2 ? a[0] : kj_check_int_const(c, kj_check_t_untyped_int(), 0, n->loc);
        KjIrExpr *stop = count >= 2 ? a[1] : a[0];
        KjIrExpr *step =
            count == 3 ? a[2] : kj_check_int_const(c, kj_check_t_untyped_int(), 1, n->loc);
        int64_t step_value;
        if (kj_check_constant_int(step, &step_value) && step_value == 0) {
            kj_error(c->diag, ((KjNode *)n->args.items[2])->loc, "the step of range() is zero");
            ok = false;
        }
        s->start = kj_check_convert(c, start, t, n->loc, "the start of range()");
        s->stop = kj_check_convert(c, stop, t, n->loc, "the end of range()");
        s->step = kj_check_convert(c, step, t, n->loc, "the step of range()");
        ok = ok && s->start && s->stop && s->step;
    }
    KjCheckScope scope;
    kj_check_push_scope(c, &scope);
    KjIrVar *var = kj_check_declare(c, n->name, t, n->loc);
    s->var = var;
    s->body = new_block(c, n->then_body ? n->then_body->loc : n->loc);
    int saved_depth = c->cur->loop_depth;
    bool saved_break = c->cur->loop_has_break;
    c->cur->loop_depth++;
    check_block_into(c, n->then_body, &s->body->stmts, NULL, n->loc);
    c->cur->loop_depth = saved_depth;
    c->cur->loop_has_break = saved_break;
    kj_check_pop_scope(c);
    if (ok)
        emit(c, s);
    return true;
}

/* return (z, n) in a @vectorize of several outputs: the values in order
 * (z into a variable of its own, so that they are computed left to right),
 * outputs 1.. into their variables, then return z.  Always false: a return
 * does not fall through. */
static bool check_return_outputs(KjChecker *c, KjNode *n, KjIrFunction *fn)
{
    int count = n->args.count;
    if (fn->output_count < 2) {
        kj_error(c->diag, n->loc, "'%s' returns %s, one value; return (a, b) is for a "
                 "@vectorize function of several outputs (-> (f64, i32))", fn->name,
                 kj_type_name(fn->ret));
        return false;
    }
    if (count != fn->output_count) {
        kj_error(c->diag, n->loc, "'%s' has %d outputs; return all of them, as in return (%s)",
                 fn->name, fn->output_count, fn->output_count == 2 ? "a, b" : "a, b, ...");
        return false;
    }
    KjIrVar *first = kj_ir_new_var(c->arena, fn, "output.0", fn->ret, n->loc);
    for (int k = 0; k < count; k++) {
        KjNode *arg = n->args.items[k];
        KjIrVar *var = k == 0 ? first : fn->outputs[k];
        char what[48];
        snprintf(what, sizeof what, "output %d", k);
        KjIrExpr *value = kj_check_expr(c, arg);
        value = value ? kj_check_convert(c, value, var->type, arg->loc, what) : NULL;
        if (!value)
            return false;
        emit_set(c, var, value, arg->loc);
    }
    KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_RETURN, n->loc);
    s->value = kj_ir_var_ref(c->arena, first, n->loc);
    emit(c, s);
    return false;
}

static bool check_stmt(KjChecker *c, KjNode *n)
{
    if (!n)
        return true;
    switch (n->kind) {
    case KJ_NODE_BLOCK: {
        KjIrStmt *s = new_block(c, n->loc);
        bool reachable = check_block_into(c, n, &s->stmts, NULL, n->loc);
        emit(c, s);
        return reachable;
    }
    case KJ_NODE_LET:
        check_let(c, n);
        return true;
    case KJ_NODE_ASSIGN:
        check_assign(c, n);
        return true;
    case KJ_NODE_EXPR_STMT: {
        KjNode *e = n->lhs;
        if (e && e->kind != KJ_NODE_CALL) {
            kj_check_expr(c, e);
            kj_error(c->diag, n->loc, "this expression does nothing; only calls stand alone as "
                     "statements");
            return true;
        }
        KjIrExpr *value = kj_check_expr(c, e);
        if (value) {
            if (kj_check_is_untyped(value))
                value = kj_check_settle_default(c, value);
            KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_EVAL, n->loc);
            s->value = value;
            if (value)
                emit(c, s);
        }
        return true;
    }
    case KJ_NODE_IF: {
        KjIrExpr *cond = check_condition(c, n->cond, "if");
        KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_IF, n->loc);
        s->cond = cond;
        s->then_stmt = new_block(c, n->then_body ? n->then_body->loc : n->loc);
        bool then_reach = check_block_into(c, n->then_body, &s->then_stmt->stmts, NULL, n->loc);
        bool else_reach = true;
        if (n->else_body) {
            s->else_stmt = new_block(c, n->else_body->loc);
            if (n->else_body->kind == KJ_NODE_IF) {
                KjVec *saved = c->cur->out;
                c->cur->out = &s->else_stmt->stmts;
                KjCheckScope scope;
                kj_check_push_scope(c, &scope);
                else_reach = check_stmt(c, n->else_body);
                kj_check_pop_scope(c);
                c->cur->out = saved;
            } else {
                else_reach = check_block_into(c, n->else_body, &s->else_stmt->stmts, NULL, n->loc);
            }
        }
        if (cond)
            emit(c, s);
        return then_reach || else_reach;
    }
    case KJ_NODE_FOR:
        return check_for(c, n);
    case KJ_NODE_WHILE: {
        KjIrExpr *cond = check_condition(c, n->cond, "while");
        KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_WHILE, n->loc);
        s->cond = cond;
        s->body = new_block(c, n->then_body ? n->then_body->loc : n->loc);
        int saved_depth = c->cur->loop_depth;
        bool saved_break = c->cur->loop_has_break;
        c->cur->loop_depth++;
        c->cur->loop_has_break = false;
        check_block_into(c, n->then_body, &s->body->stmts, NULL, n->loc);
        bool has_break = c->cur->loop_has_break;
        c->cur->loop_depth = saved_depth;
        c->cur->loop_has_break = saved_break;
        if (cond)
            emit(c, s);
        /* `while true` without a break never falls through. */
        bool forever = cond && cond->op == KJ_IR_CONST && cond->const_int == 1;
        return !(forever && !has_break);
    }
    case KJ_NODE_BREAK:
    case KJ_NODE_CONTINUE: {
        bool is_break = n->kind == KJ_NODE_BREAK;
        if (c->cur->loop_depth == 0) {
            kj_error(c->diag, n->loc, "'%s' outside a loop", is_break ? "break" : "continue");
            return true;
        }
        if (is_break)
            c->cur->loop_has_break = true;
        emit(c, kj_ir_new_stmt(c->arena, is_break ? KJ_IR_STMT_BREAK : KJ_IR_STMT_CONTINUE,
                               n->loc));
        return false;
    }
    case KJ_NODE_RETURN: {
        KjIrFunction *fn = c->cur->ir;
        if (n->args.count > 0 || fn->output_count > 1)
            return check_return_outputs(c, n, fn);
        KjIrStmt *s = kj_ir_new_stmt(c->arena, KJ_IR_STMT_RETURN, n->loc);
        if (n->lhs) {
            KjIrExpr *value = kj_check_expr(c, n->lhs);
            if (fn->ret == kj_type_void()) {
                if (fn->kind == KJ_IR_FN_KERNEL)
                    kj_error(c->diag, n->loc, "a @kernel returns nothing; write its results "
                             "into an array");
                else if (c->cur->info->decl->kind == KJ_FN_GUVECTORIZE)
                    kj_error(c->diag, n->loc, "a @guvectorize function returns nothing; write "
                             "its results into its output parameters");
                else
                    kj_error(c->diag, n->loc, "'%s' has no return type, so it returns "
                             "nothing; declare one: fn %s(...) -> T", fn->name, fn->name);
                return false;
            }
            s->value = kj_check_convert(c, value, fn->ret, n->lhs->loc, "the return value");
            if (!s->value)
                return false;
        } else if (fn->ret != kj_type_void()) {
            kj_error(c->diag, n->loc, "'%s' returns %s; return a value", fn->name,
                     kj_type_name(fn->ret));
            return false;
        }
        emit(c, s);
        return false;
    }
    case KJ_NODE_IMPORT:
    case KJ_NODE_FUNCTION:
        kj_error(c->diag, n->loc, "declarations belong at the top level of a file");
        return true;
    default:
        kj_error(c->diag, n->loc, "expected a statement");
        return true;
    }
}

/* ============================================================== constants */

/*
 * `const N = 128;` and `const SCALE: f32 = 0.5;`: a name for a value known
 * when the program is compiled.  Without a type the value stays untyped, as
 * the literal it names would be, and takes its type from where it is used;
 * with one it is settled to that type once.  A constant's value may use the
 * constants declared before it in its file and those of the files it imports;
 * functions see every constant of their file and its imports, in any order.
 */

/* Calls other than conversions, indexing and members cannot be constant. */
static KjNode *not_constant(KjNode *n)
{
    if (!n)
        return NULL;
    switch (n->kind) {
    case KJ_NODE_CALL:
        if (!n->lhs || n->lhs->kind != KJ_NODE_NAME ||
            !kj_type_from_name(n->lhs->name, strlen(n->lhs->name)))
            return n;
        break;
    case KJ_NODE_INDEX:
    case KJ_NODE_MEMBER:
        return n;
    default:
        break;
    }
    KjNode *parts[] = {n->lhs, n->rhs, n->cond};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        KjNode *bad = not_constant(parts[i]);
        if (bad)
            return bad;
    }
    for (int i = 0; i < n->args.count; i++) {
        KjNode *bad = not_constant(n->args.items[i]);
        if (bad)
            return bad;
    }
    return NULL;
}

/*
 * `const TABLE: u16[256] = [...];`: a read-only array known when the program
 * is compiled.  The extents are constant integers; the literal nests one
 * level per axis, with exactly as many elements as the extent at each; every
 * element is a constant expression that converts to the element type as a
 * typed `let` would.  The elements are stored as the targets lay them out
 * (kj_codegen_const_array puts them in read-only memory).
 */
#define KJ_MAX_CONST_ARRAY_ELEMENTS (1 << 24)

static void store_element(unsigned char *at, const KjIrExpr *v)
{
    const KjType *t = v->type;
    int size = kj_type_size(t);
    if (t->kind == KJ_TYPE_F32) {
        float f = (float)v->const_float;
        memcpy(at, &f, 4);
    } else if (t->kind == KJ_TYPE_F64) {
        memcpy(at, &v->const_float, 8);
    } else if (kj_type_is_half(t)) {
        uint16_t h = kj_half_from_double(t->kind, v->const_float);
        memcpy(at, &h, 2);
    } else {
        for (int b = 0; b < size; b++) /* little-endian, as every target is */
            at[b] = (unsigned char)(v->const_int >> (8 * b));
    }
}

/* The elements of lit (axis `axis` of the shape) into bytes from *next; false after an error. */
static bool const_array_elements(KjChecker *c, KjNode *n, KjNode *lit, int axis,
                                 const int64_t *shape, int ndim, unsigned char *bytes,
                                 int64_t *next)
{
    const KjType *elem = n->declared_type->elem;
    if (!lit || lit->kind != KJ_NODE_ARRAY_LIT) {
        kj_error(c->diag, lit ? lit->loc : n->loc, "the constant '%s' has %d dimension%s: this "
                 "must be a list [...] of axis %d", n->name, ndim, ndim == 1 ? "" : "s", axis);
        return false;
    }
    if (lit->args.count != shape[axis]) {
        kj_error(c->diag, lit->loc, "the constant '%s' is declared with %lld element%s along axis "
                 "%d, but this list has %d", n->name, (long long)shape[axis],
                 shape[axis] == 1 ? "" : "s", axis, lit->args.count);
        return false;
    }
    bool ok = true;
    for (int i = 0; i < lit->args.count && c->diag->error_count < 100; i++) {
        KjNode *item = lit->args.items[i];
        if (axis + 1 < ndim) {
            if (!const_array_elements(c, n, item, axis + 1, shape, ndim, bytes, next))
                return false; /* one message for a list of the wrong shape */
            continue;
        }
        if (item && item->kind == KJ_NODE_ARRAY_LIT) {
            kj_error(c->diag, item->loc, "the constant '%s' has %d dimension%s: an element here "
                     "is a single value, not a list", n->name, ndim, ndim == 1 ? "" : "s");
            ok = false;
            continue;
        }
        KjNode *bad = not_constant(item);
        if (bad) {
            kj_error(c->diag, bad->loc, "the elements of the constant '%s' must be known when the "
                     "program is compiled: literals, constants, operators and conversions",
                     n->name);
            ok = false;
            continue;
        }
        char context[160];
        snprintf(context, sizeof context, "an element of the constant '%s'", n->name);
        KjIrExpr *v = kj_check_convert(c, kj_check_expr(c, item), elem, item->loc, context);
        if (v && v->op != KJ_IR_CONST) {
            kj_error(c->diag, item->loc, "the elements of the constant '%s' must be known when "
                     "the program is compiled; this %s is computed when it runs", n->name,
                     kj_type_name(v->type));
            v = NULL;
        }
        if (v)
            store_element(bytes + *next * kj_type_size(elem), v);
        ok = ok && v;
        ++*next;
    }
    return ok;
}

static KjIrExpr *check_const_array(KjChecker *c, KjNode *n)
{
    const KjType *type = n->declared_type;
    int ndim = n->args.count < 3 ? n->args.count : 3;
    int64_t shape[3] = {1, 1, 1}, count = 1;
    if (kj_type_is_complex(type->elem)) {
        kj_error(c->diag, n->loc, "a constant array holds bool or real numbers, not %s",
                 kj_type_name(type->elem));
        return NULL;
    }
    for (int k = 0; k < ndim; k++) {
        KjNode *extent = n->args.items[k];
        KjNode *bad = not_constant(extent);
        KjIrExpr *e = bad ? NULL : kj_check_expr(c, extent);
        int64_t value = 0;
        bool typed = e && e->op == KJ_IR_CONST && kj_type_is_int(e->type);
        if (typed)
            value = (int64_t)e->const_int;
        if ((!typed && !kj_check_constant_int(e, &value)) || value < 1 ||
            value > KJ_MAX_CONST_ARRAY_ELEMENTS) {
            kj_error(c->diag, extent->loc, "the extents of a constant array are constant "
                     "integers from 1 to %d", KJ_MAX_CONST_ARRAY_ELEMENTS);
            return NULL;
        }
        shape[k] = value;
        count *= value;
        if (count > KJ_MAX_CONST_ARRAY_ELEMENTS) {
            kj_error(c->diag, n->loc, "the constant '%s' has more than %d elements", n->name,
                     KJ_MAX_CONST_ARRAY_ELEMENTS);
            return NULL;
        }
    }
    int64_t size = count * kj_type_size(type->elem);
    unsigned char *bytes = kj_arena_alloc(c->arena, (size_t)size);
    int64_t next = 0;
    if (!const_array_elements(c, n, n->rhs, 0, shape, ndim, bytes, &next))
        return NULL;
    KjIrConstArray *data = kj_arena_alloc(c->arena, sizeof *data);
    data->name = n->name;
    data->symbol = kj_arena_printf(c->arena, "kj_const_%s", n->name);
    data->elem = type->elem;
    data->ndim = ndim;
    memcpy(data->shape, shape, sizeof shape);
    data->bytes = bytes;
    data->size = size;
    kj_vec_push(c->arena, &c->module->const_arrays, data);
    c->module->const_array_bytes += (size + 15) / 16 * 16;
    KjIrExpr *e = kj_check_new_expr(c, KJ_IR_CONST_ARRAY, kj_type_array(type->elem, ndim),
                                    n->loc, 0);
    e->const_array = data;
    e->alloc_elem = type->elem;
    e->alloc_ndim = ndim;
    memcpy(e->alloc_shape, shape, sizeof shape);
    return e;
}

static void check_const(KjChecker *c, KjCheckConst *k)
{
    KjNode *n = k->decl;
    const KjType *type = n->declared_type;
    c->const_file = k->file;
    if (n->args.count > 0 || (n->rhs && n->rhs->kind == KJ_NODE_ARRAY_LIT)) {
        k->state = KJ_CHECK_FN_CHECKING;
        if (n->args.count == 0)
            kj_error(c->diag, n->rhs->loc, "a constant array needs its type and shape: "
                     "const %s: f64[N] = [...]; (or f64[N, M] for two dimensions)", n->name);
        else if (type)
            k->value = check_const_array(c, n);
        k->state = KJ_CHECK_FN_DONE;
        c->const_file = NULL;
        return;
    }
    k->state = KJ_CHECK_FN_CHECKING;
    KjIrExpr *value = NULL;
    KjNode *bad = not_constant(n->rhs);
    if (type && !kj_check_is_scalar(type)) {
        kj_error(c->diag, n->loc, "a constant is a single value, not %s", kj_type_name(type));
    } else if (bad) {
        kj_error(c->diag, bad->loc, "the value of the constant '%s' must be known when the "
                 "program is compiled: literals, constants, operators and conversions", n->name);
    } else {
        value = kj_check_expr(c, n->rhs);
        char context[160];
        snprintf(context, sizeof context, "the value of the constant '%s'", n->name);
        if (value && type)
            value = kj_check_convert(c, value, type, n->rhs->loc, context);
        if (value && value->op != KJ_IR_CONST) {
            kj_error(c->diag, n->rhs->loc, "the value of the constant '%s' must be known when the "
                     "program is compiled; this %s is computed when it runs", n->name,
                     kj_type_name(value->type));
            value = NULL;
        }
    }
    k->value = value;
    k->state = KJ_CHECK_FN_DONE;
    c->const_file = NULL;
}

/* ============================================================== functions */

static KjIrFunction *new_function(KjChecker *c, KjCheckFn *info, KjIrFunctionKind kind,
                                  const char *symbol, const KjType **param_types,
                                  const KjType *ret)
{
    KjFunctionDecl *decl = info->decl;
    KjIrFunction *fn = kj_arena_alloc(c->arena, sizeof *fn);
    fn->name = decl->name;
    fn->symbol = symbol;
    fn->kind = kind;
    fn->ret = ret;
    fn->loc = decl->loc;
    fn->param_count = decl->param_count;
    fn->params = kj_arena_alloc(c->arena, sizeof *fn->params * (size_t)(decl->param_count + 1));
    for (int i = 0; i < decl->param_count; i++) {
        fn->params[i] = kj_ir_new_var(c->arena, fn, decl->params[i].name, param_types[i],
                                      decl->params[i].loc);
        fn->params[i]->is_param = true;
    }
    fn->body = new_block(c, decl->body ? decl->body->loc : decl->loc);
    kj_vec_push(c->arena, &info->entry->variants, fn);
    return fn;
}

/* -> (f64, i32): the variables that hold outputs 1.. when the function
 * returns (return (z, n) sets them and returns z). */
static void add_outputs(KjChecker *c, KjIrFunction *fn, const KjFunctionDecl *decl)
{
    fn->output_count = decl->result_count;
    fn->outputs = kj_arena_alloc(c->arena, sizeof *fn->outputs * (size_t)decl->result_count);
    for (int k = 1; k < decl->result_count; k++)
        fn->outputs[k] = kj_ir_new_var(c->arena, fn, kj_arena_printf(c->arena, "output.%d", k),
                                       decl->results[k], decl->results_loc);
}

/* A vectorized signature's symbol: name__t1_t2 ... */
static const char *signature_symbol(KjChecker *c, const char *name, const KjType **params,
                                    int count)
{
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s_", name);
    for (int i = 0; i < count; i++)
        kj_buf_printf(&buf, "_%s", kj_type_name(params[i]));
    if (count == 0)
        kj_buf_printf(&buf, "_void");
    char *symbol = kj_arena_strdup(c->arena, buf.data);
    kj_buf_free(&buf);
    return symbol;
}

/* A @guvectorize signature's symbol: name__f64a1_f64a2 ... (a symbol has no
 * brackets: an array type is its element type, 'a' and its rank). */
static const char *gufunc_symbol(KjChecker *c, const char *name, const KjType **params, int count)
{
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s_", name);
    for (int i = 0; i < count; i++) {
        const KjType *t = params[i];
        if (t->kind == KJ_TYPE_ARRAY)
            kj_buf_printf(&buf, "_%sa%d", kj_type_name(t->elem), t->ndim);
        else
            kj_buf_printf(&buf, "_%s", kj_type_name(t));
    }
    char *symbol = kj_arena_strdup(c->arena, buf.data);
    kj_buf_free(&buf);
    return symbol;
}

/* Checks the declaration of a function (not its body) and makes its IR
 * functions, so that calls can refer to them before the body is checked. */
static void declare_function(KjChecker *c, KjCheckFn *info)
{
    KjFunctionDecl *decl = info->decl;
    const char *name = decl->name;
    int n = decl->param_count;
    const KjType **types = kj_arena_alloc(c->arena, sizeof *types * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        types[i] = decl->params[i].type;
        for (int j = 0; j < i; j++)
            if (strcmp(decl->params[j].name, decl->params[i].name) == 0) {
                kj_error(c->diag, decl->params[i].loc, "parameter '%s' appears twice in '%s'",
                         decl->params[i].name, name);
                kj_note(c->diag, decl->params[j].loc, "the first '%s' is here",
                        decl->params[i].name);
                info->bad = true;
            }
    }
    if (decl->result_count > 1 && decl->kind != KJ_FN_VECTORIZE) {
        kj_error(c->diag, decl->results_loc, "only a @vectorize function returns several values; "
                 "'%s' is %s", name, decl->kind == KJ_FN_PLAIN ? "a plain function: write its "
                 "results into array parameters" : "not one");
        info->bad = true;
        return;
    }
    switch (decl->kind) {
    case KJ_FN_PLAIN:
        for (int i = 0; i < n; i++)
            if (!types[i])
                info->bad = true; /* the parser has said so */
        if (decl->ret && !kj_check_is_scalar(decl->ret)) {
            kj_error(c->diag, decl->loc, "'%s' returns %s; functions return single values "
                     "(write results into an array parameter instead)", name,
                     kj_type_name(decl->ret));
            info->bad = true;
        }
        if (!info->bad)
            new_function(c, info, KJ_IR_FN_PLAIN, name, types,
                         decl->ret ? decl->ret : kj_type_void());
        break;
    case KJ_FN_KERNEL:
        if (decl->ret) {
            kj_error(c->diag, decl->loc, "a @kernel returns nothing, but '%s' declares -> %s; "
                     "write results into an array", name, kj_type_name(decl->ret));
            info->bad = true;
        }
        for (int i = 0; i < n; i++)
            if (!types[i])
                info->bad = true;
        if (!info->bad)
            new_function(c, info, KJ_IR_FN_KERNEL, name, types, kj_type_void());
        break;
    case KJ_FN_GUVECTORIZE:
        /* The layout and each signature's ranks (check_guvectorize.c); each
         * signature becomes a plain function over the operands' cores. */
        if (!kj_check_guvectorize_layout(c, info)) {
            info->bad = true;
            break;
        }
        if (decl->ret && decl->signature_count == 0) {
            kj_error(c->diag, decl->loc, "a @guvectorize function returns nothing, but '%s' "
                     "declares -> %s; write results into its output parameters", name,
                     kj_type_name(decl->ret));
            info->bad = true;
        }
        if (decl->signature_count == 0) {
            if (!kj_check_guvectorize_params(c, info, decl->loc, types, n, NULL))
                info->bad = true;
            if (!info->bad)
                new_function(c, info, KJ_IR_FN_PLAIN, name, types, kj_type_void());
            break;
        }
        for (int s = 0; s < decl->signature_count; s++) {
            KjSignature *sig = &decl->signatures[s];
            if (sig->param_count != n) {
                kj_error(c->diag, sig->loc, "this signature has %d parameter%s, but '%s' has %d",
                         sig->param_count, sig->param_count == 1 ? "" : "s", name, n);
                info->bad = true;
                continue;
            }
            if (!kj_check_guvectorize_params(c, info, sig->loc, sig->params, n, sig->ret)) {
                info->bad = true;
                continue;
            }
            const char *symbol = gufunc_symbol(c, name, sig->params, n);
            bool twice = false;
            for (int v = 0; v < info->entry->variants.count && !twice; v++)
                twice = strcmp(((KjIrFunction *)info->entry->variants.items[v])->symbol,
                               symbol) == 0;
            if (twice) {
                kj_error(c->diag, sig->loc, "two signatures of '%s' take the same parameter "
                         "types", name);
                info->bad = true;
                continue;
            }
            new_function(c, info, KJ_IR_FN_PLAIN, symbol, sig->params, kj_type_void());
        }
        break;
    case KJ_FN_REDUCE:
        /* The shape of a binary reduction (check_reduce.c); then its
         * signatures are made as a @vectorize's are. */
        kj_check_reduce_decl(c, info);
        if (info->bad)
            break;
        /* fall through */
    case KJ_FN_VECTORIZE:
        if (decl->signature_count == 0) {
            if (!decl->ret) {
                kj_error(c->diag, decl->loc, "a @vectorize function needs a return type "
                         "(fn %s(...) -> f64) or a signature list (@vectorize(f64(f64)))", name);
                info->bad = true;
            } else if (!kj_check_is_scalar(decl->ret)) {
                kj_error(c->diag, decl->loc, "a @vectorize function returns a scalar, not %s",
                         kj_type_name(decl->ret));
                info->bad = true;
            }
            for (int i = 0; i < n; i++) {
                if (types[i] && !kj_check_is_scalar(types[i])) {
                    kj_error(c->diag, decl->params[i].loc, "a @vectorize function takes scalars "
                             "(kjit maps it over arrays); '%s' is %s", decl->params[i].name,
                             kj_type_name(types[i]));
                    info->bad = true;
                }
                if (!types[i])
                    info->bad = true;
            }
            if (decl->result_count > KJ_MAX_VEC_OUTPUTS) {
                kj_error(c->diag, decl->results_loc, "a @vectorize function has at most %d "
                         "outputs; '%s' has %d", KJ_MAX_VEC_OUTPUTS, name, decl->result_count);
                info->bad = true;
            }
            for (int k = 1; k < decl->result_count; k++)
                if (!kj_check_is_scalar(decl->results[k])) {
                    kj_error(c->diag, decl->results_loc, "a @vectorize function returns "
                             "scalars, not %s", kj_type_name(decl->results[k]));
                    info->bad = true;
                }
            if (!info->bad) {
                KjIrFunction *fn = new_function(c, info, KJ_IR_FN_SCALAR, name, types, decl->ret);
                if (decl->result_count > 1)
                    add_outputs(c, fn, decl);
            }
            break;
        }
        for (int s = 0; s < decl->signature_count; s++) {
            KjSignature *sig = &decl->signatures[s];
            bool ok = true;
            if (sig->param_count != n) {
                kj_error(c->diag, sig->loc, "this signature has %d parameter%s, but '%s' has %d",
                         sig->param_count, sig->param_count == 1 ? "" : "s", name, n);
                ok = false;
            }
            for (int i = 0; ok && i < n; i++)
                if (!kj_check_is_scalar(sig->params[i])) {
                    kj_error(c->diag, sig->loc, "a @vectorize signature takes scalars, not %s",
                             kj_type_name(sig->params[i]));
                    ok = false;
                }
            if (ok && !kj_check_is_scalar(sig->ret)) {
                kj_error(c->diag, sig->loc, "a @vectorize signature returns a scalar, not %s",
                         kj_type_name(sig->ret));
                ok = false;
            }
            const char *symbol = ok ? signature_symbol(c, name, sig->params, n) : NULL;
            for (int v = 0; ok && v < info->entry->variants.count; v++) {
                KjIrFunction *other = info->entry->variants.items[v];
                if (strcmp(other->symbol, symbol) == 0) {
                    kj_error(c->diag, sig->loc, "two signatures of '%s' take the same parameter "
                             "types", name);
                    ok = false;
                }
            }
            if (!ok) {
                info->bad = true;
                continue;
            }
            new_function(c, info, KJ_IR_FN_SCALAR, symbol, sig->params, sig->ret);
        }
        break;
    }
}

/* The `}` that closes the block opening at `open`: the AST keeps only where
 * a block starts, and this language has no strings or characters to skip. */
static KjLoc closing_brace(KjLoc open)
{
    const KjSource *src = open.src;
    if (!src || !src->text)
        return open;
    const char *p = src->text, *end = src->text + src->len;
    for (int line = 1; line < open.line && p < end; p++)
        if (*p == '\n')
            line++;
    p += open.col - 1;
    if (p >= end || *p != '{')
        return open;
    int depth = 0;
    for (; p < end; p++) {
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
        } else if (p + 1 < end && p[0] == '/' && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/'))
                p++;
            p++;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}' && --depth == 0) {
            KjLoc loc = {src, 1, 1};
            for (const char *q = src->text; q < p; q++) {
                if (*q == '\n') {
                    loc.line++;
                    loc.col = 1;
                } else {
                    loc.col++;
                }
            }
            return loc;
        }
    }
    return open;
}

/* A parameter that sizes a local() at launch keeps the value the launch
 * gave it: the runtime sizes the thread's memory from that value, before
 * the kernel runs, so the kernel may not assign it. */
typedef struct LaunchParams {
    KjChecker *c;
    const KjIrFunction *fn;
} LaunchParams;

static KjIrWalkStep launch_param_set(KjIrWalk *w, const KjIrStmt *s)
{
    LaunchParams *lp = w->data;
    if ((s->kind != KJ_IR_STMT_SET && s->kind != KJ_IR_STMT_FOR) || !s->var || !s->var->is_param)
        return KJ_IR_WALK_ON;
    for (int i = 0; i < lp->fn->launch_locals.count; i++) {
        const KjIrExpr *e = lp->fn->launch_locals.items[i];
        for (int k = 0; k < e->alloc_ndim; k++)
            if (e->alloc_size[k] && kj_ir_expr_reads(e->alloc_size[k], s->var)) {
                kj_error(lp->c->diag, s->loc, "'%s' sizes the local() at line %d and cannot be "
                         "assigned: a size from the launch is the value the launch gives",
                         s->var->name, e->loc.line);
                return KJ_IR_WALK_STOP;
            }
    }
    return KJ_IR_WALK_ON;
}

static void check_launch_params_kept(KjChecker *c, const KjIrFunction *fn)
{
    LaunchParams lp = {c, fn};
    KjIrWalk w = {.stmt = launch_param_set, .data = &lp};
    kj_ir_walk_stmt(&w, fn->body);
}

static void check_variant(KjChecker *c, KjCheckFn *info, KjIrFunction *fn)
{
    KjCheckFnCtx ctx = {.info = info, .ir = fn};
    KjCheckFnCtx *saved = c->cur;
    c->cur = &ctx;
    KjCheckScope params;
    kj_check_push_scope(c, &params);
    for (int i = 0; i < fn->param_count; i++) {
        KjCheckBinding *b = kj_arena_alloc(c->arena, sizeof *b);
        *b = (KjCheckBinding){fn->params[i]->name, fn->params[i], fn->params[i]->loc};
        kj_vec_push(c->arena, &params.bindings, b);
    }
    KjNode *body = info->decl->body;
    bool falls_through = check_block_into(c, body, &fn->body->stmts, NULL, fn->loc);
    if (falls_through && fn->ret != kj_type_void()) {
        KjLoc end = body ? closing_brace(body->loc) : fn->loc;
        kj_error(c->diag, end, "'%s' returns %s, but control can reach the end of its body "
                 "without a return", fn->name, kj_type_name(fn->ret));
    }
    if (fn->launch_locals.count > 0)
        check_launch_params_kept(c, fn);
    if (ctx.call_local_bytes > 0) {
        fn->local_bytes += ctx.call_local_bytes;
        if (fn->local_bytes > KJ_MAX_LOCAL_BYTES)
            kj_error(c->diag, ctx.call_local_loc, "with this call, the local() arrays of '%s' "
                     "and of the functions it calls take %" PRId64 " bytes per thread; the most "
                     "is %d (512 KiB, as on CUDA)", fn->name, fn->local_bytes,
                     KJ_MAX_LOCAL_BYTES);
    }
    kj_check_pop_scope(c);
    c->cur = saved;
}

void kj_check_function(KjChecker *c, KjCheckFn *info)
{
    if (info->state != KJ_CHECK_FN_UNCHECKED)
        return;
    info->state = KJ_CHECK_FN_CHECKING;
    kj_vec_push(c->arena, &c->stack, info);
    for (int v = 0; !info->bad && v < info->entry->variants.count; v++) {
        KjIrFunction *fn = info->entry->variants.items[v];
        int errors = c->diag->error_count;
        check_variant(c, info, fn);
        if (c->diag->error_count > errors) {
            if (info->decl->signature_count > 1) {
                KjBuf sig = {0};
                kj_buf_printf(&sig, "%s(", kj_type_name(fn->ret));
                for (int i = 0; i < fn->param_count; i++)
                    kj_buf_printf(&sig, "%s%s", i ? ", " : "", kj_type_name(fn->params[i]->type));
                kj_buf_printf(&sig, ")");
                kj_note(c->diag, info->decl->loc, "while checking '%s' for the signature %s",
                        info->decl->name, sig.data);
                kj_buf_free(&sig);
            }
            info->bad = true; /* one report per function is enough */
        }
        kj_vec_push(c->arena, &c->module->functions, fn);
    }
    c->stack.count--;
    info->state = KJ_CHECK_FN_DONE;
}

/* ================================================================= module */

static KjCheckFile *file_info(KjChecker *c, KjAstFile *ast)
{
    for (int i = 0; i < c->files.count; i++) {
        KjCheckFile *f = c->files.items[i];
        if (f->ast == ast)
            return f;
    }
    KjCheckFile *f = kj_arena_alloc(c->arena, sizeof *f);
    f->ast = ast;
    kj_vec_push(c->arena, &c->files, f);
    return f;
}

/* An earlier function or constant of the name (its location in *loc), for
 * the one namespace that functions and constants of every file share. */
static bool name_taken(KjChecker *c, const char *name, KjLoc *loc)
{
    KjCheckFn *fn = kj_check_find_function(c, name);
    KjCheckConst *k = kj_check_find_const(c, name);
    if (fn)
        *loc = fn->decl->loc;
    else if (k)
        *loc = k->decl->loc;
    return fn || k;
}

/* The functions and constants of a file, into c->fns and c->consts. */
static void collect_declarations(KjChecker *c, KjCheckFile *file, KjModuleLoader *loader)
{
    for (int d = 0; d < file->ast->decls.count; d++) {
        KjNode *decl = file->ast->decls.items[d];
        if (decl->kind == KJ_NODE_IMPORT) {
            KjAstFile *target = loader ? kj_module_imported(loader, decl) : NULL;
            if (!loader)
                kj_error(c->diag, decl->loc, "import needs a module loader (compile a file, not "
                         "a string, or pass the stdlib folders)");
            if (target)
                kj_vec_push(c->arena, &file->imports, file_info(c, target));
            continue;
        }
        const char *name = decl->kind == KJ_NODE_FUNCTION && decl->fn ? decl->fn->name
                           : decl->kind == KJ_NODE_CONST                ? decl->name
                                                                        : NULL;
        if (!name)
            continue;
        KjLoc loc = decl->kind == KJ_NODE_FUNCTION ? decl->fn->loc : decl->loc, old_loc;
        if (kj_check_is_builtin_name(name)) {
            kj_error(c->diag, loc, "'%s' is the name of a built-in; choose another name", name);
            continue;
        }
        if (name_taken(c, name, &old_loc)) {
            kj_error(c->diag, loc, "a %s named '%s' already exists",
                     kj_check_find_function(c, name) ? "function" : "constant", name);
            kj_note(c->diag, old_loc, "'%s' was declared here", name);
            continue;
        }
        if (decl->kind == KJ_NODE_CONST) {
            KjCheckConst *k = kj_arena_alloc(c->arena, sizeof *k);
            k->decl = decl;
            k->file = file;
            kj_vec_push(c->arena, &c->consts, k);
            continue;
        }
        KjFunctionDecl *fd = decl->fn;
        KjCheckFn *info = kj_arena_alloc(c->arena, sizeof *info);
        info->decl = fd;
        info->file = file;
        info->entry = kj_arena_alloc(c->arena, sizeof *info->entry);
        info->entry->name = fd->name;
        info->entry->kind = fd->kind;
        info->entry->loc = fd->loc;
        kj_vec_push(c->arena, &c->fns, info);
        kj_vec_push(c->arena, &c->module->entries, info->entry);
    }
}

KjIrModule *kj_check(KjArena *arena, KjAstFile *file, KjModuleLoader *loader, KjDiag *diag)
{
    KjChecker c = {.arena = arena, .diag = diag, .check_function = kj_check_function};
    c.module = kj_arena_alloc(arena, sizeof *c.module);
    c.module->arena = arena;
    int errors_before = diag->error_count;

    if (loader) {
        kj_module_load_imports(loader, file);
        for (int i = 0; i < loader->files.count; i++)
            file_info(&c, loader->files.items[i]);
    }
    file_info(&c, file);
    if (diag->error_count > errors_before)
        return NULL; /* an import is missing or does not parse */
    for (int i = 0; i < c.files.count; i++)
        collect_declarations(&c, c.files.items[i], loader);
    for (int i = 0; i < c.consts.count; i++)
        check_const(&c, c.consts.items[i]);
    for (int i = 0; i < c.fns.count; i++)
        declare_function(&c, c.fns.items[i]);
    for (int i = 0; i < c.fns.count; i++)
        kj_check_reduce_map(&c, c.fns.items[i]);
    for (int i = 0; i < c.fns.count; i++)
        kj_check_function(&c, c.fns.items[i]);
    if (diag->error_count > errors_before)
        return NULL;
    return c.module;
}
