/*
 * target_cuda.c: the cuda target, NVPTX for NVIDIA GPUs.  What the shared
 * lowering asks of a target, answered for the GPU:
 *
 *   - special registers are PTX's (%tid, %ctaid, %ntid, %nctaid), the
 *     barrier is bar.sync 0, and shared() arrays are globals in the shared
 *     address space (3), so the runtime need not size them;
 *   - a kernel or vectorized kernel is a .entry taking its parameters by
 *     value (kjit_backend.h), and a vectorized kernel walks its PARFOR with a
 *     grid-stride loop; only a kernel with local() sized at launch takes a
 *     hidden parameter, the launch's scratch that holds those arrays;
 *   - every function is convergent, and innermost constant loops are
 *     unrolled four times, as nvcc's are;
 *   - math calls go to libdevice (__nv_*), as do round, fmod and float %,
 *     which LLVM's NVPTX back end lowers inexactly or not at all; float to
 *     32- and 64-bit integers is PTX's saturating cvt.rzi;
 *   - warp, block and grid collectives are NVVM's intrinsics (shfl.sync,
 *     vote.sync, barrier0.popc/and/or, membar, mma.sync's f64 form from
 *     sm_80, shuffles before), but syncgrid(), which is a
 *     counter in global memory as cooperative groups' grid.sync() is; the
 *     launch's dynamic shared memory is an extern shared array;
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
    case KJ_MATH_FMOD:
        /* The NVPTX back end expands frem with an inexact formula; libdevice's is exact. */
        return kj_codegen_math_library(g, math, a, arity);
    default:
        return NULL;
    }
}

/* mulhi (32 or 64 bits) is PTX's mul.hi.  The shared lowering's product in
 * twice the width becomes, for 32 bits, a mul.lo.s64 whose high word the PTX
 * takes apart, and ptxas -O3 (CUDA 13) has kept a loop-invariant part of such
 * a product in a loop where it varies (tests/genprog/regress/
 * cuda_mulhi_loop.kern: seed 6645's wrong integers). */
static LLVMValueRef cuda_mulhi(Gen *g, LLVMValueRef a, LLVMValueRef b, unsigned bits, bool is_signed)
{
    const char *name = bits == 32 ? (is_signed ? "llvm.nvvm.mulhi.i" : "llvm.nvvm.mulhi.ui")
                                   : (is_signed ? "llvm.nvvm.mulhi.ll" : "llvm.nvvm.mulhi.ull");
    LLVMValueRef args[2] = {a, b};
    return kj_codegen_call_intrinsic(g, name, NULL, 0, args, 2);
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
static LLVMValueRef cuda_shared_array(Gen *g, const KjType *elem, int64_t count, int64_t offset)
{
    (void)offset; /* the cpu's layout: here each call is a global of its own */
    LLVMTypeRef at = LLVMArrayType2(memty(g, elem), (uint64_t)count);
    LLVMValueRef gv = LLVMAddGlobalInAddressSpace(g->mod, at, "shared", 3);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    LLVMSetInitializer(gv, LLVMGetUndef(at));
    LLVMSetAlignment(gv, 16);
    return LLVMBuildAddrSpaceCast(g->b, gv, g->t_ptr, "");
}

/* The launch's dynamic shared memory: one extern array in the shared
 * address space (CUDA's extern __shared__, PTX's .extern .shared), sized by
 * the launch's sharedMemBytes, which %dynamic_smem_size reads back. */
static LLVMValueRef cuda_dynamic_shared(Gen *g, LLVMValueRef *bytes)
{
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, "kj_dynamic_shared");
    if (!gv) {
        LLVMTypeRef at = LLVMArrayType2(g->t_i8, 0);
        gv = LLVMAddGlobalInAddressSpace(g->mod, at, "kj_dynamic_shared", 3);
        LLVMSetLinkage(gv, LLVMExternalLinkage);
        LLVMSetAlignment(gv, 16);
    }
    static const char text[] = "mov.u32 $0, %dynamic_smem_size;";
    LLVMTypeRef ft = LLVMFunctionType(g->t_i32, NULL, 0, 0);
    LLVMValueRef asm_value = LLVMGetInlineAsm(ft, (char *)text, sizeof text - 1, (char *)"=r", 2,
                                              0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef size = LLVMBuildCall2(g->b, ft, asm_value, NULL, 0, "dynamic_bytes");
    *bytes = LLVMBuildZExt(g->b, size, g->t_i64, "");
    return LLVMBuildAddrSpaceCast(g->b, gv, g->t_ptr, "");
}

/* One shuffle of a 32-bit int or f32: llvm.nvvm.shfl.sync.<mode>.<i32|f32>. */
static LLVMValueRef shfl32(Gen *g, KjExecOp op, LLVMValueRef mask, LLVMValueRef v, LLVMValueRef lane)
{
    const char *mode = op == KJ_EXEC_SHFL ? "idx" : op == KJ_EXEC_SHFL_UP ? "up"
                       : op == KJ_EXEC_SHFL_DOWN ? "down" : "bfly";
    char name[48];
    snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.%s", mode,
             LLVMTypeOf(v) == g->t_f32 ? "f32" : "i32");
    /* c packs the segment mask (0: the whole warp is one segment) over the
     * clamp lane: 31 for idx, down and bfly, 0 for up (CUDA's __shfl_*_sync
     * with width 32). */
    LLVMValueRef c = const_i32(g, op == KJ_EXEC_SHFL_UP ? 0 : KJ_WARP_SIZE - 1);
    LLVMValueRef args[4] = {mask, v, lane, c};
    return kj_codegen_call_intrinsic(g, name, NULL, 0, args, 4);
}

