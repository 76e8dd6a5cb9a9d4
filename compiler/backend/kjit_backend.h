/*
 * kjit_backend.h: the back end's interface: LLVM lowering and emission for
 * each target (codegen_llvm.c, codegen_expr.c, target.c, target_cpu.c,
 * target_cuda.c, cpu_jit.c, ptx.c, ptx_branches.c, libdevice_split.c), and
 * the ABI that compiled code shares with the runtime (array descriptors,
 * thread context, entry points and the symbols they are named by).  The
 * targets are structs of hooks in codegen_llvm.h (KjTarget), chosen by
 * KjCodegenOptions.target.
 *
 * It includes only the compiler's header: the runtime builds on this one, never
 * the other way round.  Nothing of LLVM shows here (codegen_llvm.h is the
 * back end's private header).
 */
#ifndef KJIT_BACKEND_H
#define KJIT_BACKEND_H

#include "../kjit_compiler.h"

/* ================================================ the ABI compiled code uses */

/*
 * An array as compiled code sees it, on every target: the data pointer, then
 * the shape and the strides in ELEMENTS, always KJ_MAX_DIMS of each (only the
 * first ndim mean anything).  On cuda a kernel takes it by value (the kernel
 * parameter is a copy of this struct); on cpu, entry points take a pointer.
 */
typedef struct KjArrayDesc {
    void *data;
    int64_t shape[KJ_MAX_DIMS];
    int64_t strides[KJ_MAX_DIMS];
} KjArrayDesc;

/*
 * What a kernel running on the CPU reads for its special registers, and the
 * runtime's services it calls back: syncthreads() is a call through
 * ctx->syncthreads, so compiled code names no runtime symbol (the runtime
 * passes the address; the back end never links against it).
 */
typedef struct KjThreadCtx KjThreadCtx;
typedef void (*KjSyncthreadsFn)(KjThreadCtx *ctx);
/* A collective (a KJ_EXEC_OPS id that kj_exec_is_barrier names): the lane's
 * operand (a shuffled value's bits, zero-extended; a predicate as 0 or 1), the
 * shuffle's lane argument and the lane mask in; the result's bits out. */
typedef uint64_t (*KjCollectiveFn)(KjThreadCtx *ctx, int32_t op, uint64_t value, int32_t arg,
                                   uint32_t mask);
struct KjThreadCtx {
    int32_t thread_idx[3];
    int32_t block_idx[3];
    int32_t block_dim[3];
    int32_t grid_dim[3];
    char *shared;                /* this block's shared memory (kernel->shared_bytes) */
    void *barrier;               /* the runtime's state for syncthreads */
    KjSyncthreadsFn syncthreads; /* the runtime's barrier (cpu.c) */
    KjCollectiveFn collective;   /* warp, block and grid collectives (cpu.c) */
    char *dynamic_shared;        /* this block's dynamic shared memory (16-byte aligned) */
    int64_t dynamic_shared_bytes; /* its size: the launch's */
    /* KJIT_VERIFY: where code whose block's static shared memory is its own
     * stack array (target_cpu.c's impl_owns_shared) sets 1 when it finds the
     * guard bytes after it written; NULL otherwise */
    _Atomic int *shared_overrun;
};

/* KJIT_VERIFY's fence after a block's shared memory, the runtime's
 * (runtime/cpu.c) and the split code's own (target_cpu.c) alike: so many
 * bytes, each holding this value until something writes past the memory. */
enum { KJ_SHARED_GUARD_BYTES = 64, KJ_SHARED_GUARD_BYTE = 0xa5 };

