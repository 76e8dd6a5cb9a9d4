/*
 * target_cpu.c: the cpu target, the host through LLVM's native back end.
 * What the shared lowering asks of a target, answered for the host:
 *
 *   - a kernel runs one CUDA thread per call of its __thread entry (or a
 *     block's threads in a loop, __block; for a kernel with barriers, its
 *     split form's THREADS loops between them, barrier_split.c); its impl, and the impl of each
 *     device function (a plain function using kernel built-ins), takes the
 *     thread context (KjThreadCtx) and threadIdx as hidden parameters, which
 *     calls pass on, reads the other
 *     special registers from the context once, carves shared() arrays out of
 *     ctx->shared, and calls the runtime's barrier through ctx->syncthreads
 *     and its warp, block and grid collectives through ctx->collective;
 *   - a vectorized kernel's PARFOR runs the [begin, end) its __range entry is
 *     handed (the runtime splits the index space over its thread pool);
 *   - math calls that glibc's libmvec has go to its routine for the widest
 *     ISA the host runs, from scalar and vector code alike (the same bits in
 *     every mode); the others to libm, lgamma through the reentrant lgamma_r;
 *   - atomics are sequentially consistent, which costs nothing on x86,
 *     whose locked read-modify-write instructions are full barriers anyway;
 *   - emission: the optimised LLVM IR, host assembly, or the relocatable
 *     object file that cpu_jit.c links and the cache keeps.
 */
#define KJ_CODEGEN_LOWERING
#include "codegen_llvm.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================ the module */

static void cpu_setup_module(Gen *g, const char *triple)
{
    /* Vector variants only when libmvec is in the process (cpu_jit.c loads it):
     * a host without it gets scalar libm calls rather than unresolved symbols. */
    if (strncmp(triple, "x86_64", 6) == 0 && dlsym(RTLD_DEFAULT, "_ZGVbN2v_sin") != NULL) {
        /* The features as LLVM reads them (the last mention): with
         * KJIT_CPU_FEATURES=-avx512f the list holds the host's +avx512f too,
         * and calling the AVX-512 routine with its 512-bit arguments split
         * into AVX2 register pairs gave f(x, x) for pow(x, y) and every
         * other two-argument function. */
        const char *f = g->cpu_features ? g->cpu_features : "";
        g->vec_sse = true;
        g->vec_avx2 = kj_has_cpu_feature(f, "+avx2");
        g->vec_avx512 = kj_has_cpu_feature(f, "+avx512f");
    }
}

/*
 * A split form's impl runs a whole block per call (its regions in turn), so
 * the block's static shared memory lives exactly as long as the call: its
 * own stack array, zeroed at the start unless every element is written
 * before it is read (kj_split_writes_shared), not the runtime's ctx->shared.
 * LLVM then sees memory nothing else reads: inlined into __blocks, stores
 * that nothing reads before the block ends go, and a tile read and written
 * at constant offsets (the block sum's tree, unrolled) lives in registers,
 * as hand-written SIMD C keeps it: the block sum went from 1.37 to 1.22
 * times that C on the 16-core host, 1.0 to 0.6 on the 2-core one
 * (docs/performance.md).  At most KJ_CPU_STACK_SHARED_BYTES (the calling
 * thread's stack holds it); the dynamic part stays the runtime's.  Under
 * KJIT_VERIFY, KJ_SHARED_GUARD_BYTES follow it, as runtime/cpu.c fences the
 * memory it hands out (cpu_finish_impl checks them before each return).
 */
enum { KJ_CPU_STACK_SHARED_BYTES = 16384 };

static bool impl_owns_shared(const KjIrFunction *fn)
{
    const KjIrFunction *kernel = fn->split_of;
    return kernel && kernel->shared_bytes > 0 && kernel->shared_bytes <= KJ_CPU_STACK_SHARED_BYTES;
}

static void cpu_function_attrs(Gen *g, LLVMValueRef fn)
{
    if (g->vec_avx512)
        /* The libmvec AVX-512 variants take 512-bit vectors; without this the
         * vectoriser may settle on 256 bits and never pick them. */
        kj_codegen_add_string_attr(g, fn, "prefer-vector-width", "512");
    /* a block's own shared memory (impl_owns_shared) stays a stack array
     * that SROA can take apart: not a copy loop turned into a call of
     * memcpy, which loop-idiom makes of the block sum's first region once
     * the tile is known to alias nothing */
    const KjIrFunction *kernel = g->fn ? (g->fn->split_of ? g->fn->split_of : g->fn) : NULL;
    if (kernel && kernel->split && impl_owns_shared(kernel->split))
        kj_codegen_add_string_attr(g, fn, "no-builtin-memcpy", "");
}

/* ============================================================ math */

/*
 * A libm function that libmvec has, called from scalar code: through
 * kj_math_<name>, a function of the module's own that runs the host's one
 * routine for it (kj_codegen_libmvec_routine: the SIMD lowering calls the
 * same) on its operands in every lane and returns lane 0.  The call names
 * that routine in "vector-function-abi-variant", so the loop vectoriser calls
 * it on whole vectors instead; either way each element gets the routine's
 * result, in the loop's body and in its remainder alike.  The wrapper is
 * never inlined: inlined, it would leave the vectoriser a vector call it
 * cannot widen (and LLVM folds no call of it with constant operands into
 * the host libm's value).
 */
static LLVMValueRef cpu_vector_math_call(Gen *g, const char *name, LLVMValueRef *args, int arity)
{
    LLVMTypeRef t = LLVMTypeOf(args[0]);
    char vname[96];
    int lanes;
    LLVMValueRef vfn = kj_codegen_libmvec_routine(g, name, t, arity, &lanes, vname);
    if (!vfn)
        return NULL;
    LLVMTypeRef vt = LLVMVectorType(t, (unsigned)lanes);
    LLVMTypeRef vps[2] = {vt, vt};
    LLVMTypeRef vft = LLVMFunctionType(vt, vps, (unsigned)arity, 0);
    char wname[96];
    snprintf(wname, sizeof wname, "kj_math_%s", name);
    LLVMTypeRef ps[2] = {t, t};
    LLVMTypeRef ft = LLVMFunctionType(t, ps, (unsigned)arity, 0);
    LLVMValueRef wrapper = LLVMGetNamedFunction(g->mod, wname);
    if (!wrapper) {
        wrapper = LLVMAddFunction(g->mod, wname, ft);
        LLVMSetLinkage(wrapper, LLVMInternalLinkage);
        kj_codegen_add_fn_attr(g, wrapper, "nounwind");
        kj_codegen_add_fn_attr(g, wrapper, "noinline");
        kj_codegen_add_fn_attr(g, wrapper, "willreturn");
        LLVMAddAttributeAtIndex(wrapper, LLVMAttributeFunctionIndex, memory_none(g));
        if (g->cpu_name && *g->cpu_name)
            kj_codegen_add_string_attr(g, wrapper, "target-cpu", g->cpu_name);
        if (g->cpu_features && *g->cpu_features)
            kj_codegen_add_string_attr(g, wrapper, "target-features", g->cpu_features);
        LLVMBuilderRef b = LLVMCreateBuilderInContext(g->ctx);
        LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(g->ctx, wrapper, "entry"));
        LLVMValueRef zero = LLVMConstInt(g->t_i32, 0, 0);
        LLVMValueRef vargs[2];
        for (int i = 0; i < arity; i++) {
            LLVMValueRef one = LLVMBuildInsertElement(b, LLVMGetPoison(vt), LLVMGetParam(wrapper, (unsigned)i),
                                                      zero, "");
            vargs[i] = LLVMBuildShuffleVector(b, one, LLVMGetPoison(vt),
                                              LLVMConstNull(LLVMVectorType(g->t_i32, (unsigned)lanes)), "");
        }
        LLVMValueRef r = LLVMBuildCall2(b, vft, vfn, vargs, (unsigned)arity, "");
        LLVMBuildRet(b, LLVMBuildExtractElement(b, r, zero, ""));
        LLVMDisposeBuilder(b);
    }
    LLVMValueRef call = LLVMBuildCall2(g->b, ft, wrapper, args, (unsigned)arity, "");
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, memory_none(g));
    char variant[256];
    int len = snprintf(variant, sizeof variant, "_ZGV_LLVM_N%d%s_%s(%s)", lanes, arity == 1 ? "v" : "vv",
                       wname, vname);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex,
                             LLVMCreateStringAttribute(g->ctx, "vector-function-abi-variant", 27, variant,
                                                       (unsigned)len));
    return call;
}

