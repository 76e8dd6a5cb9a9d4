/*
 * api_reduce.c: kjit_reduce, the reductions of @reduce functions on every
 * target, below api_call.c (whose kjit_prepare and kjit_function_match of a
 * @reduce function come here).
 *
 * A reduction runs as levels of one kernel shape (reduce.c): the first level
 * reads the inputs (or the map's inputs, broadcast together) and writes one
 * partial per block of KJ_REDUCE_BLOCK reduced elements of each output; each
 * further level reduces those partials, a contiguous [outputs, blocks] array,
 * the same way, until one value per output is left.  The order of the
 * operations is a function of the reduced length alone, and the work items
 * are independent (no atomics, no dependence on the number of threads), so a
 * reduction gives the same bits on every run, on cpu and parallel alike, and
 * on cuda too where contraction does not fuse a map's multiply into the add.
 *
 * Before the first level the geometry is normalised: the broadcast shape is
 * split into the kept dimensions (the output's) and the reduced ones, each
 * in C order; dimensions of extent 1 are dropped and neighbours that every
 * input walks as one run are merged (neither changes the order).  The cuda
 * target runs a contiguous level as the WARPS form (V lanes a thread, 32 / V
 * threads a block of elements, vector loads where every input is aligned)
 * and a strided one as the COLUMNS form (thread blocks of 32 neighbouring
 * outputs, 32 / V threads of V lanes each per output, a warp's loads side
 * by side); cpu and parallel run the LANES form, split across the pool by
 * work items, and the cuda forms under KJIT_REDUCE_FORM=warps.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

#define MAX_INPUTS KJ_MAX_VEC_INPUTS

/* ----------------------------------------------------------- signatures */

static kjit_function *map_function(const kjit_function *function)
{
    const KjIrEntry *map = function->entry->map;
    if (!map)
        return NULL;
    kjit_module *module = function->module;
    for (int i = 0; i < module->function_count; i++)
        if (module->functions[i]->entry == map)
            return module->functions[i];
    return NULL;
}

kjit_function *kjit_function_map(const kjit_function *function)
{
    if (!kj_api_live(function, KJ_HANDLE_FUNCTION, "kjit_function_map"))
        return NULL;
    return function->entry->kind == KJ_FN_REDUCE ? map_function(function) : NULL;
}

int kjit_function_reduce_inputs(const kjit_function *function)
{
    if (!kj_api_live(function, KJ_HANDLE_FUNCTION, "kjit_function_reduce_inputs"))
        return 0;
    if (function->entry->kind != KJ_FN_REDUCE)
        return 0;
    const KjIrEntry *map = function->entry->map;
    return map ? ((KjIrFunction *)map->variants.items[0])->param_count : 1;
}

/* The reduce signature whose T is `t`, or -1. */
static int reduce_signature_of(const kjit_function *function, const KjType *t)
{
    for (int s = 0; s < function->entry->variants.count; s++)
        if (kj_api_variant_of(function, s)->ret == t)
            return s;
    return -1;
}

/* How far the arguments are from signature g of a fused map whose result
 * the reduction (user) has a signature for; -1 when it has none. */
static int map_distance(const KjIrFunction *g, const kjit_arg *args, int nargs, const void *user)
{
    if (reduce_signature_of(user, g->ret) < 0)
        return -1;
    return kj_api_signature_distance(g, args, nargs);
}

/* Picks the reduce signature and, for a fused map, the map's signature, from
 * the arguments' element types. */