/* A shuffle of any width: 64-bit values move as two 32-bit halves. */
static LLVMValueRef cuda_shuffle(Gen *g, KjExecOp op, const KjType *type, LLVMValueRef mask,
                                 LLVMValueRef v, LLVMValueRef lane)
{
    LLVMTypeRef t = llty(g, type);
    if (t == g->t_i32 || t == g->t_f32)
        return shfl32(g, op, mask, v, lane);
    LLVMValueRef bits = t == g->t_f64 ? LLVMBuildBitCast(g->b, v, g->t_i64, "") : v;
    LLVMValueRef lo = LLVMBuildTrunc(g->b, bits, g->t_i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(g->b, LLVMBuildLShr(g->b, bits, const_i64(g, 32), ""), g->t_i32, "");
    lo = LLVMBuildZExt(g->b, shfl32(g, op, mask, lo, lane), g->t_i64, "");
    hi = LLVMBuildZExt(g->b, shfl32(g, op, mask, hi, lane), g->t_i64, "");
    LLVMValueRef joined = LLVMBuildOr(g->b, lo, LLVMBuildShl(g->b, hi, const_i64(g, 32), ""), "");
    return t == g->t_f64 ? LLVMBuildBitCast(g->b, joined, t, "") : joined;
}

/*
 * syncgrid(): a barrier over every block of a cooperative launch, as
 * cooperative groups' grid.sync() does it (NVVM has no instruction for it).
 * After a block barrier, thread 0 of each block adds to one counter in
 * global memory (kj_grid_barrier, zero when the module loads): block 0 adds
 * 0x80000000 - (blocks - 1) and every other block 1, so that once all have
 * arrived the counter has grown by exactly 0x80000000: its top bit flips and
 * its low bits are as before, ready for the next barrier and the next launch
 * without a reset.  Each adder spins until it sees the flip; fences on both
 * sides make the grid's writes before the barrier visible after it; a second
 * block barrier holds the block's other threads until then.
 */
static void cuda_syncgrid(Gen *g)
{
    LLVMValueRef gv = LLVMGetNamedGlobal(g->mod, "kj_grid_barrier");
    if (!gv) {
        gv = LLVMAddGlobalInAddressSpace(g->mod, g->t_i32, "kj_grid_barrier", 1);
        LLVMSetLinkage(gv, LLVMInternalLinkage);
        LLVMSetInitializer(gv, const_i32(g, 0));
        LLVMSetAlignment(gv, 4);
    }
    kj_codegen_call_intrinsic(g, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
    LLVMValueRef tid = LLVMBuildOr(g->b, cuda_read_sreg(g, KJ_SREG_TID_X),
                                   LLVMBuildOr(g->b, cuda_read_sreg(g, KJ_SREG_TID_Y),
                                               cuda_read_sreg(g, KJ_SREG_TID_Z), ""), "");
    LLVMBasicBlockRef arrive = new_block(g, "grid.arrive"), spin = new_block(g, "grid.spin"),
                      done = new_block(g, "grid.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, tid, const_i32(g, 0), ""), arrive, done);

    LLVMPositionBuilderAtEnd(g->b, arrive);
    LLVMValueRef bid = LLVMBuildOr(g->b, cuda_read_sreg(g, KJ_SREG_BID_X),
                                   LLVMBuildOr(g->b, cuda_read_sreg(g, KJ_SREG_BID_Y),
                                               cuda_read_sreg(g, KJ_SREG_BID_Z), ""), "");
    LLVMValueRef blocks = LLVMBuildMul(g->b, cuda_read_sreg(g, KJ_SREG_GDIM_X),
                                       LLVMBuildMul(g->b, cuda_read_sreg(g, KJ_SREG_GDIM_Y),
                                                    cuda_read_sreg(g, KJ_SREG_GDIM_Z), ""), "");
    LLVMValueRef first = LLVMBuildSub(g->b, const_i32(g, (int32_t)0x80000000u),
                                      LLVMBuildSub(g->b, blocks, const_i32(g, 1), ""), "");
    LLVMValueRef add = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntEQ, bid, const_i32(g, 0), ""),
                                       first, const_i32(g, 1), "");
    kj_codegen_call_intrinsic(g, "llvm.nvvm.membar.gl", NULL, 0, NULL, 0);
    LLVMValueRef old = LLVMBuildAtomicRMW(g->b, LLVMAtomicRMWBinOpAdd, gv, add,
                                          LLVMAtomicOrderingMonotonic, 0);
    LLVMBuildBr(g->b, spin);

    LLVMPositionBuilderAtEnd(g->b, spin);
    LLVMValueRef now = LLVMBuildLoad2(g->b, g->t_i32, gv, "");
    LLVMSetVolatile(now, 1);
    LLVMValueRef flipped = LLVMBuildAnd(g->b, LLVMBuildXor(g->b, old, now, ""),
                                        const_i32(g, (int32_t)0x80000000u), "");
    LLVMBasicBlockRef leave = new_block(g, "grid.leave");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, flipped, const_i32(g, 0), ""), leave, spin);

    LLVMPositionBuilderAtEnd(g->b, leave);
    kj_codegen_call_intrinsic(g, "llvm.nvvm.membar.gl", NULL, 0, NULL, 0);
    LLVMBuildBr(g->b, done);

    LLVMPositionBuilderAtEnd(g->b, done);
    kj_codegen_call_intrinsic(g, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
}

