/*
 * cuda_peer.c: copies between the memory of two GPUs (kjit_copy with device
 * arrays of different devices), for programs that spread work over several
 * GPUs with one context per device.
 *
 * Straight between the devices when they have peer access (both ways, as
 * cuDeviceCanAccessPeer says): access is enabled for the two primary
 * contexts and cuMemcpyPeer moves the bytes over NVLink or PCIe.  Otherwise
 * the bytes are staged through host memory, a piece at a time, each piece
 * down from the source device and up to the destination one.  Both paths
 * use the devices' primary contexts, which is where kjit (and the CUDA
 * runtime, so CuPy and PyTorch) allocate.  KJIT_CUDA_PEER=0 forces the staged
 * path, so that it can be tested (and timed) on machines with peer access.
 */
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

enum {
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
};

/* The host buffer of a staged copy: large enough that the driver's per-call
 * cost does not count, small enough not to double a large copy's memory. */
#define STAGE_BYTES ((size_t)64 << 20)

static bool peer_allowed(void)
{
    const char *env = getenv("KJIT_CUDA_PEER");
    return !(env && strcmp(env, "0") == 0);
}

/* Peer access both ways between two ordinals (distinct and existing). */
static bool can_access(const KjCuDriver *cu, int a, int b)
{
    int da = 0, db = 0, ab = 0, ba = 0;
    return cu->DeviceGet(&da, a) == 0 && cu->DeviceGet(&db, b) == 0 &&
           cu->DeviceCanAccessPeer(&ab, da, db) == 0 &&
           cu->DeviceCanAccessPeer(&ba, db, da) == 0 && ab && ba;
}

int kjit_cuda_peer_access(int device, int peer)
{
    const KjCuDriver *cu = kj_cuda_driver(NULL);
    int count = kjit_cuda_device_count();
    if (!cu || device < 0 || peer < 0 || device >= count || peer >= count || device == peer)
        return 0;
    return peer_allowed() && can_access(cu, device, peer);
}

int kj_cuda_pointer_device(KjCuda *cuda, const void *ptr)
{
    int ordinal = -1;
    if (kj_cuda_table(cuda)->PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                 (KjCuDevicePtr)(uintptr_t)ptr) != 0)
        return -1;
    return ordinal;
}

/* The primary contexts of the two devices, retained for the copy. */
typedef struct PeerContexts {
    int device[2]; /* CUdevice: destination, source */
    void *context[2];
    int retained;
} PeerContexts;

static void release_contexts(const KjCuDriver *cu, PeerContexts *p)
{
    for (int k = 0; k < p->retained; k++)
        cu->DevicePrimaryCtxRelease(p->device[k]);
    p->retained = 0;
}

static kjit_status retain_contexts(KjCuda *cuda, int dst_device, int src_device, PeerContexts *p,
                                   char **error)
{
    const KjCuDriver *cu = kj_cuda_table(cuda);
    int ordinals[2] = {dst_device, src_device};
    p->retained = 0;
    for (int k = 0; k < 2; k++) {
        KjCuResult result = cu->DeviceGet(&p->device[k], ordinals[k]);
        if (result == 0)
            result = cu->DevicePrimaryCtxRetain(&p->context[k], p->device[k]);
        if (result != 0) {
            release_contexts(cu, p);
            return kj_cuda_fail(cuda, result, "cuDevicePrimaryCtxRetain (for a peer copy)",
                                error);
        }
        p->retained++;
    }
    return KJIT_OK;
}

/* Each context may read and write the other's memory. */
static kjit_status enable_peer(KjCuda *cuda, PeerContexts *p, char **error)
{
    const KjCuDriver *cu = kj_cuda_table(cuda);
    for (int k = 0; k < 2; k++) {
        KjCuResult result = cu->CtxSetCurrent(p->context[k]);
        if (result == 0)
            result = cu->CtxEnablePeerAccess(p->context[1 - k], 0);
        if (result != 0 && result != CU_ERROR_PEER_ACCESS_ALREADY_ENABLED)
            return kj_cuda_fail(cuda, result, "cuCtxEnablePeerAccess", error);
    }
    return KJIT_OK;
}

