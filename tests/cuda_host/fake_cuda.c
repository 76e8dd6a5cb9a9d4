/*
 * fake_cuda.c: a stand-in for libcuda.so.1 that runs nothing on a GPU and
 * counts the driver calls kjit makes, so the host cost of kjit's cuda call
 * path (and how many driver calls each call makes) is measured on a machine
 * without a GPU.  kjit loads it through its normal driver-loading path with
 * KJIT_CUDA_DRIVER=<this .so> (runtime/cuda_driver.c, docs/security.md).
 *
 * It exports the entry points cuda_driver.c resolves.  Each returns success
 * with a plausible value: one device of compute capability 9.0 with 132
 * multiprocessors (an H100's), a primary context per thread made current
 * by cuCtxSetCurrent and read back by cuCtxGetCurrent as the real driver
 * keeps it, "device memory" that is host memory (so copies and
 * cuModuleGetGlobal's writes are real), and kernels that do nothing.  The
 * calls cost a few nanoseconds each, so what a measurement shows is kjit's
 * own host work.
 *
 * kjit_fake_cuda_count(name) reads a call's count (the name as kjit resolves
 * it, "cuLaunchKernel"; NULL: every call's, summed); kjit_fake_cuda_reset()
 * zeroes them all;
 * kjit_fake_cuda_set_current(ctx) plays another library making its own
 * context current on the calling thread.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

#define CALLS(X)                                                                              \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) \
    X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset_v2) \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuLinkCreate_v2)              \
    X(cuLinkAddData_v2) X(cuLinkComplete) X(cuLinkDestroy) X(cuModuleLoadDataEx)              \
    X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuLaunchCooperativeKernel)   \
    X(cuLaunchKernelEx)                                                                       \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuOccupancyMaxPotentialBlockSize)           \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuMemAlloc_v2) X(cuMemFree_v2)           \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2)     \
    X(cuMemcpyDtoD_v2) X(cuMemcpyDtoDAsync_v2) X(cuStreamCreate) X(cuStreamSynchronize)       \
    X(cuStreamDestroy_v2) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)             \
    X(cuEventElapsedTime_v2) X(cuEventDestroy_v2) X(cuStreamWaitEvent)                        \
    X(cuMemHostRegister_v2) X(cuMemHostUnregister) X(cuMemHostGetDevicePointer_v2)            \
    X(cuModuleGetGlobal_v2) X(cuPointerGetAttribute) X(cuDeviceCanAccessPeer)                 \
    X(cuCtxEnablePeerAccess) X(cuMemcpyPeer) X(cuMemcpyPeerAsync)

enum {
#define ENUM(name) CALL_##name,
    CALLS(ENUM)
#undef ENUM
    CALL_COUNT
};

static const char *const call_names[CALL_COUNT] = {
#define NAME(name) #name,
    CALLS(NAME)
#undef NAME
};

static _Atomic long counts[CALL_COUNT];

#define COUNT(name) atomic_fetch_add_explicit(&counts[CALL_##name], 1, memory_order_relaxed)

long kjit_fake_cuda_count(const char *name)
{
    long total = 0;
    for (int i = 0; i < CALL_COUNT; i++) {
        if (!name)
            total += atomic_load(&counts[i]);
        else if (strcmp(call_names[i], name) == 0)
            return atomic_load(&counts[i]);
    }
    return name ? -1 : total;
}

void kjit_fake_cuda_reset(void)
{
    for (int i = 0; i < CALL_COUNT; i++)
        atomic_store(&counts[i], 0);
}

/* The one device's primary context, and the context current on each thread. */
static char primary_context;
static _Thread_local void *current;

void kjit_fake_cuda_set_current(void *context)
{
    current = context;
}

/* A module or function handle: something distinct to hand back. */
static void *token(void)
{
    return calloc(1, 16);
}