/* lgamma through lgamma_r: plain lgamma writes the global signgam, a data race
 * when the parallel target runs it on several threads.  The rest is the
 * shared lowering's (llvm.round, frem, libm). */
static LLVMValueRef cpu_math(Gen *g, KjMathFn math, LLVMValueRef *args, int arity)
{
    if (math != KJ_MATH_LGAMMA)
        return NULL;
    LLVMValueRef x = args[0];
    LLVMTypeRef t = LLVMTypeOf(x);
    bool is_f32 = t == g->t_f32;
    LLVMValueRef sign = kj_codegen_alloca_in_entry(g, g->t_i32, "signgam");
    LLVMTypeRef ps[2] = {t, g->t_ptr};
    LLVMTypeRef ft = LLVMFunctionType(t, ps, 2, 0);
    LLVMValueRef fn = kj_codegen_extern(g, is_f32 ? "lgammaf_r" : "lgamma_r", ft);
    LLVMValueRef call_args[2] = {x, sign};
    return LLVMBuildCall2(g->b, ft, fn, call_args, 2, "");
}

/* ============================================================ kernels */

/* Whether fn's impl runs as a kernel thread: a kernel, or a device function
 * (a plain function that uses kernel built-ins, which only kernels call). */
static bool runs_on_thread(const KjIrFunction *fn)
{
    return fn->kind == KJ_IR_FN_KERNEL || (fn->kind == KJ_IR_FN_PLAIN && fn->device_use);
}

/* A kernel's or device function's impl takes ctx and threadIdx.x/y/z after
 * its parameters; a vectorized kernel's, the [begin, end) of its PARFOR. */
static int cpu_hidden_params(Gen *g, const KjIrFunction *fn, LLVMTypeRef *types)
{
    if (runs_on_thread(fn)) {
        types[0] = g->t_ptr;
        types[1] = types[2] = types[3] = g->t_i32;
        return 4;
    }
    if (fn->kind == KJ_IR_FN_VEC_KERNEL) {
        types[0] = types[1] = g->t_i64;
        return 2;
    }
    return 0;
}

static void cpu_bind_hidden_params(Gen *g, const KjIrFunction *fn, unsigned p)
{
    if (fn->kind == KJ_IR_FN_VEC_KERNEL) {
        g->range_begin = LLVMGetParam(g->llfn, p++);
        g->range_end = LLVMGetParam(g->llfn, p++);
        return;
    }
    if (!runs_on_thread(fn))
        return;
    /* The special registers are read once: ctx is noalias, and SSA values
     * keep them out of the way of the kernel's own stores. */
    kj_codegen_add_param_attr(g, g->llfn, p, "noalias", 0);
    g->thread_ctx = LLVMGetParam(g->llfn, p++);
    for (int k = 0; k < 3; k++)
        g->sreg[KJ_SREG_TID_X + k] = LLVMGetParam(g->llfn, p++);
    for (int field = 1; field < 4; field++)
        for (int k = 0; k < 3; k++) {
            LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, field), const_i32(g, k)};
            LLVMValueRef ptr = LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, g->thread_ctx, idx, 3, "");
            g->sreg[KJ_SREG_TID_X + field * 3 + k] = LLVMBuildLoad2(g->b, g->t_i32, ptr, "");
        }
    /* code specialised for one block shape: blockDim is a constant */
    if (g->options->block_dims[0])
        for (int k = 0; k < 3; k++)
            g->sreg[KJ_SREG_BDIM_X + k] = const_i32(g, (int32_t)g->options->block_dims[k]);
    g->shared_guard = NULL;
    if (impl_owns_shared(fn)) {
        const KjIrFunction *kernel = fn->split_of;
        int64_t bytes = kernel->shared_bytes;
        bool guard = kj_pipeline_verify_default();
        LLVMTypeRef t = LLVMArrayType2(g->t_i8, (uint64_t)(bytes + (guard ? KJ_SHARED_GUARD_BYTES : 0)));
        LLVMValueRef block_shared = LLVMBuildAlloca(g->b, t, "block.shared");
        LLVMSetAlignment(block_shared, 64);
        if (!kj_split_writes_shared(kernel, g->options->block_dims))
            LLVMBuildMemSet(g->b, block_shared, LLVMConstInt(g->t_i8, 0, 0), const_i64(g, bytes), 64);
        if (guard) {
            LLVMValueRef at = const_i64(g, bytes);
            g->shared_guard = LLVMBuildInBoundsGEP2(g->b, g->t_i8, block_shared, &at, 1, "shared.guard");
            LLVMBuildMemSet(g->b, g->shared_guard, LLVMConstInt(g->t_i8, KJ_SHARED_GUARD_BYTE, 0),
                            const_i64(g, KJ_SHARED_GUARD_BYTES), 1);
        }
        g->shared_base = block_shared;
        return;
    }
    LLVMValueRef sp = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 4, "");
    g->shared_base = LLVMBuildLoad2(g->b, g->t_ptr, sp, "shared");
}

/* A kernel or device function calling a device function passes on its
 * thread: the same ctx and threadIdx. */
static int cpu_hidden_args(Gen *g, const KjIrFunction *callee, LLVMValueRef *out)
{
    if (!runs_on_thread(callee))
        return 0;
    if (!g->thread_ctx) {
        kj_codegen_error(g, "the device function %s is called outside a kernel", callee->name);
        return 0;
    }
    out[0] = g->thread_ctx;
    for (int k = 0; k < 3; k++)
        out[1 + k] = g->sreg[KJ_SREG_TID_X + k];
    return 4;
}

static LLVMValueRef cpu_read_sreg(Gen *g, KjSpecialReg reg)
{
    if (!g->sreg[reg]) {
        kj_codegen_error(g, "%s is only available in kernels and device functions",
                         kj_special_reg_names[reg]);
        return const_i32(g, 0);
    }
    return g->sreg[reg];
}

/* The runtime's barrier, called through the context so that compiled code
 * names no runtime symbol: on fibers when the block's threads share a CPU. */
static void cpu_syncthreads(Gen *g)
{
    if (!g->thread_ctx) {
        kj_codegen_error(g, "syncthreads() is only available in kernels%s", NULL);
        return;
    }
    LLVMTypeRef ft = LLVMFunctionType(g->t_void, &g->t_ptr, 1, 0);
    LLVMValueRef slot = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 6, "");
    LLVMValueRef barrier = LLVMBuildLoad2(g->b, g->t_ptr, slot, "syncthreads");
    LLVMBuildCall2(g->b, ft, barrier, &g->thread_ctx, 1, "");
}

static LLVMValueRef cpu_shared_array(Gen *g, const KjType *elem, int64_t count, int64_t offset)
{
    int64_t bytes = count * kj_type_size(elem);
    if (!g->shared_base) {
        kj_codegen_error(g, "shared() is only available in kernels%s", NULL);
        return LLVMConstNull(g->t_ptr);
    }
    /* Each shared() call has its own 16-byte aligned slice of ctx->shared,
     * at the offset the checker gave it as it summed them into shared_bytes
     * (kj_shared_slice_bytes): a copy of the call (split_specialise.c
     * versions a region into two) names the same slice, where a running
     * count gave the second copy memory past the block's (campaign seeds
     * 5289, 5802).  shared_offset keeps the end reached, for the check. */
    int64_t end = offset + kj_shared_slice_bytes(bytes);
    if (end > g->shared_offset)
        g->shared_offset = end;
    LLVMValueRef off = const_i64(g, offset);
    return LLVMBuildInBoundsGEP2(g->b, g->t_i8, g->shared_base, &off, 1, "shared");
}

/* The launch's dynamic shared memory: ctx->dynamic_shared, of
 * ctx->dynamic_shared_bytes (the runtime puts it after the static arrays). */
static LLVMValueRef cpu_dynamic_shared(Gen *g, LLVMValueRef *bytes)
{
    if (!g->thread_ctx) {
        kj_codegen_error(g, "shared() is only available in kernels%s", NULL);
        *bytes = const_i64(g, 0);
        return LLVMConstNull(g->t_ptr);
    }
    LLVMValueRef size = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 9, "");
    *bytes = LLVMBuildLoad2(g->b, g->t_i64, size, "dynamic_bytes");
    LLVMValueRef data = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 8, "");
    return LLVMBuildLoad2(g->b, g->t_ptr, data, "dynamic_shared");
}

