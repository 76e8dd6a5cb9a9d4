/*
 * api_call.c: the half of kjit.h that runs code: arguments, calls of plain
 * and @vectorize functions (with broadcasting), kernel launches, device
 * memory, streams and events.  The code each call runs comes from
 * kj_api_find_compiled (api.c).
 *
 * This file checks and converts what the host passes and plans the
 * broadcast; the running itself (and the staging of host arrays that cuda
 * needs) is the context's runtime target's (runtime_cpu.c, runtime_cuda.c),
 * reached through one indirect call.  Plain functions run on the host
 * whatever the target (kj_runtime_for says so once).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------- arguments */

kjit_arg kjit_arg_f64(double v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_F64};
    arg.value.f = v;
    return arg;
}

kjit_arg kjit_arg_f32(float v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_F32};
    arg.value.f = v;
    return arg;
}

kjit_arg kjit_arg_i64(int64_t v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_I64};
    arg.value.i = v;
    return arg;
}

kjit_arg kjit_arg_i32(int32_t v)
{
    kjit_arg arg = {.kind = KJIT_ARG_SCALAR, .dtype = KJIT_I32};
    arg.value.i = v;
    return arg;
}

kjit_arg kjit_arg_array(kjit_array *array)
{
    kjit_arg arg = {.kind = KJIT_ARG_ARRAY};
    arg.value.array = array;
    if (array)
        arg.dtype = array->dtype;
    return arg;
}

static bool dtype_is_unsigned(kjit_dtype d) { return d >= KJIT_U8 && d <= KJIT_U64; }
static bool dtype_is_float(kjit_dtype d)
{
    return d == KJIT_F32 || d == KJIT_F64 || d == KJIT_F16 || d == KJIT_BF16;
}
static bool dtype_is_complex(kjit_dtype d) { return d == KJIT_C64 || d == KJIT_C128; }

/* Stores a host scalar as `type`.  False when the conversion would lose the
 * imaginary part (complex to real), the one the language never does implicitly. */
static bool convert_scalar(const kjit_arg *arg, const KjType *type, KjScalar *out)
{
    memset(out, 0, sizeof *out);
    double re = 0, im = 0;
    int64_t as_int = 0;
    uint64_t as_uint = 0;
    kjit_dtype from = arg->dtype;
    if (dtype_is_complex(from)) {
        re = arg->value.c[0];
        im = arg->value.c[1];
        as_int = (int64_t)re;
    } else if (dtype_is_float(from)) {
        re = arg->value.f;
        as_int = (int64_t)re;
        as_uint = re < 0 ? (uint64_t)as_int : (uint64_t)re;
    } else if (dtype_is_unsigned(from)) {
        as_uint = arg->value.u;
        as_int = (int64_t)as_uint;
        re = (double)as_uint;
    } else {
        as_int = arg->value.i;
        as_uint = (uint64_t)as_int;
        re = (double)as_int;
    }
    if (dtype_is_complex(from) && !kj_type_is_complex(type))
        return false;
    if (!dtype_is_float(from) && !dtype_is_complex(from))
        as_uint = (uint64_t)as_int;
    switch (type->kind) {
    case KJ_TYPE_BOOL: out->b = dtype_is_float(from) ? re != 0 : as_int != 0; break;
    case KJ_TYPE_I8: out->i8 = (int8_t)as_int; break;
    case KJ_TYPE_I16: out->i16 = (int16_t)as_int; break;
    case KJ_TYPE_I32: out->i32 = (int32_t)as_int; break;
    case KJ_TYPE_I64: out->i64 = as_int; break;
    case KJ_TYPE_U8: out->u8 = (uint8_t)as_uint; break;
    case KJ_TYPE_U16: out->u16 = (uint16_t)as_uint; break;
    case KJ_TYPE_U32: out->u32 = (uint32_t)as_uint; break;
    case KJ_TYPE_U64: out->u64 = as_uint; break;
    case KJ_TYPE_F32: out->f32 = (float)re; break;
    case KJ_TYPE_F64: out->f64 = re; break;
    case KJ_TYPE_C64: out->c64[0] = (float)re; out->c64[1] = (float)im; break;
    case KJ_TYPE_C128: out->c128[0] = re; out->c128[1] = im; break;
    case KJ_TYPE_F16: case KJ_TYPE_BF16: out->u16 = kj_half_from_double(type->kind, re); break;
    default: return false;
    }
    return true;
}

