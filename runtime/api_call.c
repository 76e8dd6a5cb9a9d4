/*
 * api_call.c: the half of kjit.h that runs code: calls of plain and
 * @vectorize functions (with broadcasting), kernel launches, device memory;
 * @guvectorize and @reduce functions go down to api_guvec.c and
 * api_reduce.c.  The code each call runs comes from kj_api_find_compiled
 * (api.c).
 *
 * This file checks and converts what the host passes (with api_args.c's
 * helpers; its operands through api_stage.c) and plans the broadcast; the
 * running itself (and the staging of host arrays that cuda needs) is the
 * context's runtime target's (runtime_cpu.c, runtime_cuda.c), reached
 * through one indirect call.  Plain functions run on the host
 * whatever the target (kj_runtime_for says so once).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ------------------------------------------------------------- arguments */

static int plain_distance(const KjIrFunction *fn, const kjit_arg *args, int nargs,
                          const void *user)
{
    (void)user;
    return kj_api_signature_distance(fn, args, nargs);
}

static kjit_status check_args_present(kjit_context *context, const kjit_function *function,
                                      const kjit_arg *args, int nargs)
{
    int want = function->entry->variants.count ? kj_api_variant_of(function, 0)->param_count : 0;
    if (nargs != want)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s takes %d argument%s, %d given", function->entry->name, want,
                                want == 1 ? "" : "s", nargs);
    return KJIT_OK; /* each argument itself: kj_api_check_call, once */
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
        kj_api_describe_arg(&args[i], text, sizeof text);
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
        kj_api_describe_arg(&args[culprit], text, sizeof text);
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

static kjit_status call_planned(kjit_function *function, int sig, const kjit_arg *args,
                                int nargs, int extra, const kjit_array **inputs,
                                kjit_array *output, kjit_stream *stream, bool run);

/*
 * A @vectorize of several outputs (-> (f64, i32)): args are its inputs, then
 * optionally every output (arrays of the broadcast shape and of the output's
 * type); with the inputs alone, result[0..k) receives k new host arrays when
 * result_count is k (kjit_call_outputs; kjit_call's one result is refused).
 * Outputs 1.. go to the kernel as arrays after the inputs (vectorize.c), so
 * the plan takes them as inputs that are never scalars, output 0 as out.
 */