/* The lane of this thread: its linear index in the block, modulo 32. */
static LLVMValueRef cpu_lane(Gen *g)
{
    LLVMValueRef tz = LLVMBuildMul(g->b, g->sreg[KJ_SREG_TID_Z], g->sreg[KJ_SREG_BDIM_Y], "");
    LLVMValueRef tyz = LLVMBuildAdd(g->b, g->sreg[KJ_SREG_TID_Y], tz, "");
    LLVMValueRef linear = LLVMBuildAdd(g->b, g->sreg[KJ_SREG_TID_X],
                                       LLVMBuildMul(g->b, tyz, g->sreg[KJ_SREG_BDIM_X], ""), "");
    return LLVMBuildAnd(g->b, linear, const_i32(g, KJ_WARP_SIZE - 1), "lane");
}

/* The bits of a scalar, zero-extended to an i64 (a bool is 0 or 1). */
static LLVMValueRef to_bits64(Gen *g, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    if (t == g->t_f32)
        v = LLVMBuildBitCast(g->b, v, g->t_i32, "");
    else if (t == g->t_f64)
        v = LLVMBuildBitCast(g->b, v, g->t_i64, "");
    return LLVMTypeOf(v) == g->t_i64 ? v : LLVMBuildZExt(g->b, v, g->t_i64, "");
}

static LLVMValueRef from_bits64(Gen *g, LLVMValueRef bits, const KjType *type)
{
    if (type->kind == KJ_TYPE_BOOL)
        return LLVMBuildICmp(g->b, LLVMIntNE, bits, const_i64(g, 0), "");
    LLVMTypeRef t = llty(g, type);
    if (t == g->t_f32)
        return LLVMBuildBitCast(g->b, LLVMBuildTrunc(g->b, bits, g->t_i32, ""), t, "");
    if (t == g->t_f64)
        return LLVMBuildBitCast(g->b, bits, t, "");
    return t == g->t_i64 ? bits : LLVMBuildTrunc(g->b, bits, t, "");
}

/* One call of ctx->collective: the runtime's result of collective `op` for
 * this lane, given its value (in 64 bits), argument and mask. */
static LLVMValueRef collective_call(Gen *g, KjExecOp op, LLVMValueRef value, LLVMValueRef arg,
                                    LLVMValueRef mask)
{
    LLVMTypeRef ps[5] = {g->t_ptr, g->t_i32, g->t_i64, g->t_i32, g->t_i32};
    LLVMTypeRef ft = LLVMFunctionType(g->t_i64, ps, 5, 0);
    LLVMValueRef slot = LLVMBuildStructGEP2(g->b, g->t_thread_ctx, g->thread_ctx, 7, "");
    LLVMValueRef collective = LLVMBuildLoad2(g->b, g->t_ptr, slot, "collective");
    LLVMValueRef call_args[5] = {g->thread_ctx, const_i32(g, (int32_t)op), value, arg, mask};
    return LLVMBuildCall2(g->b, ft, collective, call_args, 5, "");
}

/* mma(): one meeting of the warp, whose runtime computes every lane's
 * results (cpu.c's warp_mma, the operations of codegen_mma.c) from the
 * lanes' {a, b, c0, c1}, passed by address, into their c0 and c1. */
static LLVMValueRef cpu_mma(Gen *g, LLVMValueRef *args)
{
    LLVMTypeRef four = LLVMArrayType(g->t_f64, 4);
    LLVMValueRef io = kj_codegen_alloca_in_entry(g, four, "mma.io");
    LLVMValueRef slot[4];
    for (int i = 0; i < 4; i++) {
        LLVMValueRef idx[2] = {const_i32(g, 0), const_i32(g, i)};
        slot[i] = LLVMBuildInBoundsGEP2(g->b, four, io, idx, 2, "");
        LLVMBuildStore(g->b, args[1 + i], slot[i]);
    }
    collective_call(g, KJ_EXEC_MMA, LLVMBuildPtrToInt(g->b, io, g->t_i64, ""), const_i32(g, 0),
                    args[0]);
    LLVMValueRef d0 = LLVMBuildLoad2(g->b, g->t_f64, slot[2], "d0");
    LLVMValueRef d1 = LLVMBuildLoad2(g->b, g->t_f64, slot[3], "d1");
    return make_complex(g, llty(g, kj_type_scalar(KJ_TYPE_C128)), d0, d1);
}

/*
 * The execution-model built-ins.  laneid() is computed here and the fences
 * are fences (the threads of a block share one OS thread, but blocks of the
 * parallel target do not).  Every collective calls the runtime through
 * ctx->collective, which runs it as a meeting point of the fibers of the warp
 * (or the block, or the grid) and hands each lane its result (cpu.c); mma()
 * passes its four operands by address and gets its two results there.
 */
static LLVMValueRef cpu_exec(Gen *g, KjExecOp op, const KjType *type, LLVMValueRef *args, int count)
{
    if (!g->thread_ctx) {
        kj_codegen_error(g, "%s() is only available in kernels", kj_exec_names[op]);
        return type->kind == KJ_TYPE_VOID ? NULL : zero_of(g, type);
    }
    switch (kj_exec_form[op]) {
    case KJ_EXEC_FORM_LANE:
        return cpu_lane(g);
    case KJ_EXEC_FORM_FENCE:
        LLVMBuildFence(g->b, LLVMAtomicOrderingSequentiallyConsistent, 0, "");
        return NULL;
    default:
        break;
    }
    if (op == KJ_EXEC_MMA)
        return cpu_mma(g, args);
    /* Operands by the IR's layout (KJ_EXEC_OPS' form): a warp op's mask
     * first, then the value the collective takes (in 64 bits) and its
     * argument (a shuffle's lane). */
    LLVMValueRef mask = const_i32(g, -1), value = const_i64(g, 0), arg = const_i32(g, 0);
    int first = 0;
    if (kj_exec_form[op] == KJ_EXEC_FORM_WARP && count > 0) /* activemask() has no mask */
        mask = args[first++];
    if (count > first)
        value = to_bits64(g, args[first]);
    if (count > first + 1)
        arg = args[first + 1];
    LLVMValueRef bits = collective_call(g, op, value, arg, mask);
    return type->kind == KJ_TYPE_VOID ? NULL : from_bits64(g, bits, type);
}

/* The iterations [begin, end) the runtime hands to __range. */
static bool cpu_parfor_range(Gen *g, KjIrStmt *s, LLVMValueRef *begin, LLVMValueRef *end,
                             LLVMValueRef *step)
{
    if (!g->range_begin) {
        kj_codegen_error(g, "a parallel loop outside a vectorized kernel%s", NULL);
        return false;
    }
    *begin = g->range_begin;
    *end = g->range_end;
    *step = const_i64(g, 1);
    return true;
}

/* ============================================================ entry points */

/* Unpacks `void **args` (cpu entries) into impl arguments. */
static int unpack_args(Gen *g, const KjIrFunction *fn, LLVMValueRef args_ptr, LLVMValueRef *out)
{
    uint32_t contiguous = kj_codegen_root_contiguous(g, fn);
    int n = 0;
    for (int i = 0; i < fn->param_count; i++) {
        const KjType *t = fn->params[i]->type;
        LLVMValueRef idx = const_i64(g, i);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->t_ptr, args_ptr, &idx, 1, "");
        LLVMValueRef p = LLVMBuildLoad2(g->b, g->t_ptr, slot, fn->params[i]->name);
        if (is_array(t)) {
            ArrayVal a;
            kj_codegen_array_from_desc(g, p, g->t_desc, t, param_contiguous(contiguous, i), &a);
            n += kj_codegen_array_args(&a, out + n);
        } else {
            out[n++] = from_mem(g, t, LLVMBuildLoad2(g->b, memty(g, t), p, ""));
        }
    }
    return n;
}


/* Checked mode: the KjCheckRecord's address, in args[param_count], and a
 * fresh state for this thread, as the impl's last two arguments. */
static int check_args(Gen *g, const KjIrFunction *fn, LLVMValueRef args_ptr, LLVMValueRef *out)
{
    if (!g->options->checks)
        return 0;
    LLVMValueRef idx = const_i64(g, fn->param_count);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->t_ptr, args_ptr, &idx, 1, "");
    LLVMValueRef record = LLVMBuildLoad2(g->b, g->t_ptr, slot, "check.record");
    return kj_codegen_check_entry_args(g, record, out);
}

/* __block of a kernel with a split form: one call of the split impl runs the
 * whole block, its THREADS loops walking the threads between barriers (the
 * threadIdx it is handed is not read). */
