/*
 * api_interop.c: what a host needs to share CUDA work with other GPU libraries
 * in the same process (CuPy, PyTorch, Numba), beyond device pointers, which
 * kjit_array takes as they are: a kjit_stream over a CUstream another library
 * made, and the CUstream under any kjit_stream.
 *
 * Every library named above works in the device's primary context, as kjit
 * does (cuda.c), so their streams and memory are valid in kjit's launches.
 */
#include "kjit_runtime.h"

kjit_status kjit_stream_wrap(kjit_context *context, void *cu_stream, kjit_stream **out)
{
    if (!kj_api_live(context, KJ_HANDLE_CONTEXT, "kjit_stream_wrap"))
        return KJIT_ERROR_INVALID_ARGUMENT;
    kj_api_clear_error(context);
    if (!out)
        return kj_api_null(context, "kjit_stream_wrap", "out");
    *out = NULL;
    KjCudaStream *cuda = NULL;
    if (context->cuda && cu_stream) {
        char *error = NULL;
        kjit_status status = kj_cuda_stream_wrap(context->cuda, cu_stream, &cuda, &error);
        if (status != KJIT_OK)
            return kj_api_take_error(context, status, "kjit_stream_wrap: ", error);
    }
    /* NULL (the legacy default stream), or a cpu context: a stream with no
     * CUDA stream behind it, which calls treat as the default one. */
    kjit_stream *stream = kj_handle_new(KJ_HANDLE_STREAM, sizeof *stream);
    stream->context = context;
    stream->handle = cuda;
    kj_api_stream_register(stream);
    *out = stream;
    return KJIT_OK;
}

void *kjit_stream_handle(const kjit_stream *stream)
{
    if (!stream)
        return NULL; /* the default stream's: none of its own */
    if (!kj_api_live(stream, KJ_HANDLE_STREAM, "kjit_stream_handle"))
        return NULL;
    return stream->context->cuda ? kj_cuda_stream_handle(stream->handle) : NULL;
}
