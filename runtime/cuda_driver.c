/*
 * cuda_driver.c: the CUDA Driver API, opened at run time.
 *
 * kjit never links against libcuda: the same binary must run on machines with
 * no GPU, where the cuda target reports why it is unavailable and `auto` falls
 * back to cpu.  This file dlopens libcuda.so.1 once per process, resolves the
 * entry points cuda.c uses (the _v2 names where cuda.h maps a call to one, so
 * the semantics are those of the current headers), and runs cuInit.  The
 * outcome, success or the reason for failure, is remembered: a process does
 * not gain a driver while it runs.
 *
 * KJIT_CUDA_DRIVER names another library to open in place of libcuda.so.1
 * (tests/cuda_host/fake_cuda.c, which counts driver calls on a machine with
 * no GPU, is what it is for).  It is code kjit runs, so it is taken only as
 * docs/security.md allows: read with secure_getenv (never in a setuid or
 * otherwise privileged process), an absolute path, and a regular file owned
 * by the user or root that neither group nor others can write.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kjit_runtime.h"

static KjCuDriver driver;
static const KjCuDriver *driver_loaded;
static char driver_failure[512];
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

/* Each entry: where the pointer goes, then the symbols to try in order (the
 * newest first, for the few calls whose older name some drivers still need). */
typedef struct DriverSymbol {
    void **slot;
    const char *names[2];
} DriverSymbol;

#define SLOT(field) ((void **)&driver.field)

