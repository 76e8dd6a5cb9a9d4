/*
 * target_cuda.c: the cuda target, NVPTX for NVIDIA GPUs.  What the shared
 * lowering asks of a target, answered for the GPU:
 *
 *   - special registers are PTX's (%tid, %ctaid, %ntid, %nctaid), the
 *     barrier is bar.sync 0, and shared() arrays are globals in the shared
 *     address space (3), so the runtime need not size them;
 *   - a kernel or vectorized kernel is a .entry taking its parameters by
 *     value (kjit_backend.h), and a vectorized kernel walks its PARFOR with a
 *     grid-stride loop; no impl takes hidden parameters;
 *   - every function is convergent, and innermost constant loops are
 *     unrolled four times, as nvcc's are;
 *   - math calls go to libdevice (__nv_*), as do round, fmod and float %,
 *     which LLVM's NVPTX back end lowers inexactly or not at all; float to
 *     32- and 64-bit integers is PTX's saturating cvt.rzi;
 *   - atomics are relaxed (monotonic), as CUDA C's atomicAdd and kin are;
 *   - emission: the optimised LLVM IR, or PTX (ptx.c links libdevice and
 *     emits it).
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <llvm-c/Target.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ functions */

static void cuda_function_attrs(Gen *g, LLVMValueRef fn)
{
    /* Barriers must not be moved across control flow by the optimiser. */
    kj_codegen_add_fn_attr(g, fn, "convergent");
}

/* ============================================================ math */

static LLVMValueRef cuda_math(Gen *g, KjMathFn math, LLVMValueRef *a, int arity)
{
    switch (math) {
    case KJ_MATH_ROUND:
        /* llvm.round (half away from zero, as C's round) has no PTX instruction. */
        return kj_codegen_call_math(g, "round", false, a, 1);
    case KJ_MATH_FMOD:
        /* The NVPTX back end expands frem with an inexact formula; libdevice's is exact. */
        return kj_codegen_call_math(g, "fmod", false, a, 2);
    default:
        return NULL;
    }
}

static LLVMValueRef cuda_float_to_int(Gen *g, LLVMValueRef v, const KjType *from, const KjType *to)
{
    int bits = kj_type_int_bits(to);
    if ((bits != 32 && bits != 64) || (from->kind != KJ_TYPE_F32 && from->kind != KJ_TYPE_F64))
        return NULL;
    /* PTX's cvt.rzi already saturates, as fptosi.sat must; the
     * NVPTX back end does not know that and clamps with four more
     * instructions.  NaN is left to the hardware (the H100 gives the
     * most negative integer, or 2^63 / 2^31 unsigned): the language
     * leaves it unspecified, and testing for it cost delay-and-sum 3%
     * (tests/gpu/convert.kern checks every other edge against cpu). */
    char name[32];
    snprintf(name, sizeof name, "llvm.nvvm.%c2%s.rz", from->kind == KJ_TYPE_F32 ? 'f' : 'd',
             bits == 32 ? (kj_type_is_signed(to) ? "i" : "ui")
                        : (kj_type_is_signed(to) ? "ll" : "ull"));
    return kj_codegen_call_intrinsic(g, name, NULL, 0, &v, 1);
}

/* ============================================================ kernels */

static LLVMValueRef cuda_read_sreg(Gen *g, KjSpecialReg reg)
{
    static const char *const names[KJ_SREG_COUNT] = {
        [KJ_SREG_TID_X] = "llvm.nvvm.read.ptx.sreg.tid.x",     [KJ_SREG_TID_Y] = "llvm.nvvm.read.ptx.sreg.tid.y",
        [KJ_SREG_TID_Z] = "llvm.nvvm.read.ptx.sreg.tid.z",     [KJ_SREG_BID_X] = "llvm.nvvm.read.ptx.sreg.ctaid.x",
        [KJ_SREG_BID_Y] = "llvm.nvvm.read.ptx.sreg.ctaid.y",   [KJ_SREG_BID_Z] = "llvm.nvvm.read.ptx.sreg.ctaid.z",
        [KJ_SREG_BDIM_X] = "llvm.nvvm.read.ptx.sreg.ntid.x",   [KJ_SREG_BDIM_Y] = "llvm.nvvm.read.ptx.sreg.ntid.y",
        [KJ_SREG_BDIM_Z] = "llvm.nvvm.read.ptx.sreg.ntid.z",   [KJ_SREG_GDIM_X] = "llvm.nvvm.read.ptx.sreg.nctaid.x",
        [KJ_SREG_GDIM_Y] = "llvm.nvvm.read.ptx.sreg.nctaid.y", [KJ_SREG_GDIM_Z] = "llvm.nvvm.read.ptx.sreg.nctaid.z",
    };
    return kj_codegen_call_intrinsic(g, names[reg], NULL, 0, NULL, 0);
}