static kjit_status call_several(kjit_function *function, const kjit_arg *args, int nargs,
                                const kjit_array *out, kjit_array *result, int result_count,
                                kjit_stream *stream, bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    const KjIrFunction *first = kj_api_variant_of(function, 0);
    int n = first->param_count, k = first->output_count;
    if (nargs != n && nargs != n + k)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s takes %d input%s, then optionally its %d outputs; %d "
                                "arguments given", name, n, n == 1 ? "" : "s", k, nargs);
    if (out)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s has %d outputs: pass them as arguments after its inputs (out "
                                "is NULL), or a result of %d arrays to fill", name, k, k);
    if (n + k > KJ_MAX_VEC_INPUTS + 1)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: a vectorized call takes at most %d inputs and outputs", name,
                                KJ_MAX_VEC_INPUTS + 1);
    int sig;
    kjit_status status = choose_signature(function, args, n, &sig);
    if (status != KJIT_OK)
        return status;
    const KjIrFunction *scalar = kj_api_variant_of(function, sig);
    const kjit_array *inputs[KJ_MAX_VEC_INPUTS + 1];
    for (int i = 0; i < n; i++)
        inputs[i] = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
    int ndim = 0;
    int64_t shape[KJ_MAX_DIMS];
    char *error = NULL;
    status = kj_broadcast_shape(inputs, n, &ndim, shape, &error);
    if (status != KJIT_OK)
        return kj_api_take_named_error(context, status, name, error);
    kjit_array targets[KJ_MAX_VEC_OUTPUTS];
    int allocated = 0;
    for (int j = 0; j < k && status == KJIT_OK; j++) {
        kjit_dtype want;
        kj_type_dtype(j == 0 ? scalar->ret : scalar->outputs[j]->type, &want);
        if (nargs == n + k) {
            const kjit_arg *given = &args[n + j];
            const kjit_array *a = given->kind == KJIT_ARG_ARRAY ? given->value.array : NULL;
            bool same = a && a->ndim == ndim;
            for (int d = 0; same && d < ndim; d++)
                same = a->shape[d] == shape[d];
            if (!a || a->dtype != want) {
                char text[96];
                kj_api_describe_arg(given, text, sizeof text);
                status = kj_api_set_error(context, KJIT_ERROR_TYPE, "%s: output %d (argument %d) "
                                          "must be a %s array, not %s", name, j, n + j,
                                          kjit_dtype_name(want), text);
            } else if (!same) {
                char x[160], y[160];
                status = kj_api_set_error(context, KJIT_ERROR_SHAPE, "%s: output %d has shape %s "
                                          "but the broadcast shape is %s", name, j,
                                          kj_shape_string(x, sizeof x, a->ndim, a->shape),
                                          kj_shape_string(y, sizeof y, ndim, shape));
            } else {
                targets[j] = *a;
            }
        } else if (!run) {
            targets[j] = kjit_array_make(NULL, want, ndim, shape);
        } else if (result && result_count == k) {
            status = kj_api_alloc_output(context, name, want, ndim, shape, &targets[j]);
            allocated += status == KJIT_OK;
        } else if (result) {
            status = kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                      "%s has %d outputs: allocate them with kjit_call_outputs(f, "
                                      "args, nargs, results, %d), or give them after its inputs",
                                      name, k, k);
        } else {
            status = kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                      "%s: give its %d output arrays after the inputs, or a "
                                      "result of %d arrays to fill", name, k, k);
        }
    }
    /* inputs that an output overlaps are read from copies */
    kjit_array copies[KJ_MAX_VEC_INPUTS];
    void *host_copies[KJ_MAX_VEC_INPUTS];
    KjTemps temps;
    temps.count = 0;
    const kjit_array *written[KJ_MAX_VEC_OUTPUTS];
    for (int j = 0; j < k; j++)
        written[j] = &targets[j];
    int copied = 0;
    if (status == KJIT_OK && run && nargs == n + k)
        status = kj_api_unalias(context, inputs, n, written, k, true, copies, &temps,
                                host_copies, &copied, stream);
    for (int j = 1; j < k; j++)
        inputs[n + j - 1] = &targets[j];
    if (status == KJIT_OK)
        status = call_planned(function, sig, args, n + k - 1, k - 1, inputs, &targets[0], stream,
                              run);
    if (temps.count > 0) {
        kjit_status synced = context->runtime->synchronize(context, stream);
        status = status == KJIT_OK ? synced : status;
    }
    kj_api_free_temps(context, &temps);
    for (int i = 0; copied && i < n; i++)
        free(host_copies[i]);
    for (int j = 0; j < allocated; j++) {
        if (status == KJIT_OK && run && result)
            result[j] = targets[j];
        else
            free(targets[j].data);
    }
    return status;
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
    if (function->entry->variants.count > 0 && kj_api_variant_of(function, 0)->output_count > 1)
        return call_several(function, args, nargs, out, result, 0, stream, run);
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
    if (out) { /* a view kjit can read: kj_api_check_call */
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

    /* An input that the output overlaps, other than as the same view, is
     * read from a copy (a[::-1] into a, say). */
    kjit_array copies[KJ_MAX_VEC_INPUTS];
    void *host_copies[KJ_MAX_VEC_INPUTS];
    KjTemps temps;
    temps.count = 0; /* (not the whole struct: every call comes here) */
    const kjit_array *written[1] = {&target};
    int copied = 0;
    status = run && out ? kj_api_unalias(context, inputs, nargs, written, 1, true, copies, &temps,
                                         host_copies, &copied, stream)
                        : KJIT_OK;
    if (status == KJIT_OK)
        status = call_planned(function, sig, args, nargs, 0, inputs, &target, stream, run);
    if (temps.count > 0) {
        kjit_status synced = context->runtime->synchronize(context, stream);
        status = status == KJIT_OK ? synced : status;
    }
    kj_api_free_temps(context, &temps);
    for (int i = 0; copied && i < nargs; i++)
        free(host_copies[i]);
    if (status == KJIT_OK && run && result)
        *result = allocated;
    else
        free(allocated.data);
    return status;
}

