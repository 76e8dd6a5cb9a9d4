/*
 * array.c: array views and NumPy broadcasting for vectorized calls.
 *
 * The host describes arrays with byte strides; compiled code wants element
 * strides and one of two layouts (kjit_compiler.h, vectorize.c).  This file
 * works out the broadcast shape, checks the output, and then simplifies the
 * iteration space the way NumPy's iterator does: dimensions of size 1 go,
 * and neighbouring dimensions that every operand walks as one contiguous run
 * merge.  What is left is usually one contiguous dimension, the CONTIG variant
 * that vectorizes to SIMD code; only genuinely strided or broadcast views
 * need the STRIDED variant, of the smallest rank that describes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* ----------------------------------------------------------------- dtypes */

/* kjit.h spells kjit_dtype out for embedders (it includes nothing of the
 * compiler); the scalar-type list is the one source of its order, names and
 * sizes, and a dtype that drifts from it does not compile. */
#define X(kind, name, size)                                                        \
    _Static_assert((int)KJIT_##kind == (int)KJ_TYPE_##kind - (int)KJ_TYPE_BOOL, \
                   "kjit_dtype KJIT_" #kind " is out of step with KJ_SCALAR_TYPES");
KJ_SCALAR_TYPES(X)
#undef X
_Static_assert((int)KJIT_DTYPE_COUNT == (int)KJ_TYPE_LAST_SCALAR - (int)KJ_TYPE_BOOL + 1,
               "kjit_dtype has a type KJ_SCALAR_TYPES lacks");

static const size_t dtype_sizes[KJIT_DTYPE_COUNT] = {
#define X(kind, name, size) size,
    KJ_SCALAR_TYPES(X)
#undef X
};

static const char *const dtype_names[KJIT_DTYPE_COUNT] = {
#define X(kind, name, size) name,
    KJ_SCALAR_TYPES(X)
#undef X
};

size_t kjit_dtype_size(kjit_dtype dtype)
{
    return (unsigned)dtype < KJIT_DTYPE_COUNT ? dtype_sizes[dtype] : 0;
}

const char *kjit_dtype_name(kjit_dtype dtype)
{
    return (unsigned)dtype < KJIT_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

uint16_t kjit_half_from_double(kjit_dtype dtype, double value)
{
    return kj_half_from_double(dtype == KJIT_BF16 ? KJ_TYPE_BF16 : KJ_TYPE_F16, value);
}

double kjit_half_to_double(kjit_dtype dtype, uint16_t bits)
{
    return kj_half_to_double(dtype == KJIT_BF16 ? KJ_TYPE_BF16 : KJ_TYPE_F16, bits);
}

const KjType *kj_dtype_type(kjit_dtype dtype)
{
    if ((unsigned)dtype >= KJIT_DTYPE_COUNT)
        return NULL;
    return kj_type_scalar((KjTypeKind)(KJ_TYPE_BOOL + (int)dtype));
}

bool kj_type_dtype(const KjType *type, kjit_dtype *dtype)
{
    if (!type || type->kind < KJ_TYPE_BOOL || type->kind > KJ_TYPE_LAST_SCALAR)
        return false;
    *dtype = (kjit_dtype)(type->kind - KJ_TYPE_BOOL);
    return true;
}

/* ----------------------------------------------------------------- sizes */

static char *format_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format_error(const char *fmt, ...)
{
    KjBuf buf = {0};
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(&buf, fmt, ap);
    va_end(ap);
    return buf.data;
}

/*
 * Every element count and byte size that a shape implies (an allocation, a
 * .npy file's data, a generator's array, a broadcast, a view's strides) is
 * computed here, with overflow checks: the product of the extents, zeros
 * counted as 1 (the C-order strides of a shape are its partial products, so
 * they must fit too, even when the array is empty), times the element size
 * must be at most 2^63 - 1 bytes.
 */
kjit_status kj_shape_size(kjit_dtype dtype, int ndim, const int64_t *shape, int64_t *count,
                          int64_t *bytes, char **error)
{
    if (ndim == KJIT_NDIM_INVALID) {
        if (error)
            *error = format_error("an array that kjit_array_make could not describe (more than "
                                  "%d dimensions, a NULL shape, a negative extent, or more than "
                                  "2^63 - 1 bytes)",
                                  KJIT_MAX_DIMS);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    if ((unsigned)dtype >= KJIT_DTYPE_COUNT || ndim < 0 || ndim > KJIT_MAX_DIMS ||
        (ndim > 0 && !shape)) {
        if (error)
            *error = format_error("not a valid array description (dtype %d, %d dimensions; "
                                  "0 to %d are possible)",
                                  (int)dtype, ndim, KJIT_MAX_DIMS);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    int64_t span = (int64_t)kjit_dtype_size(dtype);
    bool overflow = false, empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            char text[KJ_SHAPE_TEXT_SIZE];
            if (error)
                *error = format_error("the shape %s has a negative extent",
                                      kj_shape_string(text, sizeof text, ndim, shape));
            return KJIT_ERROR_SHAPE;
        }
        empty |= shape[d] == 0;
        if (shape[d] > 1)
            overflow |= __builtin_mul_overflow(span, shape[d], &span);
    }
    if (overflow) {
        char text[KJ_SHAPE_TEXT_SIZE];
        if (error)
            *error = format_error("the shape %s of %s elements would take more than 2^63 - 1 "
                                  "bytes",
                                  kj_shape_string(text, sizeof text, ndim, shape),
                                  kjit_dtype_name(dtype));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    /* span / element size: the product of the extents when none is 0 */
    if (count)
        *count = empty ? 0 : span / (int64_t)kjit_dtype_size(dtype);
    if (bytes)
        *bytes = empty ? 0 : span;
    return KJIT_OK;
}

kjit_status kj_array_check(const kjit_array *array, char **error)
{
    /* One pass on every call's path; the messages come from kj_shape_size. */
    if ((unsigned)array->dtype >= KJIT_DTYPE_COUNT || array->ndim < 0 ||
        array->ndim > KJIT_MAX_DIMS)
        return kj_shape_size(array->dtype, array->ndim, array->shape, NULL, NULL, error);
    int64_t elem = (int64_t)dtype_sizes[array->dtype];
    int64_t span = elem, low = 0, high = elem;
    bool bad = false, empty = false;
    for (int d = 0; d < array->ndim; d++) {
        int64_t extent = array->shape[d], reach;
        empty |= extent == 0;
        bad |= extent < 0 || (extent > 1 && __builtin_mul_overflow(span, extent, &span));
        /* the bytes the view reaches from data, before and after */
        bad |= __builtin_mul_overflow(extent - 1, array->strides[d], &reach) ||
               (reach < 0 ? __builtin_add_overflow(low, reach, &low)
                          : __builtin_add_overflow(high, reach, &high));
    }
    if (!bad)
        return KJIT_OK;
    kjit_status status = kj_shape_size(array->dtype, array->ndim, array->shape, NULL, NULL, error);
    if (status != KJIT_OK || empty)
        return status; /* an empty view reaches nothing */
    char text[KJ_SHAPE_TEXT_SIZE];
    if (error)
        *error = format_error("a view of shape %s whose strides reach past 2^63 bytes",
                              kj_shape_string(text, sizeof text, array->ndim, array->shape));
    return KJIT_ERROR_INVALID_ARGUMENT;
}

/* The element count of a view kj_array_check passed: a plain product. */
static int64_t checked_count(const kjit_array *array)
{
    int64_t count = 1;
    for (int d = 0; d < array->ndim; d++)
        count *= array->shape[d];
    return count;
}

/* ----------------------------------------------------------------- views */

kjit_array kjit_array_make(void *data, kjit_dtype dtype, int ndim, const int64_t *shape)
{
    kjit_array array;
    memset(&array, 0, sizeof array);
    array.data = data;
    array.dtype = dtype;
    array.memory = KJIT_MEMORY_HOST;
    /* A shape that no array can have is not cut to one that can: the view
     * is marked, and every call refuses it (kj_array_check). */
    if ((!shape && ndim > 0) || kj_shape_size(dtype, ndim, shape, NULL, NULL, NULL) != KJIT_OK) {
        array.ndim = KJIT_NDIM_INVALID;
        return array;
    }
    array.ndim = ndim;
    int64_t stride = (int64_t)kjit_dtype_size(dtype);
    for (int d = array.ndim - 1; d >= 0; d--) {
        array.shape[d] = shape[d];
        array.strides[d] = stride;
        stride *= shape[d] > 0 ? shape[d] : 1; /* fits: kj_shape_size said so */
    }
    return array;
}

int64_t kjit_array_size(const kjit_array *array)
{
    if (!array)
        return 0;
    int64_t count;
    return kj_shape_size(array->dtype, array->ndim, array->shape, &count, NULL, NULL) == KJIT_OK
               ? count
               : -1;
}

void kjit_array_free(kjit_array *array)
{
    if (!array)
        return;
    free(array->data);
    array->data = NULL;
}

char *kj_shape_string(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t len = 0;
    len += (size_t)snprintf(buf + len, size - len, "(");
    for (int d = 0; d < ndim && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (len < size)
        snprintf(buf + len, size - len, ndim == 1 ? ",)" : ")");
    return buf;
}

kjit_status kj_array_desc(const kjit_array *array, KjArrayDesc *desc, char **error)
{
    memset(desc, 0, sizeof *desc);
    desc->data = array->data;
    int64_t elem = (int64_t)kjit_dtype_size(array->dtype);
    /* Element sizes are powers of two: a mask and a shift, not a division,
     * on every call's path. */
    int shift = __builtin_ctzll((unsigned long long)elem);
    for (int d = 0; d < array->ndim; d++) {
        if ((array->strides[d] & (elem - 1)) != 0) {
            *error = format_error("stride %lld of dimension %d is not a multiple of the %s "
                                  "element size (%lld bytes)",
                                  (long long)array->strides[d], d,
                                  kjit_dtype_name(array->dtype), (long long)elem);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        desc->shape[d] = array->shape[d];
        desc->strides[d] = array->strides[d] >> shift; /* exact: arithmetic shift of a multiple */
    }
    return KJIT_OK;
}

bool kj_array_is_contiguous(const kjit_array *array)
{
    int64_t expected = (int64_t)kjit_dtype_size(array->dtype);
    for (int d = array->ndim - 1; d >= 0; d--) {
        if (array->shape[d] != 1 && array->strides[d] != expected)
            return false;
        expected *= array->shape[d];
    }
    return true;
}

void kj_array_extent(const kjit_array *array, int64_t *low, int64_t *high)
{
    int64_t lo = 0, hi = 0;
    if (checked_count(array) == 0) {
        *low = *high = 0;
        return;
    }
    for (int d = 0; d < array->ndim; d++) {
        int64_t reach = (array->shape[d] - 1) * array->strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    *low = lo;
    *high = hi + (int64_t)kjit_dtype_size(array->dtype);
}

/* ----------------------------------------------------------- broadcasting */

kjit_status kj_broadcast_shape(const kjit_array *const *inputs, int count, int *ndim,
                               int64_t *shape, char **error)
{
    int rank = 0;
    for (int i = 0; i < count; i++)
        if (inputs[i] && inputs[i]->ndim > rank)
            rank = inputs[i]->ndim;
    /* owner[d]: the input that gave dimension d its extent, to name in errors */
    int owner[KJ_MAX_DIMS];
    for (int d = 0; d < rank; d++) {
        shape[d] = 1;
        owner[d] = -1;
    }
    for (int i = 0; i < count; i++) {
        const kjit_array *in = inputs[i];
        if (!in)
            continue;
        for (int k = 0; k < in->ndim; k++) {
            int d = rank - in->ndim + k;
            int64_t extent = in->shape[k];
            if (extent == 1)
                continue;
            if (shape[d] == 1) {
                shape[d] = extent;
                owner[d] = i;
            } else if (shape[d] != extent) {
                const kjit_array *other = inputs[owner[d]];
                char a[160], b[160];
                *error = format_error(
                    "shapes %s and %s do not broadcast (argument %d and argument %d)",
                    kj_shape_string(a, sizeof a, other->ndim, other->shape),
                    kj_shape_string(b, sizeof b, in->ndim, in->shape), owner[d], i);
                return KJIT_ERROR_SHAPE;
            }
        }
    }
    /* Each input fits, but their broadcast may not: (2^32, 1) with (1, 2^32). */
    if (kj_shape_size(KJIT_U8, rank, shape, NULL, NULL, NULL) != KJIT_OK) {
        char text[KJ_SHAPE_TEXT_SIZE];
        *error = format_error("the broadcast shape %s has more than 2^63 - 1 elements",
                              kj_shape_string(text, sizeof text, rank, shape));
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    *ndim = rank;
    return KJIT_OK;
}

/* One operand of the iteration: its element strides over the broadcast shape. */
typedef struct Operand {
    KjArrayDesc *desc;
    int64_t strides[KJ_MAX_DIMS];
} Operand;

/* The usual call, planned without the general walk: every array and the
 * output have one shape (of more than one element) and are C-contiguous, so
 * the plan is the CONTIG layout over flat indices.  False for anything else. */
static bool plan_same_shape(const kjit_array *const *inputs, int count, const kjit_array *out,
                            KjBroadcastPlan *plan)
{
    int64_t size = checked_count(out);
    if (size <= 1 || !kj_array_is_contiguous(out))
        return false;
    size_t shape_bytes = (size_t)out->ndim * sizeof out->shape[0];
    for (int i = 0; i < count; i++)
        if (inputs[i] && (inputs[i]->ndim != out->ndim ||
                          memcmp(inputs[i]->shape, out->shape, shape_bytes) != 0 ||
                          !kj_array_is_contiguous(inputs[i])))
            return false;
    plan->ndim = out->ndim;
    memcpy(plan->shape, out->shape, shape_bytes);
    plan->size = size;
    memset(&plan->variant, 0, sizeof plan->variant);
    plan->variant.layout = KJ_LAYOUT_CONTIG;
    plan->variant.ndim = 1;
    /* Only the fields the CONTIG code reads: data, shape[0], strides[0]. */
    for (int i = 0; i <= count; i++) {
        KjArrayDesc *desc = i < count ? &plan->inputs[i] : &plan->output;
        const kjit_array *array = i < count ? inputs[i] : out;
        if (i < count)
            plan->scalar_data[i] = NULL;
        if (!array) {
            plan->variant.scalar_mask |= 1u << i;
            continue;
        }
        desc->data = array->data;
        desc->shape[0] = size;
        desc->strides[0] = 1;
    }
    return true;
}

kjit_status kj_broadcast_plan(const kjit_array *const *inputs, int count, const kjit_array *out,
                              KjBroadcastPlan *plan, char **error)
{
    return kj_broadcast_plan_outputs(inputs, count, 0, out, plan, error);
}

kjit_status kj_broadcast_plan_outputs(const kjit_array *const *inputs, int count, uint32_t outputs,
                                      const kjit_array *out, KjBroadcastPlan *plan, char **error)
{
    if (count > KJ_MAX_VEC_INPUTS) {
        *error = format_error("a vectorized call takes at most %d inputs", KJ_MAX_VEC_INPUTS);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    if (plan_same_shape(inputs, count, out, plan))
        return KJIT_OK;
    memset(plan, 0, sizeof *plan);
    kjit_status status = kj_broadcast_shape(inputs, count, &plan->ndim, plan->shape, error);
    if (status != KJIT_OK)
        return status;
    plan->size = 1;
    for (int d = 0; d < plan->ndim; d++)
        plan->size *= plan->shape[d];

    bool same = out->ndim == plan->ndim;
    for (int d = 0; same && d < plan->ndim; d++)
        same = out->shape[d] == plan->shape[d];
    if (!same) {
        char a[160], b[160];
        *error = format_error("output has shape %s but the broadcast shape is %s",
                              kj_shape_string(a, sizeof a, out->ndim, out->shape),
                              kj_shape_string(b, sizeof b, plan->ndim, plan->shape));
        return KJIT_ERROR_SHAPE;
    }

    /* Operands walked as arrays, with their strides aligned to the broadcast
     * shape (0 where they broadcast). */
    Operand ops[KJ_MAX_VEC_INPUTS + 1];
    int op_count = 0;
    for (int i = 0; i < count; i++) {
        const kjit_array *in = inputs[i];
        if (!in) {
            plan->variant.scalar_mask |= 1u << i;
            continue;
        }
        KjArrayDesc element;
        status = kj_array_desc(in, &element, error);
        if (status != KJIT_OK)
            return status;
        if (checked_count(in) == 1 && in->memory == KJIT_MEMORY_HOST && !(outputs >> i & 1)) {
            plan->variant.scalar_mask |= 1u << i;
            plan->scalar_data[i] = in->data;
            continue;
        }
        Operand *op = &ops[op_count++];
        op->desc = &plan->inputs[i];
        op->desc->data = in->data;
        for (int d = 0; d < plan->ndim; d++) {
            int k = d - (plan->ndim - in->ndim);
            op->strides[d] = k < 0 || in->shape[k] == 1 ? 0 : element.strides[k];
        }
    }
    KjArrayDesc out_element;
    status = kj_array_desc(out, &out_element, error);
    if (status != KJIT_OK)
        return status;
    Operand *out_op = &ops[op_count++];
    out_op->desc = &plan->output;
    out_op->desc->data = out->data;
    for (int d = 0; d < plan->ndim; d++)
        out_op->strides[d] = out_element.strides[d];

    /* Drop size-1 dimensions, then merge an outer dimension into the inner
     * one wherever every operand steps over the inner run exactly. */
    int64_t shape[KJ_MAX_DIMS];
    int rank = 0;
    for (int d = 0; d < plan->ndim; d++) {
        if (plan->shape[d] == 1)
            continue;
        shape[rank] = plan->shape[d];
        for (int o = 0; o < op_count; o++)
            ops[o].strides[rank] = ops[o].strides[d];
        rank++;
    }
    for (int d = rank - 2; d >= 0; d--) {
        bool mergeable = true;
        for (int o = 0; o < op_count && mergeable; o++)
            mergeable = ops[o].strides[d] == ops[o].strides[d + 1] * shape[d + 1];
        if (!mergeable)
            continue;
        shape[d] *= shape[d + 1];
        for (int o = 0; o < op_count; o++)
            ops[o].strides[d] = ops[o].strides[d + 1];
        for (int e = d + 1; e < rank - 1; e++) {
            shape[e] = shape[e + 1];
            for (int o = 0; o < op_count; o++)
                ops[o].strides[e] = ops[o].strides[e + 1];
        }
        rank--;
    }

    bool contiguous = rank <= 1;
    for (int o = 0; o < op_count && contiguous && rank == 1; o++)
        contiguous = ops[o].strides[0] == 1;
    if (contiguous) {
        plan->variant.layout = KJ_LAYOUT_CONTIG;
        plan->variant.ndim = 1;
        for (int o = 0; o < op_count; o++) {
            ops[o].desc->shape[0] = plan->size;
            ops[o].desc->strides[0] = 1;
        }
        return KJIT_OK;
    }
    plan->variant.layout = KJ_LAYOUT_STRIDED;
    plan->variant.ndim = rank;
    for (int o = 0; o < op_count; o++)
        for (int d = 0; d < rank; d++) {
            ops[o].desc->shape[d] = shape[d];
            ops[o].desc->strides[d] = ops[o].strides[d];
        }
    return KJIT_OK;
}

bool kj_array_has_elements(const kjit_array *array)
{
    for (int d = 0; d < array->ndim; d++)
        if (array->shape[d] == 0)
            return false;
    return true;
}