static void cuda_syncthreads(Gen *g)
{
    kj_codegen_call_intrinsic(g, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

/* One global in the shared address space per shared() call; the generic
 * pointer to it is what the array's accesses use. */
static LLVMValueRef cuda_shared_array(Gen *g, const KjType *elem, int64_t count)
{
    LLVMTypeRef at = LLVMArrayType2(memty(g, elem), (uint64_t)count);
    LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, at, "shared", 3);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    LLVMSetInitializer(gv, LLVMGetUndef(at));
    LLVMSetAlignment(gv, 16);
    return LLVMBuildAddrSpaceCast(g->b, gv, g->t_ptr, "");
}

/* A grid-stride loop over [0, stop): each thread starts at its global index
 * and steps by the grid's thread count, so any grid covers the range. */
static bool cuda_parfor_range(Gen *g, KjIrStmt *s, LLVMValueRef *begin, LLVMValueRef *end,
                              LLVMValueRef *step)
{
    *end = kj_codegen_convert(g, kj_codegen_expr(g, s->stop), s->stop->type, kj_type_scalar(KJ_TYPE_I64));
    LLVMValueRef bid = LLVMBuildZExt(g->b, kj_codegen_read_sreg(g, KJ_SREG_BID_X), g->t_i64, "");
    LLVMValueRef bdim = LLVMBuildZExt(g->b, kj_codegen_read_sreg(g, KJ_SREG_BDIM_X), g->t_i64, "");
    LLVMValueRef tid = LLVMBuildZExt(g->b, kj_codegen_read_sreg(g, KJ_SREG_TID_X), g->t_i64, "");
    LLVMValueRef gdim = LLVMBuildZExt(g->b, kj_codegen_read_sreg(g, KJ_SREG_GDIM_X), g->t_i64, "");
    *begin = LLVMBuildNUWAdd(g->b, LLVMBuildNUWMul(g->b, bid, bdim, ""), tid, "");
    *step = LLVMBuildNUWMul(g->b, bdim, gdim, "");
    return true;
}

/* ============================================================ entry points */

/* How a cuda .entry takes an array: a C-contiguous one as the record
 * {data, shape[ndim]} (KjArrayDesc's first fields, so the runtime passes a
 * pointer to its descriptor all the same), any other as the whole
 * KjArrayDesc. */
static LLVMTypeRef cuda_array_type(Gen *g, const KjType *t, bool contiguous)
{
    if (!contiguous)
        return g->t_desc;
    LLVMTypeRef fields[2] = {g->t_ptr, LLVMArrayType2(g->t_i64, (uint64_t)t->ndim)};
    return LLVMStructTypeInContext(g->ctx, fields, 2, 0);
}

/* A kernel's .entry (other roots have none): parameters in IR order, arrays (and complex scalars) by
 * value as byval pointers, bools as one byte. */
static void cuda_emit_entries(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    if (fn->kind != KJ_IR_FN_KERNEL && fn->kind != KJ_IR_FN_VEC_KERNEL)
        return;
    uint32_t contiguous = kj_codegen_root_contiguous(g, fn);
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)(fn->param_count + 1));
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)kj_codegen_impl_arg_capacity(fn));
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        ps[i] = is_array(t) || kj_type_is_complex(t) ? g->t_ptr : memty(g, t);
    }
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "", LLVMFunctionType(g->t_void, ps, (unsigned)fn->param_count, 0));
    LLVMSetFunctionCallConv(e, LLVMPTXKernelCallConv);
    free(ps);
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        LLVMValueRef p = LLVMGetParam(e, (unsigned)i);
        bool compact = is_array(t) && param_contiguous(contiguous, i);
        LLVMTypeRef array_type = is_array(t) ? cuda_array_type(g, t, compact) : NULL;
        if (is_array(t) || kj_type_is_complex(t)) {
            LLVMTypeRef vt = is_array(t) ? array_type : llty(g, t);
            unsigned kind = LLVMGetEnumAttributeKindForName("byval", 5);
            LLVMAddAttributeAtIndex(e, (unsigned)i + 1, LLVMCreateTypeAttribute(g->ctx, kind, vt));
            kj_codegen_add_param_attr(g, e, (unsigned)i, "align", is_array(t) ? 8 : (uint64_t)kj_type_size(kj_type_complex_part(t)));
        }
        if (is_array(t)) {
            ArrayVal a;
            kj_codegen_array_from_desc(g, p, array_type, t, compact, &a);
            args[n++] = a.data;
            for (int k = 0; k < t->ndim; k++)
                args[n++] = a.shape[k];
            for (int k = 0; k < t->ndim; k++)
                args[n++] = a.strides[k];
        } else if (kj_type_is_complex(t)) {
            args[n++] = LLVMBuildLoad2(g->b, llty(g, t), p, "");
        } else {
            args[n++] = from_mem(g, t, p);
        }
    }
    LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
    LLVMBuildRetVoid(g->b);
    free(args);

    LLVMMetadataRef md[3] = {LLVMValueAsMetadata(e), LLVMMDStringInContext2(g->ctx, "kernel", 6),
                             LLVMValueAsMetadata(const_i32(g, 1))};
    LLVMAddNamedMetadataOperand(g->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(g->ctx, LLVMMDNodeInContext2(g->ctx, md, 3)));
}