/* A library's general code for a variant it lacks (aot.c): every operand
 * of the plan a view of ran_as->ndim dimensions, the planned ones padded
 * in front with extents of 1, a scalar one (params[i], converted) read
 * through strides of 0.  The elements are the same, each computed by the
 * same scalar function.  A scalar the code now reads through a pointer is
 * memory the target must reach: a host scalar (inputs[i] NULL) becomes the
 * 0-d host array holders[i] of its bytes in inputs, which a device target
 * stages as any host array (runtime_cuda.c; before, the device was handed
 * the address of the host's copy and faulted). */
static void generalize(KjBroadcastPlan *plan, const KjVecVariant *ran_as, int nargs,
                       void **params, const KjIrFunction *scalar, const kjit_array **inputs,
                       kjit_array *holders)
{
    int from = plan->variant.ndim, to = ran_as->ndim, pad = to - from;
    KjArrayDesc *descs[KJ_MAX_VEC_INPUTS + 1];
    for (int i = 0; i < nargs; i++) {
        if (plan->variant.scalar_mask & (1u << i)) {
            KjArrayDesc *d = &plan->inputs[i];
            d->data = params[i];
            if (!inputs[i]) {
                kjit_dtype dtype = KJIT_F64;
                kj_type_dtype(scalar->params[i]->type, &dtype); /* a scalar parameter */
                holders[i] = kjit_array_make(params[i], dtype, 0, NULL);
                inputs[i] = &holders[i];
            }
            for (int k = 0; k < from; k++) {
                d->shape[k] = plan->output.shape[k];
                d->strides[k] = 0;
            }
            params[i] = d;
        }
        descs[i] = &plan->inputs[i];
    }
    descs[nargs] = &plan->output;
    for (int o = 0; o <= nargs; o++) {
        KjArrayDesc *d = descs[o];
        for (int k = from - 1; k >= 0; k--) {
            d->shape[k + pad] = d->shape[k];
            d->strides[k + pad] = d->strides[k];
        }
        for (int k = 0; k < pad; k++) {
            d->shape[k] = 1;
            d->strides[k] = 0;
        }
    }
    plan->variant = *ran_as;
}

