/*
 * codegen_llvm.h: the seam between the shared IR -> LLVM lowering
 * (codegen_llvm.c) and the files that drive LLVM for one target (cpu_jit.c for
 * ORC on the host, ptx.c for NVPTX).  Only these three files include LLVM.
 */
#ifndef KJIT_CODEGEN_LLVM_H
#define KJIT_CODEGEN_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "../runtime/kjit_runtime.h"

/* Builds an LLVM module for `roots` and their callees, with the entry points
 * that kjit_runtime.h lists for the target.  The module gets the target's
 * triple and data layout from `machine`.  NULL and *error on failure. */
LLVMModuleRef kj_codegen_module(LLVMContextRef context, LLVMTargetMachineRef machine,
                                KjIrModule *module, KjIrFunction **roots, int root_count,
                                const KjCodegenOptions *options, char **error);

/* Runs the new pass manager's pipeline (default<O3> at opt_level 3) on `mod`. */
bool kj_codegen_optimize(LLVMModuleRef mod, LLVMTargetMachineRef machine, int opt_level,
                         char **error);

#endif
