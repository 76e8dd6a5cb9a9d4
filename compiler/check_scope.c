/*
 * check_scope.c: the bottom of the checker: what a name means.
 *
 * The scopes of a function's locals and the lookup of a name in them, the
 * module's functions and constants (and whether the file being checked may
 * see them), the tables of built-in names (the names user functions may not
 * take, and which list a called name belongs to), the device-function marks
 * that a kernel built-in leaves on a plain function, and the argument count
 * every call rule checks first.  Everything here reads the checker's state
 * and the AST; nothing checks an expression, so every other checker file may
 * call it (checker.h draws the order).
 */
#include "checker.h"

#include <math.h>
#include <string.h>

/* ========================================================= scopes, locals */

void kj_check_push_scope(KjChecker *c, KjCheckScope *scope)
{
    scope->parent = c->cur->scope;
    scope->bindings = (KjVec){0};
    c->cur->scope = scope;
}

void kj_check_pop_scope(KjChecker *c)
{
    c->cur->scope = c->cur->scope->parent;
}

KjCheckBinding *kj_check_lookup_local(KjChecker *c, const char *name)
{
    if (!c->cur)
        return NULL;
    for (KjCheckScope *s = c->cur->scope; s; s = s->parent)
        for (int i = s->bindings.count - 1; i >= 0; i--) {
            KjCheckBinding *b = s->bindings.items[i];
            if (strcmp(b->name, name) == 0)
                return b;
        }
    return NULL;
}

/* Declares a local.  A name may not be declared again while an earlier one of
 * the same function is visible (no shadowing of locals or parameters); blocks
 * that do not nest may reuse names. */
KjIrVar *kj_check_declare(KjChecker *c, const char *name, const KjType *type, KjLoc loc)
{
    KjCheckBinding *old = kj_check_lookup_local(c, name);
    if (old) {
        kj_error(c->diag, loc, "'%s' is already declared in this function; pick another name",
                 name);
        kj_note(c->diag, old->loc, "'%s' was declared here", name);
    }
    KjIrVar *var = kj_ir_new_var(c->arena, c->cur->ir, name, type, loc);
    if (old)
        return var; /* uses keep meaning the first one: no follow-on errors */
    KjCheckBinding *b = kj_arena_alloc(c->arena, sizeof *b);
    b->name = name;
    b->var = var;
    b->loc = loc;
    kj_vec_push(c->arena, &c->cur->scope->bindings, b);
    return var;
}

