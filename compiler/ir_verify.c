/*
 * ir_verify.c: the verifier of the typed IR.  It checks what the back ends
 * rely on and can be run after any pass (pipeline.c, --verify); it never
 * trusts the checker.
 */
#include "kjit_compiler.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ verifier */

/*
 * Needs: a module built by the checker or a later pass.
 * Guarantees (when it returns true): every expression has a settled type that
 * its op accepts, operands agree with it, variables belong to their function,
 * callees come earlier in module->functions, break and continue sit inside a
 * loop, returns match the function's type, kernel-only ops appear in kernels.
 */
typedef struct Verifier {
    const KjIrModule *module;
    const KjIrFunction *fn;
    int fn_index;
    int loop_depth;
    bool in_threads; /* inside a THREADS statement */
    KjBuf why;
} Verifier;

static bool fail(Verifier *v, KjLoc loc, const char *fmt, ...)
{
    if (v->why.len == 0) {
        kj_buf_printf(&v->why, "%s: ", v->fn ? v->fn->symbol : "module");
        if (loc.src)
            kj_buf_printf(&v->why, "%s:%d:%d: ", loc.src->path, loc.line, loc.col);
        va_list ap;
        va_start(ap, fmt);
        kj_buf_vprintf(&v->why, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool is_element_type(const KjType *t)
{
    return t && t->kind >= KJ_TYPE_BOOL && t->kind <= KJ_TYPE_LAST_SCALAR;
}

static bool var_belongs(const Verifier *v, const KjIrVar *var)
{
    return var && var->id >= 0 && var->id < v->fn->locals.count &&
           v->fn->locals.items[var->id] == var;
}

static bool kernel_only(KjIrOp op)
{
    return op == KJ_IR_SREG || op == KJ_IR_SHARED || op == KJ_IR_LOCAL || op == KJ_IR_ATOMIC ||
           op == KJ_IR_SYNCTHREADS || op == KJ_IR_EXEC || op == KJ_IR_DYNAMIC_SHARED;
}

static bool verify_expr(Verifier *v, const KjIrExpr *e);

static bool args_are(Verifier *v, const KjIrExpr *e, int count, const KjType *type)
{
    if (e->arg_count != count)
        return fail(v, e->loc, "%s takes %d operands, has %d", kj_ir_op_name(e->op), count,
                    e->arg_count);
    for (int i = 0; i < count; i++) {
        if (type && e->args[i]->type != type)
            return fail(v, e->loc, "%s operand %d is %s, expected %s", kj_ir_op_name(e->op), i,
                        kj_type_name(e->args[i]->type), kj_type_name(type));
    }
    return true;
}

/* The operands and type of an execution-model built-in (KJ_EXEC_OPS's table). */
static bool verify_exec(Verifier *v, const KjIrExpr *e)
{
    const KjType *t = e->type, *u32 = kj_type_scalar(KJ_TYPE_U32);
    const KjType *b = kj_type_scalar(KJ_TYPE_BOOL), *i32 = kj_type_scalar(KJ_TYPE_I32);
    const KjType *void_type = kj_type_void();
    const char *name = (unsigned)e->exec < KJ_EXEC_COUNT ? kj_exec_names[e->exec] : "?";
    bool ok;
    switch (e->exec) {
    case KJ_EXEC_LANEID:
        ok = t == i32 && args_are(v, e, 0, NULL);
        break;
    case KJ_EXEC_ACTIVEMASK:
        ok = t == u32 && args_are(v, e, 1, u32);
        break;
    case KJ_EXEC_BALLOT: case KJ_EXEC_ALL: case KJ_EXEC_ANY:
        ok = t == (e->exec == KJ_EXEC_BALLOT ? u32 : b) && args_are(v, e, 2, NULL) &&
             e->args[0]->type == u32 && e->args[1]->type == b;
        break;
    case KJ_EXEC_SHFL: case KJ_EXEC_SHFL_UP: case KJ_EXEC_SHFL_DOWN: case KJ_EXEC_SHFL_XOR:
        ok = (kj_type_is_float(t) || kj_type_int_bits(t) == 32 || kj_type_int_bits(t) == 64) &&
             args_are(v, e, 3, NULL) && e->args[0]->type == u32 && e->args[1]->type == t &&
             e->args[2]->type == i32;
        break;
    case KJ_EXEC_SYNCWARP:
        ok = t == void_type && args_are(v, e, 1, u32);
        break;
    case KJ_EXEC_SYNCTHREADS_COUNT: case KJ_EXEC_SYNCTHREADS_AND: case KJ_EXEC_SYNCTHREADS_OR:
        ok = t == (e->exec == KJ_EXEC_SYNCTHREADS_COUNT ? i32 : b) && args_are(v, e, 1, b);
        break;
    case KJ_EXEC_THREADFENCE: case KJ_EXEC_THREADFENCE_BLOCK: case KJ_EXEC_SYNCGRID:
        ok = t == void_type && args_are(v, e, 0, NULL);
        break;
    case KJ_EXEC_MMA: /* the pair (d0, d1) of the whole warp's mask */
        ok = t == kj_type_scalar(KJ_TYPE_C128) && args_are(v, e, 5, NULL) &&
             e->args[0]->type == u32 && e->args[1]->type == kj_type_scalar(KJ_TYPE_F64) &&
             e->args[2]->type == e->args[1]->type && e->args[3]->type == e->args[1]->type &&
             e->args[4]->type == e->args[1]->type;
        break;
    default:
        return fail(v, e->loc, "bad execution op %d", (int)e->exec);
    }
    return ok || fail(v, e->loc, "%s typed %s or with bad operands", name, kj_type_name(t));
}

static bool verify_expr_op(Verifier *v, const KjIrExpr *e)
{
    const KjType *t = e->type;
    const KjType *b = kj_type_scalar(KJ_TYPE_BOOL);
    const KjType *i64 = kj_type_scalar(KJ_TYPE_I64);
    switch (e->op) {
    case KJ_IR_CONST:
        if (!is_element_type(t))
            return fail(v, e->loc, "constant of type %s", kj_type_name(t));
        return e->arg_count == 0 || fail(v, e->loc, "constant with operands");
    case KJ_IR_VAR:
        if (!var_belongs(v, e->var))
            return fail(v, e->loc, "variable %s is not a local of this function",
                        e->var ? e->var->name : "<null>");
        return e->var->type == t || fail(v, e->loc, "variable %s used as %s", e->var->name,
                                         kj_type_name(t));
    case KJ_IR_NEG:
        if (!kj_type_is_numeric(t))
            return fail(v, e->loc, "neg of %s", kj_type_name(t));
        return args_are(v, e, 1, t);
    case KJ_IR_NOT:
        return t == b ? args_are(v, e, 1, b) : fail(v, e->loc, "not of %s", kj_type_name(t));
    case KJ_IR_BITNOT:
        return kj_type_is_int(t) ? args_are(v, e, 1, t)
                                 : fail(v, e->loc, "bitnot of %s", kj_type_name(t));
    case KJ_IR_ADD:
    case KJ_IR_SUB:
    case KJ_IR_MUL:
    case KJ_IR_DIV:
        if (!kj_type_is_numeric(t))
            return fail(v, e->loc, "%s of %s", kj_ir_op_name(e->op), kj_type_name(t));
        return args_are(v, e, 2, t);
    case KJ_IR_REM:
        if (!kj_type_is_int(t) && !kj_type_is_float(t))
            return fail(v, e->loc, "rem of %s", kj_type_name(t));
        return args_are(v, e, 2, t);
    case KJ_IR_BITAND:
    case KJ_IR_BITOR:
    case KJ_IR_BITXOR:
    case KJ_IR_SHL:
    case KJ_IR_SHR:
        if (!kj_type_is_int(t))
            return fail(v, e->loc, "%s of %s", kj_ir_op_name(e->op), kj_type_name(t));
        return args_are(v, e, 2, t);
    case KJ_IR_EQ:
    case KJ_IR_NE:
    case KJ_IR_LT:
    case KJ_IR_LE:
    case KJ_IR_GT:
    case KJ_IR_GE: {
        if (t != b)
            return fail(v, e->loc, "comparison gives %s, not bool", kj_type_name(t));
        if (!args_are(v, e, 2, NULL))
            return false;
        const KjType *operand = e->args[0]->type;
        if (e->args[1]->type != operand)
            return fail(v, e->loc, "comparison of %s with %s", kj_type_name(operand),
                        kj_type_name(e->args[1]->type));
        bool ordered = e->op != KJ_IR_EQ && e->op != KJ_IR_NE;
        if (ordered ? !(kj_type_is_int(operand) || kj_type_is_float(operand))
                    : !is_element_type(operand))
            return fail(v, e->loc, "%s on %s", kj_ir_op_name(e->op), kj_type_name(operand));
        return true;
    }
    case KJ_IR_LOGAND:
    case KJ_IR_LOGOR:
        return t == b ? args_are(v, e, 2, b) : fail(v, e->loc, "logical op gives %s", kj_type_name(t));
    case KJ_IR_SELECT:
        if (!is_element_type(t) && t->kind != KJ_TYPE_ARRAY)
            return fail(v, e->loc, "select of %s", kj_type_name(t));
        if (!args_are(v, e, 3, NULL))
            return false;
        if (e->args[0]->type != b || e->args[1]->type != t || e->args[2]->type != t)
            return fail(v, e->loc, "select operands do not match %s", kj_type_name(t));
        return true;
    case KJ_IR_CAST: {
        if (!args_are(v, e, 1, NULL))
            return false;
        const KjType *from = e->args[0]->type;
        if (!is_element_type(t) || !is_element_type(from))
            return fail(v, e->loc, "cast from %s to %s", kj_type_name(from), kj_type_name(t));
        if (kj_type_is_complex(from) && !kj_type_is_complex(t))
            return fail(v, e->loc, "cast from complex %s to %s", kj_type_name(from),
                        kj_type_name(t));
        return true;
    }
    case KJ_IR_CALL: {
        const KjIrFunction *callee = e->callee;
        int index = -1;
        for (int i = 0; callee && i < v->module->functions.count; i++)
            if (v->module->functions.items[i] == callee)
                index = i;
        if (index < 0)
            return fail(v, e->loc, "call of a function that is not in the module");
        if (index >= v->fn_index)
            return fail(v, e->loc, "call of %s, which does not come before its caller",
                        callee->symbol);
        if (callee->kind != KJ_IR_FN_PLAIN && callee->kind != KJ_IR_FN_SCALAR)
            return fail(v, e->loc, "call of %s, which is not a plain or scalar function",
                        callee->symbol);
        if (callee->device_use && v->fn->kind != KJ_IR_FN_KERNEL && !v->fn->device_use)
            return fail(v, e->loc, "call of the device function %s from %s, which is neither a "
                        "kernel nor a device function", callee->symbol, v->fn->symbol);
        if (callee->uses_syncthreads && !v->fn->uses_syncthreads)
            return fail(v, e->loc, "call of %s, which uses syncthreads(), from %s, which is not "
                        "marked so", callee->symbol, v->fn->symbol);
        if (callee->uses_syncgrid && !v->fn->uses_syncgrid)
            return fail(v, e->loc, "call of %s, which uses syncgrid(), from %s, which is not "
                        "marked so", callee->symbol, v->fn->symbol);
        if (e->arg_count != callee->param_count)
            return fail(v, e->loc, "call of %s with %d arguments, it takes %d", callee->symbol,
                        e->arg_count, callee->param_count);
        for (int i = 0; i < e->arg_count; i++)
            if (e->args[i]->type != callee->params[i]->type)
                return fail(v, e->loc, "argument %d of %s is %s, expected %s", i, callee->symbol,
                            kj_type_name(e->args[i]->type),
                            kj_type_name(callee->params[i]->type));
        /* several outputs: every one taken into a variable of its type, in
         * a VEC_KERNEL (vectorize.c) */
        if ((callee->output_count > 1) != (e->call_outputs != NULL) ||
            (e->call_outputs && v->fn->kind != KJ_IR_FN_VEC_KERNEL))
            return fail(v, e->loc, "call of %s, which has %d outputs, %s", callee->symbol,
                        callee->output_count, e->call_outputs ? "takes them outside a "
                        "vectorized kernel" : "takes only the first");
        for (int k = 1; e->call_outputs && k < callee->output_count; k++)
            if (!e->call_outputs[k] || !var_belongs(v, e->call_outputs[k]) ||
                e->call_outputs[k]->type != callee->outputs[k]->type)
                return fail(v, e->loc, "output %d of %s taken into a bad variable", k,
                            callee->symbol);
        return t == callee->ret ||
               fail(v, e->loc, "call of %s typed %s, returns %s", callee->symbol,
                    kj_type_name(t), kj_type_name(callee->ret));
    }
    case KJ_IR_MATH: {
        if (e->math < 0 || e->math >= KJ_MATH_COUNT)
            return fail(v, e->loc, "bad math function %d", (int)e->math);
        int arity = kj_math_arity[e->math];
        bool predicate = e->math == KJ_MATH_ISNAN || e->math == KJ_MATH_ISINF ||
                         e->math == KJ_MATH_ISFINITE;
        if (predicate) {
            if (t != b || !args_are(v, e, arity, NULL) || !kj_type_is_float(e->args[0]->type))
                return fail(v, e->loc, "%s must take a float and give bool",
                            kj_math_names[e->math]);
            return true;
        }
        if (!kj_type_is_float(t) && !(kj_type_is_complex(t) && kj_math_complex[e->math]))
            return fail(v, e->loc, "math.%s of %s", kj_math_names[e->math], kj_type_name(t));
        return args_are(v, e, arity, t);
    }
    case KJ_IR_IPOW:
        if (!args_are(v, e, 2, NULL))
            return false;
        if (!(kj_type_is_int(t) || kj_type_is_float(t) ||
              (kj_type_is_complex(t) && e->args[1]->op == KJ_IR_CONST)) ||
            e->args[0]->type != t || !kj_type_is_int(e->args[1]->type))
            return fail(v, e->loc, "ipow of %s by %s as %s", kj_type_name(e->args[0]->type),
                        kj_type_name(e->args[1]->type), kj_type_name(t));
        return true;
    case KJ_IR_COMPLEX:
        if (!kj_type_is_complex(t))
            return fail(v, e->loc, "complex() typed %s", kj_type_name(t));
        return args_are(v, e, 2, kj_type_complex_part(t));
    case KJ_IR_REAL:
    case KJ_IR_IMAG:
    case KJ_IR_CABS:
    case KJ_IR_CARG:
        if (!args_are(v, e, 1, NULL))
            return false;
        if (!kj_type_is_complex(e->args[0]->type) ||
            kj_type_complex_part(e->args[0]->type) != t)
            return fail(v, e->loc, "%s of %s typed %s", kj_ir_op_name(e->op),
                        kj_type_name(e->args[0]->type), kj_type_name(t));
        return true;
    case KJ_IR_CONJ:
        if (!kj_type_is_complex(t))
            return fail(v, e->loc, "conj typed %s", kj_type_name(t));
        return args_are(v, e, 1, t);
    case KJ_IR_POLAR:
        if (!kj_type_is_complex(t))
            return fail(v, e->loc, "polar typed %s", kj_type_name(t));
        return args_are(v, e, 2, kj_type_complex_part(t));
    case KJ_IR_MULHI:
        if (!kj_type_is_int(t) || kj_type_int_bits(t) < 32)
            return fail(v, e->loc, "mulhi typed %s", kj_type_name(t));
        return args_are(v, e, 2, t);
    case KJ_IR_LOAD: {
        if (e->arg_count < 2)
            return fail(v, e->loc, "load without indices");
        const KjType *array = e->args[0]->type;
        if (!array || array->kind != KJ_TYPE_ARRAY)
            return fail(v, e->loc, "load from %s", kj_type_name(array));
        if (e->arg_count != 1 + array->ndim)
            return fail(v, e->loc, "load from %s with %d indices", kj_type_name(array),
                        e->arg_count - 1);
        for (int i = 1; i < e->arg_count; i++)
            if (e->args[i]->type != i64)
                return fail(v, e->loc, "index %d is %s, not i64", i - 1,
                            kj_type_name(e->args[i]->type));
        return t == array->elem ||
               fail(v, e->loc, "load from %s typed %s", kj_type_name(array), kj_type_name(t));
    }
    case KJ_IR_VIEW: {
        const KjType *array = e->args && e->arg_count > 0 ? e->args[0]->type : NULL;
        if (!array || array->kind != KJ_TYPE_ARRAY)
            return fail(v, e->loc, "view of %s", kj_type_name(array));
        int k = e->arg_count - 1;
        if (k < 1 || k >= array->ndim)
            return fail(v, e->loc, "view of %s with %d indices", kj_type_name(array), k);
        for (int i = 1; i < e->arg_count; i++)
            if (e->args[i]->type != i64)
                return fail(v, e->loc, "view index %d is %s, not i64", i - 1,
                            kj_type_name(e->args[i]->type));
        if (v->fn->kind != KJ_IR_FN_VEC_KERNEL)
            return fail(v, e->loc, "view outside a vectorized kernel");
        return t == kj_type_array(array->elem, array->ndim - k) ||
               fail(v, e->loc, "view of %s typed %s", kj_type_name(array), kj_type_name(t));
    }
    case KJ_IR_DIM:
        if (!args_are(v, e, 1, NULL))
            return false;
        if (!e->args[0]->type || e->args[0]->type->kind != KJ_TYPE_ARRAY || e->dim < 0 ||
            e->dim >= e->args[0]->type->ndim || t != i64)
            return fail(v, e->loc, "dim %d of %s typed %s", e->dim,
                        kj_type_name(e->args[0]->type), kj_type_name(t));
        return true;
    case KJ_IR_SREG:
        if (e->sreg < 0 || e->sreg >= KJ_SREG_COUNT || t != kj_type_scalar(KJ_TYPE_I32))
            return fail(v, e->loc, "bad special register");
        return args_are(v, e, 0, NULL);
    case KJ_IR_SHARED:
    case KJ_IR_LOCAL:
        if (!is_element_type(e->alloc_elem) || e->alloc_ndim < 1 || e->alloc_ndim > 3 ||
            t != kj_type_array(e->alloc_elem, e->alloc_ndim))
            return fail(v, e->loc, "bad %s array", kj_ir_op_name(e->op));
        for (int i = 0; i < e->alloc_ndim; i++) {
            /* LOCAL in a kernel: a size from the launch (local_size.c) */
            if (e->op == KJ_IR_LOCAL && e->alloc_size[i] && e->alloc_shape[i] == 0) {
                if (v->fn->kind != KJ_IR_FN_KERNEL || kj_local_size_refusal(e->alloc_size[i]) ||
                    e->launch_local < 0 || e->launch_local >= v->fn->launch_locals.count ||
                    v->fn->launch_locals.items[e->launch_local] != e)
                    return fail(v, e->loc, "bad size from the launch of a LOCAL array");
                continue;
            }
            if (e->alloc_shape[i] <= 0 || e->alloc_size[i])
                return fail(v, e->loc, "%s array of extent %" PRId64, kj_ir_op_name(e->op),
                            e->alloc_shape[i]);
        }
        return args_are(v, e, 0, NULL);
    case KJ_IR_ATOMIC: {
        if (e->atomic < 0 || e->atomic >= KJ_ATOMIC_COUNT)
            return fail(v, e->loc, "bad atomic op %d", (int)e->atomic);
        const KjType *array = e->arg_count > 0 ? e->args[0]->type : NULL;
        if (!array || array->kind != KJ_TYPE_ARRAY || array->elem != t)
            return fail(v, e->loc, "%s on %s, typed %s", kj_atomic_names[e->atomic],
                        kj_type_name(array), kj_type_name(t));
        int values = e->atomic == KJ_ATOMIC_CAS ? 2 : 1;
        if (!args_are(v, e, 1 + array->ndim + values, NULL))
            return false;
        for (int i = 1; i < e->arg_count; i++)
            if (e->args[i]->type != (i <= array->ndim ? i64 : t))
                return fail(v, e->loc, "%s operands do not match %s", kj_atomic_names[e->atomic],
                            kj_type_name(t));
        return true;
    }
    case KJ_IR_SYNCTHREADS:
        if (v->fn->split_of)
            return fail(v, e->loc, "syncthreads in a split form (its barriers are its regions' ends)");
        return t == kj_type_void() ? args_are(v, e, 0, NULL)
                                   : fail(v, e->loc, "syncthreads typed %s", kj_type_name(t));
    case KJ_IR_EXEC:
        return verify_exec(v, e);
    case KJ_IR_PRINT: {
        size_t len = e->format ? strlen(e->format) : 0;
        if (t != kj_type_void() || len == 0 || e->format[len - 1] != '\n')
            return fail(v, e->loc, "print without a format ending in a newline, or typed %s",
                        kj_type_name(t));
        for (int i = 0; i < e->arg_count; i++)
            if (!is_element_type(e->args[i]->type))
                return fail(v, e->loc, "print operand %d is %s", i,
                            kj_type_name(e->args[i]->type));
        return true;
    }
    case KJ_IR_DYNAMIC_SHARED:
        if (!is_element_type(e->alloc_elem) || t != kj_type_array(e->alloc_elem, 1))
            return fail(v, e->loc, "bad dynamic shared array");
        return args_are(v, e, 0, NULL);
    case KJ_IR_CONST_ARRAY: {
        const KjIrConstArray *k = e->const_array;
        int64_t count = 1;
        for (int i = 0; k && i < k->ndim; i++)
            count *= k->shape[i];
        if (!k || k->elem != e->alloc_elem || k->ndim != e->alloc_ndim ||
            t != kj_type_array(k->elem, k->ndim) || count * kj_type_size(k->elem) != k->size)
            return fail(v, e->loc, "bad constant array");
        return args_are(v, e, 0, NULL);
    }
    default:
        return fail(v, e->loc, "unknown op %d", (int)e->op);
    }
}

static bool verify_expr(Verifier *v, const KjIrExpr *e)
{
    if (!e)
        return fail(v, (KjLoc){0}, "missing expression");
    if (!e->type || e->type->kind == KJ_TYPE_UNTYPED_INT || e->type->kind == KJ_TYPE_UNTYPED_FLOAT)
        return fail(v, e->loc, "%s has no settled type (%s)", kj_ir_op_name(e->op),
                    kj_type_name(e->type));
    /* The back end makes arrays only from these (kj_codegen_array). */
    if (e->type->kind == KJ_TYPE_ARRAY && e->op != KJ_IR_VAR && e->op != KJ_IR_SHARED &&
        e->op != KJ_IR_LOCAL && e->op != KJ_IR_DYNAMIC_SHARED && e->op != KJ_IR_VIEW &&
        e->op != KJ_IR_CONST_ARRAY && e->op != KJ_IR_SELECT)
        return fail(v, e->loc, "%s makes an array; only variables, shared(), local(), "
                    "constant arrays, views and a choice between arrays do", kj_ir_op_name(e->op));
    /* kernel built-ins: in kernels, and in device functions but shared() */
    bool device = v->fn->kind == KJ_IR_FN_PLAIN && (e->op == KJ_IR_LOCAL ||
                                                     (v->fn->device_use && e->op != KJ_IR_SHARED));
    /* The reduce pass gives vectorized kernels local() arrays (its lanes). */
    device = device || (e->op == KJ_IR_LOCAL && v->fn->kind == KJ_IR_FN_VEC_KERNEL);
    if (kernel_only(e->op) && v->fn->kind != KJ_IR_FN_KERNEL && !device)
        return fail(v, e->loc, "%s outside a kernel or device function", kj_ir_op_name(e->op));
    if (e->arg_count > 0 && !e->args)
        return fail(v, e->loc, "%s without operands", kj_ir_op_name(e->op));
    for (int i = 0; i < e->arg_count; i++)
        if (!verify_expr(v, e->args[i]))
            return false;
    return verify_expr_op(v, e);
}

/* Not ir.c's walk: the walk takes a missing operand or body (NULL) for
 * nothing to visit, where the verifier must see it and say which one is
 * missing; and it reports the first problem in the order it checks each
 * kind's fields (a store's array before its value), which the walk's
 * order (operands before the statement, a store's indices before its
 * value) would change. */
static bool verify_stmt(Verifier *v, const KjIrStmt *s)
{
    if (!s)
        return fail(v, (KjLoc){0}, "missing statement");
    const KjType *b = kj_type_scalar(KJ_TYPE_BOOL);
    switch (s->kind) {
    case KJ_IR_STMT_BLOCK:
        for (int i = 0; i < s->stmts.count; i++)
            if (!verify_stmt(v, s->stmts.items[i]))
                return false;
        return true;
    case KJ_IR_STMT_EVAL:
        return verify_expr(v, s->value);
    case KJ_IR_STMT_SET:
        if (!var_belongs(v, s->var))
            return fail(v, s->loc, "set of a variable that is not a local of this function");
        if (!verify_expr(v, s->value))
            return false;
        return s->value->type == s->var->type ||
               fail(v, s->loc, "%s (%s) set to %s", s->var->name, kj_type_name(s->var->type),
                    kj_type_name(s->value->type));
    case KJ_IR_STMT_STORE: {
        if (!verify_expr(v, s->array) || !verify_expr(v, s->value))
            return false;
        const KjType *array = s->array->type;
        if (array->kind != KJ_TYPE_ARRAY)
            return fail(v, s->loc, "store into %s", kj_type_name(array));
        if (s->index_count != array->ndim || (s->index_count > 0 && !s->indices))
            return fail(v, s->loc, "store into %s with %d indices", kj_type_name(array),
                        s->index_count);
        for (int i = 0; i < s->index_count; i++) {
            if (!verify_expr(v, s->indices[i]))
                return false;
            if (s->indices[i]->type != kj_type_scalar(KJ_TYPE_I64))
                return fail(v, s->loc, "store index %d is %s, not i64", i,
                            kj_type_name(s->indices[i]->type));
        }
        return s->value->type == array->elem ||
               fail(v, s->loc, "store of %s into %s", kj_type_name(s->value->type),
                    kj_type_name(array));
    }
    case KJ_IR_STMT_IF:
        if (!verify_expr(v, s->cond))
            return false;
        if (s->cond->type != b)
            return fail(v, s->loc, "if condition is %s", kj_type_name(s->cond->type));
        if (!verify_stmt(v, s->then_stmt))
            return false;
        return !s->else_stmt || verify_stmt(v, s->else_stmt);
    case KJ_IR_STMT_FOR: {
        if (!var_belongs(v, s->var) || !kj_type_is_int(s->var->type))
            return fail(v, s->loc, "for over a bad loop variable");
        if (!verify_expr(v, s->start) || !verify_expr(v, s->stop) || !verify_expr(v, s->step))
            return false;
        const KjType *t = s->var->type;
        if (s->start->type != t || s->stop->type != t || s->step->type != t)
            return fail(v, s->loc, "for bounds do not match the loop variable's %s",
                        kj_type_name(t));
        v->loop_depth++;
        bool ok = verify_stmt(v, s->body);
        v->loop_depth--;
        return ok;
    }
    case KJ_IR_STMT_WHILE: {
        if (!verify_expr(v, s->cond))
            return false;
        if (s->cond->type != b)
            return fail(v, s->loc, "while condition is %s", kj_type_name(s->cond->type));
        v->loop_depth++;
        bool ok = verify_stmt(v, s->body);
        v->loop_depth--;
        return ok;
    }
    case KJ_IR_STMT_BREAK:
    case KJ_IR_STMT_CONTINUE:
        return v->loop_depth > 0 ||
               fail(v, s->loc, "%s outside a loop", s->kind == KJ_IR_STMT_BREAK ? "break" : "continue");
    case KJ_IR_STMT_RETURN:
        if (!s->value)
            return v->fn->ret == kj_type_void() ||
                   fail(v, s->loc, "return without a value from a function returning %s",
                        kj_type_name(v->fn->ret));
        if (!verify_expr(v, s->value))
            return false;
        return s->value->type == v->fn->ret ||
               fail(v, s->loc, "return of %s from a function returning %s",
                    kj_type_name(s->value->type), kj_type_name(v->fn->ret));
    case KJ_IR_STMT_PARFOR:
        if (v->fn->kind != KJ_IR_FN_VEC_KERNEL)
            return fail(v, s->loc, "parfor outside a vectorized kernel");
        if (!var_belongs(v, s->var) || s->var->type != kj_type_scalar(KJ_TYPE_I64))
            return fail(v, s->loc, "parfor over a bad index variable");
        if (!verify_expr(v, s->stop))
            return false;
        if (s->stop->type != kj_type_scalar(KJ_TYPE_I64))
            return fail(v, s->loc, "parfor bound is %s", kj_type_name(s->stop->type));
        return verify_stmt(v, s->body);
    case KJ_IR_STMT_THREADS: {
        /* the cpu targets' loop over a block's threads: only in a split form,
         * never nested, and no break or continue leaves it */
        if (!v->fn->split_of || v->fn->kind != KJ_IR_FN_KERNEL)
            return fail(v, s->loc, "threads loop outside a kernel's split form");
        if (v->in_threads)
            return fail(v, s->loc, "threads loop inside another");
        if ((s->start && (!verify_expr(v, s->start) || s->start->type != kj_type_scalar(KJ_TYPE_I64))) ||
            (s->stop && (!verify_expr(v, s->stop) || s->stop->type != kj_type_scalar(KJ_TYPE_I64))))
            return fail(v, s->loc, "threads loop with a bad range of threadIdx.x");
        int loops = v->loop_depth;
        v->in_threads = true;
        v->loop_depth = 0;
        bool ok = verify_stmt(v, s->body);
        v->in_threads = false;
        v->loop_depth = loops;
        return ok;
    }
    default:
        return fail(v, s->loc, "unknown statement kind %d", (int)s->kind);
    }
}

static bool verify_function(Verifier *v, const KjIrFunction *fn)
{
    if (!fn->name || !fn->symbol || !fn->ret || !fn->body || fn->body->kind != KJ_IR_STMT_BLOCK)
        return fail(v, fn->loc, "incomplete function");
    for (int i = 0; i < v->fn_index; i++) {
        const KjIrFunction *other = v->module->functions.items[i];
        if (strcmp(other->symbol, fn->symbol) == 0)
            return fail(v, fn->loc, "symbol %s is used twice", fn->symbol);
    }
    if (fn->param_count > fn->locals.count)
        return fail(v, fn->loc, "more parameters than locals");
    for (int i = 0; i < fn->locals.count; i++) {
        const KjIrVar *var = fn->locals.items[i];
        if (!var || var->id != i)
            return fail(v, fn->loc, "local %d has id %d", i, var ? var->id : -1);
        if (var->is_param != (i < fn->param_count) || (i < fn->param_count && fn->params[i] != var))
            return fail(v, fn->loc, "parameters must be the first locals, in order");
        if (!is_element_type(var->type) && !(var->type && var->type->kind == KJ_TYPE_ARRAY))
            return fail(v, var->loc, "variable %s of type %s", var->name, kj_type_name(var->type));
    }
    switch (fn->kind) {
    case KJ_IR_FN_KERNEL:
    case KJ_IR_FN_VEC_KERNEL:
        if (fn->ret != kj_type_void())
            return fail(v, fn->loc, "a kernel returns %s", kj_type_name(fn->ret));
        break;
    case KJ_IR_FN_SCALAR:
        if (!is_element_type(fn->ret))
            return fail(v, fn->loc, "a scalar function returns %s", kj_type_name(fn->ret));
        for (int i = 0; i < fn->param_count; i++)
            if (!is_element_type(fn->params[i]->type))
                return fail(v, fn->loc, "a scalar function takes %s",
                            kj_type_name(fn->params[i]->type));
        break;
    case KJ_IR_FN_PLAIN:
        if (fn->ret != kj_type_void() && !is_element_type(fn->ret))
            return fail(v, fn->loc, "a function returns %s", kj_type_name(fn->ret));
        break;
    default:
        return fail(v, fn->loc, "unknown function kind %d", (int)fn->kind);
    }
    if (fn->kind == KJ_IR_FN_VEC_KERNEL && !fn->scalar)
        return fail(v, fn->loc, "a vectorized kernel without its scalar function");
    if (fn->shared_bytes < 0)
        return fail(v, fn->loc, "negative shared memory size");
    if (fn->local_bytes < 0 || fn->local_bytes > KJ_MAX_LOCAL_BYTES)
        return fail(v, fn->loc, "local memory of %" PRId64 " bytes per thread", fn->local_bytes);
    if (fn->split && (fn->kind != KJ_IR_FN_KERNEL || fn->split->split_of != fn))
        return fail(v, fn->loc, "a split form that is not this kernel's");
    v->loop_depth = 0;
    v->in_threads = false;
    return verify_stmt(v, fn->body);
}

bool kj_ir_verify(const KjIrModule *module, char **why)
{
    Verifier v = {.module = module};
    bool ok = true;
    for (int i = 0; ok && i < module->functions.count; i++) {
        v.fn = module->functions.items[i];
        v.fn_index = i;
        if (!v.fn)
            ok = fail(&v, (KjLoc){0}, "function %d is missing", i);
        else
            ok = verify_function(&v, v.fn);
    }
    v.fn = NULL;
    for (int e = 0; ok && e < module->entries.count; e++) {
        const KjIrEntry *entry = module->entries.items[e];
        for (int k = 0; ok && k < entry->variants.count; k++) {
            bool found = false;
            for (int i = 0; i < module->functions.count; i++)
                found = found || module->functions.items[i] == entry->variants.items[k];
            if (!found)
                ok = fail(&v, entry->loc, "entry %s names a function not in the module",
                          entry->name);
        }
    }
    if (!ok && why)
        *why = kj_xstrdup(v.why.data ? v.why.data : "invalid IR");
    kj_buf_free(&v.why);
    return ok;
}

bool kj_ir_verify_function(const KjIrModule *module, const KjIrFunction *fn, char **why)
{
    /* in the module's order where the function it stands for (its symbol) is */
    Verifier v = {.module = module, .fn = fn, .fn_index = module->functions.count};
    for (int i = 0; i < module->functions.count; i++)
        if (strcmp(((const KjIrFunction *)module->functions.items[i])->symbol, fn->symbol) == 0)
            v.fn_index = i;
    bool ok = verify_function(&v, fn);
    if (!ok && why)
        *why = kj_xstrdup(v.why.data ? v.why.data : "invalid IR");
    kj_buf_free(&v.why);
    return ok;
}