/* Whether the PTX is for sm_80 or later, which has mma.sync's f64 form: the
 * default, sm_90, and a newer device's name do. */
static bool has_f64_mma(Gen *g)
{
    const char *arch = g->options->cuda_arch;
    int number = 90;
    if (arch && sscanf(arch, "sm_%d", &number) != 1)
        number = 0;
    return number >= 80;
}

/* mma()'s shuffle of an f64 on a GPU without the instruction (codegen_mma.c). */
static LLVMValueRef cuda_mma_shuffle(Gen *g, LLVMValueRef mask, LLVMValueRef v, LLVMValueRef lane)
{
    return cuda_shuffle(g, KJ_EXEC_SHFL, kj_type_scalar(KJ_TYPE_F64), mask, v, lane);
}

/* mma(): mma.sync.aligned.m8n8k4.row.col.f64 on sm_80 and later, else the
 * shuffles and fmas of codegen_mma.c (the operations the cpu targets run).  NVVM's intrinsic is only IntrNoMem;
 * the call is made convergent, as the functions are, so that the optimiser
 * never moves it where only some lanes of the warp run. */
static LLVMValueRef cuda_mma(Gen *g, LLVMValueRef *args)
{
    if (!has_f64_mma(g)) {
        LLVMValueRef lane = kj_codegen_call_intrinsic(g, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0,
                                                      NULL, 0);
        return kj_codegen_mma_shuffled(g, args, lane, cuda_mma_shuffle);
    }
    LLVMValueRef r = kj_codegen_call_intrinsic(g, "llvm.nvvm.mma.m8n8k4.row.col.f64", NULL, 0,
                                               args + 1, 4);
    unsigned kind = LLVMGetEnumAttributeKindForName("convergent", 10);
    LLVMAddCallSiteAttribute(r, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
    return make_complex(g, llty(g, kj_type_scalar(KJ_TYPE_C128)), LLVMBuildExtractValue(g->b, r, 0, "d0"),
                        LLVMBuildExtractValue(g->b, r, 1, "d1"));
}

/* KJ_EXEC_OPS' nvvm column: the intrinsic of each built-in's instruction. */
static const char *const exec_nvvm[KJ_EXEC_COUNT] = {
#define X(id, name, barrier, min_args, max_args, form, nvvm) nvvm,
    KJ_EXEC_OPS(X)
#undef X
};

/* The execution-model built-ins, each PTX's own instruction through the
 * NVVM intrinsic its KJ_EXEC_OPS row names, given the IR's operands; the
 * shuffles by their mode and syncgrid() (above) are built here. */
static LLVMValueRef cuda_exec(Gen *g, KjExecOp op, const KjType *type, LLVMValueRef *args, int count)
{
    const char *nvvm = exec_nvvm[op];
    switch (op) {
    case KJ_EXEC_SHFL: case KJ_EXEC_SHFL_UP: case KJ_EXEC_SHFL_DOWN: case KJ_EXEC_SHFL_XOR:
        return cuda_shuffle(g, op, type, args[0], args[1], args[2]);
    case KJ_EXEC_SYNCGRID:
        cuda_syncgrid(g);
        return NULL;
    case KJ_EXEC_MMA:
        return cuda_mma(g, args);
    case KJ_EXEC_ACTIVEMASK:
        /* PTX's activemask names the lanes that have not exited: no mask */
        count = 0;
        break;
    case KJ_EXEC_SYNCTHREADS_COUNT:
    case KJ_EXEC_SYNCTHREADS_AND:
    case KJ_EXEC_SYNCTHREADS_OR: {
        /* bar.red takes and gives an i32: the count, or nonzero for and/or */
        LLVMValueRef pred = LLVMBuildZExt(g->b, args[0], g->t_i32, "");
        LLVMValueRef r = kj_codegen_call_intrinsic(g, nvvm, NULL, 0, &pred, 1);
        return type->kind == KJ_TYPE_BOOL ? LLVMBuildICmp(g->b, LLVMIntNE, r, const_i32(g, 0), "") : r;
    }
    default:
        break;
    }
    if (!nvvm)
        kj_unreachable();
    LLVMValueRef r = kj_codegen_call_intrinsic(g, nvvm, NULL, 0, args, count);
    return type->kind == KJ_TYPE_VOID ? NULL : r;
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

/* ============================================================ local() sized at launch */

/* A kernel with local() sized at launch takes the launch's scratch (global
 * memory the runtime allocates for the launch: its threads times their
 * bytes) after its parameters, as the hidden parameter of its impl: PTX has
 * no local memory of a size known only at run time. */
static int cuda_hidden_params(Gen *g, const KjIrFunction *fn, LLVMTypeRef *types)
{
    if (fn->kind != KJ_IR_FN_KERNEL || fn->launch_locals.count == 0)
        return 0;
    types[0] = g->t_ptr;
    return 1;
}

static void cuda_bind_hidden_params(Gen *g, const KjIrFunction *fn, unsigned first)
{
    if (fn->kind == KJ_IR_FN_KERNEL && fn->launch_locals.count > 0)
        g->launch_scratch = LLVMGetParam(g->llfn, first);
}

/* The scratch is interleaved as CUDA's local memory is: an array of B bytes
 * per thread at prefix P is B / element-size rows of T elements (T the
 * grid's threads) from scratch + P * T, element k of thread t at row k,
 * column t, so a warp's threads reading the same element touch consecutive
 * addresses (coalesced).  The thread's view starts at its column, with
 * element stride T. */
static LLVMValueRef cuda_launch_local(Gen *g, LLVMValueRef prefix, LLVMValueRef bytes,
                                      int64_t elem_bytes, LLVMValueRef *stride)
{
    (void)bytes;
    LLVMBuilderRef b = g->b;
    LLVMValueRef r[KJ_SREG_COUNT];
    for (int i = 0; i < KJ_SREG_COUNT; i++)
        r[i] = LLVMBuildZExt(b, cuda_read_sreg(g, (KjSpecialReg)i), g->t_i64, "");
    LLVMValueRef block = LLVMBuildMul(b, LLVMBuildMul(b, r[KJ_SREG_BDIM_X], r[KJ_SREG_BDIM_Y], ""),
                                      r[KJ_SREG_BDIM_Z], "");
    LLVMValueRef blocks = LLVMBuildMul(b, LLVMBuildMul(b, r[KJ_SREG_GDIM_X], r[KJ_SREG_GDIM_Y], ""),
                                       r[KJ_SREG_GDIM_Z], "");
    LLVMValueRef threads = LLVMBuildMul(b, block, blocks, "threads");
    LLVMValueRef bid = LLVMBuildAdd(
        b, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r[KJ_SREG_BID_Z], r[KJ_SREG_GDIM_Y], ""),
                                        r[KJ_SREG_BID_Y], ""), r[KJ_SREG_GDIM_X], ""),
        r[KJ_SREG_BID_X], "");
    LLVMValueRef tid = LLVMBuildAdd(
        b, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r[KJ_SREG_TID_Z], r[KJ_SREG_BDIM_Y], ""),
                                        r[KJ_SREG_TID_Y], ""), r[KJ_SREG_BDIM_X], ""),
        r[KJ_SREG_TID_X], "");
    LLVMValueRef t = LLVMBuildAdd(b, LLVMBuildMul(b, bid, block, ""), tid, "thread");
    LLVMValueRef offset = LLVMBuildAdd(b, LLVMBuildMul(b, prefix, threads, ""),
                                       LLVMBuildMul(b, t, LLVMConstInt(g->t_i64, (uint64_t)elem_bytes, 0), ""), "");
    *stride = threads;
    return LLVMBuildGEP2(b, g->t_i8, g->launch_scratch, &offset, 1, "local");
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