/* How a vectorized signature takes a host scalar: 0 exactly, 1 through the
 * host's generic i64/f64 (Python's int and float), -1 not at all. */
static int scalar_match(kjit_dtype given, const KjType *param)
{
    kjit_dtype want;
    if (!kj_type_dtype(param, &want))
        return -1;
    if (given == want)
        return 0;
    if (given == KJIT_I64 && kj_type_is_numeric(param))
        return 1;
    if (given == KJIT_F64 && (kj_type_is_float(param) || kj_type_is_complex(param)))
        return 1;
    if (given == KJIT_C128 && kj_type_is_complex(param))
        return 1;
    return -1;
}

bool kj_api_convert_scalar(const kjit_arg *arg, const KjType *type, void *out)
{
    KjScalar value;
    if (!convert_scalar(arg, type, &value))
        return false;
    memcpy(out, &value, sizeof value);
    return true;
}

int kj_api_scalar_match(kjit_dtype given, const KjType *param)
{
    return scalar_match(given, param);
}

int kj_api_arg_distance(const kjit_arg *arg, const KjType *elem)
{
    if (arg->kind == KJIT_ARG_ARRAY) {
        kjit_dtype want;
        return kj_type_dtype(elem, &want) && arg->value.array->dtype == want ? 0 : -1;
    }
    return scalar_match(arg->dtype, elem);
}

int kj_api_signature_distance(const KjIrFunction *fn, const kjit_arg *args, int nargs)
{
    if (fn->param_count != nargs)
        return -1;
    int score = 0;
    for (int i = 0; i < nargs; i++) {
        int m = kj_api_arg_distance(&args[i], fn->params[i]->type);
        if (m < 0)
            return -1;
        score += m;
    }
    return score;
}

int kj_api_closest_signature(const kjit_function *function, KjSignatureDistance *distance,
                             const kjit_arg *args, int nargs, const void *user)
{
    int best = -1, best_score = 0;
    for (int s = 0; s < function->entry->variants.count; s++) {
        int score = distance(kj_api_variant_of(function, s), args, nargs, user);
        if (score >= 0 && (best < 0 || score < best_score)) {
            best = s;
            best_score = score;
        }
    }
    return best;
}

static int plain_distance(const KjIrFunction *fn, const kjit_arg *args, int nargs,
                          const void *user)
{
    (void)user;
    return kj_api_signature_distance(fn, args, nargs);
}

/* "f64 array" or "i64": what signatures are chosen by, for their messages. */
static const char *describe_element_type(const kjit_arg *arg, char *buf, size_t size)
{
    if (arg->kind == KJIT_ARG_SCALAR)
        snprintf(buf, size, "%s", kjit_dtype_name(arg->dtype));
    else
        snprintf(buf, size, "%s array", kjit_dtype_name(arg->value.array->dtype));
    return buf;
}

void kj_api_print_element_types(KjBuf *message, const char *name, const kjit_arg *args,
                                int nargs)
{
    kj_buf_printf(message, "%s(", name);
    for (int i = 0; i < nargs; i++) {
        char text[64];
        kj_buf_printf(message, "%s%s", i ? ", " : "",
                      describe_element_type(&args[i], text, sizeof text));
    }
    kj_buf_printf(message, ")");
}

void kj_api_print_signatures(KjBuf *message, const kjit_function *function)
{
    for (int s = 0; s < function->entry->variants.count; s++)
        kj_buf_printf(message, "%s%s", s ? ", " : "", function->signature_text[s]);
    kj_buf_printf(message, " (array element types must match exactly)");
}

static void describe_arg(const kjit_arg *arg, char *buf, size_t size)
{
    if (arg->kind == KJIT_ARG_SCALAR) {
        snprintf(buf, size, "%s", kjit_dtype_name(arg->dtype));
        return;
    }
    const kjit_array *a = arg->value.array;
    if (a->ndim == 0) {
        snprintf(buf, size, "%s (0-d array)", kjit_dtype_name(a->dtype));
        return;
    }
    snprintf(buf, size, "%s", kj_type_name(kj_type_array(kj_dtype_type(a->dtype), a->ndim)));
}