/*
 * Entry points the code generator emits for each root function, by symbol:
 *
 *   PLAIN / SCALAR  "<symbol>__entry":  void (void **args, void *result)
 *       args[i] points to scalar i's value or to a KjArrayDesc; the result is
 *       stored at `result` (complex: {re, im}).
 *   KERNEL (cpu)    "<symbol>__thread": void (void **args, KjThreadCtx *ctx)
 *       runs one thread; syncthreads() calls ctx->syncthreads(ctx).
 *       warp, block and grid collectives call ctx->collective(ctx, op, ...).
 *                   "<symbol>__block":  void (void **args, KjThreadCtx *ctx)
 *       runs every thread of block ctx->block_idx in a loop (emitted for
 *       kernels without syncthreads(), and for those whose split form runs
 *       the block's threads in loops between its barriers).
 *                   "<symbol>__xrange": KjRowFn, for a kernel that runs as
 *       rows of its grid (KjGridRows; unchecked code only).
 *   VEC_KERNEL (cpu) "<symbol>__range": void (void **args, int64_t begin, int64_t end)
 *       runs PARFOR iterations [begin, end).
 *   KERNEL / VEC_KERNEL (cuda) "<symbol>": a .entry whose parameters are the
 *       function's parameters in order, arrays as KjArrayDesc by value, but
 *       C-contiguous ones (a kernel's contiguous-mask bits, every array of a
 *       CONTIG VEC_KERNEL) as the 8 + 8 * ndim bytes {data, shape[ndim]} that
 *       open a KjArrayDesc, so a pointer to the descriptor serves both; a
 *       VEC_KERNEL walks its PARFOR with a grid-stride loop.  A KERNEL with
 *       local() sized at launch (KjIrFunction.launch_locals) takes one more
 *       parameter last (after checked mode's record, below): the device
 *       address of the launch's scratch, the grid's threads times the bytes
 *       of those arrays per thread (kj_local_launch_bytes), which the
 *       runtime allocates for the launch (target_cuda.c lays it out).
 *   A VEC_KERNEL of a @vectorize of several outputs takes outputs 1.. as
 *   arrays after the inputs and output 0 last, as `out` (vectorize.c).
 */

/*
 * How a cuda .entry takes one parameter: the one rule that target_cuda.c
 * builds the .entry by and runtime_cuda.c packs a launch's parameters by
 * (cuLaunchKernel's `extra`: each at the next multiple of its alignment).
 * `type` NULL is a device address (checked mode's record, the launch's
 * scratch); `contiguous` says an array parameter is C-contiguous in the
 * variant (the root's contiguous mask).
 */
typedef enum KjCudaParamForm {
    KJ_CUDA_PARAM_SCALAR,       /* its bytes in memory by value (a bool one byte) */
    KJ_CUDA_PARAM_COMPLEX,      /* {re, im} byval, aligned as one part */
    KJ_CUDA_PARAM_ARRAY_RECORD, /* byval {data, shape[ndim]}: a KjArrayDesc's first fields */
    KJ_CUDA_PARAM_ARRAY_DESC,   /* byval the whole KjArrayDesc */
    KJ_CUDA_PARAM_ADDRESS,      /* a device pointer */
} KjCudaParamForm;

typedef struct KjCudaParam {
    KjCudaParamForm form;
    size_t size;  /* the bytes the driver copies */
    size_t align; /* the .entry parameter's alignment */
} KjCudaParam;

static inline KjCudaParam kj_cuda_entry_param(const KjType *type, bool contiguous)
{
    if (!type)
        return (KjCudaParam){KJ_CUDA_PARAM_ADDRESS, sizeof(void *), sizeof(void *)};
    if (type->kind == KJ_TYPE_ARRAY)
        return contiguous ? (KjCudaParam){KJ_CUDA_PARAM_ARRAY_RECORD,
                                          sizeof(void *) + sizeof(int64_t) * (size_t)type->ndim, 8}
                          : (KjCudaParam){KJ_CUDA_PARAM_ARRAY_DESC, sizeof(KjArrayDesc), 8};
    size_t size = (size_t)kj_type_size(type);
    if (kj_type_is_complex(type))
        return (KjCudaParam){KJ_CUDA_PARAM_COMPLEX, size,
                             (size_t)kj_type_size(kj_type_complex_part(type))};
    return (KjCudaParam){KJ_CUDA_PARAM_SCALAR, size, size};
}
/*
 * Checked mode (KjCodegenOptions.checks): the first failed check of a call
 * is written here.  The thread that fails sets `failed` from 0 to 1 with a
 * compare-and-swap and, having won, writes the rest; every other failure
 * leaves the record alone.  A failing thread returns from its function, and
 * every function it was called from returns in turn, so nothing past the
 * failed check runs on that thread.  The record's address reaches compiled
 * code as one more argument: on cpu in args[param_count] of every entry
 * point above; on cuda as one more .entry parameter, a pointer to device
 * memory, after the function's own.  The runtime hands it over zeroed and
 * reads it after the call.
 */
