/*
 * codegen_llvm.h: the back end's private header.  The seam between the
 * shared IR -> LLVM lowering (codegen_llvm.c, with expressions in
 * codegen_expr.c), the two targets that lowering calls where cpu and cuda
 * part ways (target_cpu.c, target_cuda.c, picked in target.c), and the files
 * that drive LLVM for one of them (cpu_jit.c for ORC on the host, ptx.c for
 * NVPTX).  Only the back-end files include LLVM.
 */
#ifndef KJIT_CODEGEN_LLVM_H
#define KJIT_CODEGEN_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/TargetMachine.h>
#include <string.h>

#include "kjit_backend.h"

/* Builds an LLVM module for `roots` and their callees, with the entry points
 * that kjit_runtime.h lists for the target, which hands itself down (the
 * shared lowering reaches the target only through its hooks).  The module gets the target's
 * triple and data layout from `machine`.  NULL and *error on failure. */
typedef struct KjTarget KjTarget;
LLVMModuleRef kj_codegen_module(const KjTarget *target, LLVMContextRef context,
                                LLVMTargetMachineRef machine, KjIrModule *module,
                                KjIrFunction **roots, int root_count,
                                const KjCodegenOptions *options, char **error);

/* ptx.c: IR -> PTX with the lowering of `cuda`, the cuda target, which
 * hands itself down (target_cuda.c's kj_ptx_generate, kjit_backend.h). */
char *kj_ptx_emit(const KjTarget *cuda, KjIrModule *module, KjIrFunction **roots, int root_count,
                  const KjCodegenOptions *options, char **error);

/* Runs the new pass manager's pipeline on `mod`: default<O3> at opt_level 3,
 * or with `lean` the lean one of reduce.c's kernels (codegen_llvm.c). */
bool kj_codegen_optimize(LLVMModuleRef mod, LLVMTargetMachineRef machine, int opt_level, bool lean,
                         char **error);
/* Whether a module of these roots takes the lean pipeline: every root one of
 * reduce.c's kernels, opt_level 2 or 3, and no KJIT_REDUCE_O3=1. */
bool kj_codegen_lean_roots(KjIrFunction *const *roots, int root_count, int opt_level);
/* ptx_branches.c: selects between floating-point operations that the
 * optimiser speculated turned back into branches (after optimisation). */
void kj_ptx_branch_selects(LLVMModuleRef mod);
/* ptx_mma.c: on sm_90 and later (`arch`), mma() calls that make one of the
 * larger f64 tensor-core shapes issued as that instruction (after
 * optimisation). */
void kj_ptx_fuse_mma(LLVMModuleRef mod, const char *arch);

/* cpu_host.c: a target machine for the host (its CPU and features), LLVM's
 * native target initialised first.  NULL and *error when there is none.
 * kj_cpu_host_ready: that native target, set up once. */
LLVMTargetMachineRef kj_cpu_host_machine(char **error);
/* The same for a CPU and its features (KjCodegenOptions.cpu_name), or the
 * host's when cpu is NULL. */
LLVMTargetMachineRef kj_cpu_machine(const char *cpu, const char *features, char **error);
bool kj_cpu_host_ready(char **error);

/* ============================================================ lowering internals */

/* Shared by codegen_llvm.c (module, functions, statements), codegen_expr.c
 * (expressions) and the targets (target.c, target_cpu.c, target_cuda.c);
 * they define KJ_CODEGEN_LOWERING before including this header, so the
 * LLVM drivers (cpu_jit.c, ptx.c) never see these short names. */
#ifdef KJ_CODEGEN_LOWERING

typedef struct Gen Gen;

/* Where an array lives while a function runs: one slot (alloca) per field. */
typedef struct ArraySlots {
    LLVMValueRef data, shape[KJ_MAX_DIMS], strides[KJ_MAX_DIMS];
} ArraySlots;

/* An array value: its fields as SSA values. */
typedef struct ArrayVal {
    int ndim;
    const KjType *elem;
    LLVMValueRef data, shape[KJ_MAX_DIMS], strides[KJ_MAX_DIMS];
} ArrayVal;

typedef struct VarSlot {
    LLVMValueRef scalar; /* alloca of a scalar variable */
    ArraySlots array;    /* array variables */
} VarSlot;

typedef struct FnInfo {
    KjIrFunction *ir;
    LLVMValueRef impl;
    LLVMTypeRef impl_type;
} FnInfo;

typedef struct LoopTargets {
    LLVMBasicBlockRef break_bb, continue_bb;
} LoopTargets;

/* ============================================================ targets */

/*
 * A target: everything in which cpu and cuda differ, as a struct of function
 * pointers (QBE's Target).  The shared lowering calls these hooks where the
 * two part ways and never asks which target it builds for; target_cpu.c and
 * target_cuda.c hold the two instances, and kj_target_for is the one place
 * that picks between them.  Hooks marked "may be NULL" refine the shared
 * lowering, which NULL leaves as it is.
 */
