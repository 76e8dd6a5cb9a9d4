/*
 * api_guvec.c: calls of @guvectorize functions on every target, beside
 * api_call.c (kjit_call, kjit_call_async and kjit_prepare come here).
 *
 * Each operand's dimensions are its loop dimensions, then its core ones (as
 * many as its core in the layout has).  The core sizes are settled from the
 * inputs, each dimension name by the first operand that has it, and every
 * other operand must agree; the loop dimensions of the inputs broadcast with
 * NumPy's rules into the loop shape; outputs, given or allocated, have the
 * loop shape exactly, then their core.  The call then runs the kernel that
 * the guvectorize pass made for the signature and the loop rank (at least 1:
 * a call without loop dimensions runs one loop element), with every operand
 * described over the loop shape, a broadcast loop dimension at stride 0.
 * The work items are the loop elements: a thread each on cuda, a loop on
 * cpu, chunks across the pool on parallel, through the runtime target's
 * run_items (a VEC_KERNEL over work items, as a reduction's LANES
 * level).  On a target whose memory is not the host's, host operands are
 * copied over and outputs back, as api_reduce.c does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

#define MAX_OPERANDS KJ_GUFUNC_MAX_OPERANDS

const char *kjit_function_layout(const kjit_function *function)
{
    if (!kj_api_live(function, KJ_HANDLE_FUNCTION, "kjit_function_layout"))
        return NULL;
    const KjGufuncLayout *l = function->entry->layout;
    return l ? l->text : NULL;
}

int kjit_function_layout_inputs(const kjit_function *function)
{
    if (!kj_api_live(function, KJ_HANDLE_FUNCTION, "kjit_function_layout_inputs"))
        return 0;
    const KjGufuncLayout *l = function->entry->layout;
    return l ? l->inputs : 0;
}

int kjit_function_layout_outputs(const kjit_function *function)
{
    if (!kj_api_live(function, KJ_HANDLE_FUNCTION, "kjit_function_layout_outputs"))
        return 0;
    const KjGufuncLayout *l = function->entry->layout;
    return l ? l->outputs : 0;
}

/* ----------------------------------------------------------- signatures */

/* The element type of a core parameter (its own type for a "()" input). */
static const KjType *elem_of(const KjIrFunction *fn, int q)
{
    const KjType *t = fn->params[q]->type;
    return t->kind == KJ_TYPE_ARRAY ? t->elem : t;
}

/* How far the arguments are from signature `fn`: as kj_api_signature_distance,
 * on the element types. */
static int distance(const KjIrFunction *fn, const kjit_arg *args, int nargs, const void *user)
{
    (void)user;
    int score = 0;
    for (int i = 0; i < nargs; i++) {
        int m = kj_api_arg_distance(&args[i], elem_of(fn, i));
        if (m < 0)
            return -1;
        score += m;
    }
    return score;
}

static kjit_status choose(kjit_function *function, const kjit_arg *args, int nargs, int *sig)
{
    int best = kj_api_closest_signature(function, distance, args, nargs, NULL);
    if (best >= 0) {
        *sig = best;
        return KJIT_OK;
    }
    KjBuf message = {0};
    kj_api_print_element_types(&message, function->entry->name, args, nargs);
    kj_buf_printf(&message, ": no signature of %s takes these element types; signatures on "
                  "offer: ", function->entry->name);
    kj_api_print_signatures(&message, function);
    kj_api_set_error(function->module->context, KJIT_ERROR_TYPE, "%s", message.data);
    kj_buf_free(&message);
    return KJIT_ERROR_TYPE;
}

/* The arguments are arrays and scalars kjit can read, as many as the inputs
 * or as the inputs and outputs together, outputs given as arrays. */
