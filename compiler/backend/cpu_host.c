/*
 * cpu_host.c: the host as LLVM sees it: the native target set up once (and
 * glibc's libmvec loaded for the process, which the vector math calls
 * resolve against), the host CPU's name and features (with
 * KJIT_CPU_FEATURES), and a target machine for them.  The cpu target
 * (target_cpu.c) and the JIT (cpu_jit.c) build on it; it calls neither.
 */
#include "codegen_llvm.h"

#include <dlfcn.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
    /* The host's enabled features, then KJIT_CPU_FEATURES as given: the string
     * is for people and for cache keys, and "-avx" must change the key (the
     * host's own list still says +avx; a process restricted to SSE that found
     * the AVX-512 object of another process in the cache would run it). */
    size_t cap = strlen(cpu) + strlen(features) + extra_len + 32;
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
    if (extra_len)
        snprintf(host_description + len, cap - len, " with KJIT_CPU_FEATURES=%s", extra);
    LLVMDisposeMessage(cpu);
}

/* LLVM's native target, set up once; false (and *error) when this host has none. */
bool kj_cpu_host_ready(char **error)
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

static LLVMTargetMachineRef machine_for(const char *cpu, const char *features, char **error);

LLVMTargetMachineRef kj_cpu_machine(const char *cpu, const char *features, char **error)
{
    return cpu ? machine_for(cpu, features ? features : "", error) : kj_cpu_host_machine(error);
}

/* A target machine for the host: its CPU, its features, full optimisation. */
LLVMTargetMachineRef kj_cpu_host_machine(char **error)
{
    char *cpu = LLVMGetHostCPUName();
    pthread_once(&init_once, init_llvm);
    LLVMTargetMachineRef tm = machine_for(cpu, host_features, error);
    LLVMDisposeMessage(cpu);
    return tm;
}

static LLVMTargetMachineRef machine_for(const char *cpu, const char *features, char **error)
{
    if (!kj_cpu_host_ready(error))
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
        tm = LLVMCreateTargetMachine(target, normal, cpu, features, LLVMCodeGenLevelAggressive,
                                     LLVMRelocPIC, LLVMCodeModelSmall);
        if (!tm && error)
            *error = kj_xstrdup("LLVM could not create a target machine for the host");
    }
    LLVMDisposeMessage(message);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(normal);
    return tm;
}