typedef enum KjCheckWhere {
    KJ_CHECK_WHERE_NONE,    /* a plain function called from the host */
    KJ_CHECK_WHERE_THREAD,  /* a kernel: block and thread */
    KJ_CHECK_WHERE_ELEMENT, /* a vectorized call: element (the flat index of the output) */
} KjCheckWhere;

typedef struct KjCheckRecord {
    int32_t failed;    /* 0 until the first failure */
    int32_t site;      /* the module's check site, from 1 (KjCheckSite) */
    int32_t kind;      /* KjCheckKind */
    int32_t where;     /* KjCheckWhere */
    int64_t values[3]; /* the operands, as KJ_CHECK_KINDS lists them */
    int64_t element;
    int32_t block[3];
    int32_t thread[3];
    /* Race checking (KjCodegenOptions.race, cpu targets only): the runtime's
     * state for the call and the function compiled code calls, through this
     * pointer (it names no runtime symbol), before each access to an array
     * element and at each barrier (site: the READ, WRITE, ATOMIC or BARRIER
     * site; flags: the site's kind, and the index count << 8; address and
     * indices NULL at a barrier).  It returns non-zero when the call has
     * failed: the thread then leaves as after a failed check. */
    void *race;
    int32_t (*race_access)(struct KjCheckRecord *record, KjThreadCtx *ctx, void *address,
                           const int64_t *indices, int32_t site, int32_t flags);
} KjCheckRecord;

/*
 * print(...) on cpu: the code formats a line with snprintf into a buffer of
 * KJ_PRINT_LINE_BYTES on its stack and hands it, whole, to the function whose
 * address is in the module's global KJ_PRINT_HOOK_SYMBOL (a pointer the
 * runtime fills after loading the code; compiled code names no runtime
 * symbol).  `len` is what snprintf returned, capped at the buffer's size less
 * one: a longer line arrives cut, without its newline.  On cuda print is a
 * call to vprintf.
 */
#define KJ_PRINT_HOOK_SYMBOL "kj_print_hook"
#define KJ_PRINT_LINE_BYTES 1024
typedef void (*KjPrintFn)(const char *line, int64_t len);

/*
 * Cancellation (KjCodegenOptions.cancel): compiled code polls at loop back
 * edges and between a split kernel's regions and blocks.  The poll is one
 * load of the i32 at the address in the module's global
 * KJ_CANCEL_WORD_SYMBOL (the runtime's count of cancelled calls in the
 * process, almost always 0); when it is not 0 the code calls the function
 * whose address is in KJ_CANCEL_HOOK_SYMBOL, which says whether the call
 * this thread runs is the one cancelled (not 0: it is).  Then the function
 * returns at once (a zero value), and so does each function it was called
 * from, as after a failed check: the call's results are not used.  The
 * runtime fills both globals after loading the code; code loaded without
 * them polls a zero of its own and never stops.  On cuda the word is the
 * device address of a flag in mapped host memory (KJ_CANCEL_WORD_SYMBOL a
 * global u64 the runtime writes after loading the module), polled every
 * KJ_CANCEL_CUDA_STRIDE turns of a loop (a read over the bus costs about a
 * microsecond), with no hook: the flag is the context's.
 */
#define KJ_CANCEL_WORD_SYMBOL "kj_cancel_word"
#define KJ_CANCEL_HOOK_SYMBOL "kj_cancel_hook"
#define KJ_CANCEL_CUDA_STRIDE 1024
/* On cpu the back edge of a `for` of a constant step loads the word once in
 * KJ_CANCEL_CPU_STRIDE turns (when bits of its counter are 0), so that the
 * load leaves the loop's turns; the other polls load it each time. */