kjit_status kj_api_check_args(kjit_context *context, const char *name, const kjit_arg *args,
                              int nargs)
{
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == KJIT_ARG_ARRAY) {
            const kjit_array *a = args[i].value.array;
            if (!a)
                return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                        "argument %d of %s is a NULL array", i, name);
            if ((unsigned)a->dtype >= KJIT_DTYPE_COUNT || a->ndim < 0 || a->ndim > KJIT_MAX_DIMS)
                return kj_api_set_error(
                    context, KJIT_ERROR_INVALID_ARGUMENT,
                    "argument %d of %s is not a valid array (dtype %d, ndim %d)", i, name,
                    (int)a->dtype, a->ndim);
            for (int d = 0; d < a->ndim; d++)
                if (a->shape[d] < 0)
                    return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                            "argument %d of %s has a negative extent", i, name);
        } else if (args[i].kind != KJIT_ARG_SCALAR || (unsigned)args[i].dtype >= KJIT_DTYPE_COUNT) {
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "argument %d of %s is neither a scalar nor an array", i,
                                    name);
        }
    }
    return KJIT_OK;
}

static kjit_status check_args_present(kjit_context *context, const kjit_function *function,
                                      const kjit_arg *args, int nargs)
{
    int want = kjit_function_param_count(function);
    if (nargs != want)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s takes %d argument%s, %d given", function->entry->name, want,
                                want == 1 ? "" : "s", nargs);
    return kj_api_check_args(context, function->entry->name, args, nargs);
}

/* ---------------------------------------------------- vectorized calls */

static kjit_status choose_signature(kjit_function *function, const kjit_arg *args, int nargs,
                                    int *sig)
{
    kjit_context *context = function->module->context;
    int count = function->entry->variants.count;
    int best = kj_api_closest_signature(function, plain_distance, args, nargs, NULL);
    if (best >= 0) {
        *sig = best;
        return KJIT_OK;
    }
    KjBuf message = {0};
    const char *name = function->entry->name;
    KjBuf given = {0};
    for (int i = 0; i < nargs; i++) {
        char text[96];
        describe_arg(&args[i], text, sizeof text);
        kj_buf_printf(&given, "%s%s", i ? ", " : "", text);
    }
    /* Name the first argument that no signature takes in its place, if any. */
    int culprit = -1;
    for (int i = 0; i < nargs && culprit < 0; i++) {
        bool taken = false;
        for (int s = 0; s < count && !taken; s++) {
            const KjType *param = kj_api_variant_of(function, s)->params[i]->type;
            taken = kj_api_arg_distance(&args[i], param) >= 0;
        }
        if (!taken)
            culprit = i;
    }
    if (culprit >= 0) {
        char text[96];
        describe_arg(&args[culprit], text, sizeof text);
        kj_buf_printf(&message, "%s(%s): argument %d has type %s, which no signature of %s takes",
                      name, given.data, culprit, text, name);
    } else {
        kj_buf_printf(&message, "%s(%s): no signature of %s takes these argument types together",
                      name, given.data ? given.data : "", name);
    }
    kj_buf_printf(&message, "; signatures on offer: ");
    kj_api_print_signatures(&message, function);
    kj_api_set_error(context, KJIT_ERROR_TYPE, "%s", message.data);
    kj_buf_free(&message);
    kj_buf_free(&given);
    return KJIT_ERROR_TYPE;
}