static kjit_status choose(kjit_function *function, const kjit_arg *args, int nargs, int *sig,
                          kjit_function **map_fn, int *map_sig)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    kjit_function *map = map_function(function);
    *map_fn = map;
    *map_sig = -1;
    *sig = -1;
    if (!map) {
        if (nargs != 1)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s reduces one array; %d arguments given", name, nargs);
        if (args[0].kind != KJIT_ARG_ARRAY)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s reduces an array, not a scalar", name);
        *sig = reduce_signature_of(function, kj_dtype_type(args[0].value.array->dtype));
        if (*sig >= 0)
            return KJIT_OK;
    } else {
        int want = map->entry->variants.count ? kj_api_variant_of(map, 0)->param_count : 0;
        if (nargs != want)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s reduces %s over its %d argument%s; %d given", name,
                                    map->entry->name, want, want == 1 ? "" : "s", nargs);
        int best = kj_api_closest_signature(map, map_distance, args, nargs, function);
        if (best >= 0) {
            *map_sig = best;
            *sig = reduce_signature_of(function, kj_api_variant_of(map, best)->ret);
            return KJIT_OK;
        }
    }
    KjBuf message = {0};
    kj_api_print_element_types(&message, name, args, nargs);
    kj_buf_printf(&message, ": no signature takes these types; %s takes ",
                  map ? map->entry->name : name);
    kj_api_print_signatures(&message, map ? map : function);
    kj_api_set_error(context, KJIT_ERROR_TYPE, "%s", message.data);
    kj_buf_free(&message);
    return KJIT_ERROR_TYPE;
}

kjit_status kj_reduce_match(kjit_function *function, const kjit_arg *args, int nargs,
                            int *signature)
{
    kjit_function *map; /* the arguments themselves: kj_api_check_call */
    int map_sig;
    return choose(function, args, nargs, signature, &map, &map_sig);
}

/* ------------------------------------------------------------- geometry */

/* One dimension of the iteration: its extent and each input's element stride. */
typedef struct Dim {
    int64_t extent;
    int64_t stride[MAX_INPUTS];
} Dim;

/* Drops extent-1 dimensions and merges neighbours that every input walks
 * as one run (outer stride = inner stride * inner extent). */
static int normalise(Dim *dims, int count, int inputs)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (dims[i].extent == 1)
            continue;
        if (n > 0) {
            Dim *prev = &dims[n - 1];
            bool merge = true;
            for (int q = 0; merge && q < inputs; q++)
                merge = prev->stride[q] == dims[i].stride[q] * dims[i].extent;
            if (merge) {
                prev->extent *= dims[i].extent;
                for (int q = 0; q < inputs; q++)
                    prev->stride[q] = dims[i].stride[q];
                continue;
            }
        }
        dims[n++] = dims[i];
    }
    return n;
}

/* What one level runs: its geometry and its arrays. */
typedef struct Level {
    KjReduceVariant variant;
    int inputs;
    KjArrayDesc in[MAX_INPUTS];
    KjArrayDesc out;
    int64_t items, chunks, m;
    Dim kept[KJ_MAX_DIMS], reduced[KJ_MAX_DIMS];
    KjCompiled *compiled;
} Level;

static int64_t chunks_of(int64_t m)
{
    return m <= 0 ? 1 : (m + KJ_REDUCE_BLOCK - 1) / KJ_REDUCE_BLOCK;
}

/* The variant's name, for the compiled-code table and the cache key. */
void kj_reduce_variant_key(const KjReduceVariant *v, int map_sig, char *buf, size_t size)
{
    snprintf(buf, size, "reduce form %d%s lanes %d%s kept %d reduced %d contiguous %d map %d",
             (int)v->form, v->simd ? " simd" : "", v->thread_lanes, v->aligned ? " aligned" : "",
             v->kept_rank, v->reduced_rank, (int)v->contiguous, v->mapped ? map_sig : -1);
}

static kjit_status find_level_code(kjit_function *function, int sig, kjit_function *map,
                                   int map_sig, Level *level)
{
    KjPipelineRoot request = {.reduce = &level->variant};
    if (level->variant.mapped)
        request.map = kj_api_variant_of(map, map_sig);
    char key[128];
    kj_reduce_variant_key(&level->variant, map_sig, key, sizeof key);
    uint32_t all_arrays = (1u << (level->inputs + 1)) - 1; /* the inputs and out */
    uint32_t contiguous = level->variant.form == KJ_REDUCE_FORM_LANES ? 0 : all_arrays;
    return kj_api_find_lifted(function, sig, &request, contiguous, key, &level->compiled);
}