static void emit_split_block_entry(Gen *g, const KjIrFunction *fn, LLVMValueRef *args)
{
    FnInfo *split = kj_codegen_fn_info(g, fn->split);
    LLVMTypeRef two_ptrs[2] = {g->t_ptr, g->t_ptr};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__block", LLVMFunctionType(g->t_void, two_ptrs, 2, 0));
    int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
    args[n++] = LLVMGetParam(e, 1);
    for (int k = 0; k < 3; k++)
        args[n++] = const_i32(g, 0);
    n += check_args(g, fn, LLVMGetParam(e, 0), args + n);
    LLVMBuildCall2(g->b, split->impl_type, split->impl, args, (unsigned)n, "");
    LLVMBuildRetVoid(g->b);
}

/* ============================================================ SIMD entry points */

/* Counts `counter` (an i32 or i64 alloca) from 0 while below `limit`: the
 * builder is left in the body; close_count finishes the loop. */
typedef struct Count {
    LLVMValueRef counter;
    LLVMTypeRef type;
    LLVMBasicBlockRef cond, exit;
} Count;

static Count open_count(Gen *g, LLVMTypeRef type, LLVMValueRef start, LLVMValueRef limit, const char *name)
{
    /* the counter in the entry block, where mem2reg promotes it */
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(g->ctx);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(g->llfn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first)
        LLVMPositionBuilderBefore(ab, first);
    else
        LLVMPositionBuilderAtEnd(ab, entry);
    Count c = {LLVMBuildAlloca(ab, type, name), type, new_block(g, "count.cond"), new_block(g, "count.exit")};
    LLVMDisposeBuilder(ab);
    LLVMBasicBlockRef body = new_block(g, "count.body");
    LLVMBuildStore(g->b, start, c.counter);
    LLVMBuildBr(g->b, c.cond);
    LLVMPositionBuilderAtEnd(g->b, c.cond);
    LLVMValueRef t = LLVMBuildLoad2(g->b, type, c.counter, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, t, limit, ""), body, c.exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    return c;
}

static void close_count(Gen *g, Count c, LLVMValueRef step)
{
    LLVMValueRef t = LLVMBuildLoad2(g->b, c.type, c.counter, "");
    LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, t, step, ""), c.counter);
    LLVMBuildBr(g->b, c.cond);
    LLVMPositionBuilderAtEnd(g->b, c.exit);
}

/* Calls `chunk` for [from, from + count) lanes at a time: whole chunks of
 * `lanes` (their count a constant, so the inlined chunk's masks fold away),
 * then the rest, if any.  `args[at]` and `args[at_count]` take the chunk's
 * first index and its count. */
static void call_chunks(Gen *g, LLVMValueRef chunk, LLVMTypeRef chunk_type, LLVMValueRef *args, int n,
                        int at, int at_count, LLVMTypeRef index_type, LLVMValueRef from, LLVMValueRef to,
                        int lanes)
{
    LLVMValueRef width = LLVMConstInt(index_type, (unsigned)lanes, 0);
    /* whole chunks while to - i >= lanes (no overflow near the top of the range) */
    LLVMValueRef last = LLVMBuildSub(g->b, to, LLVMConstInt(index_type, (unsigned)lanes - 1, 0), "");
    LLVMValueRef whole_end = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, to, from, ""), last, from, "");
    Count c = open_count(g, index_type, from, whole_end, "chunk");
    args[at] = LLVMBuildLoad2(g->b, index_type, c.counter, "first");
    args[at_count] = const_i32(g, lanes);
    LLVMBuildCall2(g->b, chunk_type, chunk, args, (unsigned)n, "");
    close_count(g, c, width);
    LLVMValueRef first = LLVMBuildLoad2(g->b, index_type, c.counter, "first");
    LLVMBasicBlockRef tail = new_block(g, "chunk.tail"), done = new_block(g, "chunk.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, first, to, ""), tail, done);
    LLVMPositionBuilderAtEnd(g->b, tail);
    args[at] = first;
    LLVMValueRef rest = LLVMBuildSub(g->b, to, first, "");
    args[at_count] = index_type == g->t_i32 ? rest : LLVMBuildTrunc(g->b, rest, g->t_i32, "");
    LLVMBuildCall2(g->b, chunk_type, chunk, args, (unsigned)n, "");
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

/* The address of ctx's field `field`, element k of it (k < 0: the field
 * itself). */
static LLVMValueRef ctx_field(Gen *g, LLVMValueRef ctx, int field, int k)
{
    LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, field), const_i32(g, k)};
    return LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, k < 0 ? 2 : 3, "");
}

/* memset(ctx's pointer field `field`, 0, bytes) when bytes is not 0. */
static void zero_shared(Gen *g, LLVMValueRef ctx, LLVMValueRef bytes, int field)
{
    LLVMBasicBlockRef zero = new_block(g, "zero"), done = new_block(g, "zero.done");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntNE, bytes, const_i64(g, 0), ""), zero, done);
    LLVMPositionBuilderAtEnd(g->b, zero);
    LLVMValueRef base = LLVMBuildLoad2(g->b, g->t_ptr, ctx_field(g, ctx, field, -1), "");
    LLVMBuildMemSet(g->b, base, LLVMConstInt(LLVMInt8TypeInContext(g->ctx), 0, 0), bytes, 16);
    LLVMBuildBr(g->b, done);
    LLVMPositionBuilderAtEnd(g->b, done);
}

/* Grid rows of fewer blocks run block by block (kj_codegen_rows_first). */
enum { KJ_ROWS_FIRST_MIN_BLOCKS = 4 };

/* Checked mode's rows (codegen_check.c): the call's record, each row's,
 * the failure kept, and the thread state the impl takes. */
typedef struct RowChecks {
    LLVMValueRef record, row, kept, state;
} RowChecks;

/*
 * __blocks' loop when kj_codegen_rows_first: the blocks of [begin, end) in
 * runs along a row of the grid (the same blockIdx.y and .z); for each run,
 * each row of threadIdx.z, .y of every block of the run in turn, the split
 * impl called for one row (its threadIdx parameters).  No shared memory to
 * zero.  at[]: blockIdx's allocas, holding the first block's; args[tid_at]
 * the impl's threadIdx.x; checks: checked mode's (NULL: none).
 */
static void emit_rows_first(Gen *g, FnInfo *split, LLVMValueRef ctx, LLVMValueRef begin, LLVMValueRef end,
                            LLVMValueRef gx, LLVMValueRef gy, LLVMValueRef at[3], LLVMValueRef *args, int n,
                            int tid_at, const RowChecks *checks)
{
    const uint32_t *dims = g->options->block_dims;
    LLVMValueRef done = LLVMBuildAlloca(g->b, g->t_i64, "done");
    LLVMBuildStore(g->b, begin, done);
    LLVMBasicBlockRef cond = new_block(g, "runs.cond"), body = new_block(g, "runs.body"),
                      exit = new_block(g, "runs.exit");
    LLVMBuildBr(g->b, cond);
    LLVMPositionBuilderAtEnd(g->b, cond);
    LLVMValueRef b = LLVMBuildLoad2(g->b, g->t_i64, done, "");
    LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, b, end, ""), body, exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    LLVMValueRef bx = LLVMBuildLoad2(g->b, g->t_i64, at[0], "");
    LLVMValueRef by = LLVMBuildLoad2(g->b, g->t_i64, at[1], "");
    LLVMValueRef bz = LLVMBuildLoad2(g->b, g->t_i64, at[2], "");
    /* the run: to the end of the grid's row or of the chunk */
    LLVMValueRef left = LLVMBuildSub(g->b, end, b, ""), row_left = LLVMBuildSub(g->b, gx, bx, "");
    LLVMValueRef count = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, left, row_left, ""), left,
                                         row_left, "run");
    LLVMValueRef last = LLVMBuildAdd(g->b, bx, count, "");
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, by, g->t_i32, ""), ctx_field(g, ctx, 1, 1));
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, bz, g->t_i32, ""), ctx_field(g, ctx, 1, 2));
    Count z = open_count(g, g->t_i32, const_i32(g, 0), const_i32(g, (int32_t)dims[2]), "row.z");
    LLVMValueRef tz = LLVMBuildLoad2(g->b, g->t_i32, z.counter, "");
    Count y = open_count(g, g->t_i32, const_i32(g, 0), const_i32(g, (int32_t)dims[1]), "row.y");
    LLVMValueRef ty = LLVMBuildLoad2(g->b, g->t_i32, y.counter, "");
    Count x = open_count(g, g->t_i64, bx, last, "row.block");
    kj_codegen_cancel_poll(g); /* before each block's row */
    LLVMValueRef block = LLVMBuildLoad2(g->b, g->t_i64, x.counter, "");
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, block, g->t_i32, ""), ctx_field(g, ctx, 1, 0));
    /* args: the impl's, its threadIdx from tid_at (x 0: one row) */
    args[tid_at] = const_i32(g, 0);
    args[tid_at + 1] = ty;
    args[tid_at + 2] = tz;
    if (checks) /* each row starts running, whatever the one before did */
        LLVMBuildStore(g->b, const_i32(g, 0), checks->state);
    LLVMValueRef call = LLVMBuildCall2(g->b, split->impl_type, split->impl, args, (unsigned)n, "");
    unsigned inline_kind = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, inline_kind, 0));
    if (checks)
        kj_codegen_check_keep_row(g, checks->row, checks->kept, gx, gy, dims);
    close_count(g, x, const_i64(g, 1));
    close_count(g, y, const_i32(g, 1));
    close_count(g, z, const_i32(g, 1));
    /* the next run starts a row of the grid */
    LLVMBuildStore(g->b, LLVMBuildAdd(g->b, b, count, ""), done);
    LLVMValueRef ny = LLVMBuildAdd(g->b, by, const_i64(g, 1), "");
    LLVMValueRef wrap_y = LLVMBuildICmp(g->b, LLVMIntEQ, ny, gy, "");
    LLVMBuildStore(g->b, const_i64(g, 0), at[0]);
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap_y, const_i64(g, 0), ny, ""), at[1]);
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap_y, LLVMBuildAdd(g->b, bz, const_i64(g, 1), ""), bz, ""), at[2]);
    LLVMBuildBr(g->b, cond);
    LLVMPositionBuilderAtEnd(g->b, exit);
    if (checks)
        kj_codegen_check_claim_kept(g, checks->record, checks->kept);
    LLVMBuildRetVoid(g->b);
}

