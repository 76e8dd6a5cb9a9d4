/*
 * ir_print.c: the --dump=ir printer of the typed IR.
 *
 * It is meant to be read by people and compared by golden tests, so it is
 * deterministic: one statement per line, nested blocks indented by two
 * spaces, and every expression an S-expression that carries its type, such
 * as `(add:f32 x:f32 1:f32)`.
 */
#include "kjit_compiler.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================= printer */

/* Variables print by name; a name that several locals of one function share
 * (shadowing in sibling blocks, or temporaries) gets its id appended. */
typedef struct Printer {
    FILE *out;
    const KjIrFunction *fn;
} Printer;

static void print_lower(FILE *out, const char *s)
{
    for (; *s; s++)
        fputc(tolower((unsigned char)*s), out);
}

static bool name_is_shared(const KjIrFunction *fn, const KjIrVar *var)
{
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *other = fn->locals.items[i];
        if (other != var && strcmp(other->name, var->name) == 0)
            return true;
    }
    return false;
}

static void print_var_name(Printer *p, const KjIrVar *var)
{
    if (p->fn && name_is_shared(p->fn, var))
        fprintf(p->out, "%s.%d", var->name, var->id);
    else
        fputs(var->name, p->out);
}

/* Shortest text that reads back as the same value of the type. */
static void print_float(FILE *out, double value, bool single)
{
    if (isnan(value)) {
        fputs("nan", out);
        return;
    }
    if (isinf(value)) {
        fputs(value < 0 ? "-inf" : "inf", out);
        return;
    }
    /* Never fewer digits than the integer part has: 30, not 3e+01. */
    int first = 1;
    if (fabs(value) >= 1 && fabs(value) < 1e17)
        first = (int)floor(log10(fabs(value))) + 1;
    char text[64];
    for (int digits = first; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, value);
        double back = strtod(text, NULL);
        if (single ? (float)back == (float)value : back == value)
            break;
    }
    fputs(text, out);
    if (!strpbrk(text, ".en"))
        fputs(".0", out);
}

static void print_const(Printer *p, const KjIrExpr *e)
{
    const KjType *t = e->type;
    if (t->kind == KJ_TYPE_BOOL)
        fputs(e->const_int ? "true" : "false", p->out);
    else if (kj_type_is_signed(t))
        fprintf(p->out, "%" PRId64, (int64_t)e->const_int);
    else if (kj_type_is_int(t))
        fprintf(p->out, "%" PRIu64, e->const_int);
    else if (kj_type_is_float(t))
        print_float(p->out, e->const_float, t->kind == KJ_TYPE_F32);
    else if (kj_type_is_complex(t)) {
        fputc('(', p->out);
        print_float(p->out, e->const_float, t->kind == KJ_TYPE_C64);
        fputs(", ", p->out);
        print_float(p->out, e->const_imag, t->kind == KJ_TYPE_C64);
        fputc(')', p->out);
    } else if (t->kind == KJ_TYPE_UNTYPED_INT)
        fprintf(p->out, "%" PRId64, (int64_t)e->const_int);
    else
        print_float(p->out, e->const_float, false);
    fprintf(p->out, ":%s", kj_type_name(t));
}