#define KJ_CANCEL_CPU_STRIDE 1024
typedef int32_t (*KjCancelFn)(void);

typedef void (*KjEntryFn)(void **args, void *result);
typedef void (*KjThreadFn)(void **args, KjThreadCtx *ctx);
typedef void (*KjRangeFn)(void **args, int64_t begin, int64_t end);
/* __blocks of code for one block shape: blocks [begin, end) of the grid on
 * one shared memory, its first zero_bytes static bytes (and its dynamic
 * ones) zeroed before each (target_cpu.c). */
typedef void (*KjBlocksFn)(void **args, KjThreadCtx *ctx, int64_t begin, int64_t end, int64_t zero_bytes);
/* __xrange of a kernel that runs as rows of its grid (KjGridRows): the
 * threads of one row of the grid (ctx->block_idx[1], [2], blockDim 1) whose
 * grid() x lies in [begin, end), begin and end below 2^31 - 64 (target_cpu.c). */
typedef void (*KjRowFn)(void **args, KjThreadCtx *ctx, int64_t begin, int64_t end);


/* ================================================================ codegen */

typedef enum { KJ_CODEGEN_CPU, KJ_CODEGEN_CUDA } KjCodegenTarget;

typedef enum {
    KJ_EMIT_LLVM, /* textual LLVM IR after optimisation */
    KJ_EMIT_ASM,  /* host assembly (cpu) */
    KJ_EMIT_OBJ,  /* host object file (cpu) */
    KJ_EMIT_PTX,  /* PTX text (cuda) */
} KjEmitKind;

typedef struct KjCodegenOptions {
    KjCodegenTarget target;
    int opt_level;               /* 0..3 */
    const char *cuda_arch;       /* "sm_90" */
    const char *libdevice_path;  /* NULL: kj_find_libdevice() */
    bool verify;                 /* run the LLVM verifier after each step */
    /* KERNEL roots: bit i set when array parameter i is C-contiguous at every
     * launch of this code (the runtime checks each launch's arguments).  Such a
     * parameter's strides are not read from its descriptor but computed from
     * its shape (1 for the last dimension), so the innermost index needs no
     * multiply; the entry points are then named after
     * kj_kernel_variant_symbol. */
    uint32_t contiguous_params;
    /* cuda: the PTX will be assembled whole-program (ptxas, as nvcc does), so
     * libdevice's rare slow paths may stay out of line as calls.  false: it
     * goes through the driver's linker, which compiles relocatable code where
     * a call costs the callee's registers, so they are inlined (ptx.c). */
    bool cuda_whole_program;
    /* Line tables of the .kern source in the code: DWARF line tables on cpu
     * (gdb, perf annotate), .file/.loc directives in PTX on cuda (nvcc's
     * -lineinfo: Nsight Compute, compute-sanitizer).  Part of the cache key. */
    bool line_info;
    /* Checked mode: the check sites the module carries (kj_checks_insert)
     * are tested, and every entry point takes the address of a
     * KjCheckRecord after its arguments. */
    bool checks;
    /* Race checking (with checks): the race sites the module carries are
     * reported to the runtime through KjCheckRecord.race_access before each
     * array access and barrier of a kernel and its device functions.  cpu
     * targets only; part of the cache key. */
    bool race;
    /* cpu targets: kernels without barriers, and vectorized functions with
     * loops, run their threads or elements on SIMD lanes (codegen_simd.c); a
     * kernel with syncthreads() that has a split form (fn->split,
     * barrier_split.c) gets a __block entry that runs it instead of fibers.
     * false keeps the scalar code and the fibers.  Part of the cache key. */
    bool cpu_simd;
    /* cpu targets, a kernel with a split form: code for blocks of exactly
     * these dims (x, y, z; 0 in x: any dims).  blockDim is then a constant
     * in every function of the code, and the kernel's only entry is the
     * __block of its split form as kj_split_specialise makes it for these
     * dims (the root passed is that function's result).  Part of the cache
     * key (runtime/runtime_cpu.c). */
    uint32_t block_dims[3];
    /* cpu targets, code for any dims (block_dims[0] 0): a kernel with a
     * split form gets its fibers' __thread alone, not the split form's
     * general __block, for a runtime that compiles the split form for each
     * launch's block shape (runtime_cpu.c, kjit_options.cpu_specialise), so
     * that the general one would never run; a library, checked code and
     * KJIT_CPU_SPECIALISE=0 run it, and keep it.  Part of the cache key. */
    bool split_shapes_only;
    /* Cancellation polls (above, "Cancellation") at loop back edges, after
     * calls, and between a split kernel's regions and blocks.  Part of the
     * cache key. */
    bool cancel;
    /* cpu targets: NULL for the host (its CPU and features, and
     * KJIT_CPU_FEATURES); else LLVM's CPU and the features the code may use
     * and no more ("x86-64-v3" and its features), for libraries built ahead
     * of time for an x86-64 level (kjit build --emit=lib, runtime/aot.c). */
    const char *cpu_name, *cpu_features;
    /* cuda, one group of a file compiled in groups (codegen_groups.c): NULL,
     * or a suffix every internal function and global takes, so that the
     * groups' PTX texts joined into one module never define a name twice.
     * Never set by the runtime; not part of any cache key. */
    const char *local_suffix;
    /* cpu objects: every global symbol the object defines is named with
     * this prefix (LLVM writes the names so), as `objcopy --redefine-syms`
     * renamed them: a library's kjaot_<level>_<root>__ (aot_build.c).
     * Never set by the runtime; not part of any cache key. */
    const char *global_prefix;
} KjCodegenOptions;