void *kj_api_alloc_aligned(size_t bytes)
{
    void *data = NULL;
    if (posix_memalign(&data, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return data;
}

kjit_status kj_api_alloc_output(kjit_context *context, const char *name, kjit_dtype dtype,
                                int ndim, const int64_t *shape, kjit_array *out)
{
    int64_t count = 1;
    for (int d = 0; d < ndim; d++)
        count *= shape[d];
    void *data = kj_api_alloc_aligned((size_t)count * kjit_dtype_size(dtype));
    if (!data)
        return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                "%s: out of memory for an output of %lld elements", name,
                                (long long)count);
    *out = kjit_array_make(data, dtype, ndim, shape);
    return KJIT_OK;
}

/*
 * A @vectorize call: picks the signature, broadcasts, allocates the output if
 * asked, generates the variant's code, and (when run) runs it.
 */
static kjit_status call_vectorized(kjit_function *function, const kjit_arg *args, int nargs,
                                   const kjit_array *out, kjit_array *result, kjit_stream *stream,
                                   bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    kjit_status status = check_args_present(context, function, args, nargs);
    if (status != KJIT_OK)
        return status;
    if (nargs > KJ_MAX_VEC_INPUTS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: a vectorized call takes at most %d inputs", name,
                                KJ_MAX_VEC_INPUTS);
    int sig;
    status = choose_signature(function, args, nargs, &sig);
    if (status != KJIT_OK)
        return status;
    const KjIrFunction *scalar = kj_api_variant_of(function, sig);
    kjit_dtype ret;
    if (!kj_type_dtype(scalar->ret, &ret))
        return kj_api_set_error(context, KJIT_ERROR_BACKEND, "%s returns no scalar", name);

    const kjit_array *inputs[KJ_MAX_VEC_INPUTS];
    for (int i = 0; i < nargs; i++)
        inputs[i] = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
    /* The shape to allocate when no output is given (the plan checks a
     * given output against the broadcast shape itself). */
    int ndim = 0;
    int64_t shape[KJ_MAX_DIMS];
    char *error = NULL;
    if (!out) {
        status = kj_broadcast_shape(inputs, nargs, &ndim, shape, &error);
        if (status != KJIT_OK)
            return kj_api_take_named_error(context, status, name, error);
    }

    kjit_array target, allocated = {0};
    if (out) {
        if (out->dtype != ret)
            return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                    "%s: the output has element type %s but %s%s returns %s", name,
                                    kjit_dtype_name(out->dtype), name,
                                    function->signature_text[sig], kjit_dtype_name(ret));
        target = *out;
    } else if (!run) {
        target = kjit_array_make(NULL, ret, ndim, shape);
    } else if (result) {
        status = kj_api_alloc_output(context, name, ret, ndim, shape, &allocated);
        if (status != KJIT_OK)
            return status;
        target = allocated;
    } else {
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: give an output array or a result to fill", name);
    }

    KjBroadcastPlan plan;
    status = kj_broadcast_plan(inputs, nargs, &target, &plan, &error);
    if (status != KJIT_OK) {
        free(allocated.data);
        return kj_api_take_named_error(context, status, name, error);
    }
    KjCompiled *compiled = NULL;
    if (plan.size > 0)
        status = kj_api_find_compiled(function, sig, &plan.variant, 0, &compiled);
    if (status != KJIT_OK || !run || plan.size == 0) {
        if (status == KJIT_OK && run && result)
            *result = allocated;
        else
            free(allocated.data);
        return status;
    }

    KjScalar scalars[KJ_MAX_VEC_INPUTS];
    void *params[KJ_MAX_VEC_INPUTS + 2];
    for (int i = 0; i < nargs; i++) {
        if (!(plan.variant.scalar_mask & (1u << i)))
            params[i] = &plan.inputs[i];
        else if (plan.scalar_data[i])
            params[i] = (void *)plan.scalar_data[i];
        else {
            convert_scalar(&args[i], scalar->params[i]->type, &scalars[i]);
            params[i] = &scalars[i];
        }
    }
    params[nargs] = &plan.output;
    KjCheckCall check;
    if (context->options.check) {
        status = kj_check_begin(context, compiled->runtime, &check, &params[nargs + 1]);
        if (status != KJIT_OK) {
            free(allocated.data);
            return status;
        }
    }

    KjVectorizedRun vectorized_run = {.compiled = compiled, .plan = &plan, .params = params,
                                      .inputs = inputs, .input_count = nargs, .output = &target,
                                      .stream = stream};
    status = context->runtime->run_vectorized(context, &vectorized_run);
    if (context->options.check)
        status = kj_check_end(context, &check, function->module->ir, name, stream, status);
    if (status == KJIT_OK && result)
        *result = allocated;
    else
        free(allocated.data);
    return status;
}

/* ------------------------------------------- plain functions and kernels */

#define MAX_PARAMS 64

/* Arguments of a plain function or kernel as its entry point takes them:
 * scalars converted to the parameter types, arrays checked for element type
 * and rank and turned into descriptors. */
typedef struct Marshalled {
    KjScalar scalars[MAX_PARAMS];
    KjArrayDesc descs[MAX_PARAMS];
    void *params[MAX_PARAMS + 1]; /* and checked mode's record */
    uint32_t contiguous; /* bit i: array argument i (i < 32) is C-contiguous */
} Marshalled;

