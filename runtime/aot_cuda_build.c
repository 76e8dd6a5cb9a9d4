/*
 * aot_cuda_build.c: the cuda code of a library that `kjit build --emit=lib`
 * writes (aot_build.c collects the roots, as a cuda context asks for them,
 * and writes the table; docs/aot.md).  libkjit only: it compiles.
 *
 * Each root's code is made as runtime_cuda.c's generate makes it on a
 * device of each asked arch with the toolkit's ptxas: LLVM's PTX for that
 * arch, whole-program, assembled by ptxas -O3 into a cubin; so a device of
 * that arch runs the JIT's own code.  The PTX of the lowest arch is kept
 * too, relocatable (libdevice inlined, as the JIT makes it for the driver's
 * linker), for a device newer than every cubin.  An arch that this ptxas
 * cannot target (CUDA 13's has no sm_70) is left out and said in the
 * notes; with no ptxas at all, the library holds the PTX alone, said too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kjit_runtime.h"

static int arch_number(const char *name)
{
    int major = 0, minor = 0;
    return kj_aot_cuda_capability(name, &major, &minor) ? major * 10 + minor : -1;
}

kjit_status kj_aot_cuda_archs(const char *text, KjAotCudaArchs *archs, char **error)
{
    memset(archs, 0, sizeof *archs);
    for (const char *p = text; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n < 31 ? n : 31), p);
        int major = 0, minor = 0;
        if (!kj_aot_cuda_capability(name, &major, &minor) || strlen(name) >= 16) {
            KjBuf m = {0};
            kj_buf_printf(&m, "unknown CUDA architecture '%s' in --arch (sm_75, sm_80, sm_90 ...)",
                          name);
            *error = m.data;
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        bool seen = false;
        for (int i = 0; i < archs->count; i++)
            seen |= strcmp(archs->names[i], name) == 0;
        if (!seen && archs->count == KJ_AOT_CUDA_ARCHS) {
            *error = kj_xstrdup("--arch names more than 8 architectures");
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        if (!seen)
            memcpy(archs->names[archs->count++], name, strlen(name) + 1); /* under 16, above */
        p += n + (comma ? 1 : 0);
    }
    if (archs->count == 0) {
        *error = kj_xstrdup("--arch names no architecture");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    for (int i = 1; i < archs->count; i++) /* lowest first */
        for (int j = i; j > 0 && arch_number(archs->names[j]) < arch_number(archs->names[j - 1]);
             j--) {
            char t[16];
            memcpy(t, archs->names[j], sizeof t);
            memcpy(archs->names[j], archs->names[j - 1], sizeof t);
            memcpy(archs->names[j - 1], t, sizeof t);
        }
    return KJIT_OK;
}

static void note(char **notes, const char *text)
{
    KjBuf b = {0};
    kj_buf_printf(&b, "%s%s%s", *notes ? *notes : "", *notes ? "\n" : "", text);
    free(*notes);
    *notes = b.data;
}

/* LLVM's PTX of root for arch (whole-program for ptxas, else relocatable). */
static char *ptx_of(KjIrModule *ir, const kjit_options *options, KjCompiled *root,
                    const char *arch, bool whole_program, char **error)
{
    KjCodegenOptions codegen = kj_api_codegen_options(&kj_runtime_cuda, options, root);
    codegen.cuda_arch = arch;
    codegen.cuda_whole_program = whole_program;
    return kj_jit->ptx_generate(ir, &root->root, 1, &codegen, error);
}

kjit_status kj_aot_cuda_compile(KjIrModule *ir, const kjit_options *options, KjCompiled *root,
                                KjAotCudaArchs *archs, bool first, KjAotCudaCode *code,
                                char **notes, char **error)
{
    memset(code, 0, sizeof *code);
    const char *ptxas = kj_ptxas_path();
    if (first && !ptxas)
        note(notes, "no ptxas (the CUDA toolkit's; KJIT_PTXAS, CUDA_HOME, /usr/local/cuda, "
                    "PATH): the library holds PTX only, which the driver compiles at load time");
    char *failure = NULL;
    code->ptx = ptx_of(ir, options, root, archs->names[0], false, &failure);
    for (int a = 0; code->ptx && ptxas && a < archs->count; a++) {
        if (!first && !archs->cubin[a])
            continue;
        char *ptx = ptx_of(ir, options, root, archs->names[a], true, &failure);
        if (!ptx)
            break;
        char *why = NULL;
        kjit_status status = kj_ptxas_compile(ptx, archs->names[a], &code->cubin[a],
                                              &code->cubin_size[a], &why);
        free(ptx);
        if (status == KJIT_OK) {
            if (first) /* (later roots, compiled on several threads, only read it) */
                archs->cubin[a] = true;
            continue;
        }
        if (first && why && strstr(why, "is not defined for option 'gpu-name'")) {
            /* this ptxas does not know the arch: no cubin for it, said */
            KjBuf m = {0};
            kj_buf_printf(&m, "%s cannot target %s: the library holds no cubin for it (a "
                          "device of that arch runs the PTX, for %s, which its driver "
                          "compiles at load time)", ptxas, archs->names[a], archs->names[0]);
            note(notes, m.data);
            kj_buf_free(&m);
            free(why);
            continue;
        }
        KjBuf m = {0};
        kj_buf_printf(&m, "ptxas for %s: %s", archs->names[a], why ? why : "failed");
        free(why);
        failure = m.data;
        break;
    }
    if (failure || !code->ptx) {
        KjBuf m = {0};
        kj_buf_printf(&m, "cuda code generation for %s failed: %s", root->root->name,
                      failure ? failure : "no PTX");
        free(failure);
        kj_aot_cuda_code_free(code);
        *error = m.data;
        return KJIT_ERROR_BACKEND;
    }
    return KJIT_OK;
}