static void print_expr(Printer *p, const KjIrExpr *e)
{
    if (!e) {
        fputs("<null>", p->out);
        return;
    }
    if (e->opaque) { /* (opaque VALUE): see KjIrExpr.opaque */
        KjIrExpr value = *e;
        value.opaque = false;
        fputs("(opaque ", p->out);
        print_expr(p, &value);
        fputc(')', p->out);
        return;
    }
    switch (e->op) {
    case KJ_IR_CONST:
        print_const(p, e);
        return;
    case KJ_IR_VAR:
        print_var_name(p, e->var);
        fprintf(p->out, ":%s", kj_type_name(e->type));
        return;
    case KJ_IR_SREG:
        fprintf(p->out, "%s:%s", kj_special_reg_names[e->sreg], kj_type_name(e->type));
        return;
    default:
        break;
    }
    fputc('(', p->out);
    switch (e->op) {
    case KJ_IR_MATH:
        fprintf(p->out, "math.%s", kj_math_names[e->math]);
        break;
    case KJ_IR_CALL:
        fprintf(p->out, "call.%s", e->callee ? e->callee->symbol : "<null>");
        break;
    case KJ_IR_DIM:
        fprintf(p->out, "dim.%d", e->dim);
        break;
    case KJ_IR_ATOMIC:
        fputs(kj_atomic_names[e->atomic], p->out);
        break;
    case KJ_IR_EXEC:
        fputs(kj_exec_names[e->exec], p->out);
        break;
    default:
        print_lower(p->out, kj_ir_op_name(e->op));
        break;
    }
    fprintf(p->out, ":%s", kj_type_name(e->type));
    if (e->op == KJ_IR_DYNAMIC_SHARED)
        fputs(" dynamic", p->out);
    if (e->op == KJ_IR_CONST_ARRAY)
        fprintf(p->out, " %s", e->const_array->name);
    if (e->op == KJ_IR_PRINT) {
        fputc(' ', p->out);
        kj_write_quoted(p->out, e->format ? e->format : "");
    }
    if (e->op == KJ_IR_SHARED || e->op == KJ_IR_LOCAL) {
        for (int i = 0; i < e->alloc_ndim; i++) {
            fputs(i ? "x" : " ", p->out);
            if (e->alloc_size[i]) /* from the launch */
                print_expr(p, e->alloc_size[i]);
            else
                fprintf(p->out, "%" PRId64, e->alloc_shape[i]);
        }
    }
    for (int i = 0; i < e->arg_count; i++) {
        fputc(' ', p->out);
        print_expr(p, e->args[i]);
    }
    /* outputs 1.. of a function of several, into these variables */
    for (int k = 1; e->op == KJ_IR_CALL && e->call_outputs && k < e->callee->output_count; k++) {
        fputs(k == 1 ? " -> " : ", ", p->out);
        print_var_name(p, e->call_outputs[k]);
    }
    fputc(')', p->out);
}

static void print_indent(Printer *p, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs("  ", p->out);
}

/* Not ir.c's walk: a statement's text nests its expressions' text inside
 * its own (`store a[i] = v`, `if cond`), is written at its depth, and goes
 * on between its children (`else`), where the walk shows each expression
 * on its own before the statement and nothing between the children. */
static void print_stmt(Printer *p, const KjIrStmt *s, int depth);

/* A block's statements at `depth`; a nested block that stands alone is
 * written as `block` so its scope stays visible. */
static void print_body(Printer *p, const KjIrStmt *s, int depth)
{
    if (s && s->kind == KJ_IR_STMT_BLOCK) {
        for (int i = 0; i < s->stmts.count; i++)
            print_stmt(p, s->stmts.items[i], depth);
    } else if (s) {
        print_stmt(p, s, depth);
    }
}

static void print_stmt(Printer *p, const KjIrStmt *s, int depth)
{
    print_indent(p, depth);
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        fputs("block\n", p->out);
        print_body(p, s, depth + 1);
        return;
    case KJ_IR_STMT_EVAL:
        fputs("eval ", p->out);
        print_expr(p, s->value);
        break;
    case KJ_IR_STMT_SET:
        print_var_name(p, s->var);
        fputs(" = ", p->out);
        print_expr(p, s->value);
        break;
    case KJ_IR_STMT_STORE:
        fputs("store ", p->out);
        print_expr(p, s->array);
        fputs(" [", p->out);
        for (int i = 0; i < s->index_count; i++) {
            if (i)
                fputs(", ", p->out);
            print_expr(p, s->indices[i]);
        }
        fputs("] = ", p->out);
        print_expr(p, s->value);
        break;
    case KJ_IR_STMT_IF:
        fputs("if ", p->out);
        print_expr(p, s->cond);
        fputc('\n', p->out);
        print_body(p, s->then_stmt, depth + 1);
        if (s->else_stmt) {
            print_indent(p, depth);
            fputs("else\n", p->out);
            print_body(p, s->else_stmt, depth + 1);
        }
        return;
    case KJ_IR_STMT_FOR:
        fputs("for ", p->out);
        print_var_name(p, s->var);
        fputs(" = ", p->out);
        print_expr(p, s->start);
        fputs(" to ", p->out);
        print_expr(p, s->stop);
        fputs(" step ", p->out);
        print_expr(p, s->step);
        fputc('\n', p->out);
        print_body(p, s->body, depth + 1);
        return;
    case KJ_IR_STMT_WHILE:
        fputs("while ", p->out);
        print_expr(p, s->cond);
        fputc('\n', p->out);
        print_body(p, s->body, depth + 1);
        return;
    case KJ_IR_STMT_BREAK:
        fputs("break", p->out);
        break;
    case KJ_IR_STMT_CONTINUE:
        fputs("continue", p->out);
        break;
    case KJ_IR_STMT_RETURN:
        fputs("return", p->out);
        if (s->value) {
            fputc(' ', p->out);
            print_expr(p, s->value);
        }
        break;
    case KJ_IR_STMT_THREADS:
        fputs("threads", p->out);
        if (s->start || s->stop) {
            fputs(" with threadIdx.x in [", p->out);
            if (s->start)
                print_expr(p, s->start);
            else
                fputs("0", p->out);
            fputs(", ", p->out);
            if (s->stop)
                print_expr(p, s->stop);
            else
                fputs("blockDim.x", p->out);
            fputs(")", p->out);
        }
        fputc('\n', p->out);
        print_body(p, s->body, depth + 1);
        return;
    case KJ_IR_STMT_PARFOR:
        fputs("parfor ", p->out);
        print_var_name(p, s->var);
        fputs(" < ", p->out);
        print_expr(p, s->stop);
        fputc('\n', p->out);
        print_body(p, s->body, depth + 1);
        return;
    default:
        fputs("<bad statement>", p->out);
        break;
    }
    fputc('\n', p->out);
}