/* The rest of a vectorized call, its inputs and output settled. */
static kjit_status call_planned(kjit_function *function, int sig, const kjit_arg *args,
                                int nargs, int extra, const kjit_array **inputs,
                                kjit_array *output, kjit_stream *stream, bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    const KjIrFunction *scalar = kj_api_variant_of(function, sig);
    char *error = NULL;
    KjBroadcastPlan plan;
    /* the last `extra` inputs are outputs 1.. of a function of several */
    uint32_t outputs = extra ? ((1u << extra) - 1) << (nargs - extra) : 0;
    kjit_status status = kj_broadcast_plan_outputs(inputs, nargs, outputs, output, &plan, &error);
    if (status != KJIT_OK)
        return kj_api_take_named_error(context, status, name, error);
    KjCompiled *compiled = NULL;
    if (plan.size > 0)
        status = kj_api_find_compiled(function, sig, &plan.variant, 0, &compiled);
    if (status != KJIT_OK || !run || plan.size == 0)
        return status;

    KjScalar scalars[KJ_MAX_VEC_INPUTS];
    void *params[KJ_MAX_VEC_INPUTS + 2];
    for (int i = 0; i < nargs; i++) {
        if (!(plan.variant.scalar_mask & (1u << i)))
            params[i] = &plan.inputs[i];
        else if (plan.scalar_data[i])
            params[i] = (void *)plan.scalar_data[i];
        else {
            kj_api_convert_scalar(&args[i], scalar->params[i]->type, &scalars[i]);
            params[i] = &scalars[i];
        }
    }
    params[nargs] = &plan.output;
    /* the general code reads scalars through pointers: their holders */
    const kjit_array *ran_inputs[KJ_MAX_VEC_INPUTS];
    kjit_array holders[KJ_MAX_VEC_INPUTS];
    if (compiled->generalized) {
        memcpy(ran_inputs, inputs, sizeof *inputs * (size_t)nargs);
        generalize(&plan, &compiled->ran_as, nargs, params, scalar, ran_inputs, holders);
        inputs = ran_inputs;
    }
    KjCheckCall check;
    if (context->options.check) {
        status = kj_check_begin(context, compiled->runtime, &check, &params[nargs + 1]);
        if (status != KJIT_OK)
            return status;
    }

    KjVectorizedRun vectorized_run = {.compiled = compiled, .plan = &plan, .params = params,
                                      .inputs = inputs, .input_count = nargs, .output = output,
                                      .extra_outputs = extra, .stream = stream};
    status = context->runtime->run_vectorized(context, &vectorized_run);
    if (context->options.check)
        status = kj_check_end(context, &check, function->module->ir, name, stream, status);
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
    void *params[MAX_PARAMS + 2]; /* and checked mode's record, and cuda's scratch for
                                     local() sized at launch (KjLaunch) */
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
                kj_api_describe_arg(&args[i], given, sizeof given);
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
            kj_api_describe_arg(&args[i], given, sizeof given);
            return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                    "%s: argument %d (%s) must be a %s scalar, not %s", name, i,
                                    fn->params[i]->name, kj_type_name(param), given);
        }
        if (!kj_api_convert_scalar(&args[i], param, &m->scalars[i])) {
            kj_api_describe_arg(&args[i], given, sizeof given);
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

static kjit_status call_any(kjit_function *function, const kjit_arg *args, int nargs,
                           kjit_array *out, kjit_array *result)
{
    kjit_context *context = function->module->context;
    kjit_status status = kj_api_check_call(function, "kjit_call", args, nargs, out, NULL, true);
    if (status != KJIT_OK)
        return status;
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

kjit_status kjit_call(kjit_function *function, const kjit_arg *args, int nargs,
                      kjit_array *out, kjit_array *result)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_call", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    return kj_api_leave(&call, call_any(function, args, nargs, out, result), result);
}

static kjit_status call_outputs_any(kjit_function *function, const kjit_arg *args, int nargs,
                                    kjit_array *results, int count)
{
    kjit_context *context = function->module->context;
    kjit_status status = kj_api_check_call(function, "kjit_call_outputs", args, nargs, NULL, NULL,
                                           true);
    if (status != KJIT_OK)
        return status;
    if (!results)
        return kj_api_null(context, "kjit_call_outputs", "results");
    int outputs = kjit_function_output_count(function);
    if (function->entry->kind != KJ_FN_VECTORIZE || count != outputs)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s has %d output%s; kjit_call_outputs was given %d results",
                                function->entry->name, outputs, outputs == 1 ? "" : "s", count);
    if (outputs == 1)
        return call_vectorized(function, args, nargs, NULL, results, NULL, true);
    return call_several(function, args, nargs, NULL, results, count, NULL, true);
}

kjit_status kjit_call_outputs(kjit_function *function, const kjit_arg *args, int nargs,
                              kjit_array *results, int count)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_call_outputs", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status ran = call_outputs_any(function, args, nargs, results, count);
    kjit_status status = kj_api_leave(&call, ran, NULL);
    for (int k = 0; ran == KJIT_OK && status != KJIT_OK && k < count; k++) {
        kjit_array_free(&results[k]); /* cancelled after all: nothing comes back */
        memset(&results[k], 0, sizeof results[k]);
    }
    return status;
}

static kjit_status call_async_any(kjit_function *function, const kjit_arg *args, int nargs,
                                  kjit_array *out, kjit_stream *stream)
{
    kjit_context *context = function->module->context;
    kjit_status status = kj_api_check_call(function, "kjit_call_async", args, nargs, out, stream,
                                           true);
    if (status != KJIT_OK)
        return status;
    if (function->entry->kind == KJ_FN_GUVECTORIZE)
        return kj_gufunc_call(function, args, nargs, out, NULL, stream, true);
    if (function->entry->kind != KJ_FN_VECTORIZE)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: kjit_call_async takes a @vectorize or @guvectorize function",
                                function->entry->name);
    if (!out && kjit_function_output_count(function) < 2)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: kjit_call_async needs an output array", function->entry->name);
    return call_vectorized(function, args, nargs, out, NULL, stream, true);
}