/*
 * Target policy, answered in one place (target.c) from the target that
 * options->target names; the runtime, kjit_stage_file and the lowering ask.
 *
 * kj_codegen_splits_barriers: whether a kernel with barriers runs through
 * its split form (barrier_split.c), which the pipeline then makes
 * (KjPipelineRoot.split_barriers) and may specialise for a launch's block
 * dims (KjPipelineRoot.block, KjCodegenOptions.block_dims): on a target
 * whose threads are loops of the host (KjTarget.thread_loops), with
 * cpu_simd on and checks off (a failed check names one thread).  Only
 * target, cpu_simd and checks are read.
 *
 * kj_codegen_emit_refusal: NULL when the target emits `kind`; else a heap
 * message for the user who asked for it, naming what the target emits and
 * which target emits `kind`.
 */
bool kj_codegen_splits_barriers(const KjCodegenOptions *options);
char *kj_codegen_emit_refusal(KjCodegenTarget target, KjEmitKind kind);

/* Whether cpu_simd is on by default: unless KJIT_CPU_SIMD is 0 (target.c). */
bool kj_codegen_cpu_simd_default(void);
/* Whether line_info is on by default: KJIT_LINEINFO set and not 0 (target.c). */
bool kj_codegen_line_info_default(void);

/* The symbol a kernel's entry points are named from: fn->symbol for the
 * general code (mask 0), "<symbol>__c<mask in hex>" for code specialised for
 * the contiguous array parameters in `mask`, so that the variants of one
 * kernel never share a name in any object, module or cache listing. */
static inline void kj_kernel_variant_symbol(const KjIrFunction *fn, uint32_t mask, char *buf,
                                            size_t size)
{
    if (mask && fn->kind == KJ_IR_FN_KERNEL)
        snprintf(buf, size, "%s__c%x", fn->symbol, (unsigned)mask);
    else
        snprintf(buf, size, "%s", fn->symbol);
}

/*
 * Generates code for `roots` (and the functions they call) of a checked module.
 * On failure returns NULL/false and sets *error (heap string, caller frees).
 */
typedef struct KjCpuCode KjCpuCode; /* an ORC LLJIT holding compiled code */

KjCpuCode *kj_cpu_compile(KjIrModule *module, KjIrFunction **roots, int root_count,
                          const KjCodegenOptions *options, char **error);
void *kj_cpu_lookup(KjCpuCode *code, const char *symbol); /* NULL if absent */
void kj_cpu_code_free(KjCpuCode *code);