static kjit_status marshal(kjit_function *function, const kjit_arg *args, int nargs,
                           Marshalled *m)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    kjit_status status = check_args_present(context, function, args, nargs);
    if (status != KJIT_OK)
        return status;
    if (nargs > MAX_PARAMS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: more than %d arguments", name, MAX_PARAMS);
    const KjIrFunction *fn = kj_api_variant_of(function, 0);
    m->contiguous = 0;
    for (int i = 0; i < nargs; i++) {
        const KjType *param = fn->params[i]->type;
        /* Described only for an error message: launches pay for none of it. */
        char given[96];
        if (param->kind == KJ_TYPE_ARRAY) {
            const kjit_array *a = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
            kjit_dtype want;
            kj_type_dtype(param->elem, &want);
            if (!a || a->dtype != want || a->ndim != param->ndim) {
                describe_arg(&args[i], given, sizeof given);
                return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                        "%s: argument %d (%s) must be a %s array, not %s", name, i,
                                        fn->params[i]->name, kj_type_name(param), given);
            }
            char *error = NULL;
            status = kj_array_desc(a, &m->descs[i], &error);
            if (status != KJIT_OK) {
                char prefix[160];
                snprintf(prefix, sizeof prefix, "%s: argument %d: ", name, i);
                return kj_api_take_error(context, status, prefix, error);
            }
            m->params[i] = &m->descs[i];
            if (i < 32 && kj_array_is_contiguous(a))
                m->contiguous |= 1u << i;
            continue;
        }
        if (args[i].kind != KJIT_ARG_SCALAR) {
            describe_arg(&args[i], given, sizeof given);
            return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                    "%s: argument %d (%s) must be a %s scalar, not %s", name, i,
                                    fn->params[i]->name, kj_type_name(param), given);
        }
        if (!convert_scalar(&args[i], param, &m->scalars[i])) {
            describe_arg(&args[i], given, sizeof given);
            return kj_api_set_error(
                context, KJIT_ERROR_TYPE,
                "%s: argument %d (%s) is %s, which does not convert to %s", name, i,
                fn->params[i]->name, given, kj_type_name(param));
        }
        m->params[i] = &m->scalars[i];
    }
    return KJIT_OK;
}

static kjit_status call_plain(kjit_function *function, const kjit_arg *args, int nargs,
                              kjit_array *result, bool run)
{
    kjit_context *context = function->module->context;
    const KjIrFunction *fn = kj_api_variant_of(function, 0);
    if (fn->device_use)
        return kj_api_set_error(
            context, KJIT_ERROR_INVALID_ARGUMENT,
            "%s is a device function (%s uses %s at %s:%d:%d): only kernels can call it",
            function->entry->name, fn->device_chain, fn->device_use,
            fn->device_loc.src ? fn->device_loc.src->path : "?", fn->device_loc.line,
            fn->device_loc.col);
    Marshalled m;
    kjit_status status = marshal(function, args, nargs, &m);
    if (status != KJIT_OK)
        return status;
    for (int i = 0; i < nargs; i++)
        if (args[i].kind == KJIT_ARG_ARRAY && !context->runtime->device_memory_on_host &&
            args[i].value.array->memory == KJIT_MEMORY_DEVICE)
            return kj_api_set_error(
                context, KJIT_ERROR_INVALID_ARGUMENT,
                "%s: plain functions run on the host; argument %d is a device array",
                function->entry->name, i);
    KjCompiled *compiled;
    status = kj_api_find_compiled(function, 0, NULL, 0, &compiled);
    if (status != KJIT_OK || !run)
        return status;
    KjScalar value;
    memset(&value, 0, sizeof value);
    KjCheckCall check;
    if (context->options.check) {
        status = kj_check_begin(context, compiled->runtime, &check, &m.params[nargs]);
        if (status != KJIT_OK)
            return status;
    }
    compiled->runtime->call(compiled, m.params, &value);
    if (context->options.check) {
        status = kj_check_end(context, &check, function->module->ir, function->entry->name, NULL,
                              KJIT_OK);
        if (status != KJIT_OK)
            return status;
    }
    kjit_dtype ret;
    if (result && kj_type_dtype(compiled->root->ret, &ret)) {
        void *data = kj_api_alloc_aligned(sizeof value);
        if (!data)
            return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY, "out of memory");
        memcpy(data, &value, sizeof value);
        *result = kjit_array_make(data, ret, 0, NULL);
    }
    return KJIT_OK;
}

