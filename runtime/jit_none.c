/*
 * jit_none.c: libkjit-rt's KjJit (kjit_runtime.h): none.  Linked instead of
 * jit.c, so that libkjit-rt holds no compiler object and no LLVM; a module
 * comes only from a library (kjit_module_load_library), and every entry
 * point that would compile says so (KJ_NO_JIT_MESSAGE).
 */
#include "kjit_runtime.h"

const KjJit *const kj_jit = NULL;