KjCheckFn *kj_check_find_function(KjChecker *c, const char *name)
{
    for (int i = 0; i < c->fns.count; i++) {
        KjCheckFn *info = c->fns.items[i];
        if (strcmp(info->decl->name, name) == 0)
            return info;
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

/* ============================================================== constants */

/* The file whose code is being checked (a function's, or a constant's). */
KjCheckFile *kj_check_current_file(KjChecker *c)
{
    return c->cur ? c->cur->info->file : c->const_file;
}

KjCheckConst *kj_check_find_const(KjChecker *c, const char *name)
{
    for (int i = 0; i < c->consts.count; i++) {
        KjCheckConst *k = c->consts.items[i];
        if (strcmp(k->decl->name, name) == 0)
            return k;
    }
    return NULL;
}

KjIrExpr *kj_check_const_value(KjChecker *c, KjCheckConst *k, KjLoc loc)
{
    const char *name = k->decl->name;
    KjCheckFile *here = kj_check_current_file(c);
    bool visible = !here || k->file == here;
    for (int i = 0; here && i < here->imports.count; i++)
        visible = visible || here->imports.items[i] == k->file;
    if (!visible) {
        kj_error(c->diag, loc, "'%s' is defined in %s, which this file does not import", name,
                 k->file->ast->src->path);
        return NULL;
    }
    if (k->state != KJ_CHECK_FN_DONE) {
        if (k->state == KJ_CHECK_FN_CHECKING)
            kj_error(c->diag, loc, "the value of the constant '%s' uses '%s' itself", name, name);
        else {
            kj_error(c->diag, loc, "the constant '%s' is used before its definition", name);
            kj_note(c->diag, k->decl->loc, "'%s' is defined here; define it before the constant "
                    "that uses it", name);
        }
        return NULL;
    }
    if (!k->value)
        return NULL; /* its own error has been reported */
    KjIrExpr *e = kj_check_clone_expr(c, k->value);
    e->loc = loc;
    return e;
}

/* ======================================================= device functions */

/*
 * A plain function that uses a kernel built-in, or calls a function that does,
 * is a device function: kernels and other device functions may call it, a
 * @vectorize function may not (the error names the chain of calls down to the
 * built-in), and the runtime refuses to call it from the host.  Callees are
 * checked before their callers, so a call site already knows whether its
 * callee is one.
 */

static void mark_device(KjChecker *c, KjIrFunction *fn, const char *use, KjLoc loc,
                        const char *callee_chain)
{
    if (fn->device_use)
        return; /* the first use found is the one errors name */
    fn->device_use = kj_arena_strdup(c->arena, use);
    fn->device_loc = loc;
    fn->device_chain = callee_chain ? kj_arena_printf(c->arena, "%s -> %s", fn->name, callee_chain)
                                    : fn->name;
}

void kj_check_device_use(KjChecker *c, const char *what, KjLoc loc)
{
    mark_device(c, c->cur->ir, what, loc, NULL);
}

bool kj_check_device_call(KjChecker *c, const KjIrFunction *callee, KjLoc loc)
{
    KjIrFunction *caller = c->cur ? c->cur->ir : NULL;
    bool gufunc = c->cur && c->cur->info->decl->kind == KJ_FN_GUVECTORIZE;
    if (caller && !gufunc &&
        (caller->kind == KJ_IR_FN_KERNEL || caller->kind == KJ_IR_FN_PLAIN)) {
        if (caller->kind == KJ_IR_FN_PLAIN)
            mark_device(c, caller, callee->device_use, callee->device_loc, callee->device_chain);
        caller->uses_syncthreads |= callee->uses_syncthreads;
        caller->uses_syncgrid |= callee->uses_syncgrid;
        return true;
    }
    const char *name = caller ? caller->name : "?";
    kj_error(c->diag, loc, "'%s' is @%s, so it cannot call '%s', a device function: "
             "%s -> %s uses %s", name, gufunc ? "guvectorize" : "vectorize", callee->name, name,
             callee->device_chain, callee->device_use);
    kj_note(c->diag, callee->device_loc, "%s is used here; kernel built-ins are for kernels and "
            "the plain functions only kernels call", callee->device_use);
    return false;
}

/* ====================================================== built-in names */

static const char *const kernel_names[] = {
#define X(name) name,
    KJ_REGISTER_GROUPS(X)
#undef X
};


static const char *const call_builtin_names[] = {
#define X(id, name, min_args, max_args, where, rule) name,
    KJ_CALL_BUILTINS(X)
#undef X
#define X(id, name, barrier, min_args, max_args, form, nvvm) name,
    KJ_EXEC_OPS(X)
#undef X
};

static const char *const constant_names[] = {
#define X(id, name, value) name,
    KJ_CONSTANT_BUILTINS(X)
#undef X
};

static bool call_builtin_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof call_builtin_names / sizeof *call_builtin_names; i++)
        if (strcmp(call_builtin_names[i], name) == 0)
            return true;
    return false;
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

/* The index of the math function or atomic `name` in its list, or -1. */
int kj_check_math_lookup(const char *name)
{
    for (int i = 0; i < KJ_MATH_COUNT; i++)
        if (strcmp(kj_math_names[i], name) == 0)
            return i;
    return -1;
}

int kj_check_atomic_lookup(const char *name)
{
    for (int i = 0; i < KJ_ATOMIC_COUNT; i++)
        if (strcmp(kj_atomic_names[i], name) == 0)
            return i;
    return -1;
}

/* Names a user function may not take. */
bool kj_check_is_builtin_name(const char *name)
{
    return call_builtin_lookup(name) || constant_lookup(name) >= 0 ||
           kj_check_register_group(name) >= 0 || kj_check_math_lookup(name) >= 0 ||
           kj_check_atomic_lookup(name) >= 0 || kj_type_from_name(name, strlen(name)) != NULL ||
           kj_check_is_kernel_constant(name);
}

static bool in_kernel(KjChecker *c)
{
    return c->cur && c->cur->ir->kind == KJ_IR_FN_KERNEL;
}

/* A kernel built-in is allowed in kernels, and in plain functions, which it
 * makes device functions (kj_check_device_use). */
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


bool kj_check_is_kernel_constant(const char *name)
{
    return strcmp(name, "warpsize") == 0;
}


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