kjit_status kjit_call(kjit_function *function, const kjit_arg *args, int nargs,
                      kjit_array *out, kjit_array *result)
{
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    switch (function->entry->kind) {
    case KJ_FN_VECTORIZE:
        return call_vectorized(function, args, nargs, out, result, NULL, true);
    case KJ_FN_PLAIN:
        return call_plain(function, args, nargs, result, true);
    case KJ_FN_KERNEL:
        break;
    case KJ_FN_REDUCE:
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s is a @reduce: call it with kjit_reduce",
                                function->entry->name);
    case KJ_FN_GUVECTORIZE:
        return kj_gufunc_call(function, args, nargs, out, result, NULL, true);
    }
    return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                            "%s is a @kernel: launch it with kjit_launch", function->entry->name);
}

kjit_status kjit_call_async(kjit_function *function, const kjit_arg *args, int nargs,
                            kjit_array *out, kjit_stream *stream)
{
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    if (function->entry->kind == KJ_FN_GUVECTORIZE)
        return kj_gufunc_call(function, args, nargs, out, NULL, stream, true);
    if (function->entry->kind != KJ_FN_VECTORIZE)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: kjit_call_async takes a @vectorize or @guvectorize function",
                                function->entry->name);
    if (!out)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: kjit_call_async needs an output array", function->entry->name);
    return call_vectorized(function, args, nargs, out, NULL, stream, true);
}

static kjit_status check_launch_shape(kjit_function *function, const uint32_t grid[3],
                                      const uint32_t block[3])
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    if (function->entry->kind != KJ_FN_KERNEL)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s is not a @kernel: call it with kjit_call", name);
    for (int d = 0; d < 3; d++)
        if (grid[d] == 0 || block[d] == 0)
            return kj_api_set_error(
                context, KJIT_ERROR_INVALID_ARGUMENT,
                "%s: grid (%u,%u,%u) and block (%u,%u,%u) need every extent >= 1", name, grid[0],
                grid[1], grid[2], block[0], block[1], block[2]);
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (threads > 1024)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: a block of %llu threads; at most 1024 (as on a GPU)", name,
                                (unsigned long long)threads);
    if (grid[1] > 65535 || grid[2] > 65535)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: grid y and z extents are at most 65535", name);
    return KJIT_OK;
}

kjit_status kjit_launch(kjit_function *function, const uint32_t grid[3], const uint32_t block[3],
                        const kjit_arg *args, int nargs, kjit_stream *stream)
{
    kjit_launch_options options;
    kjit_launch_options_init(&options);
    options.stream = stream;
    return kjit_launch_ex(function, grid, block, args, nargs, &options);
}

void kjit_launch_options_init(kjit_launch_options *options)
{
    memset(options, 0, sizeof *options);
}

/* The most dynamic shared memory a launch may ask for on the cpu targets (a
 * GPU allows far less: the driver says how much). */
#define MAX_DYNAMIC_SHARED_BYTES ((size_t)1 << 30)

kjit_status kjit_launch_ex(kjit_function *function, const uint32_t grid[3],
                           const uint32_t block[3], const kjit_arg *args, int nargs,
                           const kjit_launch_options *options)
{
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    kjit_launch_options defaults;
    if (!options) {
        kjit_launch_options_init(&defaults);
        options = &defaults;
    }
    kjit_stream *stream = options->stream;
    size_t dynamic_bytes = options->dynamic_shared_bytes;
    kjit_status status = check_launch_shape(function, grid, block);
    if (status != KJIT_OK)
        return status;
    if (dynamic_bytes > MAX_DYNAMIC_SHARED_BYTES)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %zu bytes of dynamic shared memory; at most %zu",
                                function->entry->name, dynamic_bytes, MAX_DYNAMIC_SHARED_BYTES);
    Marshalled m;
    status = marshal(function, args, nargs, &m);
    if (status != KJIT_OK)
        return status;
    KjCompiled *compiled;
    status = kj_api_find_compiled(function, 0, NULL, m.contiguous, &compiled);
    if (status != KJIT_OK)
        return status;
    KjCheckCall check;
    if (context->options.check) {
        status = kj_check_begin(context, compiled->runtime, &check, &m.params[nargs]);
        if (status != KJIT_OK)
            return status;
    }
    KjLaunch launch = {.name = function->entry->name, .module = function->module,
                       .compiled = compiled, .grid = grid,
                       .block = block, .args = args, .arg_count = nargs, .descs = m.descs,
                       .params = m.params, .stream = stream,
                       .dynamic_shared_bytes = dynamic_bytes};
    status = compiled->runtime->launch(context, &launch);
    if (context->options.check)
        status = kj_check_end(context, &check, function->module->ir, function->entry->name,
                              stream, status);
    return status;
}

