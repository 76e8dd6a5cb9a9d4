/*
 * aot_cuda.c: a library's cuda code on a cuda context (docs/aot.md,
 * "cuda"), in libkjit and libkjit-rt alike.
 *
 * At load time (aot.c) the library's code for the device is chosen once:
 * the cubin of the same major architecture with the highest minor not
 * above the device's (a cubin runs on such a device), else the PTX when its
 * arch is not above the device's (the driver compiles it: a device newer
 * than every cubin), else the library is refused, naming the device and
 * what the library holds.  A root's chosen code is loaded at its first use,
 * as the JIT loads a root's code, into a module of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

bool kj_aot_cuda_capability(const char *arch, int *major, int *minor)
{
    int number = 0, used = 0;
    if (!arch || strncmp(arch, "sm_", 3) != 0 || sscanf(arch + 3, "%d%n", &number, &used) != 1 ||
        number < 10 || number > 999 || arch[3] < '1' || arch[3] > '9')
        return false;
    const char *tail = arch + 3 + used;
    if (*tail && !(tail[0] == 'a' && !tail[1])) /* sm_90a: arch-specific */
        return false;
    *major = number / 10;
    *minor = number % 10;
    return true;
}

int kj_aot_cuda_choose(int major, int minor, const KjAotCudaArchs *archs, const char *ptx_arch)
{
    int best = KJ_AOT_CUDA_NONE, best_minor = -1;
    for (int a = 0; a < archs->count; a++) {
        int M = 0, m = 0;
        if (!archs->cubin[a] || !kj_aot_cuda_capability(archs->names[a], &M, &m))
            continue;
        /* sm_90a's code runs on 9.0 alone */
        bool specific = archs->names[a][strlen(archs->names[a]) - 1] == 'a';
        if (M == major && (specific ? m == minor : m <= minor) && m > best_minor) {
            best = a;
            best_minor = m;
        }
    }
    if (best != KJ_AOT_CUDA_NONE)
        return best;
    int M = 0, m = 0;
    if (ptx_arch && kj_aot_cuda_capability(ptx_arch, &M, &m) &&
        ptx_arch[strlen(ptx_arch) - 1] != 'a' && (M < major || (M == major && m <= minor)))
        return KJ_AOT_CUDA_USE_PTX;
    return KJ_AOT_CUDA_NONE;
}

void kj_aot_cuda_device(kjit_context *context, int *major, int *minor)
{
    const char *fake = getenv("KJIT_AOT_CUDA_DEVICE");
    if (fake && *fake && kj_aot_cuda_capability(fake, major, minor))
        return;
    kjit_device_info info;
    memset(&info, 0, sizeof info);
    kj_cuda_info(context->cuda, &info);
    *major = info.compute_major;
    *minor = info.compute_minor;
}

kjit_status kj_aot_cuda_load(kjit_module *module, const KjCompiled *compiled,
                             KjCudaModule **loaded, char **error)
{
    kjit_context *context = module->context;
    const void *cubin = NULL;
    const char *ptx = NULL;
    size_t size = 0;
    kj_aot_cuda_image(module->library, compiled->library_root, &cubin, &size, &ptx);
    char *refused = NULL;
    if (cubin) {
        kjit_status status = kj_cuda_load_cubin(context->cuda, cubin, size, loaded, &refused);
        if (status == KJIT_OK || !ptx) {
            *error = refused;
            return status;
        }
    }
    /* no cubin for the device, or one its driver refuses (older than the
     * toolkit that made it): the driver compiles the PTX, as the JIT does */
    kjit_status status = ptx ? kj_cuda_load_ptx(context->cuda, ptx, loaded, NULL, NULL, error)
                             : KJIT_ERROR_NOT_FOUND;
    if (!ptx)
        *error = kj_xstrdup("the library holds no cuda code this device runs for it");
    if (status != KJIT_OK && refused) {
        KjBuf both = {0};
        kj_buf_printf(&both, "%s (its cubin, tried first: %s)", *error ? *error : "", refused);
        free(*error);
        *error = both.data;
    }
    free(refused);
    return status;
}