void kj_aot_cuda_code_free(KjAotCudaCode *code)
{
    free(code->ptx);
    for (int a = 0; a < KJ_AOT_CUDA_ARCHS; a++)
        free(code->cubin[a]);
    memset(code, 0, sizeof *code);
}

/* ------------------------------------------------------ --block shapes */

/* ptx from `from` up to `to`, each %ntid.x, .y, .z there the block's extent */
static void copy_fixing_ntid(KjBuf *out, const char *from, const char *to, const uint32_t dims[3])
{
    for (const char *p = from; p < to;) {
        const char *at = strstr(p, "%ntid.");
        if (!at || at >= to || at + 7 > to) {
            kj_buf_printf(out, "%.*s", (int)(to - p), p);
            return;
        }
        kj_buf_printf(out, "%.*s", (int)(at - p), p);
        if (at[6] >= 'x' && at[6] <= 'z') {
            kj_buf_printf(out, "%u", dims[at[6] - 'x']);
            p = at + 7;
        } else {
            kj_buf_printf(out, "%%");
            p = at + 1;
        }
    }
}

char *kj_ptx_for_block(const char *ptx, const uint32_t dims[3])
{
    /* ".entry NAME(" ... "\n)": the declaration goes after the parameters
     * (one kernel a root; its device functions are .func) */
    const char *entry = strstr(ptx, ".entry ");
    const char *close = entry ? strstr(entry, "\n)") : NULL;
    if (!close || strstr(ptx, ".reqntid") || strstr(ptx, ".maxntid") ||
        strstr(entry + 1, ".entry "))
        return NULL;
    close += 2;
    KjBuf out = {0};
    copy_fixing_ntid(&out, ptx, close, dims);
    kj_buf_printf(&out, "\n.reqntid %u, %u, %u", dims[0], dims[1], dims[2]);
    copy_fixing_ntid(&out, close, close + strlen(close), dims);
    return out.data;
}

kjit_status kj_aot_cuda_compile_shape(KjIrModule *ir, const kjit_options *options,
                                      KjCompiled *root, const uint32_t dims[3],
                                      const KjAotCudaArchs *archs, KjAotCudaCode *code,
                                      char **error)
{
    memset(code, 0, sizeof *code);
    char *failure = NULL;
    char *general = ptx_of(ir, options, root, archs->names[0], false, &failure);
    code->ptx = general ? kj_ptx_for_block(general, dims) : NULL;
    free(general);
    for (int a = 0; code->ptx && a < archs->count && !failure; a++) {
        if (!archs->cubin[a])
            continue;
        char *whole = ptx_of(ir, options, root, archs->names[a], true, &failure);
        char *ptx = whole ? kj_ptx_for_block(whole, dims) : NULL;
        free(whole);
        if (!ptx) {
            if (!failure)
                failure = kj_xstrdup("its PTX declares no kernel entry to specialise");
            break;
        }
        char *why = NULL;
        if (kj_ptxas_compile(ptx, archs->names[a], &code->cubin[a], &code->cubin_size[a],
                             &why) != KJIT_OK) {
            KjBuf m = {0};
            kj_buf_printf(&m, "ptxas for %s: %s", archs->names[a], why ? why : "failed");
            failure = m.data;
        }
        free(why);
        free(ptx);
    }
    if (failure || !code->ptx) {
        KjBuf m = {0};
        kj_buf_printf(&m, "cuda code generation for %s for blocks of %u x %u x %u failed: %s",
                      root->root->name, dims[0], dims[1], dims[2],
                      failure ? failure : "its PTX declares no kernel entry to specialise");
        free(failure);
        kj_aot_cuda_code_free(code);
        *error = m.data;
        return KJIT_ERROR_BACKEND;
    }
    return KJIT_OK;
}