/* The kernel's arguments, in reduce.c's order. */
typedef struct LevelArgs {
    void *params[MAX_INPUTS * 2 * KJ_MAX_DIMS + 64];
    int64_t ints[MAX_INPUTS * 2 * KJ_MAX_DIMS + 32];
    uint8_t has_init;
    KjScalar init;
} LevelArgs;

static void level_args(Level *level, bool has_init, const KjScalar *init, LevelArgs *a)
{
    int p = 0, n = 0;
    for (int q = 0; q < level->inputs; q++)
        a->params[p++] = &level->in[q];
    a->params[p++] = &level->out;
#define INT(value) (a->ints[n] = (value), a->params[p++] = &a->ints[n++])
    INT(level->items);
    INT(level->chunks);
    INT(level->m);
    const KjReduceVariant *v = &level->variant;
    for (int d = 0; d < v->kept_rank; d++)
        INT(level->kept[d].extent);
    for (int d = 0; v->reduced_rank > 1 && d < v->reduced_rank; d++)
        INT(level->reduced[d].extent);
    for (int q = 0; q < level->inputs; q++) {
        for (int d = 0; d < v->kept_rank; d++)
            INT(level->kept[d].stride[q]);
        for (int d = 0; !v->contiguous && d < v->reduced_rank; d++)
            INT(level->reduced[d].stride[q]);
    }
#undef INT
    a->has_init = has_init;
    a->init = *init;
    a->params[p++] = &a->has_init;
    a->params[p++] = &a->init;
}

static KjArrayDesc flat_desc(void *data, int64_t count)
{
    KjArrayDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.data = data;
    desc.shape[0] = count;
    desc.strides[0] = 1;
    return desc;
}

/* ---------------------------------------------------------- the call */

/* Fills `count` elements of `size` bytes at dst with value. */
static kjit_status fill(kjit_context *context, void *dst, bool on_target, int64_t count,
                        size_t size, const KjScalar *value, kjit_stream *stream)
{
    if (count <= 0)
        return KJIT_OK;
    char *host = on_target ? kj_api_alloc_aligned((size_t)count * size) : dst;
    if (!host)
        return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; i < count; i++)
        memcpy(host + (size_t)i * size, value, size);
    kjit_status status = KJIT_OK;
    if (on_target) {
        status = kj_api_copy_bytes(context, dst, true, host, false, (size_t)count * size,
                                   stream);
        if (status == KJIT_OK)
            status = context->runtime->synchronize(context, stream);
        free(host);
    }
    return status;
}