typedef struct KjTarget {
    const char *name; /* "cpu", "cuda" */

    /* ---- emission */
    /* One stage (kjit build --emit, and the runtime's compilations) for roots:
     * heap text or bytes, *size set; NULL and *error for a kind the target
     * does not emit. */
    char *(*emit)(KjIrModule *module, KjIrFunction **roots, int root_count,
                  const KjCodegenOptions *options, KjEmitKind kind, size_t *size, char **error);
    /* The kinds emit makes: bit k for KjEmitKind k, and the same in words
     * ("llvm or ptx"), for the message that refuses another
     * (kj_codegen_emit_refusal). */
    unsigned emit_kinds;
    const char *emit_words;

    /* ---- the module */
    /* Once the module has the machine's triple and data layout, what the
     * target reads off them (cpu: which libmvec ISAs the host runs).  May be
     * NULL. */
    void (*setup_module)(Gen *g, const char *triple);
    /* Attributes of every function defined, after nounwind and the machine's
     * CPU and features. */
    void (*function_attrs)(Gen *g, LLVMValueRef fn);

    /* ---- impls and entry points */
    /* Parameters an impl takes after its IR parameters (at most 8): their
     * types into `types`, the count returned.  May be NULL (none). */
    int (*hidden_params)(Gen *g, const KjIrFunction *fn, LLVMTypeRef *types);
    /* While g->llfn is fn's impl: takes the hidden parameters, the first at
     * index `first`, into g's per-function state.  May be NULL. */
    void (*bind_hidden_params)(Gen *g, const KjIrFunction *fn, unsigned first);
    /* Once fn's impl is whole (every path returns): anything the target adds
     * before its returns.  May be NULL. */
    void (*finish_impl)(Gen *g, const KjIrFunction *fn);
    /* The hidden arguments of a call from the function being lowered to
     * callee's impl, into `out`; the count returned.  May be NULL. */
    int (*hidden_args)(Gen *g, const KjIrFunction *callee, LLVMValueRef *out);
    /* The entry points of a root (kjit_backend.h lists them), around its impl. */
    void (*emit_entries)(Gen *g, FnInfo *root);

    /* ---- statements */
    /* Innermost `for` loops over constant bounds get an unroll request. */
    bool unroll_constant_loops;
    /* THREADS statements (a kernel's split form) can be lowered: the target
     * reads threadIdx from g->sreg, which their loops set (cpu). */
    bool thread_loops;
    /* The iterations of a PARFOR this thread runs: from *begin by *step while
     * below *end (i64 values).  false when there are none to run here (the
     * error is recorded). */
    bool (*parfor_range)(Gen *g, KjIrStmt *s, LLVMValueRef *begin, LLVMValueRef *end,
                         LLVMValueRef *step);

    /* ---- expressions */
    /* KjIrExpr.opaque on an i64: the constraints of an empty inline asm that
     * hands it on unchanged ("=l,0": the output is the input's register), or
     * NULL for an LLVM freeze (which InstCombine drops where it proves the
     * value free of poison). */
    const char *opaque_i64;
    LLVMValueRef (*read_sreg)(Gen *g, KjSpecialReg reg); /* an i32 */
    void (*syncthreads)(Gen *g);
    /* The data pointer of one shared() array of `count` elements. */
    LLVMValueRef (*shared_array)(Gen *g, const KjType *elem, int64_t count, int64_t offset);
    /* The launch's dynamic shared memory (shared(T)): its data pointer, and
     * its size in bytes (an i64) into *bytes. */
    LLVMValueRef (*dynamic_shared)(Gen *g, LLVMValueRef *bytes);
    /* A kernel's local() sized at launch, in the impl's entry block: its data
     * pointer and the stride of its elements (an i64, in elements) into
     * *stride, given its bytes per thread (an i64, a multiple of 16) and
     * those of the kernel's launch-sized arrays before it (prefix).  May be
     * NULL: a stack allocation of those bytes, stride 1. */
    LLVMValueRef (*launch_local)(Gen *g, LLVMValueRef prefix, LLVMValueRef bytes,
                                 int64_t elem_bytes, LLVMValueRef *stride);
    /* An execution-model built-in (KJ_EXEC_OPS) of result type `type`, its
     * operands lowered into args (the IR's order); NULL for a void one. */
    LLVMValueRef (*exec)(Gen *g, KjExecOp op, const KjType *type, LLVMValueRef *args, int count);
    /* Before a math library function's name: "sin" -> "<prefix>sin(f)". */
    const char *math_prefix;
    /* A math built-in the target lowers its own way; NULL for the shared
     * lowering (an LLVM intrinsic, or the math library).  May be NULL. */
    LLVMValueRef (*math)(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity);
    /* A call of a math library function that has vector variants somewhere
     * (libm_name: "sin", "sinf"), made the target's own way so that scalar
     * code computes each value as its vector code does (cpu: through the
     * one libmvec routine kj_codegen_libmvec_routine names); NULL for a
     * plain call of the math library.  May be NULL. */
    LLVMValueRef (*vector_math_call)(Gen *g, const char *libm_name, LLVMValueRef *args, int arity);
    /* mulhi(a, b) of `bits`-bit integers the target lowers its own way; NULL
     * (or a NULL result) for the shared lowering, the product in twice the
     * width.  May be NULL. */
    LLVMValueRef (*mulhi)(Gen *g, LLVMValueRef a, LLVMValueRef b, unsigned bits, bool is_signed);
    /* A float to integer conversion the target lowers its own way; NULL for
     * llvm.fpto[su]i.sat.  May be NULL. */
    LLVMValueRef (*float_to_int)(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to);
    LLVMAtomicOrdering atomic_ordering; /* of every atomic read-modify-write */
    /* print(...): hands the line that C's printf would make of format (a
     * constant string) and values (promoted: i32, i64, double or a string
     * pointer each) to the target's output (cpu: snprintf and the runtime's
     * print function; cuda: vprintf). */
    void (*print)(Gen *g, LLVMValueRef format, LLVMValueRef *values, int count);
    /* Where constant strings live (0: generic; cuda: 1, global). */
    unsigned string_address_space;
    /* Where constant arrays live: const_array_space when the module's
     * constant arrays take at most const_array_space_bytes together (cuda: 4,
     * constant memory, 64 KiB), else string_address_space (0: always the
     * latter). */
    unsigned const_array_space;
    int64_t const_array_space_bytes;
    /* What KjCodegenOptions.line_info asks of the compile unit: line tables
     * (cpu), or .loc directives alone (cuda: ptxas takes them as nvcc's
     * -lineinfo, where line tables would be DWARF sections). */
    LLVMDWARFEmissionKind line_info_kind;
    /* Cancellation polls (codegen_cancel.c): true where the poll asks the
     * runtime's hook whose call is cancelled (cpu: the word read at every
     * poll but the back edges of `for` loops of a constant step, which read
     * it every cancel_stride turns); else the flag is the context's, read
     * every cancel_stride turns
     * (a power of two) from the address in a u64 global of address space
     * cancel_word_space (cuda). */
    bool cancel_hook;
    unsigned cancel_stride;
    unsigned cancel_word_space;
} KjTarget;