static const DriverSymbol driver_symbols[] = {
    {SLOT(Init), {"cuInit"}},
    {SLOT(DriverGetVersion), {"cuDriverGetVersion"}},
    {SLOT(GetErrorName), {"cuGetErrorName"}},
    {SLOT(GetErrorString), {"cuGetErrorString"}},
    {SLOT(DeviceGetCount), {"cuDeviceGetCount"}},
    {SLOT(DeviceGet), {"cuDeviceGet"}},
    {SLOT(DeviceGetName), {"cuDeviceGetName"}},
    {SLOT(DeviceGetAttribute), {"cuDeviceGetAttribute"}},
    {SLOT(DeviceTotalMem), {"cuDeviceTotalMem_v2"}},
    {SLOT(DevicePrimaryCtxRetain), {"cuDevicePrimaryCtxRetain"}},
    {SLOT(DevicePrimaryCtxRelease), {"cuDevicePrimaryCtxRelease_v2"}},
    {SLOT(DevicePrimaryCtxReset), {"cuDevicePrimaryCtxReset_v2"}},
    {SLOT(CtxSetCurrent), {"cuCtxSetCurrent"}},
    {SLOT(CtxGetCurrent), {"cuCtxGetCurrent"}},
    {SLOT(CtxSynchronize), {"cuCtxSynchronize"}},
    {SLOT(LinkCreate), {"cuLinkCreate_v2"}},
    {SLOT(LinkAddData), {"cuLinkAddData_v2"}},
    {SLOT(LinkComplete), {"cuLinkComplete"}},
    {SLOT(LinkDestroy), {"cuLinkDestroy"}},
    {SLOT(ModuleLoadDataEx), {"cuModuleLoadDataEx"}},
    {SLOT(ModuleUnload), {"cuModuleUnload"}},
    {SLOT(ModuleGetFunction), {"cuModuleGetFunction"}},
    {SLOT(LaunchKernel), {"cuLaunchKernel"}},
    {SLOT(LaunchCooperativeKernel), {"cuLaunchCooperativeKernel"}},
    {SLOT(FuncGetAttribute), {"cuFuncGetAttribute"}},
    {SLOT(FuncSetAttribute), {"cuFuncSetAttribute"}},
    {SLOT(OccupancyMaxPotentialBlockSize), {"cuOccupancyMaxPotentialBlockSize"}},
    {SLOT(OccupancyMaxActiveBlocksPerMultiprocessor),
     {"cuOccupancyMaxActiveBlocksPerMultiprocessor"}},
    {SLOT(MemAlloc), {"cuMemAlloc_v2"}},
    {SLOT(MemFree), {"cuMemFree_v2"}},
    {SLOT(MemcpyHtoD), {"cuMemcpyHtoD_v2"}},
    {SLOT(MemcpyDtoH), {"cuMemcpyDtoH_v2"}},
    {SLOT(MemcpyHtoDAsync), {"cuMemcpyHtoDAsync_v2"}},
    {SLOT(MemcpyDtoHAsync), {"cuMemcpyDtoHAsync_v2"}},
    {SLOT(MemcpyDtoD), {"cuMemcpyDtoD_v2"}},
    {SLOT(MemcpyDtoDAsync), {"cuMemcpyDtoDAsync_v2"}},
    {SLOT(StreamCreate), {"cuStreamCreate"}},
    {SLOT(StreamSynchronize), {"cuStreamSynchronize"}},
    {SLOT(StreamDestroy), {"cuStreamDestroy_v2"}},
    {SLOT(EventCreate), {"cuEventCreate"}},
    {SLOT(EventRecord), {"cuEventRecord"}},
    {SLOT(EventSynchronize), {"cuEventSynchronize"}},
    /* CUDA 12.8 added _v2 (and CUDA 13 headers map to it); older drivers lack it. */
    {SLOT(EventElapsedTime), {"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
    {SLOT(EventDestroy), {"cuEventDestroy_v2"}},
    {SLOT(StreamWaitEvent), {"cuStreamWaitEvent"}},
    {SLOT(MemHostRegister), {"cuMemHostRegister_v2"}},
    {SLOT(MemHostUnregister), {"cuMemHostUnregister"}},
    {SLOT(MemHostGetDevicePointer), {"cuMemHostGetDevicePointer_v2"}},
    {SLOT(ModuleGetGlobal), {"cuModuleGetGlobal_v2"}},
    /* copies between devices (cuda_peer.c) */
    {SLOT(PointerGetAttribute), {"cuPointerGetAttribute"}},
    {SLOT(DeviceCanAccessPeer), {"cuDeviceCanAccessPeer"}},
    {SLOT(CtxEnablePeerAccess), {"cuCtxEnablePeerAccess"}},
    {SLOT(MemcpyPeer), {"cuMemcpyPeer"}},
    {SLOT(MemcpyPeerAsync), {"cuMemcpyPeerAsync"}},
};

#undef SLOT

/* The library KJIT_CUDA_DRIVER names, or NULL with the reason in
 * driver_failure when it may not be used. */
static const char *driver_override(const char *path)
{
    const char *why = NULL;
    struct stat st;
    if (path[0] != '/')
        why = "not an absolute path";
    else if (stat(path, &st) != 0)
        why = "it cannot be read";
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "group or others can write it";
    if (!why)
        return path;
    snprintf(driver_failure, sizeof driver_failure,
             "no CUDA driver: KJIT_CUDA_DRIVER=%.300s is not used: %s (see docs/security.md)",
             path, why);
    return NULL;
}

static void driver_open(void)
{
    const char *library = "libcuda.so.1";
    const char *override = secure_getenv("KJIT_CUDA_DRIVER");
    if (override && *override && !(library = driver_override(override)))
        return;
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(driver_failure, sizeof driver_failure,
                 "no CUDA driver: %s could not be opened (%s)", library, why ? why : "?");
        return;
    }
    for (size_t i = 0; i < sizeof driver_symbols / sizeof driver_symbols[0]; i++) {
        const DriverSymbol *symbol = &driver_symbols[i];
        void *address = NULL;
        for (int k = 0; k < 2 && !address && symbol->names[k]; k++)
            address = dlsym(handle, symbol->names[k]);
        if (!address) {
            snprintf(driver_failure, sizeof driver_failure,
                     "the CUDA driver %s is too old: it lacks %s", library, symbol->names[0]);
            return;
        }
        *symbol->slot = address;
    }
    KjCuResult result = driver.Init(0);
    if (result != 0) {
        char text[256];
        snprintf(driver_failure, sizeof driver_failure, "cuInit failed: %s",
                 kj_cuda_result_text(result, text, sizeof text));
        return;
    }
    int count = 0;
    result = driver.DeviceGetCount(&count);
    if (result != 0 || count == 0) {
        snprintf(driver_failure, sizeof driver_failure,
                 "the CUDA driver is installed but sees no GPU");
        return;
    }
    /* The handle stays open for the life of the process: the table points into it. */
    driver_loaded = &driver;
}

const KjCuDriver *kj_cuda_driver(char **error)
{
    pthread_once(&driver_once, driver_open);
    if (!driver_loaded && error)
        *error = kj_xstrdup(driver_failure);
    return driver_loaded;
}

const char *kj_cuda_result_text(KjCuResult result, char *buf, size_t size)
{
    const char *name = NULL, *text = NULL;
    /* The error calls themselves are resolved first, so they exist whenever
     * any other call could have failed. */
    if (driver.GetErrorName)
        driver.GetErrorName(result, &name);
    if (driver.GetErrorString)
        driver.GetErrorString(result, &text);
    if (name)
        snprintf(buf, size, "%s (%s)", name, text ? text : "no description");
    else
        snprintf(buf, size, "CUresult %d", result);
    return buf;
}