kjit_status kjit_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                         const kjit_array *out)
{
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    switch (function->entry->kind) {
    case KJ_FN_VECTORIZE:
        return call_vectorized(function, args, nargs, out, NULL, NULL, false);
    case KJ_FN_PLAIN:
        return call_plain(function, args, nargs, NULL, false);
    case KJ_FN_REDUCE:
        return kj_reduce_prepare(function, args, nargs);
    case KJ_FN_GUVECTORIZE:
        return kj_gufunc_call(function, args, nargs, (kjit_array *)out, NULL, NULL, false);
    case KJ_FN_KERNEL: {
        Marshalled m;
        kjit_status status = marshal(function, args, nargs, &m);
        KjCompiled *compiled;
        return status != KJIT_OK ? status
                                 : kj_api_find_compiled(function, 0, NULL, m.contiguous, &compiled);
    }
    }
    kj_unreachable();
}

kjit_status kjit_function_match(kjit_function *function, const kjit_arg *args, int nargs,
                                int *signature)
{
    kj_api_clear_error(function->module->context);
    if (function->entry->kind == KJ_FN_GUVECTORIZE)
        return kj_gufunc_match(function, args, nargs, signature);
    if (function->entry->kind != KJ_FN_VECTORIZE) {
        *signature = 0;
        return KJIT_OK;
    }
    return choose_signature(function, args, nargs, signature);
}

/* ------------------------------------------------------- device memory */

kjit_status kjit_device_alloc(kjit_context *context, kjit_dtype dtype, int ndim,
                              const int64_t *shape, kjit_array *out)
{
    kj_api_clear_error(context);
    memset(out, 0, sizeof *out);
    if ((unsigned)dtype >= KJIT_DTYPE_COUNT || ndim < 0 || ndim > KJIT_MAX_DIMS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "invalid dtype or rank");
    int64_t size = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return kj_api_set_error(context, KJIT_ERROR_SHAPE, "negative extent in a device array");
        size *= shape[d];
    }
    size_t bytes = (size_t)size * kjit_dtype_size(dtype);
    void *data = NULL;
    kjit_status status = context->runtime->alloc(context, bytes, &data);
    if (status != KJIT_OK)
        return status;
    *out = kjit_array_make(data, dtype, ndim, shape);
    out->memory = KJIT_MEMORY_DEVICE;
    return KJIT_OK;
}

kjit_status kjit_device_free(kjit_context *context, kjit_array *array)
{
    kj_api_clear_error(context);
    if (!array || !array->data)
        return KJIT_OK;
    if (array->memory != KJIT_MEMORY_DEVICE)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "kjit_device_free takes a device array (use kjit_array_free)");
    kjit_status status = context->runtime->free(context, array->data);
    array->data = NULL;
    return status;
}

kjit_status kjit_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                      kjit_stream *stream)
{
    kj_api_clear_error(context);
    bool same = dst->dtype == src->dtype && dst->ndim == src->ndim;
    for (int d = 0; same && d < src->ndim; d++)
        same = dst->shape[d] == src->shape[d];
    if (!same) {
        char a[160], b[160];
        return kj_api_set_error(context, KJIT_ERROR_SHAPE, "kjit_copy: %s %s into %s %s",
                                kjit_dtype_name(src->dtype),
                                kj_shape_string(a, sizeof a, src->ndim, src->shape),
                                kjit_dtype_name(dst->dtype),
                                kj_shape_string(b, sizeof b, dst->ndim, dst->shape));
    }
    if (!kj_array_is_contiguous(dst) || !kj_array_is_contiguous(src))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "kjit_copy copies contiguous arrays only");
    size_t bytes = (size_t)kjit_array_size(src) * kjit_dtype_size(src->dtype);
    if (bytes == 0)
        return KJIT_OK;
    return context->runtime->copy(context, dst, src, bytes, stream);
}