extern const KjTarget kj_target_cpu;  /* target_cpu.c */
extern const KjTarget kj_target_cuda; /* target_cuda.c */

/* target.c: the target a KjCodegenOptions names. */
const KjTarget *kj_target_for(KjCodegenTarget target);

/* ============================================================ lowering state */

/* The lowering state of one kj_codegen_module call. */
struct Gen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const KjTarget *target;
    const KjCodegenOptions *options;
    char *error;

    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f64, t_ptr, t_c64, t_c128;
    LLVMTypeRef t_f16, t_bf16;
    LLVMTypeRef t_desc;       /* KjArrayDesc */
    LLVMTypeRef t_thread_ctx; /* KjThreadCtx */

    int64_t const_array_bytes; /* the module's constant arrays (KjIrModule's) */
    const char *cpu_name, *cpu_features;
    bool vec_sse, vec_avx2, vec_avx512; /* libmvec ISAs the host can run */
    LLVMValueRef *used; /* vector math declarations for llvm.compiler.used */
    int used_count, used_cap;

    FnInfo *fns;
    int fn_count;

    /* the function being generated */
    KjIrFunction *fn;
    LLVMValueRef llfn;
    LLVMBasicBlockRef entry_bb;
    VarSlot *slots;
    int slot_count;
    LoopTargets loops[256];
    int loop_depth;
    LLVMValueRef sreg[KJ_SREG_COUNT]; /* cpu kernels: the special registers */
    LLVMValueRef thread_ctx;          /* cpu kernels */
    LLVMValueRef shared_base;         /* cpu kernels: ctx->shared */
    LLVMValueRef shared_guard;        /* cpu, KJIT_VERIFY: the guard bytes after the impl's own shared memory */
    LLVMValueRef launch_scratch;      /* cuda kernels with local() sized at launch: the
                                         launch's scratch (target_cuda.c) */
    int64_t shared_offset;            /* cpu kernels: bytes of shared memory laid out */
    const KjIrStmt *rows_guard;       /* cpu kernels, the rows chunk: the guard (KjGridRows)
                                         its lowering takes as true */
    LLVMValueRef range_begin, range_end; /* cpu VEC_KERNEL */

    /* line_info: the debug-info builder, its compile unit, one file per
     * source (the main file and its imports), the function's subprogram */
    LLVMDIBuilderRef di;
    LLVMMetadataRef di_unit, di_scope;
    const KjSource *di_sources[64];
    LLVMMetadataRef di_files[64];
    int di_file_count;
    /* checked mode (codegen_check.c): every impl takes the record's address
     * and the address of its thread's state (0: running, 1: stopping after
     * another thread's failure, 2: stopping after its own) */
    LLVMTypeRef t_check_record;       /* KjCheckRecord */
    LLVMValueRef check_record, check_state;
    LLVMBasicBlockRef bail_bb;        /* the impl's way out after a failure */
    LLVMValueRef element_slot;        /* VEC_KERNEL: the PARFOR index's slot */
    LLVMBasicBlockRef thread_next;    /* in a THREADS loop: the next thread (a return) */
    LLVMValueRef threads_stopped;     /* checked split form: i8 per thread of the block,
                                         1 once it failed a check (made on first use,
                                         kj_codegen_check_stopped_flags), read only
                                         once threads_any_stopped (an i8) is set */
    LLVMValueRef threads_any_stopped;
    /* checked code on SIMD lanes (codegen_simd_check.c): a check of a
     * uniform value made by the shared lowering, and the test after a call
     * of an impl, go to the lanes' lowering (data: its state) instead of
     * the impl's way out; NULL elsewhere */
    void (*lane_check)(void *data, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef values[3]);
    void (*lane_call_failed)(void *data, LLVMBasicBlockRef from, LLVMBasicBlockRef go_on);
    void *lane_data;
    /* cancellation (codegen_cancel.c): the function the way out was made
     * for, and that way out */
    LLVMValueRef cancel_fn;
    LLVMBasicBlockRef cancel_bail_bb;
};

