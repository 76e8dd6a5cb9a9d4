/*
 * cpu_jit.c: native code for the host through LLVM ORC (LLJIT): LLVM's
 * native target set up once, the host's target machine, and object files
 * linked and run.
 *
 * Code for the host is made in two steps: the IR of the roots and their
 * callees, lowered by codegen_llvm.c for the cpu target (target_cpu.c) and
 * optimised for the host CPU, becomes a relocatable object file (what the
 * cache keeps); an object file is linked into a KjCpuCode, which owns one
 * LLJIT.  Symbols the compiled code calls (libm,
 * glibc's libmvec vector math) are resolved from the process, and libmvec is
 * loaded here with RTLD_GLOBAL so that the search finds it.  The runtime's
 * barrier is called through the thread context, never by name.
 */
#include "codegen_llvm.h"

#include <dlfcn.h>
#include <llvm-c/Error.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/OrcEE.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct KjCpuCode {
    LLVMOrcLLJITRef jit;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool native_ready;
static char *host_description;
static char *host_features; /* the host's LLVM features, and KJIT_CPU_FEATURES */
static char llvm_version[32];

static void init_llvm(void)
{
    native_ready = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser();
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(llvm_version, sizeof llvm_version, "%u.%u.%u", major, minor, patch);
    /* The vector variants the code generator names live in libmvec; without
     * it loaded the loops still work only if nothing was vectorised, so load
     * it for the process (it ships with glibc). */
    dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL);

    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    /* KJIT_CPU_FEATURES adds LLVM features (as llc's -mattr) to the host's:
     * "+prefer-no-gather,+prefer-no-scatter" makes gathers and scatters one
     * load or store a lane, for comparisons where the hardware's are slow. */
    const char *extra = getenv("KJIT_CPU_FEATURES");
    size_t extra_len = extra ? strlen(extra) : 0;
    host_features = kj_xmalloc(strlen(features) + extra_len + 2);
    sprintf(host_features, "%s%s%s", features, extra_len ? "," : "", extra_len ? extra : "");
    LLVMDisposeMessage(features);
    features = host_features;
    /* Only the enabled features: the string is for people and for cache keys. */
    size_t cap = strlen(cpu) + strlen(features) + 4;
    host_description = kj_xmalloc(cap);
    size_t len = (size_t)snprintf(host_description, cap, "%s ", cpu);
    const char *p = features;
    bool first = true;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0 && p[0] == '+') {
            len += (size_t)snprintf(host_description + len, cap - len, "%s%.*s", first ? "" : ",", (int)n, p);
            first = false;
        }
        p += n + (comma ? 1 : 0);
    }
    LLVMDisposeMessage(cpu);
}

static bool ensure_llvm(char **error)
{
    pthread_once(&init_once, init_llvm);
    if (!native_ready && error)
        *error = kj_xstrdup("LLVM has no code generator for this host");
    return native_ready;
}

const char *kj_llvm_version(void)
{
    pthread_once(&init_once, init_llvm);
    return llvm_version;
}

const char *kj_host_cpu_description(void)
{
    pthread_once(&init_once, init_llvm);
    return host_description;
}

static char *take_error(LLVMErrorRef err)
{
    char *msg = LLVMGetErrorMessage(err);
    char *copy = kj_xstrdup(msg);
    LLVMDisposeErrorMessage(msg);
    return copy;
}

/* A target machine for the host: its CPU, its features, full optimisation. */
LLVMTargetMachineRef kj_cpu_host_machine(char **error)
{
    if (!ensure_llvm(error))
        return NULL;
    char *triple = LLVMGetDefaultTargetTriple();
    char *normal = LLVMNormalizeTargetTriple(triple);
    LLVMTargetRef target;
    char *message = NULL;
    LLVMTargetMachineRef tm = NULL;
    if (LLVMGetTargetFromTriple(normal, &target, &message)) {
        if (error)
            *error = kj_xstrdup(message ? message : "no LLVM target for the host");
    } else {
        char *cpu = LLVMGetHostCPUName();
        tm = LLVMCreateTargetMachine(target, normal, cpu, host_features, LLVMCodeGenLevelAggressive,
                                     LLVMRelocPIC, LLVMCodeModelSmall);
        LLVMDisposeMessage(cpu);
        if (!tm && error)
            *error = kj_xstrdup("LLVM could not create a target machine for the host");
    }
    LLVMDisposeMessage(message);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(normal);
    return tm;
}

