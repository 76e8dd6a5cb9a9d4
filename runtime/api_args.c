/*
 * api_args.c: what every call of kjit.h (api_call.c, api_guvec.c,
 * api_reduce.c) checks and converts of the arguments the host passes: the
 * kjit_arg constructors, scalar conversion, how closely a signature takes a
 * set of arguments, the messages that describe them, and the checks of
 * arrays and of a call's arguments, and the door every entry point that
 * runs code goes through (kj_api_enter, kj_api_leave).  It sits below the
 * call paths and above api.c (a function's signatures) and api_stream.c
 * (kj_api_check_stream).
 */
#include <stdio.h>
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

/* "f64 2-d array", "i64" or "f32 (0-d array)": what an argument is, for the
 * messages of a call that cannot take it. */
void kj_api_describe_arg(const kjit_arg *arg, char *buf, size_t size)
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

/* One argument of a call: a scalar of a known dtype, or an array that is
 * there, a view kjit can read (kj_array_check) and, when the call runs,
 * has data if it has elements. */
static kjit_status check_arg(kjit_context *context, const char *api, const char *name,
                             const kjit_arg *arg, int i, bool runs)
{
    if (arg->kind == KJIT_ARG_SCALAR && (unsigned)arg->dtype < KJIT_DTYPE_COUNT)
        return KJIT_OK;
    if (arg->kind != KJIT_ARG_ARRAY)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "argument %d of %s is neither a scalar nor an array", i, name);
    const kjit_array *a = arg->value.array;
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
    if (runs && !a->data && kj_array_has_elements(a))
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                "%s: argument %d of %s has NULL data and %lld elements", api, i,
                                name, (long long)kjit_array_size(a));
    return KJIT_OK;
}

kjit_status kj_api_check_call(kjit_function *function, const char *api, const kjit_arg *args,
                              int nargs, const kjit_array *out, const kjit_stream *stream,
                              bool runs)
{
    kjit_context *context = function->module->context;
    const char *name = function->entry->name;
    if (nargs < 0)
        return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT, "%s: nargs is %d", api,
                                nargs);
    if (nargs > 0 && !args)
        return kj_api_null(context, api, "args");
    for (int i = 0; i < nargs; i++) {
        kjit_status status = check_arg(context, api, name, &args[i], i, runs);
        if (status != KJIT_OK)
            return status;
    }
    if (out) {
        char *error = NULL;
        kjit_status status = kj_array_check(out, &error);
        if (status != KJIT_OK) {
            char prefix[160];
            snprintf(prefix, sizeof prefix, "%s: the output: ", name);
            return kj_api_take_error(context, status, prefix, error);
        }
        if (runs && !out->data && kj_array_has_elements(out))
            return kj_api_set_error(context, KJIT_ERROR_INVALID_ARGUMENT,
                                    "%s: the output has NULL data and %lld elements", api,
                                    (long long)kjit_array_size(out));
    }
    return kj_api_check_stream(context, api, stream);
}

/* ----------------------------------------------------------------- the door */

bool kj_api_enter(kjit_function *function, const char *api, KjApiCall *call)
{
    if (!kj_api_live_function(function, api)) /* which clears the error, sets print's context */
        return false;
    call->context = function->module->context;
    call->name = function->entry->name;
    kj_cancel_begin(call->context, &call->cancel);
    return true;
}

kjit_status kj_api_leave(KjApiCall *call, kjit_status status, kjit_array *result)
{
    return kj_cancel_end_result(call->context, &call->cancel, call->name, status, result);
}