/* codegen_gen.c: below every other lowering file */

/* Records the first error of the lowering; fmt has one %s for arg. */
void kj_codegen_error(Gen *g, const char *fmt, const char *arg);
/* An internal error when the shared() arrays just laid out (g->shared_offset)
 * take more than fn->shared_bytes, which the runtime allocates: code loaded
 * from a cache runs with that figure, so code generation never changes it. */
void kj_codegen_check_shared(Gen *g, const KjIrFunction *fn);
void kj_codegen_add_fn_attr(Gen *g, LLVMValueRef fn, const char *name);
void kj_codegen_add_param_attr(Gen *g, LLVMValueRef fn, unsigned param, const char *name, uint64_t value);
void kj_codegen_add_string_attr(Gen *g, LLVMValueRef fn, const char *key, const char *value);
/* Every function defined: no exceptions, tuned for the target machine, and
 * the target's own attributes. */
void kj_codegen_set_common_attrs(Gen *g, LLVMValueRef fn);
/* An alloca at the end of the entry block, where mem2reg looks for them. */
LLVMValueRef kj_codegen_alloca_in_entry(Gen *g, LLVMTypeRef t, const char *name);
/* Marks the loop whose back edge (a branch) is given as never unrolled. */
void kj_codegen_loop_no_unroll(Gen *g, LLVMValueRef back_edge);
/* The impl of an IR function the module declared (dies if it was not). */
FnInfo *kj_codegen_fn_info(Gen *g, const KjIrFunction *fn);
/* The parameter layout (codegen_gen.c): an array parameter travels as its
 * data pointer, shape[ndim] and strides[ndim], a scalar as one value.
 * How many LLVM arguments the impl of fn takes (an upper bound). */
int kj_codegen_impl_arg_capacity(const KjIrFunction *fn);
/* The LLVM types of fn's IR parameters into out, their count returned; a
 * scalar parameter i takes scalar_types[i] when scalar_types is not NULL
 * (the SIMD lowering's vectors), else its own type. */
int kj_codegen_param_types(Gen *g, const KjIrFunction *fn, const LLVMTypeRef *scalar_types, LLVMTypeRef *out);
/* An array argument's values into out, their count returned. */
int kj_codegen_array_args(const ArrayVal *a, LLVMValueRef *out);
/* The struct a function of several outputs returns (codegen_gen.c). */
LLVMTypeRef kj_codegen_outputs_type(Gen *g, const KjIrFunction *fn,
                                    LLVMTypeRef (*vector_of)(void *, const KjType *), void *user);
/* Stores the current function's array parameter that starts at argument p
 * into its slots; returns the argument after it. */
unsigned kj_codegen_bind_array_param(Gen *g, unsigned p, const ArraySlots *slots, int ndim);
/* line_info: gives `fn` (named `name`) a subprogram at loc, which later
 * debug locations are scoped to; then the builder's location is loc.  No-op
 * without line_info. */
void kj_codegen_debug_function(Gen *g, LLVMValueRef fn, const char *name, KjLoc loc);
/* line_info: instructions built from now on carry loc (no-op without). */
void kj_codegen_debug_loc(Gen *g, KjLoc loc);
/* line_info: the compile unit and module flags, before any function; the
 * builder finalised, after the last. */
void kj_codegen_debug_begin(Gen *g, const KjSource *main_source);
void kj_codegen_debug_end(Gen *g);
/* The contiguous array parameters of a root's code, a mask (see
 * KjCodegenOptions.contiguous_params). */
uint32_t kj_codegen_root_contiguous(Gen *g, const KjIrFunction *fn);
/* Whether a kernel root runs through its split form here: it has one and
 * the target policy says so (kj_target_splits_barriers, the one body of
 * kj_codegen_splits_barriers). */
