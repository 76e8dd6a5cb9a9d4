/*
 * cpu_jit.c: native code for the host through LLVM ORC (LLJIT): object
 * files compiled (through the cpu target) and linked and run.  The host
 * itself (LLVM's native target, its CPU and features, its target machine)
 * is cpu_host.c's, below the cpu target.
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
#include <sys/mman.h>
#include <unistd.h>

struct KjCpuCode {
    LLVMOrcLLJITRef jit;
    size_t object_size; /* of the object being linked: sizes ObjectMemory */
};

static char *take_error(LLVMErrorRef err)
{
    char *msg = LLVMGetErrorMessage(err);
    char *copy = kj_xstrdup(msg);
    LLVMDisposeErrorMessage(msg);
    return copy;
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
 * Memory for code that RuntimeDyld links (code with line tables, below).
 *
 * Code of the small code model reaches its constant pools, its GOT entries
 * and the trampolines of calls out through 32-bit PC-relative offsets, so every
 * section of one object must lie within 2 GiB of the others.  LLVM's
 * SectionMemoryManager maps each section apart wherever mmap puts it, and
 * RuntimeDyld truncates an offset that does not fit without a word (the check
 * is an assertion, off in release builds): the code then reads a constant or
 * jumps at a wrong address.  An address space with large gaps (a process with
 * the CUDA driver loaded) can give such layouts.  So the sections of
 * one object go into one reservation of address space, sized from the object
 * file: code, read-only data and writable data each in a part of their own,
 * their pages writable while RuntimeDyld fills them and given their final
 * permissions when it finalizes.  (The default linker, JITLink, allocates an
 * object in one block already.)
 */
enum { PART_CODE, PART_READ_ONLY, PART_WRITABLE, PARTS };
#define MAX_PART_BYTES ((size_t)512 << 20)

typedef struct ObjectMemory {
    uint8_t *base; /* the reservation: PARTS parts of part_bytes, PROT_NONE until used */
    size_t part_bytes;
    size_t used[PARTS];     /* bytes handed out from the start of each part */
    size_t opened[PARTS];   /* bytes of each part (whole pages) no longer PROT_NONE */
} ObjectMemory;

static size_t page_bytes(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Every section of an object is at most its bytes in the file, call trampolines and GOT
 * entries take fewer bytes than the relocations that ask for them, and the
 * only zero-filled data is a pointer or two (the print hook); the MiB is for
 * alignment.  The parts stay well within 2 GiB of each other: larger objects
 * are refused before they get here (kj_cpu_load_object). */
static void *object_memory_create(void *context)
{
    const KjCpuCode *code = context;
    ObjectMemory *m = kj_xcalloc(1, sizeof *m);
    m->part_bytes = round_up(2 * code->object_size + ((size_t)1 << 20), page_bytes());
    if (m->part_bytes <= MAX_PART_BYTES) {
        void *base = mmap(NULL, PARTS * m->part_bytes, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        m->base = base == MAP_FAILED ? NULL : base;
    }
    /* Without a base (no address space left) every allocation fails, and
     * RuntimeDyld stops the process: "Unable to allocate section memory!". */
    return m;
}

static uint8_t *object_memory_take(ObjectMemory *m, int part, uintptr_t size, unsigned align)
{
    if (!m->base)
        return NULL;
    uint8_t *start = m->base + (size_t)part * m->part_bytes;
    uintptr_t at = (uintptr_t)start + m->used[part];
    if (align > 1)
        at = (at + align - 1) / align * align;
    size_t offset = at - (uintptr_t)start;
    if (offset > m->part_bytes || size > m->part_bytes - offset)
        return NULL;
    size_t end = round_up(offset + size, page_bytes());
    if (end > m->opened[part]) {
        if (mprotect(start + m->opened[part], end - m->opened[part], PROT_READ | PROT_WRITE))
            return NULL;
        m->opened[part] = end;
    }
    m->used[part] = offset + size;
    return start + offset;
}

static uint8_t *object_memory_code(void *opaque, uintptr_t size, unsigned align, unsigned id,
                                   const char *name)
{
    return object_memory_take(opaque, PART_CODE, size, align);
}

static uint8_t *object_memory_data(void *opaque, uintptr_t size, unsigned align, unsigned id,
                                   const char *name, LLVMBool read_only)
{
    return object_memory_take(opaque, read_only ? PART_READ_ONLY : PART_WRITABLE, size, align);
}

/* True on failure, with a message that LLVM frees. */
static LLVMBool object_memory_finalize(void *opaque, char **error)
{
    ObjectMemory *m = opaque;
    static const int protection[PARTS] = {PROT_READ | PROT_EXEC, PROT_READ, PROT_READ | PROT_WRITE};
    for (int part = 0; part < PARTS; part++) {
        uint8_t *start = m->base + (size_t)part * m->part_bytes;
        if (m->opened[part] && mprotect(start, m->opened[part], protection[part])) {
            *error = kj_xstrdup("could not set the permissions of JIT-linked code");
            return 1;
        }
    }
    if (m->used[PART_CODE])
        __builtin___clear_cache((char *)m->base, (char *)m->base + m->used[PART_CODE]);
    return 0;
}

static void object_memory_destroy(void *opaque)
{
    ObjectMemory *m = opaque;
    if (m->base)
        munmap(m->base, PARTS * m->part_bytes);
    free(m);
}

static void object_memory_terminating(void *context)
{
}

/*
 * Code with line tables (KjCodegenOptions.line_info) is linked by RuntimeDyld
 * with LLVM's listeners: the GDB JIT interface (gdb then knows the code's
 * .kern lines) and perf's jitdump (perf record -k 1, then perf inject
 * --jit, annotates them; LLVM writes the dump only when built with perf
 * support).  Its memory is ObjectMemory's; ctx is the KjCpuCode being loaded.
 */
static LLVMOrcObjectLayerRef debuggable_object_layer(void *ctx, LLVMOrcExecutionSessionRef session,
                                                     const char *triple)
{
    LLVMOrcObjectLayerRef layer =
        LLVMOrcCreateRTDyldObjectLinkingLayerWithMCJITMemoryManagerLikeCallbacks(
            session, ctx, object_memory_create, object_memory_terminating, object_memory_code,
            object_memory_data, object_memory_finalize, object_memory_destroy);
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
    if (!kj_cpu_host_ready(error))
        return NULL;
    bool line_tables = memmem(object, size, ".debug_line", 11) != NULL;
    if (line_tables && 2 * size + ((size_t)1 << 20) > MAX_PART_BYTES) {
        if (error)
            *error = kj_xstrdup("the object with line tables is too large to link (over 255 MiB)");
        return NULL;
    }
    KjCpuCode *code = kj_xcalloc(1, sizeof *code);
    code->object_size = size;
    LLVMOrcLLJITRef jit;
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    if (line_tables)
        LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(builder, debuggable_object_layer, code);
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, builder);
    if (err) {
        fail(err, error);
        free(code);
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
        free(code);
        return NULL;
    }
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
