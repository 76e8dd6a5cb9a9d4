/*
 * api_call.c: the half of kjit.h that runs code: arguments, calls of plain
 * and @vectorize functions (with broadcasting), kernel launches, device
 * memory, streams and events.  The code each call runs comes from
 * kj_api_find_compiled (api.c).
 *
 * This file checks and converts what the host passes and plans the
 * broadcast; the running itself (and the staging of host arrays that cuda
 * needs) is the context's runtime target's (target_cpu.c, target_cuda.c),
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
            char *error = NULL;
            kjit_status status = kj_array_check(a, &error);
            if (status != KJIT_OK) {
                char prefix[160];
                snprintf(prefix, sizeof prefix, "argument %d of %s: ", i, name);
                return kj_api_take_error(context, status, prefix, error);
            }
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
    int want = function->entry->variants.count ? kj_api_variant_of(function, 0)->param_count : 0;
    if (nargs != want)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s takes %d argument%s, %d given", function->entry->name, want,
                                want == 1 ? "" : "s", nargs);
    return kj_api_check_args(context, function->entry->name, args, nargs);
}

kjit_status kj_api_check_array(kjit_context *context, const char *api, const char *what,
                               const kjit_array *array)
{
    if ((unsigned)array->dtype >= KJIT_DTYPE_COUNT || array->ndim < 0 ||
        array->ndim > KJIT_MAX_DIMS)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %s is not a valid array (dtype %d, ndim %d)", api, what,
                                (int)array->dtype, array->ndim);
    for (int d = 0; d < array->ndim; d++)
        if (array->shape[d] < 0)
            return kj_api_set_error(context, KJIT_ERROR_SHAPE, "%s: %s has a negative extent",
                                    api, what);
    if (!array->data && kj_array_has_elements(array))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: %s has NULL data and %lld elements", api, what,
                                (long long)kjit_array_size(array));
    return KJIT_OK;
}

kjit_status kj_api_check_stream(kjit_context *context, const char *api, const kjit_stream *stream)
{
    if (!stream)
        return KJIT_OK;
    if (!kj_handle_live(stream, KJ_HANDLE_STREAM))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the stream is not a live stream (destroyed already?)", api);
    if (stream->context != context)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: the stream belongs to another context", api);
    return KJIT_OK;
}

kjit_status kj_api_check_call(kjit_function *function, const char *api, const kjit_arg *args,
                              int nargs, const kjit_array *out, const kjit_stream *stream,
                              bool runs)
{
    kjit_context *context = function->module->context;
    if (nargs < 0)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: nargs is %d", api,
                                nargs);
    if (nargs > 0 && !args)
        return kj_api_null(context, api, "args");
    for (int i = 0; runs && i < nargs; i++) {
        const kjit_array *a = args[i].kind == KJIT_ARG_ARRAY ? args[i].value.array : NULL;
        if (a && !a->data && a->ndim >= 0 && a->ndim <= KJIT_MAX_DIMS &&
            kj_array_has_elements(a))
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: argument %d of %s has NULL data and %lld elements", api,
                                    i, function->entry->name, (long long)kjit_array_size(a));
    }
    if (out) {
        kjit_status status = kj_api_check_array(context, api, "the output", out);
        if (status != KJIT_OK)
            return status;
    }
    return kj_api_check_stream(context, api, stream);
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
    int64_t count, bytes;
    char *error = NULL;
    kjit_status status = kj_shape_size(dtype, ndim, shape, &count, &bytes, &error);
    if (status != KJIT_OK)
        return kj_api_take_named_error(context, status, name, error);
    void *data = kj_api_alloc_aligned((size_t)bytes);
    if (!data)
        return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                "%s: out of memory for an output of %lld elements (%lld bytes)",
                                name, (long long)count, (long long)bytes);
    *out = kjit_array_make(data, dtype, ndim, shape);
    return KJIT_OK;
}

static kjit_status call_planned(kjit_function *function, int sig, const kjit_arg *args,
                                int nargs, const kjit_array **inputs, kjit_array *output,
                                kjit_stream *stream, bool run);

/* ------------------------------------------------ outputs over inputs */

