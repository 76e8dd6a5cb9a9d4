/*
 * cpu_object.c: host code as a relocatable object file, and object files
 * loaded into the process through LLVM ORC: the form in which the cache keeps
 * cpu code, so that a second run links a few kilobytes instead of running the
 * optimiser and the code generator again.
 *
 * Each KjCpuLoaded owns one LLJIT with one object in it.  Symbols the code
 * calls are resolved as cpu_jit.c resolves them: libm and glibc's libmvec from
 * the process (libmvec opened with RTLD_GLOBAL so the search finds it), and
 * kj_cpu_syncthreads by address, for hosts that link libkjit.a without
 * exporting it.
 */
#include "codegen_llvm.h"

#include <dlfcn.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct KjCpuLoaded {
    LLVMOrcLLJITRef jit;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool native_ready;
static char llvm_version[32];

static void init_native(void)
{
    native_ready = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
    dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL);
}

const char *kj_llvm_version(void)
{
    if (!llvm_version[0]) {
        unsigned major, minor, patch;
        LLVMGetVersion(&major, &minor, &patch);
        snprintf(llvm_version, sizeof llvm_version, "%u.%u.%u", major, minor, patch);
    }
    return llvm_version;
}

static char *take_error(LLVMErrorRef err)
{
    char *message = LLVMGetErrorMessage(err);
    char *copy = kj_xstrdup(message);
    LLVMDisposeErrorMessage(message);
    return copy;
}

static void fail(LLVMErrorRef err, char **error)
{
    if (error)
        *error = take_error(err);
    else
        LLVMConsumeError(err);
}

char *kj_cpu_compile_object(KjIrModule *module, KjIrFunction **roots, int root_count,
                            const KjCodegenOptions *options, size_t *size, char **error)
{
    KjCodegenOptions cpu_options = *options;
    cpu_options.target = KJ_CODEGEN_CPU;
    return kj_codegen_emit(module, roots, root_count, &cpu_options, KJ_EMIT_OBJ, size, error);
}

KjCpuLoaded *kj_cpu_load_object(const void *object, size_t size, char **error)
{
    pthread_once(&init_once, init_native);
    if (!native_ready) {
        if (error)
            *error = kj_xstrdup("LLVM has no code generator for this host");
        return NULL;
    }
    LLVMOrcLLJITRef jit;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, LLVMOrcCreateLLJITBuilder());
    if (err) {
        fail(err, error);
        return NULL;
    }
    LLVMOrcJITDylibRef dylib = LLVMOrcLLJITGetMainJITDylib(jit);
    LLVMOrcDefinitionGeneratorRef generator;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &generator, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (!err) {
        LLVMOrcJITDylibAddGenerator(dylib, generator);
        LLVMOrcCSymbolMapPair pair = {
            LLVMOrcLLJITMangleAndIntern(jit, "kj_cpu_syncthreads"),
            {(LLVMOrcExecutorAddress)(uintptr_t)&kj_cpu_syncthreads,
             {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}}};
        err = LLVMOrcJITDylibDefine(dylib, LLVMOrcAbsoluteSymbols(&pair, 1));
    }
    if (!err) {
        /* The JIT takes the buffer; a copy, so the caller keeps its bytes. */
        LLVMMemoryBufferRef buffer =
            LLVMCreateMemoryBufferWithMemoryRangeCopy(object, size, "kjit-cached-object");
        err = LLVMOrcLLJITAddObjectFile(jit, dylib, buffer);
    }
    if (err) {
        fail(err, error);
        LLVMErrorRef dispose = LLVMOrcDisposeLLJIT(jit);
        if (dispose)
            LLVMConsumeError(dispose);
        return NULL;
    }
    KjCpuLoaded *code = kj_xcalloc(1, sizeof *code);
    code->jit = jit;
    return code;
}

void *kj_cpu_loaded_lookup(KjCpuLoaded *code, const char *symbol)
{
    LLVMOrcExecutorAddress address = 0;
    LLVMErrorRef err = LLVMOrcLLJITLookup(code->jit, &address, symbol);
    if (err) {
        LLVMConsumeError(err);
        return NULL;
    }
    return (void *)(uintptr_t)address;
}

void kj_cpu_loaded_free(KjCpuLoaded *code)
{
    if (!code)
        return;
    LLVMErrorRef err = LLVMOrcDisposeLLJIT(code->jit);
    if (err)
        LLVMConsumeError(err);
    free(code);
}