/*
 * __blocks(args, ctx, begin, end, zero_bytes) of code for one block shape: the blocks of
 * linear index [begin, end) in turn (x fastest), each through the split impl
 * inlined here, so that what its prologue loads and builds (the arguments,
 * the context's fields, constants) is hoisted out of the loop over blocks.
 * The runtime fills ctx as for __block; every block has the same shared
 * memory, ctx->shared and ctx->dynamic_shared, which the loop zeroes before
 * each block as runtime/cpu.c would: the first `zero_bytes` bytes of
 * ctx->shared (0 where the code writes its static shared memory before
 * reading it, kj_split_writes_shared) and ctx->dynamic_shared_bytes of
 * ctx->dynamic_shared.  blockIdx is written to ctx->block_idx before each
 * block, where the impl reads it.
 */
static LLVMValueRef emit_split_blocks_entry(Gen *g, const KjIrFunction *fn, LLVMValueRef *args)
{
    FnInfo *split = kj_codegen_fn_info(g, fn->split);
    LLVMTypeRef ps[5] = {g->t_ptr, g->t_ptr, g->t_i64, g->t_i64, g->t_i64};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__blocks", LLVMFunctionType(g->t_void, ps, 5, 0));
    LLVMValueRef ctx = LLVMGetParam(e, 1), begin = LLVMGetParam(e, 2), end = LLVMGetParam(e, 3);
    LLVMValueRef zero_bytes = LLVMGetParam(e, 4);
    /* the context is the runtime's, apart from the shared memory it points to */
    kj_codegen_add_param_attr(g, e, 1, "noalias", 0);
    int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
    args[n++] = ctx;
    int tid_at = n;
    for (int k = 0; k < 3; k++)
        args[n++] = const_i32(g, 0);
    int checks = check_args(g, fn, LLVMGetParam(e, 0), args + n);
    n += checks;
    LLVMValueRef gx = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, ctx_field(g, ctx, 3, 0), "gx"), g->t_i64, "");
    LLVMValueRef gy = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, ctx_field(g, ctx, 3, 1), "gy"), g->t_i64, "");
    /* the first block's coordinates by division, the others by stepping */
    LLVMValueRef bx0 = LLVMBuildURem(g->b, begin, gx, "");
    LLVMValueRef row = LLVMBuildUDiv(g->b, begin, gx, "");
    LLVMValueRef by0 = LLVMBuildURem(g->b, row, gy, "");
    LLVMValueRef bz0 = LLVMBuildUDiv(g->b, row, gy, "");
    /* blockIdx in allocas of the entry block (mem2reg makes them SSA), set
     * there before the loop */
    LLVMValueRef at[3];
    const char *names[3] = {"bx", "by", "bz"};
    LLVMValueRef firsts[3] = {bx0, by0, bz0};
    for (int k = 0; k < 3; k++) {
        at[k] = LLVMBuildAlloca(g->b, g->t_i64, names[k]);
        LLVMBuildStore(g->b, firsts[k], at[k]);
    }
    if (kj_codegen_rows_first(g, fn->split)) {
        /* rows first along a grid row of some blocks; along a short one
         * (a few blocks, some of them on its edge) the tests made for each
         * row cost more than the streams save (docs/performance.md) */
        LLVMBasicBlockRef rows = new_block(g, "rows"), blocks = new_block(g, "blocks");
        LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntUGE, gx, const_i64(g, KJ_ROWS_FIRST_MIN_BLOCKS), ""),
                        rows, blocks);
        LLVMPositionBuilderAtEnd(g->b, rows);
        RowChecks row_checks = {0};
        if (checks) { /* the record and the state are the last two */
            row_checks.record = args[n - 2];
            row_checks.state = args[n - 1];
            row_checks.row = kj_codegen_check_row_record(g, row_checks.record, &row_checks.kept);
            args[n - 2] = row_checks.row;
        }
        emit_rows_first(g, split, ctx, begin, end, gx, gy, at, args, n, tid_at, checks ? &row_checks : NULL);
        if (checks)
            args[n - 2] = row_checks.record;
        LLVMPositionBuilderAtEnd(g->b, blocks);
        /* threadIdx.x 1: the whole block */
        args[tid_at] = const_i32(g, 1);
        args[tid_at + 1] = args[tid_at + 2] = const_i32(g, 0);
    }
    Count c = open_count(g, g->t_i64, begin, end, "block");
    kj_codegen_cancel_poll(g); /* before each block */
    if (!impl_owns_shared(fn->split)) /* (else the impl zeroes its own, as it must) */
        zero_shared(g, ctx, zero_bytes, 4);
    LLVMValueRef dynamic_bytes = LLVMBuildLoad2(g->b, g->t_i64, ctx_field(g, ctx, 9, -1), "");
    zero_shared(g, ctx, dynamic_bytes, 8);
    LLVMValueRef bx = LLVMBuildLoad2(g->b, g->t_i64, at[0], "");
    LLVMValueRef by = LLVMBuildLoad2(g->b, g->t_i64, at[1], "");
    LLVMValueRef bz = LLVMBuildLoad2(g->b, g->t_i64, at[2], "");
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, bx, g->t_i32, ""), ctx_field(g, ctx, 1, 0));
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, by, g->t_i32, ""), ctx_field(g, ctx, 1, 1));
    LLVMBuildStore(g->b, LLVMBuildTrunc(g->b, bz, g->t_i32, ""), ctx_field(g, ctx, 1, 2));
    if (checks) /* each block starts running, whatever the one before did */
        LLVMBuildStore(g->b, const_i32(g, 0), args[n - 1]);
    LLVMValueRef call = LLVMBuildCall2(g->b, split->impl_type, split->impl, args, (unsigned)n, "");
    unsigned inline_kind = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, inline_kind, 0));
    /* step: x, then y when x wraps, then z when y wraps */
    LLVMValueRef nx = LLVMBuildAdd(g->b, bx, const_i64(g, 1), "");
    LLVMValueRef wrap_x = LLVMBuildICmp(g->b, LLVMIntEQ, nx, gx, "");
    LLVMValueRef ny = LLVMBuildSelect(g->b, wrap_x, LLVMBuildAdd(g->b, by, const_i64(g, 1), ""), by, "");
    LLVMValueRef wrap_y = LLVMBuildICmp(g->b, LLVMIntEQ, ny, gy, "");
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap_x, const_i64(g, 0), nx, ""), at[0]);
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap_y, const_i64(g, 0), ny, ""), at[1]);
    LLVMBuildStore(g->b, LLVMBuildSelect(g->b, wrap_y, LLVMBuildAdd(g->b, bz, const_i64(g, 1), ""), bz, ""), at[2]);
    close_count(g, c, const_i64(g, 1));
    LLVMBuildRetVoid(g->b);
    return e;
}