/* ============================================================ emission */

/* --emit=llvm: the NVPTX module as the shared lowering makes it, optimised,
 * before ptx.c links libdevice (its __nv_* calls are declarations). */
static char *emit_cuda_llvm(KjIrModule *module, KjIrFunction **roots, int root_count,
                            const KjCodegenOptions *options, size_t *size, char **error)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMTargetRef target;
    char *message = NULL;
    if (LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &target, &message)) {
        if (error)
            *error = kj_xstrdup(message ? message : "LLVM has no NVPTX target");
        LLVMDisposeMessage(message);
        return NULL;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
        target, "nvptx64-nvidia-cuda", options->cuda_arch ? options->cuda_arch : "sm_90", "+ptx85",
        LLVMCodeGenLevelAggressive, LLVMRelocDefault, LLVMCodeModelDefault);
    LLVMContextRef context = LLVMContextCreate();
    LLVMModuleRef mod = kj_codegen_module(context, tm, module, roots, root_count, options, error);
    char *result = NULL;
    if (mod && kj_codegen_optimize(mod, tm, options->opt_level, error)) {
        char *text = LLVMPrintModuleToString(mod);
        result = kj_xstrdup(text);
        if (size)
            *size = strlen(result);
        LLVMDisposeMessage(text);
    }
    if (mod)
        LLVMDisposeModule(mod);
    LLVMContextDispose(context);
    LLVMDisposeTargetMachine(tm);
    return result;
}

static char *cuda_emit(KjIrModule *module, KjIrFunction **roots, int root_count,
                       const KjCodegenOptions *options, KjEmitKind kind, size_t *size, char **error)
{
    switch (kind) {
    case KJ_EMIT_LLVM:
        return emit_cuda_llvm(module, roots, root_count, options, size, error);
    case KJ_EMIT_PTX: {
        char *ptx = kj_ptx_generate(module, roots, root_count, options, error);
        if (ptx && size)
            *size = strlen(ptx);
        return ptx;
    }
    default:
        if (error)
            *error = kj_xstrdup("the cuda target emits llvm or ptx");
        return NULL;
    }
}

/* ============================================================ the target */

const KjTarget kj_target_cuda = {
    .name = "cuda",
    .emit = cuda_emit,
    .setup_module = NULL,
    .function_attrs = cuda_function_attrs,
    .hidden_params = NULL,
    .bind_hidden_params = NULL,
    .hidden_args = NULL,
    .emit_entries = cuda_emit_entries,
    .unroll_constant_loops = true,
    .parfor_range = cuda_parfor_range,
    .read_sreg = cuda_read_sreg,
    .syncthreads = cuda_syncthreads,
    .shared_array = cuda_shared_array,
    .math_prefix = "__nv_",
    .math = cuda_math,
    .vectorizable_math_call = NULL,
    .float_to_int = cuda_float_to_int,
    .atomic_ordering = LLVMAtomicOrderingMonotonic,
};