bool kj_codegen_uses_split(Gen *g, const KjIrFunction *fn);
/* Whether the code for a block shape runs the split form `split` a row of
 * threadIdx.y, .z at a time, the loop over blocks inside (codegen_gen.c). */
bool kj_codegen_rows_first(Gen *g, const KjIrFunction *split);
bool kj_target_splits_barriers(const KjTarget *target, const KjCodegenOptions *options);
/* An array's fields read from a KjArrayDesc (or from its {data, shape}
 * prefix, desc_type saying which), strides computed when contiguous. */
void kj_codegen_array_from_desc(Gen *g, LLVMValueRef desc_ptr, LLVMTypeRef desc_type,
                                const KjType *type, bool contiguous, ArrayVal *out);
/* Starts an entry point of root fn named after its variant's symbol and
 * suffix; the builder is left in its first block. */
LLVMValueRef kj_codegen_add_entry(Gen *g, const KjIrFunction *fn, const char *suffix, LLVMTypeRef type);

/* codegen_check.c: checked mode */

/* The LLVM type of KjCheckRecord (made once per module). */
void kj_codegen_check_types(Gen *g);
/* Hidden parameters every impl takes in checked mode (record, state): their
 * types into `types`, the count returned (0 unchecked). */
int kj_codegen_check_params(Gen *g, LLVMTypeRef *types);
/* While g->llfn is an impl: takes the two, the first at index `first`. */
void kj_codegen_check_bind(Gen *g, unsigned first);
/* The arguments an impl call passes on (the caller's record and state). */
int kj_codegen_check_call_args(Gen *g, LLVMValueRef *out);
/* In an entry point: a fresh state for this thread, and the two arguments
 * for the impl (record given: loaded from args or an .entry parameter). */
int kj_codegen_check_entry_args(Gen *g, LLVMValueRef record, LLVMValueRef *out);
/* After a call to an impl: leaves this impl when the callee failed. */
void kj_codegen_check_after_call(Gen *g);
/* The checked split form's flags, one i8 per thread of the block and 64
 * more (a chunk of lanes reads its threads' flags as one vector), made on
 * first use; they hold something only once a thread has stopped, which
 * kj_codegen_check_any_stopped says (an i1; the flag it reads is zeroed in
 * the impl's entry block, not the 1,088 bytes of every block's call). */
LLVMValueRef kj_codegen_check_stopped_flags(Gen *g);
LLVMValueRef kj_codegen_check_any_stopped(Gen *g);
/* Before a thread's flag is set: the first stop zeroes the flags. */
void kj_codegen_check_first_stop(Gen *g);
/* Claims the record (g->check_record) for a failure of check `site`
 * (i32), `kind` (i32), operands values (i64): when this is the first
 * failure of the call, writes them and where it happened: the kernel thread
 * (thread_x, the y and z read from the special registers, the block too)
 * or, element not NULL, the vectorized kernel's element (i64). */
void kj_codegen_check_claim(Gen *g, LLVMValueRef site, LLVMValueRef kind, LLVMValueRef values[3],
                            LLVMValueRef thread_x, LLVMValueRef element);
/* The site, kind and operands a failure wrote into `record` (a record of
 * this function's own, g->check_record of an impl called in it), which is
 * then made free again. */
void kj_codegen_check_take(Gen *g, LLVMValueRef record, LLVMValueRef *site, LLVMValueRef *kind,
                           LLVMValueRef values[3]);
/* kj_codegen_rows_first's rows in checked mode (target_cpu.c): a record
 * for each row's impl call, a copy of the call's `record` not failed, and
 * *kept, where the failure that comes first in the blocks' order is kept
 * (allocas, written here: the builder is in __blocks' entry). */
LLVMValueRef kj_codegen_check_row_record(Gen *g, LLVMValueRef record, LLVMValueRef *kept);
/* After a row's call: a failure in `row` goes into `kept` when none is kept
 * or it comes first (block, then thread, in the order of a grid of gx x gy
 * blocks of `dims`); `row` is then made free again. */
void kj_codegen_check_keep_row(Gen *g, LLVMValueRef row, LLVMValueRef kept, LLVMValueRef gx, LLVMValueRef gy,
                               const uint32_t dims[3]);
/* At the end: the failure kept, if any, claims `record` as its thread would
 * have (when no other claimed it first) and writes what it wrote. */
void kj_codegen_check_claim_kept(Gen *g, LLVMValueRef record, LLVMValueRef kept);
/* In a checked split form's THREADS loop: the way out of the current
 * thread's turn, instead of the impl's.  A thread that fails a check sets
 * *stopped (its i8 flag, so that later regions skip it), writes where it
 * failed when it won the record, and the loop goes on at `next` with the
 * state back at 0 for the next thread, as the fibers' other threads go on. */
LLVMBasicBlockRef kj_codegen_check_thread_bail(Gen *g, LLVMValueRef stopped, LLVMBasicBlockRef next);
/* Fails check `site` unless `ok`; values are the record's operands (i64, or
 * NULL for 0).  Does nothing when site is 0 or checks are off. */