/*
 * __block of code for one block shape: __blocks for the one block of
 * ctx->block_idx, so that the split impl (inlined into __blocks) is compiled
 * once, not twice.  The runtime has zeroed the block's shared memory, so
 * __blocks is asked to zero none of the static part; it zeroes the dynamic
 * part again (zeros over zeros).  The call is kept (noinline): inlined, it
 * would be the second copy this avoids.
 */
static void emit_one_of_blocks_entry(Gen *g, const KjIrFunction *fn, LLVMValueRef blocks)
{
    LLVMTypeRef two_ptrs[2] = {g->t_ptr, g->t_ptr};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__block", LLVMFunctionType(g->t_void, two_ptrs, 2, 0));
    LLVMValueRef ctx = LLVMGetParam(e, 1);
    LLVMValueRef idx[3], dims[2];
    for (int k = 0; k < 3; k++)
        idx[k] = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, ctx_field(g, ctx, 1, k), "bidx"), g->t_i64, "");
    for (int k = 0; k < 2; k++)
        dims[k] = LLVMBuildZExt(g->b, LLVMBuildLoad2(g->b, g->t_i32, ctx_field(g, ctx, 3, k), "gdim"), g->t_i64, "");
    /* x fastest, as __blocks numbers the blocks */
    LLVMValueRef linear = LLVMBuildAdd(
        g->b, idx[0], LLVMBuildMul(g->b, dims[0], LLVMBuildAdd(g->b, idx[1], LLVMBuildMul(g->b, dims[1], idx[2], ""), ""), ""), "");
    LLVMValueRef call_args[5] = {LLVMGetParam(e, 0), ctx, linear,
                                 LLVMBuildAdd(g->b, linear, const_i64(g, 1), ""), const_i64(g, 0)};
    LLVMTypeRef ps[5] = {g->t_ptr, g->t_ptr, g->t_i64, g->t_i64, g->t_i64};
    LLVMValueRef call = LLVMBuildCall2(g->b, LLVMFunctionType(g->t_void, ps, 5, 0), blocks, call_args, 5, "");
    unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", 8);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, noinline, 0));
    LLVMBuildRetVoid(g->b);
}

/* __block on SIMD lanes: threadIdx.x in chunks of `lanes`, y and z in
 * loops around them (z outermost), as the scalar __block walks them. */
static void emit_simd_block(Gen *g, KjIrFunction *fn, int lanes, LLVMValueRef *args)
{
    LLVMTypeRef chunk_type;
    LLVMValueRef chunk = kj_simd_define_chunk(g, fn, lanes, &chunk_type);
    LLVMTypeRef two_ptrs[2] = {g->t_ptr, g->t_ptr};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__block", LLVMFunctionType(g->t_void, two_ptrs, 2, 0));
    LLVMValueRef ctx = LLVMGetParam(e, 1);
    int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
    args[n] = ctx;
    LLVMValueRef dims[3];
    for (int k = 0; k < 3; k++) {
        LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 2), const_i32(g, k)};
        dims[k] = LLVMBuildLoad2(g->b, g->t_i32, LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, 3, ""), "bdim");
    }
    /* checked mode: the chunks claim the call's record (codegen_simd_check.c) */
    int record = 0;
    if (g->options->checks) {
        LLVMValueRef idx = const_i64(g, fn->param_count);
        LLVMValueRef slot = LLVMBuildInBoundsGEP2(g->b, g->t_ptr, LLVMGetParam(e, 0), &idx, 1, "");
        args[n + 5] = LLVMBuildLoad2(g->b, g->t_ptr, slot, "check.record");
        record = 1;
    }
    Count z = open_count(g, g->t_i32, const_i32(g, 0), dims[2], "tz");
    args[n + 3] = LLVMBuildLoad2(g->b, g->t_i32, z.counter, "");
    Count y = open_count(g, g->t_i32, const_i32(g, 0), dims[1], "ty");
    args[n + 2] = LLVMBuildLoad2(g->b, g->t_i32, y.counter, "");
    call_chunks(g, chunk, chunk_type, args, n + 5 + record, n + 1, n + 4, g->t_i32, const_i32(g, 0), dims[0],
                lanes);
    close_count(g, y, const_i32(g, 1));
    close_count(g, z, const_i32(g, 1));
    LLVMBuildRetVoid(g->b);
}

/*
 * __xrange(args, ctx, begin, end) of a kernel that runs as rows of its grid
 * (kj_grid_rows): the threads of one row of the grid whose grid() x lies in
 * [begin, end), in chunks of `lanes` from begin, through a chunk of the
 * kernel whose guard is taken as true (the runtime runs only the threads
 * that pass it: KjGridRows.bounds).  The runtime (kj_cpu_run_rows) gives the row as blockIdx.y and .z
 * in ctx with blockDim 1 and threadIdx 0 there, and x as threadIdx.x itself
 * (blockIdx.x 0): the sums grid() makes, the only reads of those registers
 * such a kernel has, come out as they do in its block.  begin and end are
 * below 2^31 - lanes (the runtime runs wider rows block by block).
 */
static void emit_simd_xrange(Gen *g, KjIrFunction *fn, int lanes, LLVMValueRef *args)
{
    LLVMTypeRef chunk_type;
    LLVMValueRef chunk = kj_simd_define_rows_chunk(g, fn, lanes, &chunk_type);
    LLVMTypeRef ps[4] = {g->t_ptr, g->t_ptr, g->t_i64, g->t_i64};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__xrange", LLVMFunctionType(g->t_void, ps, 4, 0));
    int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
    args[n] = LLVMGetParam(e, 1);
    args[n + 2] = args[n + 3] = const_i32(g, 0);
    LLVMValueRef begin = LLVMBuildTrunc(g->b, LLVMGetParam(e, 2), g->t_i32, "");
    LLVMValueRef end = LLVMBuildTrunc(g->b, LLVMGetParam(e, 3), g->t_i32, "");
    call_chunks(g, chunk, chunk_type, args, n + 5, n + 1, n + 4, g->t_i32, begin, end, lanes);
    LLVMBuildRetVoid(g->b);
}

/* __range on SIMD lanes: [begin, end) in chunks of `lanes` elements. */
static void emit_simd_range(Gen *g, KjIrFunction *fn, int lanes, LLVMValueRef *args)
{
    LLVMTypeRef chunk_type;
    LLVMValueRef chunk = kj_simd_define_chunk(g, fn, lanes, &chunk_type);
    LLVMTypeRef ps[3] = {g->t_ptr, g->t_i64, g->t_i64};
    LLVMValueRef e = kj_codegen_add_entry(g, fn, "__range", LLVMFunctionType(g->t_void, ps, 3, 0));
    int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
    call_chunks(g, chunk, chunk_type, args, n + 2, n, n + 1, g->t_i64, LLVMGetParam(e, 1), LLVMGetParam(e, 2),
                lanes);
    LLVMBuildRetVoid(g->b);
}

/* The entry points of kjit_backend.h, each unpacking `void **args` into the
 * impl's arguments: __entry for plain and scalar functions; __thread, and
 * __block when the kernel has no barrier, for kernels; __range for
 * vectorized kernels.  `args` holds the impl's arguments. */