static kjit_status check_args(kjit_function *function, const kjit_arg *args, int nargs)
{
    kjit_context *context = function->module->context;
    const KjGufuncLayout *l = function->entry->layout;
    const char *name = function->entry->name;
    int all = l->inputs + l->outputs;
    if (nargs != l->inputs && nargs != all)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s takes its %d input%s, or its %d inputs and %d outputs "
                                "(\"%s\"); %d arguments given", name, l->inputs,
                                l->inputs == 1 ? "" : "s", l->inputs, l->outputs, l->text, nargs);
    kjit_status status = KJIT_OK; /* each argument itself: kj_api_check_call */
    for (int i = l->inputs; i < nargs && status == KJIT_OK; i++)
        if (args[i].kind != KJIT_ARG_ARRAY)
            status = kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                      "argument %d of %s is output %d, which must be an array",
                                      i, name, i - l->inputs);
    return status;
}

kjit_status kj_gufunc_match(kjit_function *function, const kjit_arg *args, int nargs,
                            int *signature)
{
    kjit_status status = check_args(function, args, nargs);
    return status != KJIT_OK ? status : choose(function, args, nargs, signature);
}

/* ---------------------------------------------------------- the shapes */

/* The call's geometry: core sizes by dimension name, the loop shape, and each
 * operand's view (a scalar input as a 0-d array of its converted value). */
typedef struct Geometry {
    int64_t core[KJ_GUFUNC_MAX_NAMES];
    int core_from[KJ_GUFUNC_MAX_NAMES]; /* the argument that settled it; -1: none yet */
    int loop_ndim;
    int64_t loop[KJ_MAX_DIMS];
    int64_t items;
    kjit_array views[MAX_OPERANDS];
    unsigned char scalars[MAX_OPERANDS][16];
} Geometry;

/* Core sizes and loop dimensions of the inputs. */
static kjit_status input_shapes(kjit_function *function, const KjIrFunction *fn,
                                const kjit_arg *args, Geometry *g)
{
    kjit_context *context = function->module->context;
    const KjGufuncLayout *l = function->entry->layout;
    const char *name = function->entry->name;
    for (int d = 0; d < KJ_GUFUNC_MAX_NAMES; d++)
        g->core_from[d] = -1;
    g->loop_ndim = 0;
    for (int q = 0; q < l->inputs; q++) {
        if (args[q].kind == KJIT_ARG_ARRAY) {
            g->views[q] = *args[q].value.array;
        } else {
            kjit_dtype want;
            kj_type_dtype(elem_of(fn, q), &want);
            if (!kj_api_convert_scalar(&args[q], elem_of(fn, q), g->scalars[q]))
                return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                        "%s: argument %d does not convert to %s", name, q,
                                        kjit_dtype_name(want));
            g->views[q] = kjit_array_make(g->scalars[q], want, 0, NULL);
        }
        const kjit_array *a = &g->views[q];
        int rank = l->rank[q];
        if (a->ndim < rank) {
            char core[160];
            int n = snprintf(core, sizeof core, "(");
            for (int d = 0; d < rank && n < (int)sizeof core; d++)
                n += snprintf(core + n, sizeof core - (size_t)n, "%s%s", d ? "," : "",
                              l->names[l->dims[q][d]]);
            snprintf(core + n, n < (int)sizeof core ? sizeof core - (size_t)n : 0, ")");
            return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                    "%s: argument %d has %d dimension%s, but its core %s needs "
                                    "at least %d", name, q, a->ndim, a->ndim == 1 ? "" : "s",
                                    core, rank);
        }
        int loop = a->ndim - rank;
        for (int d = 0; d < rank; d++) {
            int dim = l->dims[q][d];
            int64_t size = a->shape[loop + d];
            if (g->core_from[dim] < 0) {
                g->core[dim] = size;
                g->core_from[dim] = q;
            } else if (g->core[dim] != size) {
                return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                        "%s: core dimension %s: %lld in argument %d, %lld in "
                                        "argument %d", name, l->names[dim],
                                        (long long)g->core[dim], g->core_from[dim],
                                        (long long)size, q);
            }
        }
        /* Broadcast this input's loop dimensions into the loop shape. */
        int ndim = loop > g->loop_ndim ? loop : g->loop_ndim;
        int64_t shape[KJ_MAX_DIMS];
        for (int k = 0; k < ndim; k++) {
            int i = k - (ndim - g->loop_ndim), j = k - (ndim - loop);
            int64_t have = i >= 0 ? g->loop[i] : 1, add = j >= 0 ? a->shape[j] : 1;
            if (have != add && have != 1 && add != 1) {
                char s1[160], s2[160];
                return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                        "%s: the loop dimensions do not broadcast: %s so far, "
                                        "and argument %d has %s before its core", name,
                                        kj_shape_string(s1, sizeof s1, g->loop_ndim, g->loop), q,
                                        kj_shape_string(s2, sizeof s2, loop, a->shape));
            }
            shape[k] = have == 1 ? add : have;
        }
        g->loop_ndim = ndim;
        memcpy(g->loop, shape, sizeof shape[0] * (size_t)ndim);
    }
    /* Each input fits, but their broadcast loop may not. */
    if (kj_shape_size(KJIT_U8, g->loop_ndim, g->loop, &g->items, NULL, NULL) != KJIT_OK) {
        char text[KJ_SHAPE_TEXT_SIZE];
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the loop shape %s has more than 2^63 - 1 elements", name,
                                kj_shape_string(text, sizeof text, g->loop_ndim, g->loop));
    }
    return KJIT_OK;
}

