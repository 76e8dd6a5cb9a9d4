/*
 * jit.c: the compiler behind the runtime's KjJit table (kjit_runtime.h), in
 * libkjit only.  libkjit-rt links jit_none.c instead and has no compiler
 * object at all (make check proves it with nm and ldd: tests/rt/rt_link.sh).
 */
#include "kjit_runtime.h"

static const KjJit jit = {
    .source_read = kj_source_read,
    .source_from_string = kj_source_from_string,
    .compile_source = kj_compile_source,
    .default_stdlib_dir = kj_default_stdlib_dir,
    .pipeline_run = kj_pipeline_run,
    .pipeline_verify_default = kj_pipeline_verify_default,
    .ir_params_written = kj_ir_params_written,
    .split_writes_shared = kj_split_writes_shared,
    .codegen_splits_barriers = kj_codegen_splits_barriers,
    .codegen_cpu_simd_default = kj_codegen_cpu_simd_default,
    .codegen_line_info_default = kj_codegen_line_info_default,
    .cpu_compile_object = kj_cpu_compile_object,
    .cpu_load_object = kj_cpu_load_object,
    .cpu_lookup = kj_cpu_lookup,
    .cpu_code_free = kj_cpu_code_free,
    .host_cpu_description = kj_host_cpu_description,
    .llvm_version = kj_llvm_version,
    .ptx_generate = kj_ptx_generate,
    .find_libdevice = kj_find_libdevice,
};

const KjJit *const kj_jit = &jit;