static void emit_entries_into(Gen *g, FnInfo *info, LLVMValueRef *args)
{
    KjIrFunction *fn = info->ir;
    LLVMTypeRef two_ptrs[2] = {g->t_ptr, g->t_ptr};
    switch (fn->kind) {
    case KJ_IR_FN_PLAIN:
    case KJ_IR_FN_SCALAR: {
        if (runs_on_thread(fn))
            return; /* a device function: the host never calls it (api_call.c) */
        LLVMValueRef e = kj_codegen_add_entry(g, fn, "__entry", LLVMFunctionType(g->t_void, two_ptrs, 2, 0));
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        n += check_args(g, fn, LLVMGetParam(e, 0), args + n);
        LLVMValueRef r = LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        if (fn->output_count > 1) /* of several outputs, the first (the host maps it over arrays) */
            r = LLVMBuildExtractValue(g->b, r, 0, "");
        if (fn->ret->kind != KJ_TYPE_VOID)
            LLVMBuildStore(g->b, to_mem(g, fn->ret, r), LLVMGetParam(e, 1));
        LLVMBuildRetVoid(g->b);
        return;
    }
    case KJ_IR_FN_KERNEL: {
        /* code for one block shape: the split form's __blocks, and __block
         * as a call of it for one block */
        if (g->options->block_dims[0] && kj_codegen_uses_split(g, fn)) {
            LLVMValueRef blocks = emit_split_blocks_entry(g, fn, args);
            emit_one_of_blocks_entry(g, fn, blocks);
            return;
        }
        LLVMTypeRef ft = LLVMFunctionType(g->t_void, two_ptrs, 2, 0);
        LLVMValueRef e = kj_codegen_add_entry(g, fn, "__thread", ft);
        LLVMValueRef ctx = LLVMGetParam(e, 1);
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n++] = ctx;
        for (int k = 0; k < 3; k++) {
            LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 0), const_i32(g, k)};
            args[n++] = LLVMBuildLoad2(g->b, g->t_i32, LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, 3, ""), "tid");
        }
        n += check_args(g, fn, LLVMGetParam(e, 0), args + n);
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        LLVMBuildRetVoid(g->b);
        if (kj_codegen_uses_split(g, fn)) {
            emit_split_block_entry(g, fn, args);
            return;
        }
        if (fn->uses_syncthreads)
            return;

        /* __block: every thread of the block in turn, z outermost.  The thread
         * indices go to the impl as values; ctx->thread_idx is not written. */
        int lanes = kj_simd_lanes(g, fn);
        if (lanes) {
            emit_simd_block(g, fn, lanes, args);
            /* rows of the grid (unchecked code: a check's record names the
             * failing thread's block) */
            if (fn->grid_rows.ok && !g->options->checks && !g->options->race)
                emit_simd_xrange(g, fn, lanes, args);
            return;
        }
        e = kj_codegen_add_entry(g, fn, "__block", ft);
        ctx = LLVMGetParam(e, 1);
        n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n] = ctx;
        /* checked mode: after ctx and threadIdx, the record and a state that
         * each thread starts at 0 */
        int checks = check_args(g, fn, LLVMGetParam(e, 0), args + n + 4);
        LLVMValueRef dims[3];
        for (int k = 0; k < 3; k++) {
            LLVMValueRef idx[3] = {const_i32(g, 0), const_i32(g, 2), const_i32(g, k)};
            dims[k] = LLVMBuildLoad2(g->b, g->t_i32, LLVMBuildInBoundsGEP2(g->b, g->t_thread_ctx, ctx, idx, 3, ""), "bdim");
        }
        /* Counters live in allocas (mem2reg makes them SSA): z outermost. */
        LLVMValueRef counters[3];
        for (int k = 0; k < 3; k++) {
            counters[k] = LLVMBuildAlloca(g->b, g->t_i32, "t");
        }
        LLVMBasicBlockRef conds[3], bodies[3], incs[3], exits[3];
        for (int level = 2; level >= 0; level--) {
            conds[level] = new_block(g, "thread.cond");
            bodies[level] = new_block(g, "thread.body");
            incs[level] = new_block(g, "thread.inc");
            exits[level] = new_block(g, "thread.exit");
            LLVMBuildStore(g->b, const_i32(g, 0), counters[level]);
            LLVMBuildBr(g->b, conds[level]);
            LLVMPositionBuilderAtEnd(g->b, conds[level]);
            LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
            LLVMBuildCondBr(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, t, dims[level], ""), bodies[level], exits[level]);
            LLVMPositionBuilderAtEnd(g->b, bodies[level]);
        }
        for (int k = 0; k < 3; k++)
            args[n + 1 + k] = LLVMBuildLoad2(g->b, g->t_i32, counters[k], "");
        if (checks)
            LLVMBuildStore(g->b, const_i32(g, 0), args[n + 5]);
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)(n + 4 + checks), "");
        for (int level = 0; level < 3; level++) {
            LLVMBuildBr(g->b, incs[level]);
            LLVMPositionBuilderAtEnd(g->b, incs[level]);
            LLVMValueRef t = LLVMBuildLoad2(g->b, g->t_i32, counters[level], "");
            LLVMBuildStore(g->b, LLVMBuildNSWAdd(g->b, t, const_i32(g, 1), ""), counters[level]);
            LLVMBuildBr(g->b, conds[level]);
            LLVMPositionBuilderAtEnd(g->b, exits[level]);
        }
        LLVMBuildRetVoid(g->b);
        return;
    }
    case KJ_IR_FN_VEC_KERNEL: {
        int lanes = kj_simd_lanes(g, fn);
        if (lanes) {
            emit_simd_range(g, fn, lanes, args);
            return;
        }
        LLVMTypeRef ps[3] = {g->t_ptr, g->t_i64, g->t_i64};
        LLVMValueRef e = kj_codegen_add_entry(g, fn, "__range", LLVMFunctionType(g->t_void, ps, 3, 0));
        int n = unpack_args(g, fn, LLVMGetParam(e, 0), args);
        args[n++] = LLVMGetParam(e, 1);
        args[n++] = LLVMGetParam(e, 2);
        n += check_args(g, fn, LLVMGetParam(e, 0), args + n);
        LLVMBuildCall2(g->b, info->impl_type, info->impl, args, (unsigned)n, "");
        LLVMBuildRetVoid(g->b);
        return;
    }
    }
}

static void cpu_emit_entries(Gen *g, FnInfo *info)
{
    KjIrFunction *fn = info->ir;
    LLVMValueRef *args = kj_xmalloc(sizeof *args * (size_t)kj_codegen_impl_arg_capacity(fn));
    emit_entries_into(g, info, args);
    free(args);
}

/* ============================================================ emission */

/* Lowered and optimised IR for the host, in `context`. */
static LLVMModuleRef build_host_module(LLVMContextRef context, LLVMTargetMachineRef tm, KjIrModule *module,
                                       KjIrFunction **roots, int root_count,
                                       const KjCodegenOptions *options, char **error)
{
    LLVMModuleRef mod = kj_codegen_module(&kj_target_cpu, context, tm, module, roots, root_count, options, error);
    if (!mod)
        return NULL;
    if (!kj_codegen_optimize(mod, tm, options->opt_level,
                             kj_codegen_lean_roots(roots, root_count, options->opt_level), error)) {
        LLVMDisposeModule(mod);
        return NULL;
    }
    return mod;
}

/* What `nm -g --defined-only` lists of the object: a function or variable
 * the module defines with a linkage the object file makes global or weak
 * (not a local, nor LLVM's own appending arrays, which emit no symbol). */
static bool defines_global_symbol(LLVMValueRef v)
{
    if (LLVMIsDeclaration(v))
        return false;
    switch (LLVMGetLinkage(v)) {
    case LLVMInternalLinkage: case LLVMPrivateLinkage: case LLVMAppendingLinkage:
        return false;
    default:
        return true;
    }
}

static void prefix_global(LLVMValueRef v, const char *prefix)
{
    size_t len = 0;
    const char *name = LLVMGetValueName2(v, &len);
    KjBuf b = {0};
    kj_buf_printf(&b, "%s%.*s", prefix, (int)len, name);
    LLVMSetValueName2(v, b.data, strlen(b.data));
    kj_buf_free(&b);
}

/* KjCodegenOptions.global_prefix: every global symbol the object will
 * define, renamed in the module before code generation. */
static void prefix_globals(LLVMModuleRef mod, const char *prefix)
{
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn))
        if (defines_global_symbol(fn))
            prefix_global(fn, prefix);
    for (LLVMValueRef gv = LLVMGetFirstGlobal(mod); gv; gv = LLVMGetNextGlobal(gv))
        if (defines_global_symbol(gv))
            prefix_global(gv, prefix);
    for (LLVMValueRef a = LLVMGetFirstGlobalAlias(mod); a; a = LLVMGetNextGlobalAlias(a))
        if (defines_global_symbol(a))
            prefix_global(a, prefix);
}

static char *cpu_emit(KjIrModule *module, KjIrFunction **roots, int root_count,
                      const KjCodegenOptions *options, KjEmitKind kind, size_t *size, char **error)
{
    if (kind == KJ_EMIT_PTX) {
        if (error)
            *error = kj_xstrdup("ptx is emitted for the cuda target only");
        return NULL;
    }
    LLVMTargetMachineRef tm = kj_cpu_machine(options->cpu_name, options->cpu_features, error);
    if (!tm)
        return NULL;
    LLVMContextRef context = LLVMContextCreate();
    LLVMModuleRef mod = build_host_module(context, tm, module, roots, root_count, options, error);
    if (mod && options->global_prefix)
        prefix_globals(mod, options->global_prefix);
    char *result = NULL;
    if (mod && kind == KJ_EMIT_LLVM) {
        char *text = LLVMPrintModuleToString(mod);
        result = kj_xstrdup(text);
        if (size)
            *size = strlen(result);
        LLVMDisposeMessage(text);
    } else if (mod) {
        LLVMMemoryBufferRef buffer = NULL;
        char *message = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, kind == KJ_EMIT_ASM ? LLVMAssemblyFile : LLVMObjectFile,
                                                &message, &buffer)) {
            if (error)
                *error = kj_xstrdup(message ? message : "LLVM could not emit code");
        } else {
            size_t n = LLVMGetBufferSize(buffer);
            result = kj_xmalloc(n + 1);
            memcpy(result, LLVMGetBufferStart(buffer), n);
            result[n] = '\0';
            if (size)
                *size = n;
            LLVMDisposeMemoryBuffer(buffer);
        }
        LLVMDisposeMessage(message);
    }
    if (mod)
        LLVMDisposeModule(mod);
    LLVMContextDispose(context);
    LLVMDisposeTargetMachine(tm);
    return result;
}