/* The shape output q must have: the loop shape, then its core. */
static int output_shape(const KjGufuncLayout *l, const Geometry *g, int q, int64_t *shape)
{
    int n = 0;
    for (int k = 0; k < g->loop_ndim; k++)
        shape[n++] = g->loop[k];
    for (int d = 0; d < l->rank[q]; d++)
        shape[n++] = g->core[l->dims[q][d]];
    return n;
}

/* Operand q's descriptor for the kernel, over `loop_ndim` loop dimensions
 * (the call's, or one of extent 1 when it has none). */
static kjit_status kernel_desc(kjit_function *function, const Geometry *g, int q, int loop_ndim,
                               const KjGufuncLayout *l, KjArrayDesc *desc)
{
    const kjit_array *a = &g->views[q];
    int64_t size = (int64_t)kjit_dtype_size(a->dtype);
    memset(desc, 0, sizeof *desc);
    desc->data = a->data;
    int rank = l->rank[q];
    int loop = a->ndim - rank;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != 1 && a->strides[d] % size != 0)
            return kj_api_set_error(function->module->context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: argument %d has a stride that is not a multiple of its "
                                    "element size", function->entry->name, q);
    for (int k = 0; k < loop_ndim; k++) {
        int j = k - (loop_ndim - loop);
        desc->shape[k] = k < loop_ndim - g->loop_ndim ? 1 : g->loop[k - (loop_ndim - g->loop_ndim)];
        desc->strides[k] = j >= 0 && a->shape[j] != 1 ? a->strides[j] / size : 0;
    }
    for (int d = 0; d < rank; d++) {
        desc->shape[loop_ndim + d] = a->shape[loop + d];
        desc->strides[loop_ndim + d] = a->strides[loop + d] / size;
    }
    if (rank == 0 && q >= l->inputs) {
        desc->shape[loop_ndim] = 1; /* a "()" output: one element */
        desc->strides[loop_ndim] = 1;
    }
    return KJIT_OK;
}

/* The rank of operand q's descriptor in the kernel: the loop, then its core. */
static int descs_rank(const KjIrFunction *fn, int q, int loop_ndim)
{
    const KjType *t = fn->params[q]->type;
    return loop_ndim + (t->kind == KJ_TYPE_ARRAY ? t->ndim : 0);
}

/* ------------------------------------------------------------ the call */

/* The copies of inputs that outputs overlapped (kj_api_unalias), once the
 * work that reads them is done. */
static kjit_status free_copies(kjit_context *context, KjTemps *temps, void **host_copies,
                               int count, kjit_stream *stream)
{
    kjit_status status = KJIT_OK;
    if (temps->count > 0)
        status = context->runtime->synchronize(context, stream);
    kj_api_free_temps(context, temps);
    for (int q = 0; q < count; q++)
        free(host_copies[q]);
    return status;
}