/* Down from the source device into host memory, up to the destination,
 * STAGE_BYTES at a time.  Synchronous copies on each context's default
 * stream, so each piece comes after the work queued there. */
static kjit_status staged_copy(KjCuda *cuda, PeerContexts *p, KjCuDevicePtr dst,
                               KjCuDevicePtr src, size_t bytes, char **error)
{
    const KjCuDriver *cu = kj_cuda_table(cuda);
    size_t size = bytes < STAGE_BYTES ? bytes : STAGE_BYTES;
    void *stage = malloc(size);
    if (!stage) {
        free(*error);
        *error = kj_xstrdup("kjit_copy between devices: no host memory to stage the copy");
        return KJIT_ERROR_OUT_OF_MEMORY;
    }
    kjit_status status = KJIT_OK;
    for (size_t done = 0; done < bytes && status == KJIT_OK; done += size) {
        size_t piece = bytes - done < size ? bytes - done : size;
        KjCuResult result = cu->CtxSetCurrent(p->context[1]);
        if (result == 0)
            result = cu->MemcpyDtoH(stage, src + done, piece);
        if (result != 0) {
            status = kj_cuda_fail(cuda, result, "cuMemcpyDtoH (a staged peer copy)", error);
            break;
        }
        result = cu->CtxSetCurrent(p->context[0]);
        if (result == 0)
            result = cu->MemcpyHtoD(dst + done, stage, piece);
        if (result != 0)
            status = kj_cuda_fail(cuda, result, "cuMemcpyHtoD (a staged peer copy)", error);
    }
    free(stage);
    return status;
}

kjit_status kj_cuda_copy_peer(KjCuda *cuda, int dst_device, void *dst, int src_device,
                              const void *src, size_t bytes, KjCudaStream *stream, char **error)
{
    if (kj_cuda_stream_stale(cuda, stream)) {
        free(*error);
        *error = kj_xstrdup("this stream was made before a GPU fault reset the context; "
                            "make it again");
        return KJIT_ERROR_CUDA;
    }
    kjit_status status = kj_cuda_make_current(cuda, error);
    if (status != KJIT_OK || bytes == 0)
        return status;
    const KjCuDriver *cu = kj_cuda_table(cuda);
    PeerContexts p;
    status = retain_contexts(cuda, dst_device, src_device, &p, error);
    if (status != KJIT_OK)
        return status;
    KjCuDevicePtr to = (KjCuDevicePtr)(uintptr_t)dst, from = (KjCuDevicePtr)(uintptr_t)src;
    void *on = kj_cuda_stream_handle(stream);
    if (peer_allowed() && can_access(cu, dst_device, src_device)) {
        status = enable_peer(cuda, &p, error);
        if (status == KJIT_OK)
            status = kj_cuda_make_current(cuda, error);
        if (status == KJIT_OK) {
            KjCuResult result =
                stream ? cu->MemcpyPeerAsync(to, p.context[0], from, p.context[1], bytes, on)
                       : cu->MemcpyPeer(to, p.context[0], from, p.context[1], bytes);
            if (result != 0)
                status = kj_cuda_fail(cuda, result, stream ? "cuMemcpyPeerAsync" : "cuMemcpyPeer",
                                      error);
        }
    } else {
        /* The stream's earlier work first: the staged copy is synchronous. */
        KjCuResult result = stream ? cu->StreamSynchronize(on) : 0;
        status = result == 0 ? staged_copy(cuda, &p, to, from, bytes, error)
                             : kj_cuda_fail(cuda, result, "cuStreamSynchronize", error);
    }
    /* The caller's context current again, whatever happened above. */
    kj_cuda_make_current(cuda, NULL);
    release_contexts(cu, &p);
    return status;
}
