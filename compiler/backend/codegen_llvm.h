/*
 * codegen_llvm.h: the seam between the shared IR -> LLVM lowering
 * (codegen_llvm.c, with expressions in codegen_expr.c) and the files that
 * drive LLVM for one target (cpu_jit.c for ORC on the host, ptx.c for NVPTX).
 * Only the back-end files include LLVM.
 */
#ifndef KJIT_CODEGEN_LLVM_H
#define KJIT_CODEGEN_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "kjit_backend.h"

/* Builds an LLVM module for `roots` and their callees, with the entry points
 * that kjit_runtime.h lists for the target.  The module gets the target's
 * triple and data layout from `machine`.  NULL and *error on failure. */
LLVMModuleRef kj_codegen_module(LLVMContextRef context, LLVMTargetMachineRef machine,
                                KjIrModule *module, KjIrFunction **roots, int root_count,
                                const KjCodegenOptions *options, char **error);

/* Runs the new pass manager's pipeline (default<O3> at opt_level 3) on `mod`. */
bool kj_codegen_optimize(LLVMModuleRef mod, LLVMTargetMachineRef machine, int opt_level,
                         char **error);
/* ptx_branches.c: selects between floating-point operations that the
 * optimiser speculated turned back into branches (after optimisation). */
void kj_ptx_branch_selects(LLVMModuleRef mod);

/* ============================================================ lowering internals */

/* Shared by codegen_llvm.c (module, functions, statements) and codegen_expr.c
 * (expressions); the two define KJ_CODEGEN_LOWERING before including this
 * header, so the target drivers never see these short names. */
#ifdef KJ_CODEGEN_LOWERING

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

/* The lowering state of one kj_codegen_module call. */
typedef struct Gen {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    KjCodegenTarget target;
    const KjCodegenOptions *options;
    char *error;

    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f32, t_f64, t_ptr, t_c64, t_c128;
    LLVMTypeRef t_desc;       /* KjArrayDesc */
    LLVMTypeRef t_thread_ctx; /* KjThreadCtx */

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
    int64_t shared_offset;            /* cpu kernels: bytes of shared memory laid out */
    LLVMValueRef range_begin, range_end; /* cpu VEC_KERNEL */
} Gen;

/* codegen_llvm.c */

/* Records the first error of the lowering; fmt has one %s for arg. */
void kj_codegen_error(Gen *g, const char *fmt, const char *arg);
void kj_codegen_add_fn_attr(Gen *g, LLVMValueRef fn, const char *name);
/* The impl of an IR function the module declared (dies if it was not). */
FnInfo *kj_codegen_fn_info(Gen *g, const KjIrFunction *fn);

/* codegen_expr.c */

/* The value of a scalar expression (NULL for void ones such as syncthreads()). */
LLVMValueRef kj_codegen_expr(Gen *g, KjIrExpr *e);
/* The fields of an array expression: a variable, shared() or local(). */
void kj_codegen_array(Gen *g, KjIrExpr *e, ArrayVal *out);
LLVMValueRef kj_codegen_convert(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to);
LLVMValueRef kj_codegen_read_sreg(Gen *g, KjSpecialReg reg);
/* The address of a[indices]; `contiguous` takes indices[0] as the flat offset. */
LLVMValueRef kj_codegen_element_address(Gen *g, const ArrayVal *a, LLVMValueRef *indices, int count,
                                        bool contiguous);

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

static inline LLVMValueRef const_i64(Gen *g, int64_t v) { return LLVMConstInt(g->t_i64, (uint64_t)v, 1); }
static inline LLVMValueRef const_i32(Gen *g, int32_t v) { return LLVMConstInt(g->t_i32, (uint64_t)(int64_t)v, 1); }

static inline LLVMValueRef zero_of(Gen *g, const KjType *type) { return LLVMConstNull(llty(g, type)); }

static inline LLVMBasicBlockRef new_block(Gen *g, const char *name)
{
    return LLVMAppendBasicBlockInContext(g->ctx, g->llfn, name);
}

#endif /* KJ_CODEGEN_LOWERING */

#endif