static const char *function_kind_name(KjIrFunctionKind kind)
{
    switch (kind) {
    case KJ_IR_FN_PLAIN: return "plain";
    case KJ_IR_FN_SCALAR: return "scalar";
    case KJ_IR_FN_KERNEL: return "kernel";
    case KJ_IR_FN_VEC_KERNEL: return "vec_kernel";
    }
    return "?";
}

/* Header line: `kind name(params) -> ret [symbol ..., ...]`, then one `var`
 * line per local that is not a parameter, then the body. */
void kj_ir_print_function(FILE *out, const KjIrFunction *fn)
{
    Printer p = {out, fn};
    fprintf(out, "%s %s(", function_kind_name(fn->kind), fn->name);
    for (int i = 0; i < fn->param_count; i++) {
        fputs(i ? ", " : "", out);
        print_var_name(&p, fn->params[i]);
        fprintf(out, ": %s", kj_type_name(fn->params[i]->type));
    }
    if (fn->output_count > 1) { /* -> (f64, i32), outputs 1.. in their variables */
        fprintf(out, ") -> (%s", kj_type_name(fn->ret));
        for (int k = 1; k < fn->output_count; k++) {
            fprintf(out, ", %s in ", kj_type_name(fn->outputs[k]->type));
            print_var_name(&p, fn->outputs[k]);
        }
        fprintf(out, ") [symbol %s", fn->symbol);
    } else {
        fprintf(out, ") -> %s [symbol %s", kj_type_name(fn->ret), fn->symbol);
    }
    if (fn->kind == KJ_IR_FN_KERNEL) {
        fprintf(out, ", shared %" PRId64 " bytes", fn->shared_bytes);
        if (fn->uses_dynamic_shared)
            fputs(" + dynamic", out);
        if (fn->local_bytes)
            fprintf(out, ", local %" PRId64 " bytes", fn->local_bytes);
        if (fn->launch_locals.count)
            fprintf(out, ", %d local() sized at launch",
                     fn->launch_locals.count);
        if (fn->uses_syncthreads)
            fputs(", syncthreads", out);
        if (fn->uses_syncgrid)
            fputs(", syncgrid", out);
    }
    if (fn->kind == KJ_IR_FN_VEC_KERNEL && fn->scalar)
        fprintf(out, ", lifts %s", fn->scalar->symbol);
    if (fn->device_use) {
        fprintf(out, ", device: %s uses %s", fn->device_chain, fn->device_use);
        if (fn->uses_syncthreads)
            fputs(", syncthreads", out);
        if (fn->uses_syncgrid)
            fputs(", syncgrid", out);
    }
    fputs("]\n", out);
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *var = fn->locals.items[i];
        if (var->is_param)
            continue;
        fputs("  var ", out);
        print_var_name(&p, var);
        fprintf(out, ": %s\n", kj_type_name(var->type));
    }
    print_body(&p, fn->body, 1);
}

void kj_ir_print_module(FILE *out, const KjIrModule *module)
{
    for (int i = 0; i < module->functions.count; i++) {
        if (i)
            fputc('\n', out);
        kj_ir_print_function(out, module->functions.items[i]);
    }
}