kjit_status kjit_call_async(kjit_function *function, const kjit_arg *args, int nargs,
                            kjit_array *out, kjit_stream *stream)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_call_async", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    return kj_api_leave(&call, call_async_any(function, args, nargs, out, stream), NULL);
}

_Static_assert(KJIT_MAX_BLOCK_THREADS == KJ_MAX_BLOCK_THREADS,
               "kjit.h's block limit is the split form's");

/*
 * The one check of a launch's shape, for every target: CUDA's limits, so a
 * launch that runs on cpu runs on a GPU too, and so blockIdx, gridDim and
 * blockDim (i32 in the language) hold every value a launch can give them:
 * grid x below 2^31, y and z below 65536; a block of at most 1024 threads,
 * at most 1024 in x and y and 64 in z.
 */
static kjit_status check_launch_shape(kjit_function *function, const uint32_t grid[3],
                                      const uint32_t block[3])
{
    static const uint32_t grid_limit[3] = {KJIT_MAX_GRID_X, KJIT_MAX_GRID_YZ, KJIT_MAX_GRID_YZ};
    static const uint32_t block_limit[3] = {KJIT_MAX_BLOCK_XY, KJIT_MAX_BLOCK_XY, KJIT_MAX_BLOCK_Z};
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
    static const char axis[3] = {'x', 'y', 'z'};
    for (int d = 0; d < 3; d++) {
        if (grid[d] > grid_limit[d])
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: a grid of %u blocks in %c; at most %u (as on a GPU)",
                                    name, grid[d], axis[d], grid_limit[d]);
        if (block[d] > block_limit[d])
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: a block of %u threads in %c; at most %u (as on a GPU)",
                                    name, block[d], axis[d], block_limit[d]);
    }
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (threads > KJIT_MAX_BLOCK_THREADS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: a block of %llu threads; at most %d (as on a GPU)", name,
                                (unsigned long long)threads, KJIT_MAX_BLOCK_THREADS);
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
    if (options)
        memset(options, 0, sizeof *options);
}

/* The most dynamic shared memory a launch may ask for on the cpu targets (a
 * GPU allows far less: the driver says how much). */
#define MAX_DYNAMIC_SHARED_BYTES ((size_t)1 << 30)

static kjit_status launch_any(kjit_function *function, const uint32_t grid[3],
                              const uint32_t block[3], const kjit_arg *args, int nargs,
                              const kjit_launch_options *options)
{
    kjit_context *context = function->module->context;
    kjit_launch_options defaults;
    if (!options) {
        kjit_launch_options_init(&defaults);
        options = &defaults;
    }
    kjit_stream *stream = options->stream;
    size_t dynamic_bytes = options->dynamic_shared_bytes;
    kjit_status status = kj_api_check_call(function, "kjit_launch", args, nargs, NULL, stream, true);
    if (status != KJIT_OK)
        return status;
    if (!grid || !block)
        return kj_api_null(context, "kjit_launch", grid ? "block" : "grid");
    status = check_launch_shape(function, grid, block);
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
    char shape[96];
    if (status == KJIT_OK && function->module->library && /* a --block shape's cuda code */
        kj_aot_cuda_shape(function, compiled, block, shape, sizeof shape)) {
        KjPipelineRoot request = {0};
        status = kj_api_find_lifted(function, compiled->signature, &request,
                                    compiled->contiguous, shape, &compiled);
    }
    if (status != KJIT_OK)
        return status;
    /* local() sized at launch: its bytes per thread, from the arguments,
     * refused here when out of bounds, before anything runs */
    int64_t launch_local_bytes = 0;
    if (compiled->root->launch_locals.count > 0) {
        char why[512];
        const int64_t *shapes[MAX_PARAMS];
        for (int i = 0; i < nargs; i++)
            shapes[i] = args[i].kind == KJIT_ARG_ARRAY ? m.descs[i].shape : NULL;
        if (!kj_local_launch_bytes(compiled->root, m.params, shapes, &launch_local_bytes, why,
                                   sizeof why))
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: %s",
                                    function->entry->name, why);
    }
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
                       .dynamic_shared_bytes = dynamic_bytes,
                       .launch_local_bytes = (size_t)launch_local_bytes,
                       .written = function->params_written};
    status = compiled->runtime->launch(context, &launch);
    if (context->options.check)
        status = kj_check_end(context, &check, function->module->ir, function->entry->name,
                              stream, status);
    return status;
}

