/*
 * api_stage.c: the host operands of a call, between the checks (api_args.c)
 * and the running (the context's runtime target): allocating an output,
 * copying an input that an output overlaps (kj_api_unalias), and staging
 * host arrays in the memory of a target whose memory is not the host's.
 * The call paths (api_call.c, api_guvec.c, api_reduce.c) share it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

/* --------------------------------------------------------------- outputs */

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