/* ============================================================ print */

/* snprintf into a buffer on the stack, then the runtime's print function
 * through the module's hook (kjit_backend.h). */
static void cpu_print(Gen *g, LLVMValueRef format, LLVMValueRef *values, int count)
{
    LLVMTypeRef buf_type = LLVMArrayType(g->t_i8, KJ_PRINT_LINE_BYTES);
    LLVMValueRef buf = kj_codegen_alloca_in_entry(g, buf_type, "print.line");
    LLVMTypeRef snprintf_params[] = {g->t_ptr, g->t_i64, g->t_ptr};
    LLVMTypeRef snprintf_type = LLVMFunctionType(g->t_i32, snprintf_params, 3, 1);
    LLVMValueRef snprintf_fn = kj_codegen_extern(g, "snprintf", snprintf_type);
    LLVMValueRef args[3 + 64];
    args[0] = buf;
    args[1] = const_i64(g, KJ_PRINT_LINE_BYTES);
    args[2] = format;
    for (int i = 0; i < count && i < 64; i++)
        args[3 + i] = values[i];
    LLVMValueRef n = LLVMBuildCall2(g->b, snprintf_type, snprintf_fn, args, (unsigned)(3 + count), "");
    LLVMValueRef len = LLVMBuildSExt(g->b, n, g->t_i64, "");
    LLVMValueRef cap = const_i64(g, KJ_PRINT_LINE_BYTES - 1);
    len = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSGT, len, cap, ""), cap, len, "");
    len = LLVMBuildSelect(g->b, LLVMBuildICmp(g->b, LLVMIntSLT, len, const_i64(g, 0), ""),
                          const_i64(g, 0), len, "");

    LLVMValueRef hook = LLVMGetNamedGlobal(g->mod, KJ_PRINT_HOOK_SYMBOL);
    if (!hook) {
        hook = LLVMAddGlobal(g->mod, g->t_ptr, KJ_PRINT_HOOK_SYMBOL);
        LLVMSetInitializer(hook, LLVMConstNull(g->t_ptr));
        LLVMSetAlignment(hook, 8);
    }
    LLVMValueRef fn = LLVMBuildLoad2(g->b, g->t_ptr, hook, "print.fn");
    /* Code loaded by something other than the runtime has no hook set: it
     * prints nothing rather than call address 0. */
    LLVMBasicBlockRef call_bb = new_block(g, "print.call");
    LLVMBasicBlockRef done_bb = new_block(g, "print.done");
    LLVMBuildCondBr(g->b, LLVMBuildIsNotNull(g->b, fn, ""), call_bb, done_bb);
    LLVMPositionBuilderAtEnd(g->b, call_bb);
    LLVMTypeRef print_params[] = {g->t_ptr, g->t_i64};
    LLVMTypeRef print_type = LLVMFunctionType(g->t_void, print_params, 2, 0);
    LLVMValueRef call_args[] = {buf, len};
    LLVMBuildCall2(g->b, print_type, fn, call_args, 2, "");
    LLVMBuildBr(g->b, done_bb);
    LLVMPositionBuilderAtEnd(g->b, done_bb);
}

/* ============================================================ the target */

/* KJIT_VERIFY, an impl whose shared memory is its own (impl_owns_shared):
 * before each return, whether the guard bytes after that memory still hold
 * theirs; when not, 1 into *ctx->shared_overrun, which the runtime reports
 * as it does a write past the memory it hands out ("internal error: the code
 * of kernel ... wrote past ..."). */
static void cpu_finish_impl(Gen *g, const KjIrFunction *fn)
{
    (void)fn;
    if (!g->shared_guard)
        return;
    /* the returns first: the checks add blocks */
    unsigned blocks = LLVMCountBasicBlocks(g->llfn);
    LLVMValueRef *rets = kj_xcalloc(blocks > 0 ? blocks : 1, sizeof *rets);
    int count = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(g->llfn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef last = LLVMGetBasicBlockTerminator(bb);
        if (last && LLVMGetInstructionOpcode(last) == LLVMRet)
            rets[count++] = last;
    }
    for (int i = 0; i < count; i++) {
        LLVMValueRef value = LLVMGetNumOperands(rets[i]) > 0 ? LLVMGetOperand(rets[i], 0) : NULL;
        LLVMPositionBuilderAtEnd(g->b, LLVMGetInstructionParent(rets[i]));
        LLVMInstructionEraseFromParent(rets[i]);
        LLVMValueRef intact = NULL;
        for (int k = 0; k < KJ_SHARED_GUARD_BYTES; k += 8) {
            LLVMValueRef off = const_i64(g, k);
            LLVMValueRef word = LLVMBuildLoad2(g->b, g->t_i64,
                                               LLVMBuildInBoundsGEP2(g->b, g->t_i8, g->shared_guard, &off, 1, ""), "");
            LLVMSetAlignment(word, 1);
            LLVMValueRef same = LLVMBuildICmp(g->b, LLVMIntEQ, word,
                                              LLVMConstInt(g->t_i64, 0x0101010101010101ull * KJ_SHARED_GUARD_BYTE, 0), "");
            intact = intact ? LLVMBuildAnd(g->b, intact, same, "") : same;
        }
        LLVMBasicBlockRef report = new_block(g, "guard.broken"), mark = new_block(g, "guard.mark"),
                          done = new_block(g, "guard.done");
        LLVMBuildCondBr(g->b, intact, done, report);
        LLVMPositionBuilderAtEnd(g->b, report);
        /* field 10: KjThreadCtx.shared_overrun */
        LLVMValueRef slot = LLVMBuildLoad2(g->b, g->t_ptr, ctx_field(g, g->thread_ctx, 10, -1), "");
        LLVMBuildCondBr(g->b, LLVMBuildIsNotNull(g->b, slot, ""), mark, done);
        LLVMPositionBuilderAtEnd(g->b, mark);
        LLVMValueRef store = LLVMBuildStore(g->b, const_i32(g, 1), slot);
        LLVMSetOrdering(store, LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(store, 4);
        LLVMBuildBr(g->b, done);
        LLVMPositionBuilderAtEnd(g->b, done);
        if (value)
            LLVMBuildRet(g->b, value);
        else
            LLVMBuildRetVoid(g->b);
    }
    free(rets);
}

const KjTarget kj_target_cpu = {
    .name = "cpu",
    .emit = cpu_emit,
    .emit_kinds = 1u << KJ_EMIT_LLVM | 1u << KJ_EMIT_ASM | 1u << KJ_EMIT_OBJ,
    .emit_words = "llvm, asm or obj",
    .setup_module = cpu_setup_module,
    .function_attrs = cpu_function_attrs,
    .finish_impl = cpu_finish_impl,
    .hidden_params = cpu_hidden_params,
    .bind_hidden_params = cpu_bind_hidden_params,
    .hidden_args = cpu_hidden_args,
    .emit_entries = cpu_emit_entries,
    .unroll_constant_loops = false, /* LLVM's own heuristics, tuned for the host */
    .thread_loops = true,
    .parfor_range = cpu_parfor_range,
    .read_sreg = cpu_read_sreg,
    .syncthreads = cpu_syncthreads,
    .shared_array = cpu_shared_array,
    .dynamic_shared = cpu_dynamic_shared,
    .exec = cpu_exec,
    .math_prefix = "",
    .math = cpu_math,
    .vector_math_call = cpu_vector_math_call,
    .float_to_int = NULL, /* llvm.fpto[su]i.sat: NaN gives 0 */
    .atomic_ordering = LLVMAtomicOrderingSequentiallyConsistent,
    .line_info_kind = LLVMDWARFEmissionLineTablesOnly,
    .cancel_hook = true,
    .cancel_stride = KJ_CANCEL_CPU_STRIDE,
    .print = cpu_print,
    .string_address_space = 0,
};
