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
    kj_api_clear_error(context);
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
    kjit_stream *stream = kj_xcalloc(1, sizeof *stream);
    stream->context = context;
    stream->handle = cuda;
    *out = stream;
    return KJIT_OK;
}

void *kjit_stream_handle(const kjit_stream *stream)
{
    return stream && stream->context->cuda ? kj_cuda_stream_handle(stream->handle) : NULL;
}
