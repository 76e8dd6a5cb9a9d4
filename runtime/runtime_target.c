/*
 * runtime_target.c: the one place that picks a runtime target (runtime_cpu.c,
 * runtime_cuda.c) for a kjit_target, as compiler/backend/target.c picks the
 * back end's.  A context takes its target from here once
 * (kjit_context_create), and kjit_stage_file the target whose code a stage
 * shows; everything else asks the KjRuntimeTarget it is given.
 */
#include "kjit_runtime.h"

const KjRuntimeTarget *kj_runtime_target_of(kjit_target target)
{
    switch (target) {
    case KJIT_TARGET_AUTO: /* the first choice; kjit_context_create falls back to cpu */
    case KJIT_TARGET_CUDA: return &kj_runtime_cuda;
    case KJIT_TARGET_PARALLEL: return &kj_runtime_parallel;
    case KJIT_TARGET_CPU: return &kj_runtime_cpu;
    }
    return &kj_runtime_cpu; /* anything else runs as cpu */
}

kjit_target kj_runtime_target_auto(bool check_races)
{
    return check_races ? KJIT_TARGET_CPU : KJIT_TARGET_CUDA;
}