/* Both arrays are in the same memory (the host's, or one device's), so
 * their addresses compare. */
static bool same_memory(const kjit_context *context, const kjit_array *a, const kjit_array *b)
{
    return a->memory == b->memory || context->runtime->device_memory_on_host;
}

/* The bytes a view touches, [*low, *high); false when it has no elements.
 * (Every call with an output asks, so this is one loop and no calls.) */
static inline bool byte_range(const kjit_array *a, uintptr_t *low, uintptr_t *high)
{
    if (!a->data)
        return false;
    int64_t lo = 0, hi = kj_dtype_bytes(a->dtype);
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 0)
            return false;
        int64_t reach = (a->shape[d] - 1) * a->strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    *low = (uintptr_t)a->data + (uintptr_t)lo;
    *high = (uintptr_t)a->data + (uintptr_t)hi;
    return true;
}

/* The same elements at the same places: an elementwise call reads each of
 * them before it writes it, in the same work item. */
static bool same_view(const kjit_array *a, const kjit_array *b)
{
    if (a->data != b->data || a->ndim != b->ndim || a->dtype != b->dtype)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->strides[d] != b->strides[d]))
            return false;
    return true;
}

kjit_status kj_api_unalias(kjit_context *context, const kjit_array **inputs, int count,
                           const kjit_array *const *outputs, int output_count,
                           bool elementwise, kjit_array *copies, KjTemps *temps,
                           void **host_copies, int *copied, kjit_stream *stream)
{
    *copied = 0;
    uintptr_t out_low[KJ_GUFUNC_MAX_OPERANDS], out_high[KJ_GUFUNC_MAX_OPERANDS];
    bool out_touches[KJ_GUFUNC_MAX_OPERANDS];
    for (int o = 0; o < output_count && o < KJ_GUFUNC_MAX_OPERANDS; o++)
        out_touches[o] = outputs[o] && byte_range(outputs[o], &out_low[o], &out_high[o]);
    for (int i = 0; i < count; i++) {
        const kjit_array *in = inputs[i];
        uintptr_t low, high;
        if (!in || !byte_range(in, &low, &high))
            continue;
        bool overlaps = false;
        for (int o = 0; o < output_count && o < KJ_GUFUNC_MAX_OPERANDS && !overlaps; o++)
            overlaps = out_touches[o] && low < out_high[o] && out_low[o] < high &&
                       same_memory(context, in, outputs[o]) &&
                       !(elementwise && same_view(in, outputs[o]));
        if (!overlaps)
            continue;
        if (!*copied)
            for (int j = 0; j < count; j++)
                host_copies[j] = NULL;
        *copied += 1;
        /* A C-ordered copy of the input, in its own memory, as NumPy makes. */
        size_t bytes = (size_t)kjit_array_size(in) * kjit_dtype_size(in->dtype);
        void *host = kj_api_alloc_aligned(bytes);
        if (!host)
            return kj_api_set_error(context, KJIT_ERROR_OUT_OF_MEMORY,
                                    "out of memory for a copy of an input that the output "
                                    "overlaps (%zu bytes)", bytes);
        host_copies[i] = host;
        copies[i] = kjit_array_make(host, in->dtype, in->ndim, in->shape);
        if (in->memory == KJIT_MEMORY_HOST || context->runtime->device_memory_on_host) {
            kj_array_gather(in, host);
            copies[i].memory = in->memory;
        } else {
            /* On a device: its extent to the host, gathered there, and back. */
            int64_t low, high;
            kj_array_extent(in, &low, &high);
            char *extent = malloc((size_t)(high - low));
            void *device = NULL;
            kjit_status status = extent ? KJIT_OK : KJIT_ERROR_OUT_OF_MEMORY;
            if (status == KJIT_OK)
                status = kj_api_copy_bytes(context, extent, false, (char *)in->data + low, true,
                                           (size_t)(high - low), stream);
            if (status == KJIT_OK)
                status = context->runtime->synchronize(context, stream);
            if (status == KJIT_OK) {
                kjit_array on_host = *in;
                on_host.data = extent - low;
                kj_array_gather(&on_host, host);
                status = kj_api_temp_alloc(context, temps, bytes, &device);
            }
            if (status == KJIT_OK)
                status = kj_api_copy_bytes(context, device, true, host, false, bytes, stream);
            free(extent);
            if (status != KJIT_OK)
                return status == KJIT_ERROR_OUT_OF_MEMORY && !extent
                           ? kj_api_set_error(context, status, "out of memory")
                           : status;
            copies[i].data = device;
            copies[i].memory = KJIT_MEMORY_DEVICE;
        }
        inputs[i] = &copies[i];
    }
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
        status = kj_array_check(out, &error);
        if (status != KJIT_OK) {
            char prefix[160];
            snprintf(prefix, sizeof prefix, "%s: the output: ", name);
            return kj_api_take_error(context, status, prefix, error);
        }
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
        status = call_planned(function, sig, args, nargs, inputs, &target, stream, run);
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

/* The rest of a vectorized call, its inputs and output settled. */
static kjit_status call_planned(kjit_function *function, int sig, const kjit_arg *args,
                                int nargs, const kjit_array **inputs, kjit_array *output,
                                kjit_stream *stream, bool run)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    const KjIrFunction *scalar = kj_api_variant_of(function, sig);
    char *error = NULL;
    KjBroadcastPlan plan;
    kjit_status status = kj_broadcast_plan(inputs, nargs, output, &plan, &error);
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
            convert_scalar(&args[i], scalar->params[i]->type, &scalars[i]);
            params[i] = &scalars[i];
        }
    }
    params[nargs] = &plan.output;
    KjCheckCall check;
    if (context->options.check) {
        status = kj_check_begin(context, compiled->runtime, &check, &params[nargs + 1]);
        if (status != KJIT_OK)
            return status;
    }

    KjVectorizedRun vectorized_run = {.compiled = compiled, .plan = &plan, .params = params,
                                      .inputs = inputs, .input_count = nargs, .output = output,
                                      .stream = stream};
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
    if (!kj_api_live_function(function, "kjit_call"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    KjCancelCall cancel;
    kj_cancel_begin(context, &cancel);
    kjit_status ran = call_any(function, args, nargs, out, result);
    kjit_status status = kj_cancel_end(context, &cancel, function->entry->name, ran);
    if (ran == KJIT_OK && status != KJIT_OK && result) {
        kjit_array_free(result); /* a stopped call hands back no result */
        memset(result, 0, sizeof *result);
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
    if (!out)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: kjit_call_async needs an output array", function->entry->name);
    return call_vectorized(function, args, nargs, out, NULL, stream, true);
}

kjit_status kjit_call_async(kjit_function *function, const kjit_arg *args, int nargs,
                            kjit_array *out, kjit_stream *stream)
{
    if (!kj_api_live_function(function, "kjit_call_async"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    KjCancelCall cancel;
    kj_cancel_begin(context, &cancel);
    kjit_status status = call_async_any(function, args, nargs, out, stream);
    return kj_cancel_end(context, &cancel, function->entry->name, status);
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
                       .dynamic_shared_bytes = dynamic_bytes,
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
    if (!kj_api_live_function(function, "kjit_launch"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = function->module->context;
    kj_api_clear_error(context);
    kj_print_context = context;
    KjCancelCall cancel;
    kj_cancel_begin(context, &cancel);
    kjit_status status = launch_any(function, grid, block, args, nargs, options);
    return kj_cancel_end(context, &cancel, function->entry->name, status);
}

kjit_status kjit_prepare(kjit_function *function, const kjit_arg *args, int nargs,
                         const kjit_array *out)
{
    if (!kj_api_live_function(function, "kjit_prepare"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_status checked = kj_api_check_call(function, "kjit_prepare", args, nargs, NULL, NULL,
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

/* A stream or event joins its context's list, so that destroying the
 * context destroys it. */
#define LINK(head, item)                                                                       \
    do {                                                                                       \
        pthread_mutex_lock(&(item)->context->handles_lock);                                    \
        (item)->next = (head);                                                                 \
        if ((item)->next)                                                                      \
            (item)->next->prev = (item);                                                       \
        (head) = (item);                                                                       \
        pthread_mutex_unlock(&(item)->context->handles_lock);                                  \
    } while (0)
#define UNLINK(head, item)                                                                     \
    do {                                                                                       \
        pthread_mutex_lock(&(item)->context->handles_lock);                                    \
        if ((item)->prev)                                                                      \
            (item)->prev->next = (item)->next;                                                 \
        else                                                                                   \
            (head) = (item)->next;                                                             \
        if ((item)->next)                                                                      \
            (item)->next->prev = (item)->prev;                                                 \
        pthread_mutex_unlock(&(item)->context->handles_lock);                                  \
    } while (0)

void kj_api_stream_register(kjit_stream *stream)
{
    LINK(stream->context->streams, stream);
}

kjit_status kjit_stream_create(kjit_context *context, kjit_stream **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_stream_create"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_stream_create", "out");
    kjit_stream *stream = kj_handle_new(KJ_HANDLE_STREAM, sizeof *stream);
    stream->context = context;
    kjit_status status = context->runtime->stream_create(context, stream);
    if (status != KJIT_OK) {
        kj_handle_free(stream);
        stream = NULL;
    } else {
        kj_api_stream_register(stream);
    }
    *out = stream;
    return status;
}

kjit_status kjit_stream_synchronize(kjit_stream *stream)
{
    if (!kj_api_live(stream, KJ_HANDLE_STREAM, "kjit_stream_synchronize"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = stream->context;
    kj_api_clear_error(context);
    kjit_status status = context->runtime->synchronize(context, stream);
    /* cuda: kernels a cancel stopped have only returned early */
    return status == KJIT_OK ? kj_cancel_device_status(context, "kjit_stream_synchronize") : status;
}

void kjit_stream_destroy(kjit_stream *stream)
{
    if (!stream || !kj_api_live(stream, KJ_HANDLE_STREAM, "kjit_stream_destroy"))
        return;
    UNLINK(stream->context->streams, stream);
    stream->context->runtime->stream_destroy(stream);
    kj_handle_free(stream);
}

kjit_status kjit_synchronize(kjit_context *context)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_synchronize"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    kjit_status status = context->runtime->synchronize(context, NULL);
    return status == KJIT_OK ? kj_cancel_device_status(context, "kjit_synchronize") : status;
}

kjit_status kjit_event_record(kjit_context *context, kjit_stream *stream, kjit_event **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_event_record"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_event_record", "out");
    *out = NULL;
    kjit_status status = kj_api_check_stream(context, "kjit_event_record", stream);
    if (status != KJIT_OK)
        return status;
    kjit_event *event = kj_handle_new(KJ_HANDLE_EVENT, sizeof *event);
    event->context = context;
    status = context->runtime->event_record(context, stream, event);
    if (status != KJIT_OK) {
        kj_handle_free(event);
        return status;
    }
    LINK(context->events, event);
    *out = event;
    return status;
}

kjit_status kjit_event_elapsed(kjit_event *start, kjit_event *end, double *milliseconds)
{
    if (!kj_api_live(start, KJ_HANDLE_EVENT, "kjit_event_elapsed (start)") ||
        !kj_api_live(end, KJ_HANDLE_EVENT, "kjit_event_elapsed (end)"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kjit_context *context = start->context;
    kj_api_clear_error(context);
    if (!milliseconds)
        return kj_api_null(context, "kjit_event_elapsed", "milliseconds");
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
    if (!event || !kj_api_live(event, KJ_HANDLE_EVENT, "kjit_event_destroy"))
        return;
    UNLINK(event->context->events, event);
    event->context->runtime->event_destroy(event);
    kj_handle_free(event);
}

static void free_device_block(void *user, void *data)
{
    kjit_context *context = user;
    context->runtime->free(context, data);
}

void kj_api_release_handles(kjit_context *context)
{
    while (context->streams)
        kjit_stream_destroy(context->streams);
    while (context->events)
        kjit_event_destroy(context->events);
    kj_pointer_set_drain(&context->device_blocks, free_device_block, context);
}
