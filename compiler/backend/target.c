/*
 * target.c: the one place that picks a target (target_cpu.c, target_cuda.c)
 * for a KjCodegenOptions, and kj_codegen_emit, which hands a stage to it.
 * Everything else in the back end reaches the target through the KjTarget
 * it is given.  And the default of KjCodegenOptions.line_info.
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