void kj_codegen_check(Gen *g, int site, KjCheckKind kind, LLVMValueRef ok, LLVMValueRef v0,
                      LLVMValueRef v1, LLVMValueRef v2);
/* Race checking: tells the runtime of an access (kind READ, WRITE or ATOMIC)
 * to the element at `address`, a[indices] (i64 values), at race site `site`;
 * nothing unless race checking is on and the function runs on a thread. */
void kj_codegen_race_access(Gen *g, int site, KjCheckKind kind, LLVMValueRef address,
                            LLVMValueRef *indices, int count);
/* Race checking: the thread is about to wait at the barrier of race site `site`. */
void kj_codegen_race_barrier(Gen *g, int site);
/* The checks of an array access a[indices] (i64 values) at `site`. */
void kj_codegen_check_index(Gen *g, int site, const ArrayVal *a, LLVMValueRef *indices, int count);
/* The check of an operation e marked by checks.c, given its operands as
 * lowered: DIV and REM (a, b of e's type), SHL and SHR (a of e's type, b
 * the count as written), IPOW (b the exponent as written), CAST (a the
 * float).  Does nothing for an unmarked e. */
void kj_codegen_check_operands(Gen *g, const KjIrExpr *e, LLVMValueRef a, LLVMValueRef b);

/* codegen_cancel.c: cancellation polls (KjCodegenOptions.cancel) */

/* A poll at the builder's place: when the call is cancelled, g->llfn returns
 * (a zero value); otherwise the code goes on in a fresh block.  No-op
 * without the option. */
void kj_codegen_cancel_poll(Gen *g);
/* The poll at a loop's back edge, `counter_slot` the alloca of a `for`'s
 * counter (of `type`; its value this turn) and `step` its step (NULL for a
 * `while`): on cpu, with a constant step and a scalar counter, the word is
 * loaded in one turn of cancel_stride (a test of the counter's bits each
 * turn); else as kj_codegen_cancel_poll. */
void kj_codegen_cancel_poll_turn(Gen *g, LLVMValueRef counter_slot, LLVMTypeRef type, LLVMValueRef step,
                                 LLVMValueRef long_loop);
/* Before a FOR `s` that polls: an i1, whether it turns more than
 * KJ_CANCEL_FREE_TURNS times, for kj_codegen_cancel_poll_turn's long_loop
 * (the short loop then runs without its poll); NULL where it polls anyway. */
LLVMValueRef kj_codegen_cancel_long_loop(Gen *g, const KjIrStmt *s, LLVMTypeRef type, bool is_signed,
                                         LLVMValueRef start, LLVMValueRef stop, LLVMValueRef step);
/* Whether the back edge of FOR `s` needs a poll: not a simd_lanes loop, nor
 * one of constant bounds and few turns without loops inside. */
bool kj_codegen_cancel_loop(Gen *g, const KjIrStmt *s);
/* Whether a call of fn may return early for a cancellation (it or a
 * function it calls has a loop): the caller then polls after the call. */
bool kj_codegen_cancel_may_stop(Gen *g, const KjIrFunction *fn);

/* codegen_expr.c */

/* A constant NUL-terminated string's address (a generic pointer). */
LLVMValueRef kj_codegen_string(Gen *g, const char *text);

/* The value of a scalar expression (NULL for void ones such as syncthreads()). */
LLVMValueRef kj_codegen_expr(Gen *g, KjIrExpr *e);
/* The fields of an array expression: a variable, shared() or local(). */
void kj_codegen_array(Gen *g, KjIrExpr *e, ArrayVal *out);
LLVMValueRef kj_codegen_convert(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to);
/* x op y (EQ NE LT LE GT GE) for two values of `type`, built with b: scalars
 * or vectors of them alike (a complex value a pair of either, equal or
 * not; ordering one is an error of the lowering). */
LLVMValueRef kj_codegen_compare(Gen *g, LLVMBuilderRef b, KjIrOp op, const KjType *type, LLVMValueRef x,
                                LLVMValueRef y);
LLVMValueRef kj_codegen_read_sreg(Gen *g, KjSpecialReg reg);
/* A call to an LLVM intrinsic, declared on first use. */
/* A math built-in that is one LLVM intrinsic or instruction (sqrt, fabs,
 * floor ... fmod, isnan, isinf, isfinite), on scalars or vectors; NULL when
 * it is a libm function. */
LLVMValueRef kj_codegen_math_inline(Gen *g, LLVMBuilderRef b, KjMathFn math, LLVMValueRef *a);
LLVMValueRef kj_codegen_call_intrinsic(Gen *g, const char *name, LLVMTypeRef *overloads,
                                       int overload_count, LLVMValueRef *args, int arg_count);
/* A declared external function (math library, libdevice). */
LLVMValueRef kj_codegen_extern(Gen *g, const char *name, LLVMTypeRef type);
/* A real math built-in on args of one float type: the target's own lowering,
 * an LLVM intrinsic, or the target's math library. */