static kjit_status reduce_call(kjit_function *function, const kjit_arg *args, int nargs,
                               const int *axes, int naxes, const kjit_arg *init,
                               kjit_array *out, kjit_array *result, kjit_stream *stream,
                               bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;

    if (function->entry->kind != KJ_FN_REDUCE)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s is not a @reduce function", name);
    if (nargs < 1 || nargs > MAX_INPUTS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %d arguments (a reduction takes 1 to %d)", name, nargs,
                                MAX_INPUTS);
    kjit_status status; /* the arguments themselves: kj_api_check_call */
    int sig, map_sig;
    kjit_function *map;
    status = choose(function, args, nargs, &sig, &map, &map_sig);
    if (status != KJIT_OK)
        return status;
    const KjType *t = kj_api_variant_of(function, sig)->ret;
    kjit_dtype dtype;
    kj_type_dtype(t, &dtype);
    size_t size = kjit_dtype_size(dtype);

    KjScalar init_value;
    memset(&init_value, 0, sizeof init_value);
    if (init && (init->kind != KJIT_ARG_SCALAR ||
                 !kj_api_convert_scalar(init, kj_dtype_type(dtype), &init_value)))
        return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                "%s: the initial value must be a scalar that converts to %s", name,
                                kjit_dtype_name(dtype));

    /* The inputs as arrays: a scalar is a 0-d array of the map's type. */
    KjScalar scalars[MAX_INPUTS];
    kjit_array views[MAX_INPUTS];
    const kjit_array *inputs[MAX_INPUTS];
    for (int i = 0; i < nargs; i++) {
        if (args[i].kind == KJIT_ARG_ARRAY) {
            views[i] = *args[i].value.array;
        } else {
            kjit_dtype want;
            kj_type_dtype(kj_api_variant_of(map, map_sig)->params[i]->type, &want);
            kj_api_convert_scalar(&args[i], kj_dtype_type(want), &scalars[i]);
            views[i] = kjit_array_make(&scalars[i], want, 0, NULL);
        }
        inputs[i] = &views[i];
    }
    const KjRuntimeTarget *runtime = context->runtime;
    /* Host arrays are copied to a target whose memory is not the host's. */
    bool staged = !runtime->device_memory_on_host;

    int ndim;
    int64_t shape[KJ_MAX_DIMS];
    char *error = NULL;
    status = kj_broadcast_shape(inputs, nargs, &ndim, shape, &error);
    if (status != KJIT_OK)
        return kj_api_take_named_error(context, status, name, error);

    /* Which dimensions are reduced. */
    bool reduced[KJ_MAX_DIMS] = {false};
    if (!axes) {
        for (int d = 0; d < ndim; d++)
            reduced[d] = true;
    } else {
        if (naxes < 0)
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: a negative count of axes", name);
        for (int i = 0; i < naxes; i++) {
            int a = axes[i] < 0 ? axes[i] + ndim : axes[i];
            if (a < 0 || a >= ndim)
                return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                        "%s: axis %d is out of range for an array of %d "
                                        "dimension%s", name, axes[i], ndim, ndim == 1 ? "" : "s");
            if (reduced[a])
                return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                        "%s: axis %d is given twice", name, axes[i]);
            reduced[a] = true;
        }
    }

    /* Each input's element strides over the broadcast shape. */
    Dim kept[KJ_MAX_DIMS], red[KJ_MAX_DIMS];
    int n_kept = 0, n_red = 0, out_ndim = 0;
    int64_t out_shape[KJ_MAX_DIMS], outputs = 1, m = 1;
    for (int d = 0; d < ndim; d++) {
        Dim dim = {.extent = shape[d]};
        for (int q = 0; q < nargs; q++) {
            const kjit_array *a = &views[q];
            int k = d - (ndim - a->ndim);
            int64_t stride = 0;
            if (k >= 0 && a->shape[k] != 1) {
                if (a->strides[k] % (int64_t)kjit_dtype_size(a->dtype) != 0)
                    return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                            "%s: argument %d has a stride that is not a multiple "
                                            "of its element size", name, q);
                stride = a->strides[k] / (int64_t)kjit_dtype_size(a->dtype);
            }
            dim.stride[q] = stride;
        }
        if (reduced[d]) {
            red[n_red++] = dim;
            m *= shape[d];
        } else {
            kept[n_kept++] = dim;
            out_shape[out_ndim++] = shape[d];
            outputs *= shape[d];
        }
    }

    /* The output: given (C-contiguous, the kept shape, type T) or allocated. */
    kjit_array target, allocated = {0};
    if (out) { /* a view kjit can read: kj_api_check_call */
        bool same = out->ndim == out_ndim;
        for (int d = 0; same && d < out_ndim; d++)
            same = out->shape[d] == out_shape[d];
        char a[160], b[160];
        if (!same)
            return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                    "%s: the output has shape %s but the reduction gives %s", name,
                                    kj_shape_string(a, sizeof a, out->ndim, out->shape),
                                    kj_shape_string(b, sizeof b, out_ndim, out_shape));
        if (out->dtype != dtype)
            return kj_api_set_error(context, KJIT_ERROR_TYPE,
                                    "%s: the output has element type %s but the reduction gives %s",
                                    name, kjit_dtype_name(out->dtype), kjit_dtype_name(dtype));
        if (!kj_array_is_contiguous(out))
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: the output of a reduction must be C-contiguous", name);
        target = *out;
    } else if (run && result) {
        status = kj_api_alloc_output(context, name, dtype, out_ndim, out_shape, &allocated);
        if (status != KJIT_OK)
            return status;
        target = allocated;
    } else if (run) {
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: give an output array or a result to fill", name);
    } else {
        target = kjit_array_make(NULL, dtype, out_ndim, out_shape);
    }
    bool out_on_target = !staged || target.memory == KJIT_MEMORY_DEVICE;

    if (m == 0 && outputs > 0) {
        if (!run) {
            free(allocated.data);
            return KJIT_OK; /* no code to prepare; the call itself says what is missing */
        }
        if (!init) {
            free(allocated.data);
            char a[160];
            return kj_api_set_error(context, KJIT_ERROR_SHAPE,
                                    "%s: the reduction of an empty array (shape %s) has no "
                                    "value: give an initial value", name,
                                    kj_shape_string(a, sizeof a, ndim, shape));
        }
        if (run)
            status = fill(context, target.data, staged && out_on_target, outputs, size,
                          &init_value, stream);
        if (status == KJIT_OK && result && run)
            *result = allocated;
        else
            free(allocated.data);
        return status;
    }

    /* The levels and their code. */
    n_kept = normalise(kept, n_kept, nargs);
    n_red = normalise(red, n_red, nargs);
    if (n_red == 0) {
        memset(&red[0], 0, sizeof red[0]);
        red[0].extent = 1;
        n_red = 1;
    }
    bool contiguous = n_red == 1;
    for (int q = 0; contiguous && q < nargs; q++)
        contiguous = red[0].extent == 1 || red[0].stride[q] == 1;

    /* KJIT_REDUCE_FORM=lanes|warps makes the cpu targets run the kernels the
     * cuda target would (the tests check that every form gives the same bits):
     * `warps` the cuda forms, WARPS for contiguous levels and COLUMNS for a
     * strided one; `lanes` the LANES form without SIMD lanes. */
    bool warps = runtime->reduce_in_warps;
    KjReduceForm contiguous_form = warps ? KJ_REDUCE_FORM_WARPS : KJ_REDUCE_FORM_LANES;
    KjReduceForm strided_form = warps ? KJ_REDUCE_FORM_COLUMNS : KJ_REDUCE_FORM_LANES;
    bool simd = !warps;
    const char *force = getenv("KJIT_REDUCE_FORM");
    if (function->module->library)
        force = NULL; /* a library holds the LANES form with SIMD lanes (aot_build.c) */
    if (!warps && force && strcmp(force, "warps") == 0)
        contiguous_form = KJ_REDUCE_FORM_WARPS, strided_form = KJ_REDUCE_FORM_COLUMNS,
        simd = false;
    else if (!warps && force && strcmp(force, "lanes") == 0)
        simd = false;

    Level levels[8];
    int level_count = 0;
    Level *first = &levels[level_count++];
    memset(first, 0, sizeof *first);
    first->variant = (KjReduceVariant){
        .form = contiguous ? contiguous_form : strided_form,
        .kept_rank = n_kept, .reduced_rank = n_red, .contiguous = contiguous,
        .mapped = map != NULL, .simd = simd};
    if (first->variant.form == KJ_REDUCE_FORM_WARPS) {
        /* V lanes a thread, aligned when every input's address (its staged
         * copy's, for a host array going to the GPU) and kept strides keep
         * each thread's V elements on a multiple of V elements. */
        int widest = 0;
        for (int q = 0; q < nargs; q++)
            if ((int)kjit_dtype_size(views[q].dtype) > widest)
                widest = (int)kjit_dtype_size(views[q].dtype);
        int v = kj_reduce_thread_lanes(t, widest);
        bool aligned = v > 1;
        for (int q = 0; aligned && q < nargs; q++) {
            uintptr_t address = (uintptr_t)views[q].data;
            if (staged && views[q].memory != KJIT_MEMORY_DEVICE) {
                int64_t low, high;
                kj_array_extent(&views[q], &low, &high);
                address = (uintptr_t)(-low); /* the copy starts on a 256-byte boundary */
            }
            aligned = address % ((uintptr_t)v * kjit_dtype_size(views[q].dtype)) == 0;
            for (int d = 0; aligned && d < n_kept; d++)
                aligned = kept[d].stride[q] % v == 0;
        }
        first->variant.thread_lanes = v;
        first->variant.aligned = aligned;
    } else if (first->variant.form == KJ_REDUCE_FORM_COLUMNS) {
        /* KJIT_REDUCE_COLUMN_LANES=1|2|4|8|16|32 sets V, for tuning on a GPU
         * (any V gives the same bits) */
        first->variant.thread_lanes = kj_reduce_column_lanes(t);
        const char *lanes = function->module->library ? NULL /* the library's V */
                                                      : getenv("KJIT_REDUCE_COLUMN_LANES");
        int v = lanes ? atoi(lanes) : 0;
        if (v >= 1 && v <= KJ_REDUCE_LANES && (v & (v - 1)) == 0)
            first->variant.thread_lanes = v;
    }
    first->inputs = nargs;
    first->m = m;
    first->chunks = chunks_of(m);
    first->items = outputs * first->chunks;
    memcpy(first->kept, kept, sizeof kept[0] * (size_t)n_kept);
    memcpy(first->reduced, red, sizeof red[0] * (size_t)n_red);
    while (levels[level_count - 1].chunks > 1) {
        Level *prev = &levels[level_count - 1];
        Level *next = &levels[level_count++];
        memset(next, 0, sizeof *next);
        int kept_rank = outputs > 1 ? 1 : 0;
        next->variant = (KjReduceVariant){
            .form = contiguous_form, .kept_rank = kept_rank, .reduced_rank = 1,
            .contiguous = true, .mapped = false, .simd = simd};
        next->inputs = 1;
        next->m = prev->chunks;
        next->chunks = chunks_of(next->m);
        next->items = outputs * next->chunks;
        next->kept[0].extent = outputs;
        next->kept[0].stride[0] = prev->chunks;
        if (contiguous_form == KJ_REDUCE_FORM_WARPS) {
            /* The partials start on 16-byte boundaries (see the regions below). */
            int v = kj_reduce_thread_lanes(t, (int)size);
            next->variant.thread_lanes = v;
            next->variant.aligned = v > 1 && (outputs == 1 || prev->chunks % v == 0);
        }
    }
    for (int i = 0; i < level_count && status == KJIT_OK; i++)
        status = find_level_code(function, sig, map, map_sig, &levels[i]);
    if (status != KJIT_OK || !run || outputs == 0) {
        if (status == KJIT_OK && run && result)
            *result = allocated;
        else
            free(allocated.data);
        return status;
    }

    /* Memory: the partials of levels 1, 3, 5 ... in one region and of 2, 4 ...
     * in the other, the inputs (staged to the GPU when they are on the host),
     * and the output. */
    int64_t region[2] = {0, 0};
    for (int i = 0; i + 1 < level_count; i++)
        if (levels[i].items > region[i % 2])
            region[i % 2] = levels[i].items;
    region[0] = (region[0] + KJ_REDUCE_LANES - 1) / KJ_REDUCE_LANES * KJ_REDUCE_LANES;
    size_t scratch_bytes = (size_t)(region[0] + region[1]) * size;
    KjTemps temps = {.count = 0};
    KjReduceScratch *shared = NULL;
    char *scratch = NULL;
    void *in_data[MAX_INPUTS];
    void *out_data = target.data;
    for (int q = 0; q < nargs && status == KJIT_OK; q++) {
        in_data[q] = views[q].data;
        if (!staged || views[q].memory == KJIT_MEMORY_DEVICE)
            continue;
        status = kj_api_stage(context, &temps, &views[q], true, stream, &in_data[q]);
    }
    if (status == KJIT_OK && !out_on_target)
        status = kj_api_temp_alloc(context, &temps, (size_t)outputs * size, &out_data);
    if (status == KJIT_OK && scratch_bytes) {
        if (stream) {
            /* A stream of its own: partials of its own, freed after it. */
            status = kj_api_temp_alloc(context, &temps, scratch_bytes, (void **)&scratch);
        } else {
            pthread_mutex_lock(&context->lock);
            if (!context->reduce_scratch) {
                KjReduceScratch *fresh = kj_xcalloc(1, sizeof *fresh);
                pthread_mutex_init(&fresh->lock, NULL);
                context->reduce_scratch = fresh;
            }
            shared = context->reduce_scratch;
            pthread_mutex_unlock(&context->lock);
            pthread_mutex_lock(&shared->lock);
            if (shared->bytes < scratch_bytes) {
                if (shared->data)
                    runtime->free(context, shared->data);
                shared->data = NULL;
                shared->bytes = 0;
                status = runtime->alloc(context, scratch_bytes, &shared->data);
                if (status == KJIT_OK)
                    shared->bytes = scratch_bytes;
            }
            scratch = shared->data;
        }
    }

    /* The levels, in order. */
    char *regions[2] = {scratch, scratch ? scratch + (size_t)region[0] * size : NULL};
    for (int i = 0; i < level_count && status == KJIT_OK; i++) {
        Level *level = &levels[i];
        bool last = i + 1 == level_count;
        if (i == 0) {
            for (int q = 0; q < nargs; q++)
                level->in[q] = flat_desc(in_data[q], 1);
        } else {
            level->in[0] = flat_desc(regions[(i - 1) % 2], levels[i - 1].items);
        }
        level->out = flat_desc(last ? out_data : regions[i % 2], level->items);
        LevelArgs a;
        level_args(level, init != NULL, &init_value, &a);
        KjItemsRun run = {.name = name, .compiled = level->compiled,
                                .warps = level->variant.form == KJ_REDUCE_FORM_WARPS,
                                .columns = level->variant.form == KJ_REDUCE_FORM_COLUMNS,
                                .thread_lanes = level->variant.thread_lanes,
                                .items = level->items, .params = a.params, .stream = stream};
        status = runtime->run_items(context, &run);
    }
    if (shared)
        pthread_mutex_unlock(&shared->lock);
    /* Staged inputs and partials of a stream are freed once the work is done;
     * the result goes back to the host when it was given there. */
    if (status == KJIT_OK && !out_on_target)
        status = kj_api_copy_bytes(context, target.data, false, out_data, true,
                                   (size_t)outputs * size, stream);
    if (status == KJIT_OK && temps.count > 0)
        status = runtime->synchronize(context, stream);
    kj_api_free_temps(context, &temps);
    if (status == KJIT_OK && result)
        *result = allocated;
    else
        free(allocated.data);
    return status;
}

