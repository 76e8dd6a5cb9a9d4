/*
 * aot_cuda.c: a library's cuda code on a cuda context (docs/aot.md,
 * "cuda"), in libkjit and libkjit-rt alike.
 *
 * At load time (aot.c) the library's code for the device is chosen once:
 * the cubin of the same major architecture with the highest minor not
 * above the device's (a cubin runs on such a device), else the PTX when its
 * arch is not above the device's (the driver compiles it: a device newer
 * than every cubin), else the library is refused, naming the device and
 * what the library holds (aot.c reads the table and loads a root's chosen
 * code at its first use, as the JIT loads a root's, into a module of its
 * own).
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

bool kj_aot_cuda_usable(bool has_cuda, const KjAotCudaArchs *archs, int major, int minor,
                        char *chosen, size_t chosen_size, char *why, size_t why_size)
{
    if (!has_cuda)
        return snprintf(why, why_size, "it holds no cuda code (it was built with --cuda=off); "
                        "build it without --cuda=off to run it on the cuda target"), false;
    int choice = kj_aot_cuda_choose(major, minor, archs, archs->names[0]);
    if (choice >= 0)
        return snprintf(chosen, chosen_size, "cubin %s", archs->names[choice]), true;
    if (choice == KJ_AOT_CUDA_USE_PTX)
        return snprintf(chosen, chosen_size, "ptx %s", archs->names[0]), true;
    KjBuf held = {0};
    int cubins = 0;
    for (int a = 0; a < archs->count; a++)
        if (archs->cubin[a])
            cubins++;
    for (int a = 0, n = 0; a < archs->count; a++)
        if (archs->cubin[a])
            kj_buf_printf(&held, "%s%s", n++ ? (n == cubins ? " and " : ", ") : "",
                          archs->names[a]);
    const char *fake = getenv("KJIT_AOT_CUDA_DEVICE");
    snprintf(why, why_size, "this device (compute capability %d.%d, sm_%d%d%s) runs none of its "
             "cuda code: it holds %s%s and PTX for %s (build it with --arch=sm_%d%d)", major,
             minor, major, minor, fake && *fake ? ", as KJIT_AOT_CUDA_DEVICE says" : "",
             cubins ? "cubins for " : "no cubin", held.data ? held.data : "", archs->names[0],
             major, minor);
    kj_buf_free(&held);
    return false;
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

void kj_aot_block_key(const uint32_t dims[3], char *key, size_t size)
{
    snprintf(key, size, "block %u,%u,%u", dims[0], dims[1], dims[2]);
}