LLVMValueRef kj_codegen_math(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity);
/* An atomic on the element at ptr (swap: CAS's new value); the old value. */
LLVMValueRef kj_codegen_atomic_at(Gen *g, KjAtomicOp atomic, const KjType *t, LLVMValueRef ptr,
                                  LLVMValueRef v, LLVMValueRef swap);
/* The address of a[indices]; `contiguous` takes indices[0] as the flat offset. */
LLVMValueRef kj_codegen_element_address(Gen *g, const ArrayVal *a, LLVMValueRef *indices, int count,
                                        bool contiguous);

/* Complex arithmetic (ADD SUB MUL DIV) and z * z on values of any complex
 * layout, scalar parts or vectors of parts (codegen_simd.c). */
LLVMValueRef kj_codegen_complex_arith(Gen *g, KjIrOp op, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef kj_codegen_complex_square(Gen *g, LLVMValueRef z);
/* A math built-in's libm name ("sin"; f32 adds "f") and whether libmvec has it. */
const char *kj_codegen_math_libm(KjMathFn fn, bool *libmvec);
/* Whether a math built-in lowers without a library call (KJ_MATH_BUILTINS'
 * `lower` column): cheap for lanes that do not need its value. */
bool kj_codegen_math_cheap(KjMathFn fn);
/* A math built-in as its math library's call (its `libm` column), whatever
 * its `lower` column says: for a target whose instructions cannot do the
 * inline lowering exactly (cuda's round and fmod). */
LLVMValueRef kj_codegen_math_library(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity);
/* The one libmvec routine that cpu code calls for libm function `libm_name`
 * ("sin", "sinf") of `arity` operands of element type `elem`: the widest ISA
 * the host runs, declared in the module once, its name into name[96] and
 * its lane count into *lanes; NULL (and 0 lanes) when the host has no
 * libmvec. */
LLVMValueRef kj_codegen_libmvec_routine(Gen *g, const char *libm_name, LLVMTypeRef elem, int arity,
                                        int *lanes, char *name);

/* codegen_simd.c: the SIMD lowering of the cpu targets (docs/architecture.md) */

/* The lanes fn runs on when it can be lowered onto SIMD lanes as a root
 * (a kernel without barriers: threadIdx.x varying; a vectorized kernel: its
 * PARFOR index varying); 0 when it cannot (the scalar code is used). */
int kj_simd_lanes(Gen *g, KjIrFunction *fn);
/* Defines fn's SIMD chunk function for `lanes` lanes and returns it, its
 * type in *type.  A kernel's takes its impl's arguments up to threadIdx
 * (ctx, then threadIdx.x of lane 0, threadIdx.y, threadIdx.z) and the count
 * of active lanes (i32, from lane 0); a vectorized kernel's, its arrays and
 * scalars, the PARFOR index of lane 0 (i64) and the count of active lanes. */
LLVMValueRef kj_simd_define_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type);
/* The same for __xrange (kj_grid_rows): fn's guard taken as true, as the
 * rows run only the threads that pass it. */
LLVMValueRef kj_simd_define_rows_chunk(Gen *g, KjIrFunction *fn, int lanes, LLVMTypeRef *type);
/* codegen_simd_threads.c: a THREADS statement of the split form being lowered
 * on SIMD lanes, threadIdx.x in [first[0], stop) in chunks, y and z in
 * [first[1], dims[1]) and [first[2], dims[2]) around them (i32 values; y and
 * z from 0 but for kj_codegen_rows_first's one row).  false, with nothing
 * emitted, when the region cannot go on lanes (the caller emits its scalar
 * loop). */
bool kj_simd_threads(Gen *g, KjIrStmt *threads, LLVMValueRef first[3], LLVMValueRef stop, LLVMValueRef dims[3]);

/* codegen_mma.c: mma() of shuffles and fmas, for targets without the
 * instruction.  A KjMmaShuffle is the target's shfl(mask, v, lane) of an f64
 * (lane an i32); args are the IR's (mask, a, b, c0, c1), lane the calling
 * lane (an i32); the result is the c128 pair (d0, d1). */
typedef LLVMValueRef (*KjMmaShuffle)(Gen *g, LLVMValueRef mask, LLVMValueRef v, LLVMValueRef lane);
LLVMValueRef kj_codegen_mma_shuffled(Gen *g, LLVMValueRef *args, LLVMValueRef lane,
                                     KjMmaShuffle shuffle);

/* codegen_complex.c */

/* A kj_math_complex built-in on complex args (all of one complex type). */
LLVMValueRef kj_codegen_complex_math(Gen *g, KjMathFn fn, LLVMValueRef *args, int arity);
LLVMValueRef kj_codegen_complex_arg(Gen *g, LLVMValueRef z);
LLVMValueRef kj_codegen_polar(Gen *g, LLVMTypeRef complex_type, LLVMValueRef r, LLVMValueRef theta);

/* Types and constants, used on both sides of the seam. */