/* kjit build --emit: the text or object bytes of one stage (heap, *size set). */
char *kj_codegen_emit(KjIrModule *module, KjIrFunction **roots, int root_count,
                      const KjCodegenOptions *options, KjEmitKind kind, size_t *size,
                      char **error);

/*
 * kj_codegen_emit for `kind` obj (cpu) or ptx (cuda) in groups
 * (codegen_groups.c): the roots cut into fixed groups in their order (the
 * cut depends on the roots alone, never on the machine), each group compiled
 * on its own LLVM context and target machine, on up to
 * kj_codegen_compile_threads() threads, and the results joined in group
 * order: one object (elf_join.c) or one PTX text (ptx.c). The bytes are the
 * same for any thread count; a single group is kj_codegen_emit's. Other
 * kinds are kj_codegen_emit's. The first failing group's error, as
 * kj_codegen_emit gives it, when one fails.
 */
char *kj_codegen_emit_grouped(KjIrModule *module, KjIrFunction **roots, int root_count,
                              const KjCodegenOptions *options, KjEmitKind kind, size_t *size,
                              char **error);
/* The threads that compile groups: KJIT_COMPILE_THREADS when set (1 is one
 * thread, the caller's), else the CPUs this process may run on, at most
 * KJ_COMPILE_THREADS_MAX; 0 and *error (heap) when KJIT_COMPILE_THREADS is
 * not a whole number from 1 to KJ_COMPILE_THREADS_MAX. */
#define KJ_COMPILE_THREADS_MAX 64
int kj_codegen_compile_threads(char **error);

/* elf_join.c: relocatable ELF objects joined into one, as `ld -r` joins
 * them (codegen_groups.c's groups); heap bytes and *size, or NULL and *error
 * (heap) naming what it could not join. */
char *kj_elf_join(char *const *objects, const size_t *sizes, int count, size_t *size,
                  char **error);
/* ptx.c: the PTX texts of several groups as one module: the first's header
 * (.version, .target, .address_size), then each text's body in order.
 * NULL and *error when the headers differ. */
char *kj_ptx_join(char *const *texts, int count, char **error);

/* The host CPU's name and features, as the cpu code is tuned for ("znver4 +avx512f,..."). */
const char *kj_host_cpu_description(void);

/* libdevice.10.bc: $KJIT_LIBDEVICE, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, ...
 * NULL (and the folders tried in *error) when none is found. */
const char *kj_find_libdevice(char **error);

/* ================================================================ ptx.c */

/* IR -> PTX: the shared LLVM lowering for nvptx64-nvidia-cuda, libdevice linked
 * (only what is used kept), NVVM reflect settled, optimised, emitted
 * (ptx.c's kj_ptx_emit, called with the cuda target by target_cuda.c). */
char *kj_ptx_generate(KjIrModule *module, KjIrFunction **roots, int root_count,
                      const KjCodegenOptions *options, char **error);

/* ============================================================ cpu_jit.c */

/*
 * Host code as a relocatable object file (what the cache stores for the cpu
 * targets), and an object file linked into a KjCpuCode of its own.
 * kj_cpu_compile above is the two in one.
 */
/* The object file for `roots` (heap, *size set); NULL and *error on failure. */
char *kj_cpu_compile_object(KjIrModule *module, KjIrFunction **roots, int root_count,
                            const KjCodegenOptions *options, size_t *size, char **error);
/* Links the object into a new JIT; NULL and *error when it does not link. */
KjCpuCode *kj_cpu_load_object(const void *object, size_t size, char **error);

/* "19.1.7": the LLVM this library was built with (cache keys, kjit info). */
const char *kj_llvm_version(void);


/* ======================================================= libdevice_split.c */

/* Links into an NVPTX module the libdevice functions it declares, and what
 * they call, without parsing the rest of libdevice: the bitcode is read
 * lazily and only the needed bodies are materialised.  The linked functions
 * are internal.  `module` and `machine` are LLVMModuleRef and
 * LLVMTargetMachineRef (kept opaque here).  false and *error on failure. */
bool kj_libdevice_link_lazy(void *module, void *machine, const char *path, char **error);

#endif