kjit_status kjit_launch_ex(kjit_function *function, const uint32_t grid[3],
                           const uint32_t block[3], const kjit_arg *args, int nargs,
                           const kjit_launch_options *options)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_launch", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    return kj_api_leave(&call, launch_any(function, grid, block, args, nargs, options), NULL);
}

kjit_status kjit_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                         const kjit_array *out)
{
    if (!kj_api_live_function(function, "kjit_prepare"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status checked = kj_api_check_call(function, "kjit_prepare", args, nargs, out, NULL,
                                            false);
    if (checked != KJIT_OK)
        return checked;
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
    if (!kj_api_live_function(function, "kjit_function_match"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status status = kj_api_check_call(function, "kjit_function_match", args, nargs, NULL,
                                           NULL, false);
    if (status != KJIT_OK)
        return status;
    if (!signature)
        return kj_api_null(function->module->context, "kjit_function_match", "signature");
    if (function->entry->kind == KJ_FN_GUVECTORIZE)
        return kj_gufunc_match(function, args, nargs, signature);
    if (function->entry->kind == KJ_FN_REDUCE)
        return kj_reduce_match(function, args, nargs, signature);
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
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_device_alloc"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_device_alloc", "out");
    memset(out, 0, sizeof *out);
    if (ndim > 0 && !shape)
        return kj_api_null(context, "kjit_device_alloc", "shape");
    int64_t bytes;
    char *error = NULL;
    kjit_status status = kj_shape_size(dtype, ndim, shape, NULL, &bytes, &error);
    if (status != KJIT_OK)
        return kj_api_take_error(context, status, "kjit_device_alloc: ", error);
    void *data = NULL;
    status = context->runtime->alloc(context, (size_t)bytes, &data);
    if (status != KJIT_OK)
        return status;
    pthread_mutex_lock(&context->handles_lock);
    kj_pointer_set_add(&context->device_blocks, data);
    pthread_mutex_unlock(&context->handles_lock);
    *out = kjit_array_make(data, dtype, ndim, shape);
    out->memory = KJIT_MEMORY_DEVICE;
    return KJIT_OK;
}

kjit_status kjit_device_free(kjit_context *context, kjit_array *array)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_device_free"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!array || !array->data)
        return KJIT_OK;
    if (array->memory != KJIT_MEMORY_DEVICE)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "kjit_device_free takes a device array (use kjit_array_free)");
    /* Only what kjit_device_alloc gave this context, once. */
    pthread_mutex_lock(&context->handles_lock);
    bool ours = kj_pointer_set_remove(&context->device_blocks, array->data);
    pthread_mutex_unlock(&context->handles_lock);
    if (!ours)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "kjit_device_free: %p is not device memory that "
                                "kjit_device_alloc gave this context (freed already?)",
                                array->data);
    kjit_status status = context->runtime->free(context, array->data);
    array->data = NULL;
    return status;
}

kjit_status kjit_copy(kjit_context *context, kjit_array *dst, const kjit_array *src,
                      kjit_stream *stream)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_copy"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!dst || !src)
        return kj_api_null(context, "kjit_copy", dst ? "src" : "dst");
    for (int i = 0; i < 2; i++) {
        char *error = NULL;
        kjit_status status = kj_array_check(i ? dst : src, &error);
        if (status != KJIT_OK)
            return kj_api_take_error(context, status,
                                     i ? "kjit_copy: the destination: " : "kjit_copy: the source: ",
                                     error);
    }
    kjit_status status = kj_api_check_array(context, "kjit_copy", "dst", dst);
    if (status == KJIT_OK)
        status = kj_api_check_array(context, "kjit_copy", "src", src);
    if (status == KJIT_OK)
        status = kj_api_check_stream(context, "kjit_copy", stream);
    if (status != KJIT_OK)
        return status;
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
    int64_t bytes;
    kj_shape_size(src->dtype, src->ndim, src->shape, NULL, &bytes, NULL); /* checked above */
    if (bytes == 0)
        return KJIT_OK;
    return context->runtime->copy(context, dst, src, (size_t)bytes, stream);
}