static inline LLVMTypeRef llty(Gen *g, const KjType *type)
{
    switch (type->kind) {
    case KJ_TYPE_VOID: return g->t_void;
    case KJ_TYPE_BOOL: return g->t_i1;
    case KJ_TYPE_I8: case KJ_TYPE_U8: return g->t_i8;
    case KJ_TYPE_I16: case KJ_TYPE_U16: return g->t_i16;
    case KJ_TYPE_I32: case KJ_TYPE_U32: return g->t_i32;
    case KJ_TYPE_I64: case KJ_TYPE_U64: return g->t_i64;
    case KJ_TYPE_F32: return g->t_f32;
    case KJ_TYPE_F64: return g->t_f64;
    case KJ_TYPE_C64: return g->t_c64;
    case KJ_TYPE_C128: return g->t_c128;
    case KJ_TYPE_F16: return g->t_f16;
    case KJ_TYPE_BF16: return g->t_bf16;
    default: kj_die("no LLVM type for %s", kj_type_name(type));
    }
}

/* In memory a bool is one byte holding 0 or 1. */
static inline LLVMTypeRef memty(Gen *g, const KjType *type)
{
    return type->kind == KJ_TYPE_BOOL ? g->t_i8 : llty(g, type);
}

static inline LLVMValueRef to_mem(Gen *g, const KjType *type, LLVMValueRef v)
{
    return type->kind == KJ_TYPE_BOOL ? LLVMBuildZExt(g->b, v, g->t_i8, "") : v;
}

static inline LLVMValueRef from_mem(Gen *g, const KjType *type, LLVMValueRef v)
{
    return type->kind == KJ_TYPE_BOOL
               ? LLVMBuildICmp(g->b, LLVMIntNE, v, LLVMConstInt(g->t_i8, 0, 0), "")
               : v;
}

static inline bool is_array(const KjType *type) { return type->kind == KJ_TYPE_ARRAY; }

/* Whether array parameter `param` is in a contiguous mask. */
static inline bool param_contiguous(uint32_t mask, int param)
{
    return param < 32 && (mask >> param & 1u);
}

/* memory(none): the call reads and writes no memory the program can see. */
static inline LLVMAttributeRef memory_none(Gen *g)
{
    unsigned kind = LLVMGetEnumAttributeKindForName("memory", 6);
    return LLVMCreateEnumAttribute(g->ctx, kind, 0);
}

/* Whether the feature list ("+avx,+avx2,-avx512f,...") turns `name` on: its
 * last mention, as LLVM reads the list (KJIT_CPU_FEATURES comes after the
 * host's), and the features it needs on too (turning avx off turns off
 * avx2 and avx512f with it).  Never strstr: "+avx512f,...,-avx512f" is a
 * host with AVX-512 restricted to AVX2. */
static inline bool kj_has_cpu_feature(const char *features, const char *name)
{
    static const char *const needs[][2] = {
        {"avx512dq", "avx512f"}, {"avx512bw", "avx512f"}, {"avx512vl", "avx512f"},
        {"avx512f", "avx2"},     {"avx2", "avx"},
    };
    size_t n = strlen(name + 1);
    bool on = false;
    for (const char *p = features; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n + 1 && (p[0] == '+' || p[0] == '-') && memcmp(p + 1, name + 1, n) == 0)
            on = p[0] == '+';
        p += len + (end != NULL);
    }
    for (size_t i = 0; on && i < sizeof needs / sizeof needs[0]; i++)
        if (strlen(needs[i][0]) == n && memcmp(needs[i][0], name + 1, n) == 0) {
            char need[32];
            snprintf(need, sizeof need, "+%s", needs[i][1]);
            on = kj_has_cpu_feature(features, need);
        }
    return on;
}

static inline LLVMValueRef const_i64(Gen *g, int64_t v) { return LLVMConstInt(g->t_i64, (uint64_t)v, 1); }
static inline LLVMValueRef const_i32(Gen *g, int32_t v) { return LLVMConstInt(g->t_i32, (uint64_t)(int64_t)v, 1); }

static inline LLVMValueRef zero_of(Gen *g, const KjType *type) { return LLVMConstNull(llty(g, type)); }

/* A complex value {re, im} of LLVM type ct, and its parts. */
static inline LLVMValueRef make_complex(Gen *g, LLVMTypeRef ct, LLVMValueRef re, LLVMValueRef im)
{
    LLVMValueRef v = LLVMGetUndef(ct);
    v = LLVMBuildInsertValue(g->b, v, re, 0, "");
    return LLVMBuildInsertValue(g->b, v, im, 1, "");
}

static inline LLVMValueRef re_of(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 0, "re"); }
static inline LLVMValueRef im_of(Gen *g, LLVMValueRef z) { return LLVMBuildExtractValue(g->b, z, 1, "im"); }

static inline LLVMBasicBlockRef new_block(Gen *g, const char *name)
{
    return LLVMAppendBasicBlockInContext(g->ctx, g->llfn, name);
}

#endif /* KJ_CODEGEN_LOWERING */

#endif