/* The host's object file for `roots`: what the cache stores for the cpu targets. */
char *kj_cpu_compile_object(KjIrModule *module, KjIrFunction **roots, int root_count,
                            const KjCodegenOptions *options, size_t *size, char **error)
{
    KjCodegenOptions cpu_options = *options;
    cpu_options.target = KJ_CODEGEN_CPU;
    return kj_codegen_emit(module, roots, root_count, &cpu_options, KJ_EMIT_OBJ, size, error);
}

static void fail(LLVMErrorRef err, char **error)
{
    if (error)
        *error = take_error(err);
    else
        LLVMConsumeError(err);
}

/*
 * Code with line tables (KjCodegenOptions.line_info) is linked by RuntimeDyld
 * with LLVM's listeners: the GDB JIT interface (gdb then knows the code's
 * .kern lines) and perf's jitdump (perf record -k 1, then perf inject
 * --jit, annotates them; LLVM writes the dump only when built with perf
 * support).
 */
static LLVMOrcObjectLayerRef debuggable_object_layer(void *ctx, LLVMOrcExecutionSessionRef session,
                                                     const char *triple)
{
    LLVMOrcObjectLayerRef layer = LLVMOrcCreateRTDyldObjectLinkingLayerWithSectionMemoryManager(session);
    LLVMJITEventListenerRef gdb = LLVMCreateGDBRegistrationListener();
    if (gdb)
        LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(layer, gdb);
    LLVMJITEventListenerRef perf = LLVMCreatePerfJITEventListener();
    if (perf)
        LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(layer, perf);
    return layer;
}

KjCpuCode *kj_cpu_load_object(const void *object, size_t size, char **error)
{
    if (!ensure_llvm(error))
        return NULL;
    LLVMOrcLLJITRef jit;
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    if (memmem(object, size, ".debug_line", 11))
        LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(builder, debuggable_object_layer, NULL);
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, builder);
    if (err) {
        fail(err, error);
        return NULL;
    }
    LLVMOrcJITDylibRef dylib = LLVMOrcLLJITGetMainJITDylib(jit);
    LLVMOrcDefinitionGeneratorRef generator;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &generator, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (!err)
        LLVMOrcJITDylibAddGenerator(dylib, generator);
    if (!err) {
        /* The JIT takes the buffer; a copy, so the caller keeps its bytes. */
        LLVMMemoryBufferRef buffer =
            LLVMCreateMemoryBufferWithMemoryRangeCopy(object, size, "kjit-object");
        err = LLVMOrcLLJITAddObjectFile(jit, dylib, buffer);
    }
    if (err) {
        fail(err, error);
        LLVMErrorRef dispose = LLVMOrcDisposeLLJIT(jit);
        if (dispose)
            LLVMConsumeError(dispose);
        return NULL;
    }
    KjCpuCode *code = kj_xcalloc(1, sizeof *code);
    code->jit = jit;
    return code;
}

KjCpuCode *kj_cpu_compile(KjIrModule *module, KjIrFunction **roots, int root_count,
                          const KjCodegenOptions *options, char **error)
{
    size_t size = 0;
    char *object = kj_cpu_compile_object(module, roots, root_count, options, &size, error);
    if (!object)
        return NULL;
    KjCpuCode *code = kj_cpu_load_object(object, size, error);
    free(object);
    if (!code)
        return NULL;
    /* Link every entry point now, so that an unresolved symbol is a compile
     * error here rather than a NULL lookup later. */
    for (int i = 0; i < root_count; i++) {
        static const char *const suffixes[] = {"__entry", "__thread", "__range"};
        const char *suffix = roots[i]->kind == KJ_IR_FN_KERNEL       ? suffixes[1]
                             : roots[i]->kind == KJ_IR_FN_VEC_KERNEL ? suffixes[2]
                                                                     : suffixes[0];
        char name[512];
        snprintf(name, sizeof name, "%s%s", roots[i]->symbol, suffix);
        LLVMOrcExecutorAddress addr = 0;
        LLVMErrorRef err = LLVMOrcLLJITLookup(code->jit, &addr, name);
        if (err) {
            fail(err, error);
            kj_cpu_code_free(code);
            return NULL;
        }
    }
    return code;
}

void *kj_cpu_lookup(KjCpuCode *code, const char *symbol)
{
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef err = LLVMOrcLLJITLookup(code->jit, &addr, symbol);
    if (err) {
        LLVMConsumeError(err);
        return NULL;
    }
    return (void *)(uintptr_t)addr;
}

void kj_cpu_code_free(KjCpuCode *code)
{
    if (!code)
        return;
    LLVMErrorRef err = LLVMOrcDisposeLLJIT(code->jit);
    if (err)
        LLVMConsumeError(err);
    free(code);
}