kjit_status kj_gufunc_call(kjit_function *function, const kjit_arg *args, int nargs,
                           kjit_array *out, kjit_array *result, kjit_stream *stream, bool run)
{
    kjit_context *context = function->module->context;
    const KjGufuncLayout *l = function->entry->layout;
    const char *name = function->entry->name;
    kjit_status status = check_args(function, args, nargs);
    if (status != KJIT_OK)
        return status;
    int n = l->inputs + l->outputs;
    bool outputs_given = nargs == n;
    if (outputs_given && out)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the outputs are given as arguments, so out must be NULL",
                                name);
    if (!outputs_given && l->outputs > 1)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s has %d outputs: give them as arguments after the inputs",
                                name, l->outputs);
    if (!outputs_given && run && !out && !result)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: give an output array or a result to fill", name);
    int sig = 0;
    status = choose(function, args, l->inputs, &sig);
    if (status != KJIT_OK)
        return status;
    const KjIrFunction *fn = kj_api_variant_of(function, sig);

    Geometry *g = kj_xcalloc(1, sizeof *g);
    status = input_shapes(function, fn, args, g);
    if (status != KJIT_OK) {
        free(g);
        return status;
    }

    /* The outputs: given (arguments or `out`) and checked, or allocated. */
    kjit_array allocated = {0};
    for (int q = l->inputs; q < n && status == KJIT_OK; q++) {
        int64_t want[KJ_MAX_DIMS * 2];
        int ndim = output_shape(l, g, q, want);
        kjit_dtype dtype;
        kj_type_dtype(elem_of(fn, q), &dtype);
        const kjit_array *given = outputs_given ? args[q].value.array : out;
        if (ndim > KJIT_MAX_DIMS) {
            status = kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                      "%s: output %d would have %d dimensions (at most %d)", name,
                                      q - l->inputs, ndim, KJIT_MAX_DIMS);
        } else if (given) {
            bool same = given->ndim == ndim, repeats = false;
            for (int d = 0; same && d < ndim; d++) {
                same = given->shape[d] == want[d];
                repeats |= given->shape[d] > 1 && given->strides[d] == 0;
            }
            char s1[160], s2[160];
            if (same && repeats)
                status = kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                          "%s: output %d has a stride of 0, so loop elements "
                                          "would write one element together", name,
                                          q - l->inputs);
            else if (!same)
                status = kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                          "%s: output %d has shape %s, but the call gives %s "
                                          "(the loop shape, then the core)", name, q - l->inputs,
                                          kj_shape_string(s1, sizeof s1, given->ndim, given->shape),
                                          kj_shape_string(s2, sizeof s2, ndim, want));
            else if (given->dtype != dtype)
                status = kj_api_set_error(context, KJIT_ERROR_TYPE,
                                          "%s: output %d has element type %s, but %s%s writes %s",
                                          name, q - l->inputs, kjit_dtype_name(given->dtype), name,
                                          function->signature_text[sig], kjit_dtype_name(dtype));
            else
                g->views[q] = *given;
        } else if (run) {
            status = kj_api_alloc_output(context, name, dtype, ndim, want, &allocated);
            g->views[q] = allocated;
        } else {
            g->views[q] = kjit_array_make(NULL, dtype, ndim, want);
        }
    }

    /* An input that an output overlaps is read from a copy: a core reads
     * many elements, so not even the very same view is safe. */
    const kjit_array *read[MAX_OPERANDS], *written[MAX_OPERANDS];
    kjit_array copies[MAX_OPERANDS];
    void *host_copies[MAX_OPERANDS] = {0};
    KjTemps copy_temps = {.count = 0};
    int copied = 0;
    for (int q = 0; q < n; q++)
        (q < l->inputs ? read : written)[q < l->inputs ? q : q - l->inputs] = &g->views[q];
    if (status == KJIT_OK && run)
        status = kj_api_unalias(context, read, l->inputs, written, l->outputs, false, copies,
                                &copy_temps, host_copies, &copied, stream);
    for (int q = 0; q < l->inputs && status == KJIT_OK; q++)
        if (read[q] != &g->views[q])
            g->views[q] = *read[q];

    /* The kernel's code, for the loop rank. */
    int loop_ndim = g->loop_ndim > 0 ? g->loop_ndim : 1;
    KjCompiled *compiled = NULL;
    for (int q = 0; q < n && status == KJIT_OK; q++) {
        int rank = descs_rank(fn, q, loop_ndim);
        if (rank > KJ_MAX_DIMS)
            status = kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                      "%s: argument %d has %d loop and %d core dimensions (at "
                                      "most %d in all)", name, q, loop_ndim, rank - loop_ndim,
                                      KJ_MAX_DIMS);
    }
    /* The operands' descriptors over the loop, and whether every core is
     * C-contiguous (the code for that case knows its core strides). */
    KjArrayDesc descs[MAX_OPERANDS];
    bool contiguous = true;
    for (int q = 0; q < n && status == KJIT_OK; q++) {
        status = kernel_desc(function, g, q, loop_ndim, l, &descs[q]);
        int64_t expect = 1;
        for (int d = descs_rank(fn, q, loop_ndim) - 1; d >= loop_ndim; d--) {
            if (descs[q].shape[d] != 1 && descs[q].strides[d] != expect)
                contiguous = false;
            expect *= descs[q].shape[d];
        }
    }
    if (status == KJIT_OK) {
        KjPipelineRoot request = {.gufunc = l, .loop_ndim = loop_ndim,
                                  .gufunc_contiguous = contiguous};
        char key[48];
        snprintf(key, sizeof key, "guvectorize loop %d%s", loop_ndim,
                 contiguous ? " contiguous" : "");
        status = kj_api_find_lifted(function, sig, &request, 0, key, &compiled);
    }
    if (status != KJIT_OK || !run || g->items == 0) {
        if (status == KJIT_OK && run && result && !outputs_given && !out)
            *result = allocated;
        else
            free(allocated.data);
        free_copies(context, &copy_temps, host_copies, l->inputs, stream);
        free(g);
        return status;
    }

    /* Operands on the target: host ones copied over when its memory is not
     * the host's (a given output too, so that its gaps survive the copy back). */
    const KjRuntimeTarget *runtime = context->runtime;
    bool staged = !runtime->device_memory_on_host;
    KjTemps temps = {.count = 0};
    void *params[MAX_OPERANDS + 1];
    void *host_data[MAX_OPERANDS];
    for (int q = 0; q < n && status == KJIT_OK; q++) {
        params[q] = &descs[q];
        host_data[q] = NULL;
        if (!staged || g->views[q].memory == KJIT_MEMORY_DEVICE)
            continue;
        bool fresh = q >= l->inputs && g->views[q].data == allocated.data;
        status = kj_api_stage(context, &temps, &g->views[q], !fresh, stream, &descs[q].data);
        host_data[q] = g->views[q].data;
    }

    KjCheckCall check;
    bool checking = context->options.check && status == KJIT_OK;
    if (checking) {
        status = kj_check_begin(context, compiled->runtime, &check, &params[n]);
        checking = status == KJIT_OK;
    }
    if (status == KJIT_OK) {
        KjItemsRun level = {.name = name, .compiled = compiled, .warps = false,
                                  .items = g->items, .params = params, .stream = stream};
        status = runtime->run_items(context, &level);
    }
    if (checking)
        status = kj_check_end(context, &check, function->module->ir, name, stream, status);
    for (int q = l->inputs; q < n && status == KJIT_OK; q++) {
        if (!host_data[q])
            continue;
        int64_t low, high;
        kj_array_extent(&g->views[q], &low, &high);
        status = kj_api_copy_bytes(context, (char *)host_data[q] + low, false,
                                   (char *)descs[q].data + low, true, (size_t)(high - low),
                                   stream);
    }
    if (status == KJIT_OK && temps.count > 0)
        status = runtime->synchronize(context, stream);
    kj_api_free_temps(context, &temps);
    kjit_status freed = free_copies(context, &copy_temps, host_copies, l->inputs, stream);
    status = status == KJIT_OK ? freed : status;
    if (status == KJIT_OK && result && !outputs_given && !out)
        *result = allocated;
    else
        free(allocated.data);
    free(g);
    return status;
}
