/*
 * check_expr.c: expressions and calls, from the AST to typed IR, for the
 * statements in check.c.
 *
 * An expression holds calls that hold expressions: that recursion stays in
 * this file.  kj_check_expr dispatches on the node: literals, names, the
 * ternary, indexing and a.shape[k], members (threadIdx.x, z.real) are here,
 * and so are calls: which kind of callee a name is, checking the arguments
 * (as the built-in's table entry says), and calls of user functions, whose
 * bodies the module level checks on demand (KjChecker.check_function).  The
 * rules below take checked operands and arguments: operators in
 * check_operator.c, built-ins in check_builtin.c (print and the
 * execution-model built-ins in check_print.c and check_exec.c), on top of
 * the IR shorthands and implicit typing of check_type.c and the names of
 * check_scope.c.  An erroneous expression reports once and comes back as
 * NULL, which every rule passes on quietly.
 */
#include "checker.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* ==================================================================== names */

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

/*
 * `c ? a : b` between two arrays of one element type and rank chooses which
 * array a variable names: only as the value of a let or of an array
 * variable's assignment (c->array_choice), so that the back end chooses the
 * array's record once, where the variable is set; indexing each arm or an
 * if/else says the rest.
 */
static KjIrExpr *check_ternary(KjChecker *c, KjNode *n)
{
    bool may_choose_arrays = n == c->array_choice;
    c->array_choice = NULL;
    KjIrExpr *cond = kj_check_expr(c, n->cond);
    c->array_choice = may_choose_arrays ? n->lhs : NULL;
    KjIrExpr *a = kj_check_expr(c, n->lhs);
    c->array_choice = may_choose_arrays ? n->rhs : NULL;
    KjIrExpr *b = kj_check_expr(c, n->rhs);
    c->array_choice = NULL;
    if (!cond || !a || !b)
        return NULL;
    if (cond->type != kj_check_t_bool()) {
        kj_error(c->diag, n->cond->loc, "the condition of '?:' must be bool, not %s",
                 kj_type_name(cond->type));
        return NULL;
    }
    if (kj_check_is_array(a->type) && kj_check_is_array(b->type) && may_choose_arrays) {
        if (a->type != b->type) {
            kj_error(c->diag, n->loc, "the two arms of '?:' are %s and %s; an array-valued '?:' "
                     "chooses between arrays of one element type and rank", kj_type_name(a->type),
                     kj_type_name(b->type));
            return NULL;
        }
        KjIrExpr *e = kj_check_new_expr(c, KJ_IR_SELECT, a->type, n->loc, 3);
        e->args[0] = cond;
        e->args[1] = a;
        e->args[2] = b;
        return e;
    }
    if (kj_check_is_array(a->type) && kj_check_is_array(b->type)) {
        kj_error(c->diag, n->loc, "an array-valued '?:' (%s) is only the value of a let or of an "
                 "array variable's assignment (let src = c ? a : b;); elsewhere index each arm "
                 "(c ? a[i] : b[i])", kj_type_name(a->type));
        return NULL;
    }
    if (kj_check_is_array(a->type) || kj_check_is_array(b->type)) {
        kj_error(c->diag, n->loc, "'?:' chooses between two arrays or two single values, not "
                 "an array (%s) and a value", kj_type_name(kj_check_is_array(a->type) ? a->type
                                                                                 : b->type));
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

/* ==================================================================== calls */

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

/* A call of an entry of the table of built-ins: where it may appear, its
 * argument count, then its rule. */
static KjIrExpr *check_builtin_call(KjChecker *c, KjNode *n, const KjCheckBuiltin *b)
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
    if (b->count ? !b->count(c, n, b) : !kj_check_arg_count_is(c, n, b->name, b->min_args, b->max_args))
        return NULL;
    KjIrExpr **args = kj_arena_alloc(c->arena, sizeof *args * (size_t)(n->args.count + 1));
    if (b->args == KJ_CHECK_ARGS_VALUES) {
        if (!check_args(c, n, args))
            return NULL;
    } else {
        for (int i = 0; i < n->args.count; i++) {
            KjNode *arg = n->args.items[i];
            bool text = b->args == KJ_CHECK_ARGS_PRINT && arg->kind == KJ_NODE_STRING_LIT;
            args[i] = text ? NULL : kj_check_expr(c, arg);
        }
    }
    return b->rule(c, n, b, args);
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
    KjIrExpr *a[4];
    const KjType *cast_to = kj_type_from_name(name, strlen(name));
    if (cast_to) {
        if (!kj_check_arg_count_is(c, n, kj_type_name(cast_to), 1, 1) || !check_args(c, n, a))
            return NULL;
        return kj_check_cast(c, n, cast_to, a[0]);
    }
    const KjCheckBuiltin *builtin = kj_check_builtin_lookup(name);
    if (builtin)
        return check_builtin_call(c, n, builtin);
    double constant_value;
    if (kj_check_builtin_constant(name, &constant_value) || kj_check_find_const(c, name)) {
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
    if (callee->decl->result_count > 1) {
        kj_error(c->diag, n->loc, "'%s' returns %d values, so it is called from the host only "
                 "(kjit run, kjit_call, Python); write a plain fn for a value here", name,
                 callee->decl->result_count);
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
        c->check_function(c, callee);
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
    uint32_t written = ok ? kj_ir_params_written(target) : 0;
    for (int i = 0; ok && i < n->args.count; i++) {
        if (kj_check_is_read_only(e->args[i]) && (i >= 32 || (written >> i) & 1)) {
            char what[160];
            snprintf(what, sizeof what, "this call of %s (its parameter '%s' is stored into)",
                     name, target->params[i]->name);
            kj_check_refuse_read_only(c, e->args[i], ((KjNode *)n->args.items[i])->loc, what);
            ok = false;
        }
    }
    if (callee->impure)
        kj_check_note_impure(c);
    if (ok && target->device_use && !kj_check_device_call(c, target, n->loc))
        return NULL;
    return ok ? e : NULL;
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
        /* -9223372036854775808 is the one literal whose magnitude is not an i64. */
        if (n->unary_op == KJ_UN_NEG && n->lhs && n->lhs->kind == KJ_NODE_INT_LIT &&
            n->lhs->int_value == (uint64_t)INT64_MAX + 1)
            return kj_check_int_const(c, kj_check_t_untyped_int(), INT64_MIN, n->loc);
        return kj_check_unary(c, n, kj_check_expr(c, n->lhs));
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