/* A kernel's .entry (other roots have none): parameters in IR order, each
 * as kj_cuda_entry_param says (the rule the runtime packs a launch by),
 * arrays and complex scalars by value as byval pointers. */
static void cuda_emit_entries(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    if (fn->kind != KJ_IR_FN_KERNEL && fn->kind != KJ_IR_FN_VEC_KERNEL)
        return;
    uint32_t contiguous = kj_codegen_root_contiguous(g, fn);
    LLVMTypeRef *ps = kj_xmalloc(sizeof *ps * (size_t)(fn->param_count + 2));
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)kj_codegen_impl_arg_capacity(fn));
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        KjCudaParam param = kj_cuda_entry_param(t, param_contiguous(contiguous, i));
        ps[i] = param.form == KJ_CUDA_PARAM_SCALAR ? memty(g, t) : g->t_ptr;
    }
    /* checked mode: the KjCheckRecord's device address after the parameters */
    int count = fn->param_count;
    if (g->options->checks)
        ps[count++] = g->t_ptr;
    /* local() sized at launch: the launch's scratch after them */
    bool scratch = fn->kind == KJ_IR_FN_KERNEL && fn->launch_locals.count > 0;
    if (scratch)
        ps[count++] = g->t_ptr;
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "", LLVMFunctionType(g->t_void, ps, (unsigned)count, 0));
    LLVMSetFunctionCallConv(e, LLVMPTXKernelCallConv);
    free(ps);
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        KjCudaParam param = kj_cuda_entry_param(t, param_contiguous(contiguous, i));
        LLVMValueRef p = LLVMGetParam(e, (unsigned)i);
        bool compact = param.form == KJ_CUDA_PARAM_ARRAY_RECORD;
        LLVMTypeRef by_value = param.form == KJ_CUDA_PARAM_SCALAR ? memty(g, t)
                               : is_array(t)                      ? cuda_array_type(g, t, compact)
                                                                  : llty(g, t);
        /* the runtime packs a launch's bytes by the rule's sizes */
        unsigned long long bytes = LLVMABISizeOfType(LLVMGetModuleDataLayout(g->mod), by_value);
        if (bytes != param.size)
            kj_die("%s's .entry parameter %d takes %llu bytes; kj_cuda_entry_param says %zu",
                   fn->name, i, bytes, param.size);
        if (param.form == KJ_CUDA_PARAM_SCALAR) {
            args[n++] = from_mem(g, t, p);
            continue;
        }
        unsigned kind = LLVMGetEnumAttributeKindForName("byval", 5);
        LLVMAddAttributeAtIndex(e, (unsigned)i + 1, LLVMCreateTypeAttribute(g->ctx, kind, by_value));
        kj_codegen_add_param_attr(g, e, (unsigned)i, "align", (uint64_t)param.align);
        if (is_array(t)) {
            ArrayVal a;
            kj_codegen_array_from_desc(g, p, by_value, t, compact, &a);
            n += kj_codegen_array_args(&a, args + n);
        } else {
            args[n++] = LLVMBuildLoad2(g->b, by_value, p, "");
        }
    }
    if (scratch)
        args[n++] = LLVMGetParam(e, (unsigned)(count - 1));
    if (g->options->checks)
        n += kj_codegen_check_entry_args(g, LLVMGetParam(e, (unsigned)fn->param_count), args + n);
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
    LLVMModuleRef mod = kj_codegen_module(&kj_target_cuda, context, tm, module, roots, root_count, options, error);
    char *result = NULL;
    if (mod && kj_codegen_optimize(mod, tm, options->opt_level,
                                   kj_codegen_lean_roots(roots, root_count, options->opt_level), error)) {
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

/* ============================================================ print */

/* As nvcc does: the values in a local struct, each at its natural alignment
 * (C's varargs layout, which the driver's vprintf reads), and
 * vprintf(format, &values); every thread's line comes out whole. */
static void cuda_print(Gen *g, LLVMValueRef format, LLVMValueRef *values, int count)
{
    LLVMTypeRef params[] = {g->t_ptr, g->t_ptr};
    LLVMTypeRef type = LLVMFunctionType(g->t_i32, params, 2, 0);
    LLVMValueRef vprintf_fn = kj_codegen_extern(g, "vprintf", type);
    LLVMValueRef packed = LLVMConstNull(g->t_ptr);
    if (count > 0) {
        LLVMTypeRef fields[64];
        for (int i = 0; i < count && i < 64; i++)
            fields[i] = LLVMTypeOf(values[i]);
        LLVMTypeRef st = LLVMStructTypeInContext(g->ctx, fields, (unsigned)count, 0);
        packed = kj_codegen_alloca_in_entry(g, st, "print.args");
        for (int i = 0; i < count && i < 64; i++)
            LLVMBuildStore(g->b, values[i], LLVMBuildStructGEP2(g->b, st, packed, (unsigned)i, ""));
    }
    LLVMValueRef args[] = {format, packed};
    LLVMBuildCall2(g->b, type, vprintf_fn, args, 2, "");
}

/* ============================================================ the target */

const KjTarget kj_target_cuda = {
    .name = "cuda",
    .emit = cuda_emit,
    .emit_kinds = 1u << KJ_EMIT_LLVM | 1u << KJ_EMIT_PTX,
    .emit_words = "llvm or ptx",
    .setup_module = NULL,
    .function_attrs = cuda_function_attrs,
    .hidden_params = cuda_hidden_params,
    .bind_hidden_params = cuda_bind_hidden_params,
    .hidden_args = NULL,
    .emit_entries = cuda_emit_entries,
    .unroll_constant_loops = true,
    .parfor_range = cuda_parfor_range,
    .opaque_i64 = "=l,0", /* NVPTX's 64-bit register class */
    .read_sreg = cuda_read_sreg,
    .syncthreads = cuda_syncthreads,
    .shared_array = cuda_shared_array,
    .dynamic_shared = cuda_dynamic_shared,
    .launch_local = cuda_launch_local,
    .exec = cuda_exec,
    .math_prefix = "__nv_",
    .math = cuda_math,
    .vector_math_call = NULL,
    .mulhi = cuda_mulhi,
    .float_to_int = cuda_float_to_int,
    .atomic_ordering = LLVMAtomicOrderingMonotonic,
    /* DICompileUnit::DebugDirectivesOnly, which the C API does not name */
    .line_info_kind = (LLVMDWARFEmissionKind)3,
    .cancel_hook = false,
    .cancel_stride = KJ_CANCEL_CUDA_STRIDE,
    .cancel_word_space = 1, /* global */
    .print = cuda_print,
    .string_address_space = 1,
    .const_array_space = 4,
    .const_array_space_bytes = 64 * 1024,
};

/* IR -> PTX (kjit_backend.h): ptx.c's emission with this target's lowering. */
char *kj_ptx_generate(KjIrModule *module, KjIrFunction **roots, int root_count,
                      const KjCodegenOptions *options, char **error)
{
    return kj_ptx_emit(&kj_target_cuda, module, roots, root_count, options, error);
}