/* The staging of host operands on a target whose memory is not the host's
 * (api_guvec.c, api_reduce.c). */

kjit_status kj_api_temp_alloc(kjit_context *context, KjTemps *temps, size_t bytes, void **out)
{
    if (temps->count == KJ_API_MAX_TEMPS)
        kj_die("more than %d temporaries", KJ_API_MAX_TEMPS);
    kjit_status status = context->runtime->alloc(context, bytes, out);
    if (status == KJIT_OK)
        temps->ptr[temps->count++] = *out;
    return status;
}

void kj_api_free_temps(kjit_context *context, KjTemps *temps)
{
    for (int i = 0; i < temps->count; i++)
        context->runtime->free(context, temps->ptr[i]);
    temps->count = 0;
}

kjit_status kj_api_copy_bytes(kjit_context *context, void *dst, bool dst_target, const void *src,
                              bool src_target, size_t bytes, kjit_stream *stream)
{
    if (bytes == 0)
        return KJIT_OK;
    int64_t n = (int64_t)bytes;
    kjit_array d = kjit_array_make(dst, KJIT_U8, 1, &n);
    kjit_array s = kjit_array_make((void *)src, KJIT_U8, 1, &n);
    d.memory = dst_target ? KJIT_MEMORY_DEVICE : KJIT_MEMORY_HOST;
    s.memory = src_target ? KJIT_MEMORY_DEVICE : KJIT_MEMORY_HOST;
    return context->runtime->copy(context, &d, &s, bytes, stream);
}

kjit_status kj_api_stage(kjit_context *context, KjTemps *temps, const kjit_array *host,
                         bool copy, kjit_stream *stream, void **data)
{
    int64_t low, high;
    kj_array_extent(host, &low, &high);
    void *staged;
    kjit_status status = kj_api_temp_alloc(context, temps, (size_t)(high - low), &staged);
    if (status == KJIT_OK && copy)
        status = kj_api_copy_bytes(context, staged, true, (char *)host->data + low, false,
                                   (size_t)(high - low), stream);
    *data = status == KJIT_OK ? (char *)staged - low : NULL;
    return status;
}

/* ------------------------------------------------------ streams, events */

kjit_status kjit_stream_create(kjit_context *context, kjit_stream **out)
{
    kj_api_clear_error(context);
    kjit_stream *stream = kj_xcalloc(1, sizeof *stream);
    stream->context = context;
    kjit_status status = context->runtime->stream_create(context, stream);
    if (status != KJIT_OK) {
        free(stream);
        stream = NULL;
    }
    *out = stream;
    return status;
}

kjit_status kjit_stream_synchronize(kjit_stream *stream)
{
    kjit_context *context = stream->context;
    kj_api_clear_error(context);
    return context->runtime->synchronize(context, stream);
}

void kjit_stream_destroy(kjit_stream *stream)
{
    if (!stream)
        return;
    stream->context->runtime->stream_destroy(stream);
    free(stream);
}

kjit_status kjit_synchronize(kjit_context *context)
{
    kj_api_clear_error(context);
    return context->runtime->synchronize(context, NULL);
}

kjit_status kjit_event_record(kjit_context *context, kjit_stream *stream, kjit_event **out)
{
    kj_api_clear_error(context);
    kjit_event *event = kj_xcalloc(1, sizeof *event);
    event->context = context;
    kjit_status status = context->runtime->event_record(context, stream, event);
    if (status != KJIT_OK) {
        free(event);
        event = NULL;
    }
    *out = event;
    return status;
}

kjit_status kjit_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    kjit_context *context = start->context;
    kj_api_clear_error(context);
    /* Host clocks compare across cpu and parallel contexts, device events
     * across cuda contexts; a host time against a GPU event means nothing. */
    const KjRuntimeTarget *runtime = context->runtime;
    if (end->context->runtime->event_elapsed != runtime->event_elapsed)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "events from different kinds of context");
    return runtime->event_elapsed(start, end, milliseconds);
}

void kjit_event_destroy(kjit_event *event)
{
    if (!event)
        return;
    event->context->runtime->event_destroy(event);
    free(event);
}
