/*
 * target.c: the one place that picks a target (target_cpu.c, target_cuda.c)
 * for a KjCodegenOptions, and kj_codegen_emit, which hands a stage to it.
 * Everything else in the back end reaches the target through the KjTarget
 * it is given.  The target policy the runtime asks (kj_codegen_splits_barriers,
 * kj_codegen_emit_refusal) is answered here from the targets' hooks, and the
 * defaults of KjCodegenOptions.cpu_simd and line_info.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <stdlib.h>
#include <string.h>

const KjTarget *kj_target_for(KjCodegenTarget target)
{
    switch (target) {
    case KJ_CODEGEN_CPU: return &kj_target_cpu;
    case KJ_CODEGEN_CUDA: return &kj_target_cuda;
    }
    kj_unreachable();
}

char *kj_codegen_emit(KjIrModule *module, KjIrFunction **roots, int root_count,
                      const KjCodegenOptions *options, KjEmitKind kind, size_t *size, char **error)
{
    return kj_target_for(options->target)->emit(module, roots, root_count, options, kind, size, error);
}

bool kj_codegen_splits_barriers(const KjCodegenOptions *options)
{
    return kj_target_splits_barriers(kj_target_for(options->target), options);
}

char *kj_codegen_emit_refusal(KjCodegenTarget target, KjEmitKind kind)
{
    static const char *const kind_names[] = {
        [KJ_EMIT_LLVM] = "llvm", [KJ_EMIT_ASM] = "asm", [KJ_EMIT_OBJ] = "obj", [KJ_EMIT_PTX] = "ptx"};
    const KjTarget *asked = kj_target_for(target);
    if (asked->emit_kinds & 1u << kind)
        return NULL;
    KjBuf why = {0};
    kj_buf_printf(&why, "--target %s emits %s, not '%s'", asked->name, asked->emit_words,
                  kind_names[kind]);
    const KjCodegenTarget all[] = {KJ_CODEGEN_CPU, KJ_CODEGEN_CUDA};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (kj_target_for(all[i])->emit_kinds & 1u << kind) {
            kj_buf_printf(&why, " (--target %s does)", kj_target_for(all[i])->name);
            break;
        }
    return why.data;
}

bool kj_codegen_cpu_simd_default(void)
{
    const char *env = getenv("KJIT_CPU_SIMD");
    return !(env && strcmp(env, "0") == 0);
}

bool kj_codegen_line_info_default(void)
{
    const char *env = getenv("KJIT_LINEINFO");
    return env && *env && strcmp(env, "0") != 0;
}