CUresult cuInit(unsigned flags) { COUNT(cuInit); return 0; }
CUresult cuDriverGetVersion(int *v) { COUNT(cuDriverGetVersion); *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult e, const char **name)
{
    COUNT(cuGetErrorName);
    *name = e == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return 0;
}
CUresult cuGetErrorString(CUresult e, const char **text)
{
    COUNT(cuGetErrorString);
    *text = "the fake driver (tests/cuda_host/fake_cuda.c)";
    return 0;
}
CUresult cuDeviceGetCount(int *n) { COUNT(cuDeviceGetCount); *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) { COUNT(cuDeviceGet); *d = ordinal; return 0; }
CUresult cuDeviceGetName(char *name, int length, int d)
{
    COUNT(cuDeviceGetName);
    strncpy(name, "kjit fake CUDA device", (size_t)length);
    name[length - 1] = '\0';
    return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int d)
{
    COUNT(cuDeviceGetAttribute);
    switch (attribute) {
    case 16: *value = 132; break;    /* multiprocessors */
    case 75: *value = 9; break;      /* compute capability */
    case 76: *value = 0; break;
    case 95: *value = 1; break;      /* cooperative launch */
    case 97: *value = 232448; break; /* shared memory a block may opt in to */
    default: *value = 0; break;
    }
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int d)
{
    COUNT(cuDeviceTotalMem_v2);
    *bytes = (size_t)80 << 30;
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d)
{
    COUNT(cuDevicePrimaryCtxRetain);
    *ctx = &primary_context;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int d) { COUNT(cuDevicePrimaryCtxRelease_v2); return 0; }
CUresult cuDevicePrimaryCtxReset_v2(int d) { COUNT(cuDevicePrimaryCtxReset_v2); return 0; }
CUresult cuCtxSetCurrent(void *ctx) { COUNT(cuCtxSetCurrent); current = ctx; return 0; }
CUresult cuCtxGetCurrent(void **ctx) { COUNT(cuCtxGetCurrent); *ctx = current; return 0; }
CUresult cuCtxSynchronize(void) { COUNT(cuCtxSynchronize); return 0; }

static char fake_cubin[] = "fake cubin";
CUresult cuLinkCreate_v2(unsigned n, int *options, void **values, void **state)
{
    COUNT(cuLinkCreate_v2);
    *state = token();
    return 0;
}
CUresult cuLinkAddData_v2(void *state, int type, void *data, size_t size, const char *name,
                          unsigned n, int *options, void **values)
{
    COUNT(cuLinkAddData_v2);
    return 0;
}
CUresult cuLinkComplete(void *state, void **cubin, size_t *size)
{
    COUNT(cuLinkComplete);
    *cubin = fake_cubin;
    *size = sizeof fake_cubin;
    return 0;
}
CUresult cuLinkDestroy(void *state) { COUNT(cuLinkDestroy); free(state); return 0; }
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options,
                            void **values)
{
    COUNT(cuModuleLoadDataEx);
    *module = token();
    return 0;
}
CUresult cuModuleUnload(void *module) { COUNT(cuModuleUnload); free(module); return 0; }
CUresult cuModuleGetFunction(void **function, void *module, const char *name)
{
    COUNT(cuModuleGetFunction);
    *function = token(); /* (one per call: kjit asks once per kernel) */
    return 0;
}
/* The parameters of this thread's last launch as the driver takes them:
 * with `extra`, the bytes of its CU_LAUNCH_PARAM_BUFFER_POINTER block (its
 * CU_LAUNCH_PARAM_BUFFER_SIZE of them, the keys in any order up to
 * CU_LAUNCH_PARAM_END); with kernelParams, the address of the array of
 * pointers (what each points to is as long as the kernel's parameter, which
 * the fake cannot know).  A launch with both, an unknown key, a pointer or size missing or a
 * block over 4 KiB (the driver's limit before Volta's 32 KiB) is refused
 * with CUDA_ERROR_INVALID_VALUE, as the driver refuses it.
 * kjit_fake_cuda_last_params(&size, &packed) reads them. */
enum { PARAM_LIMIT = 4096 };
static _Thread_local unsigned char last_params[PARAM_LIMIT];
static _Thread_local size_t last_size;
static _Thread_local int last_packed;

const void *kjit_fake_cuda_last_params(size_t *size, int *packed)
{
    *size = last_size;
    *packed = last_packed;
    return last_params;
}

static CUresult take_params(void **params, void **extra)
{
    if (params && extra)
        return 1;
    if (!extra) {
        last_packed = 0;
        last_size = params ? sizeof params : 0;
        memcpy(last_params, &params, sizeof params);
        return 0;
    }
    const void *buffer = NULL;
    const size_t *size = NULL;
    for (int i = 0;; i += 2) {
        if (extra[i] == (void *)0x00)
            break;
        else if (extra[i] == (void *)0x01)
            buffer = extra[i + 1];
        else if (extra[i] == (void *)0x02)
            size = extra[i + 1];
        else
            return 1;
    }
    if (!buffer || !size || *size > PARAM_LIMIT)
        return 1;
    memcpy(last_params, buffer, *size);
    last_size = *size;
    last_packed = 1;
    return 0;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra)
{
    COUNT(cuLaunchKernel);
    return take_params(params, extra);
}
/* cuda.h's CUlaunchConfig with no attributes: tests/cuda_host/stream_diag.c
 * times this form of the launch (kjit does not make it) */