kjit_status kjit_reduce(kjit_function *function, const kjit_arg *args, int nargs,
                        const int *axes, int naxes, const kjit_arg *init, kjit_array *out,
                        kjit_array *result)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_reduce", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status status = kj_api_check_call(function, "kjit_reduce", args, nargs, out, NULL, true);
    if (status == KJIT_OK)
        status = reduce_call(function, args, nargs, axes, naxes, init, out, result, NULL, true);
    return kj_api_leave(&call, status, result);
}

kjit_status kjit_reduce_async(kjit_function *function, const kjit_arg *args, int nargs,
                              const int *axes, int naxes, const kjit_arg *init, kjit_array *out,
                              kjit_stream *stream)
{
    KjApiCall call;
    if (!kj_api_enter(function, "kjit_reduce_async", &call))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status status = kj_api_check_call(function, "kjit_reduce_async", args, nargs, out,
                                           stream, true);
    if (status == KJIT_OK && !out)
        status = kj_api_set_error(call.context, KJIT_ERROR_INVALID_ARGUMENT,
                                  "%s: kjit_reduce_async needs an output array", call.name);
    if (status == KJIT_OK)
        status = reduce_call(function, args, nargs, axes, naxes, init, out, NULL, stream, true);
    return kj_api_leave(&call, status, NULL);
}

kjit_status kj_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs)
{
    return reduce_call(function, args, nargs, NULL, 0, NULL, NULL, NULL, NULL, false);
}

kjit_status kjit_reduce_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                                const int *axes, int naxes)
{
    if (!kj_api_live_function(function, "kjit_reduce_prepare"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status status = kj_api_check_call(function, "kjit_reduce_prepare", args, nargs, NULL,
                                           NULL, false);
    if (status != KJIT_OK)
        return status;
    return reduce_call(function, args, nargs, axes, naxes, NULL, NULL, NULL, NULL, false);
}