CUresult cuLaunchKernelEx(const void *config, void *f, void **params, void **extra)
{
    COUNT(cuLaunchKernelEx);
    return config ? take_params(params, extra) : 1;
}
CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shared, void *stream,
                                   void **params)
{
    COUNT(cuLaunchCooperativeKernel);
    return 0;
}
CUresult cuFuncGetAttribute(int *value, int attribute, void *f)
{
    COUNT(cuFuncGetAttribute);
    *value = 0;
    return 0;
}
CUresult cuFuncSetAttribute(void *f, int attribute, int value)
{
    COUNT(cuFuncSetAttribute);
    return 0;
}
CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, void *f,
                                          size_t (*dynamic)(int), size_t shared, int limit)
{
    COUNT(cuOccupancyMaxPotentialBlockSize);
    *min_grid = 264;
    *block = 1024;
    return 0;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *f, int block,
                                                     size_t shared)
{
    COUNT(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    *blocks = 2;
    return 0;
}

/* Device memory is host memory here. */
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes)
{
    COUNT(cuMemAlloc_v2);
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) { COUNT(cuMemFree_v2); free((void *)(uintptr_t)ptr); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes)
{
    COUNT(cuMemcpyHtoD_v2);
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes)
{
    COUNT(cuMemcpyDtoH_v2);
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream)
{
    COUNT(cuMemcpyHtoDAsync_v2);
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *stream)
{
    COUNT(cuMemcpyDtoHAsync_v2);
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    COUNT(cuMemcpyDtoD_v2);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, void *stream)
{
    COUNT(cuMemcpyDtoDAsync_v2);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
CUresult cuStreamCreate(void **stream, unsigned flags)
{
    COUNT(cuStreamCreate);
    *stream = token();
    return 0;
}
CUresult cuStreamSynchronize(void *stream) { COUNT(cuStreamSynchronize); return 0; }
CUresult cuStreamDestroy_v2(void *stream) { COUNT(cuStreamDestroy_v2); free(stream); return 0; }
CUresult cuEventCreate(void **event, unsigned flags)
{
    COUNT(cuEventCreate);
    *event = token();
    return 0;
}
CUresult cuEventRecord(void *event, void *stream) { COUNT(cuEventRecord); return 0; }
CUresult cuEventSynchronize(void *event) { COUNT(cuEventSynchronize); return 0; }
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end)
{
    COUNT(cuEventElapsedTime_v2);
    *ms = 0;
    return 0;
}
CUresult cuEventDestroy_v2(void *event) { COUNT(cuEventDestroy_v2); free(event); return 0; }
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags)
{
    COUNT(cuStreamWaitEvent);
    return 0;
}
CUresult cuMemHostRegister_v2(void *host, size_t bytes, unsigned flags)
{
    COUNT(cuMemHostRegister_v2);
    return 0;
}
CUresult cuMemHostUnregister(void *host) { COUNT(cuMemHostUnregister); return 0; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *device, void *host, unsigned flags)
{
    COUNT(cuMemHostGetDevicePointer_v2);
    *device = (CUdeviceptr)(uintptr_t)host;
    return 0;
}
/* Every module has each global asked for: 8 bytes of its own (leaked: a
 * test's handful). */
CUresult cuModuleGetGlobal_v2(CUdeviceptr *device, size_t *bytes, void *module,
                              const char *name)
{
    COUNT(cuModuleGetGlobal_v2);
    *device = (CUdeviceptr)(uintptr_t)calloc(1, 8);
    *bytes = 8;
    return 0;
}
CUresult cuPointerGetAttribute(void *value, int attribute, CUdeviceptr ptr)
{
    COUNT(cuPointerGetAttribute);
    return 1; /* CUDA_ERROR_INVALID_VALUE: no device memory the driver knows */
}
CUresult cuDeviceCanAccessPeer(int *can, int d, int peer)
{
    COUNT(cuDeviceCanAccessPeer);
    *can = 0;
    return 0;
}
CUresult cuCtxEnablePeerAccess(void *peer, unsigned flags)
{
    COUNT(cuCtxEnablePeerAccess);
    return 0;
}
CUresult cuMemcpyPeer(CUdeviceptr dst, void *dc, CUdeviceptr src, void *sc, size_t bytes)
{
    COUNT(cuMemcpyPeer);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, void *dc, CUdeviceptr src, void *sc, size_t bytes,
                           void *stream)
{
    COUNT(cuMemcpyPeerAsync);
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return 0;
}
